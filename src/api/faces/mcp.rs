//! MCP (Model Context Protocol): memgym's episodes as ten tools any agent framework can call — the six
//! memory tools plus `create_episode`, `score_episode`, `close_episode` and `fork_episode`. Every editing tool takes
//! `episode_id`: the stateless 2026-07-28 protocol has no session to hold an episode, and one MCP
//! session may drive many episodes. Served over streamable HTTP by the official Rust SDK (rmcp, pinned;
//! both the initialize handshake versions and the stateless `server/discover` wire), and, with the same
//! tool table, over OpenEnv's `/mcp` JSON-RPC dialect (`openenv/dialect.rs`).
//!
//! The six tools' input schemas are ListTools' parameters plus `episode_id`; their results carry the
//! compact text the policy reads (as gRPC `CallTool` returns it) as text content and the gRPC response's
//! fields as `structuredContent`; the episode tools' text is the JSON of their structured content. A refused call (bad argument,
//! unknown episode, budget spent) is a result with `isError: true` naming the field, never a protocol
//! error; only an unknown tool name is (invalid params), as the MCP specification has it.
//!
//! **Per-episode endpoints**: `/mcp/episodes/{episode_id}` serves the same MCP, bound to one episode by its
//! URL, for clients that hand a tool server's URL to the policy bare (verifiers' external toolsets, any
//! agent harness that takes an MCP URL and nothing else). There the tool list is the six memory tools with
//! ListTools' own schemas (no `episode_id`: the URL names it; `call_id` is accepted, not advertised), and the
//! episode tools are not served: the policy that holds the URL cannot open, fork, score or close episodes,
//! so it cannot choose its question, re-score or end its episode early. A URL naming an episode that is not
//! open here (unknown, closed, reaped, or held by another replica) answers `tools/list` and `tools/call` with
//! JSON-RPC error -32602 (invalid params: the code MCP 2026-07-28 gives a resource that is not found,
//! SEP-2164), its message naming the id and its `data` the refusal's code and reason. The id is the path's last segment; behind a proxy, route `/mcp/episodes/NAME.…` to
//! replica NAME, as the gRPC face's `memgym-episode` header is routed (the book's verifiers chapter).

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::{SessionId, SessionManager};
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{json, Map, Value};
use tonic::Status;
use tracing::Instrument;

use crate::api::faces::gateway::{episode_json, is_tool, open_properties, tool_schemas, Gateway};
use crate::api::faces::mcp_sessions::CappedSessions;

/// The three episode tools, after the six memory tools.
pub const EPISODE_TOOLS: [&str; 4] = ["create_episode", "score_episode", "close_episode", "fork_episode"];

/// What the `episode_id` argument of the editing tools says.
const EPISODE_ID: &str = "The episode to act on (from create_episode).";

/// What the optional `call_id` argument of the six memory tools says (CallToolRequest.call_id).
const CALL_ID: &str = "Optional idempotency key, new for each call: the same call sent again with it (a retry after a \
    lost connection) returns the first result without applying it again.";

