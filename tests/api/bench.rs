//! `memgym bench` end to end: the real binary drives a real server (in-process, and as a second process)
//! and its JSON report adds up. Speed is never asserted here — only that the load ran without failures
//! and every reading the report promises is there.

use std::process::Command;

use serde_json::Value;

fn bench(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_memgym"))
        .arg("bench")
        .args(args)
        .arg("--json")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "memgym bench failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let last = stdout.lines().last().expect("a report");
    serde_json::from_str(last).unwrap_or_else(|e| panic!("last line is the JSON report ({e}): {last}"))
}

fn num(j: &Value, key: &str) -> f64 {
    j[key].as_f64().unwrap_or_else(|| panic!("{key} is a number in {j}"))
}

#[test]
fn in_process_run_reports_every_call_and_the_readings() {
    let j = bench(&["--episodes", "16", "--calls", "10", "--group", "4", "--embedder-baseline-secs", "0.2"]);
    assert_eq!(j["mode"], "in-process");
    assert_eq!((num(&j, "failures"), num(&j, "episodes_run")), (0.0, 16.0));
    assert_eq!(j["latency"]["all tool calls"]["count"], 160);
    assert_eq!((j["latency"]["create"]["count"].as_u64(), j["latency"]["close"]["count"].as_u64()), (Some(16), Some(16)));
    let tool_count: u64 = ["search_memory", "sample_memory", "manage_memory", "delete_memory", "merge_memory", "split_memory"]
        .iter()
        .filter_map(|t| j["latency"][t]["count"].as_u64())
        .sum();
    assert_eq!(tool_count, 160, "the per-tool rows add up to all tool calls");
    let l = &j["latency"]["all tool calls"];
    assert!(l["p50_ms"].as_f64() <= l["p99_ms"].as_f64() && l["p99_ms"].as_f64() <= l["max_ms"].as_f64());
    assert!(num(&j, "tool_calls_per_s") > 0.0 && num(&j, "mean_reward").is_finite());
    assert!(j["embedder"].as_str().is_some_and(|e| e.starts_with("hash-ngram")), "{}", j["embedder"]);
    assert!(num(&j, "embedder_alone_per_s") > 0.0);
    if std::path::Path::new("/proc/self/status").exists() {
        let (start, open, peak) = (num(&j, "rss_start_mib"), num(&j, "rss_open_mib"), num(&j, "rss_peak_mib"));
        assert!(start > 1.0 && open > 1.0 && peak >= open.max(start));
        assert!(num(&j, "cpu_us_per_call") > 0.0);
    }
}

#[test]
fn two_process_sustained_run_reads_the_server_process() {
    let j = bench(&[
        "--spawn-server",
        "--episodes",
        "8",
        "--calls",
        "5",
        "--duration",
        "2",
        "--in-flight",
        "4",
        "--connections",
        "2",
        "--embedder-baseline-secs",
        "0",
    ]);
    assert_eq!(j["mode"], "two-process");
    assert_eq!(num(&j, "failures"), 0.0);
    let episodes = num(&j, "episodes_run");
    assert!(episodes >= 8.0, "the 8 slots each ran at least one episode");
    assert_eq!(num(&j["latency"]["all tool calls"], "count"), episodes * 5.0);
    assert!(j["embedder_alone_per_s"].is_null(), "skipped with --embedder-baseline-secs 0");
    if std::path::Path::new("/proc/self/status").exists() {
        assert!(!j["rss_timeline_mib"].as_array().unwrap().is_empty());
        assert!(num(&j, "rss_start_mib") > 1.0 && num(&j, "cpu_us_per_call") > 0.0 && num(&j, "client_cpu_us_per_call") > 0.0);
    }
}
