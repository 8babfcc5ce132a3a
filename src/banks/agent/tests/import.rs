//! import/export: seed documents, defaults, leniencies, path-naming errors, property tests.

use crate::banks::agent::{AgentError, AgentMemory, EpisodeLogEntry, MistakeCard};
use proptest::prelude::*;

use super::strategies::memory;

fn err(json: &str) -> (String, String) {
    match AgentMemory::import(json).unwrap_err() {
        AgentError::Invalid { field, message } => (field, message),
    }
}

const SEED_DOC: &str = r#"{
  "version": 1,
  "total_episodes": 2,
  "last_consolidated_at": null,
  "global_rules": ["[HIGH SCORE 0.90] did well"],
  "task_rules": {"rca": ["[WORKS] Correctly identified root cause on step 3"]},
  "episode_log": [
    {"timestamp": "2026-01-01T00:00:00+00:00", "task_id": "rca", "score": 0.82, "steps": 7,
     "summary": "Investigated auth-service first, found JWT expiry bug"},
    {"timestamp": "2026-01-01T00:01:00+00:00", "task_id": "rca", "score": 1, "steps": 3, "summary": ""}
  ],
  "score_history": {"rca": [0.82, 1]},
  "mistakes": ["Escalated too early before diagnosing"],
  "mistake_cards": [
    {"mistake_type": "wrong_worker", "task_id": "rca", "worker_id": 7, "bad_decision": "ask 7",
     "correct_decision": "ask 9", "evidence": "log line", "lesson": "check first", "seen_count": 2,
     "first_seen_episode": 1, "last_seen_episode": 2}
  ],
  "successes": ["Correctly identified root cause on step 3"]
}"#;

#[test]
fn reads_the_seed_document() {
    let mem = AgentMemory::import(SEED_DOC).unwrap();
    assert_eq!(mem.total_episodes, 2);
    assert_eq!(mem.episode_log[1].score, 1.0);
    assert_eq!(mem.score_history["rca"], vec![0.82, 1.0]);
    let c = &mem.mistake_cards[0];
    assert_eq!(c.worker_id.as_deref(), Some("7"));
    assert_eq!(c.bad_decision.as_deref(), Some("ask 7"));
    assert_eq!((c.seen_count, c.first_seen_episode, c.last_seen_episode), (2, 1, 2));
    assert_eq!(AgentMemory::import(&mem.export()).unwrap(), mem);
}

