//! OpenEnv's WebSocket `/ws`: one environment instance (at most one live episode) per connection, the
//! messages `reset`, `step`, `state`, `close` (and `mcp`), one reply frame per request, in order.
//!
//! The socket is read by its own task the whole time, so pings are answered while a long step runs (an
//! LLM evaluator's score takes seconds; OpenEnv's client pings every 20 s and drops the connection when a
//! pong is 20 s late). Requests queue in order behind the step being served. An error frame leaves the
//! connection usable; `close` gets no reply; a disconnect closes the episode. A message over the cap
//! closes the connection with 1009 (message too big) and a reason naming the cap.

use std::sync::Arc;

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use futures_util::{SinkExt, StreamExt};
use parking_lot::Mutex;
use serde_json::{json, Map, Value};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::dialect;
use super::session::{ErrorCode, Failure, Session};
use super::{OpenEnv, Slot};
use crate::api::faces::gateway::kind;

/// Requests a client may queue behind the one being served before the reader waits (at most
/// `QUEUE` × [`super::http::MAX_BODY`] held per connection).
const QUEUE: usize = 8;

/// What one frame asks for.
pub(super) enum Request {
    Reset(Map<String, Value>),
    Step(Value),
    State,
    Close,
    Mcp(Value),
}

/// What the reader hands the loop: a request frame, or that the client sent a message over the cap.
enum Incoming {
    Frame(String),
    TooBig,
}

/// WebSocket close code 1009 (RFC 6455 §7.4.1): a message too big to process.
const MESSAGE_TOO_BIG: u16 = 1009;

/// Whether a frame is over the cap: a message read whole within the library's slack but longer than the
/// cap, or a read that failed because it was longer than the slack (tungstenite's capacity error; axum
/// wraps it, so only its text says so).
fn too_big(frame: &Result<Message, axum::Error>) -> bool {
    match frame {
        Ok(Message::Text(t)) => t.len() > super::http::MAX_BODY,
        Ok(Message::Binary(b)) => b.len() > super::http::MAX_BODY,
        Ok(_) => false,
        Err(e) => {
            let text = e.to_string();
            text.contains("Space limit exceeded") || text.contains("too long")
        }
    }
}

