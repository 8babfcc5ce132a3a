//! Whole episodes through the typed RPCs and CallTool.

use memgym::api::pb;
use memgym::api::pb::call_tool_response::Result as R;
use serde_json::json;
use tonic::Code;

use crate::helpers::spawn_app;

#[tokio::test]
async fn a_whole_episode_with_all_six_tools() {
    let mut app = spawn_app(&[]).await;
    let created = app.open("ep-1", "conv-26:q0").await;
    assert_eq!((created.initial_memory_count, created.max_steps, created.created), (184, 30, true));
    assert!(!created.question.is_empty());

    // search_memory (typed) shows ids and scores.
    let s = app
        .env
        .search(pb::SearchRequest { episode_id: "ep-1".into(), query: "LGBTQ support group".into(), top_k: Some(3), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(s.results.len(), 3);
    assert!(s.text.starts_with(&format!("[{} ", s.results[0].memory.as_ref().unwrap().id)), "{}", s.text);
    assert!(s.results.windows(2).all(|w| w[0].score >= w[1].score));
    let top = s.results[0].memory.clone().unwrap();
    assert!(
        !top.evidence.is_empty() && !top.speaker.is_empty() && top.session.is_some() && !top.session_date.is_empty(),
        "metadata kept: {top:?}"
    );

    // manage_memory create + update through CallTool.
    let r = app
        .tool(
            "ep-1",
            "manage_memory",
            json!({"operation": "create", "content": "Caroline went to an LGBTQ support group on 7 May 2023.", "speaker": "Caroline"}),
        )
        .await
        .unwrap();
    let Some(R::Manage(m)) = r.result else { panic!() };
    let new_id = m.memory.unwrap().id;
    assert_eq!(new_id, "m0184");
    assert!(r.text.starts_with("created [m0184]"));
    let r = app
        .tool(
            "ep-1",
            "manage_memory",
            json!({"operation": "update", "memory_id": top.id, "content": "Caroline attends an LGBTQ support group."}),
        )
        .await
        .unwrap();
    let Some(R::Manage(m)) = r.result else { panic!() };
    assert_eq!(m.memory.as_ref().unwrap().evidence, top.evidence, "update keeps provenance");

    // delete_memory (typed).
    let d = app
        .env
        .delete(pb::DeleteRequest { episode_id: "ep-1".into(), memory_ids: vec!["m0010".into(), "m0011".into()], reason: "test".into() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((d.deleted_ids.len(), d.memory_count), (2, 183));

    // sample_memory (typed), recent first.
    let sm = app
        .env
        .sample(pb::SampleRequest { episode_id: "ep-1".into(), k: Some(2), strategy: pb::SampleStrategy::Recent as i32, memory_type: 0 })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(sm.memories.len(), 2);
    assert!(sm.memories.iter().any(|m| m.id == new_id));

    // merge_memory: provenance is the union.
    let a = app.all_memories("ep-1").await;
    let (x, y) = (a[0].clone(), a[1].clone());
    let mg = app
        .env
        .merge(pb::MergeRequest {
            episode_id: "ep-1".into(),
            memory_ids: vec![x.id.clone(), y.id.clone()],
            strategy: pb::MergeStrategy::Concatenate as i32,
            content: None,
        })
        .await
        .unwrap()
        .into_inner();
    let merged = mg.memory.unwrap();
    for e in x.evidence.iter().chain(&y.evidence) {
        assert!(merged.evidence.contains(e));
    }
    assert_eq!(mg.removed_ids, vec![x.id.clone(), y.id.clone()]);

    // split_memory with explicit parts.
    let sp = app
        .env
        .split(pb::SplitRequest {
            episode_id: "ep-1".into(),
            memory_id: merged.id.clone(),
            split_criteria: pb::SplitCriteria::Thematic as i32,
            max_parts: Some(2),
            parts: vec!["first half".into(), "second half".into()],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(sp.parts.len(), 2);
    assert!(sp.parts.iter().all(|p| p.evidence == merged.evidence));

    // State, trace, listing.
    let g = app.env.get_episode(pb::GetEpisodeRequest { episode_id: "ep-1".into(), include_trace: true }).await.unwrap().into_inner();
    let st = g.state.unwrap();
    assert_eq!((st.steps_used, st.steps_left, st.done, st.memory_count), (7, 23, false, 183));
    let tools: Vec<&str> = g.trace.iter().map(|t| t.tool_name.as_str()).collect();
    assert_eq!(
        tools,
        ["search_memory", "manage_memory", "manage_memory", "delete_memory", "sample_memory", "merge_memory", "split_memory"]
    );
    assert!(g.trace[3].result_ids.contains(&"m0010".to_string()));
    let all = app.all_memories("ep-1").await;
    assert_eq!(all.len(), 183);
    assert!(all.iter().all(|m| m.id != "m0010" && m.id != x.id));

    // Score (idempotent) and close.
    let s1 = app.env.score_episode(pb::ScoreEpisodeRequest { episode_id: "ep-1".into() }).await.unwrap().into_inner();
    let s2 = app.env.score_episode(pb::ScoreEpisodeRequest { episode_id: "ep-1".into() }).await.unwrap().into_inner();
    assert_eq!(s1, s2);
    assert_eq!((s1.initial_memory_count, s1.final_memory_count, s1.n_max, s1.top_k, s1.steps_used), (184, 183, 184, 5, 7));
    // The default reward: the target's delta, the other questions' term, less the content words added and
    // removed over M₀'s (a memory deleted removes its words).
    assert_eq!((s1.reward_formula.as_str(), s1.context.as_str()), ("whole-memory", "budget"));
    let w = f64::from(s1.words_initial);
    let ledger = f64::from(s1.words_added) / w + f64::from(s1.words_removed) / w;
    assert!((s1.reward - (s1.performance_delta + s1.others_term - ledger)).abs() < 1e-12, "{s1:?}");
    assert!(s1.words_initial > 1000 && s1.words_removed > 0, "{s1:?}");
    let others = s1.others.clone().expect("the other questions of the conversation");
    assert!(others.count > 50 && others.rescored <= others.count && others.evaluator == "answer-phrase", "{others:?}");
    assert!(s1.context_chars_new <= s1.context_chars_old && s1.context_chars_old > 0);
    assert_eq!(s1.evaluator, "answer-phrase");
    assert!(s1.embedder.starts_with("hash-ngram-v1/384/"));
    let err = app.tool("ep-1", "search_memory", json!({"query": "x"})).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    app.env.close_episode(pb::CloseEpisodeRequest { episode_id: "ep-1".into() }).await.unwrap();
    let err = app.env.get_episode(pb::GetEpisodeRequest { episode_id: "ep-1".into(), include_trace: false }).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "a closed id is remembered: {}", err.message());
    app.server.stop().await.unwrap();
}

#[tokio::test]
async fn idempotent_create_reward_signs_and_tools_listing() {
    let mut app = spawn_app(&[]).await;
    // A trainer calls create before every tool call: one episode.
    for _ in 0..5 {
        app.open("traj", "conv-30:q0").await;
        app.tool("traj", "search_memory", json!({"query": "Jon"})).await.unwrap();
    }
    assert_eq!(app.state("traj").await.steps_used, 5);

    // No-op: exactly zero. Oracle: positive.
    app.open("noop", "conv-30:q0").await;
    let s = app.env.score_episode(pb::ScoreEpisodeRequest { episode_id: "noop".into() }).await.unwrap().into_inner();
    assert_eq!(s.reward, 0.0);
    let mut data = app.data.clone();
    let qs = data
        .list_questions(pb::ListQuestionsRequest { conversation_id: "conv-30".into(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    let q = qs.questions.iter().find(|q| q.category == 4).expect("a single-hop question").clone();
    app.open("oracle", &q.id).await;
    app.tool("oracle", "manage_memory", json!({"operation": "create", "content": format!("{} {}", q.question, q.answer)})).await.unwrap();
    let s = app.env.score_episode(pb::ScoreEpisodeRequest { episode_id: "oracle".into() }).await.unwrap().into_inner();
    assert!(s.p_new >= s.p_old);

    let tools = app.env.list_tools(pb::ListToolsRequest {}).await.unwrap().into_inner();
    let names: Vec<&str> = tools.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["search_memory", "manage_memory", "delete_memory", "sample_memory", "merge_memory", "split_memory"]);
    let all: serde_json::Value = serde_json::from_str(&tools.tools_json).unwrap();
    assert_eq!(all.as_array().unwrap().len(), 6);
    app.server.stop().await.unwrap();
}

/// ListTools' schemas state the server's own limit on the ids of one delete (`--max-ids-per-call`), which
/// the server enforces: a grammar built from them writes no delete the server refuses for its length.
#[tokio::test]
async fn list_tools_states_the_servers_id_limit() {
    let mut app = spawn_app(&["--max-ids-per-call", "7"]).await;
    let tools = app.env.list_tools(pb::ListToolsRequest {}).await.unwrap().into_inner();
    let all: serde_json::Value = serde_json::from_str(&tools.tools_json).unwrap();
    let ids = &all[2]["function"]["parameters"]["properties"]["memory_ids"];
    assert_eq!((&ids["minItems"], &ids["maxItems"]), (&json!(1), &json!(7)), "{ids}");
    assert_eq!(tools.tools[2].schema_json, all[2].to_string(), "each tool's schema as in tools_json");
    app.open("limit", "conv-30:q0").await;
    let eight: Vec<String> = (0..8).map(|i| format!("m{i:04}")).collect();
    let refused = app.tool("limit", "delete_memory", json!({"memory_ids": eight})).await.unwrap_err();
    assert!(refused.message().contains("1 to 7"), "{}", refused.message());
    app.server.stop().await.unwrap();
}

#[tokio::test]
async fn many_concurrent_episodes_leak_nothing() {
    let app = spawn_app(&[]).await;
    let mut tasks = Vec::new();
    for i in 0..200 {
        let mut c = app.env.clone();
        tasks.push(tokio::spawn(async move {
            let id = format!("conc-{i}");
            c.create_episode(pb::CreateEpisodeRequest {
                episode_id: id.clone(),
                question_id: format!("conv-26:q{}", i % 30),
                ..Default::default()
            })
            .await?;
            for j in 0..10 {
                let args =
                    if j % 2 == 0 { json!({"query": "painting"}) } else { json!({"operation": "create", "content": format!("note {j}")}) };
                let tool = if j % 2 == 0 { "search_memory" } else { "manage_memory" };
                c.call_tool(pb::CallToolRequest {
                    episode_id: id.clone(),
                    tool_name: tool.into(),
                    arguments_json: args.to_string(),
                    ..Default::default()
                })
                .await?;
            }
            c.score_episode(pb::ScoreEpisodeRequest { episode_id: id.clone() }).await?;
            let closed = c.close_episode(pb::CloseEpisodeRequest { episode_id: id }).await?.into_inner();
            Ok::<u32, tonic::Status>(closed.state.unwrap().memory_count)
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap().unwrap(), 184 + 5);
    }
    app.server.stop().await.unwrap();
}

#[tokio::test]
async fn health_and_the_episode_cap() {
    let mut app = spawn_app(&["--max-episodes", "2"]).await;
    let mut health = tonic_health::pb::health_client::HealthClient::new(app.channel.clone());
    let r = health.check(tonic_health::pb::HealthCheckRequest { service: "memgym.v1.MemoryEnv".into() }).await.unwrap().into_inner();
    assert_eq!(r.status, tonic_health::pb::health_check_response::ServingStatus::Serving as i32);
    app.open("a", "conv-26:q0").await;
    app.open("b", "conv-26:q0").await;
    let err = app
        .env
        .create_episode(pb::CreateEpisodeRequest { episode_id: "c".into(), question_id: "conv-26:q0".into(), ..Default::default() })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted);
    app.server.stop().await.unwrap();
}

#[tokio::test]
async fn hybrid_search_mode_end_to_end() {
    let mut app = spawn_app(&["--search", "hybrid"]).await;
    app.open("h", "conv-26:q0").await;
    let r = app.tool("h", "search_memory", json!({"query": "When did Caroline go to the LGBTQ support group?", "top_k": 5})).await.unwrap();
    let Some(R::Search(s)) = r.result else { panic!() };
    assert_eq!(s.results.len(), 5);
    assert!(r.text.starts_with(&format!("[{} ", s.results[0].memory.as_ref().unwrap().id)));
    let noop = app.env.score_episode(pb::ScoreEpisodeRequest { episode_id: "h".into() }).await.unwrap().into_inner();
    assert_eq!(noop.reward, 0.0);
    // The date the memory lacks, added lexically: the hybrid retrieval finds it for the question.
    app.open("h2", "conv-26:q0").await;
    app.tool(
        "h2",
        "manage_memory",
        json!({"operation": "update", "memory_id": "m0000", "content": "Caroline went to the LGBTQ support group on 7 May 2023."}),
    )
    .await
    .unwrap();
    let s = app.env.score_episode(pb::ScoreEpisodeRequest { episode_id: "h2".into() }).await.unwrap().into_inner();
    assert!(s.p_new > s.p_old && s.reward > 0.0, "{s:?}");
    app.server.stop().await.unwrap();
}
