//! Ended episodes over gRPC: the ids of closed and reaped episodes are remembered, so calls on them are
//! FAILED_PRECONDITION saying how and when the episode ended (never NOT_FOUND, never a fresh episode),
//! a repeated close is OK, and ids never seen stay NOT_FOUND.

use std::time::Duration;

use memgym::api::pb;
use serde_json::json;
use tonic::{Code, Status};

use crate::helpers::{spawn_app, App};

fn create(id: &str) -> pb::CreateEpisodeRequest {
    pb::CreateEpisodeRequest { episode_id: id.into(), question_id: "conv-26:q0".into(), seed: Some(3), ..Default::default() }
}

/// Every RPC that names an episode, except CloseEpisode: (name, status).
async fn every_call(app: &mut App, id: &str) -> Vec<(&'static str, Status)> {
    let e = &mut app.env;
    let err = |name, r: Result<(), Status>| (name, r.expect_err(name));
    vec![
        err("CreateEpisode", e.create_episode(create(id)).await.map(drop)),
        err("CallTool", call_tool_json(e, id).await),
        err("Search", e.search(pb::SearchRequest { episode_id: id.into(), query: "x".into(), ..Default::default() }).await.map(drop)),
        err("Sample", e.sample(pb::SampleRequest { episode_id: id.into(), ..Default::default() }).await.map(drop)),
        err("GetEpisode", e.get_episode(pb::GetEpisodeRequest { episode_id: id.into(), include_trace: true }).await.map(drop)),
        err("ListMemories", e.list_memories(pb::ListMemoriesRequest { episode_id: id.into(), ..Default::default() }).await.map(drop)),
        err("ScoreEpisode", e.score_episode(pb::ScoreEpisodeRequest { episode_id: id.into() }).await.map(drop)),
    ]
}

async fn call_tool_json(e: &mut pb::memory_env_client::MemoryEnvClient<tonic::transport::Channel>, id: &str) -> Result<(), Status> {
    let req = pb::CallToolRequest {
        episode_id: id.into(),
        tool_name: "search_memory".into(),
        arguments_json: r#"{"query": "x"}"#.into(),
        ..Default::default()
    };
    e.call_tool(req).await.map(drop)
}

async fn close(app: &mut App, id: &str) -> Result<pb::CloseEpisodeResponse, Status> {
    app.env.close_episode(pb::CloseEpisodeRequest { episode_id: id.into() }).await.map(tonic::Response::into_inner)
}

#[tokio::test]
async fn a_closed_id_is_not_reused_and_a_repeated_close_is_ok() {
    let mut app = spawn_app(&[]).await;
    app.open("ep-closed", "conv-26:q0").await;
    for _ in 0..3 {
        app.tool("ep-closed", "sample_memory", json!({"k": 1})).await.unwrap();
    }
    let first = close(&mut app, "ep-closed").await.unwrap();
    assert_eq!(first.state.map(|s| s.steps_used), Some(3));
    let again = close(&mut app, "ep-closed").await.expect("a retried close succeeds");
    assert_eq!(again.state, None, "nothing left to report");

    for (name, s) in every_call(&mut app, "ep-closed").await {
        assert_eq!(s.code(), Code::FailedPrecondition, "{name}: {}", s.message());
        assert!(s.message().starts_with(r#"episode "ep-closed" was closed at step 3 ("#), "{name}: {}", s.message());
        assert!(s.message().ends_with(" s ago); episode ids are not reused: open a new id"), "{name}: {}", s.message());
    }

    // Scored, then closed: the message says so.
    app.open("ep-scored", "conv-26:q0").await;
    app.env.score_episode(pb::ScoreEpisodeRequest { episode_id: "ep-scored".into() }).await.unwrap();
    close(&mut app, "ep-scored").await.unwrap();
    let s = app.env.score_episode(pb::ScoreEpisodeRequest { episode_id: "ep-scored".into() }).await.unwrap_err();
    assert_eq!(s.code(), Code::FailedPrecondition);
    assert!(s.message().contains("was scored and closed at step 0"), "{}", s.message());

    // Ids never seen stay NOT_FOUND, close included.
    let e = &mut app.env;
    let unknown = [
        call_tool_json(e, "never-opened").await,
        e.get_episode(pb::GetEpisodeRequest { episode_id: "never-opened".into(), include_trace: false }).await.map(drop),
        e.score_episode(pb::ScoreEpisodeRequest { episode_id: "never-opened".into() }).await.map(drop),
    ];
    for r in unknown {
        assert_eq!(r.unwrap_err().code(), Code::NotFound);
    }
    assert_eq!(close(&mut app, "never-opened").await.unwrap_err().code(), Code::NotFound);
    app.server.stop().await.unwrap();
}

#[tokio::test]
async fn a_reaped_id_is_failed_precondition_naming_the_reap() {
    let mut app = spawn_app(&["--idle-ttl-secs", "1"]).await;
    app.open("ep-reaped", "conv-26:q0").await;
    app.tool("ep-reaped", "search_memory", json!({"query": "support group"})).await.unwrap();
    app.tool("ep-reaped", "sample_memory", json!({"k": 2})).await.unwrap();
    // TTL 1 s, reaper every 250 ms: reaped within 1.25 s of the last call (any call would touch it, so
    // just wait).
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    for (name, s) in every_call(&mut app, "ep-reaped").await {
        assert_eq!(s.code(), Code::FailedPrecondition, "{name}: {}", s.message());
        let m = s.message();
        assert!(m.starts_with(r#"episode "ep-reaped" was reaped after "#) && m.contains(" s idle at step 2 ("), "{name}: {m}");
    }
    assert_eq!(close(&mut app, "ep-reaped").await.expect("closing a reaped episode is OK").state, None);
    app.server.stop().await.unwrap();
}

#[tokio::test]
async fn remembering_can_be_turned_off() {
    let mut app = spawn_app(&["--max-closed-ids", "0"]).await;
    app.open("ep-reused", "conv-26:q0").await;
    close(&mut app, "ep-reused").await.unwrap();
    assert_eq!(close(&mut app, "ep-reused").await.unwrap_err().code(), Code::NotFound);
    let again = app.env.create_episode(create("ep-reused")).await.unwrap().into_inner();
    assert!(again.created, "with nothing remembered the id opens a fresh episode");
    app.server.stop().await.unwrap();
}
