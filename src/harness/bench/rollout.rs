//! `memgym bench rollout`: the rollout harness's own overhead, so that a GPU-served policy never waits on it.
//!
//! An instant policy endpoint (an HTTP server on loopback in this process that answers every turn at once
//! with scripted `tool_calls`) plays `--rollouts` rollouts through `memgym rollout`'s own code
//! ([`crate::harness::rollout::play_all`]: request bodies, the parser, the in-process environment, trajectory lines),
//! `--concurrency` at a time. Each rollout makes [`CALLS_PER_ROLLOUT`] tool calls over four turns: a search
//! and a sample, a create and a search, a delete of an invented id (refused) and a search, then a reply
//! without calls. Reported: tool calls per second, wall time per call, and the process's CPU time per call
//! (harness, environment and the instant endpoint together: an upper bound of the harness's cost), with the
//! policy round trip's p50/p99 as the harness sees it. Goal on this machine: ≥ 1,000 tool calls/s and
//! ≤ 1 ms of harness time per call at 64 concurrent rollouts.

use std::net::SocketAddr;
use std::time::Instant;

use anyhow::Context;
use axum::routing::post;
use axum::Router;
use clap::Parser;
use serde_json::{json, Value};

use super::probe::Probe;
use crate::app::cli::{Cli, Command, RolloutBenchArgs};
use crate::harness::rollout::env::Env;

/// Tool calls each scripted rollout makes.
pub const CALLS_PER_ROLLOUT: usize = 6;

/// The instant policy's reply to a request: by the number of assistant messages so far.
fn reply(body: &Value) -> Value {
    let turn = body["messages"].as_array().map_or(0, |m| m.iter().filter(|m| m["role"] == "assistant").count());
    let call = |id: &str, name: &str, args: Value| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}});
    let calls = match turn {
        0 => vec![call("a", "search_memory", json!({"query": "when did she go", "top_k": 5})), call("b", "sample_memory", json!({"k": 3}))],
        1 => vec![
            call("c", "manage_memory", json!({"operation": "create", "content": "She went on 7 May 2023."})),
            call("d", "search_memory", json!({"query": "7 May 2023"})),
        ],
        2 => vec![call("e", "delete_memory", json!({"memory_id": "m9999"})), call("f", "search_memory", json!({"query": "support group"}))],
        _ => Vec::new(),
    };
    let mut message = json!({"role": "assistant", "content": if calls.is_empty() { "Done." } else { "" }});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    json!({"id": "bench", "object": "chat.completion", "created": 0, "model": "instant",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
}

/// Starts the instant endpoint on loopback; returns its base URL.
async fn instant_endpoint() -> anyhow::Result<String> {
    let app =
        Router::new().route("/v1/chat/completions", post(|axum::Json(body): axum::Json<Value>| async move { axum::Json(reply(&body)) }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr: SocketAddr = listener.local_addr()?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(format!("http://{addr}/v1"))
}

/// Runs the benchmark and prints its table (and one JSON line with `--json`).
pub async fn run(a: RolloutBenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(a.rollouts > 0 && a.concurrency > 0 && a.group > 0, "--rollouts, --concurrency and --group must be positive");
    let url = instant_endpoint().await?;
    let dir = tempfile_dir()?;
    let out = dir.join("rollouts");
    let questions_needed = a.rollouts.div_ceil(a.group as usize);
    let group = a.group.to_string();
    let limit = questions_needed.to_string();
    let out_s = out.display().to_string();
    let argv = [
        "memgym",
        "rollout",
        "--policy-base-url",
        &url,
        "--policy-model",
        "instant",
        "--out",
        &out_s,
        "--split",
        "all",
        "--limit",
        &limit,
        "--group",
        &group,
        "--max-turns",
        "4",
    ];
    let Command::Rollout(mut args) = Cli::try_parse_from(argv)?.command else { anyhow::bail!("not a rollout command") };
    args.env = a.env.clone();
    let env = tokio::task::block_in_place(|| crate::app::config::build_environment(&args.env))?;
    let ds = env.dataset().clone();
    let (plan, questions) = crate::harness::rollout::plan(&args, &ds)?;
    let env = Env::local(env);
    let probe = Probe::this_process();
    let cpu0 = probe.cpu_secs();
    let started = Instant::now();
    let played = crate::harness::rollout::play_all(&plan, &questions, &env, &out, a.concurrency).await?;
    let wall = started.elapsed().as_secs_f64();
    let cpu = probe.cpu_secs().zip(cpu0).map(|(b, a)| b - a);
    let ts = crate::harness::rollout::record::read(&out.join("trajectories.jsonl"))?;
    let calls: usize = ts.iter().map(|t| t.calls().count()).sum();
    let failed = ts.iter().filter(|t| t.reward().is_none()).count();
    let mut latencies: Vec<f64> = ts.iter().flat_map(|t| t.turns.iter().map(|u| u.latency_ms)).collect();
    latencies.sort_by(f64::total_cmp);
    let pct = |q: f64| latencies.get(((latencies.len().max(1) - 1) as f64 * q).round() as usize).copied().unwrap_or(0.0);
    let env_ms: f64 = ts.iter().flat_map(|t| t.calls().map(|c| c.env_ms)).sum();
    let _ = std::fs::remove_dir_all(&dir);
    let per_s = calls as f64 / wall;
    let cpu_us = cpu.map(|c| c * 1e6 / calls.max(1) as f64);
    println!("memgym bench rollout: {played} rollouts ({failed} failed), {calls} tool calls, concurrency {}", a.concurrency);
    println!("| measure | value | goal |\n|---|---:|---:|");
    println!("| tool calls/s | {per_s:.0} | ≥ 1,000 |");
    println!("| wall time per call | {:.1} µs | |", wall * 1e6 / calls.max(1) as f64);
    println!(
        "| CPU per call (harness + environment + instant endpoint) | {} | ≤ 1 ms |",
        cpu_us.map_or("n/a".into(), |u| format!("{u:.0} µs"))
    );
    println!("| environment time per call (latency) | {:.0} µs | |", env_ms * 1e3 / calls.max(1) as f64);
    println!("| policy round trip p50 / p99 | {:.2} / {:.2} ms | |", pct(0.5), pct(0.99));
    if a.json {
        println!(
            "{}",
            json!({"rollouts": played, "failed": failed, "calls": calls, "concurrency": a.concurrency, "calls_per_s": per_s,
                "wall_us_per_call": wall * 1e6 / calls.max(1) as f64, "cpu_us_per_call": cpu_us,
                "env_us_per_call": env_ms * 1e3 / calls.max(1) as f64, "policy_p50_ms": pct(0.5), "policy_p99_ms": pct(0.99)})
        );
    }
    anyhow::ensure!(failed == 0, "{failed} rollouts failed");
    anyhow::ensure!(calls == played * CALLS_PER_ROLLOUT, "expected {CALLS_PER_ROLLOUT} calls per rollout, got {calls} in {played}");
    Ok(())
}

/// A fresh directory under the system's temporary directory.
fn tempfile_dir() -> anyhow::Result<std::path::PathBuf> {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!("memgym-bench-rollout-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir)
}
