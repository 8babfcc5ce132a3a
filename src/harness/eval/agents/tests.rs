//! The scripted agents on the real LoCoMo data (what each agent's reward must mean), the summary's
//! arithmetic on hand-made rows, and the flag checks.

use super::*;
use crate::embed::{EmbedService, HashEmbedder};
use crate::episode::{EnvConfig, SystemClock};
use crate::llm::fake::ScriptedChat;
use crate::llm::{Llm, LlmError};

/// The environment `memgym eval` builds on its defaults (embedded data, hash embedder), with an LLM.
fn environment(chat: Option<Arc<ScriptedChat>>) -> Arc<Environment> {
    let dataset = Arc::new(crate::dataset::Dataset::load(None).unwrap());
    let embed = EmbedService::new(Arc::new(HashEmbedder::default()), 2);
    let env = Environment::new(EnvConfig::default(), dataset, embed, Arc::new(SystemClock::default())).unwrap();
    Arc::new(env.with_llm(chat.map(|c| Arc::new(Llm::new(c, 4096)))).unwrap())
}

/// A reader that answers with the first line of its context: the top retrieved memory.
fn first_line_reader() -> Arc<ScriptedChat> {
    Arc::new(ScriptedChat::new(|r| Ok(r.messages[0].content.lines().next().unwrap_or("").to_string())))
}

fn rewards(rows: &[EpisodeRow], agent: Agent) -> Vec<f64> {
    rows.iter().filter(|r| r.agent == agent).map(|r| r.scores[0].reward).collect()
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn all_row<'a>(summary: &'a [SummaryRow], agent: &str) -> &'a SummaryRow {
    summary.iter().find(|r| r.agent == agent && r.category.is_none()).unwrap()
}

/// The reference agents only (no-op, oracle, destroyer, random).
fn classic() -> Vec<Agent> {
    vec![Agent::NoOp, Agent::Oracle, Agent::Destroyer, Agent::Random]
}

#[tokio::test]
async fn each_agent_moves_the_reward_the_way_it_should_on_the_test_split() {
    let env = environment(None);
    let o = Options { agents: classic(), ..Options::default() };
    let rows = evaluate(&env, &o).await.unwrap();
    let questions = select_questions(env.dataset(), &o).len();
    assert_eq!(questions, 411, "test split without category 5");
    assert_eq!(rows.len(), 4 * questions);
    assert_eq!(env.open_episodes(), 0, "every episode is closed");

    let noop = rewards(&rows, Agent::NoOp);
    assert!(noop.iter().all(|r| *r == 0.0), "a no-op episode scored {:?}", noop.iter().find(|r| **r != 0.0));
    let oracle = rewards(&rows, Agent::Oracle);
    assert!(mean(&oracle) > 0.0, "oracle mean {}", mean(&oracle));
    let destroyer = rewards(&rows, Agent::Destroyer);
    assert!(mean(&destroyer) < 0.0, "destroyer mean {}", mean(&destroyer));
    // The oracle never lowers p; the destroyer's edits are deletions only.
    for r in rows.iter().filter(|r| r.agent == Agent::Oracle) {
        assert!(r.scores[0].p_new >= r.scores[0].p_old, "{}", r.question_id);
        assert_eq!((r.edits, r.refused), (1, 0));
    }

    let summary = summarize(&rows);
    let expected = |agent: &str| all_row(&summary, agent).expected.clone().unwrap();
    let e = expected("no-op");
    assert_eq!((e.met, e.checked), (questions, questions));
    let e = expected("oracle");
    assert_eq!(e.checked + e.saturated, questions);
    assert!(e.met as f64 > 0.95 * e.checked as f64, "{e:?}");
    let e = expected("destroyer");
    assert_eq!(e.checked + e.nothing_to_lose + e.no_evidence_memory + e.evidence_not_retrieved + e.answer_elsewhere, questions);
    assert!(e.met as f64 > 0.5 * e.checked as f64, "{e:?}");
    // Categories 1-4 and "all", per agent.
    assert_eq!(summary.len(), 4 * 5);
    let random = all_row(&summary, "random");
    assert!(random.expected.is_none() && random.edits > 0 && random.refused > 0, "{random:?}");
    let text = table(&summary);
    assert!(text.contains("reward answer-phrase") && text.contains("expected sign under answer-phrase"), "{text}");
    assert!(!text.contains("agree"), "one evaluator, no agreement column");
}

#[tokio::test]
async fn the_random_agent_is_deterministic_for_a_seed() {
    let env = environment(None);
    let o = Options { agents: vec![Agent::Random], limit: Some(30), random_steps: 8, ..Options::default() };
    let a = evaluate(&env, &o).await.unwrap();
    let b = evaluate(&env, &Options { concurrency: 1, ..o.clone() }).await.unwrap();
    assert_eq!(a, b);
    assert_eq!(a.len(), 30);
    assert!(a.iter().all(|r| r.edits + r.refused == 8), "every step is an edit or a refusal");
    let c = evaluate(&env, &Options { seed: 1, ..o }).await.unwrap();
    assert_ne!(a, c, "another seed, other edits");
}

