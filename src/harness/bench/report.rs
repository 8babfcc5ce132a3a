//! What `memgym bench` prints: the table, and with `--json` one JSON object as the last line.

use serde_json::json;

use super::baseline::Baseline;
use super::ceiling::Ceiling;
use super::hist::Hist;
use super::load::Tally;
use crate::app::cli::BenchArgs;
use crate::embed::EmbedStats;

/// Embedding work during the run (in-process only).
#[derive(Debug)]
pub(super) struct EmbedDelta {
    pub(super) embedded: u64,
    pub(super) batches: u64,
    pub(super) cache_hits: u64,
}

impl EmbedDelta {
    pub(super) fn between(b: &EmbedStats, e: &EmbedStats) -> Self {
        EmbedDelta { embedded: e.embedded - b.embedded, batches: e.batches - b.batches, cache_hits: e.cache_hits - b.cache_hits }
    }
}

#[derive(Debug)]
pub(super) struct Rss {
    pub(super) start: Option<u64>,
    /// With every episode open after its calls, once the server sat idle for `load::SETTLE`.
    pub(super) open: Option<u64>,
    /// The same, read the moment the last call returned (transport buffers not yet returned).
    pub(super) open_at_once: Option<u64>,
    pub(super) peak: Option<u64>,
    pub(super) end: Option<u64>,
    pub(super) timeline: Vec<(f64, u64)>,
}

#[derive(Debug)]
pub(super) struct Cpu {
    /// CPU seconds of the probed process (the server, or the whole in-process bench).
    pub(super) measured: Option<f64>,
    /// CPU seconds of this (client) process.
    pub(super) client: Option<f64>,
    pub(super) spawned: bool,
}

fn mib(b: Option<u64>) -> Option<f64> {
    b.map(|b| b as f64 / (1024.0 * 1024.0))
}

fn fmt_mib(b: Option<u64>) -> String {
    mib(b).map_or_else(|| "n/a".into(), |m| format!("{m:.0} MiB"))
}

/// RSS drift of a sustained run: median of the last tenth of the timeline over the median of the second
/// tenth (the first tenth is warm-up). `None` for runs shorter than 20 samples.
fn drift(timeline: &[(f64, u64)]) -> Option<f64> {
    let n = timeline.len();
    if n < 20 {
        return None;
    }
    let median = |s: &[(f64, u64)]| {
        let mut v: Vec<u64> = s.iter().map(|x| x.1).collect();
        v.sort_unstable();
        v[v.len() / 2] as f64
    };
    let tenth = n / 10;
    Some(median(&timeline[n - tenth..]) / median(&timeline[tenth..2 * tenth]) - 1.0)
}

