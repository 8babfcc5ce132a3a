//! `memgym rollout`, its forks and `memgym replay` through HAProxy (Debian's package) in front of three
//! `serve --replica` processes, with `deploy/haproxy.cfg` as committed: the harness uses the ids the
//! servers return and sends each episode call with the `memgym-episode` header, so every call of an
//! episode (and of its forks) reaches the replica that holds it, and the recorded trajectories replay byte
//! for byte through the proxy. Skipped without haproxy unless `MEMGYM_REPLICAS_REQUIRE=1`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::binary::start_binary;
use crate::fake_openai::FakeOpenAi;
use crate::rollout::{memgym, policy, strings, text, KillOnDrop};

fn haproxy_missing() -> bool {
    let found = Command::new("haproxy").arg("-v").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
    if !found && std::env::var("MEMGYM_REPLICAS_REQUIRE").as_deref() == Ok("1") {
        panic!("haproxy is not installed (Debian's haproxy package) and MEMGYM_REPLICAS_REQUIRE=1");
    }
    !found
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollouts_forks_and_replay_through_the_proxy_stay_on_their_replicas() {
    if haproxy_missing() {
        eprintln!("skipped: no haproxy");
        return;
    }
    let mut env: Vec<(String, String)> = Vec::new();
    let mut servers = Vec::new();
    for r in ["r1", "r2", "r3"] {
        let ready = free_port().to_string();
        let (child, addr) = start_binary(&["--no-banks", "--replica", r, "--metrics-addr", &format!("127.0.0.1:{ready}")]);
        servers.push(KillOnDrop(child));
        env.push((format!("MEMGYM_{}", r.to_uppercase()), addr));
        env.push((format!("MEMGYM_{}_READY", r.to_uppercase()), ready));
    }
    let proxy = format!("127.0.0.1:{}", free_port());
    env.push(("MEMGYM_PROXY_ADDR".into(), proxy.clone()));
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/haproxy.cfg");
    let child = Command::new("haproxy").args(["-db", "-f", config]).envs(env.iter().cloned()).stdout(Stdio::null()).spawn().unwrap();
    let _proxy = KillOnDrop(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(&proxy).is_err() {
        assert!(Instant::now() < deadline, "haproxy did not listen");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await; // the pool's first health checks

    let fake = FakeOpenAi::start(policy).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let mut args = strings(&["rollout", "--addr", &proxy, "--policy-base-url", &fake.url, "--policy-model", "fake"]);
    args.extend(strings(&["--out", &out.display().to_string(), "--split", "test", "--limit", "3", "--group", "2"]));
    args.extend(strings(&["--max-turns", "3", "--concurrency", "3", "--fork-at", "1", "--fork-group", "2"]));
    let o = memgym(args).await;
    assert!(o.status.success(), "{}", text(&o));
    let read = |f: &str| -> Vec<Value> {
        std::fs::read_to_string(out.join(f)).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    let (fresh, forks) = (read("trajectories.jsonl"), read("forks.jsonl"));
    assert_eq!((fresh.len(), forks.len()), (6, 6));
    let mut replicas = std::collections::BTreeSet::new();
    for t in fresh.iter().chain(&forks) {
        assert_eq!(t["status"], "scored", "{t}");
        let id = t["episode_id"].as_str().unwrap();
        let replica = id.split('.').next().unwrap();
        assert!(["r1", "r2", "r3"].contains(&replica), "{id}");
        replicas.insert(replica.to_string());
        if let Some(parent) = t["fork"]["parent"].as_str() {
            assert!(parent.starts_with(&format!("{replica}.")), "a fork lives on its parent's replica: {parent} → {id}");
        }
    }
    assert!(replicas.len() > 1, "the proxy spread the episodes: {replicas:?}");
    for f in ["trajectories.jsonl", "forks.jsonl"] {
        let o = memgym(strings(&["replay", &out.join(f).display().to_string(), "--addr", &proxy])).await;
        assert!(
            o.status.success() && String::from_utf8_lossy(&o.stdout).contains("6 reproduced byte for byte, 0 diverged"),
            "{}",
            text(&o)
        );
    }
}
