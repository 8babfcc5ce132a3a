//! OpenEnv's protocol (the `openenv` package, 0.10.0): the HTTP and WebSocket server that TRL, Unsloth,
//! SkyRL, ART and other trainers reach environments through. `memgym serve --openenv-addr` serves it from
//! the same process and episodes as gRPC.
//!
//! - `ws.rs`: `/ws`, one environment instance (one episode at a time) per connection;
//! - `session.rs`: that instance — reset, the three actions, state, observations;
//! - `http.rs`: `/health`, `/metadata`, `/schema`, `/openapi.json` and the stateless `/reset`, `/step`, `/state`;
//! - `dialect.rs`: `/mcp` — OpenEnv's JSON-RPC dialect, or standard MCP handed to rmcp;
//! - `schema.rs`: the JSON Schemas and the OpenAPI document.
//!
//! Every route checks `Host` (and `Origin`, when a browser sends one) against `--http-allowed-hosts`, as
//! rmcp does for MCP: a web page the user opens cannot drive a server on loopback (DNS rebinding).
//!
//! Sessions (WebSocket connections and `openenv/session/create` sessions) share one cap
//! (`--openenv-max-sessions`); a connection beyond it is accepted, told CAPACITY_REACHED, and closed.

mod dialect;
mod http;
mod schema;
mod session;
mod ws;

use ::http::StatusCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::routing::{any, get, post};
use axum::Router;

use crate::api::faces::gateway::Gateway;
use crate::api::faces::mcp::{self, McpOptions};
use crate::api::faces::sessions::SessionTable;

pub use http::WS_READ_BUFFER;
/// The `Host`/`Origin` check every HTTP face applies (`--http-allowed-hosts`).
pub(crate) use http::{check_host, detail_json};
pub use session::{ErrorCode, Session};

/// How the OpenEnv server is run.
#[derive(Debug, Clone)]
pub struct OpenEnvOptions {
    /// Concurrent sessions (WebSocket connections plus JSON-RPC sessions).
    pub max_sessions: usize,
    /// The standard MCP endpoint behind `/mcp`, and the Host allowlist of every route.
    pub mcp: McpOptions,
    /// How often the server pings a WebSocket ([`OpenEnvOptions::PING_EVERY`]); a connection silent for a
    /// whole period after a ping is closed.
    pub ping_every: Duration,
}

impl OpenEnvOptions {
    /// The server's ping period: OpenEnv's client pings every 20 s too.
    pub const PING_EVERY: Duration = Duration::from_secs(20);

    /// `max_sessions` places, the MCP options, the default ping period.
    pub fn new(max_sessions: usize, mcp: McpOptions) -> Self {
        OpenEnvOptions { max_sessions, mcp, ping_every: Self::PING_EVERY }
    }
}

/// The server's shared state.
pub struct OpenEnv {
    gateway: Gateway,
    ping_every: Duration,
    slots: Arc<Slots>,
    mcp: mcp::Service,
}

impl std::fmt::Debug for OpenEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenEnv").field("active", &self.slots.active()).field("max", &self.slots.max).finish()
    }
}

/// The OpenEnv router (HTTP, `/ws` and `/mcp`) over `gateway`.
pub fn router(gateway: Gateway, options: &OpenEnvOptions) -> Router {
    let idle = gateway.env().config().limits.idle_ttl;
    let state = Arc::new(OpenEnv {
        ping_every: options.ping_every,
        mcp: mcp::service(gateway.clone(), &options.mcp),
        gateway,
        slots: Arc::new(Slots {
            active: AtomicUsize::new(0),
            max: options.max_sessions,
            parked: SessionTable::new(options.max_sessions, idle),
        }),
    });
    Router::new()
        .route("/health", get(http::health))
        .route("/metadata", get(http::metadata))
        .route("/schema", get(http::schema))
        .route("/openapi.json", get(http::openapi))
        .route("/reset", post(http::reset))
        .route("/step", post(http::step))
        .route("/state", get(http::state))
        .route("/ws", get(http::websocket))
        .route("/mcp", any(http::mcp))
        // FastAPI's bodies for an unknown path and a known one with another method, as OpenEnv's server sends.
        .fallback(|| async { (StatusCode::NOT_FOUND, axum::Json(serde_json::json!({"detail": "Not Found"}))) })
        .method_not_allowed_fallback(|| async {
            (StatusCode::METHOD_NOT_ALLOWED, axum::Json(serde_json::json!({"detail": "Method Not Allowed"})))
        })
        .with_state(state)
        .layer(axum::middleware::from_fn(http::detail_json))
        .layer(axum::middleware::from_fn_with_state(Arc::new(options.mcp.allowed_hosts.clone()), http::check_host))
}

/// OpenEnv's words for a full server (its `exceptions.py`), for the WebSocket and JSON-RPC refusals alike.
fn capacity_message(active: usize, max: usize, what: &str) -> String {
    format!("Server at capacity: {active}/{max} sessions active. Cannot {what}.")
}

/// The session cap and the JSON-RPC sessions waiting for (or attached to) a WebSocket.
#[derive(Debug)]
struct Slots {
    active: AtomicUsize,
    max: usize,
    /// session id → its place, until a WebSocket attaches to it (the faces' one session table). A session
    /// neither attached nor named by a call for the episodes' idle TTL (`--idle-ttl-secs`) gives its place
    /// back, as OpenEnv's `session_timeout` reaper does.
    parked: SessionTable<String, Parked>,
}

#[derive(Debug)]
struct Parked {
    /// The session's place; `None` once a WebSocket holds it (attached).
    slot: Option<Slot>,
}

impl Parked {
    fn attached(&self) -> bool {
        self.slot.is_none()
    }
}

/// One of the cap's places, given back when dropped.
#[derive(Debug)]
pub struct Slot {
    slots: Arc<Slots>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.active.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Slots {
    fn active(&self) -> usize {
        self.active.load(Ordering::Acquire)
    }

    /// A place, or `(active, max)` at the cap. Idle JSON-RPC sessions are dropped first.
    fn acquire(self: &Arc<Self>) -> Result<Slot, (usize, usize)> {
        self.sweep();
        self.active
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < self.max).then_some(n + 1))
            .map(|_| Slot { slots: self.clone() })
            .map_err(|n| (n, self.max))
    }

    /// Keeps `slot` for a JSON-RPC session; returns its id.
    fn park(&self, slot: Slot) -> String {
        let id = format!("{:032x}", rand::random::<u128>());
        // The slot counter is the cap; the table never holds more sessions than it has places.
        let _ = self.parked.insert(id.clone(), Parked { slot: Some(slot) }, |p| !p.attached());
        id
    }

    /// A call named session `id`: it is in use.
    fn touch(&self, id: &str) {
        self.parked.with(id, |_| ());
    }

    /// Drops the unattached sessions idle for longer than `idle` (their places come back).
    fn sweep(&self) {
        self.parked.sweep(|p| !p.attached());
    }

    /// Hands a parked session's place to a WebSocket; `None` for an unknown or already attached id.
    fn attach(&self, id: &str) -> Option<Slot> {
        self.parked.with(id, |p| p.slot.take()).flatten()
    }

    /// The WebSocket attached to `id` ended: the session goes with it.
    fn detach(&self, id: &str) {
        self.parked.remove(id);
    }

    /// Closes a JSON-RPC session: `Some(true)` closed, `Some(false)` a WebSocket still holds it (it ends
    /// with the connection), `None` unknown.
    fn close(&self, id: &str) -> Option<bool> {
        self.parked.remove_if(id, |p| !p.attached())
    }
}

#[cfg(test)]
mod tests;
