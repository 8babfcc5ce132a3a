//! Reading model replies, shared by every prompt whose reply memgym reads (the QA answer of the LLM
//! evaluators, the merged text of `--llm-edit`, the policy's tool calls, the banks' LLM operations): the
//! fenced code blocks of a reply ([`fences`], the one fence rule), a balanced JSON span ([`balanced_end`]),
//! and the cleaning of free text: a "Here is ..." preamble, a leading label, one pair of surrounding
//! quotes, whitespace runs and refused characters. What a reply *means*, and which labels a prompt's
//! replies carry, belong to the code that sent the prompt.

use super::charset;

/// `s` with every whitespace run (newlines included) replaced by one space, trimmed, and without the
/// characters memory refuses (control characters, bidi overrides): a reply holding them is the model's
/// doing, not the client's, so they are dropped rather than failing the call ([`super::charset`]).
pub fn collapse(s: &str) -> String {
    charset::strip(s).split_whitespace().collect::<Vec<_>>().join(" ")
}

/// One fenced code block of a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fence<'a> {
    /// What the fence holds, without its info string (untrimmed).
    pub body: &'a str,
    /// The byte offset of its opening ```` ``` ```` in the reply.
    pub at: usize,
    /// Whether a closing ```` ``` ```` ends it (an unclosed block runs to the end of the reply).
    pub closed: bool,
}

/// The fenced code blocks of `text`, in order. The info string is the rest of the opening line when it
/// is one word such as `json` or `tool_call` (or nothing), or a word glued to JSON on that line
/// (```` ```json {…}``` ````); otherwise the body starts right after the backticks (```` ```{…}``` ````).
pub fn fences(text: &str) -> Vec<Fence<'_>> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(open) = text[from..].find("```").map(|i| from + i) {
        let after = &text[open + 3..];
        let body = &after[body_start(after)..];
        match body.find("```") {
            Some(close) => {
                out.push(Fence { body: &body[..close], at: open, closed: true });
                from = text.len() - body.len() + close + 3;
            }
            None => {
                out.push(Fence { body, at: open, closed: false });
                break;
            }
        }
    }
    out
}

/// Where a fence's body starts in the text after its opening backticks.
fn body_start(after: &str) -> usize {
    let line_end = after.find('\n').unwrap_or(after.len());
    let first = &after[..line_end];
    if is_info_string(first) {
        return (line_end + 1).min(after.len());
    }
    let tag = first.find(|c: char| !is_info_char(c)).unwrap_or(first.len());
    let rest = first[tag..].trim_start();
    if tag > 0 && (rest.starts_with('{') || rest.starts_with('[')) {
        first.len() - rest.len()
    } else {
        0
    }
}

/// The inside of the first ``` fence of `s` (without its info string, e.g. `json`), trimmed; `s` itself
/// when it has no fence. An unclosed fence counts only at the start of `s`.
pub fn unfence(s: &str) -> &str {
    match fences(s).first() {
        Some(f) if f.closed || f.at == 0 => f.body.trim(),
        Some(_) | None => s,
    }
}

/// Whether the rest of a fence's opening line is an info string such as `json` (or nothing).
fn is_info_string(s: &str) -> bool {
    let s = s.trim();
    s.len() <= 20 && s.chars().all(is_info_char)
}

fn is_info_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '+' | '.')
}

/// The end (exclusive) of the balanced `open`…`close` span that starts at `start` (where `text` holds
/// `open`), skipping JSON strings and their escapes; `None` when it never closes.
pub fn balanced_end(text: &str, start: usize, open: u8, close: u8) -> Option<usize> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for (i, &b) in text.as_bytes().iter().enumerate().skip(start) {
        match (in_string, b) {
            (true, _) if escaped => escaped = false,
            (true, b'\\') => escaped = true,
            (_, b'"') => in_string = !in_string,
            (false, _) if b == open => depth += 1,
            (false, _) if b == close && depth <= 1 => return Some(i + 1),
            (false, _) if b == close => depth -= 1,
            _ => {}
        }
    }
    None
}

/// `s` without a preamble such as "Here is the merged memory:" or "Sure! Here it is:" (an opener word,
/// then a colon within the first 100 characters), on its own line or before the text.
pub fn strip_preamble(s: &str) -> &str {
    const OPENERS: [&str; 8] = ["here is", "here's", "here are", "sure", "okay", "ok,", "certainly", "of course"];
    let Some((colon, _)) = s.char_indices().take(100).find(|&(_, c)| c == ':') else {
        return s;
    };
    let head = s[..colon].to_lowercase();
    if OPENERS.iter().any(|o| head.starts_with(o)) {
        s[colon + 1..].trim()
    } else {
        s
    }
}