#[tokio::test]
async fn category_5_is_run_only_when_included_and_not_held_against_the_destroyer() {
    let env = environment(None);
    let o = Options { include_adversarial: true, limit: Some(24), agents: classic(), ..Options::default() };
    let rows = evaluate(&env, &o).await.unwrap();
    let adversarial = rows.iter().filter(|r| r.agent == Agent::Destroyer && r.category == 5).count();
    assert!(adversarial > 0);
    let summary = summarize(&rows);
    for agent in classic() {
        assert!(summary.iter().any(|r| r.agent == agent.name() && r.category == Some(5)), "{}", agent.name());
    }
    assert_eq!(all_row(&summary, "destroyer").expected.as_ref().unwrap().adversarial, adversarial);
    let plain = evaluate(&env, &Options { limit: Some(24), ..Options::default() }).await.unwrap();
    assert!(plain.iter().all(|r| r.category != 5));
}

#[test]
fn a_limit_spreads_over_every_conversation_and_category() {
    let ds = crate::dataset::Dataset::load(None).unwrap();
    let o = Options { limit: Some(24), ..Options::default() };
    let picked = select_questions(&ds, &o);
    assert_eq!(picked.len(), 24);
    let convs: HashSet<&str> = picked.iter().map(|q| q.conversation_id.as_str()).collect();
    let all_test: HashSet<&str> = select_questions(&ds, &Options::default()).iter().map(|q| q.conversation_id.as_str()).collect();
    assert_eq!(convs, all_test);
    let cats: HashSet<u8> = picked.iter().map(|q| q.category).collect();
    assert_eq!(cats, HashSet::from([1, 2, 3, 4]));
    let ids: HashSet<&str> = picked.iter().map(|q| q.id.as_str()).collect();
    assert_eq!(ids.len(), 24, "no question twice");
    // With category 5 and all splits.
    let o = Options { split: None, include_adversarial: true, ..Options::default() };
    assert_eq!(select_questions(&ds, &o).len(), 1986);
    assert_eq!(select_questions(&ds, &Options { limit: Some(5000), ..Options::default() }).len(), 411);
}

#[tokio::test]
async fn two_evaluators_give_sign_agreement_and_see_the_same_edits() {
    let chat = first_line_reader();
    let env = environment(Some(chat.clone()));
    let o =
        Options { evaluators: vec![Evaluator::AnswerRecall, Evaluator::LlmF1], limit: Some(16), agents: classic(), ..Options::default() };
    let rows = evaluate(&env, &o).await.unwrap();
    assert_eq!(rows.len(), 4 * 16);
    assert!(rows.iter().all(|r| r.scores.iter().map(|s| s.evaluator).eq(["answer-recall", "llm-f1"])));
    assert!(!chat.seen.lock().is_empty(), "llm-f1 asked the LLM");
    let summary = summarize(&rows);
    for r in &summary {
        assert_eq!(r.evaluators[0].sign_agreement, None);
        let agree = r.evaluators[1].sign_agreement.unwrap();
        assert!((0.0..=1.0).contains(&agree), "{r:?}");
    }
    // Both evaluators score every no-op exactly 0: they agree everywhere.
    let noop = all_row(&summary, "no-op");
    assert_eq!(noop.evaluators[1].sign_agreement, Some(1.0));
    assert_eq!(noop.evaluators[1].mean_reward, 0.0);
    // The reader answers with the top memory: the oracle's "question answer" memory raises its F1.
    assert!(all_row(&summary, "oracle").evaluators[1].mean_reward > 0.0, "{summary:?}");
    let text = table(&summary);
    assert!(text.contains("agree llm-f1") && text.contains("reward llm-f1"), "{text}");
}

#[tokio::test]
async fn an_llm_failure_stops_the_evaluation_with_the_error() {
    let chat = first_line_reader();
    chat.queue.lock().push_back(Err(LlmError::Unavailable { message: "HTTP 503".into() }));
    let env = environment(Some(chat));
    let o = Options { evaluators: vec![Evaluator::LlmF1], limit: Some(4), concurrency: 1, agents: classic(), ..Options::default() };
    let err = evaluate(&env, &o).await.unwrap_err();
    assert!(
        matches!(&err, AgentEvalError::Episode { source: EpisodeError::Llm(LlmError::Unavailable { .. }), evaluator: "llm-f1", .. }),
        "{err:?}"
    );
    assert_eq!(env.open_episodes(), 0, "the failed episode is closed");
}