/// The ten tools as MCP describes them: `{"name", "description", "inputSchema"}`.
pub fn tools_json(gw: &Gateway) -> Vec<Value> {
    let mut out = Vec::with_capacity(9);
    for s in tool_schemas(gw) {
        let f = &s["function"];
        let mut schema = f["parameters"].clone();
        let mut props = Map::new();
        props.insert("episode_id".into(), json!({"type": "string", "description": EPISODE_ID}));
        if let Some(p) = schema["properties"].as_object() {
            props.extend(p.clone());
        }
        props.insert("call_id".into(), json!({"type": "string", "description": CALL_ID}));
        schema["properties"] = Value::Object(props);
        let mut required = vec![Value::from("episode_id")];
        required.extend(schema["required"].as_array().cloned().unwrap_or_default());
        schema["required"] = Value::Array(required);
        out.push(json!({"name": f["name"], "description": f["description"], "inputSchema": schema}));
    }
    let open = open_properties();
    let id_only =
        json!({"type": "object", "properties": {"episode_id": {"type": "string", "description": EPISODE_ID}}, "required": ["episode_id"]});
    out.push(json!({"name": EPISODE_TOOLS[0], "description": "Opens an episode: one LoCoMo conversation's memory and a target question. Returns its episode_id and question.",
        "inputSchema": {"type": "object", "properties": open, "required": []}}));
    out.push(json!({"name": EPISODE_TOOLS[1], "description": format!("Scores the episode (idempotent; finalises it): {}. Returns the breakdown.", crate::reward::IN_BRIEF),
        "inputSchema": id_only}));
    out.push(json!({"name": EPISODE_TOOLS[2], "description": "Closes the episode and frees it (idempotent).", "inputSchema": id_only}));
    out.push(json!({"name": EPISODE_TOOLS[3],
        "description": "Copies a live, unscored episode into independent forks (its memory, steps used, budget and trace); each scores against the parent's p_old. All or none are opened. Returns the forks' states.",
        "inputSchema": {"type": "object", "properties": {
            "episode_id": {"type": "string", "description": EPISODE_ID},
            "count": {"type": "integer", "description": "How many forks, 1 to 256 (default: as many as fork_ids or seeds name, else 1)."},
            "fork_ids": {"type": "array", "items": {"type": "string"}, "description": "The forks' ids (default: fresh ids)."},
            "seeds": {"type": "array", "items": {"type": "integer"}, "description": "The forks' seeds (default: the parent's)."}},
        "required": ["episode_id"]}}));
    out
}

/// The path of the per-episode endpoints (axum's syntax): the MCP of one episode, named by its URL.
pub const EPISODE_PATH: &str = "/mcp/episodes/{episode_id}";

/// The episode a per-episode endpoint's URL names. The route puts it into the HTTP request's extensions;
/// the handler reads it back from the request parts rmcp hands it with every request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundEpisode(pub String);

/// The six memory tools as a per-episode endpoint lists them: ListTools' names, descriptions and parameters.
pub fn bound_tools_json(gw: &Gateway) -> Vec<Value> {
    tool_schemas(gw)
        .iter()
        .map(|s| {
            let f = &s["function"];
            json!({"name": f["name"], "description": f["description"], "inputSchema": f["parameters"]})
        })
        .collect()
}

/// The refusals that mean "this URL names no episode open here": a JSON-RPC error on a per-episode
/// endpoint, not a tool error the policy could read and retry.
const GONE: [&str; 3] = ["EPISODE_NOT_FOUND", "EPISODE_ENDED", "WRONG_REPLICA"];

fn gone(s: &Status) -> bool {
    crate::api::status::reason_of(s).is_some_and(|(reason, _)| GONE.contains(&reason.as_str()))
}

/// JSON-RPC's invalid params (-32602; on every wire, where rmcp would send its resource-not-found code
/// as -32002 on older wires and on some paths of the newest) for a per-episode endpoint whose episode is not
/// open here: the refusal's message (which names the id, quoted short) and, as `data`, its code, reason and
/// retry flag.
fn not_open(s: &Status) -> ErrorData {
    ErrorData::invalid_params(s.message().to_string(), Some(json!({"error": crate::api::status::error_json(s)})))
}

/// A status that is neither a tool error nor "not open here" (a server failure) as a JSON-RPC error.
fn server_error(s: &Status) -> ErrorData {
    ErrorData::internal_error(s.message().to_string(), Some(json!({"error": crate::api::status::error_json(s)})))
}

/// Checks that episode `id` is open here (a per-episode endpoint's `tools/list`).
pub async fn check_bound(gw: &Gateway, id: &str) -> Result<(), ErrorData> {
    match gw.state(id).await {
        Ok(_) => Ok(()),
        Err(s) if gone(&s) => Err(not_open(&s)),
        Err(s) => Err(server_error(&s)),
    }
}

