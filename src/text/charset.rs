//! The one rule for text a client stores: episode memories, custom episodes, experiences, agent-memory
//! episodes, LearnFromGroup's trajectories, bank domains and queries all pass [`admit`] at their door
//! (gRPC, the JSON faces, imports; the Python drop-ins reach the server through gRPC), and every prompt
//! that shows a stored one-line field shows it through [`inline`].
//!
//! Why: stored text is fed back to LLMs, shown in logs and terminals and written to datasets. A NUL cuts
//! C strings, an ANSI escape (`\u{1b}[31m`) rewrites a terminal, a bidi override or isolate
//! (U+202A–U+202E, U+2066–U+2069) makes text read differently from what it holds ("Trojan Source"), and a
//! line break inside a field that a prompt shows as one line lets the field forge the prompt's structure
//! (a heading, a rule, another library entry). None of them carries meaning in a memory.
//!
//! The rule, in order:
//! 1. **Refused characters** (the whole value is refused, naming the code point and its position, never
//!    the value): every control character (C0 — NUL and ESC included —, DEL, C1) except `\n` and `\t`;
//!    the bidi overrides and isolates; U+2028 and U+2029 (Unicode's line and paragraph separators: `\n` is
//!    the one line break). A [`Shape::Label`] also refuses `\n` and `\t`. Refusing rather than stripping
//!    keeps what is stored equal to what the client sent, and the client can fix its input. Lone
//!    surrogates cannot reach this rule: a Rust string cannot hold one, protobuf refuses invalid UTF-8,
//!    and the JSON faces refuse a `\ud800` escape while parsing.
//! 2. **Unicode normalisation to NFC**, so that `é` typed as one code point or as `e` + U+0301 is stored,
//!    searched and deduplicated as the same text. NFC changes nothing in ASCII or in already-composed text.
//! 3. **Trimming** of leading and trailing whitespace (Unicode `White_Space`). Inner whitespace is kept.
//! 4. **Length** in characters, counted after 1–3, against the field's cap.
//!
//! **Line breaks in prompts.** `\n` is kept in stored text (an experience may be a numbered procedure, a
//! trajectory is many lines). Where a prompt shows a field as one line — an experience in
//! `format_for_prompt`, every agent-memory field in `BuildMemoryContext`, LearnFromGroup's trajectories —
//! the field is rendered through [`inline`], which writes a line break as the two characters `\n` (and
//! any character the rule refuses, should an older row hold one, as `\u{…}`). A stored field therefore
//! never starts a line of the prompt: it cannot add a heading, a rule, a mistake card or a library entry.
//! Escaping rather than refusing keeps the seeds' inputs (a multi-line trajectory summary) accepted.
//!
//! Text the server itself obtained — an LLM's reply under `--llm-edit` — is **stripped** instead
//! ([`strip`]), since a stray control character there is not the client's fault.

use std::borrow::Cow;
use std::fmt;

use unicode_normalization::{is_nfc_quick, IsNormalized, UnicodeNormalization};

/// What a field may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Prose, possibly of several lines: `\n` and `\t` allowed.
    Text,
    /// A one-line label (a speaker, a date, a source): no `\n` or `\t` either.
    Label,
}

/// Why [`admit`] refused a value. Its text never quotes the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A refused character, by code point and 0-based character position in the value as sent.
    Char {
        /// The code point.
        code: u32,
        /// Its position, in characters.
        at: usize,
        /// The shape the field has.
        shape: Shape,
    },
    /// Nothing left after trimming.
    Empty,
    /// Over the field's cap, counted after normalising and trimming.
    TooLong {
        /// Characters held.
        chars: usize,
        /// The cap.
        max: usize,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Char { code, at, shape } => {
                let c = char::from_u32(*code).unwrap_or(char::REPLACEMENT_CHARACTER);
                let what = class(c);
                let allowed = match shape {
                    Shape::Text => " other than \\n and \\t",
                    Shape::Label => "",
                };
                write!(
                    f,
                    "holds U+{code:04X} ({what}) at character {at}; control characters{allowed}, bidi overrides/isolates \
                     (U+202A-U+202E, U+2066-U+2069) and U+2028/U+2029 are refused"
                )
            }
            Refusal::Empty => f.write_str("must not be empty or only whitespace"),
            Refusal::TooLong { chars, max } => write!(f, "is {chars} characters long, over the limit of {max}"),
        }
    }
}

