//! record_episode: the seed's rules, the deliberate fixes, caps and validation-first.

use crate::banks::agent::record::{DEFAULT_LESSON, DEFAULT_MISTAKE_TYPE};
use crate::banks::agent::{record_episode, AgentError, AgentMemory, CardInput, CardOutcome, Episode};

use super::{card, ep, s};

const NOW: &str = "2026-01-01T00:00:00+00:00";

fn field_of(e: AgentError) -> String {
    match e {
        AgentError::Invalid { field, .. } => field,
    }
}

#[test]
fn defaults_follow_the_seed() {
    let mut mem = AgentMemory::new();
    let out = record_episode(&mut mem, &Episode::default(), NOW).unwrap();
    assert_eq!(out.total_episodes, 1);
    assert_eq!(out.task_id, "unknown");
    assert_eq!(mem.total_episodes, 1);
    assert_eq!(mem.score_history.get("unknown"), Some(&vec![0.0]));
    assert_eq!(mem.task_rules.get("unknown"), Some(&vec![]));
    let e = &mem.episode_log[0];
    assert_eq!((e.timestamp.as_str(), e.task_id.as_str(), e.score, e.steps, e.summary.as_str()), (NOW, "unknown", 0.0, 0, ""));
    // An empty task id counts as missing.
    let out = record_episode(&mut mem, &Episode { task_id: Some(String::new()), ..Episode::default() }, NOW).unwrap();
    assert_eq!(out.task_id, "unknown");
    assert_eq!(mem.score_history.get("unknown"), Some(&vec![0.0, 0.0]));
}

#[test]
fn log_entry_and_history() {
    let mut mem = AgentMemory::new();
    let e = Episode { steps: Some(7), trajectory_summary: Some("found the bug".into()), ..ep("rca", 0.82) };
    record_episode(&mut mem, &e, "ts1").unwrap();
    record_episode(&mut mem, &ep("rca", 0.4), "ts2").unwrap();
    assert_eq!(mem.score_history.get("rca"), Some(&vec![0.82, 0.4]));
    assert_eq!(mem.episode_log.len(), 2);
    assert_eq!(mem.episode_log[0].steps, 7);
    assert_eq!(mem.episode_log[0].summary, "found the bug");
    assert_eq!(mem.episode_log[1].timestamp, "ts2");
    assert_eq!(mem.total_episodes, 2);
}

#[test]
fn mistakes_and_successes_dedup_exact_and_skip_blank() {
    let mut mem = AgentMemory::new();
    let e = Episode { mistakes: s(&["a", "a", "A", "", "   "]), successes: s(&["w", "", " w", "\t"]), ..ep("t", 0.7) };
    record_episode(&mut mem, &e, NOW).unwrap();
    record_episode(&mut mem, &e, NOW).unwrap();
    assert_eq!(mem.mistakes, s(&["a", "A"]));
    // The text rule trims: " w" is stored as "w", the same success.
    assert_eq!(mem.successes, s(&["w"]));
    assert_eq!(mem.task_rules.get("t"), Some(&vec![]), "0.7 makes no rules");
}

#[test]
fn works_rules_at_085_and_above() {
    let mut mem = AgentMemory::new();
    let out = record_episode(&mut mem, &Episode { successes: s(&["s1", "", "  ", "s1", "s2"]), ..ep("t", 0.85) }, NOW).unwrap();
    assert_eq!(out.rules_added, s(&["[WORKS] s1", "[WORKS] s2"]));
    assert_eq!(mem.task_rules["t"], s(&["[WORKS] s1", "[WORKS] s2"]));
    // 0.849999 prints as 0.85 but is not a high score.
    let out = record_episode(&mut mem, &Episode { successes: s(&["s3"]), ..ep("t", 0.849999) }, NOW).unwrap();
    assert!(out.rules_added.is_empty());
    // Already present: not added again.
    let out = record_episode(&mut mem, &Episode { successes: s(&["s1"]), ..ep("t", 1.0) }, NOW).unwrap();
    assert!(out.rules_added.is_empty());
    assert_eq!(mem.task_rules["t"].len(), 2);
}

