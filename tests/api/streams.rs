//! The bound on calls in flight per gRPC connection (`serve --grpc-max-streams`): the server advertises it
//! in its HTTP/2 SETTINGS, and a client with more calls than the bound waits for a stream instead of being
//! refused, so every call is answered.

use std::time::Duration;

use clap::Parser;
use memgym::api::pb;
use memgym::api::pb::memory_env_client::MemoryEnvClient;
use memgym::app::server::{self, Faces};
use serde_json::json;
use tonic::transport::Channel;

use crate::helpers::serve_args;

/// A server on `127.0.0.1:0` whose gRPC connections take at most `streams` calls at once (`None`: the
/// default).
async fn spawn(streams: Option<u32>) -> server::Running {
    let env = memgym::app::config::build_environment(&serve_args(&[]).env).expect("environment builds");
    let faces = Faces { grpc_max_streams: streams, ..Faces::default() };
    server::spawn_faces(env, None, "127.0.0.1:0".parse().unwrap(), faces).await.expect("server starts")
}

/// The SETTINGS_MAX_CONCURRENT_STREAMS the server at `addr` sends a new HTTP/2 connection.
async fn advertised(addr: std::net::SocketAddr) -> usize {
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connects");
    let (_send, mut conn) = h2::client::handshake(tcp).await.expect("HTTP/2 handshake");
    // The server's SETTINGS arrive once the connection is driven (it never ends on its own); until then
    // the client assumes its own initial value.
    let initial = conn.max_concurrent_send_streams();
    let until = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let _ = tokio::time::timeout(Duration::from_millis(20), &mut conn).await;
        let now = conn.max_concurrent_send_streams();
        if now != initial || tokio::time::Instant::now() > until {
            return now;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_advertises_its_bound_on_calls_in_flight() {
    let default = spawn(None).await;
    assert_eq!(advertised(default.addr).await, server::DEFAULT_MAX_STREAMS as usize);
    let set = spawn(Some(3)).await;
    assert_eq!(advertised(set.addr).await, 3);
    assert_eq!(serve_args(&[]).grpc_max_streams, server::DEFAULT_MAX_STREAMS);
    assert_eq!(serve_args(&["--grpc-max-streams", "64"]).grpc_max_streams, 64);
    let refused = memgym::app::cli::Cli::try_parse_from(["memgym", "serve", "--grpc-max-streams", "0"]).map(|_| ()).unwrap_err();
    assert!(refused.to_string().contains("--grpc-max-streams"), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_beyond_the_bound_wait_for_a_stream_and_are_all_answered() {
    let served = spawn(Some(2)).await;
    let channel = Channel::from_shared(format!("http://{}", served.addr)).unwrap().connect().await.expect("connects");
    let mut client = MemoryEnvClient::new(channel.clone());
    let create = pb::CreateEpisodeRequest {
        episode_id: "streams".into(),
        question_id: "conv-26:q0".into(),
        max_steps: Some(100),
        ..Default::default()
    };
    client.create_episode(create).await.expect("creates");
    // 48 calls at once on one connection that takes 2: the other 46 wait in the client.
    let calls = (0..48).map(|i| {
        let mut c = MemoryEnvClient::new(channel.clone());
        async move {
            let args = json!({"query": format!("Caroline {i}"), "top_k": 3}).to_string();
            let req = pb::CallToolRequest {
                episode_id: "streams".into(),
                tool_name: "search_memory".into(),
                arguments_json: args,
                ..Default::default()
            };
            c.call_tool(req).await.map(|r| r.into_inner())
        }
    });
    let answered = futures_util::future::join_all(calls).await;
    for (i, r) in answered.iter().enumerate() {
        let r = r.as_ref().unwrap_or_else(|s| panic!("call {i} refused: {s:?}"));
        assert!(matches!(r.result, Some(pb::call_tool_response::Result::Search(ref s)) if !s.results.is_empty()), "call {i}: {r:?}");
    }
}
