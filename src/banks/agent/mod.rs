//! Cross-episode agent memory (the agent-memory design), ported by behaviour to pure Rust.
//!
//! Why this module exists: an RL agent gains from seeing, at the start of each episode, what worked
//! and what failed in earlier episodes. This bank keeps that knowledge as one JSON document (the seed's
//! format, so existing `agent_memory.json` files stay readable), records finished episodes into it,
//! renders the prompt block the seed injects, and prepares consolidation into global rules.
//!
//! The module does no I/O and reads no clock: callers load and store the exported JSON themselves and
//! pass timestamps as strings. Nothing here panics on any input.
//!
//! Layout:
//! - [`doc`]: the typed document, `import` (validating, path-naming errors) and `export`;
//! - [`record`]: `record_episode`, validate-first then mutate;
//! - [`context`]: the byte-exact prompt block and the stats summary;
//! - [`consolidate`]: due check, heuristic rules, LLM prompt and reply parsing, merging into global rules.

mod bank;
pub mod consolidate;
pub mod context;
pub mod doc;
pub mod record;
#[cfg(test)]
mod tests;

pub use bank::{ConsolidateMode, Consolidation};
pub use context::{build_memory_context, summary, Summary, TopCard, DEFAULT_MAX_RECENT, DEFAULT_MAX_RULES};
pub use doc::{AgentMemory, EpisodeLogEntry, MistakeCard};
pub use record::{record_episode, CardInput, CardOutcome, Episode, RecordOutcome};

/// Episode log entries kept in memory (the seed trims only at save; we trim at every record).
pub const MAX_EPISODES_STORED: usize = 100;
/// Distinct mistakes, and distinct successes, kept (the last ones; the seed keeps every one).
pub const MAX_LESSONS_STORED: usize = 1_000;
/// Rules kept per task (the last ones win).
pub const MAX_RULES_PER_TASK: usize = 10;
/// Global rules kept after a consolidation: the seed's `MAX_RULES_PER_TASK * 2`.
pub const MAX_GLOBAL_RULES: usize = MAX_RULES_PER_TASK * 2;
/// Episodes between two consolidations.
pub const CONSOLIDATION_EVERY: u64 = 20;
/// Mistake cards kept once a new card is added.
pub const MAX_MISTAKE_CARDS: usize = 30;
/// Characters kept of a card's evidence and lesson.
pub const CARD_TEXT_CHARS: usize = 300;
/// Score at or above which an episode's successes become `[WORKS]` rules.
pub const HIGH_SCORE: f64 = 0.85;
/// Score below which an episode's mistakes become `[AVOID]` rules.
pub const LOW_SCORE: f64 = 0.50;

/// Why an import or a record was refused. `field` is a JSON-style path such as `episode_log[3].score`
/// or `mistakes[2]`; `$` names the document itself.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
pub enum AgentError {
    /// An input field is missing, of the wrong type, too long or otherwise unusable.
    #[error("{field}: {message}")]
    Invalid {
        /// Path of the offending field.
        field: String,
        /// What is wrong, quoting at most a short prefix of the bad value ([`crate::util::excerpt::quoted`]).
        message: String,
    },
}

impl AgentError {
    /// Builds an [`AgentError::Invalid`].
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        AgentError::Invalid { field: field.into(), message: message.into() }
    }
}

/// The text rule ([`crate::text::charset`]) on one field of a record or an imported document: refused
/// characters (control characters but `\n` and `\t`, bidi overrides/isolates, U+2028/U+2029), then NFC
/// and trimming, then the cap; a refusal names `field`.
pub(crate) fn admitted(field: &str, s: &str, max: usize) -> Result<String, AgentError> {
    crate::text::charset::admit(s, crate::text::charset::Shape::Text, max).map_err(|why| AgentError::invalid(field, why.to_string()))
}

/// The first `n` characters (Unicode scalar values, like Python's `s[:n]`) of `s`.
pub(crate) fn cut_chars(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((byte, _)) => s.get(..byte).unwrap_or(s),
        None => s,
    }
}

/// Python's `seq[-n:]`: the last `n` items, and every item when `n == 0` (`[-0:]` is the whole list).
pub(crate) fn python_tail<T>(items: &[T], n: usize) -> &[T] {
    if n == 0 {
        return items;
    }
    items.get(items.len().saturating_sub(n)..).unwrap_or(items)
}

/// Python's `f"{x:.2f}"`. Rust's `{:.2}` rounds the exact binary value half to even like Python;
/// only NaN is spelled differently (`NaN` vs `nan`).
pub(crate) fn fmt2(x: f64) -> String {
    if x.is_nan() {
        return "nan".to_string();
    }
    format!("{x:.2}")
}