#[test]
fn older_document_without_cards_and_missing_keys() {
    let old = r#"{"version": 1, "total_episodes": 3, "global_rules": ["g"], "mistakes": [], "successes": []}"#;
    let mem = AgentMemory::import(old).unwrap();
    assert!(mem.mistake_cards.is_empty());
    assert_eq!(mem.global_rules, vec!["g".to_string()]);
    assert_eq!(AgentMemory::import("{}").unwrap(), AgentMemory::new());
    // null is treated as absent.
    let nulls = r#"{"version": null, "task_rules": null, "episode_log": [{"summary": null, "score": null}]}"#;
    let mem = AgentMemory::import(nulls).unwrap();
    assert_eq!(mem.version, 1);
    assert_eq!(mem.episode_log, vec![EpisodeLogEntry::default()]);
    // Unknown keys are ignored.
    assert_eq!(AgentMemory::import(r#"{"extra": [1, 2]}"#).unwrap(), AgentMemory::new());
}

#[test]
fn card_defaults() {
    let mem = AgentMemory::import(r#"{"mistake_cards": [{}]}"#).unwrap();
    let expected = MistakeCard { mistake_type: "unknown_mistake".into(), seen_count: 1, ..MistakeCard::default() };
    assert_eq!(mem.mistake_cards, vec![expected]);
}

#[test]
fn string_last_consolidated_at_is_none() {
    let mem = AgentMemory::import(r#"{"total_episodes": 20, "last_consolidated_at": "2026-01-01T00:00:00"}"#).unwrap();
    assert_eq!(mem.last_consolidated_at, None);
    assert!(crate::banks::agent::consolidate::due(&mem));
    let mem = AgentMemory::import(r#"{"last_consolidated_at": 40}"#).unwrap();
    assert_eq!(mem.last_consolidated_at, Some(40));
}

#[test]
fn worker_ids_zero_null_empty_mean_none() {
    for w in ["0", "null", "\"\"", "false", "0.0", "-0"] {
        let doc = format!(r#"{{"mistake_cards": [{{"worker_id": {w}, "correct_decision": {w}}}]}}"#);
        let mem = AgentMemory::import(&doc).unwrap();
        assert_eq!(mem.mistake_cards[0].worker_id, None, "{w}");
        assert_eq!(mem.mistake_cards[0].correct_decision, None, "{w}");
    }
    for (w, expected) in [("12", "12"), ("-3", "-3"), ("3.0", "3"), ("2.5", "2.5"), ("\"0\"", "0"), ("\"w1\"", "w1")] {
        let doc = format!(r#"{{"mistake_cards": [{{"worker_id": {w}}}]}}"#);
        assert_eq!(AgentMemory::import(&doc).unwrap().mistake_cards[0].worker_id.as_deref(), Some(expected), "{w}");
    }
    assert_eq!(err(r#"{"mistake_cards": [{"worker_id": [1]}]}"#).0, "data.mistake_cards[0].worker_id");
    assert_eq!(err(r#"{"mistake_cards": [{"worker_id": true}]}"#).0, "data.mistake_cards[0].worker_id");
}

#[test]
fn wrong_types_name_the_path() {
    let cases = [
        ("[1, 2]", "data"),
        ("\"text\"", "data"),
        ("{not json", "data"),
        ("", "data"),
        (r#"{"version": "1"}"#, "data.version"),
        (r#"{"total_episodes": -1}"#, "data.total_episodes"),
        (r#"{"total_episodes": 1.5}"#, "data.total_episodes"),
        (r#"{"last_consolidated_at": [1]}"#, "data.last_consolidated_at"),
        (r#"{"global_rules": "g"}"#, "data.global_rules"),
        (r#"{"global_rules": ["a", 2]}"#, "data.global_rules[1]"),
        (r#"{"task_rules": []}"#, "data.task_rules"),
        (r#"{"task_rules": {"t": [1]}}"#, "data.task_rules.t[0]"),
        (r#"{"episode_log": [{}, {}, {}, {"score": "high"}]}"#, "data.episode_log[3].score"),
        (r#"{"episode_log": [{"steps": -2}]}"#, "data.episode_log[0].steps"),
        (r#"{"episode_log": [3]}"#, "data.episode_log[0]"),
        (r#"{"score_history": {"t": [0.5, "x"]}}"#, "data.score_history.t[1]"),
        (r#"{"score_history": {"t": 0.5}}"#, "data.score_history.t"),
        (r#"{"mistakes": [null]}"#, "data.mistakes[0]"),
        (r#"{"mistake_cards": [{"seen_count": "2"}]}"#, "data.mistake_cards[0].seen_count"),
        (r#"{"mistake_cards": [{}, {"lesson": 5}]}"#, "data.mistake_cards[1].lesson"),
        (r#"{"successes": {}}"#, "data.successes"),
    ];
    for (doc, path) in cases {
        assert_eq!(err(doc).0, path, "{doc}");
    }
}

#[test]
fn strict_json_and_the_text_rule_on_import() {
    // A repeated key is refused, naming it (serde_json would keep the last "rules" silently).
    let (field, message) = err(r#"{"global_rules": ["a"], "global_rules": ["b"]}"#);
    assert_eq!(field, "data");
    assert!(message.contains(r#"key "global_rules" appears twice"#), "{message}");
    // Control and bidi characters are refused, naming the field and the code point, never the value.
    let (field, message) = err(r#"{"mistakes": ["ok", "a\u001b[31mred"]}"#);
    assert_eq!(field, "data.mistakes[1]");
    assert!(message.contains("U+001B") && !message.contains("red"), "{message}");
    let (field, _) = err(r#"{"task_rules": {"t\u202e": []}}"#);
    assert!(field.starts_with("data.task_rules.") && field.contains("\\u{202e}"), "{field}");
    assert_eq!(err(r#"{"episode_log": [{"summary": "x\u2028y"}]}"#).0, "data.episode_log[0].summary");
    // Accepted text is stored NFC and trimmed; line breaks are kept.
    let mem = AgentMemory::import(r#"{"global_rules": ["  Zoe\u0301 first\nthen check  "]}"#).unwrap();
    assert_eq!(mem.global_rules, vec!["Zoé first\nthen check".to_string()]);
}

#[test]
fn bad_values_quoted_briefly() {
    let (field, message) = err(r#"{"episode_log": [{}, {}, {}, {"score": "high"}]}"#);
    assert_eq!(field, "data.episode_log[3].score");
    assert!(message.contains("\"high\""), "{message}");
    let long = "y".repeat(500);
    let (_, message) = err(&format!(r#"{{"mistakes": [{{"a": "{long}"}}]}}"#));
    assert!(message.chars().count() < 120, "{message}");
    assert!(message.ends_with("characters)"), "cut, with the full length: {message}");
    let e = AgentMemory::import("[]").unwrap_err();
    assert!(e.to_string().starts_with("data: expected an object"), "{e}");
}

#[test]
fn export_uses_seed_keys_in_order() {
    let mem = AgentMemory::import(SEED_DOC).unwrap();
    let out = mem.export();
    assert!(out.starts_with("{\n  \"version\": 1,\n  \"total_episodes\": 2,\n  \"last_consolidated_at\": null,"), "{out}");
    let keys = ["global_rules", "task_rules", "episode_log", "score_history", "mistakes", "mistake_cards", "successes"];
    let positions: Vec<usize> = keys.iter().map(|k| out.find(&format!("\n  \"{k}\"")).unwrap()).collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]));
    assert!(out.contains("\"worker_id\": \"7\""));
    assert!(out.contains("\"first_seen_episode\": 1"));
    assert_eq!(AgentMemory::new().export().matches('\n').count(), 11);
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        proptest::num::f64::NORMAL.prop_map(Value::from),
        "\\PC{0,6}".prop_map(Value::String),
    ];
    let keys = prop_oneof![
        Just("version".to_string()),
        Just("total_episodes".to_string()),
        Just("last_consolidated_at".to_string()),
        Just("global_rules".to_string()),
        Just("task_rules".to_string()),
        Just("episode_log".to_string()),
        Just("score_history".to_string()),
        Just("mistakes".to_string()),
        Just("mistake_cards".to_string()),
        Just("successes".to_string()),
        Just("score".to_string()),
        Just("steps".to_string()),
        Just("worker_id".to_string()),
        Just("seen_count".to_string()),
        "[a-z]{1,3}",
    ];
    crate::util::json::strategies::tree(leaf.boxed(), keys.boxed(), 4, 48)
}

proptest! {
    #[test]
    fn import_never_panics_on_strings(input in "\\PC{0,200}") {
        let _ = AgentMemory::import(&input);
    }

    #[test]
    fn import_never_panics_on_json_values(v in json_value()) {
        let _ = AgentMemory::import(&v.to_string());
    }

    #[test]
    fn export_import_round_trip(mem in memory()) {
        let back = AgentMemory::import(&mem.export()).unwrap();
        prop_assert_eq!(back, mem);
    }
}
