//! The Open Reward Standard (ORS): the HTTP + Server-Sent Events protocol of the `openreward` SDK, which
//! TRL 1.16 consumes (`trl.experimental.openreward`). `memgym serve --ors-addr` serves memgym as one ORS
//! environment, `memgym`, from the same process and episodes as gRPC:
//!
//! - **splits** `train` and `test` (the dataset's), **tasks** their questions (category 5 left out, as
//!   the verl export and CreateEpisode's default do), in dataset order;
//! - a **session** per task: `POST /create_session` gives an id, `POST /create` opens one memgym episode
//!   for it, `POST /delete` closes it; the SDK pings it every 10 s (`POST /ping`), which keeps the
//!   episode from the idle reaper;
//! - **tools** the six memory tools plus `submit`, called with `POST /call` and answered as an SSE stream
//!   (`task_id`, then `chunk`s and `end`). A memory tool's output carries `reward: null` and `finished:
//!   false`; `submit` scores the episode (ScoreEpisode) and carries the reward with `finished: true`, as
//!   does the call that spends the last step of the budget. After that every call is refused in-band
//!   (`reason: "episode_finished"`): the reward is given once per session.
//!
//! A call's `task_id` is its exactly-once key (the episode's `call_id`): the SDK sends it again when a
//! stream breaks, and gets the first result rather than a second edit.
//!
//! - `tasks.rs`: discovery (environments, tools, splits, tasks) and the task specs;
//! - `sessions.rs`: the session table (its cap, its idle sweep, the once-only finish);
//! - `call.rs`: `/create`, `/call` and the other session routes, the tool outputs and their SSE stream.
//!
//! The environment routes are served both bare (`/tools`, `/call`: what the SDK sends for a base URL that
//! names no environment) and under `/memgym/` (`/{env_name}/tools`). Errors are FastAPI's shape,
//! `{"detail": "field: what is wrong"}`, with 400 for bad input, 404 for an unknown environment or
//! session, 409 for a conflicting one, 410 for a session whose episode ended, 503 at a cap. Every route
//! checks `Host` (and a browser's `Origin`) against `--http-allowed-hosts`, as the OpenEnv face does.

mod call;
mod sessions;
mod tasks;

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use http::StatusCode;
use serde_json::{json, Map, Value};
use tonic::{Code, Status};

use crate::api::faces::gateway::{kind, Gateway};
use crate::util::excerpt::{name, quoted};

pub use tasks::{task_spec, ENV_NAME, SUBMIT};

/// How the ORS endpoint is served.
#[derive(Debug, Clone)]
pub struct OrsOptions {
    /// `Host` header values accepted (DNS-rebinding protection); empty accepts any.
    pub allowed_hosts: Vec<String>,
    /// Sessions held at most (given out by `/create_session`, with or without an episode).
    pub max_sessions: usize,
}

impl OrsOptions {
    /// The default session cap (`--ors-max-sessions`).
    pub const MAX_SESSIONS: usize = 4096;

    /// `allowed_hosts` and the default session cap.
    pub fn new(allowed_hosts: Vec<String>) -> Self {
        OrsOptions { allowed_hosts, max_sessions: Self::MAX_SESSIONS }
    }
}

/// The server's shared state.
#[derive(Debug)]
struct Ors {
    gateway: Gateway,
    sessions: sessions::Sessions,
}

/// Why an ORS request is refused, with its HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum OrsError {
    /// A body, header or field is malformed (400).
    #[error("{0}")]
    BadRequest(String),
    /// The path names another environment (404).
    #[error("unknown environment {}: this server serves {ENV_NAME:?}", quoted(.0))]
    UnknownEnvironment(String),
    /// No session has this id (404).
    #[error("X-Session-ID: session {} not found (get one from POST /create_session; sessions idle past --idle-ttl-secs are dropped)", quoted(.0))]
    NoSession(String),
    /// The session has no episode yet (404, as the SDK's server answers a session not created).
    #[error("X-Session-ID: session {} has no episode yet: POST /create first", quoted(.0))]
    NotCreated(String),
    /// The request conflicts with the session's state (409).
    #[error("{0}")]
    Conflict(String),
    /// The session's episode ended (closed or reaped) (410).
    #[error("{0}")]
    Gone(String),
    /// `--ors-max-sessions` sessions are held (503).
    #[error("server at capacity: {active}/{max} ORS sessions held (--ors-max-sessions); delete finished sessions or retry later")]
    Full {
        /// Sessions held.
        active: usize,
        /// The cap.
        max: usize,
    },
    /// The environment refused or failed (its gRPC code decides the status).
    #[error("{}", .0.message())]
    Status(#[from] Status),
}

impl OrsError {
    fn status(&self) -> StatusCode {
        match self {
            OrsError::BadRequest(_) => StatusCode::BAD_REQUEST,
            OrsError::UnknownEnvironment(_) | OrsError::NoSession(_) | OrsError::NotCreated(_) => StatusCode::NOT_FOUND,
            OrsError::Conflict(_) => StatusCode::CONFLICT,
            OrsError::Gone(_) => StatusCode::GONE,
            OrsError::Full { .. } => StatusCode::SERVICE_UNAVAILABLE,
            OrsError::Status(s) => http_status(s.code()),
        }
    }
}