#[allow(clippy::too_many_arguments)]
pub(super) fn report(
    a: &BenchArgs,
    mode: (&str, &str),
    t: Tally,
    wall: f64,
    rss: &Rss,
    cpu: &Cpu,
    baseline: Option<Baseline>,
    ceiling: Option<Ceiling>,
    embedding: Option<EmbedDelta>,
    first: Option<(String, u32)>,
) {
    let tool_calls = t.tool_all.len();
    let eps = t.episodes as f64 / wall;
    let cps = tool_calls as f64 / wall;
    let in_flight = a.in_flight.map_or_else(|| format!("{} (every episode)", a.episodes), |n| n.to_string());
    let shape = match a.duration {
        Some(d) => format!("{} episodes kept running for {d} s", a.episodes),
        None => format!("{} episodes", a.episodes),
    };
    println!("memgym bench: {shape} x {} calls, groups of {}, RPCs in flight ≤ {in_flight}; {}", a.calls, a.group, mode.1);
    let index = if a.addr.is_some() {
        "set by the external server".to_string()
    } else {
        format!("--index {} (full-scan threshold {}), --search {}", a.env.index, a.env.full_scan_threshold, a.env.search)
    };
    match &first {
        Some((embedder, m0)) => println!("embedder {embedder}; {index}; first episode |M₀| = {m0}"),
        None => println!("embedder ?; {index}"),
    }
    println!("wall {wall:.3} s   episodes {}   episodes/s {eps:.1}   tool calls/s {cps:.0}", t.episodes);
    println!("{:<16} {:>9} {:>9} {:>9} {:>9} {:>9}", "rpc", "count", "p50 ms", "p90 ms", "p99 ms", "max ms");
    let mut rows: Vec<(&str, &Hist)> = t.lat.iter().map(|(k, v)| (*k, v)).collect();
    rows.push(("all tool calls", &t.tool_all));
    for (k, h) in &rows {
        println!(
            "{:<16} {:>9} {:>9.3} {:>9.3} {:>9.3} {:>9.3}",
            k,
            h.len(),
            h.pct_ms(50.0),
            h.pct_ms(90.0),
            h.pct_ms(99.0),
            h.pct_ms(100.0)
        );
    }
    println!(
        "RSS: start {}, all episodes open {} ({} the moment the last call returned), peak {}, end {}",
        fmt_mib(rss.start),
        fmt_mib(rss.open),
        fmt_mib(rss.open_at_once),
        fmt_mib(rss.peak),
        fmt_mib(rss.end)
    );
    let d = drift(&rss.timeline);
    if a.duration.is_some() && !rss.timeline.is_empty() {
        let step = (rss.timeline.len() / 10).max(1);
        let points: Vec<String> =
            rss.timeline.iter().step_by(step).map(|(s, b)| format!("{s:.0}s {:.0}", *b as f64 / (1024.0 * 1024.0))).collect();
        println!("RSS over time (MiB): {}", points.join(", "));
        if let Some(d) = d {
            println!("RSS drift (last tenth vs second tenth): {:+.1}%", d * 100.0);
        }
    }
    let per_call_us = |s: Option<f64>| s.filter(|_| !t.tool_all.is_empty()).map(|s| s * 1e6 / tool_calls as f64);
    let cpu_per_call = per_call_us(cpu.measured);
    let client_per_call = per_call_us(cpu.client);
    match (cpu.spawned, cpu_per_call) {
        (true, Some(s)) => println!("CPU per tool call: server {s:.1} µs, client {:.1} µs", client_per_call.unwrap_or(f64::NAN)),
        (false, Some(s)) => println!("CPU per tool call (client + server, one process): {s:.1} µs"),
        (_, None) => println!("CPU per tool call: n/a"),
    }
    let ceiling_keys = ceiling_report(ceiling.as_ref(), cps, (cpu_per_call, client_per_call), cpu.spawned);
    let ratio = baseline.as_ref().map(|b| cps / b.per_s);
    if let Some(b) = &baseline {
        println!(
            "embedder alone ({}, batch 32, {} threads, no cache): {:.0} texts/s; tool calls/s ÷ that = {:.2}",
            b.name,
            b.threads,
            b.per_s,
            ratio.unwrap_or(f64::NAN)
        );
    }
    let embedded_per_s = embedding.as_ref().map(|e| e.embedded as f64 / wall);
    if let Some(e) = &embedding {
        let mean_batch = if e.batches == 0 { 0.0 } else { e.embedded as f64 / e.batches as f64 };
        let busy =
            baseline.as_ref().map_or_else(String::new, |b| format!(" = {:.2} of the embedder alone", e.embedded as f64 / wall / b.per_s));
        println!(
            "embedding during the run: {} texts in {} batches (mean {mean_batch:.1}), {} cache hits; {:.0} texts/s{busy}",
            e.embedded,
            e.batches,
            e.cache_hits,
            e.embedded as f64 / wall
        );
    }
    let mean_reward = if t.scored == 0 { 0.0 } else { t.reward_sum / t.scored as f64 };
    println!("scored {} episodes, mean reward {mean_reward:.4}", t.scored);
    if !t.refused.is_empty() {
        println!("refused calls (expected: the random policy asks for impossible edits): {:?}", t.refused);
    }
    if !t.failures.is_empty() {
        println!("FAILURES: {:?}", t.failures);
    }
    if a.json {
        let lat: serde_json::Map<String, serde_json::Value> = rows
            .iter()
            .map(|(k, h)| {
                let v = json!({"count": h.len(), "p50_ms": h.pct_ms(50.0), "p90_ms": h.pct_ms(90.0), "p99_ms": h.pct_ms(99.0), "max_ms": h.pct_ms(100.0)});
                (k.to_string(), v)
            })
            .collect();
        let j = json!({
            "mode": mode.0,
            "episodes": a.episodes, "calls_per_episode": a.calls, "group": a.group, "in_flight": a.in_flight,
            "duration_s": a.duration, "wall_s": wall, "episodes_run": t.episodes,
            "episodes_per_s": eps, "tool_calls_per_s": cps,
            "tool_p50_ms": t.tool_all.pct_ms(50.0), "tool_p90_ms": t.tool_all.pct_ms(90.0),
            "tool_p99_ms": t.tool_all.pct_ms(99.0), "tool_max_ms": t.tool_all.pct_ms(100.0),
            "create_p99_ms": t.lat.get("create").map_or(0.0, |h| h.pct_ms(99.0)),
            "score_p99_ms": t.lat.get("score").map_or(0.0, |h| h.pct_ms(99.0)),
            "latency": lat,
            "rss_start_mib": mib(rss.start), "rss_open_mib": mib(rss.open), "rss_open_at_once_mib": mib(rss.open_at_once), "rss_peak_mib": mib(rss.peak), "rss_end_mib": mib(rss.end),
            "rss_drift": d,
            "rss_timeline_mib": rss.timeline.iter().map(|(s, b)| json!([s, *b as f64 / (1024.0 * 1024.0)])).collect::<Vec<_>>(),
            "cpu_us_per_call": cpu_per_call, "client_cpu_us_per_call": if cpu.spawned { client_per_call } else { None },
            "embedder": first.as_ref().map(|f| f.0.clone()), "index": index,
            "embedder_alone_per_s": baseline.as_ref().map(|b| b.per_s), "calls_per_s_over_embedder_alone": ratio,
            "embedded_during_run": embedding.as_ref().map(|e| e.embedded), "embedded_per_s": embedded_per_s, "embed_batches": embedding.as_ref().map(|e| e.batches),
            "embed_cache_hits": embedding.as_ref().map(|e| e.cache_hits),
            "failures": t.failures.values().sum::<u64>(), "refused": t.refused.values().sum::<u64>(),
            "mean_reward": mean_reward,
        });
        let mut j = j;
        if let (Some(o), serde_json::Value::Object(keys)) = (j.as_object_mut(), ceiling_keys) {
            o.extend(keys);
        }
        println!("{j}");
    }
}