/// Runs memory tool `name` with `args` on episode `id`, which a per-episode endpoint's URL names. A bad
/// argument is a tool error (`is_error`), as on `/mcp`; an episode tool, an unknown tool, or an episode
/// that is not open here is a JSON-RPC error.
pub async fn call_bound(gw: &Gateway, id: &str, name: &str, mut args: Map<String, Value>) -> Result<Reply, ErrorData> {
    let name = name.trim();
    if EPISODE_TOOLS.contains(&name) {
        return Err(ErrorData::invalid_params(
            format!(
                "tool {name} is not served on /mcp/episodes/{{episode_id}}: this URL is bound to episode {}; open, fork, score \
                 and close episodes over gRPC or /mcp",
                crate::util::excerpt::quoted(id)
            ),
            None,
        ));
    }
    if !is_tool(name) {
        let message =
            format!("unknown tool {} (this endpoint serves {})", crate::util::excerpt::quoted(name), crate::tools::TOOL_NAMES.join(", "));
        return Err(ErrorData::invalid_params(message, None));
    }
    if args.contains_key("episode_id") {
        let s = crate::api::status::invalid("episode_id: not an argument here: this endpoint's URL names the episode".to_string());
        return Ok(Reply::refused(&s));
    }
    let call_id = match take_call_id(&mut args) {
        Ok(call_id) => call_id,
        Err(s) => return Ok(Reply::refused(&s)),
    };
    match gw.call(id, name, &Value::Object(args), call_id.as_deref()).await {
        Ok(c) => Ok(Reply::ok(c.text, c.structured)),
        Err(s) if gone(&s) => Err(not_open(&s)),
        Err(s) => Ok(Reply::refused(&s)),
    }
}

/// A tool's answer in MCP terms.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The text content.
    pub text: String,
    /// `structuredContent` (an object).
    pub structured: Value,
    /// A refused call.
    pub is_error: bool,
}

impl Reply {
    fn ok(text: String, structured: Value) -> Self {
        Reply { text, structured, is_error: false }
    }

    /// An episode tool's reply: its text is the JSON of its structured content (MCP's advice for
    /// clients that read only text).
    fn json(structured: Value) -> Self {
        Reply { text: structured.to_string(), structured, is_error: false }
    }

    fn refused(s: &Status) -> Self {
        Reply { text: format!("Error: {}", s.message()), structured: json!({"error": crate::api::status::error_json(s)}), is_error: true }
    }
}

/// Runs tool `name` with `args`; `None` for a name that is not one of the ten.
pub async fn call(gw: &Gateway, name: &str, mut args: Map<String, Value>) -> Option<Reply> {
    let name = name.trim();
    if !is_tool(name) && !EPISODE_TOOLS.contains(&name) {
        return None;
    }
    let r = if name == EPISODE_TOOLS[0] {
        gw.open(&args).await.map(|o| Reply::json(episode_json(&o.state, Some(o.created))))
    } else {
        match take_episode_id(&mut args) {
            Err(s) => Err(s),
            Ok(id) if name == EPISODE_TOOLS[1] => match only_episode_id(&args) {
                Err(s) => Err(s),
                Ok(()) => gw.score(&id).await.map(Reply::json),
            },
            Ok(id) if name == EPISODE_TOOLS[2] => match only_episode_id(&args) {
                Err(s) => Err(s),
                Ok(()) => gw.close(&id).await.map(|()| Reply::json(json!({"episode_id": id, "closed": true}))),
            },
            Ok(id) if name == EPISODE_TOOLS[3] => gw
                .fork(&id, &args)
                .await
                .map(|forks| Reply::json(json!({"forks": forks.iter().map(|s| episode_json(s, None)).collect::<Vec<_>>()}))),
            Ok(id) => match take_call_id(&mut args) {
                Err(s) => Err(s),
                Ok(call_id) => gw.call(&id, name, &Value::Object(args), call_id.as_deref()).await.map(|c| Reply::ok(c.text, c.structured)),
            },
        }
    };
    Some(r.unwrap_or_else(|s| Reply::refused(&s)))
}