#[test]
fn avoid_rules_below_050() {
    let mut mem = AgentMemory::new();
    let out = record_episode(&mut mem, &Episode { mistakes: s(&["m"]), successes: s(&["w"]), ..ep("t", 0.5) }, NOW).unwrap();
    assert!(out.rules_added.is_empty(), "0.5 is not below 0.5");
    let out = record_episode(&mut mem, &Episode { mistakes: s(&["m", ""]), successes: s(&["w"]), ..ep("t", 0.4999999) }, NOW).unwrap();
    assert_eq!(out.rules_added, s(&["[AVOID] m"]));
    assert_eq!(mem.task_rules["t"], s(&["[AVOID] m"]));
}

#[test]
fn rules_capped_to_last_ten_per_task() {
    let mut mem = AgentMemory::new();
    let many: Vec<String> = (0..12).map(|i| format!("s{i}")).collect();
    let out = record_episode(&mut mem, &Episode { successes: many, ..ep("t", 0.9) }, NOW).unwrap();
    let expected: Vec<String> = (2..12).map(|i| format!("[WORKS] s{i}")).collect();
    assert_eq!(mem.task_rules["t"], expected);
    assert_eq!(out.rules_added, expected);
    let out = record_episode(&mut mem, &Episode { mistakes: s(&["m"]), ..ep("t", 0.1) }, NOW).unwrap();
    assert_eq!(out.rules_added, s(&["[AVOID] m"]));
    assert_eq!(mem.task_rules["t"].len(), 10);
    assert_eq!(mem.task_rules["t"][0], "[WORKS] s3");
    assert_eq!(mem.task_rules["t"][9], "[AVOID] m");
}

#[test]
fn new_and_matched_cards() {
    let mut mem = AgentMemory::new();
    let c = CardInput {
        mistake_type: Some("wrong_worker".into()),
        worker_id: Some("w1".into()),
        correct_decision: Some("ask w2".into()),
        evidence: Some("e1".into()),
        lesson: Some("l1".into()),
        ..CardInput::default()
    };
    let out = record_episode(&mut mem, &Episode { mistake_cards: vec![c.clone()], ..ep("t", 0.6) }, NOW).unwrap();
    assert_eq!(out.cards, vec![CardOutcome::New { kept: true }]);
    let k = &mem.mistake_cards[0];
    assert_eq!((k.task_id.as_str(), k.seen_count, k.first_seen_episode, k.last_seen_episode), ("t", 1, 1, 1));
    // Match: no evidence keeps the old evidence; no lesson writes the default lesson (seed behaviour).
    let again = CardInput { evidence: None, lesson: None, ..c.clone() };
    record_episode(&mut mem, &ep("other", 0.6), NOW).unwrap();
    let out =
        record_episode(&mut mem, &Episode { mistake_cards: vec![CardInput { task_id: Some("t".into()), ..again }], ..ep("x", 0.6) }, NOW)
            .unwrap();
    assert_eq!(out.cards, vec![CardOutcome::Matched { seen_count: 2 }]);
    assert_eq!(mem.mistake_cards.len(), 1);
    let k = &mem.mistake_cards[0];
    assert_eq!((k.seen_count, k.first_seen_episode, k.last_seen_episode), (2, 1, 3));
    assert_eq!(k.evidence, "e1");
    assert_eq!(k.lesson, DEFAULT_LESSON);
    // New evidence replaces the old one.
    let third = CardInput { evidence: Some("e3".into()), ..c.clone() };
    record_episode(&mut mem, &Episode { mistake_cards: vec![third], ..ep("t", 0.6) }, NOW).unwrap();
    assert_eq!(mem.mistake_cards[0].evidence, "e3");
    // A different correct decision is a different card.
    let other = CardInput { correct_decision: Some("ask w3".into()), ..c };
    let out = record_episode(&mut mem, &Episode { mistake_cards: vec![other], ..ep("t", 0.6) }, NOW).unwrap();
    assert_eq!(out.cards, vec![CardOutcome::New { kept: true }]);
    assert_eq!(mem.mistake_cards.len(), 2);
}

