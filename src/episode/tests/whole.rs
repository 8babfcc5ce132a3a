//! The whole-memory reward on the real data: the other questions of an episode's conversation re-scored only
//! where the edits could change what they read (and exactly as if every one were re-scored), wrecking what
//! the target does not read costs, the breakdown's terms, and `--others-llm`.

use proptest::prelude::*;

use super::*;
use crate::episode::others::Reference;
use crate::reward::others::OtherDelta;
use crate::reward::RewardFormula;

/// A conversation of the test split with a small M₀ (169 memories, 81 questions of categories 1–4).
const CONV: &str = "conv-30";

/// One environment for every property case (its panels are built once), on one runtime (its embedding
/// batcher lives there). Its scorings spread the questions over three threads, whatever the machine's
/// cores: the references they are held equal to are scored on one ([`Reference`]).
fn shared() -> &'static Environment {
    static ENV: OnceLock<Environment> = OnceLock::new();
    let config = EnvConfig { score_threads: 3, ..EnvConfig::default() };
    ENV.get_or_init(|| runtime().block_on(async { env_with(config, Arc::new(SystemClock::default())).0 }))
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap())
}

fn conv_questions() -> Vec<crate::dataset::Question> {
    dataset().questions_of(CONV).filter(|q| q.category != 5 && q.answer.is_some()).cloned().collect()
}

fn texts() -> Vec<String> {
    dataset().memories_of(CONV).iter().map(|m| m.text.clone()).collect()
}

static NEXT: AtomicUsize = AtomicUsize::new(0);

fn fresh(tag: &str) -> String {
    format!("whole-{tag}-{}", NEXT.fetch_add(1, AtomicOrdering::Relaxed))
}

/// An edit a policy could make, on M₀ memory `at` (modulo |M₀|).
#[derive(Debug, Clone)]
enum Edit {
    Delete(usize),
    /// Another memory's text written over it.
    Overwrite(usize, usize),
    /// A copy of a memory with a few words in front.
    Copy(usize, String),
    /// Two memories merged.
    Merge(usize, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (0usize..1000).prop_map(Edit::Delete),
        (0usize..1000, 0usize..1000).prop_map(|(a, b)| Edit::Overwrite(a, b)),
        (0usize..1000, "[a-z]{3,8}( [a-z]{3,8}){0,3}").prop_map(|(a, w)| Edit::Copy(a, w)),
        (0usize..1000, 0usize..1000).prop_map(|(a, b)| Edit::Merge(a, b)),
    ]
}

