//! The Open Reward Standard face end to end over raw HTTP and SSE, against the real server on loopback,
//! checked against gRPC: a full episode whose `submit` reward is ScoreEpisode's, the once-only reward
//! (submit twice, calls after it, the budget's last step), isolation between sessions, exactly-once calls
//! by `task_id`, and the refusals of bad input. (The `openreward` SDK and TRL's environment run against the
//! binary in tests/python/protocols.)

use memgym::api::faces::ors::OrsOptions;
use memgym::api::pb;
use memgym::api::pb::memory_env_client::MemoryEnvClient;
use serde_json::{json, Value};
use tonic::transport::Channel;

struct Face {
    _server: memgym::app::server::Running,
    base: String,
    grpc: MemoryEnvClient<Channel>,
    env: std::sync::Arc<memgym::episode::Environment>,
}

async fn spawn_face(options: OrsOptions) -> Face {
    let s = crate::helpers::spawn_faces(&[], crate::helpers::FaceOptions { ors: Some(options), ..Default::default() }).await;
    Face { base: format!("http://{}", s.server.ors_addr.expect("ors face")), grpc: s.grpc, env: s.env, _server: s.server }
}

async fn default_face() -> Face {
    spawn_face(OrsOptions::new(vec!["127.0.0.1".into()])).await
}

