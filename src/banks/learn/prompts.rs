//! The prompts of LearnFromGroup's stages and the reading of their replies.
//!
//! The Training-Free GRPO design documents what each stage returns (numbered steps; operations in its vocabulary) but not
//! its prompts; upstream Training-Free GRPO's are long and task-specific. These are memgym's own, short
//! and task-neutral, written so that a small instruction model answers in the expected shape:
//!
//! - **summarise** one trajectory as numbered steps, saying where it went right or wrong;
//! - **extract** (stage 2): from a group's trajectories, best reward first, and the library as it was
//!   when the call began, 1 to `max_operations` operations — `add`, or `modify` of a `G` id (only groups
//!   whose rewards vary are asked, so there is a difference to explain; a reply of `[]` is accepted);
//! - **critique** (the four-stage mode's stage 2): the same group, answered in prose: what the better
//!   attempts did that the worse did not;
//! - **update** (the four-stage mode's stage 3): one group's critique against the library, as upstream's
//!   `ADD` / `UPDATE` / `DELETE` / `NONE` operations;
//! - **consolidate** (the last stage): every group's operations against the library, as a final plan that
//!   may also `merge` and `delete`.
//!
//! Replies with operations are read by [`crate::banks::ops::parse_batch`] (fences, prose around the
//! JSON, both vocabularies, per-operation errors). Every request is deterministic (temperature 0).

use super::Trajectory;
use crate::banks::ops::{to_seed_json, Op};
use crate::llm::{ChatMessage, ChatRequest};
use crate::text::charset::inline;

/// Reply caps in tokens.
const SUMMARY_TOKENS: u32 = 400;
const OPERATIONS_TOKENS: u32 = 800;
const CRITIQUE_TOKENS: u32 = 500;

/// Decimals of a shown reward: at least 2, more when a group's rewards differ by less (at most 12).
const MIN_REWARD_DECIMALS: usize = 2;
const MAX_REWARD_DECIMALS: usize = 12;

/// Characters of a trajectory's output shown to the LLM (the rest is cut, marked `…`).
pub const SHOWN_OUTPUT_CHARS: usize = 3_000;

/// Characters of a summary or critique kept.
pub const MAX_SUMMARY_CHARS: usize = 2_000;

const ANALYST: &str = "You analyse attempts at tasks to find reusable lessons. Be concrete and brief.";

fn request(system: &str, user: String, max_tokens: u32) -> ChatRequest {
    ChatRequest { messages: vec![ChatMessage::system(system), ChatMessage::user(user)], max_tokens, temperature: 0.0 }
}

