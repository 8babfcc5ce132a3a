//! The seed's memory document as typed Rust, with a validating `import` and a stable `export`.
//!
//! Why it exists: the seed keeps an untyped dict and trusts whatever `json.load` returns, so a corrupt
//! file is silently replaced by an empty memory and a wrong type crashes much later. Here every field
//! is checked once, at import, and an error names the field's JSON path.
//!
//! Decisions:
//! - Maps (`task_rules`, `score_history`) are `BTreeMap`: exports are sorted by task id, so the same
//!   memory always exports to the same bytes whatever order tasks first appeared in. Nothing in the
//!   seed's output depends on that order except `memory_summary`'s key order.
//! - Missing keys, and keys whose value is `null`, take their defaults; unknown keys are dropped.
//! - A string `last_consolidated_at` (an old ISO timestamp) becomes `None`, which the due check counts
//!   as 0, exactly as the seed does.
//! - `worker_id`, `correct_decision` and `bad_decision`: `null`, `0`, `false` and `""` all mean "none"
//!   (the seed's dedup key uses `x or ""`); other numbers become their decimal text (`3` and `3.0` give `"3"`).
//! - A card missing `seen_count` reads as 1 (it was seen at least once); the seed sorts it as 0. A card
//!   missing `mistake_type` reads as `unknown_mistake` (the seed's context would label it `mistake`).
//! - The string `"0"` is a real worker id (it is truthy in Python); only the number 0 means none.
//! - Older documents without `mistake_cards` (still `version: 1`) are accepted.
//! - The episode log is not trimmed at import; `record_episode` trims it.
//! - Every string passes the text rule ([`crate::text::charset`]): control and bidi characters are
//!   refused, text is stored NFC and trimmed, task ids are at most 256 characters and other texts 4,000;
//!   a repeated JSON key is refused. Errors name the field under the request's `data`.
//! - JSON cannot hold NaN or infinities; `record_episode` never stores them. If a caller writes one into
//!   a public field, `export` writes `null` there and `import` then rejects it.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

use super::record::{MAX_ID_CHARS, MAX_TEXT_CHARS};
use super::{admitted, AgentError};

/// One finished episode as the seed logs it.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct EpisodeLogEntry {
    /// When it was recorded, as given by the caller (the seed writes a UTC ISO timestamp).
    pub timestamp: String,
    /// Task attempted.
    pub task_id: String,
    /// Final score, nominally 0–1.
    pub score: f64,
    /// Steps taken.
    pub steps: u64,
    /// The trajectory summary.
    pub summary: String,
}

/// A structured mistake with seen-count tracking.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct MistakeCard {
    /// Kind of mistake (`"unknown_mistake"` by default).
    pub mistake_type: String,
    /// Task the mistake was made in.
    pub task_id: String,
    /// Worker involved, if any.
    pub worker_id: Option<String>,
    /// The decision that was wrong, if given.
    pub bad_decision: Option<String>,
    /// The decision that would have been right, if given.
    pub correct_decision: Option<String>,
    /// Evidence, at most 300 characters.
    pub evidence: String,
    /// Lesson, at most 300 characters.
    pub lesson: String,
    /// How many episodes reported this card.
    pub seen_count: u64,
    /// Episode index (`total_episodes` after the increment) when first seen.
    pub first_seen_episode: u64,
    /// Episode index when last seen.
    pub last_seen_episode: u64,
}

impl MistakeCard {
    /// The seed's dedup key: `(type, task, worker or "", correct decision or "")`.
    pub fn key(&self) -> (&str, &str, &str, &str) {
        (&self.mistake_type, &self.task_id, self.worker_id.as_deref().unwrap_or(""), self.correct_decision.as_deref().unwrap_or(""))
    }

    /// The seed's ranking key, sorted descending: `(seen_count, last_seen_episode)`.
    pub fn rank(&self) -> (u64, u64) {
        (self.seen_count, self.last_seen_episode)
    }
}

/// The whole memory document (the seed's `agent_memory.json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentMemory {
    /// Format version; the seed writes 1.
    pub version: u64,
    /// Episodes recorded so far.
    pub total_episodes: u64,
    /// `total_episodes` at the last consolidation.
    pub last_consolidated_at: Option<u64>,
    /// Rules for every task (filled by consolidation).
    pub global_rules: Vec<String>,
    /// Per-task rules (`[WORKS] …`, `[AVOID] …`), the last 10 per task.
    pub task_rules: BTreeMap<String, Vec<String>>,
    /// Recent episodes, the last 100.
    pub episode_log: Vec<EpisodeLogEntry>,
    /// Every score per task, never trimmed.
    pub score_history: BTreeMap<String, Vec<f64>>,
    /// Distinct mistakes, never trimmed.
    pub mistakes: Vec<String>,
    /// Structured mistakes, the top 30 after each new card.
    pub mistake_cards: Vec<MistakeCard>,
    /// Distinct successes, never trimmed.
    pub successes: Vec<String>,
}

