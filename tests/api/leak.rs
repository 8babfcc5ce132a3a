//! No leak: before `ScoreEpisode`, nothing a policy can read — `ListTools`, `CreateEpisode`, every tool's
//! reply and error, `GetEpisode` with its trace, `ListMemories` — carries the gold answer, the question's
//! evidence ids or a reward. A policy that could read any of them would learn to copy them.

use memgym::api::pb;
use serde_json::json;

use crate::helpers::spawn_app;

/// Every call a policy can make on episode `id`, good and bad; the replies and errors as text.
async fn everything_a_policy_sees(app: &mut crate::helpers::App, id: &str, query: &str) -> Vec<String> {
    let mut seen = Vec::new();
    let tools = app.env.list_tools(pb::ListToolsRequest {}).await.unwrap().into_inner();
    seen.push(format!("{tools:?}"));
    let call = |name: &str, args: serde_json::Value| (name.to_string(), args);
    let mut calls = vec![
        call("search_memory", json!({"query": query, "top_k": 50})),
        call("sample_memory", json!({"k": 50, "strategy": "diverse"})),
        call("sample_memory", json!({"k": 5, "strategy": "recent"})),
        call("manage_memory", json!({"operation": "create", "content": "A note the policy wrote."})),
        call("manage_memory", json!({"operation": "update", "memory_id": "m9999", "content": "x"})),
        call("delete_memory", json!({"memory_id": "m9998"})),
        call("merge_memory", json!({"memory_ids": ["m0000", "m9997"]})),
        call("split_memory", json!({"memory_id": "m9996"})),
        call("search_memory", json!({"query": ""})),
        call("no_such_tool", json!({})),
    ];
    let hits = app.tool(id, "search_memory", json!({"query": query, "top_k": 3})).await.unwrap();
    seen.push(format!("{hits:?}"));
    // Ids as the policy reads them: each hit's line starts "[m0042 0.83] ".
    let ids: Vec<String> = hits.text.lines().filter_map(|l| l.strip_prefix('[')?.split_whitespace().next().map(str::to_string)).collect();
    if ids.len() >= 2 {
        calls.push(call("merge_memory", json!({"memory_ids": [ids[0], ids[1]], "strategy": "concatenate"})));
    }
    calls.push(call("split_memory", json!({"memory_id": "m0002", "split_criteria": "thematic"})));
    calls.push(call("delete_memory", json!({"memory_id": "m0003"})));
    for (name, args) in calls {
        match app.tool(id, &name, args).await {
            Ok(r) => seen.push(format!("{r:?}")),
            Err(e) => seen.push(format!("{:?} {}", e.code(), e.message())),
        }
    }
    let episode = app.env.get_episode(pb::GetEpisodeRequest { episode_id: id.into(), include_trace: true }).await.unwrap().into_inner();
    assert!(!episode.state.as_ref().unwrap().scored);
    seen.push(format!("{episode:?}"));
    seen.push(format!("{:?}", app.all_memories(id).await));
    seen
}

fn assert_absent(seen: &[String], needles: &[&str]) {
    for text in seen {
        let lower = text.to_lowercase();
        for needle in needles {
            assert!(!lower.contains(&needle.to_lowercase()), "{needle:?} leaked in: {}", &text[..text.len().min(400)]);
        }
    }
}

#[tokio::test]
async fn a_custom_episodes_canary_answer_and_evidence_never_reach_the_policy() {
    let mut app = spawn_app(&[]).await;
    let memory = |text: &str, dia: &str| pb::NewMemory { text: text.into(), evidence: vec![dia.into()], ..Default::default() };
    let custom = pb::CustomEpisode {
        memories: vec![
            memory("Ana adopted a cat named Pixel in the spring.", "D1:1"),
            memory("Ana works as a nurse and likes hiking on weekends.", "D1:2"),
            memory("Ana and Ben went to a jazz concert; they loved the saxophone.", "D2:1"),
            memory("Ben is learning to bake sourdough bread and fails often.", "D2:2"),
        ],
        question: "What did Ana name her cat?".into(),
        answer: "Quetzalcoatl Marmalade".into(),
        evidence: vec!["X9:77".into()],
    };
    let created = app
        .env
        .create_episode(pb::CreateEpisodeRequest { episode_id: "canary".into(), custom: Some(custom), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    let mut seen = vec![format!("{created:?}")];
    seen.extend(everything_a_policy_sees(&mut app, "canary", "What did Ana name her cat?").await);
    assert_absent(&seen, &["quetzalcoatl", "marmalade", "X9:77", "reward", "p_old", "p_new"]);
    // After scoring, the breakdown is there: the canary was the target all along.
    let s = app.env.score_episode(pb::ScoreEpisodeRequest { episode_id: "canary".into() }).await.unwrap().into_inner();
    assert_eq!((s.evidence_total, s.p_old), (1, 0.0));
    app.server.stop().await.unwrap();
}

#[tokio::test]
async fn a_locomo_episodes_gold_never_reaches_the_policy() {
    // conv-26:q2's gold, "Psychology, counseling certification", is in none of conv-26's memories (the
    // LoCoMo audit flags it as hallucinated): any occurrence in a reply would be a leak.
    let mut app = spawn_app(&[]).await;
    let created = app.open("gold", "conv-26:q2").await;
    let mut seen = vec![format!("{created:?}")];
    seen.extend(everything_a_policy_sees(&mut app, "gold", "What fields would Caroline be likely to pursue in her education?").await);
    assert_absent(&seen, &["psychology", "counseling certification", "reward", "p_old"]);
    app.server.stop().await.unwrap();
}
