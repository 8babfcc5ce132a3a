//! The adversarial suite on the full test split: the goals the default reward must meet (no trick pays,
//! padding never pays, the oracle and the honest resolver are seen), and the same tricks paying under
//! MemUpdate's reward, so that the comparison in the README stays true.

use super::*;
use crate::embed::{EmbedService, HashEmbedder};
use crate::episode::{EnvConfig, SystemClock};
use crate::reward::{Context, RewardFormula};

fn environment(config: EnvConfig) -> Arc<Environment> {
    let dataset = Arc::new(crate::config::load_dataset(None).unwrap());
    let embed = EmbedService::new(Arc::new(HashEmbedder::default()), 2);
    Arc::new(Environment::new(config, dataset, embed, Arc::new(SystemClock::default())).unwrap())
}

fn all_row<'a>(summary: &'a [SummaryRow], agent: &str) -> &'a SummaryRow {
    summary.iter().find(|r| r.agent == agent && r.category.is_none()).unwrap()
}

#[tokio::test]
async fn no_trick_pays_on_the_default_reward_and_real_improvements_do() {
    let env = environment(EnvConfig::default());
    let rows = evaluate(&env, &Options::default()).await.unwrap();
    assert_eq!(rows.len(), AGENTS.len() * 411);
    let summary = summarize(&rows);
    let mean = |agent: &str| all_row(&summary, agent).evaluators[0].mean_reward;

    let noop = all_row(&summary, "no-op").expected.clone().unwrap();
    assert_eq!((noop.met, noop.checked), (411, 411), "a no-op scores exactly 0");
    // The oracle gains on at least 95 % of the questions where p_old < 1.
    let oracle = all_row(&summary, "oracle").expected.clone().unwrap();
    assert!(oracle.met as f64 >= 0.95 * oracle.checked as f64, "{oracle:?}");
    // Every agent that neither reads the gold nor adds information: mean at most the no-op's 0, and
    // above 0 on at most 5 % of questions, overall; per category no trick earns 5 % of the oracle.
    for agent in AGENTS.iter().filter(|a| matches!(a, Agent::Trick(_)) && !a.privileged()) {
        let row = all_row(&summary, agent.name());
        assert!(mean(agent.name()) <= 0.0, "{} earns {} on average", agent.name(), mean(agent.name()));
        assert!(row.positive <= 0.05, "{} is > 0 on {:.1} % of questions", agent.name(), 100.0 * row.positive);
    }
    for e in exploit(&summary) {
        assert!(e.share < 0.05, "{e:?}");
    }
    // Padding never raises a reward: the oracle with padding never beats the oracle alone.
    let (checked, raised) = padding_raises(&rows);
    assert_eq!((checked, raised.len()), (411, 0), "{raised:?}");
    assert!(mean("padding") < 0.0);
    // The honest resolver, which never sees the gold, gains on temporal questions whose evidence it
    // resolves.
    let resolver_temporal = summary.iter().find(|r| r.agent == "resolver" && r.category == Some(2)).unwrap();
    assert!(resolver_temporal.evaluators[0].mean_reward > 0.0 && resolver_temporal.positive > 0.1, "{resolver_temporal:?}");
    // Deleting the evidence costs wherever it was read and was the answer's only statement; where a memory
    // left still states the answer, nothing was destroyed (counted apart, and few).
    let destroyer = all_row(&summary, "destroyer").expected.clone().unwrap();
    assert!(destroyer.met as f64 >= 0.95 * destroyer.checked as f64, "{destroyer:?}");
    assert!(destroyer.checked >= 60 && destroyer.answer_elsewhere <= destroyer.checked, "{destroyer:?}");
}

#[tokio::test]
async fn memupdates_reward_pays_the_tricks() {
    let legacy =
        EnvConfig { evaluator: Evaluator::AnswerRecall, context: Context::TopK, formula: RewardFormula::MemUpdate, ..EnvConfig::default() };
    let env = environment(legacy);
    let agents = vec![Agent::NoOp, Agent::Oracle, Agent::Trick(Trick::Glue5Dates), Agent::Trick(Trick::OraclePadding)];
    let o = Options { agents, evaluators: vec![Evaluator::AnswerRecall], ..Options::default() };
    let rows = evaluate(&env, &o).await.unwrap();
    let summary = summarize(&rows);
    let mean = |agent: &str| all_row(&summary, agent).evaluators[0].mean_reward;
    // Packing the hits with a list of dates earns more than half of what the oracle earns …
    assert!(mean("glue5-dates") > 0.5 * mean("oracle"), "{} vs {}", mean("glue5-dates"), mean("oracle"));
    // … and padding the oracle's memory raises its reward (the density factor).
    assert!(mean("oracle-padding") > mean("oracle"));
    assert!(padding_raises(&rows).1.len() > 100);
    // … where the default reward pays neither.
    let env = environment(EnvConfig::default());
    let summary = summarize(&evaluate(&env, &Options { evaluators: vec![Evaluator::AnswerPhrase], ..o }).await.unwrap());
    assert!(all_row(&summary, "glue5-dates").evaluators[0].mean_reward < 0.0);
}