impl Default for AgentMemory {
    fn default() -> Self {
        Self::new()
    }
}

impl AgentMemory {
    /// The seed's empty document.
    pub fn new() -> Self {
        AgentMemory {
            version: 1,
            total_episodes: 0,
            last_consolidated_at: None,
            global_rules: Vec::new(),
            task_rules: BTreeMap::new(),
            episode_log: Vec::new(),
            score_history: BTreeMap::new(),
            mistakes: Vec::new(),
            mistake_cards: Vec::new(),
            successes: Vec::new(),
        }
    }

    /// Reads a document in the seed's format. See the module doc for defaults and leniencies. Errors
    /// name the field under the request's `data` (`data.episode_log[3].score`); strict JSON (a repeated
    /// key is refused); every string passes the text rule ([`crate::text::charset`]) and is stored in the
    /// form it leaves (NFC, trimmed).
    pub fn import(json: &str) -> Result<AgentMemory, AgentError> {
        Self::import_fields(json).map_err(|e| match e {
            AgentError::Invalid { field, message } if field.is_empty() => AgentError::invalid("data", message),
            AgentError::Invalid { field, message } => AgentError::invalid(format!("data.{field}"), message),
        })
    }

    fn import_fields(json: &str) -> Result<AgentMemory, AgentError> {
        let value: Value = crate::util::json::strict_value(json).map_err(|e| AgentError::invalid("", e.to_string()))?;
        let obj = as_object(&value, "")?;
        let mut mem = AgentMemory::new();
        if let Some(v) = field(obj, "version") {
            mem.version = to_u64(v, "version")?;
        }
        if let Some(v) = field(obj, "total_episodes") {
            mem.total_episodes = to_u64(v, "total_episodes")?;
        }
        if let Some(v) = field(obj, "last_consolidated_at") {
            mem.last_consolidated_at = if v.is_string() { None } else { Some(to_u64(v, "last_consolidated_at")?) };
        }
        if let Some(v) = field(obj, "global_rules") {
            mem.global_rules = to_strings(v, "global_rules")?;
        }
        if let Some(v) = field(obj, "task_rules") {
            for (task, rules) in as_object(v, "task_rules")? {
                let path = key_path("task_rules", task);
                mem.task_rules.insert(admitted(&path, task, MAX_ID_CHARS)?, to_strings(rules, &path)?);
            }
        }
        if let Some(v) = field(obj, "episode_log") {
            let items = as_array(v, "episode_log")?;
            mem.episode_log =
                items.iter().enumerate().map(|(i, e)| log_entry(e, &format!("episode_log[{i}]"))).collect::<Result<_, _>>()?;
        }
        if let Some(v) = field(obj, "score_history") {
            for (task, scores) in as_object(v, "score_history")? {
                let path = key_path("score_history", task);
                let items = as_array(scores, &path)?;
                let parsed = items.iter().enumerate().map(|(i, s)| to_f64(s, &format!("{path}[{i}]"))).collect::<Result<_, _>>()?;
                mem.score_history.insert(admitted(&path, task, MAX_ID_CHARS)?, parsed);
            }
        }
        if let Some(v) = field(obj, "mistakes") {
            mem.mistakes = to_strings(v, "mistakes")?;
        }
        if let Some(v) = field(obj, "mistake_cards") {
            let items = as_array(v, "mistake_cards")?;
            mem.mistake_cards = items.iter().enumerate().map(|(i, c)| card(c, &format!("mistake_cards[{i}]"))).collect::<Result<_, _>>()?;
        }
        if let Some(v) = field(obj, "successes") {
            mem.successes = to_strings(v, "successes")?;
        }
        Ok(mem)
    }

