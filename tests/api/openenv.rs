//! The OpenEnv face end to end: the real server on loopback with `--openenv-addr`, a real WebSocket client
//! (tokio-tungstenite) and real HTTP requests, checked against gRPC on the same server. (OpenEnv's own
//! Python client and validator run against the binary in tests/python/protocols.)

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use memgym::api::faces::mcp::McpOptions;
use memgym::api::faces::openenv::OpenEnvOptions;
use memgym::api::pb;
use memgym::api::pb::memory_env_client::MemoryEnvClient;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;
use tonic::transport::Channel;

use crate::fake_openai::{Canned, FakeOpenAi};

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

struct Face {
    _server: memgym::app::server::Running,
    http: String,
    ws: String,
    grpc: MemoryEnvClient<Channel>,
}

async fn spawn_face(flags: &[&str], max_sessions: usize) -> Face {
    spawn_face_pinging(flags, max_sessions, OpenEnvOptions::PING_EVERY).await
}

async fn spawn_face_pinging(flags: &[&str], max_sessions: usize, ping_every: Duration) -> Face {
    let mcp = McpOptions::new(vec!["127.0.0.1".into(), "localhost".into()]);
    let options = OpenEnvOptions { ping_every, ..OpenEnvOptions::new(max_sessions, mcp) };
    let s = crate::helpers::spawn_faces(flags, crate::helpers::FaceOptions { openenv: Some(options), ..Default::default() }).await;
    let addr = s.server.openenv_addr.expect("openenv face");
    Face { http: format!("http://{addr}"), ws: format!("ws://{addr}/ws"), grpc: s.grpc, _server: s.server }
}

async fn connect(face: &Face) -> Ws {
    tokio_tungstenite::connect_async(face.ws.as_str()).await.expect("ws connects").0
}

async fn send(ws: &mut Ws, v: Value) {
    ws.send(Message::Text(v.to_string().into())).await.expect("send");
}

/// The next text frame as JSON (pongs skipped).
async fn recv(ws: &mut Ws) -> Value {
    loop {
        let m = tokio::time::timeout(Duration::from_secs(30), ws.next()).await.expect("a reply in time").expect("open").expect("frame");
        match m {
            Message::Text(t) => return serde_json::from_str(&t).expect("json reply"),
            Message::Pong(_) | Message::Ping(_) => continue,
            other @ (Message::Binary(_) | Message::Close(_) | Message::Frame(_)) => panic!("unexpected frame {other:?}"),
        }
    }
}

async fn ask(ws: &mut Ws, v: Value) -> Value {
    send(ws, v).await;
    recv(ws).await
}

fn step(action: Value) -> Value {
    json!({"type": "step", "data": action})
}

fn call(tool: &str, arguments: Value) -> Value {
    step(json!({"type": "call_tool", "tool_name": tool, "arguments": arguments}))
}

async fn post(url: &str, body: &str, accept: &str) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", accept)
        .body(body.to_string())
        .send()
        .await
        .expect("http");
    let status = r.status().as_u16();
    (status, serde_json::from_slice(&r.bytes().await.unwrap()).unwrap_or(Value::Null))
}

async fn get(url: &str) -> (u16, Value) {
    let r = reqwest::get(url).await.expect("http");
    let status = r.status().as_u16();
    (status, serde_json::from_slice(&r.bytes().await.unwrap()).unwrap_or(Value::Null))
}

