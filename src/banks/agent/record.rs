//! Recording a finished episode into the memory, following the agent-memory design's `record_episode`.
//!
//! Why it exists: this is the only writer of per-episode knowledge (scores, log, mistakes, successes,
//! mistake cards, `[WORKS]`/`[AVOID]` rules), so it is where bad input must be stopped.
//!
//! Seed behaviour kept: task id "unknown" and score 0.0 by default; score history appended and never
//! trimmed; `total_episodes += 1`; mistakes and successes deduplicated by exact string; cards keyed by
//! `(type, task, worker or "", correct decision or "")`, a match bumps `seen_count`, sets
//! `last_seen_episode`, replaces the evidence when the new one is non-empty and ALWAYS replaces the lesson
//! (by the default text when the new card has none, as the seed does); a new card triggers the stable
//! sort by `(seen_count, last_seen_episode)` descending and the cap of 30; rules at `score >= 0.85`
//! and `< 0.50`, deduplicated, the last 10 per task; `task_rules[task]` is always created.
//!
//! Deliberate fixes:
//! - everything is validated before anything changes, so an error leaves the memory untouched;
//! - every text passes the text rule ([`crate::text::charset`]): control characters other than `\n` and
//!   `\t`, bidi overrides/isolates and U+2028/U+2029 are refused naming the field; texts are stored
//!   NFC and trimmed (so a whitespace-only item is blank). Line breaks are kept and escaped where the
//!   context shows the field ([`super::context`]);
//! - a non-finite score is an error on `score`;
//! - blank (empty or whitespace-only) mistakes and successes are skipped for lists AND rules;
//! - the log is trimmed to the last 100 entries at every record, not only at save;
//! - the distinct mistakes and successes keep the last 1,000 each (the seed's grow without bound, and
//!   every record rewrites the whole document);
//! - limits: `task_id` (also a card's) and `now` at most 256 chars, any other text at most 4,000 chars,
//!   at most 100 mistakes, successes and cards per call; `total_episodes` overflow is an error;
//! - an empty `task_id` counts as missing ("unknown"), like a card's empty task id in the seed.

use super::doc::{EpisodeLogEntry, MistakeCard};
use super::{
    admitted, cut_chars, AgentError, AgentMemory, CARD_TEXT_CHARS, HIGH_SCORE, LOW_SCORE, MAX_EPISODES_STORED, MAX_LESSONS_STORED,
    MAX_MISTAKE_CARDS, MAX_RULES_PER_TASK,
};

/// Longest accepted task id (and `now` timestamp), in characters.
pub const MAX_ID_CHARS: usize = 256;
/// Longest accepted free text, in characters.
pub const MAX_TEXT_CHARS: usize = 4_000;
/// Most mistakes, successes or cards accepted in one call.
pub const MAX_ITEMS_PER_CALL: usize = 100;
/// Lesson written when a card has none.
pub const DEFAULT_LESSON: &str = "Avoid repeating this failure.";
/// Type written when a card has none.
pub const DEFAULT_MISTAKE_TYPE: &str = "unknown_mistake";

/// A structured mistake as reported by the episode. Empty strings count as missing.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CardInput {
    /// Kind of mistake; default `"unknown_mistake"`.
    pub mistake_type: Option<String>,
    /// Task; default the episode's task.
    pub task_id: Option<String>,
    /// Worker involved.
    pub worker_id: Option<String>,
    /// The wrong decision.
    pub bad_decision: Option<String>,
    /// The right decision.
    pub correct_decision: Option<String>,
    /// Evidence; cut to 300 characters.
    pub evidence: Option<String>,
    /// Lesson; default "Avoid repeating this failure.", cut to 300 characters.
    pub lesson: Option<String>,
}