    /// Pretty JSON (2-space indent) with the seed's keys in the seed's order; `import` reads it back equal.
    pub fn export(&self) -> String {
        // Serialising plain structs with string keys cannot fail; fields go out in declaration order
        // (the seed's key order), and a non-finite float as `null`.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

fn log_entry(v: &Value, path: &str) -> Result<EpisodeLogEntry, AgentError> {
    let o = as_object(v, path)?;
    let mut e = EpisodeLogEntry::default();
    if let Some(x) = field(o, "timestamp") {
        e.timestamp = to_string(x, &format!("{path}.timestamp"))?;
    }
    if let Some(x) = field(o, "task_id") {
        e.task_id = to_string(x, &format!("{path}.task_id"))?;
    }
    if let Some(x) = field(o, "score") {
        e.score = to_f64(x, &format!("{path}.score"))?;
    }
    if let Some(x) = field(o, "steps") {
        e.steps = to_u64(x, &format!("{path}.steps"))?;
    }
    if let Some(x) = field(o, "summary") {
        e.summary = to_string(x, &format!("{path}.summary"))?;
    }
    Ok(e)
}

fn card(v: &Value, path: &str) -> Result<MistakeCard, AgentError> {
    let o = as_object(v, path)?;
    let text = |key: &str, default: &str| -> Result<String, AgentError> {
        field(o, key).map_or(Ok(default.to_string()), |x| to_string(x, &format!("{path}.{key}")))
    };
    let opt =
        |key: &str| -> Result<Option<String>, AgentError> { field(o, key).map_or(Ok(None), |x| to_opt_id(x, &format!("{path}.{key}"))) };
    let count =
        |key: &str, default: u64| -> Result<u64, AgentError> { field(o, key).map_or(Ok(default), |x| to_u64(x, &format!("{path}.{key}"))) };
    Ok(MistakeCard {
        mistake_type: text("mistake_type", "unknown_mistake")?,
        task_id: text("task_id", "")?,
        worker_id: opt("worker_id")?,
        bad_decision: opt("bad_decision")?,
        correct_decision: opt("correct_decision")?,
        evidence: text("evidence", "")?,
        lesson: text("lesson", "")?,
        seen_count: count("seen_count", 1)?,
        first_seen_episode: count("first_seen_episode", 0)?,
        last_seen_episode: count("last_seen_episode", 0)?,
    })
}

/// A present, non-null field.
fn field<'a>(o: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    o.get(key).filter(|v| !v.is_null())
}

fn key_path(map: &str, key: &str) -> String {
    format!("{map}.{}", crate::util::excerpt::name(key))
}

fn bad(path: &str, expected: &str, v: &Value) -> AgentError {
    let shown = match v.as_str() {
        Some(s) => crate::util::excerpt::quoted(s),
        None => crate::util::excerpt::quoted(&v.to_string()),
    };
    AgentError::invalid(path, format!("expected {expected}, got {shown}"))
}

fn as_object<'a>(v: &'a Value, path: &str) -> Result<&'a Map<String, Value>, AgentError> {
    v.as_object().ok_or_else(|| bad(path, "an object", v))
}

fn as_array<'a>(v: &'a Value, path: &str) -> Result<&'a Vec<Value>, AgentError> {
    v.as_array().ok_or_else(|| bad(path, "an array", v))
}

fn to_string(v: &Value, path: &str) -> Result<String, AgentError> {
    let s = v.as_str().ok_or_else(|| bad(path, "a string", v))?;
    admitted(path, s, MAX_TEXT_CHARS)
}

fn to_strings(v: &Value, path: &str) -> Result<Vec<String>, AgentError> {
    as_array(v, path)?.iter().enumerate().map(|(i, s)| to_string(s, &format!("{path}[{i}]"))).collect()
}

fn to_u64(v: &Value, path: &str) -> Result<u64, AgentError> {
    v.as_u64().ok_or_else(|| bad(path, "a non-negative integer", v))
}

fn to_f64(v: &Value, path: &str) -> Result<f64, AgentError> {
    v.as_f64().filter(|x| x.is_finite()).ok_or_else(|| bad(path, "a number", v))
}

/// `null`, `0`, `false` and `""` mean "none"; other numbers become their decimal text.
fn to_opt_id(v: &Value, path: &str) -> Result<Option<String>, AgentError> {
    match v {
        Value::Null | Value::Bool(false) => Ok(None),
        Value::String(s) => {
            let t = admitted(path, s, MAX_TEXT_CHARS)?;
            Ok((!t.is_empty()).then_some(t))
        }
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                return Ok((i != 0).then(|| i.to_string()));
            }
            if let Some(u) = n.as_u64() {
                return Ok(Some(u.to_string()));
            }
            match n.as_f64() {
                Some(0.0) => Ok(None),
                Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Ok(Some(format!("{f:.0}"))),
                _ => Ok(Some(n.to_string())),
            }
        }
        Value::Bool(true) | Value::Array(_) | Value::Object(_) => Err(bad(path, "a string, a number or null", v)),
    }
}
