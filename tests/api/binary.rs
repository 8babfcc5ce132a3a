//! The real `memgym` binary: starts on its embedded defaults, answers over gRPC, shuts down cleanly on
//! SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use memgym::api::pb;
use memgym::api::pb::memory_env_client::MemoryEnvClient;

#[tokio::test]
async fn serve_answers_and_exits_cleanly_on_sigterm() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_memgym"))
        .args(["serve", "--addr", "127.0.0.1:0"])
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
                let _ = tx.send(addr);
            }
        }
    });
    let addr = rx.recv_timeout(Duration::from_secs(60)).expect("the server logs its address");
    let mut c = MemoryEnvClient::connect(format!("http://{addr}")).await.unwrap();
    let r =
        c.create_episode(pb::CreateEpisodeRequest { question_id: "conv-26:q0".into(), ..Default::default() }).await.unwrap().into_inner();
    assert_eq!(r.initial_memory_count, 184);
    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            assert!(s.success(), "exit status {s}");
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "the server did not stop after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
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
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .output()
        .expect("the binary runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("memories.parquet"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