#[tokio::test]
async fn http_surface_is_what_openenv_validate_checks() {
    let face = spawn_face(&[], 4).await;
    assert_eq!(get(&format!("{}/health", face.http)).await, (200, json!({"status": "healthy"})));
    let (s, meta) = get(&format!("{}/metadata", face.http)).await;
    assert!(s == 200 && meta["name"] == "memgym" && meta["description"].is_string(), "{meta}");
    let (s, schema) = get(&format!("{}/schema", face.http)).await;
    assert_eq!(s, 200);
    for k in ["action", "observation", "state"] {
        assert!(schema[k].is_object(), "{k}: {schema}");
    }
    let (s, api) = get(&format!("{}/openapi.json", face.http)).await;
    assert!(s == 200 && api["info"]["version"].is_string());
    for p in ["/reset", "/step", "/state"] {
        assert!(api["paths"][p].is_object(), "{p}");
    }
    // `openenv validate` posts {} with Accept */* and wants HTTP 200 with a JSON-RPC body.
    let (s, rpc) = post(&format!("{}/mcp", face.http), "{}", "*/*").await;
    assert_eq!((s, rpc["jsonrpc"].as_str(), rpc["error"]["code"].as_i64()), (200, Some("2.0"), Some(-32600)), "{rpc}");
    let (s, rpc) = post(&format!("{}/mcp", face.http), "not json", "*/*").await;
    assert_eq!((s, rpc["error"]["code"].as_i64()), (200, Some(-32700)));
}

