//! `memgym bench` end to end: the real binary drives a real server (in-process, and as a second process)
//! and its JSON report adds up. Speed is never asserted here — only that the load ran without failures
//! and every reading the report promises is there.

use std::process::Command;

use serde_json::Value;

fn bench(args: &[&str]) -> Value {
    bench_output(args).1
}

/// `memgym bench banks` at small sizes: a short measurement each (the sizes are the caller's).
pub(crate) const SMALL_BANKS: &[&str] = &["banks", "--compress-sizes", "300", "--secs", "0.2", "--recall-queries", "10", "--clients", "2"];

/// The table (stdout) and the JSON report of one run.
pub(crate) fn bench_output(args: &[&str]) -> (String, Value) {
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
    let j = serde_json::from_str(last).unwrap_or_else(|e| panic!("last line is the JSON report ({e}): {last}"));
    (stdout.into_owned(), j)
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
        // Read twice with every episode open: the moment the last call returned, and after the idle settle.
        let at_once = num(&j, "rss_open_at_once_mib");
        assert!(at_once > 1.0 && peak >= at_once);
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

#[test]
fn grpc_ceiling_is_measured_before_the_load_and_the_share_reported() {
    let args = ["--episodes", "8", "--calls", "5", "--group", "4", "--in-flight", "4", "--connections", "2"];
    let (table, j) = bench_output(&[&args[..], &["--embedder-baseline-secs", "0", "--grpc-ceiling-secs", "0.3"]].concat());
    assert_eq!((num(&j, "failures"), num(&j, "grpc_ceiling_failures")), (0.0, 0.0));
    let ceiling = num(&j, "grpc_ceiling_per_s");
    assert!(ceiling.is_finite() && ceiling > 0.0, "{ceiling}");
    assert!(num(&j, "grpc_ceiling_checks") >= 1.0 && num(&j, "grpc_ceiling_wall_s") > 0.0);
    let h = (num(&j, "health_check_p50_ms"), num(&j, "health_check_p99_ms"));
    assert!(h.0 > 0.0 && h.0 <= h.1, "{h:?}");
    let share = num(&j, "tool_calls_share_of_grpc_ceiling");
    assert!(share.is_finite() && share > 0.0, "{share}");
    assert!((share * ceiling - num(&j, "tool_calls_per_s")).abs() <= 1e-6 * num(&j, "tool_calls_per_s"), "share = tool calls/s ÷ ceiling");
    assert!(table.contains("grpc ceiling: ") && table.contains("health checks/s") && table.contains("% of it"), "{table}");
    if std::path::Path::new("/proc/self/status").exists() {
        assert!(num(&j, "cpu_us_per_health_check") > 0.0);
        let (own, call, check) = (num(&j, "cpu_us_per_call_own_work"), num(&j, "cpu_us_per_call"), num(&j, "cpu_us_per_health_check"));
        assert!((own - (call - check)).abs() < 1e-6 * call, "own work = CPU per tool call − CPU per health check");
        assert!(table.contains("CPU per health check (≈ transport, client + server): "), "{table}");
        assert!(j["client_cpu_us_per_health_check"].is_null(), "in-process: one process, no separate client");
    }

    let (table, off) = bench_output(&[&args[..], &["--embedder-baseline-secs", "0", "--grpc-ceiling-secs", "0"]].concat());
    for key in ["grpc_ceiling_per_s", "tool_calls_share_of_grpc_ceiling", "cpu_us_per_health_check", "cpu_us_per_call_own_work"] {
        assert!(off[key].is_null(), "{key} is null with --grpc-ceiling-secs 0");
    }
    assert!(!table.contains("grpc ceiling"), "{table}");
}

#[test]
fn protocols_run_the_same_episodes_over_every_face() {
    let j = bench(&["protocols", "--episodes", "6", "--calls", "4"]);
    let rows = j["rows"].as_array().expect("rows");
    let names: Vec<&str> = rows.iter().map(|r| r["protocol"].as_str().unwrap()).collect();
    assert_eq!(names, ["grpc", "openenv-ws", "mcp-2026-07-28", "mcp-2025-11-25", "mcp-episode-url", "nemo-gym", "ors"]);
    for r in rows {
        assert_eq!((r["tool_calls"].as_u64(), r["failed_episodes"].as_u64()), (Some(24), Some(0)), "{r}");
        assert!(r["calls_per_sec"].as_f64().is_some_and(|c| c > 0.0) && r["p50_ms"].as_f64() <= r["p99_ms"].as_f64(), "{r}");
    }
    assert_eq!(rows[0]["ratio_to_grpc"].as_f64(), Some(1.0));
}

#[test]
fn rollout_harness_plays_every_rollout_against_the_instant_endpoint() {
    let (table, j) = bench_output(&["rollout", "--rollouts", "24", "--concurrency", "8", "--group", "4"]);
    assert!(table.contains("tool calls/s") && table.contains("CPU per call"), "{table}");
    assert_eq!((num(&j, "rollouts"), num(&j, "failed"), num(&j, "calls")), (24.0, 0.0, 144.0), "six calls per rollout");
    for key in ["calls_per_s", "wall_us_per_call", "cpu_us_per_call", "env_us_per_call", "policy_p50_ms", "policy_p99_ms"] {
        assert!(num(&j, key) > 0.0, "{key} in {j}");
    }
}

/// A search beam out of range is refused before any bank is built, naming the flag.
#[test]
fn banks_bench_refuses_a_search_beam_out_of_range() {
    let out = Command::new(env!("CARGO_BIN_EXE_memgym"))
        .args(["bench", "banks", "--sizes", "300", "--ef-sweep", "64,0"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("--ef-sweep") && stderr.contains("0 is not in 1..=4096"), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("Retrieve over gRPC"), "nothing was measured");
}

/// A largest bank under the full-scan threshold has no graph and saves no index: the bench says so instead of
/// waiting an hour for one.
#[test]
fn banks_bench_without_a_graph_skips_the_opens() {
    let (table, j) = bench_output(&[SMALL_BANKS, &["--sizes", "300", "--banks-full-scan-threshold", "100000"]].concat());
    assert_eq!(j["retrieve"][0]["path"], "exact", "{table}");
    assert!(j["retrieve"][0]["recall_at_10"].is_null(), "{table}");
    assert!(table.contains("opens not measured") && j["open"].is_null(), "{table}");
}

/// `memgym bench banks` at small sizes (the test command's run of it; the full one is in the Banks
/// chapter): every table is there, and the open of the largest bank by a fresh server went through the
/// saved index the first server wrote, then, with it removed, through the exact scan while the graph
/// builds; each beam of `--ef-sweep` is measured on a fresh server over that saved index.
#[test]
fn banks_bench_at_small_sizes_reports_every_table_and_both_opens() {
    let (table, j) = bench_output(&[SMALL_BANKS, &["--sizes", "100,3000", "--ef-sweep", "16,64"]].concat());
    assert!(table.contains("Retrieve over gRPC") && table.contains("ApplyOperations") && table.contains("Compression"), "{table}");
    let rows = j["retrieve"].as_array().expect("retrieve rows");
    assert_eq!(rows.iter().map(|r| r["size"].as_u64()).collect::<Vec<_>>(), vec![Some(100), Some(3000)]);
    assert_eq!(rows[1]["path"], "hnsw", "3,000 experiences are above the banks' threshold");
    // Retrieve is measured once the index is saved (a bank under the threshold has none).
    assert!(rows[0]["index_saved_s"].is_null(), "{}", rows[0]);
    assert!(rows[1]["index_saved_s"].as_f64().is_some_and(|s| s >= rows[1]["index_ready_s"].as_f64().unwrap()), "{}", rows[1]);
    // The largest bank at each asked search beam, on fresh servers that opened its saved index.
    let sweep = j["ef_sweep"].as_array().expect("ef_sweep rows");
    assert_eq!(sweep.iter().map(|r| r["ef_search"].as_u64()).collect::<Vec<_>>(), vec![Some(16), Some(64)], "{table}");
    for row in sweep {
        // A 3,000-row bank is under util::huge's threshold (16 MiB): no huge pages asked for.
        assert!(row["huge_pages_mib_added"].as_f64().is_some(), "{row}");
        assert_eq!(row["path"], "hnsw", "{row}");
        assert!(row["recall_at_10"].as_f64().is_some_and(|r| r > 0.0 && r <= 1.0), "{row}");
        assert!(row["p99_ms"].as_f64().unwrap() >= row["p50_ms"].as_f64().unwrap(), "{row}");
    }
    assert!(rows[1]["recall_at_10"].as_f64().is_some_and(|r| r > 0.0 && r <= 1.0));
    // By score (ann-benchmarks' count) a hit is any experience scoring at least the exact 10th: every id hit is one.
    let by_id = rows[1]["recall_at_10_by_id"].as_f64().expect("recall by id");
    assert!(by_id > 0.0 && by_id <= rows[1]["recall_at_10"].as_f64().unwrap() + 1e-9, "{}", rows[1]);
    let open = &j["open"];
    assert_eq!(open["size"], 3000);
    assert!(open["saved_index"]["origin"].as_str().is_some_and(|o| o.starts_with("Saved")), "{open}");
    assert_eq!(open["without_saved_index"]["origin"], "Pending", "{open}");
    assert!(open["without_saved_index"]["graph_ready_s"]
        .as_f64()
        .is_some_and(|s| s >= open["without_saved_index"]["seconds"].as_f64().unwrap()));
    assert!(open["saved_index"]["seconds"].as_f64().is_some_and(f64::is_finite));
    let compress = j["compress"].as_array().expect("compress rows");
    assert_eq!(compress.len(), 4, "four strategies at one size");
    for row in compress {
        // One caller's Retrieves ran on the bank while each selection did, and each was answered.
        assert!(row["retrieve_calls_during"].as_u64().is_some_and(|n| n >= 1), "{row}");
        assert!(row["retrieve_max_ms_during"].as_f64().is_some_and(|ms| ms > 0.0 && ms.is_finite()), "{row}");
        // Each selection was also timed alone, before.
        assert!(["seconds", "seconds_alone"].iter().all(|k| row[k].as_f64().is_some_and(|s| s > 0.0 && s.is_finite())), "{row}");
    }
}
