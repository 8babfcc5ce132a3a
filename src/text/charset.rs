//! Which characters memory may hold. Memory text is fed back to the agent's LLM, shown in logs and
//! terminals, and written to datasets: a NUL cuts C strings, an ANSI escape (`\u{1b}[31m`) rewrites a
//! terminal, and a bidi override or isolate (U+202A–U+202E, U+2066–U+2069) makes text read differently
//! from what it holds ("Trojan Source"). None of them carries meaning in a memory.
//!
//! The policy is to **refuse** them, naming the field, wherever a client supplies text (tool arguments,
//! custom episodes): silently stripping would store something other than what the client sent, and the
//! client can fix its input. Text the server itself obtained — an LLM's reply under `--llm-edit` — is
//! **stripped** instead ([`strip`]), since a stray control character there is not the client's fault.
//! Text keeps `\n` and `\t`; one-line labels (speaker, session date, source, evidence ids) hold no control
//! character at all.

/// True for a character memory text refuses: a control character (C0, DEL, C1) other than `\n` and
/// `\t`, or a bidi override/isolate.
pub fn refused_in_text(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t') || is_bidi_control(c)
}

/// True for a character a one-line label refuses: any control character or bidi override/isolate.
pub fn refused_in_label(c: char) -> bool {
    c.is_control() || is_bidi_control(c)
}

fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Why `s` is refused, or `None`: the first character `refused` rejects, by code point and position
/// (never the value itself).
pub fn check(s: &str, refused: fn(char) -> bool) -> Option<String> {
    let (at, c) = s.chars().enumerate().find(|&(_, c)| refused(c))?;
    let what = if is_bidi_control(c) { "a bidi override/isolate" } else { "a control character" };
    let allowed = if refused('\n') { "" } else { " other than \\n and \\t" };
    Some(format!(
        "holds U+{:04X} ({what}) at character {at}; control characters{allowed} and bidi overrides/isolates (U+202A-U+202E, U+2066-U+2069) are refused",
        u32::from(c)
    ))
}

/// `s` without the characters memory text refuses (for text the server obtained itself).
pub fn strip(s: &str) -> String {
    s.chars().filter(|&c| !refused_in_text(c)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_controls_and_bidi_but_keeps_newline_tab_and_unicode() {
        assert_eq!(check("Ann keeps bees.\n\tAnd wasps. Zoë 日本 🐝", refused_in_text), None);
        for bad in ["a\0b", "a\u{1b}[31mred", "a\rb", "\u{7f}", "\u{85}", "\u{9b}", "x\u{202e}y", "\u{2066}", "\u{2069}", "\u{202a}"] {
            let m = check(bad, refused_in_text).unwrap_or_else(|| panic!("{bad:?} passes"));
            assert!(m.starts_with("holds U+"), "{m}");
            assert!(!strip(bad).chars().any(refused_in_text), "{bad:?}");
        }
        assert_eq!(check("a\u{1b}[31m", refused_in_text).unwrap(), "holds U+001B (a control character) at character 1; control characters other than \\n and \\t and bidi overrides/isolates (U+202A-U+202E, U+2066-U+2069) are refused");
        assert!(check("x\u{202e}", refused_in_text).unwrap().contains("U+202E (a bidi override/isolate) at character 1"));
        assert!(check("7 May\n2023", refused_in_label).is_some() && check("7 May 2023", refused_in_label).is_none());
        assert_eq!(strip("a\u{1b}[31mred\u{0} \u{202e}x\ny"), "a[31mred x\ny");
    }
}