fn class(c: char) -> &'static str {
    if is_bidi_control(c) {
        "a bidi override/isolate"
    } else if is_separator(c) {
        "a Unicode line/paragraph separator"
    } else if c == '\n' || c == '\t' {
        "a line break or tab in a one-line field"
    } else {
        "a control character"
    }
}

/// True for a character the rule refuses in [`Shape::Text`]: a control character other than `\n` and
/// `\t`, a bidi override/isolate, or U+2028/U+2029.
pub fn refused_in_text(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t') || is_bidi_control(c) || is_separator(c)
}

/// True for a character the rule refuses in [`Shape::Label`]: [`refused_in_text`], `\n` and `\t`.
pub fn refused_in_label(c: char) -> bool {
    c.is_control() || is_bidi_control(c) || is_separator(c)
}

fn refused(shape: Shape) -> fn(char) -> bool {
    match shape {
        Shape::Text => refused_in_text,
        Shape::Label => refused_in_label,
    }
}

fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn is_separator(c: char) -> bool {
    matches!(c, '\u{2028}' | '\u{2029}')
}

/// The rule (module doc): `s` as stored — NFC, trimmed, at most `max` characters — or why it is refused.
/// An empty result is returned as it is; [`admit_required`] refuses it.
pub fn admit(s: &str, shape: Shape, max: usize) -> Result<String, Refusal> {
    let is_refused = refused(shape);
    if let Some((at, c)) = s.chars().enumerate().find(|&(_, c)| is_refused(c)) {
        return Err(Refusal::Char { code: u32::from(c), at, shape });
    }
    let t = s.trim();
    let normal: Cow<str> = match is_nfc_quick(t.chars()) {
        IsNormalized::Yes => Cow::Borrowed(t),
        IsNormalized::No | IsNormalized::Maybe => Cow::Owned(t.nfc().collect::<String>()),
    };
    // Canonical composition maps whitespace only to whitespace (U+2000 → U+2002), so this second trim
    // is a no-op kept to make the promise "trimmed" hold by construction.
    let normal = normal.trim();
    // Counting stops one past the cap, so a huge value costs no more than a short one.
    let n = normal.chars().take(max.saturating_add(1)).count();
    if n > max {
        return Err(Refusal::TooLong { chars: normal.chars().count(), max });
    }
    Ok(normal.to_string())
}

/// [`admit`], refusing a value that is empty after trimming.
pub fn admit_required(s: &str, shape: Shape, max: usize) -> Result<String, Refusal> {
    let t = admit(s, shape, max)?;
    if t.is_empty() {
        return Err(Refusal::Empty);
    }
    Ok(t)
}

/// Why `s` is refused by its characters alone, or `None` (the first character `refused` rejects, by
/// code point and position, never the value itself).
pub fn check(s: &str, refused: fn(char) -> bool) -> Option<String> {
    let shape = if refused('\n') { Shape::Label } else { Shape::Text };
    let (at, c) = s.chars().enumerate().find(|&(_, c)| refused(c))?;
    Some(Refusal::Char { code: u32::from(c), at, shape }.to_string())
}

/// `s` without the characters memory text refuses (for text the server obtained itself).
pub fn strip(s: &str) -> String {
    s.chars().filter(|&c| !refused_in_text(c)).collect()
}

/// `s` as a prompt shows a one-line field: `\n` written as the two characters `\n`, `\t` kept, and any
/// other character the rule refuses written as `\u{…}` (an older row may hold one). The result holds no
/// line break, so the field cannot start a line of the prompt. Text without such characters is
/// returned as it is.
pub fn inline(s: &str) -> Cow<'_, str> {
    let escaped = |c: char| c != '\t' && refused_in_label(c);
    if !s.chars().any(escaped) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            c if escaped(c) => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests;