/// Prints the gRPC ceiling lines (when it was measured) and returns their JSON keys (null when not), as
/// one object. `per_call` is the CPU per tool call of the probed process and of this one (the client,
/// when `spawned`).
fn ceiling_report(c: Option<&Ceiling>, cps: f64, per_call: (Option<f64>, Option<f64>), spawned: bool) -> serde_json::Value {
    let (cpu_per_call, client_per_call) = per_call;
    let per_s = c.map(Ceiling::per_s);
    let share = per_s.filter(|p| *p > 0.0).map(|p| cps / p);
    let (check_cpu, check_client_cpu) = c.map_or((None, None), Ceiling::cpu_us_per_check);
    let own = cpu_per_call.zip(check_cpu).map(|(call, check)| call - check);
    if let Some(c) = c {
        let failed: u64 = c.failures.values().sum();
        let failed = if failed == 0 { String::new() } else { format!("; {failed} failed: {:?}", c.failures) };
        println!(
            "grpc ceiling: {} health checks/s (p50 {:.3} ms, p99 {:.3} ms; {:.1} s, same connections and in-flight cap{failed}); tool calls at {:.0} % of it",
            thousands(c.per_s()),
            c.lat.pct_ms(50.0),
            c.lat.pct_ms(99.0),
            c.wall,
            share.unwrap_or(f64::NAN) * 100.0
        );
        let own_share = own.zip(cpu_per_call).map_or(f64::NAN, |(o, call)| o / call * 100.0);
        match (spawned, check_cpu) {
            (true, Some(h)) => println!(
                "CPU per health check (≈ transport): server {h:.1} µs, client {:.1} µs; memgym's own work ≈ server {:.1} µs per tool call ({own_share:.0} %)",
                check_client_cpu.unwrap_or(f64::NAN),
                own.unwrap_or(f64::NAN)
            ),
            (false, Some(h)) => println!(
                "CPU per health check (≈ transport, client + server): {h:.1} µs; memgym's own work ≈ {:.1} µs per tool call ({own_share:.0} %)",
                own.unwrap_or(f64::NAN)
            ),
            (_, None) => println!("CPU per health check: n/a"),
        }
    }
    let bound = share_bound(check_cpu, check_client_cpu, client_per_call.filter(|_| spawned));
    if let Some(b) = bound {
        println!(
            "the client's own CPU bounds the share: a server that spent a health check's CPU per tool call would reach ≈ {:.0} % here",
            b * 100.0
        );
    }
    json!({
        "grpc_ceiling_per_s": per_s,
        "grpc_ceiling_wall_s": c.map(|c| c.wall),
        "grpc_ceiling_checks": c.map(|c| c.checks),
        "grpc_ceiling_failures": c.map(|c| c.failures.values().sum::<u64>()),
        "health_check_p50_ms": c.map(|c| c.lat.pct_ms(50.0)),
        "health_check_p99_ms": c.map(|c| c.lat.pct_ms(99.0)),
        "tool_calls_share_of_grpc_ceiling": share,
        "cpu_us_per_health_check": check_cpu,
        "client_cpu_us_per_health_check": if spawned { check_client_cpu } else { None },
        "cpu_us_per_call_own_work": own,
        "tool_calls_share_bound": bound,
    })
}