/// The optional `call_id` of a memory tool's arguments, taken out of them.
fn take_call_id(args: &mut Map<String, Value>) -> Result<Option<String>, Status> {
    match args.remove("call_id") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(v) => Err(crate::api::status::invalid(format!("call_id: must be a string, got {}", crate::api::faces::gateway::kind(&v)))),
    }
}

fn take_episode_id(args: &mut Map<String, Value>) -> Result<String, Status> {
    match args.remove("episode_id") {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s),
        None | Some(Value::Null) => Err(crate::api::status::invalid("episode_id: is required".to_string())),
        Some(Value::String(_)) => Err(crate::api::status::invalid("episode_id: is required (got an empty string)".to_string())),
        Some(v) => Err(crate::api::status::invalid(format!("episode_id: must be a string, got {}", crate::api::faces::gateway::kind(&v)))),
    }
}

fn only_episode_id(args: &Map<String, Value>) -> Result<(), Status> {
    match args.keys().next() {
        Some(k) => Err(crate::api::status::invalid(format!("{}: unknown argument (expected episode_id)", crate::util::excerpt::name(k)))),
        None => Ok(()),
    }
}

/// The MCP server handler (rmcp): one per MCP session, all sharing the gateway.
#[derive(Debug, Clone)]
pub struct McpServer {
    gw: Gateway,
    tools: Arc<Vec<Tool>>,
    /// The per-episode endpoints' list.
    bound_tools: Arc<Vec<Tool>>,
}

fn rmcp_tools(tools: Vec<Value>) -> Vec<Tool> {
    tools
        .into_iter()
        .filter_map(|t| {
            let schema = t["inputSchema"].as_object()?.clone();
            let name = t["name"].as_str()?.to_string();
            let description = t["description"].as_str().unwrap_or_default().to_string();
            Some(Tool::new(name, description, schema))
        })
        .collect()
}

/// The episode the request's URL names, on a per-episode endpoint.
fn bound(context: &RequestContext<RoleServer>) -> Option<&str> {
    let parts = context.extensions.get::<http::request::Parts>()?;
    parts.extensions.get::<BoundEpisode>().map(|b| b.0.as_str())
}

impl McpServer {
    /// A handler over `gw`.
    pub fn new(gw: Gateway) -> Self {
        let (tools, bound_tools) = (Arc::new(rmcp_tools(tools_json(&gw))), Arc::new(rmcp_tools(bound_tools_json(&gw))));
        McpServer { gw, tools, bound_tools }
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        info.server_info = Implementation::new("memgym", env!("CARGO_PKG_VERSION"));
        info.instructions = Some(
            "memgym: a memory-editing RL environment. create_episode opens one LoCoMo conversation's memory and a question; \
             edit it with search_memory, manage_memory, delete_memory, sample_memory, merge_memory and split_memory \
             (each takes episode_id); score_episode returns the reward; close_episode frees it."
                .into(),
        );
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        if let Some(id) = bound(&context) {
            check_bound(&self.gw, id).await?;
            return Ok(ListToolsResult::with_all_items(self.bound_tools.as_ref().clone()));
        }
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(&self, request: CallToolRequestParams, context: RequestContext<RoleServer>) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let args = request.arguments.unwrap_or_default();
        let reply = if let Some(id) = bound(&context) {
            let span =
                tracing::info_span!("mcp_tool", tool = %crate::util::excerpt::name(&name), episode_id = %crate::util::excerpt::name(id));
            call_bound(&self.gw, id, &name, args).instrument(span).await?
        } else {
            let span = tracing::info_span!("mcp_tool", tool = %crate::util::excerpt::name(&name));
            let Some(reply) = call(&self.gw, &name, args).instrument(span).await else {
                return Err(ErrorData::invalid_params(format!("unknown tool {}", crate::util::excerpt::quoted(&name)), None));
            };
            reply
        };
        let mut result = if reply.is_error {
            CallToolResult::error(vec![ContentBlock::text(reply.text)])
        } else {
            CallToolResult::success(vec![ContentBlock::text(reply.text)])
        };
        result.structured_content = Some(reply.structured);
        Ok(result.into())
    }
}

