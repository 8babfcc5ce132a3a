//! Tests of the agent memory (the agent-memory design): one module per source file, and [`bank`] for agent banks served
//! on a real SQLite store.

mod bank;
mod consolidate;
mod context;
mod import;
mod record;
mod strategies;

use crate::banks::agent::{CardInput, Episode, EpisodeLogEntry, MistakeCard};

/// An episode with a task and a score and nothing else.
pub fn ep(task: &str, score: f64) -> Episode {
    Episode { task_id: Some(task.to_string()), score: Some(score), ..Episode::default() }
}

/// A card with only a type.
pub fn card(kind: &str) -> CardInput {
    CardInput { mistake_type: Some(kind.to_string()), ..CardInput::default() }
}

/// A log entry.
pub fn entry(task: &str, score: f64, steps: u64, summary: &str) -> EpisodeLogEntry {
    EpisodeLogEntry { timestamp: "2026-01-01T00:00:00+00:00".into(), task_id: task.into(), score, steps, summary: summary.into() }
}

/// A stored card.
pub fn stored_card(kind: &str, seen: u64, last: u64, lesson: &str, evidence: &str) -> MistakeCard {
    MistakeCard {
        mistake_type: kind.into(),
        task_id: "t".into(),
        lesson: lesson.into(),
        evidence: evidence.into(),
        seen_count: seen,
        first_seen_episode: 1,
        last_seen_episode: last,
        ..MistakeCard::default()
    }
}

/// Strings as owned.
pub fn s(items: &[&str]) -> Vec<String> {
    items.iter().map(|x| x.to_string()).collect()
}
