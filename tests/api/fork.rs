//! ForkEpisode over gRPC (GRPO groups that share a prefix). The fork's semantics are tested in the episode
//! layer (src/episode/tests/fork.rs); MCP's fork_episode tool in mcp.rs; the rollout harness's --fork-at in
//! src/harness/rollout/tests.rs.

use memgym::api::pb;
use serde_json::json;
use tonic::Code;

use crate::helpers::spawn_app;

/// ForkEpisode over the wire: forks copy the parent's state, diverge independently, score against the
/// parent's p_old, and a refused fork (the cap) opens none.
#[tokio::test]
async fn fork_episode_over_grpc() {
    let mut app = spawn_app(&["--max-episodes", "4"]).await;
    app.open("parent", "conv-26:q0").await;
    let update = json!({"operation": "update", "memory_id": "m0000",
        "content": "Caroline attended an LGBTQ support group on 7 May 2023 and found the transgender stories inspiring."});
    app.env
        .call_tool(pb::CallToolRequest {
            episode_id: "parent".into(),
            tool_name: "manage_memory".into(),
            arguments_json: update.to_string(),
            ..Default::default()
        })
        .await
        .unwrap();
    let forks = app
        .env
        .fork_episode(pb::ForkEpisodeRequest { episode_id: "parent".into(), count: 2, fork_ids: vec![], seeds: vec![11, 12] })
        .await
        .unwrap()
        .into_inner()
        .forks;
    assert_eq!(forks.iter().map(|f| (f.steps_used, f.seed)).collect::<Vec<_>>(), vec![(1, 11), (1, 12)]);
    let (a, b) = (forks[0].episode_id.clone(), forks[1].episode_id.clone());
    app.env
        .call_tool(pb::CallToolRequest {
            episode_id: a.clone(),
            tool_name: "delete_memory".into(),
            arguments_json: r#"{"memory_id": "m0000"}"#.into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let score = |id: String| {
        let mut env = app.env.clone();
        async move { env.score_episode(pb::ScoreEpisodeRequest { episode_id: id }).await.unwrap().into_inner() }
    };
    let (sa, sb, sp) = (score(a).await, score(b).await, score("parent".into()).await);
    assert_eq!((sa.p_old, sb.p_old, sp.p_old), (0.0, 0.0, 0.0));
    assert_eq!((sb.p_new, sb.reward), (sp.p_new, sp.reward), "b holds exactly the parent's memory");
    assert!(sa.reward < sb.reward);
    // 3 open; 2 more forks would pass the cap of 4: refused, none opened.
    app.open("other", "conv-26:q1").await;
    let err =
        app.env.fork_episode(pb::ForkEpisodeRequest { episode_id: "other".into(), count: 2, ..Default::default() }).await.unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    let scored =
        app.env.fork_episode(pb::ForkEpisodeRequest { episode_id: "parent".into(), count: 1, ..Default::default() }).await.unwrap_err();
    assert_eq!(scored.code(), Code::FailedPrecondition, "{scored:?}");
    let bad = app
        .env
        .fork_episode(pb::ForkEpisodeRequest { episode_id: "other".into(), count: 2, fork_ids: vec!["x".into()], seeds: vec![] })
        .await
        .unwrap_err();
    assert!(bad.code() == Code::InvalidArgument && bad.message().contains("fork_ids"), "{bad:?}");
}
