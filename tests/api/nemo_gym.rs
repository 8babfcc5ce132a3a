//! NeMo Gym's resources-server face end to end: the real server on loopback with `--nemo-gym-addr`, real
//! HTTP requests carrying the session cookie as NeMo Gym's clients do, checked against gRPC on the same
//! server. (NeMo Gym's own agent, client and session-contract check run against the binary in
//! tests/python/protocols/test_nemo_gym.py.)

use memgym::api::faces::nemo_gym::NemoGymOptions;
use memgym::api::pb;
use memgym::api::pb::memory_env_client::MemoryEnvClient;
use serde_json::{json, Value};
use tonic::transport::Channel;

struct Face {
    http: String,
    grpc: MemoryEnvClient<Channel>,
    _server: memgym::app::server::Running,
}

async fn spawn_face() -> Face {
    let options = NemoGymOptions { allowed_hosts: vec!["127.0.0.1".into(), "localhost".into()] };
    let s = crate::helpers::spawn_faces(&[], crate::helpers::FaceOptions { nemo_gym: Some(options), ..Default::default() }).await;
    Face { http: format!("http://{}", s.server.nemo_gym_addr.expect("nemo-gym face")), grpc: s.grpc, _server: s.server }
}

/// One HTTP exchange's status, `Set-Cookie` value of `memgym_session` (if set) and body.
struct Reply {
    status: u16,
    cookie: Option<String>,
    text: String,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("JSON body ({e}): {}", self.text))
    }
}

async fn post(face: &Face, path: &str, cookie: Option<&str>, accept: &str, body: &str) -> Reply {
    let mut r =
        reqwest::Client::new().post(format!("{}{path}", face.http)).header("content-type", "application/json").header("accept", accept);
    if let Some(c) = cookie {
        r = r.header("cookie", format!("other=1; memgym_session={c}"));
    }
    let r = r.body(body.to_string()).send().await.expect("http");
    let status = r.status().as_u16();
    let cookie = r
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| v.strip_prefix("memgym_session="))
        .map(|v| v.split(';').next().unwrap_or_default().to_string());
    Reply { status, cookie, text: String::from_utf8_lossy(&r.bytes().await.unwrap()).into_owned() }
}

const RUN: &str = r#"{"responses_create_params": {"input": "Edit the memory."}, "question_id": "conv-26:q3", "seed": 5, "_ng_task_index": 0, "agent_ref": {"name": "a"}}"#;

fn verify_body() -> String {
    json!({"responses_create_params": {"input": "Edit the memory."}, "response": {"output": []}, "_ng_task_index": 0}).to_string()
}

