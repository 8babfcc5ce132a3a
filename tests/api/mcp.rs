//! The MCP face end to end with the official Rust SDK's client (rmcp) on both wires — the stateless
//! 2026-07-28 protocol (`server/discover`) and the 2025-11-25 handshake — against the real server on
//! loopback, checked against gRPC. (The official Python SDK runs against the binary in tests/python/protocols.)

use memgym::api::faces::mcp::McpOptions;
use memgym::api::pb;
use memgym::api::pb::memory_env_client::MemoryEnvClient;
use rmcp::model::{CallToolRequestParams, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientServiceExt, RoleClient};
use serde_json::{json, Value};
use tonic::transport::Channel;

pub(super) struct Face {
    pub(super) server: memgym::app::server::Running,
    pub(super) url: String,
    pub(super) grpc: MemoryEnvClient<Channel>,
}

async fn spawn_face(allowed_hosts: &[&str]) -> Face {
    spawn_face_with(McpOptions::new(allowed_hosts.iter().map(|h| h.to_string()).collect())).await
}

async fn spawn_face_with(options: McpOptions) -> Face {
    spawn_replica_face(options, None).await
}

/// The MCP face of a server that is replica `replica` (`serve --replica`), or a lone server.
pub(super) async fn spawn_replica_face(options: McpOptions, replica: Option<&str>) -> Face {
    let faces = crate::helpers::FaceOptions { mcp: Some(options), replica: replica.map(str::to_string), ..Default::default() };
    let s = crate::helpers::spawn_faces(&[], faces).await;
    Face { url: format!("http://{}/mcp", s.server.mcp_addr.expect("mcp face")), grpc: s.grpc, server: s.server }
}

pub(super) async fn client(url: &str, mode: ClientLifecycleMode) -> RunningService<RoleClient, ()> {
    ().serve_with_lifecycle(StreamableHttpClientTransport::from_uri(url), mode).await.expect("the client connects")
}

pub(super) fn modes() -> [(&'static str, ClientLifecycleMode); 2] {
    [
        ("2026-07-28", ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] }),
        ("2025-11-25", ClientLifecycleMode::Initialize),
    ]
}

pub(super) async fn call(c: &RunningService<RoleClient, ()>, name: &'static str, args: Value) -> (bool, String, Value) {
    let Value::Object(args) = args else { panic!("arguments are an object") };
    let r = c.peer().call_tool(CallToolRequestParams::new(name).with_arguments(args)).await.expect("a tool result, not a protocol error");
    let text = r.content.first().and_then(|c| c.as_text()).map(|t| t.text.clone()).unwrap_or_default();
    (r.is_error == Some(true), text, r.structured_content.unwrap_or(Value::Null))
}

