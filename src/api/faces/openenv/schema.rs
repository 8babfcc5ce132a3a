//! The self-description OpenEnv clients and `openenv validate` read: `/metadata`, `/schema` (JSON Schemas
//! of the action, the observation and the state) and `/openapi.json`. Written by hand from the shapes in
//! `session.rs`; the reset keys and tool names come from their one definition.

use serde_json::{json, Map, Value};

use crate::api::faces::gateway::open_properties;
use crate::tools::TOOL_NAMES;

/// `GET /metadata`.
pub fn metadata() -> Value {
    json!({
        "name": "memgym",
        "description": format!("Memory editing on LoCoMo: an episode is one conversation's memory plus a question; the agent edits the \
            memory with six tools (search, manage, delete, sample, merge, split) and is scored: {}.", crate::reward::IN_BRIEF),
        "version": env!("CARGO_PKG_VERSION"),
        "author": "memgym",
        "documentation_url": null,
        "readme_content": null,
    })
}

/// The reset data's schema.
pub fn reset_schema() -> Value {
    json!({"title": "ResetRequest", "type": "object", "properties": open_properties(), "additionalProperties": false})
}

/// The action's schema: list_tools, call_tool or score.
pub fn action_schema() -> Value {
    let meta = json!({"type": "object", "description": "Ignored."});
    json!({
        "title": "MemgymAction",
        "oneOf": [
            {"title": "ListToolsAction", "type": "object", "required": ["type"], "additionalProperties": false,
             "properties": {"type": {"const": "list_tools"}, "metadata": meta}},
            {"title": "CallToolAction", "type": "object", "required": ["type", "tool_name"], "additionalProperties": false,
             "properties": {"type": {"const": "call_tool"}, "tool_name": {"type": "string", "enum": TOOL_NAMES},
                "arguments": {"type": "object", "description": "The tool's arguments (see list_tools)."}, "metadata": meta}},
            {"title": "ScoreAction", "type": "object", "required": ["type"], "additionalProperties": false,
             "properties": {"type": {"const": "score"}, "metadata": meta}},
        ],
    })
}

/// The observation's schema.
pub fn observation_schema() -> Value {
    let nullable = |t: &str| json!({"type": [t, "null"]});
    json!({
        "title": "MemgymObservation", "type": "object",
        "properties": {
            "episode_id": {"type": "string"},
            "text": {"type": "string", "description": "What the policy reads: the question, a tool's compact result, an error, or the score."},
            "question": nullable("string"),
            "tool_name": nullable("string"),
            "result": {"type": ["object", "null"], "description": "call_tool: the tool's structured result (the gRPC response's fields)."},
            "error": {"type": ["object", "null"], "properties": {"error_type": {"enum": ["tool_not_found", "invalid_args", "execution_error", "timeout"]}, "message": {"type": "string"}}},
            "tools": {"type": ["array", "null"], "items": {"type": "object", "properties": {"name": {"type": "string"}, "description": {"type": "string"}, "input_schema": {"type": "object"}}}},
            "steps_used": {"type": "integer"}, "steps_left": {"type": "integer"}, "memory_count": {"type": "integer"},
            "metadata": {"type": "object", "description": "reset: the episode; score (and the step that spends the budget): the reward breakdown."},
            "reward": {"type": ["number", "null"]},
            "done": {"type": "boolean"},
        },
    })
}

/// The state's schema.
pub fn state_schema() -> Value {
    json!({
        "title": "MemgymState", "type": "object", "additionalProperties": true,
        "properties": {
            "episode_id": {"type": ["string", "null"]}, "step_count": {"type": "integer", "minimum": 0},
            "question": {"type": "string"}, "steps_used": {"type": "integer"}, "steps_left": {"type": "integer"},
            "max_steps": {"type": "integer"}, "memory_count": {"type": "integer"}, "done": {"type": "boolean"}, "scored": {"type": "boolean"},
        },
        "required": ["episode_id", "step_count"],
    })
}

/// `GET /schema`.
pub fn schema() -> Value {
    // OpenEnv's SchemaResponse allows no other key; the reset data's schema is in /openapi.json.
    json!({"action": action_schema(), "observation": observation_schema(), "state": state_schema()})
}

/// `GET /openapi.json`: the HTTP surface in OpenAPI 3.1.
pub fn openapi() -> Value {
    let json_body = |schema: Value| json!({"content": {"application/json": {"schema": schema}}});
    let ok = |schema: Value| json!({"200": {"description": "OK", "content": {"application/json": {"schema": schema}}}});
    let step_response = json!({"type": "object", "properties": {"observation": observation_schema(), "reward": {"type": ["number", "null"]},
        "done": {"type": "boolean"}, "metadata": {"type": "object"}}, "required": ["observation", "reward", "done"]});
    let mut step_props = Map::new();
    step_props.insert("action".into(), action_schema());
    step_props.insert("timeout_s".into(), json!({"type": "number", "exclusiveMinimum": 0}));
    step_props.insert("request_id".into(), json!({"type": "string", "maxLength": 255}));
    if let Some(p) = reset_schema()["properties"].as_object() {
        step_props.extend(p.clone());
    }
    let mut unprocessable = ok(step_response.clone());
    unprocessable["422"] = json!({"description": "Validation error: {\"detail\": [{\"loc\", \"msg\", \"type\"}]}"});
    let mut reset_resp = ok(step_response.clone());
    reset_resp["422"] = unprocessable["422"].clone();
    json!({
        "openapi": "3.1.0",
        "info": {"title": "memgym (OpenEnv)", "version": "1.0.0", "description": format!("memgym {} speaking OpenEnv's HTTP and WebSocket protocol. Episodes run over WebSocket /ws; /reset and /step are stateless, as OpenEnv's are.", env!("CARGO_PKG_VERSION"))},
        "paths": {
            "/health": {"get": {"summary": "Health", "responses": ok(json!({"type": "object", "properties": {"status": {"enum": ["healthy"]}}}))}},
            "/metadata": {"get": {"summary": "Environment metadata", "responses": ok(json!({"type": "object"}))}},
            "/schema": {"get": {"summary": "Action, observation and state JSON Schemas", "responses": ok(json!({"type": "object"}))}},
            "/reset": {"post": {"summary": "Open a throwaway episode and return its first observation (stateless)", "requestBody": json_body(reset_schema()), "responses": reset_resp}},
            "/step": {"post": {"summary": "Run one action on a throwaway episode (stateless)",
                "requestBody": json_body(json!({"type": "object", "properties": step_props, "required": ["action"]})), "responses": unprocessable}},
            "/state": {"get": {"summary": "State of a fresh environment (stateless)", "responses": ok(state_schema())}},
            "/mcp": {"post": {"summary": "MCP: OpenEnv's JSON-RPC dialect (Accept */*), or standard streamable-HTTP MCP (Accept application/json, text/event-stream)",
                "responses": ok(json!({"type": "object"}))}},
            "/ws": {"get": {"summary": "WebSocket: one episode per connection (messages reset, step, state, close)", "responses": {"101": {"description": "Switching protocols"}}}},
        },
    })
}