/// How the MCP endpoint is served.
#[derive(Debug, Clone)]
pub struct McpOptions {
    /// `Host` header values accepted (DNS-rebinding protection); empty accepts any.
    pub allowed_hosts: Vec<String>,
    /// Open sessions (2025-11-25 and earlier: one per `initialize`) at most; the stateless wire opens none.
    pub max_sessions: usize,
}

impl McpOptions {
    /// The default session cap (`--mcp-max-sessions`).
    pub const MAX_SESSIONS: usize = 1024;

    /// `allowed_hosts` and the default session cap.
    pub fn new(allowed_hosts: Vec<String>) -> Self {
        McpOptions { allowed_hosts, max_sessions: Self::MAX_SESSIONS }
    }
}

/// The streamable-HTTP MCP service (serve it at `/mcp` through [`handle`]).
pub fn service(gw: Gateway, options: &McpOptions) -> Service {
    // A tool call's reply is one JSON-RPC response: plain JSON rather than an SSE stream where rmcp can
    // (the stateless 2026-07-28 wire; it falls back to SSE when a handler sends more than the response).
    let config = StreamableHttpServerConfig::default().with_json_response(true);
    let config = if options.allowed_hosts.is_empty() {
        config.disable_allowed_hosts()
    } else {
        config.with_allowed_hosts(options.allowed_hosts.clone())
    };
    let handler = McpServer::new(gw);
    let sessions = Arc::new(CappedSessions::new(options.max_sessions));
    Service { http: StreamableHttpService::new(move || Ok(handler.clone()), sessions.clone(), config), sessions }
}

/// The service rmcp builds and its sessions, as the faces hold them.
pub struct Service {
    http: StreamableHttpService<McpServer, CappedSessions>,
    sessions: Arc<CappedSessions>,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("mcp::Service").field("sessions", &self.sessions).finish_non_exhaustive()
    }
}

/// The cap on a request body: the one cap of every face.
const MAX_BODY: usize = crate::api::MAX_MESSAGE_BYTES;