#[test]
fn card_defaults_and_empty_worker_means_none() {
    let mut mem = AgentMemory::new();
    let blank = CardInput { mistake_type: Some(String::new()), worker_id: Some(String::new()), ..CardInput::default() };
    let out = record_episode(&mut mem, &Episode { mistake_cards: vec![CardInput::default(), blank], ..ep("t", 0.6) }, NOW).unwrap();
    assert_eq!(out.cards, vec![CardOutcome::New { kept: true }, CardOutcome::Matched { seen_count: 2 }]);
    let k = &mem.mistake_cards[0];
    assert_eq!(k.mistake_type, DEFAULT_MISTAKE_TYPE);
    assert_eq!(k.lesson, DEFAULT_LESSON);
    assert_eq!(k.evidence, "");
    assert_eq!(k.worker_id, None);
}

#[test]
fn card_texts_cut_to_300_chars() {
    let mut mem = AgentMemory::new();
    let long = "ü".repeat(299) + "🦀🦀🦀";
    let c = CardInput { evidence: Some(long.clone()), lesson: Some(long), ..card("k") };
    record_episode(&mut mem, &Episode { mistake_cards: vec![c], ..ep("t", 0.6) }, NOW).unwrap();
    let expected = "ü".repeat(299) + "🦀";
    assert_eq!(mem.mistake_cards[0].evidence, expected);
    assert_eq!(mem.mistake_cards[0].lesson, expected);
}

fn types(mem: &AgentMemory) -> Vec<String> {
    mem.mistake_cards.iter().map(|c| c.mistake_type.clone()).collect()
}

#[test]
fn thirty_card_cap_and_sort() {
    let mut mem = AgentMemory::new();
    let thirty: Vec<CardInput> = (0..30).map(|i| card(&format!("c{i}"))).collect();
    record_episode(&mut mem, &Episode { mistake_cards: thirty.clone(), ..ep("t", 0.6) }, NOW).unwrap();
    assert_eq!(types(&mem), (0..30).map(|i| format!("c{i}")).collect::<Vec<_>>());
    // A match bumps c5 but does not re-sort.
    record_episode(&mut mem, &Episode { mistake_cards: vec![card("c5")], ..ep("t", 0.6) }, NOW).unwrap();
    assert_eq!(mem.mistake_cards[5].mistake_type, "c5");
    assert_eq!(mem.mistake_cards[5].seen_count, 2);
    // A new card sorts: c5 (2, 2), new (1, 3), then the rest in stored order; c29 falls off.
    let out = record_episode(&mut mem, &Episode { mistake_cards: vec![card("new")], ..ep("t", 0.6) }, NOW).unwrap();
    assert_eq!(out.cards, vec![CardOutcome::New { kept: true }]);
    let mut expected = s(&["c5", "new"]);
    expected.extend((0..29).filter(|i| *i != 5).map(|i| format!("c{i}")));
    assert_eq!(types(&mem), expected);
}

#[test]
fn new_card_can_be_dropped_by_the_cap() {
    let mut mem = AgentMemory::new();
    let thirty: Vec<CardInput> = (0..30).map(|i| card(&format!("c{i}"))).collect();
    record_episode(&mut mem, &Episode { mistake_cards: thirty.clone(), ..ep("t", 0.6) }, NOW).unwrap();
    record_episode(&mut mem, &Episode { mistake_cards: thirty, ..ep("t", 0.6) }, NOW).unwrap();
    let out = record_episode(&mut mem, &Episode { mistake_cards: vec![card("late")], ..ep("t", 0.6) }, NOW).unwrap();
    assert_eq!(out.cards, vec![CardOutcome::New { kept: false }]);
    assert_eq!(mem.mistake_cards.len(), 30);
    assert!(!types(&mem).contains(&"late".to_string()));
}