fn row(agent: Agent, category: u8, edits: usize, scores: &[(f64, f64, f64)]) -> EpisodeRow {
    let names = ["answer-recall", "llm-f1"];
    EpisodeRow {
        agent,
        question_id: format!("conv-x:q{category}-{edits}-{}", scores[0].2),
        category,
        gold: "ok",
        edits,
        refused: 0,
        evidence_recall_old: 1.0,
        answer_elsewhere: false,
        scores: scores
            .iter()
            .zip(names)
            .map(|(&(p_old, p_new, reward), evaluator)| Score {
                evaluator,
                p_old,
                p_new,
                reward,
                others_improved: 0,
                others_damaged: 0,
                others_term: 0.0,
                others_gain: 0.0,
                others_destroyed: 0.0,
                others_displaced: 0.0,
            })
            .collect(),
    }
}

#[test]
fn the_summary_counts_signs_agreement_and_expectations() {
    let rows = vec![
        row(Agent::NoOp, 1, 0, &[(0.5, 0.5, 0.0), (0.0, 0.0, 0.0)]),
        row(Agent::NoOp, 2, 0, &[(1.0, 1.0, 0.0), (1.0, 1.0, 0.0)]),
        // Oracle: a gain both see; a saturated question where llm-f1 drops; a miss both score 0; a
        // gain within the epsilon counts as 0.
        row(Agent::Oracle, 1, 1, &[(0.5, 1.0, 0.4), (0.0, 0.5, 0.2)]),
        row(Agent::Oracle, 1, 1, &[(1.0, 1.0, 0.0), (1.0, 0.9, -0.1)]),
        row(Agent::Oracle, 4, 1, &[(0.0, 0.0, 0.0), (0.0, 0.0, 0.0)]),
        row(Agent::Oracle, 4, 1, &[(0.2, 0.2, 1e-12), (0.0, 0.0, 0.0)]),
        // Destroyer: no evidence memory; nothing to lose; a loss; a "loss" that was a gain.
        row(Agent::Destroyer, 3, 0, &[(0.5, 0.5, 0.0), (0.5, 0.5, 0.0)]),
        row(Agent::Destroyer, 3, 1, &[(0.0, 0.0, 0.0), (0.0, 0.0, 0.0)]),
        row(Agent::Destroyer, 2, 1, &[(0.6, 0.0, -0.6), (1.0, 0.0, -1.0)]),
        row(Agent::Destroyer, 2, 2, &[(0.5, 0.6, 0.1), (0.5, 0.0, -0.5)]),
        // … and deletions that missed the top-k.
        EpisodeRow { evidence_recall_old: 0.0, ..row(Agent::Destroyer, 2, 1, &[(0.5, 0.5, 0.0), (0.5, 0.5, 0.0)]) },
        // … and an adversarial question, where deleting the trap's evidence helps.
        row(Agent::Destroyer, 5, 1, &[(0.5, 1.0, 0.5), (0.0, 1.0, 1.0)]),
    ];
    let s = summarize(&rows);
    let labels: Vec<(&str, Option<u8>)> = s.iter().map(|r| (r.agent, r.category)).collect();
    assert_eq!(
        labels,
        [
            ("no-op", Some(1)),
            ("no-op", Some(2)),
            ("no-op", None),
            ("oracle", Some(1)),
            ("oracle", Some(4)),
            ("oracle", None),
            ("destroyer", Some(2)),
            ("destroyer", Some(3)),
            ("destroyer", Some(5)),
            ("destroyer", None),
        ]
    );

    let noop = all_row(&s, "no-op");
    assert_eq!((noop.episodes, noop.zero, noop.evaluators[1].sign_agreement), (2, 1.0, Some(1.0)));
    assert_eq!(noop.expected, Some(ExpectedSign { rule: "reward = 0", checked: 2, met: 2, ..ExpectedSign::default() }));

    let oracle = all_row(&s, "oracle");
    assert_eq!(oracle.episodes, 4);
    assert!((oracle.evaluators[0].mean_reward - 0.1).abs() < 1e-9);
    assert!((oracle.evaluators[1].mean_reward - 0.025).abs() < 1e-9);
    assert!((oracle.evaluators[0].mean_p_new - 0.55).abs() < 1e-9);
    assert_eq!((oracle.positive, oracle.zero, oracle.negative), (0.25, 0.75, 0.0));
    assert_eq!(oracle.evaluators[1].sign_agreement, Some(0.75));
    let misses = vec!["conv-x:q4-1-0".to_string(), "conv-x:q4-1-0.000000000001".to_string()];
    assert_eq!(
        oracle.expected,
        Some(ExpectedSign { rule: "reward > 0", checked: 3, met: 1, saturated: 1, misses, ..ExpectedSign::default() })
    );
    let oracle_1 = s.iter().find(|r| r.agent == "oracle" && r.category == Some(1)).unwrap();
    assert_eq!((oracle_1.episodes, oracle_1.evaluators[1].sign_agreement), (2, Some(0.5)));
    assert_eq!(oracle_1.edits, 2);

    let destroyer = all_row(&s, "destroyer");
    assert_eq!((destroyer.positive, destroyer.zero, destroyer.negative), (1.0 / 3.0, 0.5, 1.0 / 6.0));
    assert_eq!(destroyer.evaluators[1].sign_agreement, Some(5.0 / 6.0));
    let expected = ExpectedSign {
        rule: "reward < 0",
        checked: 2,
        met: 1,
        nothing_to_lose: 1,
        no_evidence_memory: 1,
        evidence_not_retrieved: 1,
        adversarial: 1,
        misses: vec!["conv-x:q2-2-0.1".into()],
        ..ExpectedSign::default()
    };
    assert_eq!(destroyer.expected, Some(expected));
    assert_eq!(destroyer.edits, 6);

    let text = table(&s);
    assert!(text.contains("oracle          reward > 0   1/3 (33.3%); not checked: 1 saturated (p_old = 1)"), "{text}");
    assert!(
        text.contains("1 without an evidence memory (nothing deleted), 1 evidence not in M₀'s top-k (top-k unchanged), 1 adversarial"),
        "{text}"
    );
    assert!(text.contains("missed: conv-x:q2-2-0.1\n"), "{text}");
    assert!(summarize(&[]).is_empty());
}

