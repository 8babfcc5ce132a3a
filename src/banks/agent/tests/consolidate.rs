//! Consolidation: due check, heuristic rules, merge cap, LLM prompt and reply parsing.

use crate::banks::agent::consolidate::{apply_rules, due, heuristic, llm_prompt, mark_consolidated, parse_llm_rules};
use crate::banks::agent::{record_episode, AgentMemory, Episode};
use proptest::prelude::*;

use super::{entry, s};

#[test]
fn due_every_twenty_episodes() {
    let mut mem = AgentMemory::new();
    mem.total_episodes = 19;
    assert!(!due(&mem));
    mem.total_episodes = 20;
    assert!(due(&mem));
    mem.last_consolidated_at = Some(5);
    mem.total_episodes = 24;
    assert!(!due(&mem));
    mem.total_episodes = 25;
    assert!(due(&mem));
    mem.last_consolidated_at = Some(100);
    assert!(!due(&mem), "last > total is not due");
    mark_consolidated(&mut mem);
    assert_eq!(mem.last_consolidated_at, Some(25));
    assert!(!due(&mem));
}

#[test]
fn heuristic_rules_threshold_blank_dedup_and_cut() {
    let mut mem = AgentMemory::new();
    let long = "λ".repeat(130);
    mem.episode_log = vec![
        entry("t", 0.85, 1, "at threshold"),
        entry("t", 0.849999, 1, "prints 0.85 but is below"),
        entry("t", 0.95, 1, ""),
        entry("t", 0.95, 1, "   "),
        entry("t", 0.9, 1, "same"),
        entry("u", 0.9, 2, "same"),
        entry("t", 0.91, 1, "same"),
        entry("t", 1.0, 1, &long),
    ];
    let expected = vec![
        "[HIGH SCORE 0.85] at threshold".to_string(),
        "[HIGH SCORE 0.90] same".to_string(),
        "[HIGH SCORE 0.91] same".to_string(),
        format!("[HIGH SCORE 1.00] {}", "λ".repeat(120)),
    ];
    assert_eq!(heuristic(&mem), expected);
}

#[test]
fn apply_rules_dedup_keeps_first_and_caps_at_twenty() {
    let mut mem = AgentMemory::new();
    mem.global_rules = s(&["a", "b"]);
    apply_rules(&mut mem, s(&["b", "c", "c", "", "  "]), false);
    assert_eq!(mem.global_rules, s(&["a", "b", "c"]));

    mem.global_rules = (0..15).map(|i| format!("old{i}")).collect();
    apply_rules(&mut mem, (0..10).map(|i| format!("new{i}")).collect(), false);
    let mut expected: Vec<String> = (5..15).map(|i| format!("old{i}")).collect();
    expected.extend((0..10).map(|i| format!("new{i}")));
    assert_eq!(mem.global_rules, expected);

    // A repeated rule keeps its old (early) position, so it is among the first trimmed.
    apply_rules(&mut mem, s(&["old5", "x"]), false);
    assert_eq!(mem.global_rules.first().map(String::as_str), Some("old6"));
    assert_eq!(mem.global_rules.last().map(String::as_str), Some("x"));
    assert_eq!(mem.global_rules.len(), 20);
}

#[test]
fn apply_rules_prefixes_llm_rules() {
    let mut mem = AgentMemory::new();
    apply_rules(&mut mem, s(&["Check logs first.", "Check logs first."]), true);
    assert_eq!(mem.global_rules, s(&["[CONSOLIDATED] Check logs first."]));
    assert!(mem.task_rules.is_empty());
}

#[test]
fn heuristic_consolidation_flow() {
    let mut mem = AgentMemory::new();
    for i in 0..20 {
        let e =
            Episode { task_id: Some("t".into()), score: Some(0.9), trajectory_summary: Some(format!("s{}", i % 3)), ..Episode::default() };
        record_episode(&mut mem, &e, "now").unwrap();
    }
    assert!(due(&mem));
    let rules = heuristic(&mem);
    assert_eq!(rules.len(), 3);
    apply_rules(&mut mem, rules, false);
    mark_consolidated(&mut mem);
    assert_eq!(mem.global_rules, s(&["[HIGH SCORE 0.90] s0", "[HIGH SCORE 0.90] s1", "[HIGH SCORE 0.90] s2"]));
    assert!(!due(&mem));
}

