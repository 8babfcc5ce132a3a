//! NeMo Gym's resources-server protocol (`--nemo-gym-addr`): memgym as a resources server that NeMo Gym's
//! agents and Environment Servers (and so NeMo RL, TRL, Unsloth, OpenRLHF and verl through NeMo Gym) drive
//! with plain HTTP and a session cookie, as they drive their own.
//!
//! - `POST /seed_session` opens an episode ([`seed`]: an agent's run request, or 0.7's typed seed with a
//!   `resources_session_id`) and sets the `memgym_session` cookie, whose value is the episode id.
//! - `POST /<tool>` for each of the six tools: the body is the tool's JSON arguments; the answer is the
//!   compact text a policy reads (gRPC `CallTool`'s `text`), or, when the request accepts
//!   `application/json`, the structured result the MCP face gives.
//! - `POST /verify` scores the cookie's episode and closes it: the request body back, with `reward`, the
//!   breakdown's numbers at the top level (what NeMo Gym's metrics read) and the whole breakdown under
//!   `breakdown`.
//! - `POST /close_session` (0.7) closes a typed seed's session, idempotently; an id never seeded is
//!   remembered as closed, so a late seed cannot open it. `POST /aggregate_metrics` ([`metrics`]) and
//!   `GET /reverify_mode` (`"unsupported"`: a score needs the live episode) complete the routes.
//! - `/mcp` ([`mcp`]): the six tools over MCP, each request bound to its session by the
//!   `X-NeMo-Gym-Session-Token` header the seed's reply hands out (NeMo Gym's `expose_tools_over_mcp`).
//!
//! Every route is also served under `/ng-rollout/{rollout_id}/`, the prefix NeMo Gym adds when its
//! observability is on. Refusals are FastAPI's shape, `{"detail": message}` with memgym's `error` beside it,
//! at the status a FastAPI server would answer (422 bad input, 404 unknown, 409 a conflict or an ended
//! episode, 429 at a cap, 503 draining).

pub mod mcp;
mod metrics;
pub mod seed;

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use http::{header, HeaderMap, HeaderValue, StatusCode};
use serde_json::{json, Map, Value};
use tonic::{Code, Status};

use crate::api::faces::gateway::{episode_json, kind, Gateway};
use crate::tools::TOOL_NAMES;
use seed::{Bindings, Bound, Seed};

/// The cookie that names a session's episode.
pub const COOKIE: &str = "memgym_session";

/// The prefix NeMo Gym puts before a resources server's routes when its observability is on.
pub const ROLLOUT_PREFIX: &str = "/ng-rollout/{rollout_id}";

/// How the face is served.
#[derive(Debug, Clone, Default)]
pub struct NemoGymOptions {
    /// `Host` values accepted (`--http-allowed-hosts`); empty accepts any.
    pub allowed_hosts: Vec<String>,
}

/// Why a request was refused.
#[derive(Debug, thiserror::Error)]
pub enum NemoGymError {
    /// The environment's (or the body's) refusal.
    #[error("{}", .0.message())]
    Refused(Box<Status>),
    /// A tool call or verify without the session cookie.
    #[error("no {COOKIE} cookie: POST /seed_session first and send the cookie it sets")]
    NoSession,
    /// A session seeded (or closed) as another episode or task than it was seeded for.
    #[error("resources_session_id {session} is already seeded for another {what}")]
    Conflict {
        /// The session, quoted.
        session: String,
        /// "episode or task", or "episode".
        what: &'static str,
    },
}

impl From<Status> for NemoGymError {
    fn from(s: Status) -> Self {
        NemoGymError::Refused(Box::new(s))
    }
}

impl IntoResponse for NemoGymError {
    fn into_response(self) -> Response {
        let detail = self.to_string();
        let (status, error) = match &self {
            NemoGymError::Refused(s) => {
                let mut error = crate::api::status::error_json(s);
                error["field"] = crate::api::status::field_of(s.message()).map_or(Value::Null, Value::from);
                (http_status(s.code()), error)
            }
            NemoGymError::NoSession => (
                StatusCode::BAD_REQUEST,
                json!({"code": "failed_precondition", "message": detail, "reason": "NO_SESSION", "retryable": false}),
            ),
            NemoGymError::Conflict { .. } => (
                StatusCode::CONFLICT,
                json!({"code": "already_exists", "message": detail, "reason": "SESSION_CONFLICT", "retryable": false}),
            ),
        };
        crate::api::faces::http_status::with_retry_after((status, Json(json!({"detail": detail, "error": error}))).into_response())
    }
}

/// The HTTP status of a gRPC code on this face ([`crate::api::faces::http_status`]).
fn http_status(code: Code) -> StatusCode {
    crate::api::faces::http_status::http_status(crate::api::faces::http_status::HttpFace::NemoGym, code)
}

