//! `serve --metrics-addr`: Prometheus's `/metrics` from the real binary after real gRPC and OpenEnv traffic —
//! every documented series present with its help, request counts by RPC and code, episode events, tool
//! calls, reward histograms, the resident set size, and no label an outsider can grow.

use std::collections::HashMap;

use memgym::api::pb;
use memgym::api::pb::memory_env_client::MemoryEnvClient;

use crate::binary::start_binary_logging;
use crate::fake_openai::{Canned, FakeOpenAi};
use crate::rollout::KillOnDrop;

/// The samples of an exposition text: `name{labels}` (labels sorted) → value.
fn samples(text: &str) -> HashMap<String, f64> {
    let mut out = HashMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
        let (series, value) = line.rsplit_once(' ').unwrap();
        let key = match series.split_once('{') {
            Some((name, labels)) => {
                // `k="v",k2="v2"` (no value here holds `",`): sorted, written back the same way.
                let mut ls: Vec<String> =
                    labels.trim_end_matches('}').split("\",").map(|l| format!("{}\"", l.trim_end_matches('"'))).collect();
                ls.sort_unstable();
                format!("{name}{{{}}}", ls.join(","))
            }
            None => series.to_string(),
        };
        out.insert(key, value.parse::<f64>().unwrap());
    }
    out
}