/// A finished episode (the seed's `episode_data`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Episode {
    /// Task attempted; default "unknown".
    pub task_id: Option<String>,
    /// Final score; default 0.0; must be finite.
    pub score: Option<f64>,
    /// Steps taken; default 0.
    pub steps: Option<u64>,
    /// One or two sentences on what happened; default "".
    pub trajectory_summary: Option<String>,
    /// Things that went wrong.
    pub mistakes: Vec<String>,
    /// Things that worked.
    pub successes: Vec<String>,
    /// Structured mistakes.
    pub mistake_cards: Vec<CardInput>,
}

/// What happened to one input card.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CardOutcome {
    /// A new card; `kept` is false when the cap of 30 dropped it at once.
    New {
        /// Whether it survived the cap.
        kept: bool,
    },
    /// It matched a stored card, whose seen count is now `seen_count`.
    Matched {
        /// The stored card's new seen count.
        seen_count: u64,
    },
}

/// What `record_episode` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordOutcome {
    /// Episodes recorded so far, this one included.
    pub total_episodes: u64,
    /// The task id used (after defaulting).
    pub task_id: String,
    /// Rules appended to `task_rules[task]` that survived the cap of 10, in order.
    pub rules_added: Vec<String>,
    /// One entry per input card, in input order.
    pub cards: Vec<CardOutcome>,
}

/// A card after defaulting and cutting, ready to merge.
struct NormalizedCard {
    mistake_type: String,
    task_id: String,
    worker_id: Option<String>,
    bad_decision: Option<String>,
    correct_decision: Option<String>,
    evidence: String,
    lesson: String,
}

/// `ep` with every text in its stored form (the text rule), or the first field refused.
fn admit(ep: &Episode) -> Result<Episode, AgentError> {
    let opt = |field: &str, v: &Option<String>, max: usize| v.as_deref().map(|s| admitted(field, s, max)).transpose();
    let list = |field: &str, items: &[String]| -> Result<Vec<String>, AgentError> {
        if items.len() > MAX_ITEMS_PER_CALL {
            return Err(too_many(field, items.len()));
        }
        items.iter().enumerate().map(|(i, s)| admitted(&format!("{field}[{i}]"), s, MAX_TEXT_CHARS)).collect()
    };
    if ep.mistake_cards.len() > MAX_ITEMS_PER_CALL {
        return Err(too_many("mistake_cards", ep.mistake_cards.len()));
    }
    let cards = ep
        .mistake_cards
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let at = |f: &str| format!("mistake_cards[{i}].{f}");
            Ok(CardInput {
                mistake_type: opt(&at("mistake_type"), &c.mistake_type, MAX_TEXT_CHARS)?,
                task_id: opt(&at("task_id"), &c.task_id, MAX_ID_CHARS)?,
                worker_id: opt(&at("worker_id"), &c.worker_id, MAX_TEXT_CHARS)?,
                bad_decision: opt(&at("bad_decision"), &c.bad_decision, MAX_TEXT_CHARS)?,
                correct_decision: opt(&at("correct_decision"), &c.correct_decision, MAX_TEXT_CHARS)?,
                evidence: opt(&at("evidence"), &c.evidence, MAX_TEXT_CHARS)?,
                lesson: opt(&at("lesson"), &c.lesson, MAX_TEXT_CHARS)?,
            })
        })
        .collect::<Result<Vec<_>, AgentError>>()?;
    Ok(Episode {
        task_id: opt("task_id", &ep.task_id, MAX_ID_CHARS)?,
        score: ep.score,
        steps: ep.steps,
        trajectory_summary: opt("trajectory_summary", &ep.trajectory_summary, MAX_TEXT_CHARS)?,
        mistakes: list("mistakes", &ep.mistakes)?,
        successes: list("successes", &ep.successes)?,
        mistake_cards: cards,
    })
}