#[test]
fn log_trimmed_to_100_at_every_record() {
    let mut mem = AgentMemory::new();
    for i in 0..130 {
        record_episode(&mut mem, &ep("t", 0.6), &format!("ts{i}")).unwrap();
        assert!(mem.episode_log.len() <= 100);
    }
    assert_eq!(mem.episode_log.len(), 100);
    assert_eq!(mem.episode_log[0].timestamp, "ts30");
    assert_eq!(mem.score_history["t"].len(), 130);
    assert_eq!(mem.total_episodes, 130);
}

#[test]
fn distinct_mistakes_and_successes_keep_the_last_thousand() {
    let mut mem = AgentMemory::new();
    for call in 0..11 {
        let items: Vec<String> = (0..100).map(|i| format!("lesson {}", call * 100 + i)).collect();
        let e = Episode { mistakes: items.clone(), successes: items, ..ep("t", 0.6) };
        record_episode(&mut mem, &e, NOW).unwrap();
    }
    assert_eq!((mem.mistakes.len(), mem.successes.len()), (1_000, 1_000));
    assert_eq!((mem.mistakes[0].as_str(), mem.mistakes[999].as_str()), ("lesson 100", "lesson 1099"));
    assert_eq!(mem.successes[0], "lesson 100");
}

fn seeded() -> AgentMemory {
    let mut mem = AgentMemory::new();
    let e = Episode { mistakes: s(&["m"]), successes: s(&["w"]), mistake_cards: vec![card("k")], ..ep("t", 0.3) };
    record_episode(&mut mem, &e, NOW).unwrap();
    mem
}

fn assert_rejected(ep: Episode, now: &str, field: &str) {
    let mut mem = seeded();
    let before = mem.clone();
    let err = record_episode(&mut mem, &ep, now).unwrap_err();
    assert_eq!(field_of(err), field);
    assert_eq!(mem, before, "a rejected record must change nothing");
}

#[test]
fn bad_input_changes_nothing() {
    let good = || Episode { mistakes: s(&["m2"]), successes: s(&["w2"]), mistake_cards: vec![card("k2")], ..ep("t", 0.2) };
    assert_rejected(Episode { score: Some(f64::NAN), ..good() }, NOW, "score");
    assert_rejected(Episode { score: Some(f64::INFINITY), ..good() }, NOW, "score");
    assert_rejected(Episode { score: Some(f64::NEG_INFINITY), ..good() }, NOW, "score");
    assert_rejected(Episode { task_id: Some("t".repeat(257)), ..good() }, NOW, "task_id");
    assert_rejected(Episode { trajectory_summary: Some("x".repeat(4001)), ..good() }, NOW, "trajectory_summary");
    assert_rejected(Episode { mistakes: vec!["a".into(), "b".into(), "é".repeat(4001)], ..good() }, NOW, "mistakes[2]");
    assert_rejected(Episode { successes: vec!["ok".into(); 101], ..good() }, NOW, "successes");
    assert_rejected(Episode { mistakes: vec!["ok".into(); 101], ..good() }, NOW, "mistakes");
    assert_rejected(Episode { mistake_cards: vec![card("a"); 101], ..good() }, NOW, "mistake_cards");
    let long_lesson = CardInput { lesson: Some("l".repeat(4001)), ..card("b") };
    assert_rejected(Episode { mistake_cards: vec![card("a"), long_lesson], ..good() }, NOW, "mistake_cards[1].lesson");
    let long_task = CardInput { task_id: Some("t".repeat(257)), ..card("b") };
    assert_rejected(Episode { mistake_cards: vec![long_task], ..good() }, NOW, "mistake_cards[0].task_id");
    assert_rejected(good(), &"9".repeat(257), "now");
}

#[test]
fn limits_are_inclusive() {
    let mut mem = AgentMemory::new();
    let e = Episode {
        task_id: Some("τ".repeat(256)),
        trajectory_summary: Some("x".repeat(4000)),
        mistakes: vec!["m".repeat(4000); 100],
        successes: vec!["w".into(); 100],
        mistake_cards: vec![CardInput { lesson: Some("l".repeat(4000)), ..card("k") }; 100],
        ..Episode::default()
    };
    let out = record_episode(&mut mem, &e, NOW).unwrap();
    assert_eq!(out.cards.len(), 100);
    assert_eq!(mem.mistake_cards[0].seen_count, 100);
}