#[tokio::test]
async fn an_episode_over_the_face_scores_as_the_same_calls_over_grpc() {
    let mut face = spawn_face().await;
    let seeded = post(&face, "/seed_session", None, "*/*", RUN).await;
    assert_eq!(seeded.status, 200, "{}", seeded.text);
    let id = seeded.cookie.clone().expect("the seed sets the session cookie");
    let state = seeded.json();
    assert_eq!((state["episode_id"].as_str(), state["question_id"].as_str()), (Some(id.as_str()), Some("conv-26:q3")));

    // The tools: text by default (what the policy reads), the structured result when JSON is asked for.
    let search = json!({"query": "What did Caroline research?"}).to_string();
    let hits = post(&face, "/search_memory", Some(&id), "*/*", &search).await;
    assert!(hits.status == 200 && hits.text.starts_with("[m"), "{}", hits.text);
    let sample = post(&face, "/sample_memory", Some(&id), "application/json", r#"{"k": 3}"#).await;
    let sampled = sample.json();
    assert_eq!(sampled["tool"], "sample_memory", "{sampled}");
    let victim = sampled["memories"][0]["id"].as_str().expect("a memory id").to_string();
    let delete = json!({"memory_id": victim}).to_string();
    let deleted = post(&face, "/ng-rollout/r-1/delete_memory", Some(&id), "*/*", &delete).await;
    assert_eq!(deleted.status, 200, "NeMo Gym's rollout prefix reaches the same route: {}", deleted.text);

    // The same calls on a gRPC episode of the same question and seed.
    let g = face
        .grpc
        .create_episode(pb::CreateEpisodeRequest {
            episode_id: "grpc-twin".into(),
            question_id: "conv-26:q3".into(),
            seed: Some(5),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(g.into_inner().state.unwrap().initial_memory_count, state["initial_memory_count"].as_u64().unwrap() as u32);
    for (tool, args) in [("search_memory", &search), ("sample_memory", &r#"{"k": 3}"#.to_string()), ("delete_memory", &delete)] {
        let call = pb::CallToolRequest {
            episode_id: "grpc-twin".into(),
            tool_name: tool.into(),
            arguments_json: args.clone(),
            ..Default::default()
        };
        face.grpc.call_tool(call).await.expect("the twin's call");
    }
    let twin = face.grpc.score_episode(pb::ScoreEpisodeRequest { episode_id: "grpc-twin".into() }).await.unwrap().into_inner();

    let verified = post(&face, "/verify", Some(&id), "*/*", &verify_body()).await;
    assert_eq!(verified.status, 200, "{}", verified.text);
    let v = verified.json();
    assert_eq!(v["reward"].as_f64(), Some(twin.reward), "{v}");
    assert_eq!(v["breakdown"]["reward"].as_f64(), Some(twin.reward));
    assert_eq!(v["p_new"].as_f64(), Some(twin.p_new), "the breakdown's numbers are at the top level too");
    assert_eq!(v["final_memory_count"].as_u64(), Some(u64::from(twin.final_memory_count)));
    assert_eq!(v["steps_used"].as_u64(), Some(3));
    assert_eq!(v["breakdown"]["episode_id"], id.as_str());
    assert_eq!(v["_ng_task_index"], 0, "the request comes back");
    assert!(v["response"].is_object() && v["responses_create_params"].is_object());

    // Verify closed the episode: a tool call or a second verify is refused as ended (409), over gRPC too.
    let late = post(&face, "/search_memory", Some(&id), "*/*", &search).await;
    assert_eq!(late.status, 409, "{}", late.text);
    assert_eq!(late.json()["error"]["reason"], "EPISODE_ENDED");
    assert_eq!(post(&face, "/verify", Some(&id), "*/*", &verify_body()).await.status, 409);
    let gone = face.grpc.get_episode(pb::GetEpisodeRequest { episode_id: id.clone(), ..Default::default() }).await.unwrap_err();
    assert_eq!(gone.code(), tonic::Code::FailedPrecondition);
}

#[tokio::test]
async fn cookies_keep_sessions_apart() {
    let face = spawn_face().await;
    let a = post(&face, "/seed_session", None, "*/*", RUN).await.cookie.unwrap();
    let b = post(&face, "/seed_session", None, "*/*", RUN).await.cookie.unwrap();
    assert_ne!(a, b, "each seed without a cookie opens its own episode");
    let note = json!({"operation": "create", "content": "Caroline moved to Lisbon in 2024."}).to_string();
    assert_eq!(post(&face, "/manage_memory", Some(&a), "*/*", &note).await.status, 200);
    let va = post(&face, "/verify", Some(&a), "*/*", &verify_body()).await.json();
    let vb = post(&face, "/verify", Some(&b), "*/*", &verify_body()).await.json();
    assert_eq!((va["steps_used"].as_u64(), vb["steps_used"].as_u64()), (Some(1), Some(0)), "b never saw a's edit");
    assert_eq!(vb["final_memory_count"], vb["initial_memory_count"]);
    assert_eq!(va["final_memory_count"].as_u64(), va["initial_memory_count"].as_u64().map(|n| n + 1));

    // A seed that sends its cookie back names its session again: the same keys are the same episode, other
    // keys a conflict.
    let c = post(&face, "/seed_session", None, "*/*", RUN).await.cookie.unwrap();
    let again = post(&face, "/seed_session", Some(&c), "*/*", RUN).await;
    assert_eq!((again.status, again.json()["created"].as_bool()), (200, Some(false)), "{}", again.text);
    let other = RUN.replace("conv-26:q3", "conv-26:q4");
    let conflict = post(&face, "/seed_session", Some(&c), "*/*", &other).await;
    assert_eq!(conflict.status, 409, "{}", conflict.text);
    assert_eq!(conflict.json()["error"]["reason"], "EPISODE_EXISTS");
    // An empty close body closes the cookie's session.
    let closed = post(&face, "/close_session", Some(&c), "*/*", "").await;
    assert_eq!((closed.status, closed.json()["resources_session_id"].as_str()), (200, Some(c.as_str())));
    assert_eq!(closed.cookie.as_deref(), Some(""), "the cookie is expired");
}

fn typed(session: &str, rollout: &str, task_data: Value) -> String {
    json!({"resources_session_id": session, "episode_id": {"rollout_id": rollout, "attempt": 0},
        "task_id": {"taskset": "memgym", "task_id": "3"}, "task_data": task_data})
    .to_string()
}

fn close(session: &str, rollout: &str) -> String {
    json!({"resources_session_id": session, "episode_id": {"rollout_id": rollout, "attempt": 0}}).to_string()
}

#[tokio::test]
async fn the_session_contract_of_nemo_gym_0_7() {
    let face = spawn_face().await;
    let data = json!({"question_id": "conv-26:q3"});
    // Seed and seed again: the same session (and the same episode, whose id is the session's).
    for _ in 0..2 {
        let r = post(&face, "/seed_session", None, "*/*", &typed("rs-1", "r1", data.clone())).await;
        let tools =
            json!({"server_name": "memgym", "url_path": "/mcp", "transport": "http", "headers": {"X-NeMo-Gym-Session-Token": "rs-1"}});
        assert_eq!(
            (r.status, r.json()),
            (200, json!({"resources_session_id": "rs-1", "resources_tools": tools})),
            "only the typed response's keys"
        );
        assert_eq!(r.cookie.as_deref(), Some("rs-1"));
    }
    // The same session for another episode, task or question is a conflict; nothing changes.
    for body in [
        typed("rs-1", "r2", data.clone()),
        typed("rs-1", "r1", json!({"question_id": "conv-26:q4"})),
        typed("rs-1", "r1", json!({"question_id": "conv-26:q3"})).replace("\"task_id\":\"3\"", "\"task_id\":\"4\""),
    ] {
        let r = post(&face, "/seed_session", None, "*/*", &body).await;
        assert_eq!(r.status, 409, "{body}: {}", r.text);
    }
    // A close naming another episode is a conflict; then close, and close again.
    assert_eq!(post(&face, "/close_session", None, "*/*", &close("rs-1", "r9")).await.status, 409);
    for _ in 0..2 {
        let r = post(&face, "/close_session", None, "*/*", &close("rs-1", "r1")).await;
        assert_eq!((r.status, r.json()), (200, json!({"resources_session_id": "rs-1"})));
    }
    // A close of a session never seeded succeeds, and keeps a late seed from opening it; so does the close
    // of one seeded.
    assert_eq!(post(&face, "/close_session", None, "*/*", &close("rs-never", "r1")).await.status, 200);
    for session in ["rs-1", "rs-never"] {
        let r = post(&face, "/seed_session", None, "*/*", &typed(session, "r1", data.clone())).await;
        assert_eq!(r.status, 409, "a seed after the close: {}", r.text);
        assert_eq!(r.json()["error"]["reason"], "EPISODE_ENDED");
    }
    // Without a question id or a seed, a session picks its question by its id: seeded again, the same one.
    for _ in 0..2 {
        let r = post(&face, "/seed_session", None, "*/*", &typed("rs-pick", "r1", json!({}))).await;
        assert_eq!(r.status, 200, "{}", r.text);
    }
}

#[tokio::test]
async fn bad_requests_are_refused_naming_the_field() {
    let face = spawn_face().await;
    let id = post(&face, "/seed_session", None, "*/*", RUN).await.cookie.unwrap();
    let cases: [(&str, Option<&str>, &str, u16, &str); 13] = [
        ("/seed_session", None, r#"{"questionid": "conv-26:q3"}"#, 422, "questionid"),
        ("/seed_session", None, r#"{"question_id": "conv-99:q1"}"#, 404, "question"),
        ("/seed_session", None, r#"{"seed": "x"}"#, 422, "seed"),
        ("/seed_session", None, r#"[1]"#, 422, "body"),
        ("/seed_session", None, r#"{"seed": 1, "seed": 2}"#, 422, "body"),
        ("/seed_session", None, &typed("bad id/1", "r", json!({})), 422, "resources_session_id"),
        ("/search_memory", None, r#"{"query": "x"}"#, 400, "memgym_session"),
        ("/search_memory", Some("no-such-episode"), r#"{"query": "x"}"#, 404, "no-such-episode"),
        ("/search_memory", Some(&id), r#"{"query": "x", "colour": "red"}"#, 422, "colour"),
        ("/delete_memory", Some(&id), r#"{"memory_id": "m9999"}"#, 404, "m9999"),
        ("/search_memory", Some(&id), r#"{"query": "#, 422, "body"),
        ("/verify", Some(&id), r#"{"response": {}}"#, 422, "responses_create_params"),
        ("/aggregate_metrics", None, r#"{"verify_responses": 3}"#, 422, "verify_responses"),
    ];
    for (path, cookie, body, status, names) in cases {
        let r = post(&face, path, cookie, "*/*", body).await;
        assert_eq!(r.status, status, "{path} {body}: {}", r.text);
        let detail = r.json()["detail"].as_str().unwrap_or_default().to_string();
        assert!(detail.contains(names), "{path} {body}: {detail}");
        assert!(detail.len() < 400, "a short message: {detail}");
    }
    assert_eq!(post(&face, "/teleport_memory", Some(&id), "*/*", "{}").await.status, 404);
    let r = reqwest::Client::new().get(format!("{}/verify", face.http)).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 405);
    let r = reqwest::Client::new().get(format!("{}/reverify_mode", face.http)).send().await.unwrap();
    assert_eq!(r.json::<Value>().await.unwrap(), json!("unsupported"));
    let r = reqwest::Client::new().post(format!("{}/verify", face.http)).header("host", "evil.example").body("{}").send().await.unwrap();
    assert_eq!(r.status().as_u16(), 403, "the Host allowlist guards this face too");
    // Nothing refused above changed the episode.
    let v = post(&face, "/verify", Some(&id), "*/*", &verify_body()).await.json();
    assert_eq!((v["steps_used"].as_u64(), v["final_memory_count"].clone()), (Some(0), v["initial_memory_count"].clone()));
}

#[tokio::test]
async fn aggregate_metrics_over_verify_responses() {
    let face = spawn_face().await;
    let mut rows = Vec::new();
    for (task, note) in [(0, true), (0, false), (1, true)] {
        let id = post(&face, "/seed_session", None, "*/*", RUN).await.cookie.unwrap();
        if note {
            let add = json!({"operation": "create", "content": "Caroline researched adoption agencies in May 2023."}).to_string();
            post(&face, "/manage_memory", Some(&id), "*/*", &add).await;
        }
        let mut v = post(&face, "/verify", Some(&id), "*/*", &verify_body()).await.json();
        v["_ng_task_index"] = json!(task);
        rows.push(v);
    }
    let r = post(&face, "/aggregate_metrics", None, "*/*", &json!({"verify_responses": rows}).to_string()).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let m = r.json();
    let mean = rows.iter().map(|v| v["reward"].as_f64().unwrap()).sum::<f64>() / 3.0;
    assert!((m["agent_metrics"]["mean/reward"].as_f64().unwrap() - mean).abs() < 1e-12, "{m}");
    assert_eq!(m["key_metrics"]["mean/steps_used"].as_f64(), Some(2.0 / 3.0));
    assert_eq!(m["group_level_metrics"].as_array().map(Vec::len), Some(2));
    assert_eq!(m["group_level_metrics"][1]["num_rollouts"], 1);
}

/// An rmcp client (the official Rust SDK) at `url` that sends `headers` on every request, as NeMo Gym's MCP
/// clients replay the seed's `resources_tools.headers`.
async fn mcp_client(url: &str, headers: &Value) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    use rmcp::ServiceExt;
    let mut custom = std::collections::HashMap::new();
    for (k, v) in headers.as_object().expect("headers are an object") {
        custom.insert(http::HeaderName::from_bytes(k.as_bytes()).unwrap(), http::HeaderValue::from_str(v.as_str().unwrap()).unwrap());
    }
    let config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(custom);
    ().serve(rmcp::transport::StreamableHttpClientTransport::from_config(config)).await.expect("the MCP client connects")
}

#[tokio::test]
async fn the_seed_hands_out_mcp_access_bound_to_its_session() {
    let face = spawn_face().await;
    let seeded = post(&face, "/seed_session", None, "*/*", &typed("rs-mcp", "r1", json!({"question_id": "conv-26:q3", "seed": 5}))).await;
    assert_eq!(seeded.status, 200, "{}", seeded.text);
    let access = seeded.json()["resources_tools"].clone();
    assert_eq!(access["url_path"], "/mcp");
    let c = mcp_client(&format!("{}{}", face.http, access["url_path"].as_str().unwrap()), &access["headers"]).await;
    let tools = c.peer().list_tools(None).await.expect("tools/list").tools;
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, memgym::tools::TOOL_NAMES.to_vec(), "the six memory tools, no episode tool");
    assert!(tools.iter().all(|t| t.input_schema["properties"].get("episode_id").is_none()), "the token names the episode");

    // A call over MCP edits the session's episode: the same text as the cookie's route on a twin session.
    let args = json!({"query": "What did Caroline research?", "top_k": 3});
    let Value::Object(map) = args.clone() else { unreachable!() };
    let r = c.peer().call_tool(rmcp::model::CallToolRequestParams::new("search_memory").with_arguments(map)).await.expect("tools/call");
    let text = r.content.first().and_then(|c| c.as_text()).map(|t| t.text.clone()).unwrap_or_default();
    let twin = post(&face, "/seed_session", None, "*/*", &typed("rs-twin", "r2", json!({"question_id": "conv-26:q3", "seed": 5}))).await;
    let twin_text = post(&face, "/search_memory", twin.cookie.as_deref(), "*/*", &args.to_string()).await.text;
    assert_eq!(text, twin_text);
    let verified = post(&face, "/verify", Some("rs-mcp"), "application/json", &verify_body()).await.json();
    assert_eq!(verified["steps_used"], 1, "the MCP call was a step of the cookie's episode: {verified}");

    // Scoring is not a tool here; without the header the MCP endpoint refuses, naming it.
    let Value::Object(none) = json!({}) else { unreachable!() };
    let refused = c.peer().call_tool(rmcp::model::CallToolRequestParams::new("score_episode").with_arguments(none)).await;
    assert!(refused.is_err() || refused.unwrap().is_error == Some(true), "score_episode is not served");
    let bare = reqwest::Client::new()
        .post(format!("{}/mcp", face.http))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(bare.status(), 400);
    let body: Value = bare.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32600);
    assert!(body["error"]["message"].as_str().unwrap().starts_with("X-NeMo-Gym-Session-Token"), "{body}");
}

/// The refusals axum writes in plain text reach NeMo Gym's client in FastAPI's shape, `{"detail": ...}` at the
/// same status: a body over the 32 MiB cap (413) and a foreign Host (403).
#[tokio::test]
async fn raw_refusals_are_fastapi_json() {
    let face = spawn_face().await;
    let big = " ".repeat(memgym::api::MAX_MESSAGE_BYTES + 1);
    let r = post(&face, "/seed_session", None, "*/*", &big).await;
    assert_eq!(r.status, 413);
    assert!(r.json()["detail"].as_str().is_some_and(|d| d.contains("length limit")), "{}", r.text);
    let r =
        reqwest::Client::new().post(format!("{}/seed_session", face.http)).header("host", "evil.example").body("{}").send().await.unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let body: Value = r.json().await.unwrap();
    assert!(body["detail"].as_str().is_some_and(|d| d.contains("--http-allowed-hosts")), "{body}");
}
