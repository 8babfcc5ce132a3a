//! The one fake OpenAI server: a real HTTP server on loopback that speaks the chat-completions and
//! embeddings APIs, for tests of the LLM client, the LLM evaluators, the LLM-backed tools and the OpenAI
//! embedder. Shared by the unit tests (`src/lib.rs` includes it once with `#[path]`, as
//! `crate::fake_openai`) and the gRPC integration tests (`tests/api/`).
//!
//! It records every request (path, body, `Authorization`) and answers from a script: queued replies
//! first (status, body, delay; any route), then the route's responder. By default `/v1/embeddings`
//! answers deterministic vectors ([`fake_vector`]) of the dimension given at start.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde_json::Value;

/// One canned reply.
#[derive(Debug, Clone)]
pub struct Canned {
    /// HTTP status.
    pub status: u16,
    /// Raw body (sent as application/json).
    pub body: String,
    /// Wait before answering.
    pub delay: Duration,
}

impl Canned {
    /// A 200 chat completion whose message content is `text`.
    pub fn answer(text: &str) -> Canned {
        Canned { status: 200, body: completion(text), delay: Duration::ZERO }
    }
    /// An error status with an OpenAI-shaped error body.
    pub fn error(status: u16, message: &str) -> Canned {
        Canned { status, body: serde_json::json!({"error": {"message": message, "type": "test"}}).to_string(), delay: Duration::ZERO }
    }
    /// A 200 with a raw body.
    pub fn raw(body: &str) -> Canned {
        Canned { status: 200, body: body.to_string(), delay: Duration::ZERO }
    }
    /// A 200 with a JSON body.
    pub fn json(body: &Value) -> Canned {
        Canned::raw(&body.to_string())
    }
    /// The same reply with another status.
    pub fn status(mut self, status: u16) -> Canned {
        self.status = status;
        self
    }
    /// The same reply after `delay`.
    pub fn after(mut self, delay: Duration) -> Canned {
        self.delay = delay;
        self
    }
}

/// The body of a 200 chat completion answering `text`.
pub fn completion(text: &str) -> String {
    serde_json::json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": "fake",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    })
    .to_string()
}

/// A chat completion whose message carries `tool_calls` (`(id, name, arguments)`, arguments as the
/// string the API sends) and `content`, with finish reason `tool_calls` (`stop` when there is none):
/// what vLLM and llama.cpp's server answer a request with `tools`.
pub fn tool_calls_reply(content: Option<&str>, calls: &[(&str, &str, &str)]) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| serde_json::json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}))
        .collect();
    let finish = if calls.is_empty() { "stop" } else { "tool_calls" };
    let mut message = serde_json::json!({"role": "assistant", "content": content});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    serde_json::json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": "fake",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
    })
}

/// The body of a 200 embeddings reply to the request `body`: one [`fake_vector`] of `dim` per input, in
/// order, with `usage`.
pub fn embeddings(body: &Value, dim: usize) -> Value {
    let inputs = inputs(body);
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, t)| serde_json::json!({"object": "embedding", "index": i, "embedding": fake_vector(t, dim)}))
        .collect();
    let tokens = inputs.iter().map(|t| t.split_whitespace().count()).sum::<usize>();
    serde_json::json!({
        "object": "list", "data": data, "model": body["model"],
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens}
    })
}

/// The texts of an embeddings request (`input` as a string or an array of strings).
pub fn inputs(body: &Value) -> Vec<String> {
    match &body["input"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a.iter().map(|s| s.as_str().unwrap_or_default().to_string()).collect(),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::Object(_) => Vec::new(),
    }
}

/// The deterministic vector the fake gives `text` in `dim` dimensions (components in [-1, 1]).
pub fn fake_vector(text: &str, dim: usize) -> Vec<f32> {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let component = |j: usize| {
        let mut h = DefaultHasher::new();
        (j, text).hash(&mut h);
        (h.finish() % 2001) as f32 / 1000.0 - 1.0
    };
    (0..dim).map(component).collect()
}

type Responder = Box<dyn Fn(&Value) -> Canned + Send + Sync>;

struct Script {
    queue: VecDeque<Canned>,
    chat: Responder,
    embeddings: Responder,
}

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The route, e.g. `/v1/embeddings`.
    pub path: String,
    /// The JSON body (`null` when it was not JSON).
    pub body: Value,
    /// The `Authorization` header.
    pub authorization: Option<String>,
}