type Answer = Result<Response, NemoGymError>;

struct Face {
    gateway: Gateway,
    bindings: Bindings,
}

/// The resources-server router over `gateway` (served on its own listener, `--nemo-gym-addr`).
pub fn router(gateway: Gateway, options: &NemoGymOptions) -> Router {
    let cap = gateway.env().config().limits.max_open_episodes;
    let service =
        Arc::new(crate::api::faces::mcp::service(gateway.clone(), &crate::api::faces::mcp::McpOptions::new(options.allowed_hosts.clone())));
    let face = Arc::new(Face { gateway, bindings: Bindings::new(cap) });
    let mut routes = Router::new()
        .route(mcp::PATH, axum::routing::any(move |request: axum::extract::Request| mcp::handle(service.clone(), request)))
        .route("/seed_session", post(seed_session))
        .route("/verify", post(verify))
        .route("/close_session", post(close_session))
        .route("/aggregate_metrics", post(aggregate_metrics))
        .route("/reverify_mode", get(|| async { Json("unsupported") }));
    for tool in TOOL_NAMES {
        routes = routes.route(&format!("/{tool}"), post(move |state, headers, body| call_tool(tool, state, headers, body)));
    }
    let routes = routes.with_state(face);
    Router::new()
        .merge(routes.clone())
        .nest(ROLLOUT_PREFIX, routes)
        .fallback(|| async { (StatusCode::NOT_FOUND, Json(json!({"detail": "Not Found"}))) })
        .method_not_allowed_fallback(|| async { (StatusCode::METHOD_NOT_ALLOWED, Json(json!({"detail": "Method Not Allowed"}))) })
        .layer(axum::extract::DefaultBodyLimit::max(crate::api::MAX_MESSAGE_BYTES))
        .layer(axum::middleware::from_fn(crate::api::faces::openenv::detail_json))
        .layer(axum::middleware::from_fn_with_state(Arc::new(options.allowed_hosts.clone()), crate::api::faces::openenv::check_host))
}

/// The body as a JSON object (empty: `{}`), read strictly.
fn body_object(body: &[u8]) -> Result<Map<String, Value>, Status> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match crate::util::json::strict_value_bytes(body) {
        Ok(Value::Object(o)) => Ok(o),
        Ok(v) => Err(crate::api::status::invalid(format!("body: must be a JSON object, got {}", kind(&v)))),
        Err(crate::util::json::StrictError::Syntax(e)) => {
            Err(crate::api::status::invalid(format!("body: not valid JSON: {}", crate::util::excerpt::cut(&e.to_string()))))
        }
        Err(e @ crate::util::json::StrictError::Duplicate(_)) => Err(crate::api::status::invalid(format!("body: {e}"))),
    }
}

/// The episode the request's `memgym_session` cookie names.
pub fn session_of(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.trim_matches('"').to_string())
        .filter(|v| !v.is_empty())
}

/// `Set-Cookie` for the session `id` (`None`: expire it).
fn set_cookie(id: Option<&str>) -> Option<HeaderValue> {
    let v = match id {
        Some(id) => format!("{COOKIE}={id}; Path=/; HttpOnly; SameSite=Lax"),
        None => format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0"),
    };
    // An episode id holds only letters, digits and `._:-`, all valid in a cookie.
    HeaderValue::from_str(&v).ok()
}

fn with_cookie(mut response: Response, id: Option<&str>) -> Response {
    if let Some(v) = set_cookie(id) {
        response.headers_mut().append(header::SET_COOKIE, v);
    }
    response
}

async fn seed_session(State(face): State<Arc<Face>>, headers: HeaderMap, body: Bytes) -> Answer {
    let body = body_object(&body)?;
    match seed::read_seed(&body)? {
        Seed::Run { mut open } => {
            // A cookie that names a session seeds that session again (the same keys: the same episode).
            if let Some(id) = session_of(&headers) {
                open.insert("episode_id".into(), Value::String(id));
            }
            let opened = face.gateway.open(&open).await?;
            let id = opened.state.episode_id.clone();
            let mut reply = episode_json(&opened.state, Some(opened.created));
            reply["mcp"] = mcp::metadata(&id);
            Ok(with_cookie(Json(reply).into_response(), Some(&id)))
        }
        Seed::Typed { session, identity, mut open } => {
            let id = face.gateway.env().replica().own("resources_session_id", &session).map_err(Status::from)?;
            let bound = face.bindings.bind(&id, identity);
            if bound == Bound::Other {
                return Err(NemoGymError::Conflict { session: crate::util::excerpt::quoted(&session), what: "episode or task" });
            }
            open.insert("episode_id".into(), Value::String(id.clone()));
            match face.gateway.open(&open).await {
                Ok(_) => {
                    let reply = json!({"resources_session_id": session, "resources_tools": mcp::metadata(&id)});
                    Ok(with_cookie(Json(reply).into_response(), Some(&id)))
                }
                Err(s) => {
                    if bound == Bound::New {
                        face.bindings.unbind(&id);
                    }
                    Err(s.into())
                }
            }
        }
    }
}

