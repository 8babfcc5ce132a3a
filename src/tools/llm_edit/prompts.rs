//! Pure prompt building and reply validation for the LLM-backed `merge_memory` and `split_memory`
//! strategies.
//!
//! The tools call the LLM only when the server runs with `--llm-edit` (and never for `concatenate`:
//! an LLM adds nothing to a concatenation); otherwise they use the offline strategies of
//! [`crate::tools`]. This module holds the parts of that path that need no I/O, so they can be tested
//! without a model: [`merge_request`] and [`split_request`] build the requests, [`parse_merge`] and
//! [`parse_split`] turn a reply into memory text or say why it is unusable.
//!
//! Replies are cleaned leniently (code fences, one pair of surrounding quotes, a leading label such as
//! `Merged memory:`, a "Here is ..." preamble line, whitespace runs) and checked strictly (empty,
//! refusals, the memory length limit, the number of parts). A rejected reply is not a failure of the
//! tool call: the tool falls back to the offline strategy and puts the returned reason in its note.
//! Which memories a merged or split memory points back to (provenance), and every other rule about
//! the store, belong to the tools, not to this module.

use std::collections::HashSet;

use serde_json::Value;

use crate::llm::{ChatMessage, ChatRequest};
use crate::text::reply::{self, collapse, strip_quotes};
use crate::tools::{MergeStrategy, SplitCriteria};

/// Reply length cap of edit requests.
pub const EDIT_MAX_TOKENS: u32 = 512;

/// The role every edit prompt starts with.
const ROLE: &str = "You maintain the long-term memory of a conversational agent. Each memory is a fact \
from a long conversation between two people, written as plain third-person sentences, for example: \
\"Caroline attended an LGBTQ support group on 7 May 2023.\"";

/// The rules shared by merge and split prompts (one `- ` line each).
const RULES: &str = "- Keep every name, date, number and place exactly as written.\n\
- Do not add facts that are not in the input.\n\
- Write in the third person, in plain sentences.\n";

/// An example of the split reply format (a topic split).
const SPLIT_EXAMPLE: &str = "Example of the reply format:\n\
Memory: Melanie ran a charity race for mental health on 20 May 2023 and she is painting a sunset with her kids.\n\
Reply: [\"Melanie ran a charity race for mental health on 20 May 2023.\", \"Melanie is painting a sunset with her kids.\"]";

/// How many `[` positions [`parse_split`] tries as the start of a JSON array before giving up.
const MAX_ARRAY_STARTS: usize = 32;

/// The request for merging `texts` (2..=5 memory texts, in order) with `strategy`; `None` for
/// [`MergeStrategy::Concatenate`] (it stays offline: an LLM adds nothing to a concatenation).
/// `max_chars` is the memory text length limit, stated in the prompt.
///
/// The system message holds the role, the task and the rules; the user message lists the memories,
/// numbered from 1, each on one line (whitespace runs inside a memory become one space).
pub fn merge_request(texts: &[&str], strategy: MergeStrategy, max_chars: usize) -> Option<ChatRequest> {
    let task = match strategy {
        MergeStrategy::Concatenate => return None,
        MergeStrategy::Summarize => {
            "Merge the numbered memories into ONE memory that keeps every fact of every input and is shorter \
             than all of them put together: state each fact once and drop repetition."
        }
        MergeStrategy::ExtractCommon => {
            "Merge the numbered memories into ONE memory that states only what they have in common: the facts \
             and entities (people, places, dates, events) that two or more of them share. Leave out anything \
             that only one of them says."
        }
    };
    let system = format!(
        "{ROLE}\n\n{task}\n\nRules:\n{RULES}- The merged memory is at most {max_chars} characters.\n\
         - No preamble, label, quotes or explanation: reply with the merged memory text only."
    );
    let mut user = String::from("Memories:\n");
    for (i, text) in texts.iter().enumerate() {
        user.push_str(&format!("{}. {}\n", i + 1, collapse(text)));
    }
    user.push_str("\nReply with the merged memory text only.");
    Some(request(system, user))
}

