//! Proptest strategies shared by the test modules: arbitrary (valid) memories and episodes.

use crate::banks::agent::{AgentMemory, CardInput, Episode, EpisodeLogEntry, MistakeCard};
use proptest::prelude::*;

pub fn text() -> impl Strategy<Value = String> {
    "\\PC{0,12}"
}

pub fn opt_id() -> impl Strategy<Value = Option<String>> {
    proptest::option::of("\\PC{1,8}")
}

/// A text as the text rule stores it (what an export holds and an import gives back).
pub fn stored() -> impl Strategy<Value = String> {
    text().prop_map(|s| crate::text::charset::admit(&s, crate::text::charset::Shape::Text, 4_000).unwrap_or_default())
}

/// An optional id as stored: `None` for one the rule leaves empty or refuses.
pub fn stored_id() -> impl Strategy<Value = Option<String>> {
    opt_id().prop_map(|o| {
        o.and_then(|s| crate::text::charset::admit(&s, crate::text::charset::Shape::Text, 4_000).ok()).filter(|s| !s.is_empty())
    })
}

pub fn score() -> impl Strategy<Value = f64> {
    prop_oneof![-2.0..2.0f64, proptest::num::f64::NORMAL | proptest::num::f64::SUBNORMAL | proptest::num::f64::ZERO]
}

pub fn log_entry() -> impl Strategy<Value = EpisodeLogEntry> {
    (stored(), stored(), score(), any::<u64>(), stored()).prop_map(|(timestamp, task_id, score, steps, summary)| EpisodeLogEntry {
        timestamp,
        task_id,
        score,
        steps,
        summary,
    })
}

pub fn mistake_card() -> impl Strategy<Value = MistakeCard> {
    ((stored(), stored(), stored_id(), stored_id(), stored_id()), (stored(), stored(), any::<u64>(), any::<u64>(), any::<u64>())).prop_map(
        |((mistake_type, task_id, worker_id, bad_decision, correct_decision), (evidence, lesson, seen_count, first, last))| MistakeCard {
            mistake_type,
            task_id,
            worker_id,
            bad_decision,
            correct_decision,
            evidence,
            lesson,
            seen_count,
            first_seen_episode: first,
            last_seen_episode: last,
        },
    )
}

pub fn memory() -> impl Strategy<Value = AgentMemory> {
    let strings = || proptest::collection::vec(stored(), 0..4);
    (
        (any::<u64>(), any::<u64>(), proptest::option::of(any::<u64>()), strings()),
        proptest::collection::btree_map(stored(), strings(), 0..3),
        proptest::collection::vec(log_entry(), 0..4),
        proptest::collection::btree_map(stored(), proptest::collection::vec(score(), 0..4), 0..3),
        (strings(), proptest::collection::vec(mistake_card(), 0..3), strings()),
    )
        .prop_map(
            |(
                (version, total_episodes, last_consolidated_at, global_rules),
                task_rules,
                episode_log,
                score_history,
                (mistakes, mistake_cards, successes),
            )| {
                AgentMemory {
                    version,
                    total_episodes,
                    last_consolidated_at,
                    global_rules,
                    task_rules,
                    episode_log,
                    score_history,
                    mistakes,
                    mistake_cards,
                    successes,
                }
            },
        )
}

pub fn card_input() -> impl Strategy<Value = CardInput> {
    let t = || proptest::option::of("\\PC{0,10}");
    (t(), t(), t(), t(), t(), t(), t()).prop_map(|(mistake_type, task_id, worker_id, bad_decision, correct_decision, evidence, lesson)| {
        CardInput { mistake_type, task_id, worker_id, bad_decision, correct_decision, evidence, lesson }
    })
}

/// Episodes including invalid ones: any f64 score (NaN, infinities), occasional over-long texts, too many items.
pub fn episode() -> impl Strategy<Value = Episode> {
    let text = prop_oneof![8 => "\\PC{0,10}", 1 => Just("x".repeat(4001))];
    let task = prop_oneof![8 => "[a-c ]{0,3}", 1 => Just("t".repeat(257))];
    (
        proptest::option::of(task),
        proptest::option::of(prop_oneof![4 => 0.0..1.0f64, 1 => any::<f64>()]),
        proptest::option::of(any::<u64>()),
        proptest::option::of(text.clone()),
        proptest::collection::vec(text.clone(), 0..4),
        prop_oneof![8 => proptest::collection::vec(text, 0..4), 1 => Just(vec!["s".to_string(); 101])],
        proptest::collection::vec(card_input(), 0..4),
    )
        .prop_map(|(task_id, score, steps, trajectory_summary, mistakes, successes, mistake_cards)| Episode {
            task_id,
            score,
            steps,
            trajectory_summary,
            mistakes,
            successes,
            mistake_cards,
        })
}
