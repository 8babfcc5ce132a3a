//! OpenEnv's HTTP routes. `/reset`, `/step` and `/state` are stateless, as OpenEnv's are: each request
//! runs on a throwaway environment instance (its episode is closed before the reply), so they never hold a
//! session place. Episodes that last run over `/ws`. Errors of the stateless routes are FastAPI's shape,
//! `{"detail": [{"loc", "msg", "type"}]}`, with HTTP 422 for bad input and the statuses of [`failure`].

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{Query, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};

use super::session::{Action, ErrorCode, Failure, Session};
use super::{dialect, schema, ws, OpenEnv};
use crate::api::faces::gateway::kind;

/// Largest body or WebSocket message read. OpenEnv requests are small (a tool's text arguments hold at most
/// `--max-text-chars` characters each); with the WebSocket queue ([`super::ws`]) this bounds what one
/// connection can make the server hold.
pub(super) const MAX_BODY: usize = crate::api::MAX_MESSAGE_BYTES;

/// How far past [`MAX_BODY`] a WebSocket message is still read whole, so that it can be refused with a
/// proper close frame rather than a dropped connection.
const WS_SLACK: usize = 1024 * 1024;

/// The WebSocket read buffer. tungstenite zero-fills up to this much before every socket read (128 KiB by
/// default: 11 % of the CPU of `memgym bench protocols`' OpenEnv run went to that memset); requests are
/// small, and a larger frame takes more reads.
pub const WS_READ_BUFFER: usize = 16 * 1024;

pub(super) async fn health() -> Json<Value> {
    Json(json!({"status": "healthy"}))
}

pub(super) async fn metadata() -> Json<Value> {
    Json(schema::metadata())
}

pub(super) async fn schema() -> Json<Value> {
    Json(schema::schema())
}

pub(super) async fn openapi() -> Json<Value> {
    Json(schema::openapi())
}

pub(super) async fn state() -> Json<Value> {
    Json(json!({"episode_id": null, "step_count": 0}))
}

/// `POST /reset`: the reset keys (an empty body is `{}`).
pub(super) async fn reset(State(openenv): State<Arc<OpenEnv>>, body: Bytes) -> Response {
    let data = match body_object(&body) {
        Ok(d) => d,
        Err(f) => return failure(&f),
    };
    let mut session = Session::new(openenv.gateway.clone());
    let r = session.reset(&data).await;
    session.end_now().await;
    match r {
        Ok(v) => Json(v).into_response(),
        Err(f) => failure(&f),
    }
}

/// `POST /step`: `{"action": {...}}`, optionally with `timeout_s`, `request_id` and the reset keys that
/// choose the throwaway episode.
pub(super) async fn step(State(openenv): State<Arc<OpenEnv>>, body: Bytes) -> Response {
    let mut data = match body_object(&body) {
        Ok(d) => d,
        Err(f) => return failure(&f),
    };
    let Some(action) = data.remove("action") else {
        return failure(&Failure::new(ErrorCode::Validation, "action: is required"));
    };
    // Checked before an episode is opened for it.
    if let Err(f) = Action::parse(&action) {
        return failure(&f);
    }
    match data.remove("timeout_s") {
        None | Some(Value::Null) => {}
        Some(Value::Number(n)) if n.as_f64().is_some_and(|t| t.is_finite() && t > 0.0) => {}
        Some(v) => return failure(&Failure::new(ErrorCode::Validation, format!("timeout_s: must be a positive number, got {}", kind(&v)))),
    }
    match data.remove("request_id") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s.len() <= 255 => {}
        Some(_) => return failure(&Failure::new(ErrorCode::Validation, "request_id: must be a string of at most 255 bytes")),
    }
    // The remaining keys are the reset's: `Gateway::open` refuses any other, naming it.
    let mut session = Session::new(openenv.gateway.clone());
    let r = match session.reset(&data).await {
        Ok(_) => session.step(&action).await,
        Err(f) => Err(f),
    };
    session.end_now().await;
    match r {
        Ok(v) => Json(v).into_response(),
        Err(f) => failure(&f),
    }
}

/// `GET /ws` (optionally `?session_id=` of an `openenv/session/create` session).
pub(super) async fn websocket(
    State(openenv): State<Arc<OpenEnv>>,
    Query(query): Query<std::collections::HashMap<String, String>>,
    upgrade: WebSocketUpgrade,
) -> Response {
    // The WebSocket library reads up to the cap plus a slack; the session closes anything over the cap with
    // 1009 once read whole. Past the slack the library stops reading at once (its error also closes with
    // 1009, but a client still sending may see a reset first).
    let limit = MAX_BODY + WS_SLACK;
    let upgrade = upgrade.max_message_size(limit).max_frame_size(limit).read_buffer_size(WS_READ_BUFFER);
    let attach = query.get("session_id").cloned();
    upgrade.on_upgrade(move |socket| async move {
        let slot = match &attach {
            Some(id) => openenv.slots.attach(id).ok_or_else(|| {
                json!({"type": "error", "data": {"code": ErrorCode::Session.as_str(),
                    "message": format!("session {} is unknown or already attached", crate::util::excerpt::quoted(id))}})
            }),
            None => openenv.slots.acquire().map_err(|(active, max)| {
                json!({"type": "error", "data": {"code": ErrorCode::CapacityReached.as_str(),
                    "message": super::capacity_message(active, max, "accept new connections"),
                    "active_sessions": active, "max_sessions": max}})
            }),
        };
        match slot {
            Ok(slot) => {
                ws::serve(socket, openenv.clone(), slot).await;
                if let Some(id) = &attach {
                    openenv.slots.detach(id);
                }
            }
            Err(frame) => ws::refuse(socket, frame).await,
        }
    })
}

