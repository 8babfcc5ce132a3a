//! `memgym bench --addr PROXY --compare-addr DIRECT`: the episode load through a proxy in front of
//! replicas against the same load on one replica reached directly, in one run. The two alternate for
//! [`ROUNDS`] rounds (direct, proxy, direct, …) so that drift of a noisy machine falls on both, and the
//! medians are compared. Each round is a fresh set of `--episodes` episodes with the same flags; the ids
//! the servers return are used, and every episode call names its episode in the `memgym-episode` header,
//! so the proxy can route it to the replica that holds it.

use std::net::SocketAddr;
use std::time::Instant;

use serde_json::json;

use super::load::{self, Shared};
use super::target::{self, Target};
use crate::app::cli::BenchArgs;

/// Rounds per side.
pub(super) const ROUNDS: usize = 3;

/// One round's figures.
#[derive(Debug, Clone, Copy)]
struct Round {
    episodes_per_s: f64,
    calls_per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    failed: u64,
}

/// Runs both sides and prints the comparison.
pub(super) async fn run(a: &BenchArgs, through: SocketAddr, direct: SocketAddr) -> anyhow::Result<()> {
    let mut sides: [(&str, SocketAddr, Vec<Round>); 2] = [("direct", direct, Vec::new()), ("proxy", through, Vec::new())];
    for round in 0..ROUNDS {
        for (name, addr, rounds) in &mut sides {
            let r = once(a, *addr).await?;
            eprintln!(
                "round {}/{ROUNDS} {name}: {:.0} tool calls/s, p50 {:.2} ms, p99 {:.2} ms, {} failed",
                round + 1,
                r.calls_per_s,
                r.p50_ms,
                r.p99_ms,
                r.failed
            );
            rounds.push(r);
        }
    }
    let median = |rs: &[Round], f: fn(&Round) -> f64| {
        let mut v: Vec<f64> = rs.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let summary: Vec<_> = sides
        .iter()
        .map(|(name, addr, rs)| {
            let failed: u64 = rs.iter().map(|r| r.failed).sum();
            (
                *name,
                *addr,
                median(rs, |r| r.episodes_per_s),
                median(rs, |r| r.calls_per_s),
                median(rs, |r| r.p50_ms),
                median(rs, |r| r.p99_ms),
                failed,
            )
        })
        .collect();
    let ratio = summary[1].3 / summary[0].3;
    println!(
        "through the proxy against one replica direct: {} episodes × {} calls, {ROUNDS} alternating rounds each, medians",
        a.episodes, a.calls
    );
    println!("| side | address | episodes/s | tool calls/s | tool p50 ms | tool p99 ms | failed calls |");
    println!("|---|---|---|---|---|---|---|");
    for (name, addr, eps, cps, p50, p99, failed) in &summary {
        println!("| {name} | {addr} | {eps:.1} | {cps:.0} | {p50:.2} | {p99:.2} | {failed} |");
    }
    println!("proxy ÷ direct, tool calls/s: {ratio:.2}");
    if a.json {
        let sides: Vec<_> = summary
            .iter()
            .map(|(name, addr, eps, cps, p50, p99, failed)| {
                json!({"side": name, "addr": addr.to_string(), "episodes_per_s": eps, "tool_calls_per_s": cps,
                       "tool_p50_ms": p50, "tool_p99_ms": p99, "failed": failed})
            })
            .collect();
        println!(
            "{}",
            json!({"mode": "compare", "rounds": ROUNDS, "episodes": a.episodes, "calls": a.calls, "sides": sides, "proxy_over_direct": ratio})
        );
    }
    Ok(())
}

/// One round against `addr`: the fixed episode load, timed.
async fn once(a: &BenchArgs, addr: SocketAddr) -> anyhow::Result<Round> {
    let channels = target::connect_all(addr, &mut Target::External, a.connections).await?;
    let questions = target::load_questions(&channels[0]).await?;
    let shared = Shared::new(a, channels, None);
    let started = Instant::now();
    load::drive(a, &questions, &shared).await?;
    let wall = started.elapsed().as_secs_f64();
    let t = std::mem::take(&mut *shared.tally.lock());
    Ok(Round {
        episodes_per_s: t.episodes as f64 / wall,
        calls_per_s: t.tool_all.len() as f64 / wall,
        p50_ms: t.tool_all.pct_ms(50.0),
        p99_ms: t.tool_all.pct_ms(99.0),
        failed: t.failures.values().sum(),
    })
}
