//! `serve --api-key-file`: the real binary refuses every face without an accepted key, lets a read-only key
//! read only, leaves health open, and takes a rotated key file without a restart.

use memgym::api::pb;
use memgym::api::pb::memory_env_client::MemoryEnvClient;
use tonic::metadata::MetadataValue;
use tonic::transport::Channel;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;
use tonic_types::StatusExt;

use crate::binary::start_binary_logging;
use crate::rollout::KillOnDrop;

const RW: &str = "rw-key-0123456789abcdef";
const RO: &str = "ro-key-0123456789abcdef";
const NEXT: &str = "rotated-key-0123456789";

/// ListTools with `authorization: Bearer KEY` (or no key).
async fn list_tools(channel: &Channel, key: Option<&str>) -> Result<(), tonic::Status> {
    let mut req = tonic::Request::new(pb::ListToolsRequest {});
    if let Some(k) = key {
        req.metadata_mut().insert("authorization", MetadataValue::try_from(format!("Bearer {k}")).unwrap());
    }
    MemoryEnvClient::new(channel.clone()).list_tools(req).await.map(drop)
}

/// CreateEpisode with `api-key: KEY`.
async fn create(channel: &Channel, key: &str, id: &str) -> Result<(), tonic::Status> {
    let mut c = MemoryEnvClient::new(channel.clone());
    let mut req =
        tonic::Request::new(pb::CreateEpisodeRequest { episode_id: id.into(), question_id: "conv-26:q0".into(), ..Default::default() });
    req.metadata_mut().insert("api-key", MetadataValue::try_from(key).unwrap());
    c.create_episode(req).await.map(drop)
}

fn reason(s: &tonic::Status) -> String {
    s.get_error_details().error_info().map(|i| i.reason.clone()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_face_wants_a_key_and_read_only_keys_only_read() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keys");
    std::fs::write(&file, format!("{RW}\n{RO} read-only\n")).unwrap();
    let file_s = file.display().to_string();
    let flags = ["--api-key-file", &file_s, "--openenv-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0"];
    let (child, addrs) = start_binary_logging(&flags, &[], 3);
    let _server = KillOnDrop(child);
    let grpc = &addrs[0].1;
    let openenv = &addrs.iter().find(|(l, _)| l.contains("openenv listening")).unwrap().1;
    let metrics = &addrs.iter().find(|(l, _)| l.contains("metrics listening")).unwrap().1;
    let channel = Channel::from_shared(format!("http://{grpc}")).unwrap().connect().await.unwrap();

    let none = list_tools(&channel, None).await.unwrap_err();
    assert_eq!((none.code(), reason(&none).as_str()), (tonic::Code::Unauthenticated, "API_KEY_MISSING"));
    let wrong = list_tools(&channel, Some("not-a-key-0123456789")).await.unwrap_err();
    assert_eq!((wrong.code(), reason(&wrong).as_str()), (tonic::Code::Unauthenticated, "API_KEY_INVALID"));
    assert!(!wrong.message().contains("not-a-key"), "a key is never echoed");
    list_tools(&channel, Some(RW)).await.unwrap();
    list_tools(&channel, Some(RO)).await.unwrap();
    create(&channel, RW, "a1").await.unwrap();
    let denied = create(&channel, RO, "a2").await.unwrap_err();
    assert_eq!((denied.code(), reason(&denied).as_str()), (tonic::Code::PermissionDenied, "READ_ONLY_KEY"));
    // Health is open by choice.
    let health = HealthClient::new(channel.clone()).check(HealthCheckRequest { service: String::new() }).await;
    assert!(health.is_ok(), "{health:?}");

    // The HTTP faces: /health open, the rest behind the same keys; a read-only key may GET.
    let http = reqwest::Client::new();
    assert!(http.get(format!("http://{openenv}/health")).send().await.unwrap().status().is_success());
    let r = http.post(format!("http://{openenv}/reset")).body("{}").send().await.unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(r.json::<serde_json::Value>().await.unwrap()["detail"][0]["reason"], "API_KEY_MISSING");
    let r = http.post(format!("http://{openenv}/reset")).bearer_auth(RO).body("{}").send().await.unwrap();
    assert_eq!(r.status(), 403);
    let r = http
        .post(format!("http://{openenv}/reset"))
        .bearer_auth(RW)
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    assert_eq!(http.get(format!("http://{metrics}/metrics")).send().await.unwrap().status(), 401);
    assert!(http.get(format!("http://{metrics}/metrics")).bearer_auth(RO).send().await.unwrap().status().is_success());

    // Rotation without a restart: the old read-write key goes, a new one comes.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    std::fs::write(&file, format!("{NEXT}\n{RO} read-only\n")).unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let old = list_tools(&channel, Some(RW)).await.unwrap_err();
    assert_eq!(reason(&old), "API_KEY_INVALID");
    create(&channel, NEXT, "a3").await.unwrap();
    // A file that no longer reads keeps the keys in force.
    std::fs::write(&file, "short\n").unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    create(&channel, NEXT, "a4").await.unwrap();
}
