//! Cleaning of free-text model replies, shared by every prompt whose reply memgym reads (the QA answer of
//! the LLM evaluators, the merged text of `--llm-edit`): code fences, a "Here is ..." preamble, a leading
//! label, one pair of surrounding quotes, whitespace runs and refused characters. What a reply *means*, and
//! which labels a prompt's replies carry, belong to the code that sent the prompt.

use super::charset;

/// `s` with every whitespace run (newlines included) replaced by one space, trimmed, and without the
/// characters memory refuses (control characters, bidi overrides): a reply holding them is the model's
/// doing, not the client's, so they are dropped rather than failing the call ([`super::charset`]).
pub fn collapse(s: &str) -> String {
    charset::strip(s).split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The inside of the first ``` fence of `s` (without its info string, e.g. `json`), trimmed; `s` itself
/// when it has no fence. An unclosed fence counts only at the start of `s`.
pub fn unfence(s: &str) -> &str {
    let Some(open) = s.find("```") else {
        return s;
    };
    let after = &s[open + 3..];
    let body = match after.find('\n') {
        Some(nl) if is_info_string(&after[..nl]) => &after[nl + 1..],
        Some(_) | None => after,
    };
    match body.find("```") {
        Some(close) => body[..close].trim(),
        None if open == 0 => body.trim(),
        None => s,
    }
}

/// Whether the rest of a fence's opening line is an info string such as `json` (or nothing).
fn is_info_string(s: &str) -> bool {
    let s = s.trim();
    s.len() <= 20 && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '+' | '.'))
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