/// Serves one accepted connection holding `slot` until it closes.
pub async fn serve(socket: WebSocket, openenv: Arc<OpenEnv>, slot: Slot) {
    let (mut sink, mut stream) = socket.split();
    let (tx, mut rx) = mpsc::channel::<Incoming>(QUEUE);
    let heard = Arc::new(Mutex::new(Instant::now()));
    let reader = tokio::spawn({
        let heard = heard.clone();
        async move {
            while let Some(frame) = stream.next().await {
                *heard.lock() = Instant::now();
                if too_big(&frame) {
                    let _ = tx.send(Incoming::TooBig).await;
                    break;
                }
                let text = match frame {
                    Ok(Message::Text(t)) => t.to_string(),
                    Ok(Message::Binary(b)) => String::from_utf8_lossy(&b).into_owned(),
                    Ok(Message::Ping(_) | Message::Pong(_)) => continue,
                    Ok(Message::Close(_)) | Err(_) => break,
                };
                if tx.send(Incoming::Frame(text)).await.is_err() {
                    break;
                }
            }
        }
    });
    let mut session = Session::new(openenv.gateway.clone());
    // The server pings every `ping_every`; a connection that has sent nothing (no frame, no pong) for a
    // whole period after a ping is closed, its place and episode freed (a trainer node that died without
    // closing its socket would hold them for ever).
    let every = openenv.ping_every;
    let mut tick = tokio::time::interval_at(Instant::now() + every, every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut pinged: Option<Instant> = None;
    let mut close: Option<CloseFrame> = None;
    loop {
        let frame = tokio::select! {
            frame = rx.recv() => match frame {
                Some(Incoming::Frame(f)) => f,
                Some(Incoming::TooBig) => {
                    let reason = format!("message too big: at most {} bytes", super::http::MAX_BODY);
                    close = Some(CloseFrame { code: MESSAGE_TOO_BIG, reason: reason.into() });
                    break;
                }
                None => break,
            },
            _ = tick.tick() => {
                if pinged.is_some_and(|p| *heard.lock() < p && p.elapsed() >= every) {
                    tracing::debug!("openenv connection silent after a ping: closing it");
                    break;
                }
                if sink.send(Message::Ping(Default::default())).await.is_err() {
                    break;
                }
                pinged = Some(Instant::now());
                continue;
            }
        };
        let reply = match parse(&frame) {
            Err(f) => error_frame(&f),
            Ok(Request::Close) => break,
            Ok(Request::Reset(data)) => observation(session.reset(&data).await),
            Ok(Request::Step(action)) => observation(session.step(&action).await),
            Ok(Request::State) => json!({"type": "state", "data": session.state().await}),
            Ok(Request::Mcp(body)) => json!({"type": "mcp", "data": dialect::answer(&openenv, &body).await}),
        };
        if sink.send(Message::Text(reply.to_string().into())).await.is_err() {
            break;
        }
    }
    reader.abort();
    session.end_now().await;
    let _ = sink.send(Message::Close(close)).await;
    let _ = sink.close().await;
    drop(slot);
}

/// Greets a connection the server cannot take: one CAPACITY_REACHED (or SESSION_ERROR) frame, then close.
pub async fn refuse(mut socket: WebSocket, frame: Value) {
    let _ = socket.send(Message::Text(frame.to_string().into())).await;
    let _ = socket.send(Message::Close(None)).await;
}

fn observation(r: Result<Value, Failure>) -> Value {
    match r {
        Ok(data) => json!({"type": "observation", "data": data}),
        Err(f) => error_frame(&f),
    }
}

/// `{"type":"error","data":{"message","code"}}`.
pub fn error_frame(f: &Failure) -> Value {
    let (reason, retryable) = f.reason.clone().map_or((Value::Null, false), |(r, a)| (Value::String(r), a));
    json!({"type": "error", "data": {"message": f.message, "code": f.code.as_str(), "reason": reason, "retryable": retryable}})
}

pub(super) fn parse(frame: &str) -> Result<Request, Failure> {
    let v: Value = crate::util::json::strict_value(frame).map_err(|e| match e {
        crate::util::json::StrictError::Syntax(e) => {
            Failure::new(ErrorCode::InvalidJson, format!("Invalid JSON: {}", crate::util::excerpt::cut(&e.to_string())))
        }
        e @ crate::util::json::StrictError::Duplicate(_) => Failure::new(ErrorCode::Validation, format!("Invalid message: {e}")),
    })?;
    let Value::Object(mut o) = v else {
        return Err(Failure::new(ErrorCode::Validation, format!("a message must be a JSON object, got {}", kind(&v))));
    };
    let ty = match o.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(other) => return Err(Failure::new(ErrorCode::UnknownType, format!("Unknown message type: {}", kind(other)))),
        None => return Err(Failure::new(ErrorCode::UnknownType, "Unknown message type: None (a message needs \"type\")")),
    };
    let allowed: &[&str] = match ty.as_str() {
        "reset" | "step" | "mcp" => &["type", "data"],
        "state" | "close" => &["type"],
        other => {
            return Err(Failure::new(ErrorCode::UnknownType, format!("Unknown message type: {}", crate::util::excerpt::quoted(other))))
        }
    };
    if let Some(k) = o.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(Failure::new(ErrorCode::Validation, format!("{}: unknown key in a {ty} message", crate::util::excerpt::name(k))));
    }
    let data = o.remove("data");
    Ok(match ty.as_str() {
        "reset" => match data {
            None | Some(Value::Null) => Request::Reset(Map::new()),
            Some(Value::Object(m)) => Request::Reset(m),
            Some(v) => return Err(Failure::new(ErrorCode::Validation, format!("data: must be a JSON object, got {}", kind(&v)))),
        },
        "step" => match data {
            Some(v @ Value::Object(_)) => Request::Step(v),
            None | Some(Value::Null) => return Err(Failure::new(ErrorCode::Validation, "data: is required (the action)")),
            Some(v) => return Err(Failure::new(ErrorCode::Validation, format!("data: must be a JSON object, got {}", kind(&v)))),
        },
        "mcp" => Request::Mcp(data.unwrap_or(Value::Null)),
        "state" => Request::State,
        _ => Request::Close,
    })
}
