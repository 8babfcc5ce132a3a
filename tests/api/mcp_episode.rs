//! The per-episode MCP endpoints, `/mcp/episodes/{episode_id}`, with the official Rust SDK's client on both
//! wires: the URL alone names the episode (the six tools with ListTools' schemas, no `episode_id`), the
//! episode tools are not served there, and a URL naming no open episode — unknown, closed, or on another
//! replica — is a JSON-RPC error (-32602, invalid params, on both wires) naming the id, quoted short. Checked against gRPC on the same
//! server. (verifiers 0.4.0 drives these endpoints from Python in tests/python/protocols/test_verifiers.py.)

use memgym::api::faces::mcp::McpOptions;
use memgym::api::pb;
use rmcp::model::{CallToolRequestParams, ErrorCode};
use rmcp::service::ServiceError;
use serde_json::{json, Value};

use super::mcp::{call, client, modes, spawn_replica_face, Face};

async fn face(replica: Option<&str>) -> Face {
    spawn_replica_face(McpOptions::new(vec!["127.0.0.1".into()]), replica).await
}

/// The URL of episode `id`'s endpoint on `face`.
fn episode_url(face: &Face, id: &str) -> String {
    format!("{}/episodes/{id}", face.url)
}

async fn open(face: &mut Face, id: &str) -> String {
    let req = pb::CreateEpisodeRequest { question_id: "conv-26:q3".into(), episode_id: id.into(), seed: Some(5), ..Default::default() };
    face.grpc.create_episode(req).await.expect("opened over gRPC").into_inner().state.expect("state").episode_id
}

/// The JSON-RPC error of a protocol-level refusal.
fn rpc_error(e: ServiceError) -> rmcp::ErrorData {
    if let ServiceError::McpError(data) = e {
        return data;
    }
    panic!("expected a JSON-RPC error, got {e:?}")
}

#[tokio::test]
async fn the_url_names_the_episode_and_the_tools_act_on_it() {
    let mut face = face(None).await;
    let listed = face.grpc.list_tools(pb::ListToolsRequest {}).await.unwrap().into_inner();
    for (wire, mode) in modes() {
        let id = open(&mut face, &format!("bound-{wire}")).await;
        let c = client(&episode_url(&face, &id), mode).await;
        let tools = c.peer().list_tools(None).await.expect("tools/list").tools;
        assert_eq!(tools.len(), 6, "{wire}: the six memory tools only");
        for (t, g) in tools.iter().zip(&listed.tools) {
            let schema: Value = serde_json::from_str(&g.schema_json).unwrap();
            assert_eq!(t.name, g.name, "{wire}");
            assert_eq!(Value::Object(t.input_schema.as_ref().clone()), schema["function"]["parameters"], "{wire}: ListTools' parameters");
            assert!(t.input_schema["properties"].get("episode_id").is_none(), "{wire}: the URL names the episode");
        }

        let (err, text, hits) = call(&c, "search_memory", json!({"query": "What did Caroline research?", "top_k": 3})).await;
        assert!(!err && text.starts_with("[m"), "{text}");
        let twin = open(&mut face, &format!("bound-twin-{wire}")).await;
        let req = pb::CallToolRequest {
            episode_id: twin,
            tool_name: "search_memory".into(),
            arguments_json: r#"{"query": "What did Caroline research?", "top_k": 3}"#.into(),
            call_id: String::new(),
        };
        let same = face.grpc.call_tool(req).await.unwrap().into_inner().text;
        assert_eq!(text, same, "{wire}: the same text as gRPC's CallTool on a twin episode");
        assert_eq!(hits["step"]["step"], 1);
        let (err, text, _) =
            call(&c, "manage_memory", json!({"operation": "create", "content": "Caroline researched adoption agencies in May 2023."}))
                .await;
        assert!(!err, "{text}");

        // An episode_id argument is a tool error naming it; the episode tools are not served here.
        let (err, text, refused) = call(&c, "delete_memory", json!({"episode_id": "other", "memory_id": "m0000"})).await;
        assert!(err && text.contains("episode_id") && text.contains("URL"), "{text}");
        assert_eq!(refused["error"]["code"], "invalid_argument");
        for tool in memgym::api::faces::mcp::EPISODE_TOOLS {
            let e = c.peer().call_tool(CallToolRequestParams::new(tool).with_arguments(Default::default())).await.unwrap_err();
            let e = rpc_error(e);
            assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{wire}: {tool}");
            assert!(e.message.contains(tool) && e.message.contains("not served") && e.message.contains(&id), "{}", e.message);
        }

        let state = face.grpc.get_episode(pb::GetEpisodeRequest { episode_id: id.clone(), include_trace: false }).await.unwrap();
        let state = state.into_inner().state.unwrap();
        assert_eq!((state.steps_used, state.scored), (2, false), "{wire}: two steps on the bound episode, not scored");
        let g = face.grpc.score_episode(pb::ScoreEpisodeRequest { episode_id: id.clone() }).await.unwrap().into_inner();
        assert!(g.reward.is_finite());
        let _ = c.cancel().await;
    }
    face.server.stop().await.unwrap();
}