#[tokio::test]
async fn stateless_http_reset_and_step_close_their_episodes_and_name_bad_fields() {
    let mut face = spawn_face(&[], 4).await;
    let (s, r) = post(&format!("{}/reset", face.http), r#"{"question_id": "conv-26:q3", "seed": 1}"#, "*/*").await;
    assert_eq!(s, 200, "{r}");
    assert_eq!((r["done"].as_bool(), r["reward"].is_null()), (Some(false), true));
    assert!(r["observation"]["question"].as_str().is_some_and(|q| !q.is_empty()));
    let id = r["observation"]["episode_id"].as_str().unwrap().to_string();
    let err = face.grpc.get_episode(pb::GetEpisodeRequest { episode_id: id, include_trace: false }).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "the throwaway episode is closed: {err:?}");

    let (s, r) = post(
        &format!("{}/step", face.http),
        r#"{"action": {"type": "call_tool", "tool_name": "search_memory", "arguments": {"query": "hiking"}}, "seed": 2}"#,
        "*/*",
    )
    .await;
    assert_eq!(s, 200, "{r}");
    assert!(r["observation"]["result"]["results"].as_array().is_some_and(|h| !h.is_empty()), "{r}");
    assert_eq!(r["observation"]["result"]["metrics"]["steps_used"], json!(1.0), "the per-step metrics: {r}");
    assert_eq!(r["reward"], json!(0.0));

    let (s, r) = post(&format!("{}/reset", face.http), r#"{"question": "x"}"#, "*/*").await;
    assert_eq!(s, 422);
    assert!(r["detail"][0]["msg"].as_str().unwrap().starts_with("question: unknown key"), "{r}");
    assert_eq!((r["detail"][0]["reason"].as_str(), r["detail"][0]["retryable"].as_bool()), (Some("INVALID_ARGUMENT"), Some(false)), "{r}");
    let (s, r) = post(&format!("{}/step", face.http), r#"{"action": {"type": "jump"}}"#, "*/*").await;
    assert_eq!(s, 422);
    assert!(r["detail"][0]["msg"].as_str().unwrap().contains("action.type"), "{r}");
    let (s, r) = post(&format!("{}/reset", face.http), r#"{"seed": -1}"#, "*/*").await;
    assert!(s == 422 && r["detail"][0]["msg"].as_str().unwrap().starts_with("seed:"), "{r}");
    assert_eq!(get(&format!("{}/state", face.http)).await, (200, json!({"episode_id": null, "step_count": 0})));
}

#[tokio::test]
async fn a_websocket_episode_scores_what_the_same_calls_score_over_grpc() {
    let mut face = spawn_face(&[], 4).await;
    let mut ws = connect(&face).await;
    let reset = ask(&mut ws, json!({"type": "reset", "data": {"question_id": "conv-26:q3", "episode_id": "ws-1", "seed": 5}})).await;
    assert_eq!(reset["type"], "observation", "{reset}");
    assert_eq!(reset["data"]["observation"]["episode_id"], "ws-1");
    let tools = ask(&mut ws, step(json!({"type": "list_tools"}))).await;
    let names: Vec<&str> = tools["data"]["observation"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, memgym::tools::TOOL_NAMES);
    let calls = [
        ("search_memory", json!({"query": "What did Caroline research?"})),
        ("manage_memory", json!({"operation": "create", "content": "Caroline researched adoption agencies."})),
        ("delete_memory", json!({"memory_id": "m0000"})),
    ];
    for (tool, args) in &calls {
        let r = ask(&mut ws, call(tool, args.clone())).await;
        assert_eq!(r["data"]["observation"]["error"], Value::Null, "{r}");
        assert_eq!(r["data"]["reward"], json!(0.0));
        assert_eq!(r["data"]["observation"]["result"]["tool"], *tool);
    }
    let state = ask(&mut ws, json!({"type": "state"})).await;
    assert_eq!(state["type"], "state");
    assert_eq!(
        (state["data"]["episode_id"].as_str(), state["data"]["step_count"].as_u64(), state["data"]["steps_used"].as_u64()),
        (Some("ws-1"), Some(4), Some(3))
    );
    let scored = ask(&mut ws, step(json!({"type": "score"}))).await;
    assert_eq!(scored["data"]["done"], true);
    let reward = scored["data"]["reward"].as_f64().unwrap();
    assert_eq!(scored["data"]["metadata"]["reward"].as_f64(), Some(reward));

    // The same calls on a twin episode over gRPC.
    face.grpc
        .create_episode(pb::CreateEpisodeRequest {
            episode_id: "grpc-1".into(),
            question_id: "conv-26:q3".into(),
            seed: Some(5),
            ..Default::default()
        })
        .await
        .unwrap();
    for (tool, args) in &calls {
        face.grpc
            .call_tool(pb::CallToolRequest {
                episode_id: "grpc-1".into(),
                tool_name: tool.to_string(),
                arguments_json: args.to_string(),
                ..Default::default()
            })
            .await
            .unwrap();
    }
    let g = face.grpc.score_episode(pb::ScoreEpisodeRequest { episode_id: "grpc-1".into() }).await.unwrap().into_inner();
    assert_eq!(g.reward, reward);
    assert_eq!(scored["data"]["metadata"]["p_new"].as_f64(), Some(g.p_new));
    assert_eq!(scored["data"]["metadata"]["memory_efficiency"].as_f64(), Some(g.memory_efficiency));

    // Closing gets no reply and closes the episode.
    send(&mut ws, json!({"type": "close"})).await;
    let end = tokio::time::timeout(Duration::from_secs(10), ws.next()).await.expect("closes");
    assert!(matches!(end, None | Some(Ok(Message::Close(_))) | Some(Err(_))), "{end:?}");
    let err = face.grpc.get_episode(pb::GetEpisodeRequest { episode_id: "ws-1".into(), include_trace: false }).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
}

#[tokio::test]
async fn errors_name_the_problem_and_leave_the_connection_usable() {
    let mut face = spawn_face(&[], 4).await;
    let mut ws = connect(&face).await;
    let code = |v: &Value| v["data"]["code"].as_str().unwrap_or("").to_string();
    ws.send(Message::Text("{not json".into())).await.unwrap();
    assert_eq!(code(&recv(&mut ws).await), "INVALID_JSON");
    assert_eq!(code(&ask(&mut ws, json!({"type": "jump"})).await), "UNKNOWN_TYPE");
    assert_eq!(code(&ask(&mut ws, json!({"data": {}})).await), "UNKNOWN_TYPE");
    assert_eq!(code(&ask(&mut ws, json!({"type": "state", "data": {}})).await), "VALIDATION_ERROR");
    assert_eq!(code(&ask(&mut ws, json!([1, 2])).await), "VALIDATION_ERROR");
    let r = ask(&mut ws, step(json!({"type": "list_tools"}))).await;
    assert_eq!((code(&r), r["data"]["message"].as_str()), ("EXECUTION_ERROR".into(), Some("no episode: send a reset first")));
    let r = ask(&mut ws, json!({"type": "reset", "data": {"max_steps": "many"}})).await;
    assert_eq!(code(&r), "VALIDATION_ERROR");
    assert!(r["data"]["message"].as_str().unwrap().starts_with("max_steps:"), "{r}");
    let r = ask(&mut ws, json!({"type": "reset", "data": {"question_id": "conv-99:q1"}})).await;
    assert_eq!(code(&r), "VALIDATION_ERROR", "an unknown question is a bad reset value: {r}");

    let r = ask(&mut ws, json!({"type": "reset", "data": {"question_id": "conv-26:q3", "episode_id": "err-1"}})).await;
    assert_eq!(r["type"], "observation");
    // A policy's bad call is an observation with the error, not a failure of the connection.
    let r = ask(&mut ws, call("teleport_memory", json!({}))).await;
    assert_eq!(r["data"]["observation"]["error"]["error_type"], "tool_not_found", "{r}");
    let r = ask(&mut ws, call("delete_memory", json!({"memory_id": "m9999"}))).await;
    assert_eq!(r["data"]["observation"]["error"]["error_type"], "invalid_args", "{r}");
    assert!(r["data"]["observation"]["error"]["message"].as_str().unwrap().contains("memory_id"), "{r}");
    let r = ask(&mut ws, call("search_memory", json!({"query": "x", "top_k": "ten"}))).await;
    assert!(r["data"]["observation"]["error"]["message"].as_str().unwrap().contains("top_k: must be an integer"), "{r}");
    let r = ask(&mut ws, step(json!({"type": "call_tool", "tool_name": "search_memory", "argumentz": {}}))).await;
    assert_eq!(code(&r), "VALIDATION_ERROR");
    // Nothing was spent by the refusals; the episode works.
    let r = ask(&mut ws, call("search_memory", json!({"query": "adoption"}))).await;
    assert_eq!(r["data"]["observation"]["steps_used"], 1, "{r}");
    let st = face.grpc.get_episode(pb::GetEpisodeRequest { episode_id: "err-1".into(), include_trace: false }).await.unwrap().into_inner();
    assert_eq!(st.state.unwrap().rejected_calls, 3, "three refused tool calls (the malformed action never reached the episode)");

    // A disconnect closes the episode.
    drop(ws);
    let mut closed = false;
    for _ in 0..100 {
        let r = face.grpc.get_episode(pb::GetEpisodeRequest { episode_id: "err-1".into(), include_trace: false }).await;
        if r.is_err_and(|e| e.code() == tonic::Code::FailedPrecondition) {
            closed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(closed, "the episode of a dropped connection is closed");
}

#[tokio::test]
async fn the_call_that_spends_the_budget_is_scored() {
    let face = spawn_face(&[], 4).await;
    let mut ws = connect(&face).await;
    ask(&mut ws, json!({"type": "reset", "data": {"question_id": "conv-26:q3", "max_steps": 2}})).await;
    let r = ask(&mut ws, call("search_memory", json!({"query": "a"}))).await;
    assert_eq!((r["data"]["done"].as_bool(), r["data"]["reward"].as_f64()), (Some(false), Some(0.0)));
    let r = ask(&mut ws, call("search_memory", json!({"query": "b"}))).await;
    assert_eq!(r["data"]["done"], true, "{r}");
    assert_eq!(r["data"]["reward"].as_f64(), r["data"]["metadata"]["reward"].as_f64());
    assert_eq!(r["data"]["metadata"]["steps_used"], 2);
    let r = ask(&mut ws, call("search_memory", json!({"query": "c"}))).await;
    assert_eq!(
        (r["data"]["done"].as_bool(), r["data"]["observation"]["error"]["error_type"].as_str()),
        (Some(true), Some("execution_error")),
        "{r}"
    );
}

#[tokio::test]
async fn capacity_is_reported_then_freed() {
    let face = spawn_face(&[], 2).await;
    let mut a = connect(&face).await;
    let mut b = connect(&face).await;
    ask(&mut a, json!({"type": "reset", "data": {"seed": 1}})).await;
    ask(&mut b, json!({"type": "reset", "data": {"seed": 2}})).await;
    let mut c = connect(&face).await;
    let refused = recv(&mut c).await;
    assert_eq!(refused["data"]["code"], "CAPACITY_REACHED", "{refused}");
    assert_eq!((refused["data"]["active_sessions"].as_u64(), refused["data"]["max_sessions"].as_u64()), (Some(2), Some(2)));
    // JSON-RPC sessions share the cap.
    let (_, rpc) = post(&format!("{}/mcp", face.http), r#"{"jsonrpc":"2.0","id":1,"method":"openenv/session/create"}"#, "*/*").await;
    assert_eq!(rpc["error"]["code"], -32000, "{rpc}");
    send(&mut a, json!({"type": "close"})).await;
    let mut d = None;
    for _ in 0..100 {
        let mut ws = connect(&face).await;
        let r = ask(&mut ws, json!({"type": "reset", "data": {"seed": 3}})).await;
        if r["type"] == "observation" {
            d = Some(ws);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut d = d.expect("a place frees when a client closes");
    // Two live sessions stay apart.
    ask(&mut d, call("manage_memory", json!({"operation": "create", "content": "Only in session d."}))).await;
    let sd = ask(&mut d, json!({"type": "state"})).await;
    let sb = ask(&mut b, json!({"type": "state"})).await;
    assert_ne!(sd["data"]["episode_id"], sb["data"]["episode_id"]);
    assert_eq!(sd["data"]["memory_count"].as_u64().unwrap(), sd["data"]["initial_memory_count"].as_u64().unwrap() + 1);
    assert_eq!(sb["data"]["memory_count"], sb["data"]["initial_memory_count"]);
}

#[tokio::test]
async fn a_json_rpc_session_can_be_attached_and_calls_the_ten_tools() {
    let face = spawn_face(&[], 2).await;
    let url = format!("{}/mcp", face.http);
    let (_, created) = post(&url, r#"{"jsonrpc":"2.0","id":1,"method":"openenv/session/create","params":{}}"#, "*/*").await;
    let sid = created["result"]["session_id"].as_str().expect("a session id").to_string();
    let (_, listed) = post(&url, r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#, "*/*").await;
    assert_eq!(listed["result"]["tools"].as_array().unwrap().len(), 10);
    let (_, opened) = post(&url, r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"create_episode","arguments":{"question_id":"conv-26:q3","episode_id":"rpc-1"}}}"#, "*/*").await;
    assert_eq!(opened["result"]["data"]["episode_id"], "rpc-1", "{opened}");
    let (_, bad) = post(
        &url,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"search_memory","arguments":{"episode_id":"rpc-1"}}}"#,
        "*/*",
    )
    .await;
    assert_eq!(bad["result"]["isError"], true, "{bad}");
    assert!(bad["result"]["content"][0]["text"].as_str().unwrap().contains("query"), "{bad}");
    let (_, unknown) = post(&url, r#"{"jsonrpc":"2.0","id":5,"method":"initialize"}"#, "*/*").await;
    assert_eq!(unknown["error"]["code"], -32601);
    let mut ws = tokio_tungstenite::connect_async(format!("{}?session_id={sid}", face.ws)).await.unwrap().0;
    let r = ask(&mut ws, json!({"type": "reset", "data": {"seed": 4}})).await;
    assert_eq!(r["type"], "observation", "attached to the session's place: {r}");
    let mut again = tokio_tungstenite::connect_async(format!("{}?session_id={sid}", face.ws)).await.unwrap().0;
    assert_eq!(recv(&mut again).await["data"]["code"], "SESSION_ERROR");
    let (_, closing) =
        post(&url, &format!(r#"{{"jsonrpc":"2.0","id":6,"method":"openenv/session/close","params":{{"session_id":"{sid}"}}}}"#), "*/*")
            .await;
    assert_eq!(closing["result"]["closing"], true, "{closing}");
}

#[tokio::test]
async fn pings_are_answered_while_a_slow_score_runs() {
    let llm = FakeOpenAi::start(|_| Canned::answer("adoption agencies").after(Duration::from_secs(2))).await;
    let face = spawn_face(&["--llm-base-url", llm.url.as_str(), "--llm-model", "slow"], 2).await;
    let mut ws = connect(&face).await;
    ask(&mut ws, json!({"type": "reset", "data": {"question_id": "conv-26:q3", "evaluator": "llm_f1"}})).await;
    send(&mut ws, step(json!({"type": "score"}))).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    ws.send(Message::Ping(b"alive?".to_vec().into())).await.unwrap();
    let first = tokio::time::timeout(Duration::from_secs(30), ws.next()).await.unwrap().unwrap().unwrap();
    assert!(matches!(&first, Message::Pong(p) if p.as_ref() == b"alive?"), "the pong comes before the slow observation: {first:?}");
    let scored = recv(&mut ws).await;
    assert_eq!(scored["data"]["done"], true, "{scored}");
    assert_eq!(scored["data"]["metadata"]["evaluator"], "llm-f1");
}

#[tokio::test]
async fn a_reset_never_takes_over_a_live_episode() {
    let mut face = spawn_face(&[], 4).await;
    face.grpc
        .create_episode(pb::CreateEpisodeRequest { episode_id: "taken".into(), question_id: "conv-26:q3".into(), ..Default::default() })
        .await
        .unwrap();
    let mut ws = connect(&face).await;
    let r = ask(&mut ws, json!({"type": "reset", "data": {"question_id": "conv-26:q3", "episode_id": "taken"}})).await;
    assert_eq!(r["data"]["code"], "VALIDATION_ERROR", "{r}");
    assert!(r["data"]["message"].as_str().unwrap().starts_with("episode_id: episode \"taken\" is already open"), "{r}");
    drop(ws);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let st = face.grpc.get_episode(pb::GetEpisodeRequest { episode_id: "taken".into(), include_trace: false }).await;
    assert!(st.is_ok(), "the gRPC client's episode lives on after the socket went away");
}

#[tokio::test]
async fn stateless_routes_answer_http_statuses_by_cause() {
    let face = spawn_face(&[], 4).await;
    // FastAPI's bodies for an unknown path and for another method on a known one.
    assert_eq!(get(&format!("{}/nope", face.http)).await, (404, json!({"detail": "Not Found"})));
    assert_eq!(get(&format!("{}/reset", face.http)).await, (405, json!({"detail": "Method Not Allowed"})));
    let url = format!("{}/reset", face.http);
    let (s, r) = post(&url, r#"{"question_id": "conv-99:q1"}"#, "*/*").await;
    assert_eq!(s, 404, "an unknown question is not found, on every HTTP face: {r}");
    assert_eq!(r["detail"][0]["reason"], "DATASET_NOT_FOUND", "{r}");
    let (s, _) = post(&url, r#"{"question_id": "conv-26:q3", "episode_id": "once"}"#, "*/*").await;
    assert_eq!(s, 200);
    let (s, r) = post(&url, r#"{"question_id": "conv-26:q3", "episode_id": "once"}"#, "*/*").await;
    assert_eq!(s, 409, "a closed id is not reused: {r}");
    let (s, r) = post(&format!("{}/step", face.http), r#"{"action": {"type": "call_tool"}}"#, "*/*").await;
    assert!(s == 422 && r["detail"][0]["msg"].as_str().unwrap().starts_with("action.tool_name"), "{r}");
}

#[tokio::test]
async fn foreign_hosts_and_origins_are_forbidden() {
    let face = spawn_face(&[], 4).await;
    let status = |host: &'static str, origin: Option<&'static str>| {
        let url = format!("{}/health", face.http);
        async move {
            let mut req = reqwest::Client::new().get(url).header("host", host);
            if let Some(o) = origin {
                req = req.header("origin", o);
            }
            req.send().await.unwrap().status().as_u16()
        }
    };
    assert_eq!(status("127.0.0.1:9", None).await, 200, "an entry without a port matches any port");
    assert_eq!(status("localhost", Some("http://localhost:3000")).await, 200);
    assert_eq!(status("attacker.example", None).await, 403);
    assert_eq!(status("127.0.0.1", Some("https://attacker.example")).await, 403, "a browser page of another site");
}

#[tokio::test]
async fn a_silent_connection_is_closed_and_its_place_freed() {
    let face = spawn_face_pinging(&[], 1, Duration::from_millis(200)).await;
    let mut silent = connect(&face).await;
    ask(&mut silent, json!({"type": "reset", "data": {"seed": 1}})).await;
    let id = ask(&mut silent, json!({"type": "state"})).await["data"]["episode_id"].as_str().unwrap().to_string();
    // `silent` is never read again, so it never answers the server's pings.
    let mut freed = None;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut ws = connect(&face).await;
        let r = ask(&mut ws, json!({"type": "reset", "data": {"seed": 2}})).await;
        if r["type"] == "observation" {
            freed = Some(ws);
            break;
        }
    }
    assert!(freed.is_some(), "the silent connection's place came back");
    let mut grpc = face.grpc.clone();
    let err = grpc.get_episode(pb::GetEpisodeRequest { episode_id: id, include_trace: false }).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "and its episode was closed");
    drop(silent);
}

/// Strict JSON on every OpenEnv door: a WebSocket message, an HTTP body and a `/mcp` dialect request
/// that repeat a key are refused naming it, and nothing runs.
#[tokio::test]
async fn a_repeated_json_key_is_refused_on_every_door() {
    let mut face = spawn_face(&[], 4).await;
    let mut ws = connect(&face).await;
    ws.send(Message::Text(r#"{"type":"reset","data":{"question_id":"conv-26:q3","episode_id":"dup-a","episode_id":"dup-b"}}"#.into()))
        .await
        .unwrap();
    let r = recv(&mut ws).await;
    assert_eq!((r["type"].as_str(), r["data"]["code"].as_str()), (Some("error"), Some("VALIDATION_ERROR")), "{r}");
    assert!(r["data"]["message"].as_str().unwrap().contains(r#"key "episode_id" appears twice"#), "{r}");
    // A lone surrogate escape is not text: refused as invalid JSON.
    ws.send(Message::Text(r#"{"type":"reset","data":{"question_id":"conv-26:q3\ud800"}}"#.into())).await.unwrap();
    let r = recv(&mut ws).await;
    assert_eq!(r["data"]["code"].as_str(), Some("INVALID_JSON"), "{r}");
    assert!(r["data"]["message"].as_str().unwrap().contains("escape"), "{r}");
    let (s, r) = post(&format!("{}/reset", face.http), r#"{"seed": 1, "seed": 2}"#, "*/*").await;
    assert_eq!(s, 422, "{r}");
    assert!(r["detail"][0]["msg"].as_str().unwrap().contains(r#"key "seed" appears twice"#), "{r}");
    let (s, r) = post(&format!("{}/mcp", face.http), r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/list"}"#, "application/json").await;
    assert_eq!(s, 200, "the dialect answers errors in JSON-RPC: {r}");
    assert!(r["error"]["message"].as_str().unwrap().contains(r#"key "id" appears twice"#), "{r}");
    for id in ["dup-a", "dup-b"] {
        let e = face.grpc.get_episode(pb::GetEpisodeRequest { episode_id: id.into(), include_trace: false }).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::NotFound, "no episode was opened: {e:?}");
    }
}

/// A message over the cap closes the connection with 1009 (message too big) and a reason naming the cap,
/// not with no status (1005); a message under it on a new connection is still served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_over_the_cap_closes_with_1009() {
    let face = spawn_face(&[], 4).await;
    let mut ws = connect(&face).await;
    let big = format!(r#"{{"type":"state","pad":"{}"}}"#, "x".repeat(memgym::api::MAX_MESSAGE_BYTES + 1));
    ws.send(Message::Text(big.into())).await.expect("sent");
    let close = loop {
        match tokio::time::timeout(Duration::from_secs(30), ws.next()).await.expect("an answer in time") {
            Some(Ok(Message::Close(frame))) => break frame,
            Some(Ok(_)) => continue,
            other => panic!("expected a close frame, got {other:?}"),
        }
    };
    let frame = close.expect("a close frame with a status");
    assert_eq!(u16::from(frame.code), 1009, "{frame:?}");
    assert!(frame.reason.contains("message too big") && frame.reason.contains(&memgym::api::MAX_MESSAGE_BYTES.to_string()), "{frame:?}");
    let mut again = connect(&face).await;
    send(&mut again, json!({"type": "state"})).await;
    assert_eq!(recv(&mut again).await["type"], "state");
}