async fn apply(env: &Environment, id: &str, edits: &[Edit], texts: &[String]) {
    let n = texts.len();
    let m = |i: usize| MemoryId((i % n) as u32).to_string();
    for e in edits {
        let (tool, args) = match e {
            Edit::Delete(a) => ("delete_memory", serde_json::json!({"memory_id": m(*a)})),
            Edit::Overwrite(a, b) => {
                ("manage_memory", serde_json::json!({"operation": "update", "memory_id": m(*a), "content": texts[b % n]}))
            }
            Edit::Copy(a, w) => ("manage_memory", serde_json::json!({"operation": "create", "content": format!("{w} {}", texts[a % n])})),
            Edit::Merge(a, b) => ("merge_memory", serde_json::json!({"memory_ids": [m(*a), m(*b)], "strategy": "concatenate"})),
        };
        // A call on a memory an earlier edit removed (or a merge of a memory with itself) is refused, as it
        // would be for a policy.
        if let Ok(c) = crate::tools::llm_calls::parse_call(tool, &args.to_string(), &ToolLimits::default()) {
            let _ = env.call_tool(id, c).await;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Scoring re-scores only the questions whose reading the edits could change; every other one keeps its
    /// p. The result is exactly what re-scoring every question gives.
    #[test]
    fn rescoring_only_the_changed_readings_is_exact(q in 0usize..81, edits in proptest::collection::vec(edit(), 0..8)) {
        let (fast, full) = scored_against(q, &edits, Reference::Search);
        prop_assert_eq!(&fast.deltas, &full.deltas);
        prop_assert!(fast.rescored.len() <= full.rescored.len());
        if edits.is_empty() {
            prop_assert!(fast.rescored.is_empty());
        }
    }

    /// What scoring prepares and caches (M₀'s memories per question, what was written once per scoring, and
    /// the removed memories put back to measure displacement) scores exactly what the evaluator scores on
    /// the texts read. A removed memory whose id the episode wrote over is read as M₀'s text, not the new one.
    #[test]
    fn prepared_memories_score_what_the_evaluator_scores(q in 0usize..81, edits in proptest::collection::vec(edit(), 1..10)) {
        let (cached, plain) = scored_against(q, &edits, Reference::Plain);
        prop_assert_eq!(&cached.deltas, &plain.deltas);
    }
}

/// The other questions of a fresh episode on question `q` after `edits`, scored and scored the `reference` way.
fn scored_against(q: usize, edits: &[Edit], reference: Reference) -> (crate::episode::others::Scored, crate::episode::others::Scored) {
    let (env, qs, texts) = (shared(), conv_questions(), texts());
    let id = fresh("against");
    runtime().block_on(async {
        env.create_episode(locomo(&id, &qs[q % qs.len()].id)).await.unwrap();
        apply(env, &id, edits, &texts).await;
        let both = env.others_against(&id, reference).await.unwrap();
        env.close_episode(&id).await.unwrap();
        both
    })
}

/// What question `qid` reads on M₀ (scored on a fresh episode of its own).
async fn m0_read(env: &Environment, qid: &str) -> Vec<MemoryId> {
    let id = fresh("read");
    env.create_episode(locomo(&id, qid)).await.unwrap();
    let b = env.score_episode(&id).await.unwrap();
    env.close_episode(&id).await.unwrap();
    b.old.retrieved.clone()
}

/// (other question, the one M₀ memory stating its answer) pairs of the conversation: the memory is read on
/// M₀, and without it no memory of M₀ states as much of the answer.
fn sole_statements() -> Vec<(crate::dataset::Question, MemoryId)> {
    static PAIRS: OnceLock<Vec<(crate::dataset::Question, MemoryId)>> = OnceLock::new();
    PAIRS
        .get_or_init(|| {
            let env = shared();
            let base = env.base(CONV).unwrap();
            let all: Vec<&crate::memory::MemoryRecord> = base.records().iter().collect();
            let mut out = Vec::new();
            let rt = runtime();
            for q in conv_questions() {
                let target = crate::reward::Target::from(&q);
                let id = fresh("sole");
                let b = rt.block_on(async {
                    env.create_episode(locomo(&id, &q.id)).await.unwrap();
                    let b = env.score_episode(&id).await.unwrap();
                    env.close_episode(&id).await.unwrap();
                    b
                });
                if b.old.p <= 0.0 {
                    continue;
                }
                for m in &b.old.retrieved {
                    let rest: Vec<&crate::memory::MemoryRecord> = all.iter().copied().filter(|r| r.id != *m).collect();
                    if crate::reward::stated_anywhere(Evaluator::AnswerPhrase, &target, &rest) < b.old.p {
                        out.push((q.clone(), *m));
                    }
                }
            }
            out
        })
        .clone()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Edits that leave the target's reading as it was, but delete or overwrite the only memory that states
    /// another question's answer (and may delete or overwrite more), always cost.
    #[test]
    fn wrecking_another_questions_only_statement_always_costs(
        target in 0usize..81,
        pair in 0usize..1000,
        overwrite in any::<bool>(),
        junk in "[a-z]{3,9}( [a-z]{3,9}){0,12}",
        more in proptest::collection::vec((0usize..1000, any::<bool>()), 0..6),
    ) {
        let (env, qs, pairs) = (shared(), conv_questions(), sole_statements());
        prop_assume!(!pairs.is_empty());
        let (other, m) = pairs[pair % pairs.len()].clone();
        let target = &qs[target % qs.len()];
        prop_assume!(target.id != other.id);
        let n = env.base(CONV).unwrap().len();
        let id = fresh("wreck");
        let b = runtime().block_on(async {
            env.create_episode(locomo(&id, &target.id)).await.unwrap();
            let read = m0_read(env, &target.id).await;
            let mut victims = vec![(m, overwrite)];
            victims.extend(more.iter().map(|(i, o)| (MemoryId((i % n) as u32), *o)));
            for (v, over) in victims.into_iter().filter(|(v, _)| !read.contains(v)) {
                let args = if over {
                    ("manage_memory", serde_json::json!({"operation": "update", "memory_id": v.to_string(), "content": junk}))
                } else {
                    ("delete_memory", serde_json::json!({"memory_id": v.to_string()}))
                };
                let _ = env.call_tool(&id, call(args.0, &args.1.to_string())).await;
            }
            let b = env.score_episode(&id).await.unwrap();
            env.close_episode(&id).await.unwrap();
            (b, read)
        });
        let (b, read) = b;
        prop_assume!(!read.contains(&m));
        // The target reads what it read (unless the junk ranks into its reading: then this case is not one).
        prop_assume!(b.new.retrieved == b.old.retrieved);
        prop_assert_eq!(b.performance_delta, 0.0);
        let others = b.others.clone().unwrap();
        prop_assert!(others.damaged >= 1, "{others:?}");
        prop_assert!(b.reward < 0.0, "{} for {:?}", b.reward, others);
    }
}

#[tokio::test]
async fn a_no_op_reads_every_other_question_as_on_m0_and_scores_exactly_zero() {
    let env = env();
    let q = &conv_questions()[0];
    env.create_episode(locomo("noop", &q.id)).await.unwrap();
    let b = env.score_episode("noop").await.unwrap();
    let o = b.others.clone().unwrap();
    assert_eq!((o.count, o.rescored, o.improved, o.damaged, o.evaluator), (conv_questions().len() - 1, 0, 0, 0, "answer-phrase"));
    assert_eq!((b.reward, b.others_term, o.mean_delta, b.ledger.added, b.ledger.removed), (0.0, 0.0, 0.0, 0, 0));
    assert!(b.ledger.base > 1000, "{:?}", b.ledger);
    // The single-question formulas do not score the others.
    let (single, _) = env_with(EnvConfig { formula: RewardFormula::DeltaGrowth, ..EnvConfig::default() }, Arc::new(SystemClock::default()));
    single.create_episode(locomo("single", &q.id)).await.unwrap();
    assert!(single.score_episode("single").await.unwrap().others.is_none());
}

#[test]
fn deleting_what_other_questions_read_costs_and_is_counted() {
    let (q, m) = sole_statements().into_iter().next().expect("a memory that alone states an answer");
    runtime().block_on(deleting(q, m));
}

async fn deleting(q: crate::dataset::Question, m: MemoryId) {
    // Any other question of the conversation as the target, one that does not read m.
    let env = shared();
    for target in conv_questions().iter().filter(|t| t.id != q.id) {
        let id = format!("del-{}", target.id);
        env.create_episode(locomo(&id, &target.id)).await.unwrap();
        if m0_read(env, &target.id).await.contains(&m) {
            env.close_episode(&id).await.unwrap();
            continue;
        }
        env.call_tool(&id, call("delete_memory", &format!(r#"{{"memory_id": "{m}"}}"#))).await.unwrap();
        let b = env.score_episode(&id).await.unwrap();
        let o = b.others.clone().unwrap();
        assert!(o.rescored >= 1 && o.damaged >= 1 && o.damage > 0.0 && b.others_term < 0.0, "{o:?}");
        assert!(b.ledger.removed > 0 && b.ledger.added == 0, "{:?}", b.ledger);
        assert!(b.reward < 0.0 && b.performance_delta == 0.0, "{b:?}");
        return;
    }
    panic!("no target that does not read {m}");
}

#[tokio::test]
async fn others_llm_scores_the_most_moved_readings_with_the_llm() {
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = asked.clone();
    let chat = Arc::new(crate::llm::fake::ScriptedChat::new(move |_| {
        counter.fetch_add(1, AtomicOrdering::SeqCst);
        Ok("Not mentioned in the conversation".into())
    }));
    let config = EnvConfig { evaluator: Evaluator::LlmF1, others_llm: 2, ..EnvConfig::default() };
    let env = env_with(config, Arc::new(SystemClock::default())).0.with_llm(Some(Arc::new(crate::llm::Llm::new(chat, 0)))).unwrap();
    let q = &conv_questions()[0];
    env.create_episode(locomo("llm", &q.id)).await.unwrap();
    // Delete a dozen memories: many readings move.
    let ids: Vec<String> = (0..12).map(|i| MemoryId(i * 7).to_string()).collect();
    env.call_tool("llm", call("delete_memory", &serde_json::json!({"memory_ids": ids}).to_string())).await.unwrap();
    let before = asked.load(AtomicOrdering::SeqCst);
    let b = env.score_episode("llm").await.unwrap();
    let o = b.others.clone().unwrap();
    assert!(o.rescored >= 2, "{o:?}");
    assert_eq!((o.llm_scored, o.evaluator), (2, "answer-phrase"));
    // The target's two answers (M₀ and now), and two per LLM-scored question (its M₀ answer, cached from
    // then on, and its answer now).
    assert_eq!(asked.load(AtomicOrdering::SeqCst) - before, 2 + 2 * 2);
    // Without the flag, the others cost no LLM request.
    let env0 = {
        let chat = Arc::new(crate::llm::fake::ScriptedChat::new(|_| Ok("x".into())));
        let config = EnvConfig { evaluator: Evaluator::LlmF1, ..EnvConfig::default() };
        env_with(config, Arc::new(SystemClock::default())).0.with_llm(Some(Arc::new(crate::llm::Llm::new(chat.clone(), 0)))).unwrap()
    };
    env0.create_episode(locomo("llm0", &q.id)).await.unwrap();
    assert_eq!(env0.score_episode("llm0").await.unwrap().others.clone().unwrap().llm_scored, 0);
}

/// Under hybrid search an edit shifts the rank fusion of every question (a new memory moves every rank below
/// it): the others read M₀'s fusion frozen, with the edit placed in it. A date fixed in the target's memory
/// moves no other question's reading but those the fixed memory enters or leaves, and costs none of them.
#[tokio::test]
async fn under_hybrid_search_a_fix_moves_only_the_readings_it_enters() {
    let index = crate::memory::IndexConfig { hybrid: true, ..crate::memory::IndexConfig::default() };
    let (env, _) = env_with(EnvConfig { index, ..EnvConfig::default() }, Arc::new(SystemClock::default()));
    env.create_episode(locomo("hyb", "conv-26:q0")).await.unwrap();
    let fix = r#"{"operation": "update", "memory_id": "m0000", "content": "Caroline went to the LGBTQ support group on 7 May 2023."}"#;
    env.call_tool("hyb", call("manage_memory", fix)).await.unwrap();
    let b = env.score_episode("hyb").await.unwrap();
    let o = b.others.clone().unwrap();
    assert!(b.performance_delta > 0.0 && b.reward > 0.9, "{b:?}");
    assert_eq!((o.damaged, o.destroyed, o.displaced), (0, 0.0, 0.0), "{o:?}");
    assert!(o.rescored < o.count / 4, "only the readings m0000 was in or enters: {o:?}");
    // A no-op reads every other question as on M₀.
    env.create_episode(locomo("hyb0", "conv-26:q0")).await.unwrap();
    let noop = env.score_episode("hyb0").await.unwrap();
    assert_eq!((noop.reward, noop.others.clone().unwrap().rescored), (0.0, 0));
}

#[test]
fn credited_rises_need_a_written_fact() {
    // Moving an M₀ memory into a reading (by deleting what ranked above it) raises p but is not credited.
    let moved = OtherDelta { p_old: 0.0, p_new: 1.0, p_m0: 1.0, p_grounded: 1.0, p_now: 1.0, p_virtual: 1.0 };
    assert_eq!(moved.credited_rise(), 0.0);
}

/// Tokens that are not content words, around a copy so that it ranks for no question.
const NOT_CONTENT: &str = "the of and to in a is it that was for on as with be at by this had not are but from or";

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// A fact is kept only where a question can read it: copying a memory that states another question's
    /// answer into a padded copy, then deleting the original, costs at least what deleting it costs, wherever
    /// the copy restores no question's reading.
    #[test]
    fn moving_a_fact_out_of_reach_then_deleting_it_costs_what_deleting_it_costs(target in 0usize..81, pair in 0usize..1000) {
        let (env, qs, pairs) = (shared(), conv_questions(), sole_statements());
        prop_assume!(!pairs.is_empty());
        let (other, m) = pairs[pair % pairs.len()].clone();
        let target = &qs[target % qs.len()];
        prop_assume!(target.id != other.id);
        let text = env.base(CONV).unwrap().record(m.0 as usize).unwrap().text.clone();
        let copy = format!("{NOT_CONTENT} {NOT_CONTENT} {text} {NOT_CONTENT} {NOT_CONTENT}");
        let run = |moved: bool| {
            let id = fresh("move");
            runtime().block_on(async {
                env.create_episode(locomo(&id, &target.id)).await.unwrap();
                let read = m0_read(env, &target.id).await;
                if moved {
                    let args = serde_json::json!({"operation": "create", "content": copy});
                    env.call_tool(&id, call("manage_memory", &args.to_string())).await.unwrap();
                }
                env.call_tool(&id, call("delete_memory", &format!(r#"{{"memory_id": "{m}"}}"#))).await.unwrap();
                let b = env.score_episode(&id).await.unwrap();
                let (scored, _) = env.others_against(&id, Reference::Plain).await.unwrap();
                env.close_episode(&id).await.unwrap();
                (b, scored, read)
            })
        };
        let ((deleted, d_scored, read), (moved, m_scored, _)) = (run(false), run(true));
        prop_assume!(!read.contains(&m) && moved.new.retrieved == moved.old.retrieved);
        let restores = d_scored.deltas.iter().zip(&m_scored.deltas).any(|(a, b)| b.p_new > a.p_new);
        prop_assume!(!restores);
        prop_assert!(moved.reward <= deleted.reward + 1e-12, "moved {} > deleted {}", moved.reward, deleted.reward);
        prop_assert!(moved.ledger.added > 0 && moved.ledger.removed >= deleted.ledger.removed, "{:?}", moved.ledger);
    }
}
