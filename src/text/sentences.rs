//! Sentence splitting for memory texts: LoCoMo facts are short prose with abbreviations ("Dr.",
//! "e.g."), initials, decimals and list markers, and a naive split at every "." would cut them
//! apart. [`sentences`] is the unit the merge strategies deduplicate and pick from, and the first
//! cut of [`super::clauses::segments`].

use super::words::{in_list_ci, is_closer, is_terminator, ABBREVIATIONS};

/// Splits `text` into sentences, in order, with internal whitespace collapsed.
///
/// Every line break is a hard boundary and leading list markers ("- ", "* ", "• ", "1. ")
/// are dropped. Inside a line, a run of `.`/`!`/`?`/`…` (plus closing quotes or brackets)
/// ends a sentence when followed by the end of the line, or by whitespace and a character that
/// is not lowercase. A single "." does not end a sentence after a known abbreviation ("Mr.",
/// "Mrs.", "Dr.", "St.", "Jan."), after a dotted token ("e.g.", "i.e.", "U.S.", "a.m.") or
/// after a single capital initial ("J. Smith"); decimals ("3.5") never split because no
/// whitespace follows the dot. Pieces without any alphanumeric character are dropped. The
/// sentences keep their own punctuation (no terminal "." is added here).
pub fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        split_line(strip_list_marker(line.trim()), &mut out);
    }
    out
}

fn strip_list_marker(line: &str) -> &str {
    for marker in ["- ", "* ", "• ", "+ "] {
        if let Some(rest) = line.strip_prefix(marker) {
            return rest.trim_start();
        }
    }
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    if (1..=3).contains(&digits) {
        let rest = &line[digits..];
        if let Some(r) = rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") ")) {
            return r.trim_start();
        }
    }
    line
}

fn push_sentence(piece: &str, out: &mut Vec<String>) {
    if piece.chars().any(char::is_alphanumeric) {
        out.push(piece.split_whitespace().collect::<Vec<_>>().join(" "));
    }
}

fn split_line(line: &str, out: &mut Vec<String>) {
    let chars: Vec<(usize, char)> = line.char_indices().collect();
    let n = chars.len();
    let mut start = 0usize;
    let mut i = 0usize;
    while i < n {
        let c = chars[i].1;
        if !is_terminator(c) {
            i += 1;
            continue;
        }
        let mut run_end = i + 1;
        while run_end < n && is_terminator(chars[run_end].1) {
            run_end += 1;
        }
        let mut j = run_end;
        while j < n && is_closer(chars[j].1) {
            j += 1;
        }
        let boundary = if j >= n {
            true
        } else if !chars[j].1.is_whitespace() {
            false
        } else {
            let mut k = j;
            while k < n && chars[k].1.is_whitespace() {
                k += 1;
            }
            if k >= n {
                true
            } else if chars[k].1.is_lowercase() {
                false
            } else {
                !(c == '.' && run_end == i + 1 && is_abbreviation(line, &chars, i))
            }
        };
        if boundary {
            let end = if j < n { chars[j].0 } else { line.len() };
            push_sentence(&line[start..end], out);
            start = end;
        }
        i = j.max(i + 1);
    }
    if start < line.len() {
        push_sentence(&line[start..], out);
    }
}

/// Is the token ending just before the "." at `chars[dot]` an abbreviation or an initial?
fn is_abbreviation(line: &str, chars: &[(usize, char)], dot: usize) -> bool {
    let mut s = dot;
    while s > 0 && !chars[s - 1].1.is_whitespace() {
        s -= 1;
    }
    let token = line[chars[s].0..chars[dot].0].trim_start_matches(['(', '[', '"', '\'', '“', '‘']);
    if token.is_empty() {
        return false;
    }
    if token.contains('.') {
        return true; // e.g, i.e, U.S, a.m
    }
    let mut it = token.chars();
    if let (Some(only), None) = (it.next(), it.next()) {
        return only.is_uppercase(); // an initial: "J. Smith"
    }
    in_list_ci(ABBREVIATIONS, token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentence_splitting() {
        let cases: &[(&str, &[&str])] = &[
            ("", &[]),
            ("   \n\t ", &[]),
            ("Caroline went home", &["Caroline went home"]),
            (
                "Dr. Smith met Mr. Jones and Mrs. Lee at St. Mary's. They talked.",
                &["Dr. Smith met Mr. Jones and Mrs. Lee at St. Mary's.", "They talked."],
            ),
            (
                "She likes fruit, e.g. apples, i.e. the red ones. She moved to the U.S. in 2020.",
                &["She likes fruit, e.g. apples, i.e. the red ones.", "She moved to the U.S. in 2020."],
            ),
            ("The race was 3.5 miles. She won!", &["The race was 3.5 miles.", "She won!"]),
            ("Did she win? Yes! Great...  Then home.", &["Did she win?", "Yes!", "Great...", "Then home."]),
            ("She said \"I love it.\" Then she left.", &["She said \"I love it.\"", "Then she left."]),
            ("J. K. Rowling wrote it. John read it.", &["J. K. Rowling wrote it.", "John read it."]),
            ("line one\nline two", &["line one", "line two"]),
            ("- Caroline paints.\n* Melanie swims.\n1. Jon dances.", &["Caroline paints.", "Melanie swims.", "Jon dances."]),
            ("Zoë went to Café Müller. Она любит кофе! 東京に行った。", &["Zoë went to Café Müller.", "Она любит кофе!", "東京に行った。"]),
            ("...", &[]),
            ("It was   fun .  Really.", &["It was fun .", "Really."]),
        ];
        for (text, want) in cases {
            assert_eq!(sentences(text), want.iter().map(|s| s.to_string()).collect::<Vec<_>>(), "{text:?}");
        }
    }
}
