//! The real `memgym` binary: starts on its embedded defaults, answers over gRPC, shuts down cleanly on
//! SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use memgym::api::pb;
use memgym::api::pb::memory_env_client::MemoryEnvClient;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

use crate::fake_openai::{Canned, FakeOpenAi};

/// Starts the binary with `flags` and returns it with the address it logged.
pub fn start_binary(flags: &[&str]) -> (std::process::Child, String) {
    start_binary_env(flags, &[])
}

/// [`start_binary`] with extra environment variables.
pub fn start_binary_env(flags: &[&str], vars: &[(&str, &str)]) -> (std::process::Child, String) {
    let (child, mut addrs) = start_binary_logging(flags, vars, 1);
    (child, addrs.remove(0).1)
}

/// Starts the binary and waits for `n` log lines naming an address: (the line, the address), in order (the
/// gRPC address first, then each face's).
pub fn start_binary_logging(flags: &[&str], vars: &[(&str, &str)], n: usize) -> (std::process::Child, Vec<(String, String)>) {
    // Each server its own banks database (a SQLite banks file has one owner), unless the test picks one.
    let banks = if flags.iter().any(|f| matches!(*f, "--banks-dir" | "--banks-url" | "--no-banks")) {
        Vec::new()
    } else {
        let dir = tempfile::tempdir().unwrap().keep();
        vec!["--banks-dir".to_string(), dir.display().to_string()]
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_memgym"))
        .args(["serve", "--addr", "127.0.0.1:0"])
        .args(banks)
        .args(flags)
        .envs(vars.iter().copied())
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(i) = line.find("addr=") {
                let addr: String = line[i + 5..].chars().take_while(|c| !c.is_whitespace()).collect();
                let _ = tx.send((line.clone(), addr));
            }
        }
    });
    let addrs = (0..n).map(|_| rx.recv_timeout(Duration::from_secs(60)).expect("the server logs its addresses")).collect();
    (child, addrs)
}

/// Waits for the process to exit (successfully) and returns how long that took.
async fn wait_exit(child: &mut std::process::Child, limit: Duration) -> Duration {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            assert!(s.success(), "exit status {s}");
            return start.elapsed();
        }
        assert!(start.elapsed() < limit, "the server did not stop after SIGTERM");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn sigterm(child: &std::process::Child) {
    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
}

#[tokio::test]
async fn serve_answers_and_exits_cleanly_on_sigterm() {
    let (mut child, addr) = start_binary(&[]);
    let mut c = MemoryEnvClient::connect(format!("http://{addr}")).await.unwrap();
    let r =
        c.create_episode(pb::CreateEpisodeRequest { question_id: "conv-26:q0".into(), ..Default::default() }).await.unwrap().into_inner();
    assert_eq!(r.initial_memory_count, 184);
    sigterm(&child);
    wait_exit(&mut child, Duration::from_secs(20)).await;
}

/// On SIGTERM every health name turns NOT_SERVING, open Watch streams see it and end, the in-flight call
/// finishes, and the process exits as soon as it has: long before the drain deadline (60 s here).
#[tokio::test]
async fn sigterm_ends_health_watches_and_exits_once_in_flight_calls_finish() {
    let llm = FakeOpenAi::start(|_| Canned::answer("bees").after(Duration::from_millis(1500))).await;
    let (mut child, addr) =
        start_binary(&["--llm-base-url", llm.url.as_str(), "--llm-model", "m", "--evaluator", "llm-f1", "--drain-secs", "60"]);
    let channel = tonic::transport::Channel::from_shared(format!("http://{addr}")).unwrap().connect().await.unwrap();
    let mut env = MemoryEnvClient::new(channel.clone());
    let mut health = HealthClient::new(channel.clone());
    let mut watches = Vec::new();
    for service in ["", "memgym.v1.MemoryEnv", "memgym.v1.Dataset"] {
        let mut w = health.watch(HealthCheckRequest { service: service.into() }).await.unwrap().into_inner();
        assert_eq!(w.message().await.unwrap().unwrap().status(), ServingStatus::Serving, "{service:?}");
        watches.push((service, w));
    }
    env.create_episode(pb::CreateEpisodeRequest { episode_id: "slow".into(), question_id: "conv-26:q0".into(), ..Default::default() })
        .await
        .unwrap();
    // ScoreEpisode asks the (slow) LLM twice: about 3 s in flight.
    let mut scorer = env.clone();
    let score = tokio::spawn(async move { scorer.score_episode(pb::ScoreEpisodeRequest { episode_id: "slow".into() }).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let sent = Instant::now();
    sigterm(&child);
    for (service, mut w) in watches {
        let seen = tokio::time::timeout(Duration::from_secs(5), async {
            let mut last = None;
            while let Ok(Some(m)) = w.message().await {
                last = Some(m.status());
            }
            last
        })
        .await
        .unwrap_or_else(|_| panic!("the watch on {service:?} did not end"));
        assert_eq!(seen, Some(ServingStatus::NotServing), "{service:?}");
    }
    let r = score.await.unwrap().expect("the in-flight call finishes during the drain").into_inner();
    assert_eq!(r.answer_old, "bees");
    let finished = sent.elapsed();
    wait_exit(&mut child, Duration::from_secs(30)).await;
    let exited = sent.elapsed();
    assert!(exited < finished + Duration::from_secs(3), "exited {exited:?} after SIGTERM, the call finished after {finished:?}");
}

#[test]
fn a_corrupt_data_file_stops_the_server_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/data/locomo");
    for f in ["conversations.parquet", "questions.parquet"] {
        std::fs::copy(format!("{data}/{f}"), dir.path().join(f)).unwrap();
    }
    std::fs::write(dir.path().join("memories.parquet"), b"PAR1 this is not a parquet file").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_memgym"))
        .args(["serve", "--addr", "127.0.0.1:0", "--no-banks", "--data-dir"])
        .arg(dir.path())
        .output()
        .expect("the binary runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("memories.parquet"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
