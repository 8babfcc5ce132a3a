//! Blind calls: a call that names a memory id no earlier tool result in its rollout showed the policy.
//!
//! A policy can only know an id from what the environment told it (search and sample lead with ids; every
//! edit echoes the ids it touched). An id it names before that was guessed or copied from an example, and
//! since the initial memory of every conversation takes `m0000..`, a guessed id usually exists: an update or
//! delete then lands on an unrelated memory and is carried out. The report counts these calls, names the
//! ids guessed most often and compares the reward of rollouts with a blind edit to the others: a model that
//! copies the prompt's example id is the first thing a real LLM showed (the book's "Rollouts").

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::record::{Outcome, Trajectory};
use super::report::edits;
use crate::memory::MemoryId;

/// How one rollout's calls named ids.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlindCalls {
    /// Calls whose arguments name at least one memory id.
    pub naming: usize,
    /// Of those, calls naming an id no earlier result showed.
    pub blind: usize,
    /// Of those, calls carried out by an editing tool (the guessed memory was changed or removed).
    pub blind_edits_done: usize,
    /// The unseen ids named, as shown (`m0042`), one entry per call and id.
    pub guessed: Vec<String>,
}

/// Reads one rollout's calls in order.
pub fn blind_calls(t: &Trajectory) -> BlindCalls {
    let mut shown: BTreeSet<MemoryId> = BTreeSet::new();
    let mut out = BlindCalls::default();
    for c in t.calls() {
        let named = ids_in_arguments(&c.call.arguments);
        if !named.is_empty() {
            out.naming += 1;
            let unseen: Vec<MemoryId> = named.into_iter().filter(|id| !shown.contains(id)).collect();
            if !unseen.is_empty() {
                out.blind += 1;
                if c.outcome == Outcome::Done && edits(&c.call.name) {
                    out.blind_edits_done += 1;
                }
                out.guessed.extend(unseen.iter().map(ToString::to_string));
            }
        }
        shown.extend(ids_in_text(&c.result));
    }
    out
}

/// Counts of guessed ids over many rollouts, most frequent first (ties by id), at most `top`.
pub fn most_guessed<'a>(all: impl IntoIterator<Item = &'a BlindCalls>, top: usize) -> Vec<(String, usize)> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for b in all {
        for id in &b.guessed {
            *counts.entry(id.as_str()).or_default() += 1;
        }
    }
    let mut v: Vec<(String, usize)> = counts.into_iter().map(|(k, n)| (k.to_string(), n)).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v.truncate(top);
    v
}

/// The memory ids a call's arguments name: string values (or strings in arrays) under any key with `id` in
/// its name, that read as ids. Arguments that are not a JSON object name none.
pub fn ids_in_arguments(arguments: &str) -> BTreeSet<MemoryId> {
    let mut out = BTreeSet::new();
    if let Ok(Value::Object(m)) = serde_json::from_str::<Value>(arguments) {
        for (k, v) in &m {
            if !k.to_ascii_lowercase().contains("id") {
                continue;
            }
            let strings: Vec<&str> = match v {
                Value::String(s) => vec![s.as_str()],
                Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                Value::Null | Value::Bool(_) | Value::Number(_) | Value::Object(_) => Vec::new(),
            };
            out.extend(strings.into_iter().filter_map(|s| s.parse::<MemoryId>().ok()));
        }
    }
    out
}