/// The HTTP status of a gRPC code on this face ([`crate::api::faces::http_status`]).
fn http_status(code: Code) -> StatusCode {
    crate::api::faces::http_status::http_status(crate::api::faces::http_status::HttpFace::Ors, code)
}

impl IntoResponse for OrsError {
    fn into_response(self) -> Response {
        let status = self.status();
        let mut body = json!({"detail": self.to_string()});
        if let OrsError::Status(s) = &self {
            if let Some((reason, retryable)) = crate::api::status::reason_of(s) {
                body["reason"] = Value::String(reason);
                body["retryable"] = Value::Bool(retryable);
            }
        }
        // The SDK backs off by Retry-After on a 503.
        crate::api::faces::http_status::with_retry_after((status, Json(body)).into_response())
    }
}

/// The ORS router over `gateway`.
pub fn router(gateway: Gateway, options: &OrsOptions) -> Router {
    let idle = gateway.env().config().limits.idle_ttl;
    let state = Arc::new(Ors { gateway, sessions: sessions::Sessions::new(options.max_sessions, idle) });
    let mut r = Router::new()
        .route("/health", get(|| async { Json(json!({"status": "ok"})) }))
        .route("/version", get(|| async { Json(json!({"version": env!("CARGO_PKG_VERSION"), "build_sha": null})) }))
        .route("/list_environments", get(|| async { Json(json!([ENV_NAME])) }))
        .route("/create_session", post(call::create_session))
        .route("/delete_session", post(call::delete))
        .route("/create", post(call::create))
        .route("/delete", post(call::delete))
        .route("/ping", post(call::ping));
    // Each environment route bare and under /{env_name}.
    macro_rules! both {
        ($path:literal, $method:expr) => {
            r = r.route(concat!("/", $path), $method.clone()).route(concat!("/{env_name}/", $path), $method)
        };
    }
    both!("tools", get(tasks::tools));
    both!("task_tools", get(call::task_tools));
    both!("splits", get(tasks::splits));
    both!("tasks", post(tasks::list_tasks));
    both!("num_tasks", post(tasks::num_tasks));
    both!("task", post(tasks::get_task));
    both!("task_range", post(tasks::task_range));
    both!("prompt", get(call::prompt));
    both!("messages", get(call::messages));
    both!("call", post(call::call));
    both!("score_group", post(call::score_group));
    r.fallback(|| async { (StatusCode::NOT_FOUND, Json(json!({"detail": "Not Found"}))) })
        .method_not_allowed_fallback(|| async { (StatusCode::METHOD_NOT_ALLOWED, Json(json!({"detail": "Method Not Allowed"}))) })
        .with_state(state)
        .layer(DefaultBodyLimit::max(crate::api::MAX_MESSAGE_BYTES))
        .layer(axum::middleware::from_fn(crate::api::faces::openenv::detail_json))
        .layer(axum::middleware::from_fn_with_state(Arc::new(options.allowed_hosts.clone()), crate::api::faces::openenv::check_host))
}

/// The environment a path names (`None`: a bare route) must be `memgym`, in any case, as the SDK's
/// server matches names.
fn check_env(env_name: &Option<axum::extract::Path<String>>) -> Result<(), OrsError> {
    env_name.as_ref().map_or(Ok(()), |p| check_name(&p.0))
}

/// An environment name must be `memgym` (any case).
fn check_name(env_name: &str) -> Result<(), OrsError> {
    if env_name.eq_ignore_ascii_case(ENV_NAME) {
        Ok(())
    } else {
        Err(OrsError::UnknownEnvironment(env_name.to_string()))
    }
}

/// A request body as a JSON object (an empty body is `{}`), read strictly (a repeated key is refused).
fn body_object(body: &[u8]) -> Result<Map<String, Value>, OrsError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match crate::util::json::strict_value_bytes(body) {
        Ok(Value::Object(o)) => Ok(o),
        Ok(v) => Err(OrsError::BadRequest(format!("body: must be a JSON object, got {}", kind(&v)))),
        Err(crate::util::json::StrictError::Syntax(e)) => {
            Err(OrsError::BadRequest(format!("body: not valid JSON: {}", crate::util::excerpt::cut(&e.to_string()))))
        }
        Err(e @ crate::util::json::StrictError::Duplicate(_)) => Err(OrsError::BadRequest(format!("body: {e}"))),
    }
}

/// Refuses a key of `body` that is not one of `known`, naming it.
fn known_keys(body: &Map<String, Value>, known: &[&str]) -> Result<(), OrsError> {
    match body.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(OrsError::BadRequest(format!("{}: unknown key (expected {})", name(k), known.join(", ")))),
        None => Ok(()),
    }
}

/// `body[key]` as a string; `None` when absent or null.
fn opt_string(body: &Map<String, Value>, key: &str) -> Result<Option<String>, OrsError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(OrsError::BadRequest(format!("{key}: must be a string, got {}", kind(v)))),
    }
}

/// `body[key]` as a whole number; `None` when absent or null.
fn opt_int(body: &Map<String, Value>, key: &str) -> Result<Option<i64>, OrsError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => {
            n.as_i64().map(Some).ok_or_else(|| OrsError::BadRequest(format!("{key}: must be a whole number, got {n}")))
        }
        Some(v) => Err(OrsError::BadRequest(format!("{key}: must be a whole number, got {}", kind(v)))),
    }
}
