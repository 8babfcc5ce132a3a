//! `serve --replica` and the drain, with the real binary and a real gRPC client: ids name their replica,
//! every reply says which replica answered, a misrouted id is refused as such, and after SIGTERM the
//! server opens no new episode and takes no bank call (a retryable DRAINING, `/ready` 503) while it still
//! serves the episode it holds, then exits as soon as that episode is scored. `memgym health` says
//! SERVING before the drain and fails with NOT_SERVING during it.

use std::time::{Duration, Instant};

use memgym::api::pb;
use memgym::api::pb::banks_client::BanksClient;
use memgym::api::pb::memory_env_client::MemoryEnvClient;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic_types::StatusExt;

use crate::binary::start_binary_logging;
use crate::rollout::{memgym, strings, text};

fn reason(s: &tonic::Status) -> (tonic::Code, String, bool) {
    let d = s.get_error_details();
    (s.code(), d.error_info().map(|i| i.reason.clone()).unwrap_or_default(), d.retry_info().is_some())
}

/// `GET path` on `addr`: the HTTP status code.
async fn http_status(addr: &str, path: &str) -> u16 {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").as_bytes()).await.unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).await.unwrap();
    reply.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0)
}

fn create(id: &str) -> pb::CreateEpisodeRequest {
    pb::CreateEpisodeRequest { episode_id: id.into(), question_id: "conv-26:q0".into(), ..Default::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_names_its_ids_and_drains_without_losing_its_episodes() {
    let (mut child, addrs) = start_binary_logging(&["--replica", "r7", "--metrics-addr", "127.0.0.1:0", "--drain-secs", "60"], &[], 2);
    let (grpc, metrics) = (&addrs[0].1, &addrs[1].1);
    let channel = tonic::transport::Channel::from_shared(format!("http://{grpc}")).unwrap().connect().await.unwrap();
    let (mut env, mut banks) = (MemoryEnvClient::new(channel.clone()), BanksClient::new(channel));
    assert_eq!(http_status(metrics, "/ready").await, 200);
    let health = memgym(strings(&["health", "--addr", grpc])).await;
    assert!(health.status.success() && text(&health).contains("SERVING"), "{}", text(&health));

    // Ids name the replica: the server's own, and a client's (prefixed once; a retry with the returned id
    // stays the same episode). Every reply names the replica.
    let made = env.create_episode(create("")).await.unwrap();
    assert_eq!(made.metadata().get("memgym-replica").unwrap(), "r7");
    let own = made.into_inner().state.unwrap().episode_id;
    assert!(own.starts_with("r7.ep-"), "{own}");
    let chosen = env.create_episode(create("job-1")).await.unwrap().into_inner().state.unwrap().episode_id;
    assert_eq!(chosen, "r7.job-1");
    let again = env.create_episode(create("r7.job-1")).await.unwrap().into_inner();
    assert!(!again.created, "the returned id names the same episode");
    let misrouted = env.score_episode(pb::ScoreEpisodeRequest { episode_id: "r2.ep-1".into() }).await.unwrap_err();
    assert_eq!(reason(&misrouted), (tonic::Code::FailedPrecondition, "WRONG_REPLICA".into(), false));
    assert!(misrouted.message().contains("r2") && misrouted.message().contains("memgym-episode"), "{}", misrouted.message());
    env.score_episode(pb::ScoreEpisodeRequest { episode_id: own.clone() }).await.unwrap();

    // SIGTERM with r7.job-1 open and unscored: the drain begins.
    let sent = Instant::now();
    assert!(std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut attempt = 0;
    let refused = loop {
        attempt += 1;
        match env.create_episode(create(&format!("late-{attempt}"))).await {
            Err(s) => break s,
            Ok(made) => {
                // Opened before the signal was handled: close it, or the drain would wait for it.
                assert!(Instant::now() < deadline, "new episodes still opened after SIGTERM");
                env.close_episode(pb::CloseEpisodeRequest { episode_id: made.into_inner().episode_id }).await.unwrap();
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(reason(&refused), (tonic::Code::Unavailable, "DRAINING".into(), true), "{refused:?}");
    let bank = banks.list_banks(pb::ListBanksRequest::default()).await.unwrap_err();
    assert_eq!(reason(&bank), (tonic::Code::Unavailable, "DRAINING".into(), true), "{bank:?}");
    assert_eq!(http_status(metrics, "/ready").await, 503);
    let health = memgym(strings(&["health", "--addr", grpc])).await;
    assert!(!health.status.success() && text(&health).contains("NOT_SERVING"), "{}", text(&health));
    // The episode held here is still served, and the server stays up for it.
    let call = pb::CallToolRequest {
        episode_id: "r7.job-1".into(),
        tool_name: "search_memory".into(),
        arguments_json: r#"{"query": "bees"}"#.into(),
        ..Default::default()
    };
    env.call_tool(call).await.expect("an open episode is served while draining");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(child.try_wait().unwrap().is_none(), "the server left before its episode was scored");
    env.score_episode(pb::ScoreEpisodeRequest { episode_id: "r7.job-1".into() }).await.expect("scored while draining");
    let scored = sent.elapsed();
    let limit = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < limit, "the server did not exit after its last episode was scored");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(status.success(), "{status}");
    assert!(sent.elapsed() < scored + Duration::from_secs(5), "it exited long after the last episode (not at the 60 s deadline)");
}

#[test]
fn a_bad_replica_name_is_refused_naming_the_flag() {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_memgym")).args(["serve", "--no-banks", "--replica", "R.1"]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("--replica") && err.contains("lowercase"), "{err}");
}