#[derive(Clone)]
struct Shared {
    script: Arc<Mutex<Script>>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

/// A running fake endpoint; stops when dropped.
pub struct FakeOpenAi {
    /// `http://127.0.0.1:PORT/v1`.
    pub url: String,
    shared: Shared,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    /// The runtime of a server started with [`FakeOpenAi::start_blocking`].
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for FakeOpenAi {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl FakeOpenAi {
    /// Starts the server on the current runtime; chat requests are answered by `responder` unless a
    /// reply is queued, embeddings requests with 8-dimensional vectors.
    pub async fn start(responder: impl Fn(&Value) -> Canned + Send + Sync + 'static) -> FakeOpenAi {
        let shared = Shared {
            script: Arc::new(Mutex::new(Script {
                queue: VecDeque::new(),
                chat: Box::new(responder),
                embeddings: Box::new(|b| Canned::json(&embeddings(b, 8))),
            })),
            seen: Arc::new(Mutex::new(Vec::new())),
        };
        let app =
            Router::new().route("/v1/chat/completions", post(handle)).route("/v1/embeddings", post(handle)).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
        let addr: SocketAddr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await;
        });
        FakeOpenAi { url: format!("http://{addr}/v1"), shared, stop: Some(stop), runtime: None }
    }

    /// Starts the server on a runtime of its own (for synchronous tests, and callers that block their
    /// runtime), answering embeddings with `dim`-dimensional vectors and chat with "ok".
    pub fn start_blocking(dim: usize) -> FakeOpenAi {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        // `Runtime::spawn` works from any thread, inside another runtime too.
        rt.spawn(async move {
            let _ = tx.send(FakeOpenAi::start(|_| Canned::answer("ok")).await);
        });
        let mut server = rx.recv().expect("the fake server starts");
        server.runtime = Some(rt);
        server.respond_to_embeddings(move |b| Canned::json(&embeddings(b, dim)));
        server
    }

    /// Queues replies used before the responders, one per request of any route.
    pub fn push(&self, replies: impl IntoIterator<Item = Canned>) {
        self.shared.script.lock().unwrap().queue.extend(replies);
    }

    /// Replaces the chat responder.
    pub fn respond_with(&self, responder: impl Fn(&Value) -> Canned + Send + Sync + 'static) {
        self.shared.script.lock().unwrap().chat = Box::new(responder);
    }

    /// Replaces the embeddings responder.
    pub fn respond_to_embeddings(&self, responder: impl Fn(&Value) -> Canned + Send + Sync + 'static) {
        self.shared.script.lock().unwrap().embeddings = Box::new(responder);
    }

    /// Every request received, in order.
    pub fn requests(&self) -> Vec<Seen> {
        self.shared.seen.lock().unwrap().clone()
    }

    /// Forgets the requests received so far.
    pub fn clear(&self) {
        self.shared.seen.lock().unwrap().clear();
    }

    /// Every request body received, in order.
    pub fn seen(&self) -> Vec<Value> {
        self.requests().into_iter().map(|s| s.body).collect()
    }

    /// The `Authorization` header of every request, in order.
    pub fn authorizations(&self) -> Vec<Option<String>> {
        self.requests().into_iter().map(|s| s.authorization).collect()
    }

    /// The user messages received, in order.
    pub fn prompts(&self) -> Vec<String> {
        self.seen().iter().map(|b| last_user(b).to_string()).collect()
    }
}

/// The content of the last user message of a request body ("" when there is none).
pub fn last_user(body: &Value) -> &str {
    body["messages"].as_array().and_then(|m| m.iter().rev().find(|m| m["role"] == "user")).and_then(|m| m["content"].as_str()).unwrap_or("")
}

async fn handle(State(shared): State<Shared>, uri: axum::http::Uri, headers: axum::http::HeaderMap, body: axum::body::Bytes) -> Response {
    let authorization = headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_string);
    let json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let path = uri.path().to_string();
    let canned = {
        let mut script = shared.script.lock().unwrap();
        shared.seen.lock().unwrap().push(Seen { path: path.clone(), body: json.clone(), authorization });
        match script.queue.pop_front() {
            Some(c) => c,
            None if path.ends_with("/embeddings") => (script.embeddings)(&json),
            None => (script.chat)(&json),
        }
    };
    if !canned.delay.is_zero() {
        tokio::time::sleep(canned.delay).await;
    }
    let status = StatusCode::from_u16(canned.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, [("content-type", "application/json")], canned.body).into_response()
}
