//! `answer-phrase`, the default offline evaluator: is the gold answer *stated* in what the evaluator
//! read? Answer recall counted the gold's tokens anywhere in the retrieved text, so "7", "May" and "2023"
//! from three different memories made "7 May 2023", and a list of every day, month and year answered
//! every temporal question. Here:
//!
//! - **Parts.** The gold answer is split into parts at `,` and `;` (a list answer is several facts;
//!   category 3 keeps its first `;` alternative, as LoCoMo's metric does). Each part is a sequence of
//!   LoCoMo-normalised, Porter-stemmed tokens ([`crate::text::stemmed_tokens`]).
//! - **Phrases, in one memory.** A part scores 1 when its tokens occur **in order and contiguous in one
//!   memory read**. A part of three or more tokens that is only partly there scores the share covered by
//!   its longest contiguous run, when that run is at least two tokens long and holds a word that is not
//!   a date word (a number, a month or a weekday): "adoption agencies" counts for "researching adoption
//!   agencies", "May 2023" does not count for "7 May 2023", nor "9 June 2023" for "the week before 9
//!   June 2023". Scattered tokens never count.
//! - **Dates.** A memory is read in its view, `8 May 2023: text`; its date label counts only when the
//!   memory shares [`DATE_SHARED_WORDS`] content words with the question (every memory of a session
//!   carries the date, and only the one about what was asked says when it happened).
//! - **Not from the question.** A run of [`ECHO_TOKENS`] or more tokens copied from the question states
//!   nothing: "a national park or a theme park?" does not answer itself. Of the memories that restate the
//!   question and say more (answer cards, [`CARD_SHARE`] of its content words), only the one most about
//!   the question counts, and a
//!   memory naming more than two months or years is a list of dates, which states none of them.
//! - **Focus.** A memory counts only while it holds at most [`FOCUS_WORDS`] distinct content words that
//!   are not in the question: a fact, or a few merged facts. A bag of every word seen, or a list of
//!   candidate answers, is not a statement of one of them.
//! - `p` is the mean over parts of the best memory's score. Category 5 (no answer in the conversation):
//!   1 − that score of the trap answer.
//!
//! What it reads is a [`Reading`] (the content-word budget of M₀'s top-k), so packing more memories into the
//! budget is impossible and a memory cut by the budget counts only for what was read of it.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use super::reading::Reading;
use super::Target;
use crate::text::{content_words, stemmed_tokens};

/// Most distinct content words (beyond the question's) a memory may hold and still count as stating an
/// answer: about two LoCoMo observations (a typical one holds 8–14).
pub const FOCUS_WORDS: usize = 30;

/// Content words of the question a memory must share for its session date to count as stating an
/// answer (all of them when the question has fewer): every memory of a session carries its date, and
/// only the one about what was asked answers "when".
pub const DATE_SHARED_WORDS: usize = 3;

/// The gold answer as parts, each a non-empty sequence of stemmed tokens: category 1's list split at
/// `,` (as LoCoMo's metric splits it; never before a year: "19 January, 2023" is one date), category 3's
/// first `;` alternative, any other answer whole.
pub fn gold_parts(gold: &str, category: Option<u8>) -> Vec<Vec<String>> {
    let parts: Vec<&str> = match category {
        Some(1) => {
            let mut parts = Vec::new();
            let mut start = 0;
            for (i, _) in gold.match_indices(',') {
                let next = gold[i + 1..].split_whitespace().next().unwrap_or("");
                let year = next.len() == 4 && next.bytes().all(|b| b.is_ascii_digit());
                if !year {
                    parts.push(&gold[start..i]);
                    start = i + 1;
                }
            }
            parts.push(&gold[start..]);
            parts
        }
        Some(3) => vec![gold.split(';').next().unwrap_or(gold)],
        _ => vec![gold],
    };
    parts.into_iter().map(stemmed_tokens).filter(|p| !p.is_empty()).collect()
}

/// The score of one part in one memory's tokens: 1 for the whole phrase; for a part of three or more
/// tokens, the share its longest contiguous run covers when that run has two or more tokens and one of
/// them is not a date word; else 0.
pub fn part_score(part: &[String], tokens: &[String]) -> f64 {
    if part.is_empty() {
        return 0.0;
    }
    if tokens.windows(part.len()).any(|w| w == part) {
        return 1.0;
    }
    if part.len() < 3 {
        return 0.0;
    }
    let mut best = 0usize;
    for i in 0..part.len() {
        for j in 0..tokens.len() {
            let n = part[i..].iter().zip(&tokens[j..]).take_while(|(a, b)| a == b).count();
            if n > best && n >= 2 && part[i..i + n].iter().any(|t| !is_date_word(t)) {
                best = n;
            }
        }
    }
    best as f64 / part.len() as f64
}

