//! OpenEnv's own `/mcp` dialect: plain JSON-RPC 2.0 over `POST /mcp` (clients send `Accept: */*`, no
//! `initialize`), always answered with HTTP 200 and a JSON-RPC body, and the same messages inside a
//! WebSocket `mcp` frame. Methods: `openenv/session/create` and `openenv/session/close` (sessions count
//! against the server's cap and can be attached to a `/ws?session_id=` connection), `tools/list` and
//! `tools/call` with memgym's ten MCP tools ([`crate::api::faces::mcp`]). `tools/call` results carry `data`
//! (the structured result) beside MCP's `content`, `structuredContent` and `isError`, because OpenEnv's
//! `MCPToolClient` returns `result["data"]`.
//!
//! The same path also serves standard MCP: a request that accepts `text/event-stream` or carries an MCP
//! session or protocol-version header goes to rmcp instead ([`is_standard_mcp`]).

use http::HeaderMap;
use serde_json::{json, Map, Value};

use super::OpenEnv;
use crate::api::faces::mcp;

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const SERVER_ERROR: i64 = -32000;

/// Does this request speak standard MCP (streamable HTTP) rather than OpenEnv's dialect?
pub fn is_standard_mcp(headers: &HeaderMap) -> bool {
    let accepts_sse = headers.get_all(http::header::ACCEPT).iter().any(|v| v.to_str().is_ok_and(|s| s.contains("text/event-stream")));
    accepts_sse || headers.contains_key("mcp-session-id") || headers.contains_key("mcp-protocol-version")
}

/// Answers the body of a `POST /mcp` in the dialect.
pub async fn answer_bytes(openenv: &OpenEnv, body: &[u8]) -> Value {
    match crate::util::json::strict_value_bytes(body) {
        Ok(v) => answer(openenv, &v).await,
        Err(crate::util::json::StrictError::Syntax(e)) => {
            error(Value::Null, PARSE_ERROR, &format!("Parse error: {}", crate::util::excerpt::cut(&e.to_string())), None)
        }
        Err(e @ crate::util::json::StrictError::Duplicate(_)) => {
            error(Value::Null, INVALID_REQUEST, &format!("Invalid request: {e}"), None)
        }
    }
}

/// Answers one JSON-RPC request.
pub async fn answer(openenv: &OpenEnv, request: &Value) -> Value {
    let (id, method, params) = match read(request) {
        Ok(r) => r,
        Err((id, message)) => return error(id, INVALID_REQUEST, &format!("Invalid request: {message}"), None),
    };
    match method.as_str() {
        "openenv/session/create" => match openenv.slots.acquire() {
            Ok(slot) => json!({"jsonrpc": "2.0", "id": id, "result": {"session_id": openenv.slots.park(slot)}}),
            Err((active, max)) => error(
                id,
                SERVER_ERROR,
                &super::capacity_message(active, max, "create a new session"),
                Some(json!({"active_sessions": active, "max_sessions": max})),
            ),
        },
        "openenv/session/close" => match params.get("session_id") {
            Some(Value::String(sid)) => match openenv.slots.close(sid) {
                Some(true) => json!({"jsonrpc": "2.0", "id": id, "result": {"session_id": sid, "closed": true}}),
                Some(false) => json!({"jsonrpc": "2.0", "id": id, "result": {"session_id": sid, "closed": false, "closing": true}}),
                None => error(id, INVALID_PARAMS, &format!("Unknown session_id {}", crate::util::excerpt::quoted(sid)), None),
            },
            _ => error(id, INVALID_PARAMS, "Missing 'session_id' (a string)", None),
        },
        "tools/list" => json!({"jsonrpc": "2.0", "id": id, "result": {"tools": mcp::tools_json(&openenv.gateway)}}),
        "tools/call" => {
            if let Some(Value::String(sid)) = params.get("session_id") {
                openenv.slots.touch(sid);
            }
            let name = match params.get("name") {
                Some(Value::String(n)) => n.clone(),
                _ => return error(id, INVALID_PARAMS, "Missing 'name' (a string)", None),
            };
            let arguments = match params.get("arguments") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(a)) => a.clone(),
                Some(_) => return error(id, INVALID_PARAMS, "'arguments' must be an object", None),
            };
            match mcp::call(&openenv.gateway, &name, arguments).await {
                None => error(id, INVALID_PARAMS, &format!("Tool not found: {}", crate::util::excerpt::quoted(&name)), None),
                Some(r) => json!({"jsonrpc": "2.0", "id": id, "result": {
                    "content": [{"type": "text", "text": r.text}],
                    "structuredContent": r.structured, "isError": r.is_error, "data": r.structured,
                }}),
            }
        }
        other => error(id, METHOD_NOT_FOUND, &format!("Method not found: {}", crate::util::excerpt::quoted(other)), None),
    }
}

type Read = (Value, String, Map<String, Value>);

/// `{"jsonrpc":"2.0","method","params"?,"id"?}`, nothing else.
fn read(request: &Value) -> Result<Read, (Value, String)> {
    let Value::Object(o) = request else { return Err((Value::Null, "must be a JSON object".into())) };
    let id = match o.get("id") {
        None => Value::Null,
        Some(v @ (Value::Null | Value::String(_) | Value::Number(_))) => v.clone(),
        Some(_) => return Err((Value::Null, "id: must be a string, a number or null".into())),
    };
    if let Some(k) = o.keys().find(|k| !matches!(k.as_str(), "jsonrpc" | "method" | "params" | "id")) {
        return Err((id, format!("{}: unknown member", crate::util::excerpt::name(k))));
    }
    if o.get("jsonrpc") != Some(&Value::from("2.0")) {
        return Err((id, "jsonrpc: must be \"2.0\"".into()));
    }
    let method = match o.get("method") {
        Some(Value::String(m)) => m.clone(),
        _ => return Err((id, "method: is required (a string)".into())),
    };
    let params = match o.get("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(p)) => p.clone(),
        Some(_) => return Err((id, "params: must be an object".into())),
    };
    Ok((id, method, params))
}

fn error(id: Value, code: i64, message: &str, data: Option<Value>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message, "data": data}})
}
