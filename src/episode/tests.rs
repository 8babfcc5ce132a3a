//! Episode lifecycle and the meaning of the reward, on the real LoCoMo data.

use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::*;
use crate::embed::{Embedder, EmbedderIdentity, HashEmbedder};
use crate::tools::{json, ToolLimits};

fn dataset() -> Arc<Dataset> {
    static DS: OnceLock<Arc<Dataset>> = OnceLock::new();
    DS.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/locomo/locomo10.json");
        Arc::new(Dataset::from_locomo_json(std::path::Path::new(path)).expect("LoCoMo loads"))
    })
    .clone()
}

/// Counts embed calls, to prove what does and does not embed.
struct Counting(HashEmbedder, Arc<AtomicUsize>);
impl Embedder for Counting {
    fn identity(&self) -> &EmbedderIdentity {
        self.0.identity()
    }
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.1.fetch_add(1, AtomicOrdering::SeqCst);
        self.0.embed_batch(texts)
    }
}

fn env_with(config: EnvConfig, clock: Arc<dyn Clock>) -> (Environment, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let embed = EmbedService::new(Arc::new(Counting(HashEmbedder::default(), calls.clone())), 2);
    (Environment::new(config, dataset(), embed, clock).unwrap(), calls)
}

fn env() -> Environment {
    env_with(EnvConfig::default(), Arc::new(SystemClock::default())).0
}

fn locomo(id: &str, q: &str) -> CreateRequest {
    CreateRequest {
        episode_id: Some(id.to_string()),
        source: EpisodeSource::Locomo { question_id: q.to_string(), conversation_id: None },
        seed: Some(1),
        max_steps: None,
        include_adversarial: false,
    }
}

fn call(name: &str, args: &str) -> ToolCall {
    json::parse_call(name, args, &ToolLimits::default()).unwrap()
}

fn questions(split: crate::dataset::Split) -> Vec<crate::dataset::Question> {
    dataset().questions.iter().filter(|q| q.split == split && q.category != 5).cloned().collect()
}

#[tokio::test]
async fn a_no_op_episode_scores_exactly_zero() {
    let env = env();
    for (i, q) in questions(crate::dataset::Split::Test).iter().step_by(25).enumerate() {
        let id = format!("noop-{i}");
        env.create_episode(locomo(&id, &q.id)).await.unwrap();
        let b = env.score_episode(&id).await.unwrap();
        assert_eq!(b.reward, 0.0, "{}", q.id);
        assert_eq!(b.old, b.new);
        assert_eq!(b.efficiency.memory_efficiency, 1.0);
    }
}

#[tokio::test]
async fn adding_the_gold_answer_scores_positive() {
    // The oracle writes the question with its answer, as a policy that knew the answer would. With a
    // bag-of-features embedder a long answer dilutes the match with the question, so the claim is
    // pinned on short answers (at most 6 tokens: most LoCoMo answers), where it must always hold.
    let env = env();
    let (mut checked, mut failed) = (0, Vec::new());
    for (i, q) in questions(crate::dataset::Split::Test).iter().enumerate() {
        let answer = q.answer.clone().unwrap();
        let n = reward::normalize::stemmed_tokens(&answer).len();
        if n == 0 || n > 6 {
            continue;
        }
        let id = format!("oracle-{i}");
        env.create_episode(locomo(&id, &q.id)).await.unwrap();
        let content = format!("{} {}", q.question, answer);
        let args = serde_json::json!({"operation": "create", "content": content}).to_string();
        env.call_tool(&id, call("manage_memory", &args)).await.unwrap();
        let b = env.score_episode(&id).await.unwrap();
        assert!(b.new.p >= b.old.p, "{}: adding the answer lowered p", q.id);
        if b.old.p < 1.0 {
            checked += 1;
            if b.reward <= 0.0 {
                failed.push(format!("{} p_old {} p_new {}", q.id, b.old.p, b.new.p));
            }
        }
    }
    assert!(checked >= 100, "only {checked} questions checked");
    assert!(failed.is_empty(), "{} of {checked} oracle episodes did not score > 0: {failed:?}", failed.len());
}