/// The request for splitting `text` by `criteria` into 2..=`max_parts` parts (a `max_parts` below 2 is
/// stated as 2). `max_chars` is the memory text length limit of each part. `speakers` are known speaker
/// names; the [`SplitCriteria::Speaker`] prompt lists them (blank and repeated names are skipped).
///
/// The system message holds the role, the criterion, the rules and an example of the reply format; the
/// user message holds the memory (whitespace runs become one space).
pub fn split_request(text: &str, criteria: SplitCriteria, max_parts: usize, max_chars: usize, speakers: &[&str]) -> ChatRequest {
    let max_parts = max_parts.max(2);
    let how = match criteria {
        SplitCriteria::Temporal => {
            "by time: one part per distinct time or event (facts that share one time or event stay in one part)".to_string()
        }
        SplitCriteria::Thematic => "by topic: one part per distinct topic (facts on the same topic stay in one part)".to_string(),
        SplitCriteria::Speaker => {
            let mut names: Vec<String> = Vec::new();
            for name in speakers.iter().map(|s| collapse(s)) {
                if !name.is_empty() && !names.contains(&name) {
                    names.push(name);
                }
            }
            let base = "by person: one part per person, holding what that person said, did, has or feels";
            if names.is_empty() {
                base.to_string()
            } else {
                format!("{base}. Known speakers: {}", names.join(", "))
            }
        }
    };
    let system = format!(
        "{ROLE}\n\nSplit the memory {how}.\n\nRules:\n\
         - Reply with a JSON array of 2 to {max_parts} strings, each one a self-contained memory: resolve \
         pronouns to names so that each part stands alone.\n\
         - Together the parts keep every fact of the memory.\n\
         {RULES}- Each part is at most {max_chars} characters.\n\
         - If the memory cannot be split this way, reply [].\n\
         - No preamble or explanation: reply with the JSON array only.\n\n{SPLIT_EXAMPLE}"
    );
    let user = format!("Memory:\n{}\n\nReply with the JSON array only.", collapse(text));
    request(system, user)
}

/// The merged text from a reply, or why the reply is unusable (the caller then falls back to the
/// offline strategy and puts the reason in a note).
///
/// Cleaning: trim; keep only the inside of a ``` fence; drop a "Here is ..." preamble line; strip a
/// leading label (`Merged memory:`, `Memory:`, `Summary:`, ..., any case, optionally in `**bold**`);
/// strip one surrounding pair of quotes; collapse whitespace runs (newlines included) to one space.
/// Errors: the cleaned text is empty, a refusal or non-answer ("I cannot", "I'm sorry", "As an AI",
/// "None", ...), longer than `max_chars` characters, or not shorter than `sources_chars`, the length of
/// the merged memories together (see [`sources_chars`]): both LLM strategies promise a text shorter than
/// their inputs, and a small model often returns the memories concatenated instead.
pub fn parse_merge(reply: &str, max_chars: usize, sources_chars: usize) -> Result<String, String> {
    let text = clean_reply(reply);
    if text.is_empty() {
        return Err("the reply is empty".to_string());
    }
    if let Some(why) = refusal(&text) {
        return Err(format!("the reply is {why}"));
    }
    let len = text.chars().count();
    if len > max_chars {
        return Err(format!("the reply is {len} characters, over the limit of {max_chars}"));
    }
    if len >= sources_chars {
        return Err(format!("the reply is {len} characters, not shorter than the {sources_chars} of the memories it merges"));
    }
    Ok(text)
}

/// The length in characters of `texts` as the merge prompt shows them (whitespace runs collapsed).
pub fn sources_chars(texts: &[&str]) -> usize {
    texts.iter().map(|t| collapse(t).chars().count()).sum()
}

/// The parts from a reply, or why the reply is unusable (the caller then falls back to the offline
/// strategy and puts the reason in a note).
///
/// Accepted: a JSON array of strings, also inside a ``` / ```json fence or between other text (the
/// outermost `[`...`]` first, then each `[` in turn); failing that, a bulleted or numbered list
/// (`- x`, `* x`, `• x`, `1. x`, `1) x`; other lines are ignored) of at least 2 items. Each part is
/// cleaned (one pair of surrounding quotes stripped, whitespace runs collapsed, trimmed); empty parts
/// and exact duplicates (the later ones) are dropped.
/// Errors: `[]`, fewer than 2 or more than `max_parts` parts, a part over `max_chars` characters or a
/// refusal, a non-string array item, nothing parseable.
pub fn parse_split(reply: &str, max_parts: usize, max_chars: usize) -> Result<Vec<String>, String> {
    let items = match find_json_array(reply) {
        Some(Ok(items)) if items.is_empty() => return Err("the model found nothing to split".to_string()),
        Some(Ok(items)) => items,
        Some(Err(why)) => return Err(why),
        None => {
            let items = list_items(reply);
            if items.len() < 2 {
                let text = clean_reply(reply);
                return Err(if text.is_empty() {
                    "the reply is empty".to_string()
                } else if let Some(why) = refusal(&text) {
                    format!("the reply is {why}")
                } else {
                    "the reply is neither a json array of strings nor a list".to_string()
                });
            }
            items
        }
    };
    let mut seen: HashSet<String> = HashSet::new();
    let mut parts: Vec<String> = Vec::new();
    for item in &items {
        let part = collapse(strip_quotes(item.trim()));
        if !part.is_empty() && seen.insert(part.clone()) {
            parts.push(part);
        }
    }
    let n = parts.len();
    if n > max_parts {
        return Err(format!("the reply has {n} parts, over the limit of {max_parts}"));
    }
    if n < 2 {
        let noun = if n == 1 { "part" } else { "parts" };
        return Err(format!("the reply has {n} {noun}; a split needs 2 to {max_parts}"));
    }
    for (i, part) in parts.iter().enumerate() {
        if let Some(why) = refusal(part) {
            return Err(format!("part {} is {why}", i + 1));
        }
        let len = part.chars().count();
        if len > max_chars {
            return Err(format!("part {} is {len} characters, over the limit of {max_chars}", i + 1));
        }
    }
    Ok(parts)
}