#[test]
fn sign_has_a_dead_zone_of_epsilon() {
    assert_eq!([sign(0.0), sign(1e-10), sign(-1e-10), sign(2e-9), sign(-2e-9)], [0, 0, 0, 1, -1]);
}

#[test]
fn the_oracle_writes_the_answer_or_abstains_on_category_5() {
    let ds = crate::dataset::Dataset::load(None).unwrap();
    let q = ds.questions.iter().find(|q| q.category == 4).unwrap();
    assert_eq!(oracle_memory(q), Some(format!("{} {}", q.question, q.answer.as_deref().unwrap())));
    let adv = ds.questions.iter().find(|q| q.category == 5).unwrap();
    assert_eq!(oracle_memory(adv), Some(format!("{} Not mentioned in the conversation.", adv.question)));
}

fn agent_args(flags: &[&str]) -> AgentEvalArgs {
    crate::app::cli::eval_args(flags).agents
}

#[test]
fn flags_are_checked_before_any_work() {
    let (o, env) = prepare(&agent_args(&[])).unwrap();
    assert_eq!((o.evaluators.as_slice(), o.split, o.agents.len()), ([Evaluator::AnswerPhrase].as_slice(), Some(Split::Test), AGENTS.len()));
    assert_eq!(env.llm.evaluator, "answer-phrase");

    let err = |flags: &[&str]| format!("{:#}", prepare(&agent_args(flags)).unwrap_err());
    let e = err(&["--evaluator", "answer-recall,llm-f1"]);
    assert!(e.contains("llm-f1 needs an LLM endpoint") && e.contains("--llm-base-url"), "{e}");
    assert!(err(&["--evaluator", "llm-judge", "--llm-base-url", "http://127.0.0.1:1/v1"]).contains("--llm-model"));
    assert!(err(&["--evaluator", "bleu"]).contains("unknown evaluator"));
    assert!(err(&["--evaluator", "answer-recall,answer-recall"]).contains("twice"));
    assert!(err(&["--agent", "saboteur"]).contains("unknown agent"));
    assert!(err(&["--agent", "saboteur"]).contains("glue5-dates"), "the error lists every agent");
    assert!(err(&["--split", "dev"]).contains("--split"));
    assert!(err(&["--limit", "0"]).contains("--limit"));
    assert!(err(&["--random-steps", "0"]).contains("--random-steps"));
    assert!(err(&["--random-steps", "1001"]).contains("--random-steps"));

    let (o, env) = prepare(&agent_args(&[
        "--evaluator",
        "llm-f1",
        "--evaluator",
        "answer-recall",
        "--llm-base-url",
        "http://127.0.0.1:1/v1",
        "--llm-model",
        "m",
        "--llm-concurrency",
        "7",
        "--split",
        "all",
        "--agent",
        "random,oracle",
    ]))
    .unwrap();
    assert_eq!(o.evaluators, [Evaluator::LlmF1, Evaluator::AnswerRecall]);
    assert_eq!((o.split, o.concurrency, o.agents.as_slice()), (None, 7, [Agent::Oracle, Agent::Random].as_slice()));
    // The environment insists on the LLM, since its default evaluator is the first one.
    assert_eq!(env.llm.evaluator, "llm-f1");
}