/// A stemmed token that names a date: digits (with an ordinal suffix), a month or a weekday.
fn is_date_word(t: &str) -> bool {
    static NAMES: OnceLock<BTreeSet<String>> = OnceLock::new();
    let names = NAMES.get_or_init(|| {
        [
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
            "monday",
            "tuesday",
            "wednesday",
            "thursday",
            "friday",
            "saturday",
            "sunday",
        ]
        .iter()
        .flat_map(|n| stemmed_tokens(n))
        .collect()
    });
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    (digits > 0 && matches!(&t[digits..], "" | "st" | "nd" | "rd" | "th")) || names.contains(t)
}

/// One memory as `answer-phrase` reads it.
struct Read {
    /// Its stemmed tokens (without its date label when the memory is not about what was asked).
    tokens: Vec<String>,
    /// It restates the question ([`CARD_SHARE`] of its content words) and says something more: an
    /// answer card.
    card: bool,
    /// It names more than two months, or more than two years: a list of dates, which states none.
    date_list: bool,
    /// Content words it shares with the question.
    shared: usize,
}

impl Read {
    fn score(&self, part: &[String]) -> f64 {
        if self.date_list && part.iter().any(|t| is_date_word(t)) {
            return 0.0;
        }
        part_score(part, &self.tokens)
    }
}

/// The share of the question's content words a memory must hold to count as an answer card.
pub const CARD_SHARE: f64 = 0.8;

/// The mean over `gold`'s parts of its best score in the focused memories read; 0 without parts. Of the
/// answer cards (memories that restate the question and say more) only one counts, the one sharing the
/// most of the question's words (the first read among equals), as a reader takes the note written for
/// its question: ten cards with ten guesses state one guess, not ten.
pub fn phrase_recall(gold: &str, category: Option<u8>, question: &str, reading: &Reading) -> f64 {
    let parts = gold_parts(gold, category);
    if parts.is_empty() {
        return 0.0;
    }
    let asked = content_words(question);
    let asked_tokens = stemmed_tokens(question);
    let card_words = ((asked.len() as f64 * CARD_SHARE).ceil() as usize).max(1);
    let read: Vec<Read> = reading
        .units
        .iter()
        .filter(|u| content_words(&u.text).difference(&asked).count() <= FOCUS_WORDS)
        .map(|u| {
            let shared = content_words(u.body()).intersection(&asked).count();
            // The date a memory was said on answers "when" only for a memory about what was asked.
            let about = shared >= DATE_SHARED_WORDS.min(asked.len());
            let tokens = without_echo(stemmed_tokens(if about { &u.text } else { u.body() }), &asked_tokens);
            let date_list = distinct(&tokens, is_month) > 2 || distinct(&tokens, is_year) > 2;
            let claims = content_words(u.body()).difference(&asked).next().is_some();
            Read { tokens, card: !asked.is_empty() && shared >= card_words && claims, date_list, shared }
        })
        .collect();
    let total: f64 = parts
        .iter()
        .map(|p| {
            let plain = read.iter().filter(|r| !r.card).map(|r| r.score(p)).fold(0.0, f64::max);
            // The card most about the question (the first read among equals) is the one a reader takes.
            let most = read.iter().filter(|r| r.card).map(|r| r.shared).max();
            let card = read.iter().find(|r| r.card && Some(r.shared) == most).map_or(0.0, |r| r.score(p));
            plain.max(card)
        })
        .sum();
    total / parts.len() as f64
}

/// Runs of [`ECHO_TOKENS`] or more tokens copied from the question, in a memory's tokens.
pub const ECHO_TOKENS: usize = 4;

/// `tokens` with every run of at least [`ECHO_TOKENS`] tokens that also occurs in the question replaced
/// by one empty token (which matches nothing): the question's own words never state its answer ("national
/// park or a theme park?" does not say "national park").
fn without_echo(tokens: Vec<String>, question: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        let run =
            (0..question.len()).map(|j| tokens[i..].iter().zip(&question[j..]).take_while(|(a, b)| a == b).count()).max().unwrap_or(0);
        if run >= ECHO_TOKENS {
            out.push(String::new());
            i += run;
        } else {
            out.push(tokens[i].clone());
            i += 1;
        }
    }
    out
}

fn distinct(tokens: &[String], keep: fn(&str) -> bool) -> usize {
    tokens.iter().filter(|t| keep(t)).collect::<BTreeSet<_>>().len()
}

fn is_year(t: &str) -> bool {
    t.len() == 4 && t.parse::<u16>().is_ok_and(|y| (1900..=2099).contains(&y))
}

fn is_month(t: &str) -> bool {
    is_date_word(t) && !t.bytes().next().is_some_and(|b| b.is_ascii_digit()) && !WEEKDAY_STEMS.contains(&t)
}

/// The Porter stems of the weekday names.
const WEEKDAY_STEMS: [&str; 7] = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"];