#[tokio::test]
async fn deleting_the_evidence_memories_scores_negative() {
    let env = env();
    let ds = dataset();
    let (mut sum, mut episodes, mut checked, mut failed) = (0.0, 0, 0, Vec::new());
    for (i, q) in questions(crate::dataset::Split::Test).iter().enumerate() {
        let rows = ds.memories_of(&q.conversation_id);
        let is_evidence = |m: &crate::dataset::MemoryRow| m.evidence.iter().any(|e| q.evidence.contains(e));
        let ids: Vec<String> =
            rows.iter().enumerate().filter(|(_, m)| is_evidence(m)).map(|(p, _)| MemoryId(p as u32).to_string()).collect();
        if ids.is_empty() || ids.len() > 50 {
            continue;
        }
        let id = format!("destroyer-{i}");
        env.create_episode(locomo(&id, &q.id)).await.unwrap();
        env.call_tool(&id, call("delete_memory", &serde_json::json!({"memory_ids": ids}).to_string())).await.unwrap();
        let b = env.score_episode(&id).await.unwrap();
        assert_eq!(b.new.evidence_recall, 0.0, "{}: evidence still retrieved after deleting it", q.id);
        assert!(b.reward <= 0.0 || b.new.p > b.old.p);
        sum += b.reward;
        episodes += 1;
        // Where M₀ answered and no other memory holds any answer token, deleting the evidence must cost reward.
        let gold: std::collections::HashSet<String> =
            reward::normalize::stemmed_tokens(q.answer.as_deref().unwrap_or("")).into_iter().collect();
        let elsewhere =
            rows.iter().filter(|m| !is_evidence(m)).any(|m| reward::normalize::stemmed_tokens(&m.text).iter().any(|t| gold.contains(t)));
        if b.old.p > 0.0 && !elsewhere {
            checked += 1;
            if b.reward >= 0.0 {
                failed.push(q.id.clone());
            }
        }
    }
    assert!(checked >= 10, "only {checked} questions checked");
    assert!(failed.is_empty(), "destroyer did not score < 0 on {failed:?}");
    assert!(sum / (episodes as f64) < 0.0, "mean destroyer reward {}", sum / episodes as f64);
}