/// A deterministic edit request of one system and one user message.
fn request(system: String, user: String) -> ChatRequest {
    ChatRequest { messages: vec![ChatMessage::system(system), ChatMessage::user(user)], max_tokens: EDIT_MAX_TOKENS, temperature: 0.0 }
}

/// Labels a merged-memory reply may start with (`Merged memory:`, ...).
const LABELS: [&str; 16] = [
    "merged memory",
    "merged memories",
    "merged",
    "new memory",
    "common memory",
    "shared memory",
    "memory",
    "summary",
    "summarized memory",
    "common facts",
    "in common",
    "answer",
    "final answer",
    "output",
    "result",
    "response",
];

/// The cleaned text of a free-text reply: fence, preamble line, label and quotes removed, whitespace
/// collapsed.
fn clean_reply(reply: &str) -> String {
    let s = reply::unfence(reply.trim());
    let s = reply::strip_preamble(s);
    reply::unlabel(s, &LABELS)
}

/// What kind of non-memory `text` (cleaned, non-empty) is: "a refusal" ("I cannot", "I'm sorry", "As an
/// AI", ...) or "a non-answer" ("None", "N/A", "Nothing in common", ...); `None` for a usable text.
fn refusal(text: &str) -> Option<&'static str> {
    const REFUSALS: [&str; 18] = [
        "i cannot",
        "i can't",
        "i can not",
        "i'm sorry",
        "i am sorry",
        "sorry",
        "as an ai",
        "i'm unable",
        "i am unable",
        "i'm not able",
        "i am not able",
        "i apologize",
        "i won't",
        "i will not",
        "i don't",
        "i do not",
        "unfortunately, i",
        "i'm afraid",
    ];
    const NON_ANSWERS: [&str; 6] =
        ["there is nothing in common", "there are no common", "nothing in common", "the memories have nothing", "no common", "no shared"];
    const EMPTY_ANSWERS: [&str; 8] = ["none", "n/a", "na", "null", "nothing", "[]", "{}", "-"];
    let head: String = text.chars().take(40).collect::<String>().to_lowercase().replace('\u{2019}', "'");
    if REFUSALS.iter().any(|r| head.starts_with(r)) {
        return Some("a refusal");
    }
    if NON_ANSWERS.iter().any(|r| head.starts_with(r)) {
        return Some("a non-answer");
    }
    let whole = head.trim_end_matches(['.', '!']);
    if text.chars().count() <= 40 && EMPTY_ANSWERS.contains(&whole) {
        return Some("a non-answer");
    }
    None
}

/// The first JSON array in `reply`: `Some(Ok(strings))` for an array of strings, `Some(Err(why))` when
/// the arrays found hold other values, `None` when no array parses. Tries the outermost `[`...`]` (also
/// without a trailing comma before the `]`), then a value starting at each `[` (skipping the inside of
/// arrays already parsed, so an array of arrays is not mistaken for its first item).
fn find_json_array(reply: &str) -> Option<Result<Vec<String>, String>> {
    if let (Some(open), Some(close)) = (reply.find('['), reply.rfind(']')) {
        if open < close {
            let outer = &reply[open..=close];
            let lenient = outer[..outer.len() - 1].trim_end().strip_suffix(',').map(|s| format!("{s}]"));
            for candidate in std::iter::once(outer.to_string()).chain(lenient) {
                if let Ok(Value::Array(items)) = serde_json::from_str::<Value>(&candidate) {
                    return Some(strings(items));
                }
            }
        }
    }
    let mut bad: Option<String> = None;
    let mut skip_until = 0;
    let mut tries = 0;
    for (at, _) in reply.match_indices('[') {
        if at < skip_until {
            continue;
        }
        if tries == MAX_ARRAY_STARTS {
            break;
        }
        tries += 1;
        let mut values = serde_json::Deserializer::from_str(&reply[at..]).into_iter::<Value>();
        if let Some(Ok(Value::Array(items))) = values.next() {
            match strings(items) {
                Ok(parts) => return Some(Ok(parts)),
                Err(why) => {
                    bad.get_or_insert(why);
                    skip_until = at + values.byte_offset();
                }
            }
        }
    }
    bad.map(Err)
}