#[tokio::test]
async fn a_url_naming_no_open_episode_is_a_json_rpc_error_naming_it() {
    let mut face = face(None).await;
    // Unknown: tools/list and tools/call both answer a JSON-RPC error with the id in the message.
    for (wire, mode) in modes() {
        let c = client(&episode_url(&face, "no-such-episode"), mode).await;
        let args = json!({"query": "x"}).as_object().unwrap().clone();
        for e in [
            rpc_error(c.peer().list_tools(None).await.unwrap_err()),
            rpc_error(c.peer().call_tool(CallToolRequestParams::new("search_memory").with_arguments(args)).await.unwrap_err()),
        ] {
            assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{wire}: {e:?}");
            assert!(e.message.contains("no-such-episode") && e.message.contains("not found"), "{}", e.message);
            assert_eq!(e.data.as_ref().unwrap()["error"]["reason"], "EPISODE_NOT_FOUND");
        }
        let _ = c.cancel().await;
    }
    let (_, mode) = modes().into_iter().nth(1).unwrap();
    // Closed: the message says so.
    let id = open(&mut face, "bound-closed").await;
    let c = client(&episode_url(&face, &id), mode.clone()).await;
    assert_eq!(c.peer().list_tools(None).await.unwrap().tools.len(), 6);
    face.grpc.close_episode(pb::CloseEpisodeRequest { episode_id: id.clone() }).await.unwrap();
    let e = rpc_error(c.peer().list_tools(None).await.unwrap_err());
    assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
    assert!(e.message.contains(&id) && e.message.contains("closed"), "{}", e.message);
    assert_eq!(e.data.as_ref().unwrap()["error"]["reason"], "EPISODE_ENDED");
    let _ = c.cancel().await;

    // A long id is quoted short: the message never echoes it whole.
    let long = "x".repeat(400);
    let c = client(&episode_url(&face, &long), mode).await;
    let e = rpc_error(c.peer().list_tools(None).await.unwrap_err());
    assert!(e.message.contains("xxxxxxxx") && !e.message.contains(&long) && e.message.len() < 300, "{}", e.message);
    let _ = c.cancel().await;
    face.server.stop().await.unwrap();
}

/// Replicas: ids name their replica (`r1.…`), so the bound URL does too; a URL naming another replica's
/// episode is refused here with the reason a proxy's misroute gets (route `/mcp/episodes/NAME.` to NAME).
#[tokio::test]
async fn a_replica_serves_its_own_episodes_and_names_a_misrouted_one() {
    let mut face = face(Some("r1")).await;
    let id = open(&mut face, "bound").await;
    assert_eq!(id, "r1.bound");
    let (_, mode) = modes().into_iter().next().unwrap();
    let c = client(&episode_url(&face, &id), mode.clone()).await;
    let (err, text, _) = call(&c, "sample_memory", json!({"k": 2})).await;
    assert!(!err, "{text}");
    let _ = c.cancel().await;
    let c = client(&episode_url(&face, "r2.bound"), mode).await;
    let e = rpc_error(c.peer().list_tools(None).await.unwrap_err());
    assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
    assert!(e.message.contains("r2.bound") && e.message.contains("r1"), "{}", e.message);
    assert_eq!(e.data.as_ref().unwrap()["error"]["reason"], "WRONG_REPLICA");
    let _ = c.cancel().await;
    face.server.stop().await.unwrap();
}