/// Records `ep` at time `now`. Validates everything first: on `Err` the memory is unchanged.
pub fn record_episode(mem: &mut AgentMemory, ep: &Episode, now: &str) -> Result<RecordOutcome, AgentError> {
    // ---- validate ----
    check_len("now", now, MAX_ID_CHARS)?;
    let ep = &admit(ep)?;
    let task_id = non_empty(&ep.task_id).unwrap_or("unknown").to_string();
    check_len("task_id", &task_id, MAX_ID_CHARS)?;
    let score = ep.score.unwrap_or(0.0);
    if !score.is_finite() {
        return Err(AgentError::invalid("score", format!("must be a finite number, got {score}")));
    }
    let summary = ep.trajectory_summary.clone().unwrap_or_default();
    check_len("trajectory_summary", &summary, MAX_TEXT_CHARS)?;
    check_list("mistakes", &ep.mistakes)?;
    check_list("successes", &ep.successes)?;
    if ep.mistake_cards.len() > MAX_ITEMS_PER_CALL {
        return Err(too_many("mistake_cards", ep.mistake_cards.len()));
    }
    let cards = ep.mistake_cards.iter().enumerate().map(|(i, c)| normalize_card(c, i, &task_id)).collect::<Result<Vec<_>, _>>()?;
    let total = mem.total_episodes.checked_add(1).ok_or_else(|| AgentError::invalid("total_episodes", "counter overflow"))?;

    // ---- mutate (nothing below can fail) ----
    mem.score_history.entry(task_id.clone()).or_default().push(score);
    mem.episode_log.push(EpisodeLogEntry {
        timestamp: now.to_string(),
        task_id: task_id.clone(),
        score,
        steps: ep.steps.unwrap_or(0),
        summary,
    });
    let excess = mem.episode_log.len().saturating_sub(MAX_EPISODES_STORED);
    mem.episode_log.drain(..excess);
    mem.total_episodes = total;

    for m in ep.mistakes.iter().filter(|s| !is_blank(s)) {
        if !mem.mistakes.contains(m) {
            mem.mistakes.push(m.clone());
        }
    }
    for s in ep.successes.iter().filter(|s| !is_blank(s)) {
        if !mem.successes.contains(s) {
            mem.successes.push(s.clone());
        }
    }
    for list in [&mut mem.mistakes, &mut mem.successes] {
        let excess = list.len().saturating_sub(MAX_LESSONS_STORED);
        list.drain(..excess);
    }
    let card_outcomes = cards.into_iter().map(|c| merge_card(&mut mem.mistake_cards, c, total)).collect();
    let rules_added = update_rules(mem, &task_id, score, ep);

    Ok(RecordOutcome { total_episodes: total, task_id, rules_added, cards: card_outcomes })
}

fn is_blank(s: &str) -> bool {
    s.trim().is_empty()
}

fn non_empty(s: &Option<String>) -> Option<&str> {
    s.as_deref().filter(|s| !s.is_empty())
}

fn too_many(field: &str, n: usize) -> AgentError {
    AgentError::invalid(field, format!("at most {MAX_ITEMS_PER_CALL} items per episode, got {n}"))
}

fn check_len(field: &str, text: &str, max: usize) -> Result<(), AgentError> {
    // Counting stops one past the limit, so a huge string costs no more than a short one.
    let n = text.chars().take(max + 1).count();
    if n > max {
        return Err(AgentError::invalid(field, format!("longer than {max} characters")));
    }
    Ok(())
}

fn check_list(field: &str, items: &[String]) -> Result<(), AgentError> {
    if items.len() > MAX_ITEMS_PER_CALL {
        return Err(too_many(field, items.len()));
    }
    items.iter().enumerate().try_for_each(|(i, s)| check_len(&format!("{field}[{i}]"), s, MAX_TEXT_CHARS))
}