#[tokio::test]
async fn both_wires_list_ten_tools_and_score_as_grpc_does() {
    let mut face = spawn_face(&["127.0.0.1"]).await;
    for (wire, mode) in modes() {
        let c = client(&face.url, mode).await;
        let tools = c.peer().list_tools(None).await.expect("tools/list").tools;
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names[..6], memgym::tools::TOOL_NAMES, "{wire}");
        assert_eq!(names[6..], memgym::api::faces::mcp::EPISODE_TOOLS, "{wire}");
        let search = &tools[0].input_schema;
        assert_eq!(search["required"], json!(["episode_id", "query"]), "{wire}");

        let id = format!("mcp-{wire}");
        let (err, text, opened) = call(&c, "create_episode", json!({"question_id": "conv-26:q3", "episode_id": id, "seed": 5})).await;
        assert!(!err, "{text}");
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), opened, "the episode tools' text is their JSON");
        let (err, text, hits) = call(&c, "search_memory", json!({"episode_id": id, "query": "What did Caroline research?"})).await;
        assert!(!err && text.starts_with("[m"), "{text}");
        assert_eq!(hits["tool"], "search_memory");
        let (err, text, _) = call(&c, "delete_memory", json!({"episode_id": id, "memory_id": "m0000", "colour": "red"})).await;
        assert!(err && text.contains("colour"), "an unknown argument is a tool error naming it: {text}");
        let (err, text, refused) = call(&c, "score_episode", json!({"episode_id": "no-such-episode"})).await;
        assert!(err && text.contains("no-such-episode"), "{text}");
        assert_eq!(refused["error"]["reason"], "EPISODE_NOT_FOUND", "{refused}");
        assert_eq!((refused["error"]["code"].as_str(), refused["error"]["retryable"].as_bool()), (Some("not_found"), Some(false)));
        let (_, _, scored) = call(&c, "score_episode", json!({"episode_id": id})).await;
        let g = face.grpc.score_episode(pb::ScoreEpisodeRequest { episode_id: id.clone() }).await.unwrap().into_inner();
        assert_eq!((scored["reward"].as_f64(), scored["steps_used"].as_u64()), (Some(g.reward), Some(1)), "{wire}");
        // fork_episode: the forks hold the parent's state; a scored parent is refused.
        let parent = format!("mcp-fork-{wire}");
        call(&c, "create_episode", json!({"question_id": "conv-26:q3", "episode_id": parent})).await;
        let (err, text, forked) = call(&c, "fork_episode", json!({"episode_id": parent, "count": 2, "seeds": [3, 4]})).await;
        assert!(!err, "{text}");
        let forks = forked["forks"].as_array().expect("forks");
        assert_eq!(forks.iter().map(|f| f["seed"].as_u64()).collect::<Vec<_>>(), vec![Some(3), Some(4)], "{wire}");
        let (err, text, _) = call(&c, "fork_episode", json!({"episode_id": parent, "colour": "red"})).await;
        assert!(err && text.contains("colour"), "{text}");
        let (err, text, _) = call(&c, "fork_episode", json!({"episode_id": parent, "seeds": [1, "x"]})).await;
        assert!(err && text.contains("seeds[1]"), "{text}");
        let (err, text, _) = call(&c, "fork_episode", json!({"episode_id": id})).await;
        assert!(err && text.contains("scored"), "a scored parent is refused: {text}");
        let unknown = c.peer().call_tool(CallToolRequestParams::new("teleport_memory")).await;
        assert!(unknown.is_err(), "an unknown tool name is a protocol error (invalid params)");
        let _ = c.cancel().await;
    }
    face.server.stop().await.unwrap();
}

#[tokio::test]
async fn the_host_allowlist_is_the_flag_and_a_star_accepts_any_host() {
    let post = |url: String, host: &'static str| async move {
        reqwest::Client::new()
            .post(url)
            .header("host", host)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    };
    let strict = spawn_face(&["localhost", "127.0.0.1"]).await;
    assert_eq!(post(strict.url.clone(), "memgym.internal:8001").await, 403);
    assert_eq!(post(strict.url.clone(), "localhost:1234").await, 200, "a name without a port matches any port");
    let open = spawn_face(&[]).await;
    assert_eq!(post(open.url.clone(), "memgym.internal:8001").await, 200);
}