#[test]
fn prompt_lists_last_thirty_episodes() {
    let mut mem = AgentMemory::new();
    mem.episode_log = (0..35).map(|i| entry("t", 0.125, 1, &format!("ep{i}"))).collect();
    let p = llm_prompt(&mem);
    assert!(!p.contains("ep4\n"));
    assert!(p.contains("task=t score=0.12: ep5\n"));
    assert!(p.contains("task=t score=0.12: ep34\n"));
    assert_eq!(p.matches("task=").count(), 30);
    assert!(p.contains("JSON array"));
    assert!(p.contains('5'));
}

#[test]
fn parse_fenced_and_prose_replies() {
    assert_eq!(parse_llm_rules("```json\n[\"Rule one.\", \"Rule two.\"]\n```"), Ok(s(&["Rule one.", "Rule two."])));
    assert_eq!(parse_llm_rules("Sure! Here are the rules:\n[\"  a  \", \"b\"]\nHope this helps."), Ok(s(&["a", "b"])));
    assert_eq!(parse_llm_rules("[\"contains ] bracket\"]"), Ok(s(&["contains ] bracket"])));
}

#[test]
fn parse_unusable_replies_are_errors() {
    assert!(parse_llm_rules("").is_err());
    assert!(parse_llm_rules("I cannot help with that.").is_err());
    assert!(parse_llm_rules("only [ open").is_err());
    assert!(parse_llm_rules("] reversed [").is_err());
    assert!(parse_llm_rules("[a, b]").is_err());
    assert!(parse_llm_rules("[]").is_err());
    assert!(parse_llm_rules("[\"\", \"  \"]").is_err());
    assert!(parse_llm_rules("Rules [v2]: [\"a\"]").is_err(), "first '[' to last ']' is not JSON, as in the seed");
}

#[test]
fn parse_skips_non_strings_and_nested_arrays() {
    assert_eq!(parse_llm_rules("[1, \"a\", null, {\"x\": 1}, true, \" b \"]"), Ok(s(&["a", "b"])));
    assert_eq!(parse_llm_rules("[[\"inner\"], \"outer\"]"), Ok(s(&["outer"])));
    assert!(parse_llm_rules("[[\"inner\", \"also\"]]").is_err());
}

proptest! {
    #[test]
    fn parse_never_panics(reply in "\\PC{0,200}") {
        let _ = parse_llm_rules(&reply);
    }

    #[test]
    fn parse_finds_array_in_noise(pre in "[^\\[\\]]{0,30}", post in "[^\\[\\]]{0,30}", rules in proptest::collection::vec("[a-zA-Z][a-zA-Z .]{0,20}", 1..6)) {
        let reply = format!("{pre}{}{post}", serde_json::to_string(&rules).unwrap());
        let expected: Vec<String> = rules.iter().map(|r| r.trim().to_string()).collect();
        prop_assert_eq!(parse_llm_rules(&reply), Ok(expected));
    }

    #[test]
    fn apply_rules_never_exceeds_cap(existing in proptest::collection::vec("[a-c]{1,2}", 0..30), new in proptest::collection::vec("[a-d]{1,2}", 0..30)) {
        let mut mem = AgentMemory::new();
        mem.global_rules = existing;
        apply_rules(&mut mem, new, true);
        prop_assert!(mem.global_rules.len() <= 20);
        let mut dedup = mem.global_rules.clone();
        dedup.sort();
        dedup.dedup();
        prop_assert_eq!(dedup.len(), mem.global_rules.len());
    }
}

#[test]
fn llm_rules_lose_the_characters_the_text_rule_refuses() {
    let rules = parse_llm_rules("Rules: [\"Check \\u001b[31mlogs\\u202e first.\", \"  \\u0000 \", \"Plan\\nthen act.\"]").unwrap();
    assert_eq!(
        rules,
        s(&["Check [31mlogs first.", "Plan\nthen act."]),
        "stripped, blank dropped, line breaks kept (escaped in the context)"
    );
}
