//! The prompt block injected at the start of an episode, and a stats summary for logs.
//!
//! Why it exists: the agent only benefits from memory through this text, and prompts are compared and
//! cached byte for byte, so it must match the seed's `build_memory_context` exactly.
//!
//! Output, lines joined by `\n` (items are two spaces, a dash and a space; the seed text's single space
//! is a capture artefact):
//! ```text
//! ## MEMORY FROM PAST EPISODES
//! \nRules for {t}:                    last max_rules of task_rules[t]
//! \nGeneral rules (all tasks):        last max_rules of global_rules
//! \nMistakes to avoid:                last 3, "  - AVOID: m"
//! \nStructured mistake cards:         top 3 by (seen_count, last_seen) desc, "  - [type, seen Nx] lesson Evidence: ev"
//! \nRecent {t} episodes:              last max_recent of t, "  - Score 0.00 in N steps: summary[:100]"
//! \nYour mean score on {t}: 0.00 (over N episodes)
//! ```
//! A section with no items is omitted; when only the header would remain the result is `""`.
//!
//! Every stored field is shown through [`inline`]: a line break inside it is written as the two
//! characters `\n`, so nothing recorded can start a line of this block (a heading, a rule, a card).
//! For fields without line breaks the output is the seed's, byte for byte.
//!
//! Kept from the seed on purpose: `max_rules == 0` and `max_recent == 0` mean "all" (Python's `[-0:]`);
//! mistakes and cards are not filtered by task; an empty task id counts as no task; the mean is the
//! in-order sum divided by the count. (CPython 3.12+ `sum()` compensates rounding, so on rare inputs
//! the seed's mean may differ in the last bit, and then possibly in the second decimal.)

use std::collections::BTreeMap;

use serde::Serialize;

use super::doc::MistakeCard;
use super::{cut_chars, fmt2, python_tail, AgentMemory};
use crate::text::charset::inline;

/// The seed's default `max_rules`.
pub const DEFAULT_MAX_RULES: usize = 5;
/// The seed's default `max_recent`.
pub const DEFAULT_MAX_RECENT: usize = 3;
/// Header of the block.
pub const HEADER: &str = "## MEMORY FROM PAST EPISODES";

/// Builds the memory block for `task_id` (see the module doc for the exact format).
pub fn build_memory_context(mem: &AgentMemory, task_id: Option<&str>, max_rules: usize, max_recent: usize) -> String {
    let task = task_id.filter(|t| !t.is_empty());
    let mut lines: Vec<String> = vec![HEADER.to_string()];

    if let Some(t) = task {
        if let Some(rules) = mem.task_rules.get(t) {
            let rules = python_tail(rules, max_rules);
            if !rules.is_empty() {
                lines.push(format!("\nRules for {}:", inline(t)));
                lines.extend(rules.iter().map(|r| format!("  - {}", inline(r))));
            }
        }
    }

    let global = python_tail(&mem.global_rules, max_rules);
    if !global.is_empty() {
        lines.push("\nGeneral rules (all tasks):".to_string());
        lines.extend(global.iter().map(|r| format!("  - {}", inline(r))));
    }

    let mistakes = python_tail(&mem.mistakes, 3);
    if !mistakes.is_empty() {
        lines.push("\nMistakes to avoid:".to_string());
        lines.extend(mistakes.iter().map(|m| format!("  - AVOID: {}", inline(m))));
    }

    let cards = top_cards(&mem.mistake_cards, 3);
    if !cards.is_empty() {
        lines.push("\nStructured mistake cards:".to_string());
        lines.extend(cards.iter().map(|c| {
            format!("  - [{}, seen {}x] {} Evidence: {}", inline(&c.mistake_type), c.seen_count, inline(&c.lesson), inline(&c.evidence))
        }));
    }

    if let Some(t) = task {
        let matching: Vec<_> = mem.episode_log.iter().filter(|e| e.task_id == t).collect();
        let recent = python_tail(&matching, max_recent);
        if !recent.is_empty() {
            lines.push(format!("\nRecent {} episodes:", inline(t)));
            lines.extend(
                recent.iter().map(|e| format!("  - Score {} in {} steps: {}", fmt2(e.score), e.steps, inline(cut_chars(&e.summary, 100)))),
            );
        }
        if let Some(scores) = mem.score_history.get(t).filter(|s| !s.is_empty()) {
            lines.push(format!("\nYour mean score on {}: {} (over {} episodes)", inline(t), fmt2(mean(scores)), scores.len()));
        }
    }

    if lines.len() == 1 {
        return String::new();
    }
    lines.join("\n")
}

/// In-order sum divided by the count (the caller guarantees a non-empty slice).
fn mean(scores: &[f64]) -> f64 {
    let sum: f64 = scores.iter().fold(0.0, |acc, s| acc + s);
    sum / scores.len() as f64
}

/// The top `n` cards by `(seen_count, last_seen_episode)` descending, ties in stored order.
fn top_cards(cards: &[MistakeCard], n: usize) -> Vec<&MistakeCard> {
    let mut sorted: Vec<&MistakeCard> = cards.iter().collect();
    sorted.sort_by_key(|c| std::cmp::Reverse(c.rank()));
    sorted.truncate(n);
    sorted
}

/// One of the most-seen mistake cards, for [`Summary`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TopCard {
    /// Kind of mistake.
    pub mistake_type: String,
    /// Task it was seen in.
    pub task_id: String,
    /// Times seen.
    pub seen_count: u64,
}

/// Stats on the memory (the seed's `memory_summary`, plus episode counts per task).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Episodes recorded.
    pub total_episodes: u64,
    /// Number of global rules.
    pub global_rules: usize,
    /// Number of rules per task.
    pub task_rules: BTreeMap<String, usize>,
    /// Distinct mistakes stored.
    pub mistakes_stored: usize,
    /// Mistake cards stored.
    pub mistake_cards_stored: usize,
    /// The 5 most-seen cards.
    pub top_mistake_cards: Vec<TopCard>,
    /// Mean score per task, rounded to 3 decimals like Python's `round(x, 3)`; tasks without scores omitted.
    pub scores_by_task: BTreeMap<String, f64>,
    /// Episodes per task, from the (never trimmed) score history; tasks without scores omitted.
    pub episodes_by_task: BTreeMap<String, usize>,
}

/// Stats on the memory.
pub fn summary(mem: &AgentMemory) -> Summary {
    let scored = || mem.score_history.iter().filter(|(_, v)| !v.is_empty());
    Summary {
        total_episodes: mem.total_episodes,
        global_rules: mem.global_rules.len(),
        task_rules: mem.task_rules.iter().map(|(k, v)| (k.clone(), v.len())).collect(),
        mistakes_stored: mem.mistakes.len(),
        mistake_cards_stored: mem.mistake_cards.len(),
        top_mistake_cards: top_cards(&mem.mistake_cards, 5)
            .into_iter()
            .map(|c| TopCard { mistake_type: c.mistake_type.clone(), task_id: c.task_id.clone(), seen_count: c.seen_count })
            .collect(),
        scores_by_task: scored().map(|(k, v)| (k.clone(), round3(mean(v)))).collect(),
        episodes_by_task: scored().map(|(k, v)| (k.clone(), v.len())).collect(),
    }
}

/// Python's `round(x, 3)`: the exact binary value rounded half to even at 3 decimals, then the nearest
/// double. Rust's `{:.3}` does the first step exactly and `parse` the second.
fn round3(x: f64) -> f64 {
    if !x.is_finite() {
        return x;
    }
    format!("{x:.3}").parse().unwrap_or(x)
}