/// A request's status and JSON body.
async fn send(req: reqwest::RequestBuilder) -> (u16, Value) {
    let r = req.send().await.expect("http");
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

impl Face {
    async fn get(&self, path: &str, sid: Option<&str>) -> (u16, Value) {
        let mut r = reqwest::Client::new().get(format!("{}{path}", self.base));
        if let Some(s) = sid {
            r = r.header("x-session-id", s);
        }
        send(r).await
    }

    async fn post(&self, path: &str, sid: Option<&str>, body: &str) -> (u16, Value) {
        let mut r =
            reqwest::Client::new().post(format!("{}{path}", self.base)).header("content-type", "application/json").body(body.to_string());
        if let Some(s) = sid {
            r = r.header("x-session-id", s);
        }
        send(r).await
    }

    /// A session with its episode for `create` (a /create body); returns (sid, episode id).
    async fn session(&self, create: Value) -> (String, String) {
        let (status, minted) = self.post("/create_session", None, "").await;
        assert_eq!(status, 200, "{minted}");
        let sid = minted["sid"].as_str().expect("sid").to_string();
        let (status, created) = self.post("/create", Some(&sid), &create.to_string()).await;
        assert_eq!(status, 200, "{created}");
        assert_eq!(created["sid"], sid.as_str());
        (sid, created["episode_id"].as_str().expect("episode_id").to_string())
    }

    /// `POST /call`: the SSE events (event, data) and the end event's JSON.
    async fn call(&self, sid: &str, body: Value) -> (Vec<(String, String)>, Value) {
        let r = reqwest::Client::new()
            .post(format!("{}/memgym/call", self.base))
            .header("x-session-id", sid)
            .header("accept", "text/event-stream")
            .body(body.to_string())
            .send()
            .await
            .expect("http");
        assert_eq!(r.status().as_u16(), 200);
        assert!(r.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
        let events = sse_events(&r.text().await.unwrap());
        assert_eq!(events[0].0, "task_id", "the first event names the task: {events:?}");
        let last = events.last().expect("an event");
        assert_eq!(last.0, "end", "{events:?}");
        let joined: String = events.iter().filter(|(e, _)| e == "chunk" || e == "end").map(|(_, d)| d.as_str()).collect();
        (events.clone(), serde_json::from_str(&joined).expect("the result is JSON"))
    }

    async fn tool(&self, sid: &str, name: &str, input: Value) -> Value {
        self.call(sid, json!({"name": name, "input": input})).await.1
    }

    async fn grpc_score(&mut self, episode: &str) -> pb::ScoreEpisodeResponse {
        self.grpc.score_episode(pb::ScoreEpisodeRequest { episode_id: episode.into() }).await.expect("ScoreEpisode").into_inner()
    }

    async fn grpc_state(&mut self, episode: &str) -> Result<pb::EpisodeState, tonic::Status> {
        self.grpc
            .get_episode(pb::GetEpisodeRequest { episode_id: episode.into(), include_trace: false })
            .await
            .map(|r| r.into_inner().state.unwrap())
    }
}

/// Parses an SSE body into (event, data) pairs (comment lines skipped, data lines joined by newlines).
fn sse_events(body: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for block in body.split("\n\n") {
        let (mut event, mut data) = (None, Vec::new());
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("event:") {
                event = Some(v.trim_start().to_string());
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push(v.strip_prefix(' ').unwrap_or(v).to_string());
            }
        }
        if let Some(e) = event {
            out.push((e, data.join("\n")));
        }
    }
    out
}

/// The text of a successful tool output.
fn text(out: &Value) -> &str {
    assert_eq!(out["ok"], true, "{out}");
    out["output"]["blocks"][0]["text"].as_str().expect("a text block")
}

#[tokio::test]
async fn a_full_episode_over_sse_is_rewarded_as_score_episode_scores_it() {
    let mut face = default_face().await;
    let (_, envs) = face.get("/list_environments", None).await;
    assert_eq!(envs, json!(["memgym"]));
    let (_, splits) = face.get("/memgym/splits", None).await;
    assert_eq!(splits, json!([{"name": "train", "type": "train"}, {"name": "test", "type": "test"}]));
    let (_, tools) = face.get("/tools", None).await;
    let names: Vec<&str> = tools["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names[..6], memgym::tools::TOOL_NAMES);
    assert_eq!(names[6], "submit");
    assert_eq!(tools["tools"][0]["input_schema"]["required"], json!(["query"]));

    // The tasks: the split's questions without category 5, in dataset order, with no gold answer.
    let env = face.env.clone();
    let ds = env.dataset();
    let test: Vec<_> = ds.questions.iter().filter(|q| q.split == memgym::dataset::Split::Test && q.category != 5).collect();
    let (_, n) = face.post("/num_tasks", None, r#"{"split": "test"}"#).await;
    assert_eq!(n["num_tasks"].as_u64(), Some(test.len() as u64));
    let (_, all) = face.post("/memgym/tasks", None, r#"{"split": "test"}"#).await;
    assert_eq!(all["tasks"].as_array().unwrap().len(), test.len());
    assert_eq!(all["tasks"][0], memgym::api::faces::ors::task_spec(test[0]));
    assert!(all["tasks"][0].get("answer").is_none(), "a task spec never carries the gold answer");
    let (_, last) = face.post("/task", None, r#"{"split": "test", "index": -1}"#).await;
    assert_eq!(last["task"]["question_id"], test[test.len() - 1].id.as_str(), "a negative index counts from the end");
    let (_, range) = face.post("/task_range", None, r#"{"split": "test", "start": -3}"#).await;
    assert_eq!(range["tasks"].as_array().unwrap().len(), 3);
    let (_, range) = face.post("/task_range", None, r#"{"split": "test", "start": 5, "stop": 2}"#).await;
    assert_eq!(range["tasks"], json!([]), "an empty range, as Python's");

    // One episode: the question's gold answer written into memory, then submit.
    let q = test[2];
    let (sid, episode) = face.session(json!({"split": "test", "index": 2})).await;
    let (_, prompt) = face.get("/prompt", Some(&sid)).await;
    assert!(prompt[1]["text"].as_str().unwrap().contains(&q.question), "{prompt}");
    let (_, messages) = face.get("/memgym/messages", Some(&sid)).await;
    assert_eq!((messages[0]["role"].as_str(), messages[1]["role"].as_str()), (Some("system"), Some("user")));
    let (_, task_tools) = face.get("/task_tools", Some(&sid)).await;
    assert_eq!(task_tools, tools);
    let (events, found) = face.call(&sid, json!({"name": "search_memory", "input": {"query": q.question}})).await;
    assert!(text(&found).starts_with("[m"), "{found}");
    assert_eq!((found["output"]["reward"].clone(), found["output"]["finished"].clone()), (Value::Null, json!(false)));
    assert_eq!(found["output"]["metadata"]["tool"], "search_memory");
    assert_eq!(events.len(), 2, "task_id and end: {events:?}");
    let answer = q.answer.clone().unwrap_or_default();
    let made = face.tool(&sid, "manage_memory", json!({"operation": "create", "content": format!("{}: {answer}", q.question)})).await;
    assert!(text(&made).contains("created"), "{made}");
    let (_, pinged) = face.post("/ping", Some(&sid), "").await;
    assert_eq!(pinged, json!({"status": "ok"}));
    let submitted = face.tool(&sid, "submit", json!({})).await;
    let out = &submitted["output"];
    assert_eq!(out["finished"], true, "{submitted}");
    assert!(text(&submitted).starts_with("Scored: reward"), "{submitted}");
    let g = face.grpc_score(&episode).await;
    assert_eq!(out["reward"].as_f64(), Some(g.reward), "the reward is ScoreEpisode's");
    assert_eq!(out["metadata"]["score"]["p_new"].as_f64(), Some(g.p_new));
    assert_eq!(out["metadata"]["episode_id"], episode.as_str());
    assert_eq!(g.steps_used, 2);

    // The same task played over gRPC on a fresh episode earns the same reward.
    let opened =
        face.grpc.create_episode(pb::CreateEpisodeRequest { question_id: q.id.clone(), ..Default::default() }).await.unwrap().into_inner();
    let replay = opened.state.unwrap().episode_id;
    for (tool, args) in [
        ("search_memory", json!({"query": q.question})),
        ("manage_memory", json!({"operation": "create", "content": format!("{}: {answer}", q.question)})),
    ] {
        let req = pb::CallToolRequest {
            episode_id: replay.clone(),
            tool_name: tool.into(),
            arguments_json: args.to_string(),
            ..Default::default()
        };
        face.grpc.call_tool(req).await.expect("CallTool");
    }
    assert_eq!(face.grpc_score(&replay).await.reward, g.reward);

    // Deleting the session closes its episode; the session is gone.
    let (status, deleted) = face.post("/delete", Some(&sid), "").await;
    assert_eq!((status, deleted), (200, json!({"sid": sid})));
    let ended = face.grpc_state(&episode).await.unwrap_err();
    assert_eq!(ended.code(), tonic::Code::FailedPrecondition, "{ended:?}");
    let (status, again) = face.post("/delete", Some(&sid), "").await;
    assert_eq!(status, 200, "delete is idempotent: {again}");
    let (status, gone) = face.post("/ping", Some(&sid), "").await;
    assert_eq!(status, 404, "{gone}");
}

#[tokio::test]
async fn a_session_yields_one_reward() {
    let mut face = default_face().await;
    let (sid, episode) = face.session(json!({"split": "train", "index": 0})).await;
    let (_, first) = face.call(&sid, json!({"name": "submit", "input": {}, "task_id": "submit-1"})).await;
    let reward = first["output"]["reward"].as_f64().expect("a reward");
    // The submit's own task id sent again (a reconnect after a broken stream) gets the same answer.
    let (_, retried) = face.call(&sid, json!({"name": "submit", "input": {}, "task_id": "submit-1"})).await;
    assert_eq!(retried, first);
    // Submit again, any tool after it: refused in-band, no second reward.
    let again = face.tool(&sid, "submit", json!({})).await;
    assert_eq!((again["ok"].clone(), again["reason"].clone()), (json!(false), json!("episode_finished")), "{again}");
    let after = face.tool(&sid, "delete_memory", json!({"memory_id": "m0000"})).await;
    assert_eq!(after["reason"], "episode_finished", "{after}");
    assert_eq!(face.grpc_state(&episode).await.unwrap().steps_used, 0, "nothing was applied after submit");
    assert_eq!(face.grpc_score(&episode).await.reward, reward);

    // The step budget's last call finishes the episode with the reward; submit after it is refused.
    let (sid, episode) = face.session(json!({"task_spec": {"question_id": "conv-26:q3", "max_steps": 2}})).await;
    let one = face.tool(&sid, "search_memory", json!({"query": "Caroline"})).await;
    assert_eq!(one["output"]["finished"], false);
    let two = face.tool(&sid, "sample_memory", json!({})).await;
    assert_eq!(two["output"]["finished"], true, "{two}");
    assert!(text(&two).contains("The step budget is spent. Scored: reward"), "{two}");
    assert_eq!(two["output"]["reward"].as_f64(), Some(face.grpc_score(&episode).await.reward));
    let late = face.tool(&sid, "submit", json!({})).await;
    assert_eq!(late["reason"], "episode_finished", "{late}");

    // A session is one task: /create again for it answers as before, for another task it is refused.
    let (_, same) = face.post("/create", Some(&sid), r#"{"task_spec": {"question_id": "conv-26:q3"}}"#).await;
    assert_eq!(same["episode_id"], episode.as_str());
    let (status, other) = face.post("/create", Some(&sid), r#"{"split": "train", "index": 1}"#).await;
    assert_eq!(status, 409, "{other}");
    assert!(other["detail"].as_str().unwrap().contains("one session is one task"), "{other}");
}

#[tokio::test]
async fn sessions_are_isolated_and_a_task_id_applies_a_call_once() {
    let mut face = default_face().await;
    let task = json!({"task_spec": {"question_id": "conv-26:q3"}});
    let (a, ep_a) = face.session(task.clone()).await;
    let (b, ep_b) = face.session(task).await;
    assert_ne!(ep_a, ep_b, "one episode per session");
    let delete = json!({"name": "delete_memory", "input": {"memory_id": "m0000"}, "task_id": "del-1"});
    let (events, first) = face.call(&a, delete.clone()).await;
    assert_eq!(events[0].1, "del-1", "the task_id event echoes the client's");
    assert!(text(&first).contains("m0000"), "{first}");
    let (_, again) = face.call(&a, delete).await;
    let untimed = |mut v: Value| {
        v["output"]["metadata"]["metrics"]["tool_ms"] = Value::Null;
        v
    };
    assert_eq!(untimed(again), untimed(first.clone()), "the same task_id is answered with the first result");
    assert_eq!(face.grpc_state(&ep_a).await.unwrap().steps_used, 1, "and applied once");
    let (_, reused) = face.call(&a, json!({"name": "sample_memory", "input": {}, "task_id": "del-1"})).await;
    assert_eq!(reused["reason"], "input_validation", "a task_id reused for another call: {reused}");
    // Session b's memory still holds m0000, and its steps are its own.
    let found = face.tool(&b, "delete_memory", json!({"memory_id": "m0000"})).await;
    assert!(text(&found).contains("m0000"), "{found}");
    let state_b = face.grpc_state(&ep_b).await.unwrap();
    assert_eq!((state_b.steps_used, state_b.memory_count + 1), (1, state_b.initial_memory_count));
    // a's reward is a's: b's submit does not finish a.
    let scored_b = face.tool(&b, "submit", json!({})).await;
    assert_eq!(scored_b["output"]["finished"], true);
    let still = face.tool(&a, "sample_memory", json!({})).await;
    assert_eq!(still["output"]["finished"], false, "{still}");
}

#[tokio::test]
async fn bad_input_is_refused_naming_the_field() {
    let face = spawn_face(OrsOptions { max_sessions: 3, ..OrsOptions::new(vec!["127.0.0.1".into()]) }).await;
    let long = "z".repeat(10_000);
    let detail = |v: &Value| v["detail"].as_str().unwrap_or_default().to_string();
    for (path, body, status, starts) in [
        ("/tasks", "{", 400, "body: not valid JSON"),
        ("/tasks", "[1]", 400, "body: must be a JSON object, got an array"),
        ("/tasks", r#"{"split": "train", "split": "test"}"#, 400, "body: "),
        ("/tasks", "{}", 400, "split: is required"),
        ("/tasks", r#"{"split": 3}"#, 400, "split: must be a string, got a number"),
        ("/num_tasks", r#"{"split": "dev"}"#, 400, "split: unknown split \"dev\""),
        ("/task", r#"{"split": "train"}"#, 400, "index: is required"),
        ("/task", r#"{"split": "train", "index": 1.5}"#, 400, "index: must be a whole number"),
        ("/task", r#"{"split": "train", "index": -100000}"#, 400, "index: -100000 is out of range"),
        ("/task_range", r#"{"split": "train", "colour": 1}"#, 400, "colour: unknown key"),
        ("/other/tasks", r#"{"split": "train"}"#, 404, "unknown environment \"other\""),
    ] {
        let (s, v) = face.post(path, None, body).await;
        assert_eq!(s, status, "{path} {body}: {v}");
        assert!(detail(&v).starts_with(starts), "{path} {body}: {v}");
    }
    let (s, v) = face.post("/task_range", None, &format!(r#"{{"split": "{long}"}}"#)).await;
    assert!(s == 400 && detail(&v).len() < 200, "a long value is quoted short: {v}");

    // Sessions: the header is required; an unknown one is 404; /call before /create is 404.
    let (s, v) = face.post("/create", None, r#"{"split": "train", "index": 0}"#).await;
    assert!(s == 400 && detail(&v).starts_with("X-Session-ID: header is required"), "{v}");
    let (s, v) = face.post("/create", Some(&long[..100]), r#"{"split": "train", "index": 0}"#).await;
    assert!(s == 404 && detail(&v).contains("not found") && detail(&v).len() < 300, "{v}");
    let (_, minted) = face.post("/create_session", None, "{}").await;
    let sid = minted["sid"].as_str().unwrap().to_string();
    let r = reqwest::Client::new().post(format!("{}/memgym/call", face.base)).header("x-session-id", &sid).body(r#"{"name": "submit"}"#);
    let (s, v) = send(r).await;
    assert!(s == 404 && detail(&v).contains("POST /create first"), "{v}");
    for (body, starts) in [
        (r#"{}"#, "task_spec: is required"),
        (r#"{"split": "train"}"#, "index: is required with split"),
        (r#"{"index": 0}"#, "split: is required with index"),
        (
            r#"{"split": "train", "index": 0, "task_spec": {"question_id": "conv-26:q3"}}"#,
            "task_spec: give task_spec, or split and index, not both",
        ),
        (r#"{"task_spec": "conv-26:q3"}"#, "task_spec: must be an object"),
        (r#"{"task_spec": {}}"#, "task_spec.question_id: is required"),
        (r#"{"task_spec": {"question_id": "conv-99:q1"}}"#, "task_spec.question_id: question \"conv-99:q1\" not found"),
        (r#"{"task_spec": {"question_id": "conv-26:q3", "split": "train"}}"#, "task_spec.split: does not match"),
        (r#"{"task_spec": {"question_id": "conv-26:q3", "answer": "x"}}"#, "task_spec.answer: unknown key"),
        (r#"{"task_spec": {"question_id": "conv-26:q3", "max_steps": "x"}}"#, "max_steps: must be a non-negative integer"),
        (r#"{"split": "train", "index": 0, "toolset_name": "codex"}"#, "toolset_name: memgym serves no toolsets"),
        (r#"{"split": "train", "index": 0, "env_name": "gsm8k"}"#, "unknown environment"),
    ] {
        let (s, v) = face.post("/create", Some(&sid), body).await;
        assert!((400..500).contains(&s) && detail(&v).starts_with(starts), "{body}: {s} {v}");
    }
    // A refused /create leaves the session creatable.
    let (s, created) = face.post("/create", Some(&sid), r#"{"split": "train", "index": 0, "secrets": {}}"#).await;
    assert_eq!(s, 200, "{created}");
    for (body, status, starts) in [
        (r#"{"input": {}}"#, 400, "name: is required"),
        (r#"{"name": "submit", "input": [1]}"#, 400, "input: must be an object, got an array"),
        (r#"{"name": "submit", "input": {}, "task_id": "a b"}"#, 400, "task_id: must be 1 to 128"),
        (r#"{"name": "submit", "input": {}, "colour": 1}"#, 400, "colour: unknown key"),
    ] {
        let r = reqwest::Client::new().post(format!("{}/call", face.base)).header("x-session-id", &sid).body(body);
        let (s, v) = send(r).await;
        assert!(s == status && detail(&v).starts_with(starts), "{body}: {s} {v}");
    }
    // In-band refusals of the policy's mistakes: the episode goes on.
    for (name, input, reason, says) in [
        ("search_memory", json!({}), "input_validation", "query"),
        ("delete_memory", json!({"memory_id": "m9999"}), "input_validation", "m9999"),
        ("teleport_memory", json!({}), "not_found", "teleport_memory"),
        ("submit", json!({"now": true}), "input_validation", "now: unknown argument"),
    ] {
        let r = face.tool(&sid, name, input).await;
        assert_eq!((r["ok"].clone(), r["reason"].as_str()), (json!(false), Some(reason)), "{name}: {r}");
        assert!(r["error"].as_str().unwrap().contains(says), "{name}: {r}");
    }
    let (s, v) = face.post("/score_group", Some(&sid), r#"{"candidates": []}"#).await;
    assert!(s == 404 && detail(&v).starts_with("score_group: memgym does not score groups"), "{v}");
    // The session cap (3 here): 503 with Retry-After.
    face.post("/create_session", None, "").await;
    face.post("/create_session", None, "").await;
    let r = reqwest::Client::new().post(format!("{}/create_session", face.base)).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 503);
    assert_eq!(r.headers()["retry-after"], "1", "the gRPC face's RetryInfo delay");
    assert!(r.text().await.unwrap().contains("--ors-max-sessions"));
    // A session whose episode ended elsewhere (closed over gRPC) is 410 Gone.
    let episode = created["episode_id"].as_str().unwrap();
    face.grpc.clone().close_episode(pb::CloseEpisodeRequest { episode_id: episode.into() }).await.unwrap();
    let (s, v) = face.post("/ping", Some(&sid), "").await;
    assert!(s == 410 && detail(&v).contains("ended"), "{v}");
    let r = reqwest::Client::new().post(format!("{}/call", face.base)).header("x-session-id", &sid).body(r#"{"name": "submit"}"#);
    assert_eq!(send(r).await.0, 410);
    // The Host allowlist.
    let r = reqwest::Client::new().get(format!("{}/tools", face.base)).header("host", "evil.example:80");
    assert_eq!(send(r).await.0, 403);
}

/// The refusals axum writes in plain text reach the client in FastAPI's shape, `{"detail": ...}` at the same
/// status, as every other refusal of the face: a body over the 32 MiB cap (413) and a foreign Host (403).
#[tokio::test]
async fn raw_refusals_are_fastapi_json() {
    let face = default_face().await;
    let big = vec![b' '; memgym::api::MAX_MESSAGE_BYTES + 1];
    let (status, body) = send(reqwest::Client::new().post(format!("{}/create_session", face.base)).body(big)).await;
    assert_eq!(status, 413);
    assert!(body["detail"].as_str().is_some_and(|d| d.contains("length limit")), "{body}");
    let (status, body) =
        send(reqwest::Client::new().post(format!("{}/create_session", face.base)).header("host", "evil.example").body("{}")).await;
    assert_eq!(status, 403);
    assert!(body["detail"].as_str().is_some_and(|d| d.contains("--http-allowed-hosts")), "{body}");
}