/// `s` without one surrounding pair of quotes, when they enclose the whole text: the inside holds no
/// other closing quote (for single quotes: only apostrophes inside words).
pub fn strip_quotes(s: &str) -> &str {
    let mut chars = s.chars();
    let (Some(first), Some(last)) = (chars.next(), chars.next_back()) else {
        return s;
    };
    let inner = chars.as_str();
    let encloses = match (first, last) {
        ('"', '"') | ('\u{201c}', '\u{201d}') | ('\u{ab}', '\u{bb}') | ('`', '`') => !inner.contains(first) && !inner.contains(last),
        ('\'', '\'') | ('\u{2018}', '\u{2019}') => (first == last || !inner.contains(first)) && only_inside_words(inner, last),
        _ => false,
    };
    if encloses {
        inner.trim()
    } else {
        s
    }
}

/// Whether every `q` in `s` sits between two alphanumeric characters (an apostrophe, not a quote).
fn only_inside_words(s: &str, q: char) -> bool {
    let chars: Vec<char> = s.chars().collect();
    chars
        .iter()
        .enumerate()
        .all(|(i, &c)| c != q || (i > 0 && chars[i - 1].is_alphanumeric() && chars.get(i + 1).is_some_and(|n| n.is_alphanumeric())))
}

/// `s` without a leading label from `labels` and one pair of surrounding quotes, whitespace collapsed:
/// the last steps every free-text reply goes through.
pub fn unlabel(s: &str, labels: &[&str]) -> String {
    collapse(strip_quotes(strip_label(s, labels)))
}

/// `s` without a leading label from `labels` followed by a colon, such as `Merged memory:` (any case,
/// optionally `**bold**`).
pub fn strip_label<'a>(s: &'a str, labels: &[&str]) -> &'a str {
    let t = s.trim_start();
    let t = t.strip_prefix("**").unwrap_or(t);
    for label in labels {
        let Some(head) = t.get(..label.len()) else {
            continue;
        };
        if !head.eq_ignore_ascii_case(label) {
            continue;
        }
        let rest = &t[label.len()..];
        let rest = rest.strip_prefix("**").unwrap_or(rest);
        if let Some(rest) = rest.strip_prefix(':') {
            let rest = rest.strip_prefix("**").unwrap_or(rest);
            return rest.trim();
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn fences_find_every_block_with_or_without_an_info_string() {
        let text = "Sure.\n```json\n{\"a\": 1}\n```\nthen ```{\"b\": 2}``` and ```json [3]``` and ```tool_call\n{\"c\"";
        let got: Vec<(&str, bool)> = fences(text).iter().map(|f| (f.body.trim(), f.closed)).collect();
        assert_eq!(got, [("{\"a\": 1}", true), ("{\"b\": 2}", true), ("[3]", true), ("{\"c\"", false)]);
        assert_eq!(fences(text)[0].at, 6);
        // Prose in a fence keeps its first word.
        assert_eq!(unfence("```The memory text```"), "The memory text");
        assert_eq!(unfence("```\nCaroline went.\n```"), "Caroline went.");
        assert_eq!(unfence("no fence"), "no fence");
        // An unclosed fence counts only at the start.
        assert_eq!(unfence("```text\nopen to the end"), "open to the end");
        assert_eq!(unfence("see ``` here"), "see ``` here");
    }

    #[test]
    fn a_balanced_span_skips_brackets_inside_strings() {
        let text = r#"x [{"a": "]"}, [1, 2]] y"#;
        assert_eq!(balanced_end(text, 2, b'[', b']'), Some(text.len() - 2));
        assert_eq!(balanced_end(r#"{"a": "\"}"}"#, 0, b'{', b'}'), Some(12));
        assert_eq!(balanced_end("[1, [2]", 0, b'[', b']'), None);
    }

    proptest! {
        /// Any text wrapped in a fence with an info string reads back as itself.
        #[test]
        fn a_fenced_body_reads_back(body in "[a-zA-Z0-9 {}\\[\\]\":,.]{0,60}", tag in "(json|tool_call|)") {
            prop_assume!(!body.contains("```"));
            let text = format!("before\n```{tag}\n{body}\n```\nafter");
            let f = fences(&text);
            prop_assert_eq!(f.len(), 1);
            prop_assert_eq!(f[0].body.trim_end_matches('\n'), body.as_str());
            prop_assert!(f[0].closed);
        }

        /// Scanning never panics and every block lies inside the text, in order.
        #[test]
        fn fences_are_inside_the_text(text in "(```|json|\\{|\\}|\\n| |a|é){0,40}") {
            let mut last = 0;
            for f in fences(&text) {
                prop_assert!(f.at >= last && f.at + 3 <= text.len());
                last = f.at + 3;
            }
        }
    }
}