/// `/mcp`: standard MCP to rmcp, everything else OpenEnv's JSON-RPC dialect (always HTTP 200).
pub(super) async fn mcp(State(openenv): State<Arc<OpenEnv>>, request: Request) -> Response {
    if request.method() != http::Method::POST || dialect::is_standard_mcp(request.headers()) {
        return crate::api::faces::mcp::handle(&openenv.mcp, request).await;
    }
    let answer = match axum::body::to_bytes(request.into_body(), MAX_BODY).await {
        Ok(body) => dialect::answer_bytes(&openenv, &body).await,
        Err(e) => {
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": format!("Invalid request: {}", crate::util::excerpt::cut(&e.to_string())), "data": null}})
        }
    };
    Json(answer).into_response()
}

/// Refuses a request whose `Host`, or `Origin` when present, is not in `allowed` (empty: any) with 403.
pub(crate) async fn check_host(State(allowed): State<Arc<Vec<String>>>, request: Request, next: axum::middleware::Next) -> Response {
    if !allowed.is_empty() {
        let header = |name: http::HeaderName| request.headers().get(name).and_then(|v| v.to_str().ok());
        let host_ok = header(http::header::HOST).is_some_and(|h| host_allowed(&allowed, h));
        let origin_ok = match request.headers().get(http::header::ORIGIN) {
            None => true,
            Some(o) => o
                .to_str()
                .ok()
                .and_then(|o| o.split_once("://"))
                .is_some_and(|(_, rest)| host_allowed(&allowed, rest.split('/').next().unwrap_or(""))),
        };
        if !host_ok || !origin_ok {
            let which = if host_ok { "Origin" } else { "Host" };
            let detail = format!("Forbidden: {which} header is not allowed (--http-allowed-hosts)");
            return (StatusCode::FORBIDDEN, Json(serde_json::json!({"detail": detail}))).into_response();
        }
    }
    next.run(request).await
}

/// FastAPI's shape for the refusals axum itself writes in plain text (a body over the cap, 413; a body the
/// extractor cannot take): `{"detail": text}`, the same status. The JSON faces modelled on FastAPI servers
/// (OpenEnv, NeMo Gym, ORS) answer every refusal as JSON, as their clients read it.
pub(crate) async fn detail_json(request: Request, next: axum::middleware::Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    if !status.is_client_error() || is_json(&response) {
        return response;
    }
    let (_, text) = crate::api::plain_refusal(response).await;
    let text = text.map(|t| t.trim().to_string()).unwrap_or_default();
    let detail = if text.is_empty() { status.canonical_reason().unwrap_or_default().to_string() } else { crate::util::excerpt::cut(&text) };
    (status, Json(serde_json::json!({"detail": detail}))).into_response()
}

fn is_json(response: &Response) -> bool {
    response.headers().get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.contains("json"))
}

/// `host[:port]` (IPv6 in brackets, or bare) split into its lowercase host and port.
fn split_host(authority: &str) -> (String, Option<&str>) {
    let a = authority.trim();
    if let Some(rest) = a.strip_prefix('[') {
        let (host, after) = rest.split_once(']').unwrap_or((rest, ""));
        return (host.to_ascii_lowercase(), after.strip_prefix(':'));
    }
    match a.split_once(':') {
        Some((host, port)) if !port.contains(':') => (host.to_ascii_lowercase(), Some(port)),
        _ => (a.to_ascii_lowercase(), None),
    }
}

/// rmcp's rule: an entry without a port matches the host on any port, one with a port only that port.
pub(super) fn host_allowed(allowed: &[String], authority: &str) -> bool {
    let (host, port) = split_host(authority);
    allowed.iter().any(|entry| {
        let (h, p) = split_host(entry);
        h == host && (p.is_none() || p == port)
    })
}

fn body_object(body: &[u8]) -> Result<Map<String, Value>, Failure> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match crate::util::json::strict_value_bytes(body) {
        Ok(Value::Object(o)) => Ok(o),
        Ok(v) => Err(Failure::new(ErrorCode::Validation, format!("body: must be a JSON object, got {}", kind(&v)))),
        Err(crate::util::json::StrictError::Syntax(e)) => {
            Err(Failure::new(ErrorCode::InvalidJson, format!("body: not valid JSON: {}", crate::util::excerpt::cut(&e.to_string()))))
        }
        Err(e @ crate::util::json::StrictError::Duplicate(_)) => Err(Failure::new(ErrorCode::Validation, format!("body: {e}"))),
    }
}

/// FastAPI's error shape, with the status of the one table ([`crate::api::faces::http_status`]): 422 for bad
/// input, 404 for an unknown question or episode, 409 for an id in use or a refused state, 503 (with
/// Retry-After) at a server cap or with a dependency down, 504 when it timed out.
fn failure(f: &Failure) -> Response {
    let status = match (f.status, f.code) {
        (Some(code), _) => crate::api::faces::http_status::http_status(crate::api::faces::http_status::HttpFace::OpenEnv, code),
        (None, ErrorCode::Validation | ErrorCode::InvalidJson | ErrorCode::UnknownType) => StatusCode::UNPROCESSABLE_ENTITY,
        (None, ErrorCode::Execution | ErrorCode::CapacityReached | ErrorCode::Session) => StatusCode::INTERNAL_SERVER_ERROR,
    };
    let field = crate::api::status::field_of(&f.message).unwrap_or("body");
    let (reason, retryable) = f.reason.clone().map_or((Value::Null, false), |(r, a)| (Value::String(r), a));
    let item = json!({"loc": ["body", field], "msg": f.message, "type": f.code.as_str().to_ascii_lowercase(), "reason": reason, "retryable": retryable});
    crate::api::faces::http_status::with_retry_after((status, Json(json!({"detail": [item]}))).into_response())
}