/// The strings of a JSON array, or which item is not a string.
fn strings(items: Vec<Value>) -> Result<Vec<String>, String> {
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let Value::String(s) = item else {
            return Err(format!("item {} of the array is not a string", i + 1));
        };
        out.push(s);
    }
    Ok(out)
}

/// The items of a bulleted or numbered list in `reply` (`- x`, `* x`, `• x`, `+ x`, `1. x`, `1) x`);
/// other lines are ignored.
fn list_items(reply: &str) -> Vec<String> {
    reply.lines().filter_map(|line| list_item(line.trim())).map(str::to_string).collect()
}

/// The text of one list line (trimmed), if `line` is a list item.
fn list_item(line: &str) -> Option<&str> {
    for bullet in ['-', '*', '\u{2022}', '+'] {
        if let Some(rest) = line.strip_prefix(bullet) {
            return rest.starts_with(char::is_whitespace).then(|| rest.trim());
        }
    }
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    if !(1..=2).contains(&digits) {
        return None;
    }
    let rest = &line[digits..];
    let rest = rest.strip_prefix('.').or_else(|| rest.strip_prefix(')'))?;
    rest.starts_with(char::is_whitespace).then(|| rest.trim())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Role;
    use proptest::prelude::*;

    const M1: &str = "Caroline attended an LGBTQ support group on 7 May 2023.";
    const M2: &str = "Caroline found the LGBTQ support group on 7 May 2023 very empowering.";
    const M3: &str = "Melanie painted a lake sunrise in 2022.";

    fn ok_merge(reply: &str) -> String {
        match parse_merge(reply, 300, usize::MAX) {
            Ok(text) => text,
            Err(why) => panic!("{reply:?} rejected: {why}"),
        }
    }

    #[test]
    fn parse_merge_cleans_realistic_replies() {
        let want = "Caroline attended an LGBTQ support group on 7 May 2023 and found it very empowering.";
        let table: &[(&str, &str)] = &[
            (want, want),
            ("  Caroline attended an LGBTQ support group on 7 May 2023 and found it very empowering.\n", want),
            ("\"Caroline attended an LGBTQ support group on 7 May 2023 and found it very empowering.\"", want),
            ("\u{201c}Caroline attended an LGBTQ support group on 7 May 2023 and found it very empowering.\u{201d}", want),
            ("'Caroline attended an LGBTQ support group on 7 May 2023 and found it very empowering.'", want),
            ("Merged memory: Caroline attended an LGBTQ support group on 7 May 2023 and found it very empowering.", want),
            ("MERGED MEMORY:\nCaroline attended an LGBTQ support group on 7 May 2023 and found it very empowering.", want),
            ("memory: Caroline attended an LGBTQ support group on 7 May 2023 and found it very empowering.", want),
            ("Summary: Caroline attended an LGBTQ support group on 7 May 2023 and found it very empowering.", want),
            ("**Merged memory:** Caroline attended an LGBTQ support group on 7 May 2023 and found it very empowering.", want),
            ("Merged memory: \"Caroline attended an LGBTQ support group on 7 May 2023 and found it very empowering.\"", want),
            ("```\nCaroline attended an LGBTQ support group on 7 May 2023 and found it very empowering.\n```", want),
            ("```text\nCaroline attended an LGBTQ support group\non 7 May 2023 and found it very empowering.\n```", want),
            ("Here is the merged memory:\n\nCaroline attended an LGBTQ support group on 7 May 2023 and found it very empowering.", want),
            ("Here is the merged memory: Caroline attended an LGBTQ support group on 7 May 2023 and found it very empowering.", want),
            ("Okay, here's the memory:\nCaroline attended an LGBTQ support group on 7 May 2023 and found it very empowering.", want),
            ("Sure! Here it is:\n```\nCaroline attended an LGBTQ support group on 7 May 2023 and found it very empowering.\n```\n", want),
            ("Caroline attended an LGBTQ support group\n\n on 7 May 2023   and found it\tvery empowering.", want),
            // Quotes that do not enclose the whole text stay.
            ("\"Hi\" said Caroline, and \"bye\"", "\"Hi\" said Caroline, and \"bye\""),
            ("'Caroline's dog loves Melanie's garden.'", "Caroline's dog loves Melanie's garden."),
            ("'Tis' what Caroline said, 'twice'", "'Tis' what Caroline said, 'twice'"),
            // A memory that merely starts like a label word stays whole.
            ("Memory of the trip to Paris stays with Melanie.", "Memory of the trip to Paris stays with Melanie."),
            ("Caroline: attended a parade.", "Caroline: attended a parade."),
            ("Sure enough, Caroline adopted a dog in 2023.", "Sure enough, Caroline adopted a dog in 2023."),
            ("Melanie said: here is my painting.", "Melanie said: here is my painting."),
            (
                "Caroline und Mélanie trafen sich am 7. Mai 2023 in Zürich. 🎉",
                "Caroline und Mélanie trafen sich am 7. Mai 2023 in Zürich. 🎉",
            ),
        ];
        for (reply, want) in table {
            assert_eq!(ok_merge(reply), *want, "reply {reply:?}");
        }
    }

    #[test]
    fn parse_merge_rejects_unusable_replies() {
        let table: &[(&str, usize, &str)] = &[
            ("", 300, "the reply is empty"),
            ("   \n\t ", 300, "the reply is empty"),
            ("\"\"", 300, "the reply is empty"),
            ("```\n```", 300, "the reply is empty"),
            ("Merged memory:", 300, "the reply is empty"),
            ("I cannot merge these memories because they are unrelated.", 300, "the reply is a refusal"),
            ("I can\u{2019}t help with that.", 300, "the reply is a refusal"),
            ("i'm sorry, but these memories share nothing.", 300, "the reply is a refusal"),
            ("Sorry, I can't do that.", 300, "the reply is a refusal"),
            ("As an AI language model, I cannot know.", 300, "the reply is a refusal"),
            ("Merged memory: I'm sorry, there is nothing to merge.", 300, "the reply is a refusal"),
            ("\"I cannot do this.\"", 300, "the reply is a refusal"),
            ("Here is the merged memory:\n", 300, "the reply is empty"),
            ("None.", 300, "the reply is a non-answer"),
            ("N/A", 300, "the reply is a non-answer"),
            ("There is nothing in common between these memories.", 300, "the reply is a non-answer"),
            ("Caroline attended an LGBTQ support group on 7 May 2023.", 20, "the reply is 55 characters, over the limit of 20"),
        ];
        for (reply, max, want) in table {
            assert_eq!(parse_merge(reply, *max, usize::MAX), Err(want.to_string()), "reply {reply:?}");
        }
    }

    #[test]
    fn a_merge_no_shorter_than_its_sources_is_refused() {
        // Real replies of Qwen2.5-Coder-0.5B-Instruct (scripts/install-llm.sh) to the summarize and
        // extract_common prompts: the two memories back, concatenated.
        let a = "Caroline attended an LGBTQ support group recently and found the transgender stories inspiring.";
        let b = "Caroline is planning to continue her education and explore career options in counseling or mental health to support those with similar issues.";
        let total = sources_chars(&[a, b]);
        assert_eq!(total, a.len() + b.len());
        let concatenated = format!("{a} {b}");
        assert_eq!(
            parse_merge(&concatenated, 2000, total),
            Err(format!("the reply is {} characters, not shorter than the {total} of the memories it merges", total + 1))
        );
        let c = "Melanie painted a lake sunrise last year which holds special meaning to her.";
        let d = "Melanie is going swimming with the kids after the conversation.";
        assert!(parse_merge(&format!("{c} {d}"), 2000, sources_chars(&[c, d])).unwrap_err().contains("not shorter"));
        // A real summary passes.
        let summary = "Caroline found the LGBTQ support group inspiring and plans to study counseling to support others.";
        assert_eq!(parse_merge(summary, 2000, total), Ok(summary.to_string()));
        assert_eq!(sources_chars(&["a  b", " c\n"]), 4);
    }

    #[test]
    fn a_real_one_part_split_is_refused() {
        // Qwen2.5-Coder-0.5B-Instruct's reply to the thematic split prompt: the memory back, as one part.
        let reply = "[\"Caroline is considering a career in counseling and mental health, particularly working with trans people to help them accept themselves and support their mental health.\"]";
        assert_eq!(parse_split(reply, 3, 2000), Err("the reply has 1 part; a split needs 2 to 3".to_string()));
    }

    #[test]
    fn parse_merge_counts_chars_not_bytes() {
        let text = "Zoë visited Zürich with Ólafur in 2023.";
        assert_eq!(text.chars().count(), 39);
        assert!(text.len() > 39);
        assert_eq!(parse_merge(text, 39, usize::MAX), Ok(text.to_string()));
        assert_eq!(parse_merge(text, 38, usize::MAX), Err("the reply is 39 characters, over the limit of 38".to_string()));
        let long = "x".repeat(1234);
        assert_eq!(parse_merge(&long, 1000, usize::MAX), Err("the reply is 1234 characters, over the limit of 1000".to_string()));
    }

    fn parts(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parse_split_accepts_realistic_replies() {
        let a = "Caroline went to a pride parade in June 2023.";
        let b = "Caroline is planning to adopt children.";
        let c = "Melanie ran a charity race on 20 May 2023.";
        let table: Vec<(String, Vec<String>)> = vec![
            (format!("[\"{a}\", \"{b}\"]"), parts(&[a, b])),
            (format!("```json\n[\n  \"{a}\",\n  \"{b}\"\n]\n```"), parts(&[a, b])),
            (format!("```\n[\"{a}\", \"{b}\", \"{c}\"]\n```"), parts(&[a, b, c])),
            (format!("Here are the parts:\n[\"{a}\", \"{b}\"]\nI kept every fact."), parts(&[a, b])),
            (format!("Sure! Split by topic [2 parts]:\n```json\n[\"{a}\", \"{b}\"]\n```"), parts(&[a, b])),
            (format!("[\"{a}\", \"{b}\"]. Note: part [1] is about the parade."), parts(&[a, b])),
            (format!("{{\"parts\": [\"{a}\", \"{b}\"]}}"), parts(&[a, b])),
            (format!("[\"{a}\", \"{b}\",]"), parts(&[a, b])),
            (format!("[\"  {a}  \", \"{b}\\n\", \"\", \"   \"]"), parts(&[a, b])),
            (format!("[\"{a}\", \"{b}\", \"{a}\", \" {b} \"]"), parts(&[a, b])),
            (format!("[\"Caroline went to a pride parade\\nin June 2023.\", \"\\\"{b}\\\"\"]"), parts(&[a, b])),
            (format!("- {a}\n- {b}"), parts(&[a, b])),
            (format!("Here is the split:\n\n* {a}\n* {b}\n\nHope this helps!"), parts(&[a, b])),
            (format!("1. {a}\n2. {b}\n3. {c}"), parts(&[a, b, c])),
            (format!("1) {a}\n2) {b}"), parts(&[a, b])),
            (format!("1. \"{a}\"\n2. \"{b}\""), parts(&[a, b])),
            (format!("\u{2022} {a}\n\u{2022} {b}"), parts(&[a, b])),
            (
                "[\"Zoë trägt 🎉 in Zürich.\", \"Ólafur spielt Geige.\"]".to_string(),
                parts(&["Zoë trägt 🎉 in Zürich.", "Ólafur spielt Geige."]),
            ),
        ];
        for (reply, want) in table {
            assert_eq!(parse_split(&reply, 4, 200), Ok(want), "reply {reply:?}");
        }
    }

    #[test]
    fn parse_split_rejects_unusable_replies() {
        let a = "Caroline went to a pride parade in June 2023.";
        let b = "Caroline is planning to adopt children.";
        let table: Vec<(String, usize, usize, &str)> = vec![
            ("[]".to_string(), 4, 200, "the model found nothing to split"),
            ("```json\n[]\n```".to_string(), 4, 200, "the model found nothing to split"),
            ("This memory holds one fact only: []".to_string(), 4, 200, "the model found nothing to split"),
            (format!("[\"{a}\"]"), 4, 200, "the reply has 1 part; a split needs 2 to 4"),
            (format!("[\"{a}\", \"{a}\"]"), 4, 200, "the reply has 1 part; a split needs 2 to 4"),
            ("[\"\", \"  \"]".to_string(), 4, 200, "the reply has 0 parts; a split needs 2 to 4"),
            ("[\"a\", \"b\", \"c\", \"d\", \"e\"]".to_string(), 4, 200, "the reply has 5 parts, over the limit of 4"),
            (format!("[\"{a}\", \"{b}\"]"), 4, 40, "part 1 is 45 characters, over the limit of 40"),
            (format!("[\"{a}\", 2]"), 4, 200, "item 2 of the array is not a string"),
            (format!("[\"{a}\", null]"), 4, 200, "item 2 of the array is not a string"),
            (format!("[[\"{a}\"], [\"{b}\"]]"), 4, 200, "item 1 of the array is not a string"),
            (format!("[{{\"text\": \"{a}\"}}, {{\"text\": \"{b}\"}}]"), 4, 200, "item 1 of the array is not a string"),
            (format!("[\"{a}\", \"I'm sorry, I cannot split the rest.\"]"), 4, 200, "part 2 is a refusal"),
            ("".to_string(), 4, 200, "the reply is empty"),
            ("I'm sorry, but this memory cannot be split by speaker.".to_string(), 4, 200, "the reply is a refusal"),
            (format!("{a} {b}"), 4, 200, "the reply is neither a json array of strings nor a list"),
            (format!("- {a}"), 4, 200, "the reply is neither a json array of strings nor a list"),
            (format!("[\"{a}\", \"{b}\""), 4, 200, "the reply is neither a json array of strings nor a list"),
            ("}{][ garbage ]]][[ \u{0} \u{ffff}".to_string(), 4, 200, "the reply is neither a json array of strings nor a list"),
            (
                "2023. Caroline went to a parade.\n2024. Caroline adopted a dog.".to_string(),
                4,
                200,
                "the reply is neither a json array of strings nor a list",
            ),
        ];
        for (reply, max_parts, max_chars, want) in table {
            assert_eq!(parse_split(&reply, max_parts, max_chars), Err(want.to_string()), "reply {reply:?}");
        }
    }

    #[test]
    fn parse_split_survives_deep_nesting_and_many_brackets() {
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(parse_split(&deep, 4, 200).is_err());
        let many = "[x ".repeat(10_000);
        assert!(parse_split(&many, 4, 200).is_err());
        let huge = format!("[\"{}\", \"b\"]", "a".repeat(100_000));
        assert_eq!(parse_split(&huge, 4, 200), Err("part 1 is 100000 characters, over the limit of 200".to_string()));
    }

    fn system_and_user(req: &ChatRequest) -> (&str, &str) {
        assert_eq!(req.messages.len(), 2);
        assert_eq!(req.messages[0].role, Role::System);
        assert_eq!(req.messages[1].role, Role::User);
        assert_eq!(req.temperature, 0.0);
        assert_eq!(req.max_tokens, EDIT_MAX_TOKENS);
        (&req.messages[0].content, &req.messages[1].content)
    }

    fn assert_rules(system: &str) {
        for rule in [
            "Keep every name, date, number and place exactly as written",
            "Do not add facts that are not in the input",
            "third person, in plain sentences",
            "No preamble",
        ] {
            assert!(system.contains(rule), "missing rule {rule:?} in {system}");
        }
    }

    #[test]
    fn merge_request_holds_texts_rules_and_limit() {
        for strategy in [MergeStrategy::Summarize, MergeStrategy::ExtractCommon] {
            let req = merge_request(&[M1, M2, M3], strategy, 777);
            let Some(req) = req else { panic!("{strategy:?} gave no request") };
            let (system, user) = system_and_user(&req);
            assert_rules(system);
            assert!(system.contains("777 characters"));
            assert!(system.contains("ONE memory"));
            assert!(user.contains(&format!("1. {M1}\n2. {M2}\n3. {M3}\n")), "{user}");
        }
        let summarize = merge_request(&[M1, M2], MergeStrategy::Summarize, 500);
        let common = merge_request(&[M1, M2], MergeStrategy::ExtractCommon, 500);
        let (Some(summarize), Some(common)) = (summarize, common) else { panic!("no request") };
        assert!(summarize.messages[0].content.contains("keeps every fact of every input and is shorter"));
        assert!(common.messages[0].content.contains("only what they have in common"));
        assert!(common.messages[0].content.contains("only one of them says"));
        assert_eq!(merge_request(&[M1, M2], MergeStrategy::Concatenate, 500), None);
    }

    #[test]
    fn merge_request_keeps_each_memory_on_one_line() {
        let Some(req) = merge_request(&["Caroline went\nto Paris.", "2. Melanie  stayed."], MergeStrategy::Summarize, 500) else {
            panic!("no request")
        };
        assert!(req.messages[1].content.contains("1. Caroline went to Paris.\n2. 2. Melanie stayed.\n"));
    }

    #[test]
    fn split_request_holds_text_rules_and_limits() {
        let text = "Caroline went to a pride parade in June 2023 and Melanie ran a charity race on 20 May 2023.";
        for (criteria, marker) in
            [(SplitCriteria::Temporal, "by time"), (SplitCriteria::Thematic, "by topic"), (SplitCriteria::Speaker, "by person")]
        {
            let req = split_request(text, criteria, 3, 444, &["Caroline", "Melanie"]);
            let (system, user) = system_and_user(&req);
            assert_rules(system);
            assert!(system.contains(marker), "{criteria:?}: {system}");
            assert!(system.contains("JSON array of 2 to 3 strings"));
            assert!(system.contains("444 characters"));
            assert!(system.contains("resolve pronouns to names"));
            assert!(system.contains("reply []"));
            assert!(user.contains(text));
            let lists = system.contains("Known speakers: Caroline, Melanie.");
            assert_eq!(lists, criteria == SplitCriteria::Speaker, "{criteria:?}");
        }
        let req = split_request("x", SplitCriteria::Speaker, 5, 100, &[" ", "Caroline", "Caroline"]);
        assert!(req.messages[0].content.contains("Known speakers: Caroline."));
        let req = split_request("x", SplitCriteria::Speaker, 5, 100, &[]);
        assert!(!req.messages[0].content.contains("Known speakers"));
        assert!(!req.messages[0].content.contains(".."));
        let req = split_request("x", SplitCriteria::Temporal, 0, 100, &[]);
        assert!(req.messages[0].content.contains("JSON array of 2 to 2 strings"));
    }

    #[test]
    fn the_split_example_parses() {
        let Some(reply) = SPLIT_EXAMPLE.split("Reply: ").nth(1) else { panic!("no example reply") };
        assert_eq!(parse_split(reply, 2, 100).map(|p| p.len()), Ok(2));
    }

    fn check_merge(reply: &str, max_chars: usize) {
        if let Ok(text) = parse_merge(reply, max_chars, usize::MAX) {
            assert!(!text.is_empty());
            assert!(text.chars().count() <= max_chars);
            assert_eq!(text, collapse(&text));
        }
    }

    fn check_split(reply: &str, max_parts: usize, max_chars: usize) {
        if let Ok(parts) = parse_split(reply, max_parts, max_chars) {
            assert!((2..=max_parts).contains(&parts.len()), "{} parts", parts.len());
            let distinct: HashSet<&String> = parts.iter().collect();
            assert_eq!(distinct.len(), parts.len());
            for part in &parts {
                assert!(!part.is_empty());
                assert!(part.chars().count() <= max_chars);
                assert_eq!(*part, collapse(part));
            }
        }
    }

    proptest! {
        #[test]
        fn parsers_never_panic_and_respect_limits(reply in any::<String>(), max_parts in 0usize..8, max_chars in 0usize..120) {
            check_merge(&reply, max_chars);
            check_split(&reply, max_parts, max_chars);
        }

        #[test]
        fn parsers_respect_limits_on_reply_shaped_input(
            items in prop::collection::vec("[ a-zA-Zé'\"\\[\\]`*-]{0,30}", 0..8),
            shape in 0usize..4,
            max_parts in 0usize..6,
            max_chars in 0usize..40,
        ) {
            let reply = match shape {
                0 => serde_json::to_string(&items).unwrap_or_default(),
                1 => format!("```json\n{}\n```", serde_json::to_string(&items).unwrap_or_default()),
                2 => items.iter().map(|i| format!("- {i}")).collect::<Vec<_>>().join("\n"),
                _ => items.iter().enumerate().map(|(n, i)| format!("{}. {i}", n + 1)).collect::<Vec<_>>().join("\n"),
            };
            check_merge(&reply, max_chars);
            check_split(&reply, max_parts, max_chars);
            if let Some(first) = items.first() {
                check_merge(first, max_chars);
            }
        }

        #[test]
        fn requests_carry_every_text(texts in prop::collection::vec(any::<String>(), 2..=5), max_chars in 0usize..5000) {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            for strategy in [MergeStrategy::Summarize, MergeStrategy::ExtractCommon] {
                let Some(req) = merge_request(&refs, strategy, max_chars) else { panic!("no request") };
                for (i, text) in texts.iter().enumerate() {
                    let line = format!("{}. {}\n", i + 1, collapse(text));
                    prop_assert!(req.messages[1].content.contains(&line));
                }
            }
            let req = split_request(&texts[0], SplitCriteria::Speaker, 4, max_chars, &refs);
            prop_assert!(req.messages[1].content.contains(&collapse(&texts[0])));
            let limit = format!("{max_chars} characters");
            prop_assert!(req.messages[0].content.contains(&limit));
        }
    }
}
