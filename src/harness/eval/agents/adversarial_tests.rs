//! The adversarial suite on the full test and train splits: the goals the default reward must meet in every category
//! (no trick pays, in any of its shapes; wrecking memory the question does not read costs, however its
//! facts were moved first; the honest sweep gains in every category; neither padding nor writing over
//! another memory beats creating the oracle's, the oracle and the honest resolver are seen, a fact fixed
//! where every reader reads it earns more than a card for one question), and the holes the earlier
//! formulas leave, so that the comparison in the book stays true.

use super::*;
use crate::embed::{EmbedService, HashEmbedder};
use crate::episode::{EnvConfig, SystemClock};
use crate::reward::{Context, RewardFormula};

fn environment(config: EnvConfig) -> Arc<Environment> {
    let dataset = Arc::new(crate::dataset::Dataset::load(None).unwrap());
    let embed = EmbedService::new(Arc::new(HashEmbedder::default()), 2);
    Arc::new(Environment::new(config, dataset, embed, Arc::new(SystemClock::default())).unwrap())
}

fn all_row<'a>(summary: &'a [SummaryRow], agent: &str) -> &'a SummaryRow {
    summary.iter().find(|r| r.agent == agent && r.category.is_none()).unwrap()
}

#[tokio::test]
async fn no_trick_pays_in_any_category_and_real_improvements_do_on_the_test_split() {
    goals_hold(crate::dataset::Split::Test, 411).await;
}

#[tokio::test]
async fn no_trick_pays_in_any_category_and_real_improvements_do_on_the_train_split() {
    goals_hold(crate::dataset::Split::Train, 1129).await;
}

/// The issue-60 goals on every question of `split` (`n` of categories 1–4).
async fn goals_hold(split: crate::dataset::Split, n: usize) {
    let env = environment(EnvConfig::default());
    let rows = evaluate(&env, &Options { split: Some(split), ..Options::default() }).await.unwrap();
    assert_eq!(rows.len(), AGENTS.len() * n);
    let summary = summarize(&rows);

    let noop = all_row(&summary, "no-op").expected.clone().unwrap();
    assert_eq!((noop.met, noop.checked), (n, n), "a no-op scores exactly 0");
    // The oracle gains on at least 95 % of the questions where p_old < 1.
    let oracle = all_row(&summary, "oracle").expected.clone().unwrap();
    assert!(oracle.met as f64 >= 0.95 * oracle.checked as f64, "{oracle:?}");
    // Every trick that neither reads the gold nor adds information: mean at most the no-op's 0, and above 0
    // on at most 5 % of the questions, in every category and overall.
    let misses = trick_misses(&summary);
    assert!(misses.is_empty(), "{misses:#?}");
    for e in exploit(&summary) {
        assert!(e.share <= 0.0, "{e:?}");
    }
    // Wrecking memory the question does not read costs on at least 95 % of the episodes.
    let wrecks = wrecking(&summary);
    assert_eq!(wrecks.len(), WRECKERS.len());
    for (agent, negative, count) in wrecks {
        assert!(negative >= MIN_WRECK_NEGATIVE && count == n, "{agent}: {negative}");
    }
    // Neither padding the oracle's memory nor writing it over another memory beats creating it.
    assert_eq!(above_oracle(&rows, Trick::OraclePadding), (n, vec![]));
    assert_eq!(above_oracle(&rows, Trick::OracleOverwrite), (n, vec![]));
    assert!(all_row(&summary, "padding").evaluators[0].mean_reward < 0.0);
    // The honest resolver, which never sees the gold, gains on temporal questions.
    let resolver_temporal = summary.iter().find(|r| r.agent == "resolver" && r.category == Some(2)).unwrap();
    assert!(resolver_temporal.evaluators[0].mean_reward > 0.0 && resolver_temporal.positive > 0.1, "{resolver_temporal:?}");
    // The sweep, which resolves every dated time word it sees, gains in every category.
    for c in 1..=4 {
        let sweep = summary.iter().find(|r| r.agent == "sweep" && r.category == Some(c)).unwrap();
        assert!(sweep.evaluators[0].mean_reward > 0.0 && sweep.positive > 0.05, "{sweep:?}");
    }
    // A date fixed in the memory that other questions read earns more than the same date as a card for the
    // question asked, where the fix serves another question too.
    let shared = shared_fix(&rows).unwrap();
    assert!(shared.episodes >= 20 && shared.in_place > shared.card + 0.3, "{shared:?}");
    // Deleting the evidence costs wherever it was read and was the answer's only statement.
    let destroyer = all_row(&summary, "destroyer").expected.clone().unwrap();
    assert!(destroyer.met as f64 >= 0.95 * destroyer.checked as f64, "{destroyer:?}");
    assert!(destroyer.checked >= 60, "{destroyer:?}");
}

#[tokio::test]
async fn the_single_question_reward_lets_wrecking_and_overwriting_pass() {
    let env = environment(EnvConfig { formula: RewardFormula::DeltaGrowth, ..EnvConfig::default() });
    let agents = vec![Agent::Oracle, Agent::Trick(Trick::DeleteOthers), Agent::Trick(Trick::Vandal), Agent::Trick(Trick::OracleOverwrite)];
    let rows = evaluate(&env, &Options { agents, limit: Some(80), ..Options::default() }).await.unwrap();
    let summary = summarize(&rows);
    // What the question does not read costs (next to) nothing …
    for (agent, negative, n) in wrecking(&summary) {
        let mean = all_row(&summary, agent).evaluators[0].mean_reward;
        assert!(negative < 0.05 && mean > -0.01, "{agent} over {n}: < 0 on {negative}, mean {mean}");
    }
    // … and writing the oracle's text over another memory saves its growth.
    let (checked, raised) = above_oracle(&rows, Trick::OracleOverwrite);
    assert!(raised.len() as f64 >= 0.5 * checked as f64, "{} of {checked}", raised.len());
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