fn get(s: &HashMap<String, f64>, key: &str) -> f64 {
    *s.get(key).unwrap_or_else(|| {
        panic!("no sample {key}; have {:?}", s.keys().filter(|k| k.starts_with(key.split('{').next().unwrap())).collect::<Vec<_>>())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_requests_episodes_tools_and_rewards() {
    let llm = FakeOpenAi::start(|_| Canned::answer("a support group")).await;
    let flags = ["--metrics-addr", "127.0.0.1:0", "--openenv-addr", "127.0.0.1:0", "--llm-base-url", &llm.url, "--llm-model", "m"];
    let (child, addrs) = start_binary_logging(&flags, &[], 3);
    let _server = KillOnDrop(child);
    let grpc = &addrs[0].1;
    let openenv = &addrs.iter().find(|(l, _)| l.contains("openenv listening")).unwrap().1;
    let metrics = &addrs.iter().find(|(l, _)| l.contains("metrics listening")).unwrap().1;
    let channel = tonic::transport::Channel::from_shared(format!("http://{grpc}")).unwrap().connect().await.unwrap();
    let mut env = MemoryEnvClient::new(channel.clone());
    env.create_episode(pb::CreateEpisodeRequest { episode_id: "m1".into(), question_id: "conv-26:q0".into(), ..Default::default() })
        .await
        .unwrap();
    let call = |tool: &str, args: &str| pb::CallToolRequest {
        episode_id: "m1".into(),
        tool_name: tool.into(),
        arguments_json: args.into(),
        ..Default::default()
    };
    env.call_tool(call("search_memory", r#"{"query": "Caroline"}"#)).await.unwrap();
    let refused = env.call_tool(call("delete_memory", r#"{"memory_ids": ["m99999"]}"#)).await.unwrap_err();
    env.call_tool(call("manage_memory", r#"{"operation": "create", "content": "Caroline went to a support group."}"#)).await.unwrap();
    env.score_episode(pb::ScoreEpisodeRequest { episode_id: "m1".into() }).await.unwrap();
    env.close_episode(pb::CloseEpisodeRequest { episode_id: "m1".into() }).await.unwrap();
    // A path the server does not serve: UNIMPLEMENTED, labelled `other`, whatever its name.
    let mut raw = tonic::client::Grpc::new(channel);
    raw.ready().await.unwrap();
    let path = http::uri::PathAndQuery::from_static("/memgym.v1.MemoryEnv/NoSuchThing-abc123");
    let unknown: Result<tonic::Response<pb::ListToolsResponse>, _> =
        raw.unary(tonic::Request::new(pb::ListToolsRequest {}), path, tonic_prost::ProstCodec::default()).await;
    assert_eq!(unknown.unwrap_err().code(), tonic::Code::Unimplemented);
    // Two LLM-scored episodes of one question, untouched.
    for id in ["l1", "l2"] {
        let create = pb::CreateEpisodeRequest {
            episode_id: id.into(),
            question_id: "conv-26:q0".into(),
            evaluator: pb::Evaluator::LlmF1 as i32,
            ..Default::default()
        };
        env.create_episode(create).await.unwrap();
        env.score_episode(pb::ScoreEpisodeRequest { episode_id: id.into() }).await.unwrap();
    }
    let mut banks = memgym::api::pb::banks_client::BanksClient::new(
        tonic::transport::Channel::from_shared(format!("http://{grpc}")).unwrap().connect().await.unwrap(),
    );
    banks.create_bank(pb::CreateBankRequest { name: "lib".into(), ..Default::default() }).await.unwrap();
    let ops = pb::ApplyOperationsRequest {
        bank: "lib".into(),
        operations_json: r#"[{"option": "add", "experience": "Search first."}]"#.into(),
        ..Default::default()
    };
    banks.apply_operations(ops).await.unwrap();
    let health = reqwest::get(format!("http://{openenv}/health")).await.unwrap();
    assert!(health.status().is_success());

    let resp = reqwest::get(format!("http://{metrics}/metrics")).await.unwrap();
    assert!(resp.headers()["content-type"].to_str().unwrap().starts_with("text/plain; version=0.0.4"));
    let text = resp.text().await.unwrap();
    let s = samples(&text);
    let req = |method: &str, code: &str| get(&s, &format!("memgym_requests_total{{code=\"{code}\",face=\"grpc\",method=\"{method}\"}}"));
    assert_eq!(req("/memgym.v1.MemoryEnv/CreateEpisode", "ok"), 3.0);
    assert_eq!(req("/memgym.v1.MemoryEnv/CallTool", "ok"), 2.0);
    assert_eq!(refused.code(), tonic::Code::NotFound);
    assert_eq!(req("/memgym.v1.MemoryEnv/CallTool", "not_found"), 1.0);
    assert_eq!(req("other", "unimplemented"), 1.0);
    assert!(!text.contains("NoSuchThing"), "an unknown path is never a label");
    assert_eq!(get(&s, "memgym_request_duration_seconds_count{face=\"grpc\",method=\"/memgym.v1.MemoryEnv/ScoreEpisode\"}"), 3.0);
    assert_eq!(get(&s, "memgym_requests_total{code=\"200\",face=\"openenv\",method=\"/health\"}"), 1.0);
    for (event, n) in [("created", 3.0), ("scored", 3.0), ("closed", 1.0)] {
        assert_eq!(get(&s, &format!("memgym_episode_events_total{{event=\"{event}\"}}")), n, "{event}");
    }
    assert_eq!(get(&s, "memgym_episodes_open"), 2.0);
    assert_eq!(get(&s, "memgym_tool_calls_total{outcome=\"done\",tool=\"search_memory\"}"), 1.0);
    assert_eq!(get(&s, "memgym_tool_calls_total{outcome=\"refused\",tool=\"delete_memory\"}"), 1.0);
    assert_eq!(get(&s, "memgym_reward_count{evaluator=\"answer-phrase\"}"), 1.0);
    assert_eq!(get(&s, "memgym_p_new_count{evaluator=\"answer-phrase\"}"), 1.0);
    assert_eq!(get(&s, "memgym_reward_count{evaluator=\"llm-f1\"}"), 2.0);
    // Untouched memory reads as M₀ did: p_old asks the LLM once, both p_new are that answer from the cache.
    assert_eq!(get(&s, "memgym_llm_requests_total{outcome=\"ok\"}"), 1.0);
    assert_eq!(get(&s, "memgym_llm_cache_hits_total"), 2.0);
    assert!(get(&s, "memgym_embed_texts_total") >= 1.0);
    assert_eq!(get(&s, "memgym_bank_store_operations_total{op=\"commit\",outcome=\"ok\",store=\"sqlite\"}"), 1.0);
    assert_eq!(get(&s, "memgym_requests_total{code=\"ok\",face=\"grpc\",method=\"/memgym.v1.Banks/ApplyOperations\"}"), 1.0);
    assert!(get(&s, "memgym_resident_memory_bytes") > 1e6);
    assert_eq!(get(&s, "memgym_requests_in_flight{face=\"grpc\"}"), 0.0);
    // Every series has its help once recorded (the embedding cache serves only the costly embedders).
    for series in memgym::util::prometheus::SERIES.into_iter().filter(|s| *s != memgym::util::prometheus::EMBED_CACHE_HITS) {
        assert!(text.contains(&format!("# HELP {series} ")), "{series} has its help");
    }
    // No episode id, question or memory text in any label.
    assert!(!text.contains("m1\"") && !text.contains("conv-26") && !text.contains("Caroline"));
}

/// `CallToolResponse.metrics` and `ScoreEpisodeResponse.metrics`: what each step did, for a trainer's logs.
#[tokio::test]
async fn responses_carry_per_step_metrics() {
    let mut app = crate::helpers::spawn_app(&[]).await;
    let created = app.open("s1", "conv-26:q0").await;
    let n0 = f64::from(created.initial_memory_count);
    let r = app
        .tool("s1", "manage_memory", serde_json::json!({"operation": "create", "content": "Caroline went to a support group."}))
        .await
        .unwrap();
    let m = &r.metrics;
    assert_eq!((m["memories"], m["memories_delta"], m["steps_used"]), (n0 + 1.0, 1.0, 1.0), "{m:?}");
    assert!(m["tool_ms"] > 0.0 && m["memory_chars"] > 0.0 && m["steps_left"] >= 1.0, "{m:?}");
    let r = app.tool("s1", "search_memory", serde_json::json!({"query": "support group"})).await.unwrap();
    assert_eq!((r.metrics["memories_delta"], r.metrics["steps_used"]), (0.0, 2.0));
    let mut keys: Vec<&String> = r.metrics.keys().collect();
    keys.sort();
    assert_eq!(keys, ["memories", "memories_delta", "memory_chars", "steps_left", "steps_used", "tool_ms"]);
    let s = app.env.score_episode(pb::ScoreEpisodeRequest { episode_id: "s1".into() }).await.unwrap().into_inner();
    let m = &s.metrics;
    assert_eq!((m["memories"], m["memories_delta"]), (n0 + 1.0, 1.0), "{m:?}");
    assert!((0.0..=1.0).contains(&m["retrieved_overlap"]) && m["score_ms"] >= 0.0, "{m:?}");
    let (old, new): (std::collections::HashSet<&String>, std::collections::HashSet<&String>) =
        (s.retrieved_old.iter().collect(), s.retrieved_new.iter().collect());
    assert_eq!(m["retrieved_changed"], new.difference(&old).count() as f64);
    let overlap = old.intersection(&new).count() as f64 / old.union(&new).count().max(1) as f64;
    assert!((m["retrieved_overlap"] - overlap).abs() < 1e-12);
}