#[test]
fn counter_overflow_is_an_error() {
    let mut mem = AgentMemory::new();
    mem.total_episodes = u64::MAX;
    let before = mem.clone();
    assert_eq!(field_of(record_episode(&mut mem, &ep("t", 0.5), NOW).unwrap_err()), "total_episodes");
    assert_eq!(mem, before);
}

#[test]
fn text_rule_refuses_controls_and_bidi_naming_the_field() {
    let mut mem = AgentMemory::new();
    let cases: Vec<(Episode, &str)> = vec![
        (Episode { task_id: Some("qa\u{1b}[2J".into()), ..Episode::default() }, "task_id"),
        (Episode { trajectory_summary: Some("ok\0".into()), ..Episode::default() }, "trajectory_summary"),
        (Episode { mistakes: s(&["fine", "x\u{202e}y"]), ..Episode::default() }, "mistakes[1]"),
        (Episode { successes: s(&["a\u{2029}b"]), ..Episode::default() }, "successes[0]"),
        (
            Episode { mistake_cards: vec![CardInput { lesson: Some("\u{2066}l".into()), ..CardInput::default() }], ..Episode::default() },
            "mistake_cards[0].lesson",
        ),
    ];
    for (e, field) in cases {
        let err = record_episode(&mut mem, &e, NOW).unwrap_err();
        assert!(err.to_string().starts_with(&format!("{field}: holds U+")), "{err}");
    }
    assert_eq!(mem, AgentMemory::new(), "a refused episode changes nothing");
    // Line breaks and tabs are kept (escaped only where the context shows them); NFC and trimming apply.
    record_episode(
        &mut mem,
        &Episode { trajectory_summary: Some(" line 1\n\tline 2 ".into()), task_id: Some(" Zoe\u{301} ".into()), ..Episode::default() },
        NOW,
    )
    .unwrap();
    assert_eq!(mem.episode_log[0].summary, "line 1\n\tline 2");
    assert_eq!(mem.episode_log[0].task_id, "Zoé");
}

#[test]
fn error_display_names_field() {
    let mut mem = AgentMemory::new();
    let err = record_episode(&mut mem, &Episode { score: Some(f64::NAN), ..Episode::default() }, NOW).unwrap_err();
    assert!(err.to_string().starts_with("score: "), "{err}");
}

mod props {
    use crate::banks::agent::{record_episode, AgentMemory};
    use proptest::prelude::*;

    use super::super::strategies::{episode, memory};

    proptest! {
        /// Never panics; an error changes nothing; a success keeps every cap.
        #[test]
        fn record_is_all_or_nothing(mut mem in memory(), eps in proptest::collection::vec(episode(), 1..6)) {
            for e in &eps {
                let before = mem.clone();
                match record_episode(&mut mem, e, "now") {
                    Err(_) => prop_assert_eq!(&mem, &before),
                    Ok(out) => {
                        prop_assert_eq!(out.total_episodes, before.total_episodes + 1);
                        prop_assert!(mem.episode_log.len() <= 100);
                        prop_assert!(mem.task_rules.get(&out.task_id).is_some_and(|r| r.len() <= 10));
                        prop_assert!(!mem.mistakes.iter().chain(&mem.successes).any(|s| s.trim().is_empty() && !before.mistakes.contains(s) && !before.successes.contains(s)));
                        prop_assert!(mem.mistake_cards.iter().all(|c| c.evidence.chars().count() <= 300 && c.lesson.chars().count() <= 300 || before.mistake_cards.contains(c)));
                        // The result survives export and import.
                        let back = AgentMemory::import(&mem.export()).ok();
                        prop_assert_eq!(back.as_ref(), Some(&mem));
                    }
                }
            }
        }
    }
}
