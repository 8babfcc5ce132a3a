//! NeMo Gym's `expose_tools_over_mcp` role: the six tools over MCP at `/mcp` on the resources server's own
//! address, each call bound to its session by the `X-NeMo-Gym-Session-Token` header that `/seed_session`'s
//! reply hands out (under `resources_tools` for 0.7's typed seed, under `mcp` for an agent's run request).
//! NeMo Gym's sandboxed agents and its Environment Server's MCP transport reach a resources server this way:
//! they resolve `url_path` against the server's address and replay the reply's headers on every MCP request.
//!
//! The MCP itself is memgym's MCP face bound to one episode ([`crate::api::faces::mcp::BoundEpisode`], as on
//! `/mcp/episodes/{episode_id}`): the six tools without an `episode_id` argument, and no tool that opens,
//! scores or closes an episode, so a policy given these tools cannot score its own episode. The token is
//! the episode id, as the cookie's value is: an episode id is already the capability every face takes.

use std::sync::Arc;

use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use crate::api::faces::mcp::{BoundEpisode, Service};

/// Where the MCP is served, relative to the resources server's address.
pub const PATH: &str = "/mcp";

/// The header that names a request's session (its episode id).
pub const TOKEN_HEADER: &str = "X-NeMo-Gym-Session-Token";

/// What `/seed_session` hands out for MCP access to episode `id` (NeMo Gym's `MCPServerMetadata`).
pub fn metadata(id: &str) -> Value {
    json!({"server_name": "memgym", "url_path": PATH, "transport": "http", "headers": {TOKEN_HEADER: id}})
}

/// Serves one MCP request on the episode its token names; a request without a token is refused with a
/// JSON-RPC error (400), naming the header.
pub async fn handle(service: Arc<Service>, mut request: axum::extract::Request) -> Response {
    let token = request.headers().get(TOKEN_HEADER).and_then(|v| v.to_str().ok()).map(str::trim).filter(|t| !t.is_empty());
    let Some(id) = token.map(str::to_string) else {
        let message = format!("{TOKEN_HEADER}: header is required; POST /seed_session first and send the headers its reply gives");
        let error = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": message}});
        return (http::StatusCode::BAD_REQUEST, axum::Json(error)).into_response();
    };
    request.extensions_mut().insert(BoundEpisode(id));
    crate::api::faces::mcp::handle(&service, request).await
}