fn normalize_card(c: &CardInput, i: usize, episode_task: &str) -> Result<NormalizedCard, AgentError> {
    let path = |name: &str| format!("mistake_cards[{i}].{name}");
    let text = |name: &str, v: &Option<String>, max: usize| -> Result<Option<String>, AgentError> {
        let v = non_empty(v);
        if let Some(s) = v {
            check_len(&path(name), s, max)?;
        }
        Ok(v.map(str::to_string))
    };
    let mistake_type = text("mistake_type", &c.mistake_type, MAX_TEXT_CHARS)?;
    let task_id = text("task_id", &c.task_id, MAX_ID_CHARS)?;
    let worker_id = text("worker_id", &c.worker_id, MAX_TEXT_CHARS)?;
    let bad_decision = text("bad_decision", &c.bad_decision, MAX_TEXT_CHARS)?;
    let correct_decision = text("correct_decision", &c.correct_decision, MAX_TEXT_CHARS)?;
    let evidence = text("evidence", &c.evidence, MAX_TEXT_CHARS)?;
    let lesson = text("lesson", &c.lesson, MAX_TEXT_CHARS)?;
    Ok(NormalizedCard {
        mistake_type: mistake_type.unwrap_or_else(|| DEFAULT_MISTAKE_TYPE.to_string()),
        task_id: task_id.unwrap_or_else(|| episode_task.to_string()),
        worker_id,
        bad_decision,
        correct_decision,
        evidence: evidence.as_deref().map_or("", |s| cut_chars(s, CARD_TEXT_CHARS)).to_string(),
        lesson: cut_chars(lesson.as_deref().unwrap_or(DEFAULT_LESSON), CARD_TEXT_CHARS).to_string(),
    })
}

fn merge_card(cards: &mut Vec<MistakeCard>, n: NormalizedCard, episode_index: u64) -> CardOutcome {
    let key =
        (n.mistake_type.as_str(), n.task_id.as_str(), n.worker_id.as_deref().unwrap_or(""), n.correct_decision.as_deref().unwrap_or(""));
    if let Some(existing) = cards.iter_mut().find(|c| c.key() == key) {
        existing.seen_count = existing.seen_count.saturating_add(1);
        existing.last_seen_episode = episode_index;
        if !n.evidence.is_empty() {
            existing.evidence = n.evidence;
        }
        existing.lesson = n.lesson;
        return CardOutcome::Matched { seen_count: existing.seen_count };
    }
    cards.push(MistakeCard {
        mistake_type: n.mistake_type,
        task_id: n.task_id,
        worker_id: n.worker_id,
        bad_decision: n.bad_decision,
        correct_decision: n.correct_decision,
        evidence: n.evidence,
        lesson: n.lesson,
        seen_count: 1,
        first_seen_episode: episode_index,
        last_seen_episode: episode_index,
    });
    // The new card's key is unique (no stored card matched it), so it can be found again after the sort.
    let added = cards.last().map(|c| (c.mistake_type.clone(), c.task_id.clone(), c.worker_id.clone(), c.correct_decision.clone()));
    // Stable, like Python's `sort(reverse=True)`: equal ranks keep their order.
    cards.sort_by_key(|c| std::cmp::Reverse(c.rank()));
    cards.truncate(MAX_MISTAKE_CARDS);
    let kept = added.is_some_and(|(t, k, w, d)| {
        cards.iter().any(|c| c.mistake_type == t && c.task_id == k && c.worker_id == w && c.correct_decision == d)
    });
    CardOutcome::New { kept }
}

/// Appends the episode's `[WORKS]`/`[AVOID]` rules and keeps the last 10; returns the appended rules
/// that survived the cap.
fn update_rules(mem: &mut AgentMemory, task_id: &str, score: f64, ep: &Episode) -> Vec<String> {
    let rules = mem.task_rules.entry(task_id.to_string()).or_default();
    let mut appended = Vec::new();
    let mut add = |rule: String| {
        if !rules.contains(&rule) {
            rules.push(rule.clone());
            appended.push(rule);
        }
    };
    if score >= HIGH_SCORE {
        ep.successes.iter().filter(|s| !is_blank(s)).for_each(|s| add(format!("[WORKS] {s}")));
    }
    if score < LOW_SCORE {
        ep.mistakes.iter().filter(|s| !is_blank(s)).for_each(|m| add(format!("[AVOID] {m}")));
    }
    let excess = rules.len().saturating_sub(MAX_RULES_PER_TASK);
    rules.drain(..excess);
    appended.retain(|r| rules.contains(r));
    appended
}