/// `answer-phrase`'s p for `target` (category 5: one minus the score of the trap answer).
pub fn score(target: &Target, reading: &Reading) -> f64 {
    match (target.category, &target.adversarial_answer, &target.answer) {
        (Some(5), Some(trap), _) => 1.0 - phrase_recall(trap, Some(5), &target.question, reading),
        (c, _, Some(gold)) => phrase_recall(gold, c, &target.question, reading),
        (_, _, None) => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{MemoryId, MemoryRecord, MemoryType};
    use proptest::prelude::*;

    fn reading(texts: &[&str]) -> Reading {
        let recs: Vec<MemoryRecord> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| MemoryRecord {
                id: MemoryId(i as u32),
                text: t.to_string(),
                memory_type: MemoryType::Episodic,
                speaker: None,
                session: None,
                session_date: None,
                evidence: vec![],
                source: "t".into(),
                created_step: 0,
            })
            .collect();
        Reading::whole(&recs.iter().collect::<Vec<_>>())
    }

    const Q: &str = "When did Caroline go to the LGBTQ support group?";

    #[test]
    fn a_stated_answer_counts_and_scattered_tokens_do_not() {
        let p = |gold: &str, texts: &[&str]| phrase_recall(gold, Some(2), Q, &reading(texts));
        assert_eq!(p("7 May 2023", &["Caroline went to the group on 7 May, 2023."]), 1.0);
        assert_eq!(p("7 May 2023", &["Caroline went on the 7th.", "It was May.", "In 2023."]), 0.0);
        assert_eq!(p("7 May 2023", &["1 2 3 4 5 6 7 8 9 10 January February March April May June 2022 2023"]), 0.0);
        assert_eq!(p("7 May 2023", &["8 May 2023: Caroline went to the group yesterday."]), 0.0);
        let week = p("The week before 9 June 2023", &["9 June 2023: she went last week"]);
        assert_eq!(week, 0.0);
        let before = p("The week before 9 June 2023", &["it was before 9 June 2023"]);
        assert!((before - 0.8).abs() < 1e-12, "{before}");
        assert_eq!(p("researching adoption agencies", &["Caroline researched adoption agencies."]), 1.0);
        let partial = p("she researched many adoption agencies", &["Caroline looked at adoption agencies."]);
        assert!((partial - 2.0 / 5.0).abs() < 1e-12, "{partial}");
    }

    #[test]
    fn list_answers_score_per_part_and_category_3_keeps_its_first_alternative() {
        let r = reading(&["Melanie loves pottery.", "She went camping with the kids."]);
        let p = phrase_recall("pottery, camping, painting, swimming", Some(1), "What does Melanie do?", &r);
        assert_eq!(p, 0.5);
        assert_eq!(gold_parts("Likely no; she prefers dogs", Some(3)), vec![vec!["like".to_string(), "no".into()]]);
        assert_eq!(gold_parts("a, , the", Some(1)), Vec::<Vec<String>>::new());
        assert_eq!(gold_parts("19 January, 2023", Some(1)).len(), 1, "a comma before a year does not split");
        assert_eq!(gold_parts("7 May 2023, 8 May 2023", Some(1)).len(), 2);
        assert_eq!(gold_parts("love, faith, and strength", Some(4)).len(), 1, "only category 1 is a list");
        assert_eq!(phrase_recall("!!!", Some(4), Q, &r), 0.0);
    }

    #[test]
    fn a_memory_with_too_many_words_states_nothing() {
        let words: Vec<String> = (0..FOCUS_WORDS + 1).map(|i| format!("word{i}x")).collect();
        let bag = format!("Sweden {}", words.join(" "));
        let q = "Where did Caroline move from?";
        assert_eq!(phrase_recall("Sweden", Some(4), q, &reading(&[&bag])), 0.0);
        let fewer = format!("Sweden {}", words[..FOCUS_WORDS - 1].join(" "));
        assert_eq!(phrase_recall("Sweden", Some(4), q, &reading(&[&fewer])), 1.0);
        // The question's own words are free: the oracle's "question + answer" memory counts.
        let oracle = format!("{q} Sweden");
        assert_eq!(phrase_recall("Sweden", Some(4), q, &reading(&[&oracle])), 1.0);
    }

    #[test]
    fn category_5_scores_the_absence_of_the_trap() {
        let t = Target {
            question: "What did Caroline paint?".into(),
            answer: None,
            adversarial_answer: Some("a sunset".into()),
            category: Some(5),
            evidence: vec![],
        };
        assert_eq!(score(&t, &reading(&["Caroline painted a sunset."])), 0.0);
        assert_eq!(score(&t, &reading(&["Caroline went hiking."])), 1.0);
    }

    proptest! {
        #[test]
        fn a_share_and_the_gold_states_itself(gold in "[a-z0-9 ]{0,20}(, [a-z0-9 ]{1,20}){0,3}", ctx in "[a-z0-9 ,.]{0,80}") {
            let p = phrase_recall(&gold, Some(1), "q", &reading(&[&ctx]));
            prop_assert!((0.0..=1.0).contains(&p));
            let own = phrase_recall(&gold, Some(1), "q", &reading(&[&gold]));
            prop_assert!(own == 1.0 || gold_parts(&gold, Some(1)).is_empty() || content_words(&gold).len() > FOCUS_WORDS);
        }
    }
}