#[tokio::test]
async fn sessions_are_capped_and_the_stateless_wire_is_not() {
    let face = spawn_face_with(McpOptions { max_sessions: 2, ..McpOptions::new(vec!["127.0.0.1".into()]) }).await;
    let a = client(&face.url, ClientLifecycleMode::Initialize).await;
    let b = client(&face.url, ClientLifecycleMode::Initialize).await;
    let third = ().serve_with_lifecycle(StreamableHttpClientTransport::from_uri(face.url.as_str()), ClientLifecycleMode::Initialize).await;
    assert!(third.is_err(), "a third session is refused");
    let raw = reqwest::Client::new()
        .post(face.url.as_str())
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(r#"{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status().as_u16(), 503);
    let body: Value = serde_json::from_slice(&raw.bytes().await.unwrap()).unwrap();
    assert_eq!((body["id"].as_i64(), body["error"]["data"]["max_sessions"].as_u64()), (Some(7), Some(2)), "{body}");
    // The stateless wire holds no session: it works at the cap.
    let (_, modern) = modes().into_iter().next().unwrap();
    let stateless = client(&face.url, modern).await;
    let (err, text, _) = call(&stateless, "create_episode", json!({"question_id": "conv-26:q3"})).await;
    assert!(!err, "{text}");
    // A session that ends (DELETE) gives its place back.
    let (err, _, _) = call(&a, "create_episode", json!({"question_id": "conv-26:q3"})).await;
    assert!(!err);
    let _ = a.cancel().await;
    let mut again = None;
    for _ in 0..50 {
        if let Ok(c) =
            ().serve_with_lifecycle(StreamableHttpClientTransport::from_uri(face.url.as_str()), ClientLifecycleMode::Initialize).await
        {
            again = Some(c);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(again.is_some(), "a place came back after a DELETE");
    let _ = b.cancel().await;
}

/// A raw POST of `body` to the MCP endpoint, as a 2025-11-25 client sends it.
async fn raw_post(face: &Face, body: &'static str) -> reqwest::Response {
    reqwest::Client::new()
        .post(face.url.as_str())
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-11-25")
        .body(body)
        .send()
        .await
        .unwrap()
}

/// Strict JSON on the MCP face: a request body that repeats a key inside one object is refused with a
/// JSON-RPC error naming the key (rmcp alone would keep one of the two values), and nothing runs.
#[tokio::test]
async fn a_repeated_json_key_is_refused_before_rmcp_reads_it() {
    let face = spawn_face(&["127.0.0.1"]).await;
    let body = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"create_episode","arguments":{"question_id":"conv-26:q3","episode_id":"dup-a","episode_id":"dup-b"}}}"#;
    let raw = raw_post(&face, body).await;
    assert_eq!(raw.status().as_u16(), 400);
    let reply: Value = serde_json::from_slice(&raw.bytes().await.unwrap()).unwrap();
    assert_eq!(reply["error"]["code"], json!(-32600), "{reply}");
    assert!(reply["error"]["message"].as_str().unwrap().contains(r#"key "episode_id" appears twice"#), "{reply}");
    let mut grpc = face.grpc.clone();
    for id in ["dup-a", "dup-b"] {
        let e = grpc.get_episode(pb::GetEpisodeRequest { episode_id: id.into(), include_trace: false }).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::NotFound, "no episode was created: {e:?}");
    }
}

/// Malformed JSON gets JSON-RPC's parse error (-32700, id null) and a batch an Invalid Request (-32600), each
/// with HTTP 400, as the JSON-RPC and MCP specifications say; rmcp alone answers 415 "fail to deserialize".
#[tokio::test]
async fn malformed_json_is_a_json_rpc_parse_error() {
    let face = spawn_face(&["127.0.0.1"]).await;
    for body in ["{not json", "", r#"{"jsonrpc":"2.0","id":1,"method":"initialize""#] {
        let raw = raw_post(&face, body).await;
        assert_eq!(raw.status().as_u16(), 400, "{body:?}");
        let reply: Value = serde_json::from_slice(&raw.bytes().await.unwrap()).unwrap();
        assert_eq!(
            (reply["jsonrpc"].as_str(), reply["id"].is_null(), reply["error"]["code"].as_i64()),
            (Some("2.0"), true, Some(-32700)),
            "{reply}"
        );
        assert!(reply["error"]["message"].as_str().unwrap().starts_with("Parse error"), "{reply}");
    }
    // A batch (MCP removed them in 2025-06-18) is an Invalid Request, not rmcp's 415.
    let raw = raw_post(&face, r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]"#).await;
    assert_eq!(raw.status().as_u16(), 400);
    let reply: Value = serde_json::from_slice(&raw.bytes().await.unwrap()).unwrap();
    assert_eq!(reply["error"]["code"].as_i64(), Some(-32600), "{reply}");
    assert!(reply["error"]["message"].as_str().unwrap().contains("batches"), "{reply}");
}

/// The transport's refusals are JSON-RPC errors too (-32600, id null) at the status the MCP transport spec
/// gives: a wrong content type 415, a missing `Accept` 406, a wrong method 405 (with `Allow`), a request
/// naming a session the server does not hold 404 (a DELETE too: rmcp alone answers 202), no session id on a
/// GET 400. rmcp alone answers them in plain text without a content type.
#[tokio::test]
async fn transport_refusals_are_json_rpc_errors() {
    let face = spawn_face(&["127.0.0.1"]).await;
    let http = reqwest::Client::new();
    let url = face.url.as_str();
    let list = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let both = "application/json, text/event-stream";
    let cases = [
        ("wrong content type", http.post(url).header("content-type", "text/plain").header("accept", both).body(list), 415, "Content-Type"),
        ("no Accept", http.post(url).header("content-type", "application/json").body(list), 406, "accept"),
        ("PUT", http.put(url).body(list), 405, "Method Not Allowed"),
        (
            "unknown session",
            http.post(url).header("content-type", "application/json").header("accept", both).header("mcp-session-id", "nope").body(list),
            404,
            "Session not found",
        ),
        ("DELETE of an unknown session", http.delete(url).header("mcp-session-id", "nope"), 404, "Session not found"),
        ("GET without a session", http.get(url).header("accept", "text/event-stream"), 400, "Session ID"),
    ];
    for (what, request, status, says) in cases {
        let r = request.send().await.unwrap();
        assert_eq!(r.status().as_u16(), status, "{what}");
        assert_eq!(r.headers().get("content-type").and_then(|v| v.to_str().ok()), Some("application/json"), "{what}");
        if status == 405 {
            assert!(r.headers().contains_key("allow"), "{what}: Allow is kept");
        }
        let reply: Value = r.json().await.unwrap();
        assert_eq!(
            (reply["jsonrpc"].as_str(), reply["id"].is_null(), reply["error"]["code"].as_i64()),
            (Some("2.0"), true, Some(-32600)),
            "{what}: {reply}"
        );
        assert!(reply["error"]["message"].as_str().unwrap().contains(says), "{what}: {reply}");
    }
}

/// `call_id` on the six memory tools: optional in their schemas; the same call sent again with it is applied
/// once (the first result again, no new step); the same id with another call, or an id that is not a
/// string, is a tool error naming `call_id`.
#[tokio::test]
async fn a_call_id_makes_a_retried_mcp_call_apply_once() {
    let mut face = spawn_face(&["127.0.0.1"]).await;
    let (_, mode) = modes().into_iter().next().unwrap();
    let c = client(&face.url, mode).await;
    let tools = c.peer().list_tools(None).await.expect("tools/list").tools;
    for t in &tools[..6] {
        assert_eq!(t.input_schema["properties"]["call_id"]["type"], "string", "{}", t.name);
        assert!(!t.input_schema["required"].as_array().unwrap().contains(&json!("call_id")), "{}", t.name);
    }
    let (err, text, _) = call(&c, "create_episode", json!({"question_id": "conv-26:q3", "episode_id": "mcp-once"})).await;
    assert!(!err, "{text}");
    let note = json!({"episode_id": "mcp-once", "operation": "create", "content": "Caroline keeps a garden journal.", "call_id": "r-1"});
    let (err1, text1, first) = call(&c, "manage_memory", note.clone()).await;
    let (err2, text2, again) = call(&c, "manage_memory", note).await;
    assert!(!err1 && !err2 && text1 == text2, "{text1} / {text2}");
    assert_eq!((first["step"].clone(), first["memory"].clone()), (again["step"].clone(), again["memory"].clone()));
    let state = face.grpc.get_episode(pb::GetEpisodeRequest { episode_id: "mcp-once".into(), include_trace: false }).await.unwrap();
    assert_eq!(state.into_inner().state.unwrap().steps_used, 1, "applied once");
    let other = json!({"episode_id": "mcp-once", "operation": "create", "content": "Another note.", "call_id": "r-1"});
    let (err, text, _) = call(&c, "manage_memory", other).await;
    assert!(err && text.contains("call_id"), "{text}");
    let (err, text, _) = call(&c, "search_memory", json!({"episode_id": "mcp-once", "query": "garden", "call_id": 7})).await;
    assert!(err && text.contains("call_id: must be a string"), "{text}");
    let _ = c.cancel().await;
    face.server.stop().await.unwrap();
}