/// Does the request prefer JSON to text (an `Accept` naming `application/json`)?
fn wants_json(headers: &HeaderMap) -> bool {
    headers.get_all(header::ACCEPT).iter().filter_map(|v| v.to_str().ok()).any(|v| v.contains("application/json"))
}

async fn call_tool(tool: &'static str, State(face): State<Arc<Face>>, headers: HeaderMap, body: Bytes) -> Answer {
    let id = session_of(&headers).ok_or(NemoGymError::NoSession)?;
    let args = body_object(&body)?;
    let called = face.gateway.call(&id, tool, &Value::Object(args), None).await?;
    if wants_json(&headers) {
        Ok(Json(called.structured).into_response())
    } else {
        Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], called.text).into_response())
    }
}

async fn verify(State(face): State<Arc<Face>>, headers: HeaderMap, body: Bytes) -> Answer {
    let id = session_of(&headers).ok_or(NemoGymError::NoSession)?;
    let mut body = body_object(&body)?;
    // BaseVerifyRequest's two fields, which NeMo Gym reads back from the answer.
    for field in ["responses_create_params", "response"] {
        match body.get(field) {
            Some(Value::Object(_)) => {}
            None | Some(Value::Null) => return Err(crate::api::status::invalid(format!("{field}: is required")).into()),
            Some(v) => return Err(crate::api::status::invalid(format!("{field}: must be an object, got {}", kind(v))).into()),
        }
    }
    let mut breakdown = face.gateway.score(&id).await?;
    face.gateway.close(&id).await?;
    if let Value::Object(b) = &breakdown {
        for (k, v) in b {
            if v.is_number() || v.is_boolean() {
                body.insert(k.clone(), v.clone());
            }
        }
    }
    breakdown["episode_id"] = Value::String(id);
    body.insert("breakdown".into(), breakdown);
    Ok(Json(Value::Object(body)).into_response())
}

async fn close_session(State(face): State<Arc<Face>>, headers: HeaderMap, body: Bytes) -> Answer {
    let body = body_object(&body)?;
    let (session, id) = match seed::read_close(&body)? {
        Some((session, episode)) => {
            let id = face.gateway.env().replica().own("resources_session_id", &session).map_err(Status::from)?;
            if face.bindings.get(&id).is_some_and(|bound| bound.episode != episode) {
                return Err(NemoGymError::Conflict { session: crate::util::excerpt::quoted(&session), what: "episode" });
            }
            (session, id)
        }
        None => {
            let id = session_of(&headers).ok_or(NemoGymError::NoSession)?;
            (id.clone(), id)
        }
    };
    face.gateway.retire(&id).await?;
    face.bindings.unbind(&id);
    Ok(with_cookie(Json(json!({"resources_session_id": session})).into_response(), None))
}

async fn aggregate_metrics(body: Bytes) -> Answer {
    let body = body_object(&body)?;
    Ok(Json(metrics::aggregate(&body)?).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cookie_is_found_among_others() {
        let mut h = HeaderMap::new();
        h.append(header::COOKIE, HeaderValue::from_static("a=1; memgym_session=ep-1"));
        assert_eq!(session_of(&h).as_deref(), Some("ep-1"));
        let mut h = HeaderMap::new();
        h.append(header::COOKIE, HeaderValue::from_static("a=1"));
        h.append(header::COOKIE, HeaderValue::from_static("memgym_session=\"x:2\""));
        assert_eq!(session_of(&h).as_deref(), Some("x:2"));
        let mut h = HeaderMap::new();
        h.append(header::COOKIE, HeaderValue::from_static("memgym_session="));
        assert_eq!(session_of(&h), None);
    }

    #[test]
    fn codes_map_as_fastapi_servers_answer() {
        assert_eq!(http_status(Code::InvalidArgument), StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(http_status(Code::NotFound), StatusCode::NOT_FOUND);
        assert_eq!(http_status(Code::FailedPrecondition), StatusCode::CONFLICT);
        assert_eq!(http_status(Code::AlreadyExists), StatusCode::CONFLICT);
        assert_eq!(http_status(Code::Unavailable), StatusCode::SERVICE_UNAVAILABLE);
    }
}