/// The memory ids a result text shows: `m` and digits, not inside a longer word.
pub fn ids_in_text(text: &str) -> BTreeSet<MemoryId> {
    let b = text.as_bytes();
    let mut out = BTreeSet::new();
    let mut i = 0;
    while i < b.len() {
        let starts_word = i == 0 || !b[i - 1].is_ascii_alphanumeric();
        if b[i] == b'm' && starts_word {
            let end = (i + 1..b.len()).find(|&j| !b[j].is_ascii_digit()).unwrap_or(b.len());
            let ends_word = end == b.len() || !b[end].is_ascii_alphanumeric();
            if end > i + 1 && ends_word {
                if let Ok(id) = text[i..end].parse::<MemoryId>() {
                    out.insert(id);
                }
            }
            i = end.max(i + 1);
        } else {
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ids_are_read_from_id_keys_and_from_results() {
        let a = ids_in_arguments(r#"{"memory_id": "m0042", "memory_ids": ["m7", "x", "m0009"], "content": "m0001", "top_k": 5}"#);
        assert_eq!(a.iter().map(ToString::to_string).collect::<Vec<_>>(), ["m0007", "m0009", "m0042"]);
        assert!(ids_in_arguments("not json").is_empty());
        assert!(ids_in_arguments(r#"["m0042"]"#).is_empty());
        let t = ids_in_text("1. [m0042] 0.81 text\nupdated [m0100]; summ0003 m12x (m0007)");
        assert_eq!(t.iter().map(ToString::to_string).collect::<Vec<_>>(), ["m0007", "m0042", "m0100"]);
    }

    #[test]
    fn an_id_counts_as_shown_once_a_result_showed_it() {
        let call = |name: &str, args: &str, outcome: &str, result: &str| {
            serde_json::json!({"mode": "strict", "name": name, "arguments": args, "id": null, "error": null,
                "outcome": outcome, "result": result, "env_ms": 0.0})
        };
        let turn = |calls: Vec<Value>| {
            serde_json::json!({"sent": 2, "seed": 1, "reply": {}, "finish_reason": "stop", "prompt_tokens": 1,
                "completion_tokens": 1, "latency_ms": 1.0, "calls": calls, "dropped": 0})
        };
        let t: Trajectory = serde_json::from_value(serde_json::json!({
            "schema": "memgym.rollout/1", "key": "k", "question_id": "q", "conversation_id": "c", "category": 1,
            "gold_status": "ok", "question": "?", "sample": 0, "group": 1, "episode_id": "e", "episode_seed": 1,
            "sampling_seed": 2, "include_adversarial": false, "tool_format": "openai", "model": "m",
            "status": "scored", "failure": null, "stop": "no_call", "messages": [], "score": null,
            "tokens": {"prompt": 0, "completion": 0}, "timings": {"policy_ms": 0.0, "env_ms": 0.0, "total_ms": 0.0},
            "turns": [
                turn(vec![
                    call("manage_memory", r#"{"operation": "update", "memory_id": "m0042", "content": "x"}"#, "done", "updated [m0042] x"),
                    call("search_memory", r#"{"query": "x"}"#, "done", "1. [m0007] 0.5 a\n2. [m0042] 0.4 x"),
                ]),
                turn(vec![
                    call("delete_memory", r#"{"memory_ids": ["m0007", "m0042"]}"#, "done", "deleted m0007, m0042"),
                    call("delete_memory", r#"{"memory_id": "m0003"}"#, "refused", "Error: memory m0003 not found"),
                    call("search_memory", r#"{"query": "m0005"}"#, "done", "no memories matched"),
                ]),
            ]
        }))
        .unwrap();
        let b = blind_calls(&t);
        assert_eq!((b.naming, b.blind, b.blind_edits_done), (3, 2, 1), "{b:?}");
        assert_eq!(b.guessed, ["m0042", "m0003"]);
        assert_eq!(most_guessed([&b, &b], 1), [("m0003".to_string(), 2)]);
    }

    proptest! {
        #[test]
        fn every_shown_id_is_read_back(ids in proptest::collection::vec(0u32..100_000, 0..8), sep in "[ ,;\\[\\]()\n]{1,3}") {
            let text: Vec<String> = ids.iter().map(|&n| MemoryId(n).to_string()).collect();
            let got = ids_in_text(&format!("found{sep}{}{sep}end", text.join(&sep)));
            let want: BTreeSet<MemoryId> = ids.iter().map(|&n| MemoryId(n)).collect();
            prop_assert_eq!(got, want);
        }

        #[test]
        fn reading_ids_never_panics(s in "\\PC{0,60}") {
            let _ = ids_in_text(&s);
            let _ = ids_in_arguments(&s);
        }
    }
}
