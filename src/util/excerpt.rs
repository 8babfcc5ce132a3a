//! The one rule for client values in error messages and logs: quote at most a short, escaped prefix
//! and give the length when cut.
//!
//! A refused value may be anything up to the request size limit (8 MiB). Copied whole into a status
//! message it travels in the `grpc-message` trailer, and grpcio (the Python client, verl) refuses
//! trailers over 16 KiB, so the client would never see the real error. Every message that names a
//! client value goes through [`quoted`] (or [`name`] for a client-chosen field name); the leaf module
//! has no dependencies so every layer can use it.

/// Characters of a client value a message quotes at most.
pub const SHOWN_CHARS: usize = 64;
/// Bytes of escaped text a message quotes at most (escapes like `\u{202e}` take up to 10 bytes).
const SHOWN_BYTES: usize = 160;

/// `value` as a Rust-escaped string literal (control characters, quotes and bidi overrides escaped),
/// cut to at most [`SHOWN_CHARS`] characters; a cut value is followed by `...` and its full length in
/// characters: `"zzzz"... (20000 characters)`. At most ~200 bytes whatever the input.
pub fn quoted(value: &str) -> String {
    let mut out = String::with_capacity(value.len().min(SHOWN_BYTES) + 32);
    out.push('"');
    let mut cut = false;
    for (shown, c) in value.chars().enumerate() {
        let esc: String = match c {
            // `escape_debug` leaves these printable, but they reorder or hide text in a terminal.
            '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}' => c.escape_unicode().collect(),
            _ => c.escape_debug().collect(),
        };
        if shown == SHOWN_CHARS || out.len() + esc.len() > SHOWN_BYTES {
            cut = true;
            break;
        }
        out.push_str(&esc);
    }
    out.push('"');
    if cut {
        out.push_str(&format!("... ({} characters)", value.chars().count()));
    }
    out
}

/// A client-chosen name (an unknown JSON argument) as a field name: itself when it is short and
/// plain (letters, digits, `_`, `.`, `-`), otherwise [`quoted`].
pub fn name(value: &str) -> String {
    let plain = !value.is_empty()
        && value.chars().count() <= SHOWN_CHARS
        && value.chars().all(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if plain {
        value.to_string()
    } else {
        quoted(value)
    }
}

/// A message that may echo client input (a parser's error), cut to [`SHOWN_BYTES`] × 2 bytes at a
/// character boundary.
pub fn cut(message: &str) -> String {
    const MAX: usize = 2 * SHOWN_BYTES;
    if message.len() <= MAX {
        return message.to_string();
    }
    let mut end = MAX;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &message[..end], message.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_values_are_quoted_whole() {
        assert_eq!(quoted("m0042"), "\"m0042\"");
        assert_eq!(quoted(""), "\"\"");
        assert_eq!(quoted("a\"b\n\u{0}"), r#""a\"b\n\0""#);
        assert_eq!(quoted("x\u{202e}y"), r#""x\u{202e}y""#);
    }

    #[test]
    fn long_values_are_cut_with_their_length() {
        let m = quoted(&"z".repeat(20_000));
        assert_eq!(m, format!("\"{}\"... (20000 characters)", "z".repeat(SHOWN_CHARS)));
        let m = quoted(&"é".repeat(100));
        assert!(m.starts_with(&format!("\"{}\"...", "é".repeat(SHOWN_CHARS))) && m.ends_with("(100 characters)"), "{m}");
        for nasty in ["\u{0}".repeat(10_000), "\u{202e}".repeat(10_000), "\u{10ffff}".repeat(10_000), "\u{1b}[31m".repeat(5_000)] {
            let m = quoted(&nasty);
            assert!(m.len() < 220 && m.contains("characters)"), "{} {m}", m.len());
        }
    }

    #[test]
    fn names_are_plain_or_quoted() {
        assert_eq!(name("colour"), "colour");
        assert_eq!(name("a b"), "\"a b\"");
        assert!(name(&"k".repeat(1000)).len() < 120);
    }

    #[test]
    fn cut_keeps_char_boundaries() {
        assert_eq!(cut("short"), "short");
        let m = cut(&"é".repeat(1000));
        assert!(m.len() < 2 * SHOWN_BYTES + 32 && m.ends_with("(2000 bytes)"), "{m}");
    }
}
