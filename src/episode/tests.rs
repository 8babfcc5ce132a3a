//! Episode lifecycle and the meaning of the reward, on the real LoCoMo data.

use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::*;
use crate::embed::{Embedder, EmbedderIdentity, HashEmbedder};
use crate::memory::MemoryId;
use crate::tools::ToolCall;
use crate::tools::{llm_calls, ToolLimits};

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
        evaluator: None,
    }
}

fn call(name: &str, args: &str) -> ToolCall {
    llm_calls::parse_call(name, args, &ToolLimits::default()).unwrap()
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
    // pinned on short answers (at most 6 tokens: most LoCoMo answers), where it holds on 95 % or more.
    let env = env();
    let (mut checked, mut failed) = (0, Vec::new());
    for (i, q) in questions(crate::dataset::Split::Test).iter().enumerate() {
        let answer = q.answer.clone().unwrap();
        let n = crate::text::stemmed_tokens(&answer).len();
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
    // answer-phrase reads one answer card per question (the one most about it): where an observation
    // restates the question with more words than the oracle's memory, that one is read instead.
    assert!(failed.len() * 20 <= checked, "{} of {checked} oracle episodes did not score > 0: {failed:?}", failed.len());
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
        // Where M₀ answered and no other memory holds any answer token, deleting the evidence must cost
        // reward (but for a month: "July 2023" is the date of every memory of a session in July).
        let gold: std::collections::HashSet<String> = crate::text::stemmed_tokens(q.answer.as_deref().unwrap_or("")).into_iter().collect();
        let elsewhere =
            rows.iter().filter(|m| !is_evidence(m)).any(|m| crate::text::stemmed_tokens(&m.text).iter().any(|t| gold.contains(t)));
        if b.old.p > 0.0 && !elsewhere {
            checked += 1;
            if b.reward >= 0.0 {
                failed.push(q.id.clone());
            }
        }
    }
    assert!(checked >= 10, "only {checked} questions checked");
    assert!(failed.len() * 5 <= checked, "destroyer did not score < 0 on {failed:?} of {checked}");
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
    // The question, and (once for the conversation) the other questions the whole-memory reward scores.
    assert_eq!(calls.load(AtomicOrdering::SeqCst), before + 2, "the question and its conversation's questions are embedded once");
    for i in 1..8 {
        let b = env.score_episode(&format!("g-{i}")).await.unwrap();
        assert_eq!(b.old, first.old);
    }
    assert_eq!(calls.load(AtomicOrdering::SeqCst), before + 2, "p_old reused across the group");
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
    assert_eq!(env.close_episode("b").await.unwrap().unwrap().steps_used, 2);
    assert_eq!(env.close_episode("b").await.unwrap(), None, "a repeated close is OK");
    assert!(matches!(env.call_tool("b", call("search_memory", r#"{"query": "x"}"#)).await.unwrap_err(), EpisodeError::EpisodeEnded { .. }));
    assert!(matches!(env.close_episode("never").await.unwrap_err(), EpisodeError::EpisodeNotFound { .. }));

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
    assert!(matches!(env.create_episode(bad("x y", "conv-26:q0")).await.unwrap_err(), EpisodeError::InvalidArgument(_)));
    assert!(matches!(env.create_episode(bad("ok", "conv-99:q0")).await.unwrap_err(), EpisodeError::DatasetNotFound { .. }));
    let mut req = bad("ok", "conv-26:q0");
    req.max_steps = Some(0);
    assert!(matches!(env.create_episode(req).await.unwrap_err(), EpisodeError::InvalidArgument(_)));
    let mut req = bad("ok", "conv-26:q0");
    req.source = EpisodeSource::Locomo { question_id: "conv-26:q0".into(), conversation_id: Some("conv-30".into()) };
    assert!(matches!(env.create_episode(req).await.unwrap_err(), EpisodeError::InvalidArgument(_)));
}

#[tokio::test]
async fn a_refusal_is_counted_even_while_another_call_holds_the_episode() {
    let env = Arc::new(env());
    env.create_episode(locomo("busy", "conv-26:q0")).await.unwrap();
    let entry = env.registry.get("busy").unwrap();
    let held = entry.episode.lock().await; // a call in progress (an LLM edit, an embedding)
    let counting = tokio::spawn({
        let env = env.clone();
        async move { env.record_rejection("busy").await }
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(!counting.is_finished(), "the refusal waits for the episode, it is not dropped");
    drop(held);
    counting.await.unwrap();
    assert_eq!(env.get_episode("busy", false).await.unwrap().0.rejected_calls, 1);
    env.record_rejection("no-such-episode").await; // ignored
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
    assert_eq!(env.reap_idle(), Swept { reaped: 1, forgotten: 0, remembered: 1 });
    assert!(env.get_episode("idle", false).await.is_err());
    assert!(env.get_episode("busy", false).await.is_ok());
    clock.advance(Duration::from_secs(601));
    assert_eq!(env.reap_idle().reaped, 1);
    assert_eq!(env.open_episodes(), 0);
}

fn ended(e: EpisodeError) -> (Tombstone, String) {
    let message = e.to_string();
    let EpisodeError::EpisodeEnded { tombstone, .. } = e else { panic!("expected EpisodeEnded, got {message}") };
    (tombstone, message)
}

#[tokio::test]
async fn closed_ids_are_remembered_and_never_reused() {
    let clock = Arc::new(ManualClock::default());
    let (env, _) = env_with(EnvConfig::default(), clock.clone());
    env.create_episode(locomo("c", "conv-26:q0")).await.unwrap();
    for _ in 0..2 {
        env.call_tool("c", call("sample_memory", r#"{"k": 1}"#)).await.unwrap();
    }
    // A call that fetched the entry before the close and waits for its lock must not run on it.
    let stale = env.registry.get("c").unwrap();
    assert_eq!(env.close_episode("c").await.unwrap().unwrap().steps_used, 2);
    assert!(matches!(env.check_open(&*stale.episode.lock().await), Err(EpisodeError::EpisodeEnded { .. })));
    clock.advance(Duration::from_secs(42));

    let (t, m) = ended(env.create_episode(locomo("c", "conv-26:q0")).await.unwrap_err());
    assert_eq!((t.ending, t.scored, t.steps_used), (Ending::Closed, false, 2));
    assert_eq!(m, "episode \"c\" was closed at step 2 (42 s ago); episode ids are not reused: open a new id");
    ended(env.call_tool("c", call("search_memory", r#"{"query": "x"}"#)).await.unwrap_err());
    ended(env.get_episode("c", false).await.unwrap_err());
    ended(env.list_memories("c", None, 10, None).await.unwrap_err());
    ended(env.score_episode("c").await.unwrap_err());
    assert_eq!(env.close_episode("c").await.unwrap(), None);
    assert!(matches!(env.get_episode("never", false).await.unwrap_err(), EpisodeError::EpisodeNotFound { .. }));

    env.create_episode(locomo("s", "conv-26:q0")).await.unwrap();
    env.score_episode("s").await.unwrap();
    env.close_episode("s").await.unwrap();
    let (_, m) = ended(env.score_episode("s").await.unwrap_err());
    assert!(m.contains("was scored and closed at step 0 (0 s ago)"), "{m}");
}

#[tokio::test]
async fn reaped_ids_are_remembered_for_a_while_and_the_count_is_capped() {
    let clock = Arc::new(ManualClock::default());
    let mut config = EnvConfig::default();
    config.limits.idle_ttl = Duration::from_secs(600);
    config.limits.forget_closed_after = Duration::from_secs(3_600);
    config.limits.max_closed_ids = 2;
    let (env, _) = env_with(config, clock.clone());
    env.create_episode(locomo("r", "conv-26:q0")).await.unwrap();
    env.call_tool("r", call("sample_memory", r#"{"k": 1}"#)).await.unwrap();
    clock.advance(Duration::from_secs(612));
    assert_eq!(env.reap_idle(), Swept { reaped: 1, forgotten: 0, remembered: 1 });
    clock.advance(Duration::from_secs(30));
    let (t, m) = ended(env.create_episode(locomo("r", "conv-26:q0")).await.unwrap_err());
    assert_eq!((t.ending, t.steps_used), (Ending::Reaped { idle_secs: 612 }, 1));
    assert!(m.contains("\"r\" was reaped after 612 s idle at step 1 (30 s ago)"), "{m}");
    ended(env.call_tool("r", call("search_memory", r#"{"query": "x"}"#)).await.unwrap_err());
    assert_eq!(env.close_episode("r").await.unwrap(), None, "closing a reaped episode is OK");

    // Forgotten after --forget-closed-after-secs: the id may then open a new episode.
    clock.advance(Duration::from_secs(3_600));
    assert_eq!(env.reap_idle(), Swept { reaped: 0, forgotten: 1, remembered: 0 });
    assert!(env.create_episode(locomo("r", "conv-26:q0")).await.unwrap().created);

    // At most --max-closed-ids are remembered, the oldest forgotten first.
    for id in ["a", "b", "c"] {
        env.create_episode(locomo(id, "conv-26:q0")).await.unwrap();
        env.close_episode(id).await.unwrap();
    }
    assert_eq!(env.registry.remembered(), 2);
    assert!(matches!(env.get_episode("a", false).await.unwrap_err(), EpisodeError::EpisodeNotFound { .. }));
    ended(env.get_episode("b", false).await.unwrap_err());
    ended(env.get_episode("c", false).await.unwrap_err());
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
        evaluator: None,
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
        let mut b = (*env.score_episode("det").await.unwrap()).clone();
        b.score_ms = 0.0; // a time, not a result
        runs.push((outs, b));
    }
    assert_eq!(runs[0], runs[1]);
}

/// An LLM that answers from its context like a careful reader: the gold answer when a context line
/// contains it, else "Not mentioned in the conversation". Judge requests: CORRECT iff the answer is the gold.
fn reader_llm(gold: String) -> Arc<crate::llm::fake::ScriptedChat> {
    Arc::new(crate::llm::fake::ScriptedChat::new(move |r| {
        let text = &r.messages[0].content;
        if text.contains("strict grader") {
            return Ok(if text.contains(&format!("ANSWER: {gold}\n")) { "CORRECT".into() } else { "WRONG".into() });
        }
        let context = text.split("\n\nBased on the above context").next().unwrap_or("");
        Ok(if context.to_lowercase().contains(&gold.to_lowercase()) { gold.clone() } else { "Not mentioned in the conversation".into() })
    }))
}

fn llm_env(chat: Arc<crate::llm::fake::ScriptedChat>, evaluator: Evaluator) -> Environment {
    let config = EnvConfig { evaluator, ..EnvConfig::default() };
    let (env, _) = env_with(config, Arc::new(SystemClock::default()));
    env.with_llm(Some(Arc::new(crate::llm::Llm::new(chat, 1024)))).unwrap()
}

#[tokio::test]
async fn llm_f1_rewards_the_oracle_and_records_model_and_answers() {
    let q = questions(crate::dataset::Split::Test).into_iter().find(|q| q.category == 4).unwrap();
    let gold = q.answer.clone().unwrap();
    let chat = reader_llm(gold.clone());
    let env = llm_env(chat.clone(), Evaluator::LlmF1);
    env.create_episode(locomo("oracle", &q.id)).await.unwrap();
    let args = serde_json::json!({"operation": "create", "content": format!("{} {}", q.question, gold)}).to_string();
    env.call_tool("oracle", call("manage_memory", &args)).await.unwrap();
    let b = env.score_episode("oracle").await.unwrap();
    assert_eq!((b.evaluator, b.llm_model.as_deref()), ("llm-f1", Some("fake-model")));
    assert_eq!(b.new.answer.as_deref(), Some(gold.as_str()));
    assert_eq!((b.new.p, b.new.f1, b.new.judge), (1.0, Some(1.0), None));
    assert!(b.reward > 0.0 || b.old.p == 1.0, "{b:?}");
    // Every request is LoCoMo's QA prompt at temperature 0 with 32 tokens.
    for r in chat.seen.lock().iter() {
        assert_eq!((r.temperature, r.max_tokens), (0.0, 32));
        assert!(r.messages[0].content.contains(&format!("Question: {} Short answer:", q.question)));
    }
}

#[tokio::test]
async fn p_old_is_asked_once_for_a_whole_group_and_per_evaluator() {
    let q = questions(crate::dataset::Split::Test).into_iter().find(|q| q.category == 4).unwrap();
    let mut chat = crate::llm::fake::ScriptedChat::new(|_| Ok("something".into()));
    chat.delay = Duration::from_millis(30);
    let chat = Arc::new(chat);
    // A cache of 0 entries: only the p_old cache can save requests.
    let config = EnvConfig { evaluator: Evaluator::LlmF1, ..EnvConfig::default() };
    let env = Arc::new(
        env_with(config, Arc::new(SystemClock::default())).0.with_llm(Some(Arc::new(crate::llm::Llm::new(chat.clone(), 0)))).unwrap(),
    );
    let mut tasks = Vec::new();
    for i in 0..8 {
        let env = env.clone();
        let qid = q.id.clone();
        tasks.push(tokio::spawn(async move {
            let id = format!("g{i}");
            env.create_episode(locomo(&id, &qid)).await.unwrap();
            env.score_episode(&id).await.unwrap()
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    // 1 p_old + 8 p_new (no answer cache).
    assert_eq!(chat.seen.lock().len(), 9);
    // Another evaluator is another p_old.
    let mut req = locomo("judge", &q.id);
    req.evaluator = Some(Evaluator::LlmJudge);
    env.create_episode(req).await.unwrap();
    let err = env.score_episode("judge").await.unwrap_err();
    assert!(matches!(err, EpisodeError::Llm(crate::llm::LlmError::BadReply { .. })), "{err:?}");
}

#[tokio::test]
async fn an_llm_failure_is_an_error_and_the_episode_can_be_scored_again() {
    let q = questions(crate::dataset::Split::Test).into_iter().find(|q| q.category == 4).unwrap();
    let chat = reader_llm(q.answer.clone().unwrap());
    chat.queue.lock().push_back(Err(crate::llm::LlmError::Timeout { message: "slow".into() }));
    let env = llm_env(chat.clone(), Evaluator::LlmF1);
    env.create_episode(locomo("flaky", &q.id)).await.unwrap();
    let err = env.score_episode("flaky").await.unwrap_err();
    assert!(matches!(err, EpisodeError::Llm(crate::llm::LlmError::Timeout { .. })), "{err:?}");
    let (state, _) = env.get_episode("flaky", false).await.unwrap();
    assert!(!state.scored && !state.done);
    let b = env.score_episode("flaky").await.unwrap();
    assert_eq!(b.reward, 0.0);
}

#[tokio::test]
async fn llm_evaluators_need_an_llm_and_are_part_of_the_episode_definition() {
    let q = &questions(crate::dataset::Split::Test)[0];
    let plain = env();
    let mut req = locomo("e1", &q.id);
    req.evaluator = Some(Evaluator::LlmJudge);
    let err = plain.create_episode(req.clone()).await.unwrap_err();
    assert!(matches!(&err, EpisodeError::FailedPrecondition { message } if message.contains("--llm-base-url")), "{err:?}");
    let err = env_with(EnvConfig { evaluator: Evaluator::LlmF1, ..EnvConfig::default() }, Arc::new(SystemClock::default()))
        .0
        .with_llm(None)
        .unwrap_err();
    assert!(
        matches!(err, EpisodeError::InvalidArgument(crate::util::invalid::Invalid { ref field, .. }) if field == "evaluator"),
        "{err:?}"
    );

    let env = llm_env(reader_llm("x".into()), Evaluator::AnswerRecall);
    let c = env.create_episode(req.clone()).await.unwrap();
    assert_eq!(c.state.evaluator, Evaluator::LlmJudge);
    req.evaluator = Some(Evaluator::LlmF1);
    assert!(matches!(env.create_episode(req).await.unwrap_err(), EpisodeError::AlreadyExists { .. }));
    // The server default applies when the request names none.
    assert_eq!(env.create_episode(locomo("e2", &q.id)).await.unwrap().state.evaluator, Evaluator::AnswerRecall);
}

fn edit_env(chat: Arc<crate::llm::fake::ScriptedChat>) -> Environment {
    let config = EnvConfig { llm_edit: true, ..EnvConfig::default() };
    env_with(config, Arc::new(SystemClock::default())).0.with_llm(Some(Arc::new(crate::llm::Llm::new(chat, 0)))).unwrap()
}

#[tokio::test]
async fn llm_edit_writes_merge_and_split_text_and_keeps_provenance() {
    let chat = Arc::new(crate::llm::fake::ScriptedChat::new(|r| {
        Ok(if r.messages[0].content.contains("JSON array") {
            r#"["Part one about the first thing.", "Part two about the second thing."]"#.into()
        } else {
            "Merged by the model.".into()
        })
    }));
    let env = edit_env(chat.clone());
    let q = &questions(crate::dataset::Split::Test)[0];
    env.create_episode(locomo("edit", &q.id)).await.unwrap();
    let before = env.list_memories("edit", None, 2, None).await.unwrap().memories;
    let r = env.call_tool("edit", call("merge_memory", r#"{"memory_ids": ["m0000", "m0001"], "strategy": "summarize"}"#)).await.unwrap();
    let crate::tools::OutputKind::Merged { memory, .. } = &r.output.kind else { panic!("{r:?}") };
    assert_eq!(memory.text, "Merged by the model.");
    let mut evidence: Vec<String> = before.iter().flat_map(|m| m.evidence.clone()).collect();
    evidence.sort();
    evidence.dedup();
    let mut got = memory.evidence.clone();
    got.sort();
    assert_eq!(got, evidence, "provenance is the union of the sources'");
    assert!(r.output.text.ends_with("note: text written by the LLM (fake-model)"), "{}", r.output.text);

    let r = env.call_tool("edit", call("split_memory", r#"{"memory_id": "m0002", "split_criteria": "thematic"}"#)).await.unwrap();
    let crate::tools::OutputKind::Split { parts, .. } = &r.output.kind else { panic!("{r:?}") };
    assert_eq!(
        parts.iter().map(|p| p.text.as_str()).collect::<Vec<_>>(),
        ["Part one about the first thing.", "Part two about the second thing."]
    );
    // Calls with their own text, and concatenate, never ask.
    let asked = chat.seen.lock().len();
    env.call_tool("edit", call("merge_memory", r#"{"memory_ids": ["m0003", "m0004"], "strategy": "concatenate"}"#)).await.unwrap();
    env.call_tool("edit", call("merge_memory", r#"{"memory_ids": ["m0005", "m0006"], "strategy": "summarize", "content": "Mine."}"#))
        .await
        .unwrap();
    assert_eq!(chat.seen.lock().len(), asked);
    // The trace records the call as the agent made it.
    let (_, trace) = env.get_episode("edit", true).await.unwrap();
    assert!(!trace[0].arguments_json.contains("Merged by the model"), "{}", trace[0].arguments_json);
}

#[tokio::test]
async fn llm_edit_falls_back_to_the_offline_strategy_with_a_note() {
    let chat = Arc::new(crate::llm::fake::ScriptedChat::new(|_| Ok("I'm sorry, I cannot help with that.".into())));
    chat.queue.lock().push_back(Err(crate::llm::LlmError::Unavailable { message: "HTTP 503".into() }));
    let offline = env();
    let llm = edit_env(chat);
    let q = &questions(crate::dataset::Split::Test)[0];
    for e in [&llm, &offline] {
        e.create_episode(locomo("fb", &q.id)).await.unwrap();
    }
    let merge = r#"{"memory_ids": ["m0000", "m0001"], "strategy": "summarize"}"#;
    let a = llm.call_tool("fb", call("merge_memory", merge)).await.unwrap();
    let b = offline.call_tool("fb", call("merge_memory", merge)).await.unwrap();
    assert_eq!(a.output.kind, b.output.kind, "the offline result, exactly");
    assert!(
        a.output.text.ends_with("note: the LLM failed (the LLM endpoint failed: HTTP 503); used the offline summarize strategy instead"),
        "{}",
        a.output.text
    );
    let a = llm.call_tool("fb", call("merge_memory", r#"{"memory_ids": ["m0002", "m0003"], "strategy": "summarize"}"#)).await.unwrap();
    assert!(a.output.text.contains("note: the LLM reply was unusable (the reply is a refusal)"), "{}", a.output.text);
}

#[tokio::test]
async fn gold_modes_score_against_the_chosen_answer_and_refuse_excluded_questions() {
    use crate::dataset::GoldMode;
    let with = |mode| {
        let ds = Arc::new(crate::dataset::Dataset::load_with_gold(None, mode).unwrap());
        let embed = EmbedService::new(Arc::new(HashEmbedder::default()), 2);
        Environment::new(EnvConfig::default(), ds, embed, Arc::new(SystemClock::default())).unwrap()
    };
    // conv-26:q2's gold ("Psychology, counseling certification") is a hallucination per the LoCoMo audit.
    let excluded = with(GoldMode::ExcludeFlagged);
    let e = excluded.create_episode(locomo("x", "conv-26:q2")).await.unwrap_err();
    assert!(matches!(e, EpisodeError::FailedPrecondition { .. }), "{e:?}");
    assert!(e.to_string().contains("HALLUCINATION") && e.to_string().contains("--gold exclude-flagged"), "{e}");
    excluded.create_episode(locomo("y", "conv-26:q1")).await.unwrap();
    // Corrected: the oracle that writes the corrected answer gains; the one that writes the original gains less.
    let corrected = with(GoldMode::Corrected);
    let mut reward = Vec::new();
    for (i, answer) in ["Counseling or mental health", "Psychology, counseling certification"].iter().enumerate() {
        let id = format!("c{i}");
        corrected.create_episode(locomo(&id, "conv-26:q2")).await.unwrap();
        let content = format!("What fields would Caroline be likely to pursue in her educaton? {answer}");
        corrected
            .call_tool(&id, call("manage_memory", &serde_json::json!({"operation": "create", "content": content}).to_string()))
            .await
            .unwrap();
        reward.push(corrected.score_episode(&id).await.unwrap().reward);
    }
    assert!(reward[0] > reward[1] && reward[0] > 0.0, "{reward:?}");
}

mod footprint;
mod fork;
mod once;
mod whole;

/// One id rule for every call: an id CreateEpisode would refuse is refused by name wherever it is used
/// (a lookup of 10 MB is InvalidArgument on `episode_id`, quoting nothing of it), never NOT_FOUND.
#[tokio::test]
async fn every_call_refuses_an_id_create_would_refuse() {
    let env = env();
    let huge = "x".repeat(10 << 20);
    for bad in [huge.as_str(), "", "a b", "ep/1"] {
        let errs = [
            env.get_episode(bad, false).await.err(),
            env.score_episode(bad).await.err(),
            env.call_tool(bad, call("sample_memory", r#"{"k": 1}"#)).await.err(),
            env.close_episode(bad).await.err(),
        ];
        for e in errs {
            let e = e.expect("refused");
            let EpisodeError::InvalidArgument(crate::util::invalid::Invalid { field, message }) = &e else { panic!("{e:?}") };
            assert_eq!(field, "episode_id");
            assert!(message.len() < 200, "{}", &message[..200.min(message.len())]);
        }
    }
    // A valid id that names nothing is still NOT_FOUND.
    assert!(matches!(env.get_episode("no-such-episode", false).await, Err(EpisodeError::EpisodeNotFound { .. })));
}