fn cut_chars(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// The library as the prompts show it: `[G0]. text` lines, or "(empty)".
fn library_block(library: &str) -> &str {
    if library.trim().is_empty() {
        "(empty)"
    } else {
        library
    }
}

/// The fewest decimals (from 2) at which every two different rewards of a group print differently.
///
/// The stage-2 prompt tells the LLM that the rewards differ; printed to a fixed 2 decimals, a group of
/// 0.5, 0.4966, 0.5, 0.5 (a small growth penalty in `memgym learn`'s normalised rewards) read as four
/// equal rewards. Groups whose rewards differ by 0.01 or more print as before.
fn reward_decimals(rewards: &[f64]) -> usize {
    let apart = |d: usize| {
        let shown: Vec<String> = rewards.iter().map(|r| format!("{r:.d$}")).collect();
        (0..rewards.len()).all(|i| (0..i).all(|j| rewards[i] == rewards[j] || shown[i] != shown[j]))
    };
    (MIN_REWARD_DECIMALS..=MAX_REWARD_DECIMALS).find(|&d| apart(d)).unwrap_or(MAX_REWARD_DECIMALS)
}

/// One attempt's lines, its reward to `decimals`. Every field is shown on its own line through
/// [`inline`] (a line break as the two characters `\n`), so an attempt's text cannot forge a `Reward:`
/// line or another attempt.
fn attempt(t: &Trajectory, use_groundtruth: bool, decimals: usize) -> String {
    let output = cut_chars(&t.output, SHOWN_OUTPUT_CHARS);
    let mut s = format!("Task: {}\nAttempt: {}\nReward: {:.decimals$}", inline(&t.query), inline(&output), t.reward);
    if let (true, Some(gt)) = (use_groundtruth, t.groundtruth.as_deref()) {
        s.push_str(&format!("\nCorrect answer: {}", inline(gt)));
    }
    s
}

/// Stage 1: one trajectory as numbered steps.
pub fn summarize(t: &Trajectory, use_groundtruth: bool) -> ChatRequest {
    let user = format!(
        "{}\n\nSummarise this attempt as numbered steps (\"1. …\"), one line each, at most 8 steps. Say which step \
         made it succeed or fail. Reply with the steps only.",
        attempt(t, use_groundtruth, MIN_REWARD_DECIMALS)
    );
    request(ANALYST, user, SUMMARY_TOKENS)
}

/// A summary or critique reply: trimmed, without a code fence around it, cut to
/// [`MAX_SUMMARY_CHARS`]; `Err` when nothing is left.
pub fn parse_text(reply: &str) -> Result<String, String> {
    let mut t = reply.trim();
    if let Some(rest) = t.strip_prefix("```") {
        let rest = rest.split_once('\n').map_or("", |(_, body)| body);
        t = rest.trim_end().strip_suffix("```").unwrap_or(rest).trim();
    }
    if t.is_empty() {
        return Err("the reply is empty".into());
    }
    Ok(t.chars().take(MAX_SUMMARY_CHARS).collect())
}

/// The group's trajectories, best reward first (ties in the given order), each with its summary; the
/// rewards with [`reward_decimals`], so the difference the prompt speaks of is shown.
fn group_block(group: &[Trajectory], use_groundtruth: bool) -> String {
    let d = reward_decimals(&group.iter().map(|t| t.reward).collect::<Vec<_>>());
    let mut order: Vec<&Trajectory> = group.iter().collect();
    order.sort_by(|a, b| b.reward.total_cmp(&a.reward));
    order
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let steps = inline(t.summary.as_deref().unwrap_or("(no summary)"));
            format!("## Attempt {} (reward {:.d$})\n{}\nSteps:\n{}", i + 1, t.reward, attempt(t, use_groundtruth, d), steps)
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Stage 2 (three-stage mode): at most `max_operations` operations from the group's contrast.
pub fn extract(group: &[Trajectory], library: &str, max_operations: usize, use_groundtruth: bool) -> ChatRequest {
    let user = format!(
        "Several attempts at the same task, best reward first:\n\n{}\n\n# Current experience library\n{}\n\n\
         Compare the better attempts with the worse ones: their rewards differ, so something made the difference. \
         Propose 1 to {max_operations} operations on the library that would help future attempts, as a JSON array. \
         Each operation is either \
         {{\"option\": \"add\", \"experience\": \"<one general, reusable sentence>\"}} or \
         {{\"option\": \"modify\", \"modified_from\": \"G<n>\", \"experience\": \"<the improved sentence>\"}}. \
         Do not repeat what the library already says. Reply with the JSON array only.",
        group_block(group, use_groundtruth),
        library_block(library)
    );
    request(ANALYST, user, OPERATIONS_TOKENS)
}

/// Stage 2 (four-stage mode): the group's lesson in prose.
pub fn critique(group: &[Trajectory], use_groundtruth: bool) -> ChatRequest {
    let user = format!(
        "Several attempts at the same task, best reward first:\n\n{}\n\nIn at most five sentences: what did the better \
         attempts do that the worse ones did not, and what general lesson follows? Reply with the sentences only.",
        group_block(group, use_groundtruth)
    );
    request(ANALYST, user, CRITIQUE_TOKENS)
}

/// Stage 3 (four-stage mode): one group's critique against the library, in upstream's vocabulary.
pub fn update(critique: &str, library: &str, max_operations: usize) -> ChatRequest {
    let user = format!(
        "# Lesson from a group of attempts\n{critique}\n\n# Current experience library\n{}\n\n\
         Update the library with this lesson: at most {max_operations} operations as a JSON array of \
         {{\"operation\": \"ADD\" | \"UPDATE\" | \"DELETE\" | \"NONE\", \"id\": \"G<n>\" (for UPDATE and DELETE), \
         \"content\": \"<one general sentence>\" (for ADD and UPDATE)}}. Reply with the JSON array only.",
        library_block(library)
    );
    request(ANALYST, user, OPERATIONS_TOKENS)
}

/// The last stage: every group's operations against the library, as a final plan.
pub fn consolidate(groups: &[Vec<Op>], library: &str) -> ChatRequest {
    let proposed: Vec<String> = groups
        .iter()
        .enumerate()
        .filter(|(_, ops)| !ops.is_empty())
        .map(|(i, ops)| {
            let lines: Vec<String> = ops.iter().map(|op| to_seed_json(op).to_string()).collect();
            format!("Group {}:\n{}", i + 1, lines.join("\n"))
        })
        .collect();
    let user = format!(
        "# Current experience library\n{}\n\n# Operations proposed by groups of attempts\n{}\n\n\
         Combine them into one final plan for the library: drop duplicates, merge proposals that say the same thing, \
         and merge or delete library entries they make redundant. Reply with a JSON array of operations, each one of \
         {{\"option\": \"add\", \"experience\": \"…\"}}, {{\"option\": \"modify\", \"modified_from\": \"G<n>\", \"experience\": \"…\"}}, \
         {{\"option\": \"merge\", \"merged_from\": [\"G<n>\", \"G<m>\"], \"experience\": \"…\"}} or \
         {{\"option\": \"delete\", \"delete_id\": \"G<n>\"}}. Reply with the JSON array only.",
        library_block(library),
        proposed.join("\n\n")
    );
    request(ANALYST, user, OPERATIONS_TOKENS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn t(output: &str, reward: f64) -> Trajectory {
        Trajectory {
            query: "Solve x² + 2x + 5 = 0".into(),
            output: output.into(),
            reward,
            groundtruth: Some("No real solutions".into()),
            summary: None,
        }
    }

    #[test]
    fn prompts_show_what_the_stage_needs() {
        let r = summarize(&t("discriminant -16, no real roots", 1.0), true);
        let user = &r.messages[1].content;
        assert!(user.contains("Reward: 1.00") && user.contains("Correct answer: No real solutions") && user.contains("numbered steps"));
        assert!(!summarize(&t("x", 0.0), false).messages[1].content.contains("Correct answer"));
        let group = [
            t("guessed x = 1", 0.0),
            Trajectory { summary: Some("1. Used the discriminant".into()), ..t("checked the discriminant", 1.0) },
        ];
        let e = &extract(&group, "", 3, true).messages[1].content;
        assert!(e.find("reward 1.00").unwrap() < e.find("reward 0.00").unwrap(), "best first: {e}");
        assert!(e.contains("(empty)") && e.contains("Propose 1 to 3 operations") && e.contains("1. Used the discriminant"));
        let c = &consolidate(
            &[vec![Op::Add { text: "Check the discriminant.".into(), confidence: None, domain: None }], vec![]],
            "[G0]. Verify.",
        )
        .messages[1]
            .content;
        assert!(c.contains("[G0]. Verify.") && c.contains("Group 1:") && !c.contains("Group 2:"), "{c}");
        let long = "y".repeat(SHOWN_OUTPUT_CHARS + 10);
        assert!(summarize(&t(&long, 0.5), true).messages[1].content.contains(&format!("{}…", "y".repeat(SHOWN_OUTPUT_CHARS))));
    }

    #[test]
    fn text_replies_lose_fences_and_must_say_something() {
        assert_eq!(parse_text("  1. a\n2. b  ").unwrap(), "1. a\n2. b");
        assert_eq!(parse_text("```text\n1. a\n```").unwrap(), "1. a");
        assert_eq!(parse_text("```\n1. a").unwrap(), "1. a");
        assert!(parse_text("   ").is_err() && parse_text("```\n```").is_err());
        assert_eq!(parse_text(&"z".repeat(5_000)).unwrap().chars().count(), MAX_SUMMARY_CHARS);
    }

    #[test]
    fn a_group_s_close_rewards_are_shown_apart() {
        let group = [t("a", 0.5), t("b", 0.4965741618546928), t("c", 0.5), t("d", 0.5)];
        let e = &extract(&group, "", 3, true).messages[1].content;
        assert!(e.contains("(reward 0.497)") && e.contains("Reward: 0.497") && e.matches("(reward 0.500)").count() == 3, "{e}");
        assert!(!e.contains("(reward 0.50)"), "{e}");
        let c = &critique(&group, true).messages[1].content;
        assert!(c.contains("(reward 0.497)"), "{c}");
        let wide = [t("a", 1.0), t("b", 0.25), t("c", 0.0)];
        assert_eq!(reward_decimals(&[1.0, 0.25, 0.0]), 2);
        assert!(extract(&wide, "", 3, true).messages[1].content.contains("(reward 0.25)"));
        assert_eq!(reward_decimals(&[0.3, 0.3]), 2, "equal rewards need no more");
        assert_eq!(reward_decimals(&[0.5, 0.5 - 1e-9]), 9);
    }

    proptest! {
        /// Two different rewards (at least 1e-9 apart, the least spread that counts as variation) print
        /// differently; rewards 0.01 or more apart keep 2 decimals.
        #[test]
        fn different_rewards_print_differently(a in 0.0f64..=1.0, gap in 1e-9f64..1.0, third in 0.0f64..=1.0) {
            let b = (a + gap).min(1.0);
            prop_assume!(a != b);
            let rewards = [a, b, third];
            let d = reward_decimals(&rewards);
            prop_assert_ne!(format!("{a:.d$}"), format!("{b:.d$}"));
            let far = |x: f64, y: f64| x == y || (x - y).abs() >= 0.01;
            if far(a, b) && far(a, third) && far(b, third) {
                prop_assert_eq!(d, MIN_REWARD_DECIMALS);
            }
        }

        #[test]
        fn parse_text_never_panics(s in "\\PC{0,300}") {
            if let Ok(t) = parse_text(&s) {
                prop_assert!(!t.is_empty() && t.chars().count() <= MAX_SUMMARY_CHARS);
            }
        }
    }
}