#[tokio::test]
async fn create_is_idempotent_and_never_embeds_m0() {
    let (env, calls) = env_with(EnvConfig::default(), Arc::new(SystemClock::default()));
    let at_start = calls.load(AtomicOrdering::SeqCst);
    let a = env.create_episode(locomo("traj-1", "conv-26:q0")).await.unwrap();
    assert!(a.created);
    assert_eq!(a.state.initial_memory_count, 184);
    assert_eq!(a.state.max_steps, 30);
    env.call_tool("traj-1", call("search_memory", r#"{"query": "support group"}"#)).await.unwrap();
    let b = env.create_episode(locomo("traj-1", "conv-26:q0")).await.unwrap();
    assert!(!b.created);
    assert_eq!(b.state.steps_used, 1, "the same live episode");
    let calls_before = calls.load(AtomicOrdering::SeqCst);
    for i in 0..50 {
        env.create_episode(locomo(&format!("fresh-{i}"), "conv-26:q0")).await.unwrap();
    }
    assert_eq!(calls.load(AtomicOrdering::SeqCst), calls_before, "creating episodes embedded something");
    assert!(at_start > 0);
    let err = env.create_episode(locomo("traj-1", "conv-26:q1")).await.unwrap_err();
    assert!(matches!(err, EpisodeError::AlreadyExists { .. }), "{err:?}");
    let mut other_seed = locomo("traj-1", "conv-26:q0");
    other_seed.seed = Some(2);
    assert!(matches!(env.create_episode(other_seed).await.unwrap_err(), EpisodeError::AlreadyExists { .. }));
}

#[tokio::test]
async fn p_old_is_computed_once_per_question() {
    let (env, calls) = env_with(EnvConfig::default(), Arc::new(SystemClock::default()));
    for i in 0..8 {
        env.create_episode(locomo(&format!("g-{i}"), "conv-30:q3")).await.unwrap();
    }
    let before = calls.load(AtomicOrdering::SeqCst);
    let first = env.score_episode("g-0").await.unwrap();
    assert_eq!(calls.load(AtomicOrdering::SeqCst), before + 1, "the question is embedded once");
    for i in 1..8 {
        let b = env.score_episode(&format!("g-{i}")).await.unwrap();
        assert_eq!(b.old, first.old);
    }
    assert_eq!(calls.load(AtomicOrdering::SeqCst), before + 1, "p_old reused across the group");
}

#[tokio::test]
async fn budget_scoring_and_closing() {
    let env = env();
    let mut req = locomo("b", "conv-26:q2");
    req.max_steps = Some(2);
    env.create_episode(req).await.unwrap();
    let r1 = env.call_tool("b", call("sample_memory", r#"{"k": 2}"#)).await.unwrap();
    assert_eq!((r1.step.step, r1.step.steps_left, r1.step.done), (1, 1, false));
    let r2 = env.call_tool("b", call("search_memory", r#"{"query": "x"}"#)).await.unwrap();
    assert_eq!((r2.step.step, r2.step.steps_left, r2.step.done), (2, 0, true));
    let err = env.call_tool("b", call("search_memory", r#"{"query": "x"}"#)).await.unwrap_err();
    assert!(matches!(err, EpisodeError::FailedPrecondition { .. }));
    let (state, trace) = env.get_episode("b", true).await.unwrap();
    assert!(state.done);
    assert_eq!(state.rejected_calls, 1);
    assert_eq!(trace.iter().map(|t| t.tool_name).collect::<Vec<_>>(), vec!["sample_memory", "search_memory"]);
    let s1 = env.score_episode("b").await.unwrap();
    let s2 = env.score_episode("b").await.unwrap();
    assert_eq!(s1, s2, "scoring is idempotent");
    assert_eq!(env.close_episode("b").await.unwrap().steps_used, 2);
    assert!(matches!(env.close_episode("b").await.unwrap_err(), EpisodeError::EpisodeNotFound { .. }));
    assert!(matches!(
        env.call_tool("b", call("search_memory", r#"{"query": "x"}"#)).await.unwrap_err(),
        EpisodeError::EpisodeNotFound { .. }
    ));

    env.create_episode(locomo("s", "conv-26:q2")).await.unwrap();
    env.score_episode("s").await.unwrap();
    let err = env.call_tool("s", call("search_memory", r#"{"query": "x"}"#)).await.unwrap_err();
    assert!(matches!(err, EpisodeError::FailedPrecondition { .. }), "scored episodes are final");
}

#[tokio::test]
async fn caps_adversarial_and_bad_requests() {
    let mut config = EnvConfig::default();
    config.limits.max_open_episodes = 3;
    let (env, _) = env_with(config, Arc::new(SystemClock::default()));
    for i in 0..3 {
        env.create_episode(locomo(&format!("c{i}"), "conv-26:q0")).await.unwrap();
    }
    let err = env.create_episode(locomo("c3", "conv-26:q0")).await.unwrap_err();
    assert!(matches!(err, EpisodeError::ResourceExhausted { .. }));
    assert!(!env.create_episode(locomo("c0", "conv-26:q0")).await.unwrap().created, "an existing id is not a new episode");
    env.close_episode("c0").await.unwrap();
    env.create_episode(locomo("c3", "conv-26:q0")).await.unwrap();

    let adversarial = dataset().questions.iter().find(|q| q.category == 5).unwrap().id.clone();
    env.close_episode("c3").await.unwrap();
    assert!(matches!(env.create_episode(locomo("adv", &adversarial)).await.unwrap_err(), EpisodeError::FailedPrecondition { .. }));
    let mut req = locomo("adv", &adversarial);
    req.include_adversarial = true;
    env.create_episode(req).await.unwrap();
    env.close_episode("adv").await.unwrap();

    let bad = |id: &str, q: &str| locomo(id, q);
    assert!(matches!(env.create_episode(bad("x y", "conv-26:q0")).await.unwrap_err(), EpisodeError::InvalidArgument { .. }));
    assert!(matches!(env.create_episode(bad("ok", "conv-99:q0")).await.unwrap_err(), EpisodeError::DatasetNotFound { .. }));
    let mut req = bad("ok", "conv-26:q0");
    req.max_steps = Some(0);
    assert!(matches!(env.create_episode(req).await.unwrap_err(), EpisodeError::InvalidArgument { .. }));
    let mut req = bad("ok", "conv-26:q0");
    req.source = EpisodeSource::Locomo { question_id: "conv-26:q0".into(), conversation_id: Some("conv-30".into()) };
    assert!(matches!(env.create_episode(req).await.unwrap_err(), EpisodeError::InvalidArgument { .. }));
}

#[tokio::test]
async fn the_reaper_closes_idle_episodes_only() {
    let clock = Arc::new(ManualClock::default());
    let mut config = EnvConfig::default();
    config.limits.idle_ttl = Duration::from_secs(600);
    let (env, _) = env_with(config, clock.clone());
    env.create_episode(locomo("idle", "conv-26:q0")).await.unwrap();
    env.create_episode(locomo("busy", "conv-26:q0")).await.unwrap();
    clock.advance(Duration::from_secs(400));
    env.call_tool("busy", call("search_memory", r#"{"query": "x"}"#)).await.unwrap();
    clock.advance(Duration::from_secs(300));
    assert_eq!(env.reap_idle(), 1);
    assert!(env.get_episode("idle", false).await.is_err());
    assert!(env.get_episode("busy", false).await.is_ok());
    clock.advance(Duration::from_secs(601));
    assert_eq!(env.reap_idle(), 1);
    assert_eq!(env.open_episodes(), 0);
}

#[tokio::test]
async fn custom_episodes() {
    let env = env();
    let mem = |t: &str, d: &str| NewMemory {
        text: t.into(),
        memory_type: MemoryType::Episodic,
        speaker: Some("Ann".into()),
        session: Some(1),
        session_date: None,
        evidence: vec![d.into()],
        source: None,
    };
    let req = CreateRequest {
        episode_id: Some("custom-1".into()),
        source: EpisodeSource::Custom {
            memories: vec![mem("Ann keeps bees in her garden.", "D1:1"), mem("Ann's favourite colour is green.", "D1:2")],
            question: "What does Ann keep in her garden?".into(),
            answer: "bees".into(),
            evidence: vec!["D1:1".into()],
        },
        seed: None,
        max_steps: None,
        include_adversarial: false,
    };
    let c = env.create_episode(req.clone()).await.unwrap();
    assert_eq!(c.state.initial_memory_count, 2);
    assert!(!env.create_episode(req).await.unwrap().created);
    env.call_tool("custom-1", call("delete_memory", r#"{"memory_id": "m0000"}"#)).await.unwrap();
    let b = env.score_episode("custom-1").await.unwrap();
    assert_eq!((b.old.p, b.new.p, b.old.evidence_recall, b.new.evidence_recall), (1.0, 0.0, 1.0, 0.0));
    assert!(b.reward < 0.0);
}

#[tokio::test]
async fn same_seed_same_calls_same_everything() {
    let script = [
        ("search_memory", r#"{"query": "adoption"}"#),
        ("sample_memory", r#"{"k": 4}"#),
        ("sample_memory", r#"{"k": 3, "strategy": "diverse"}"#),
        ("manage_memory", r#"{"operation": "create", "content": "Caroline plans to adopt a child."}"#),
        ("merge_memory", r#"{"memory_ids": ["m0001", "m0002"], "strategy": "summarize"}"#),
        ("delete_memory", r#"{"memory_ids": ["m0003"]}"#),
        ("split_memory", r#"{"memory_id": "m0010", "split_criteria": "thematic"}"#),
    ];
    let mut runs = Vec::new();
    for _ in 0..2 {
        let env = env();
        env.create_episode(locomo("det", "conv-26:q5")).await.unwrap();
        let mut outs = Vec::new();
        for (t, a) in script {
            outs.push(env.call_tool("det", call(t, a)).await.map(|r| r.output).map_err(|e| e.to_string()));
        }
        let b = env.score_episode("det").await.unwrap();
        runs.push((outs, (*b).clone()));
    }
    assert_eq!(runs[0], runs[1]);
}
