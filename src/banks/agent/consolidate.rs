//! Consolidation: distilling the episode log into a short list of global rules every 20 episodes.
//!
//! Why it exists: per-task rules only grow from single episodes; consolidation looks across episodes.
//! The seed does the whole thing inside one function with an HTTP call; here the pure steps are split so
//! the caller owns the LLM call, the fallback and persistence:
//!
//! ```text
//! if due(&mem) {
//!     match parse_llm_rules(&ask_llm(&llm_prompt(&mem))) {
//!         Ok(rules) => apply_rules(&mut mem, rules, true),
//!         Err(_) => apply_rules(&mut mem, heuristic(&mem), false), // the seed's fallback
//!     }
//!     mark_consolidated(&mut mem);
//! }
//! ```
//!
//! Decisions where the seed is ambiguous or buggy:
//! - Rules go to `global_rules` only (never `task_rules`), as in the seed.
//! - The cap: existing rules then new ones, duplicates dropped keeping the FIRST occurrence (a repeated
//!   rule keeps its old position), then the last 20 kept. So the oldest rules leave first, and a rule that
//!   is generated again does not move to the end. Same as the seed's `dict.fromkeys(...)[-20:]`.
//! - The heuristic re-reads the whole log each time, so rules trimmed earlier can come back: kept.
//!   Whitespace-only summaries are skipped (the seed only skips empty ones).
//! - A reply with no usable array is an `Err`, not the seed's silent no-op; strings are trimmed, blank
//!   strings and non-strings (numbers, nested arrays, objects) are skipped where the seed would have
//!   written `[CONSOLIDATED] 5`. An array with no usable string is an `Err` too.
//! - `due` counts a missing `last_consolidated_at` as 0, and is false if it exceeds `total_episodes`.
//! - The prompt carries whole summaries, like the seed's (record limits them to 4,000 characters).

use serde_json::Value;

use crate::text::charset::{self, inline};

use super::{cut_chars, fmt2, python_tail, AgentMemory, CONSOLIDATION_EVERY, HIGH_SCORE, MAX_GLOBAL_RULES};

/// Episodes shown to the LLM.
pub const PROMPT_EPISODES: usize = 30;
/// Characters of a summary kept in a heuristic rule.
pub const HEURISTIC_SUMMARY_CHARS: usize = 120;
/// Prefix of LLM rules.
pub const CONSOLIDATED_PREFIX: &str = "[CONSOLIDATED] ";

/// Whether at least 20 episodes were recorded since the last consolidation.
pub fn due(mem: &AgentMemory) -> bool {
    let last = mem.last_consolidated_at.unwrap_or(0);
    mem.total_episodes.checked_sub(last).is_some_and(|n| n >= CONSOLIDATION_EVERY)
}

/// The seed's fallback rules: `[HIGH SCORE x.xx] summary[:120]` for every logged episode with a score of
/// at least 0.85 and a non-blank summary, in log order, without duplicates.
pub fn heuristic(mem: &AgentMemory) -> Vec<String> {
    let mut rules: Vec<String> = Vec::new();
    for e in mem.episode_log.iter().filter(|e| e.score >= HIGH_SCORE && !e.summary.trim().is_empty()) {
        let rule = format!("[HIGH SCORE {}] {}", fmt2(e.score), cut_chars(&e.summary, HEURISTIC_SUMMARY_CHARS));
        if !rules.contains(&rule) {
            rules.push(rule);
        }
    }
    rules
}

/// The request sent to the LLM: the last 30 logged episodes and the demand for 5 rules as a JSON array.
pub fn llm_prompt(mem: &AgentMemory) -> String {
    let episodes: Vec<String> = python_tail(&mem.episode_log, PROMPT_EPISODES)
        .iter()
        .map(|e| format!("task={} score={}: {}", inline(&e.task_id), fmt2(e.score), inline(&e.summary)))
        .collect();
    format!(
        "You are reviewing how an AI agent performed over several training episodes.\n\n\
         Outcomes of the most recent episodes:\n{}\n\n\
         Write exactly 5 short, actionable rules the agent should follow in future episodes.\n\
         Each rule must be a single sentence. Cover both what worked and what to avoid.\n\
         Answer with ONLY a JSON array of 5 strings, for example:\n\
         [\"First rule.\", \"Second rule.\", \"Third rule.\", \"Fourth rule.\", \"Fifth rule.\"]\n",
        episodes.join("\n")
    )
}

/// Extracts the rules from an LLM reply: the text from the first `[` to the last `]` must be a JSON
/// array; its strings are trimmed and kept when non-empty, other items are skipped.
pub fn parse_llm_rules(reply: &str) -> Result<Vec<String>, String> {
    let start = reply.find('[').ok_or("no '[' in reply")?;
    let end = reply.rfind(']').ok_or("no ']' in reply")?;
    if end < start {
        return Err("the last ']' comes before the first '['".to_string());
    }
    let slice = reply.get(start..=end).ok_or("bad array bounds")?;
    let value: Value = serde_json::from_str(slice).map_err(|e| format!("not a JSON array: {e}"))?;
    let items = value.as_array().ok_or("not a JSON array")?;
    // The LLM's text is the server's own, not a client's: characters the text rule refuses are stripped.
    let rules: Vec<String> =
        items.iter().filter_map(Value::as_str).map(|s| charset::strip(s).trim().to_string()).filter(|s| !s.is_empty()).collect();
    if rules.is_empty() {
        return Err(format!("no non-empty string among {} array items", items.len()));
    }
    Ok(rules)
}

/// Merges `rules` into `global_rules` like the seed: optional `[CONSOLIDATED] ` prefix, duplicates
/// dropped keeping the first occurrence, the last 20 kept. Blank rules are ignored.
pub fn apply_rules(mem: &mut AgentMemory, rules: Vec<String>, prefix_consolidated: bool) {
    let incoming =
        rules
            .into_iter()
            .filter(|r| !r.trim().is_empty())
            .map(|r| if prefix_consolidated { format!("{CONSOLIDATED_PREFIX}{r}") } else { r });
    let mut merged: Vec<String> = Vec::with_capacity(mem.global_rules.len());
    for rule in std::mem::take(&mut mem.global_rules).into_iter().chain(incoming) {
        if !merged.contains(&rule) {
            merged.push(rule);
        }
    }
    let excess = merged.len().saturating_sub(MAX_GLOBAL_RULES);
    merged.drain(..excess);
    mem.global_rules = merged;
}

/// Records that a consolidation happened now: `last_consolidated_at = total_episodes`.
pub fn mark_consolidated(mem: &mut AgentMemory) {
    mem.last_consolidated_at = Some(mem.total_episodes);
}