/// Hands one HTTP request to rmcp. An `initialize` at `--mcp-max-sessions` is answered 503 with a JSON-RPC
/// error. A successful session DELETE is answered 204 No Content rather than rmcp's 202: the official
/// Python client accepts 200, 204 or 405 there and logs a warning otherwise.
pub async fn handle(service: &Service, mut request: axum::extract::Request) -> axum::response::Response {
    use axum::response::IntoResponse;
    // Only a session-less POST can be an `initialize`. A request whose `Mcp-Method` header names another
    // method is not read here (the stateless wire sends it with every call; rmcp refuses a header that
    // contradicts the body).
    let other_method = request.headers().get("mcp-method").is_some_and(|m| m.as_bytes() != b"initialize");
    if request.method() == http::Method::POST {
        let (parts, body) = request.into_parts();
        let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY).await else {
            return refusal(http::StatusCode::PAYLOAD_TOO_LARGE, &format!("Payload too large: the cap is {MAX_BODY} bytes"));
        };
        // Strict JSON: rmcp would keep one of a repeated key's values without a word.
        let parsed = match crate::util::json::strict_value_bytes(&bytes) {
            // JSON-RPC batches left MCP in 2025-06-18: an Invalid Request, as JSON-RPC answers what it
            // cannot take (rmcp alone answers 415 "fail to deserialize").
            Ok(serde_json::Value::Array(_)) => {
                let message =
                    "Invalid request: JSON-RPC batches are not supported (MCP removed them in 2025-06-18); send one message per request";
                let error = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": message}});
                return (http::StatusCode::BAD_REQUEST, axum::Json(error)).into_response();
            }
            Ok(v) => Some(v),
            Err(e @ crate::util::json::StrictError::Duplicate(_)) => {
                let error = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": format!("Invalid request: {e}")}});
                return (http::StatusCode::BAD_REQUEST, axum::Json(error)).into_response();
            }
            Err(crate::util::json::StrictError::Syntax(e)) => {
                // JSON-RPC's parse error (rmcp would answer 415 "fail to deserialize").
                let message = format!("Parse error: {}", crate::util::excerpt::cut(&e.to_string()));
                let error = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": message}});
                return (http::StatusCode::BAD_REQUEST, axum::Json(error)).into_response();
            }
        };
        let session_less = !parts.headers.contains_key("mcp-session-id") && !other_method;
        let opening = parsed.filter(|v| session_less && v["method"] == "initialize");
        if let Some(init) = opening {
            if let Some((active, max)) = service.sessions.full().await {
                let error = json!({"jsonrpc": "2.0", "id": init["id"],
                    "error": {"code": -32000, "message": format!("Server at capacity: {active}/{max} MCP sessions open (--mcp-max-sessions); retry later or use the stateless protocol"), "data": {"active_sessions": active, "max_sessions": max}}});
                return (http::StatusCode::SERVICE_UNAVAILABLE, axum::Json(error)).into_response();
            }
        }
        request = axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes));
    }
    let delete = request.method() == http::Method::DELETE;
    if delete {
        // A DELETE of a session the server does not hold is a 404, as every request naming an unknown
        // session is (rmcp alone answers 202 and closes nothing).
        let id = request.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(|v| SessionId::from(v.to_string()));
        if let Some(id) = id {
            if !service.sessions.has_session(&id).await.unwrap_or(false) {
                return refusal(http::StatusCode::NOT_FOUND, "Not Found: Session not found");
            }
        }
    }
    let mut response = service.http.handle(request).await.map(axum::body::Body::new);
    if delete && response.status() == http::StatusCode::ACCEPTED {
        *response.status_mut() = http::StatusCode::NO_CONTENT;
        *response.body_mut() = axum::body::Body::empty();
    }
    as_json_rpc(response).await
}

/// A transport-level refusal as the MCP SDKs' servers give it: the status, and a JSON-RPC error body
/// (`-32600`, id null) whose message says what was wrong.
fn refusal(status: http::StatusCode, message: &str) -> axum::response::Response {
    use axum::response::IntoResponse;
    let error = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": crate::util::excerpt::cut(message)}});
    (status, axum::Json(error)).into_response()
}

/// rmcp answers transport refusals (415 wrong content type, 406 a missing `Accept`, 400 no session id, 404
/// an unknown session, 405 a wrong method) with plain text and no content type; a client reading JSON-RPC
/// gets them as [`refusal`]s instead, the same status with the same words.
async fn as_json_rpc(response: axum::response::Response) -> axum::response::Response {
    let status = response.status();
    let plain = !response.headers().contains_key(http::header::CONTENT_TYPE);
    if !(status.is_client_error() && plain) {
        return response;
    }
    let (headers, text) = crate::api::plain_refusal(response).await;
    let text = text.unwrap_or_else(|| status.canonical_reason().unwrap_or_default().to_string());
    let mut out = refusal(status, &text);
    if let Some(allow) = headers.get(http::header::ALLOW).cloned() {
        out.headers_mut().insert(http::header::ALLOW, allow);
    }
    out
}

/// A router serving MCP alone (`--mcp-addr`): at `/mcp`, and bound to one episode at [`EPISODE_PATH`].
pub fn router(gw: Gateway, options: &McpOptions) -> axum::Router {
    let service = Arc::new(service(gw, options));
    let bound = service.clone();
    axum::Router::new()
        .route(
            "/mcp",
            axum::routing::any(move |request: axum::extract::Request| {
                let service = service.clone();
                async move { handle(&service, request).await }
            }),
        )
        .route(
            EPISODE_PATH,
            axum::routing::any(move |axum::extract::Path(id): axum::extract::Path<String>, mut request: axum::extract::Request| {
                let service = bound.clone();
                async move {
                    request.extensions_mut().insert(BoundEpisode(id));
                    handle(&service, request).await
                }
            }),
        )
}
