//! A real HTTP server on loopback that speaks the OpenAI chat-completions API, for tests of the LLM
//! client, the LLM evaluators and the LLM-backed tools. Shared by the unit tests (`src/llm/openai/tests.rs`
//! includes it with `#[path]`) and the gRPC integration tests (`tests/api/`).
//!
//! It records every request body and answers from a script: queued replies first (status, body, delay),
//! then a responder function of the request.

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

type Responder = Box<dyn Fn(&serde_json::Value) -> Canned + Send + Sync>;

struct Script {
    queue: VecDeque<Canned>,
    responder: Responder,
}

#[derive(Clone)]
struct Shared {
    script: Arc<Mutex<Script>>,
    seen: Arc<Mutex<Vec<serde_json::Value>>>,
    auth: Arc<Mutex<Vec<Option<String>>>>,
}

/// A running fake endpoint; stops when dropped.
pub struct FakeLlm {
    /// `http://127.0.0.1:PORT/v1`.
    pub url: String,
    shared: Shared,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl FakeLlm {
    /// Starts the server; every request is answered by `responder` unless a reply is queued.
    pub async fn start(responder: impl Fn(&serde_json::Value) -> Canned + Send + Sync + 'static) -> FakeLlm {
        let shared = Shared {
            script: Arc::new(Mutex::new(Script { queue: VecDeque::new(), responder: Box::new(responder) })),
            seen: Arc::new(Mutex::new(Vec::new())),
            auth: Arc::new(Mutex::new(Vec::new())),
        };
        let app = Router::new().route("/v1/chat/completions", post(handle)).with_state(shared.clone());
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
        FakeLlm { url: format!("http://{addr}/v1"), shared, stop: Some(stop) }
    }

    /// Queues replies used before the responder, one per request.
    pub fn push(&self, replies: impl IntoIterator<Item = Canned>) {
        self.shared.script.lock().unwrap().queue.extend(replies);
    }

    /// Replaces the responder.
    pub fn respond_with(&self, responder: impl Fn(&serde_json::Value) -> Canned + Send + Sync + 'static) {
        self.shared.script.lock().unwrap().responder = Box::new(responder);
    }

    /// Every request body received, in order.
    pub fn seen(&self) -> Vec<serde_json::Value> {
        self.shared.seen.lock().unwrap().clone()
    }

    /// The `Authorization` header of every request, in order.
    pub fn authorizations(&self) -> Vec<Option<String>> {
        self.shared.auth.lock().unwrap().clone()
    }

    /// The user messages received, in order.
    pub fn prompts(&self) -> Vec<String> {
        self.seen().iter().map(|b| last_user(b).to_string()).collect()
    }
}

/// The content of the last user message of a request body ("" when there is none).
pub fn last_user(body: &serde_json::Value) -> &str {
    body["messages"].as_array().and_then(|m| m.iter().rev().find(|m| m["role"] == "user")).and_then(|m| m["content"].as_str()).unwrap_or("")
}

async fn handle(State(shared): State<Shared>, headers: axum::http::HeaderMap, body: axum::body::Bytes) -> Response {
    let auth = headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_string);
    shared.auth.lock().unwrap().push(auth);
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    shared.seen.lock().unwrap().push(json.clone());
    let canned = {
        let mut script = shared.script.lock().unwrap();
        match script.queue.pop_front() {
            Some(c) => c,
            None => (script.responder)(&json),
        }
    };
    if !canned.delay.is_zero() {
        tokio::time::sleep(canned.delay).await;
    }
    let status = StatusCode::from_u16(canned.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, [("content-type", "application/json")], canned.body).into_response()
}