/// The share of the gRPC ceiling tool calls would reach if the server spent only a health check's CPU on
/// each (`check` server, `check_client` client µs), with the client spending what it measured per tool
/// call (`client_call` µs). Client and server share the machine's cores, and both loads keep them busy, so
/// each rate is the cores' time over the CPU one call costs both sides: the ratio of those costs.
fn share_bound(check: Option<f64>, check_client: Option<f64>, client_call: Option<f64>) -> Option<f64> {
    let (check, check_client, client_call) = (check?, check_client?, client_call?);
    let bound = (check + check_client) / (check + client_call);
    bound.is_finite().then_some(bound)
}

/// A count with thousands separators: 61200.4 → "61,200".
fn thousands(x: f64) -> String {
    if !x.is_finite() {
        return format!("{x}");
    }
    let digits = format!("{:.0}", x.abs());
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    if x < -0.5 {
        out.insert(0, '-');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drift_compares_the_end_with_the_warm_start() {
        let flat: Vec<(f64, u64)> = (0..40).map(|i| (i as f64, 100)).collect();
        assert_eq!(drift(&flat), Some(0.0));
        let growing: Vec<(f64, u64)> = (0..40).map(|i| (i as f64, 100 + i)).collect();
        assert!(drift(&growing).is_some_and(|d| d > 0.2));
        assert_eq!(drift(&flat[..10]), None);
    }

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(61_200.4), "61,200");
        assert_eq!(thousands(999.6), "1,000");
        assert_eq!(thousands(12.0), "12");
        assert_eq!(thousands(1_234_567.0), "1,234,567");
        assert_eq!(thousands(-4_321.0), "-4,321");
        assert_eq!(thousands(f64::NAN), "NaN");
    }

    #[test]
    fn the_share_bound_is_the_ratio_of_a_health_checks_cost_to_a_lean_servers_call() {
        // A health check: 12 µs on each side; a tool call costs the client 36 µs. A server spending 12 µs
        // per call: 24 µs against 48 µs of the cores per call, so half the ceiling at most.
        assert_eq!(share_bound(Some(12.0), Some(12.0), Some(36.0)), Some(0.5));
        // A client as cheap per call as per health check leaves the whole ceiling reachable.
        assert_eq!(share_bound(Some(12.0), Some(12.0), Some(12.0)), Some(1.0));
        // In-process runs measure no client apart, and a skipped ceiling measures no health check.
        assert_eq!(share_bound(Some(12.0), None, Some(36.0)), None);
        assert_eq!(share_bound(None, Some(12.0), Some(36.0)), None);
        assert_eq!(share_bound(Some(0.0), Some(0.0), Some(0.0)), None);
    }
}
