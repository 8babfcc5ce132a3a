//! The adversarial suite's goals as checks: what `memgym eval` prints after its table, and what the test
//! command asserts on the full test split. Each is a rule the default reward must meet in every category,
//! not only overall: a trick that pays on one kind of question is a trick a policy will learn there.

use super::*;

/// A trick may be above 0 on at most this share of the questions of any category.
pub const MAX_POSITIVE_SHARE: f64 = 0.05;

/// Wrecking memory that the question does not read must cost on at least this share of the episodes.
pub const MIN_WRECK_NEGATIVE: f64 = 0.95;

/// The agents that wreck memory outside the question's reading, however they move its facts first.
pub const WRECKERS: [Agent; 4] =
    [Agent::Trick(Trick::DeleteOthers), Agent::Trick(Trick::Vandal), Agent::Trick(Trick::MovePadded), Agent::Trick(Trick::MoveSplit)];

/// One (trick, category) cell of the table that breaks the trick goal.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TrickMiss {
    /// The trick.
    pub agent: &'static str,
    /// Its category (`None`: all).
    pub category: Option<u8>,
    /// Its mean reward (first evaluator).
    pub mean: f64,
    /// Its share of episodes above 0.
    pub positive: f64,
    /// Episodes.
    pub episodes: usize,
}

/// Every (trick, category) cell, "all" included, whose mean is above 0 or whose share above 0 exceeds
/// [`MAX_POSITIVE_SHARE`]: the tricks that read no gold and add no information.
pub fn trick_misses(summary: &[SummaryRow]) -> Vec<TrickMiss> {
    let tricks: Vec<&str> = AGENTS.iter().filter(|a| matches!(a, Agent::Trick(_)) && !a.privileged()).map(|a| a.name()).collect();
    summary
        .iter()
        .filter(|r| tricks.contains(&r.agent))
        .map(|r| TrickMiss {
            agent: r.agent,
            category: r.category,
            mean: r.evaluators.first().map_or(0.0, |e| e.mean_reward),
            positive: r.positive,
            episodes: r.episodes,
        })
        .filter(|c| c.mean > 0.0 || c.positive > MAX_POSITIVE_SHARE)
        .collect()
}

/// Per wrecking agent present in `summary`: its share of episodes below 0, and how many.
pub fn wrecking(summary: &[SummaryRow]) -> Vec<(&'static str, f64, usize)> {
    WRECKERS
        .iter()
        .filter_map(|a| summary.iter().find(|r| r.agent == a.name() && r.category.is_none()))
        .map(|r| (r.agent, r.negative, r.episodes))
        .collect()
}

/// Questions where `variant` (the oracle's memory, padded or written over another memory) scored above the
/// oracle alone (first evaluator): (checked, raised).
pub fn above_oracle(rows: &[EpisodeRow], variant: Trick) -> (usize, Vec<String>) {
    let oracle: std::collections::HashMap<&str, f64> =
        rows.iter().filter(|r| r.agent == Agent::Oracle).filter_map(|r| Some((r.question_id.as_str(), r.scores.first()?.reward))).collect();
    let mut checked = 0;
    let mut raised = Vec::new();
    for r in rows.iter().filter(|r| r.agent == Agent::Trick(variant)) {
        let (Some(o), Some(s)) = (oracle.get(r.question_id.as_str()), r.scores.first()) else { continue };
        checked += 1;
        if s.reward > o + SIGN_EPSILON {
            raised.push(r.question_id.clone());
        }
    }
    (checked, raised)
}

/// Questions where the oracle with padding scored above the oracle alone: (checked, raised).
pub fn padding_raises(rows: &[EpisodeRow]) -> (usize, Vec<String>) {
    above_oracle(rows, Trick::OraclePadding)
}

/// A fact fixed where it is kept against the same fact written for the question alone.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct SharedFix {
    /// Questions where the resolver's rewrite raised another question's p.
    pub episodes: usize,
    /// The resolver's mean reward on them (the fact fixed in the memory every reader reads).
    pub in_place: f64,
    /// The resolver-card's (the same dates, as cards for the question asked).
    pub card: f64,
}

/// [`SharedFix`] over the rows (first evaluator): `None` without both agents.
pub fn shared_fix(rows: &[EpisodeRow]) -> Option<SharedFix> {
    let card: std::collections::HashMap<&str, f64> = rows
        .iter()
        .filter(|r| r.agent == Agent::ResolverCard)
        .filter_map(|r| Some((r.question_id.as_str(), r.scores.first()?.reward)))
        .collect();
    let mut out = SharedFix::default();
    for r in rows.iter().filter(|r| r.agent == Agent::Resolver) {
        let (Some(c), Some(s)) = (card.get(r.question_id.as_str()), r.scores.first()) else { continue };
        if s.others_improved > 0 {
            out.episodes += 1;
            out.in_place += s.reward;
            out.card += c;
        }
    }
    if card.is_empty() {
        return None;
    }
    let n = out.episodes.max(1) as f64;
    Some(SharedFix { in_place: out.in_place / n, card: out.card / n, ..out })
}

/// The goals as text, for the end of `memgym eval`'s report.
pub fn goals_text(rows: &[EpisodeRow], summary: &[SummaryRow]) -> String {
    use std::fmt::Write as _;
    let first = rows.first().and_then(|r| r.scores.first()).map_or("-", |s| s.evaluator);
    let mut s = format!("goals under {first}:\n");
    let cells =
        summary.iter().filter(|r| AGENTS.iter().any(|a| a.name() == r.agent && matches!(a, Agent::Trick(_)) && !a.privileged())).count();
    let misses = trick_misses(summary);
    if misses.is_empty() {
        let _ = writeln!(s, "  tricks: mean <= 0 and > 0 on <= 5 % in every category: met ({cells} cells)");
    } else {
        let _ = writeln!(s, "  tricks: mean <= 0 and > 0 on <= 5 % in every category: {} of {cells} cells miss", misses.len());
        for m in &misses {
            let cat = m.category.map_or("all".to_string(), |c| format!("{c} {}", category_name(c).unwrap_or("?")));
            let _ = writeln!(s, "    {:<16} {cat:<13} mean {:+.4}, > 0 on {:.1} % of {}", m.agent, m.mean, 100.0 * m.positive, m.episodes);
        }
    }
    for (agent, negative, n) in wrecking(summary) {
        let met = if negative >= MIN_WRECK_NEGATIVE { "met" } else { "MISSED" };
        let _ =
            writeln!(s, "  wrecking memory the question does not read, < 0 on >= 95 %: {agent} {:.1} % of {n} ({met})", 100.0 * negative);
    }
    for variant in [Trick::OraclePadding, Trick::OracleOverwrite] {
        let (checked, raised) = above_oracle(rows, variant);
        if checked > 0 {
            let shown: Vec<&str> = raised.iter().take(8).map(String::as_str).collect();
            let _ = writeln!(s, "  {} above the oracle: {}/{checked} questions {shown:?}", variant.name(), raised.len());
        }
    }
    if let Some(f) = shared_fix(rows) {
        let _ = writeln!(
            s,
            "  a date fixed in the memory (resolver) against the same date as a card (resolver-card), where the fix raised another \
             question (n = {}): {:+.4} against {:+.4}",
            f.episodes, f.in_place, f.card
        );
    }
    s
}
