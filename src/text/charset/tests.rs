//! The text rule: fixed cases and properties (never panics; refuses exactly the forbidden classes;
//! changes accepted text only by NFC and trimming; `inline` never yields a line break).

use proptest::prelude::*;
use unicode_normalization::UnicodeNormalization;

use super::*;

#[test]
fn refuses_controls_bidi_and_separators_but_keeps_newline_tab_and_unicode() {
    assert_eq!(check("Ann keeps bees.\n\tAnd wasps. Zoë 日本 🐝", refused_in_text), None);
    for bad in [
        "a\0b",
        "a\u{1b}[31mred",
        "a\rb",
        "\u{7f}",
        "\u{85}",
        "\u{9b}",
        "x\u{202e}y",
        "\u{2066}",
        "\u{2069}",
        "\u{202a}",
        "a\u{2028}b",
        "\u{2029}",
    ] {
        let m = check(bad, refused_in_text).unwrap_or_else(|| panic!("{bad:?} passes"));
        assert!(m.starts_with("holds U+"), "{m}");
        assert!(admit(bad, Shape::Text, 100).is_err(), "{bad:?}");
        assert!(!strip(bad).chars().any(refused_in_text), "{bad:?}");
    }
    assert_eq!(
        check("a\u{1b}[31m", refused_in_text).unwrap(),
        "holds U+001B (a control character) at character 1; control characters other than \\n and \\t, bidi overrides/isolates (U+202A-U+202E, U+2066-U+2069) and U+2028/U+2029 are refused"
    );
    assert!(check("x\u{202e}", refused_in_text).unwrap().contains("U+202E (a bidi override/isolate) at character 1"));
    assert!(check("a\u{2028}", refused_in_text).unwrap().contains("U+2028 (a Unicode line/paragraph separator) at character 1"));
    assert!(check("7 May\n2023", refused_in_label).unwrap().contains("U+000A (a line break or tab in a one-line field) at character 5"));
    assert!(check("7 May 2023", refused_in_label).is_none());
    assert_eq!(strip("a\u{1b}[31mred\u{0} \u{202e}x\ny"), "a[31mred x\ny");
}

#[test]
fn admit_normalises_trims_and_caps() {
    assert_eq!(admit("  Zoe\u{301} went home.\n ", Shape::Text, 100).unwrap(), "Zoé went home.");
    assert_eq!(admit(" a\n\tb ", Shape::Text, 100).unwrap(), "a\n\tb");
    assert_eq!(admit(" \u{3000} ", Shape::Text, 100).unwrap(), "");
    assert_eq!(admit_required(" \u{3000} ", Shape::Text, 100), Err(Refusal::Empty));
    assert_eq!(admit("abcd", Shape::Label, 3), Err(Refusal::TooLong { chars: 4, max: 3 }));
    // the cap counts characters after NFC: e + U+0301 is one character
    assert_eq!(admit("e\u{301}e\u{301}e\u{301}", Shape::Label, 3).unwrap(), "ééé");
    assert_eq!(admit("a\tb", Shape::Label, 10), Err(Refusal::Char { code: 9, at: 1, shape: Shape::Label }));
    assert_eq!(Refusal::TooLong { chars: 4, max: 3 }.to_string(), "is 4 characters long, over the limit of 3");
}

#[test]
fn inline_escapes_line_breaks_and_refused_characters() {
    assert!(matches!(inline("plain\ttext"), Cow::Borrowed("plain\ttext")));
    assert_eq!(inline("a\n## HEADING\n  - [WORKS] x"), "a\\n## HEADING\\n  - [WORKS] x");
    assert_eq!(inline("x\u{202e}y\rz\u{2028}"), "x\\u{202e}y\\u{d}z\\u{2028}");
}

/// Strings drawn from every class the rule decides, mixed with ordinary text.
fn tricky() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        "[a-zA-Z0-9 .,]{0,6}",
        Just("\n".to_string()),
        Just("\t".to_string()),
        Just("\r".to_string()),
        Just("\u{0}".to_string()),
        Just("\u{1b}[31m".to_string()),
        Just("\u{85}".to_string()),
        Just("\u{202e}".to_string()),
        Just("\u{2067}".to_string()),
        Just("\u{2028}".to_string()),
        Just("e\u{301}".to_string()),
        Just("\u{3000}".to_string()),
        Just("日本🐝".to_string()),
        any::<char>().prop_map(String::from),
    ];
    prop::collection::vec(piece, 0..12).prop_map(|v| v.concat())
}

proptest! {
    #[test]
    fn admit_never_panics_and_refuses_exactly_the_forbidden(s in tricky(), label in any::<bool>(), max in 0usize..40) {
        let shape = if label { Shape::Label } else { Shape::Text };
        let forbidden = s.chars().any(refused(shape));
        match admit(&s, shape, max) {
            Ok(t) => {
                prop_assert!(!forbidden);
                // accepted text changes only by NFC and trimming
                let expected: String = s.trim().nfc().collect();
                prop_assert_eq!(&t, expected.trim());
                prop_assert!(t.chars().count() <= max);
                prop_assert!(!t.chars().any(refused(shape)));
                prop_assert_eq!(t.trim(), t.as_str());
                // the rule is idempotent
                prop_assert_eq!(admit(&t, shape, max), Ok(t.clone()));
            }
            Err(Refusal::Char { at, code, .. }) => {
                prop_assert!(forbidden);
                prop_assert_eq!(s.chars().nth(at).map(u32::from), Some(code));
            }
            Err(Refusal::TooLong { chars, max: m }) => {
                prop_assert!(!forbidden);
                prop_assert!(chars > m);
            }
            Err(Refusal::Empty) => prop_assert!(false, "admit never refuses empty text"),
        }
    }

    #[test]
    fn inline_never_yields_a_line_break(s in tricky()) {
        let out = inline(&s);
        prop_assert!(!out.chars().any(|c| c != '\t' && refused_in_label(c)), "{:?}", out);
        if !s.chars().any(|c| c != '\t' && refused_in_label(c)) {
            prop_assert_eq!(out.as_ref(), s.as_str());
        }
    }
}
