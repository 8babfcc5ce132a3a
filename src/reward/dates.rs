//! Dates as a reader takes them: `answer-phrase`'s reading of a date part, one answer per question.
//!
//! A reader asked "when" answers with one date: the one the memory gives for what was asked. It does not
//! collect every date it saw. A note that offers several dates for one event ("7 May 2023, 6 May 2023, the
//! week before 8 May 2023") answers with none of them: the reader is torn, as a judge marks a multi-guess
//! answer wrong. So a memory's dates are read as **date expressions** ([`DateSaid`]): a run of date words
//! (day numbers, months, years) and the relative words around them ("the week before", "the Friday
//! before", "first week of"). Then:
//!
//! - **A date is said whole.** A gold date is stated by an expression with the same relative words and the
//!   same day, month and year wherever the gold names them (a more precise date inside a gold period
//!   states it: "7 May 2023" states "May 2023"). No partial run: "the week before 9 June 2023" does not
//!   state "the Friday before 9 June 2023", nor "9 June 2023".
//! - **One date per sentence about the question.** Of a memory's sentences, the ones most about the
//!   question (the most of its content words; a restated question counts with the sentence after it, as a
//!   card's answer follows its question) give its dates. Its session date is read beside them, never as
//!   their rival: no tool sets it, so it is the conversation's date of what the memory says, not a
//!   candidate ([`super::phrase`]).
//! - **Several dates are no date.** When those sentences offer two or more different dates, the memory
//!   states only what every one of them states. This does not depend on how the dates are written: one
//!   note with nine, a date list, a merge or a memory rewritten in place with them added all offer them
//!   side by side; spread over several notes, they are rival notes ([`super::phrase`]).

use std::collections::BTreeSet;
use std::sync::OnceLock;

use crate::text::{content_words, sentences, stemmed_tokens};

/// A date expression as a reader takes it: its relative words in order (stems, weekdays among them), and its
/// day, month and year where it names them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct DateSaid {
    /// Relative words, in order ("week", "befor"; "friday", "befor"; "first", "week", "of").
    pub relative: Vec<String>,
    /// The day of the month, without an ordinal suffix.
    pub day: Option<u32>,
    /// The month's stem.
    pub month: Option<String>,
    /// The year.
    pub year: Option<u16>,
}

impl DateSaid {
    /// Whether a reader answering `self` gives `gold`: the same relative words, and the gold's day, month and
    /// year wherever the gold names one.
    pub fn states(&self, gold: &DateSaid) -> bool {
        self.relative == gold.relative
            && gold.day.is_none_or(|d| self.day == Some(d))
            && gold.month.as_ref().is_none_or(|m| self.month.as_ref() == Some(m))
            && gold.year.is_none_or(|y| self.year == Some(y))
    }

    fn absolute(&self) -> bool {
        self.month.is_some() || self.year.is_some()
    }
}

/// The stems of the words that join date words into one expression ("the week before", "first week of",
/// "a few days before", "summer"), weekdays among them.
fn relative_stems() -> &'static BTreeSet<String> {
    static STEMS: OnceLock<BTreeSet<String>> = OnceLock::new();
    STEMS.get_or_init(|| {
        "week weekend before after ago last next early late mid middle beginning end start first second third fourth fifth \
         month year day days weeks months years few several couple two three four five of summer winter spring fall autumn \
         same morning evening night monday tuesday wednesday thursday friday saturday sunday"
            .split_whitespace()
            .flat_map(stemmed_tokens)
            .collect()
    })
}

/// Words that may stand before a date without changing it ("on 7 May 2023", "in 2022").
const PREPOSITIONS: [&str; 6] = ["on", "in", "at", "around", "by", "dure"];

/// What one token of a date expression is.
enum Kind {
    Day(u32),
    Month,
    Year(u16),
    Relative,
}

fn kind(t: &str) -> Option<Kind> {
    if super::phrase::is_year(t) {
        return t.parse().ok().map(Kind::Year);
    }
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    if (1..=2).contains(&digits) && matches!(&t[digits..], "" | "st" | "nd" | "rd" | "th") {
        let d: u32 = t[..digits].parse().ok()?;
        return (1..=31).contains(&d).then_some(Kind::Day(d));
    }
    if super::phrase::is_month(t) {
        return Some(Kind::Month);
    }
    relative_stems().contains(t).then_some(Kind::Relative)
}

/// The date expressions of `tokens` (stemmed), in order, that name a month or a year. A run of date and
/// relative words is cut where a second day, month or year begins, or where a relative word follows a date
/// word: "7 May 8 May 2023" is two dates, "7 May 2023 the week before 9 June" two.
pub fn expressions(tokens: &[String]) -> Vec<DateSaid> {
    let mut out = Vec::new();
    let mut cur = DateSaid::default();
    let mut dated = false;
    let finish = |cur: &mut DateSaid, dated: &mut bool, out: &mut Vec<DateSaid>| {
        let mut done = std::mem::take(cur);
        while done.relative.first().is_some_and(|w| w == "of") {
            done.relative.remove(0);
        }
        // "may" alone is the verb as often as the month.
        let modal = done.day.is_none() && done.year.is_none() && done.relative.is_empty() && done.month.as_deref() == Some("may");
        if done.absolute() && !modal {
            out.push(done);
        }
        *dated = false;
    };
    for t in tokens {
        match kind(t) {
            None => finish(&mut cur, &mut dated, &mut out),
            Some(Kind::Relative) => {
                if dated && t != "of" {
                    finish(&mut cur, &mut dated, &mut out);
                }
                cur.relative.push(t.clone());
            }
            Some(Kind::Day(d)) => {
                if cur.day.is_some() {
                    finish(&mut cur, &mut dated, &mut out);
                }
                cur.day = Some(d);
                dated = true;
            }
            Some(Kind::Month) => {
                if cur.month.is_some() {
                    finish(&mut cur, &mut dated, &mut out);
                }
                cur.month = Some(t.clone());
                dated = true;
            }
            Some(Kind::Year(y)) => {
                if cur.year.is_some() {
                    finish(&mut cur, &mut dated, &mut out);
                }
                cur.year = Some(y);
                dated = true;
            }
        }
    }
    finish(&mut cur, &mut dated, &mut out);
    out
}

/// A gold part that is one date and nothing else ("The week before 9 June 2023", "in 2022", "May 1, 2023"):
/// its expression. `None` for a part that says more than a date ("she moved in May 2023").
pub fn gold_date(part: &[String]) -> Option<DateSaid> {
    let mut dates = expressions(part);
    let only = part.iter().all(|t| kind(t).is_some() || PREPOSITIONS.contains(&t.as_str()));
    (dates.len() == 1 && only).then(|| dates.remove(0))
}

/// A memory text's units that name a date, each with its content words and its dates: its sentences, a
/// sentence that ends in "?" read with the one after it (a card's answer follows its question). Computed
/// once per memory, whatever is asked. `names_date`: whether the body's tokens name a month, a year or a
/// weekday; without one it holds no date expression, and is not split into sentences.
pub fn date_units(body: &str, names_date: bool) -> Vec<(BTreeSet<String>, Vec<DateSaid>)> {
    if !names_date {
        return Vec::new();
    }
    // A question and the sentence that answers it are one unit; each sentence's dates are its own (an
    // expression never runs across a sentence's end: "… during the summer? The week before 3 July 2023").
    let mut units: Vec<(String, Vec<DateSaid>)> = Vec::new();
    let mut open = false;
    for s in sentences(body) {
        let dates = expressions(&stemmed_tokens(&s));
        let was_open = std::mem::replace(&mut open, s.trim_end().ends_with('?'));
        match units.last_mut() {
            Some((text, said)) if was_open => {
                text.push(' ');
                text.push_str(&s);
                said.extend(dates);
            }
            _ => units.push((s, dates)),
        }
    }
    units.into_iter().map(|(u, d)| (content_words(&u), d)).filter(|(_, d)| !d.is_empty()).collect()
}

/// The dates a memory's text gives for the question asked (`asked`: its content words), without repeats:
/// those of its [`date_units`] most about the question, less any date the question itself names. Empty when
/// the text names none.
pub fn pick(units: &[(BTreeSet<String>, Vec<DateSaid>)], asked: &BTreeSet<String>, asked_dates: &[DateSaid]) -> Vec<DateSaid> {
    let shared: Vec<usize> = units.iter().map(|(w, _)| w.intersection(asked).count()).collect();
    let Some(most) = shared.iter().copied().max() else { return Vec::new() };
    let mut out: Vec<DateSaid> = Vec::new();
    for d in units.iter().zip(&shared).filter(|(_, n)| **n == most).flat_map(|((_, d), _)| d) {
        if !out.contains(d) && !asked_dates.contains(d) {
            out.push(d.clone());
        }
    }
    out
}

/// The score of a gold date in a memory that gives `dates`: 1 when every one of them states it (one date,
/// or several that agree), else 0.
pub fn score(gold: &DateSaid, dates: &[DateSaid]) -> f64 {
    f64::from(u8::from(!dates.is_empty() && dates.iter().all(|d| d.states(gold))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn said(s: &str) -> Vec<DateSaid> {
        expressions(&stemmed_tokens(s))
    }

    #[test]
    fn expressions_are_cut_where_a_second_date_begins() {
        assert_eq!(said("Caroline went to the group on 7 May 2023.").len(), 1);
        assert_eq!(said("7 May, 8 May 2023").len(), 2);
        assert_eq!(said("the week before 9 June 2023 or the week before 16 June 2023").len(), 2);
        assert_eq!(said("7 May 2023 the week before 9 June 2023").len(), 2);
        let friday = &said("the Friday before 15 July 2023")[0];
        assert_eq!((friday.relative.clone(), friday.day, friday.year), (vec!["friday".to_string(), "befor".into()], Some(15), Some(2023)));
        assert_eq!(said("first week of April, 2023")[0].relative, ["first", "week", "of"]);
        assert!(said("she went last week with 3 friends").is_empty(), "no month or year: no date");
        assert_eq!(said("May 1, 2023"), said("1 May 2023"));
    }

    #[test]
    fn a_date_is_said_whole_or_not_at_all() {
        let g = |s: &str| gold_date(&stemmed_tokens(s)).unwrap();
        let states = |memory: &str, gold: &str| score(&g(gold), &said(memory));
        assert_eq!(states("on 7 May 2023", "7 May 2023"), 1.0);
        assert_eq!(states("7 May 2023", "May 2023"), 1.0, "a day inside the gold's month");
        assert_eq!(states("in 2022", "2022"), 1.0);
        assert_eq!(states("May 2023", "7 May 2023"), 0.0);
        assert_eq!(states("the week before 9 June 2023", "The Friday before 9 June 2023"), 0.0);
        assert_eq!(states("the week before 9 June 2023", "9 June 2023"), 0.0);
        assert_eq!(states("the week before 9 June 2023", "The week before 9 June 2023"), 1.0);
        assert_eq!(states("7 May 2023, 6 May 2023", "7 May 2023"), 0.0, "two dates for one event: torn");
        assert_eq!(states("7 May 2023 or 7 May 2023", "7 May 2023"), 1.0, "dates that agree");
        assert!(gold_date(&stemmed_tokens("she moved in May 2023")).is_none());
        assert!(gold_date(&stemmed_tokens("four months")).is_none());
    }

    #[test]
    fn the_sentence_most_about_the_question_gives_the_date() {
        let asked = content_words("When did Caroline go to the LGBTQ support group?");
        let d = |body: &str| pick(&date_units(body, true), &asked, &[]);
        let merged = "Caroline went to the LGBTQ support group on 7 May 2023. Melanie painted a lake on 20 May 2023.";
        assert_eq!(d(merged), said("7 May 2023"));
        let card = "When did Caroline go to the LGBTQ support group? 7 May 2023, 6 May 2023.";
        assert_eq!(d(card).len(), 2, "a card's answer is read with its question");
        assert!(d("Caroline went to the group yesterday.").is_empty());
    }

    proptest! {
        /// A date always states itself, and a list of two different dates states neither.
        #[test]
        fn a_date_states_itself_and_two_state_neither(d1 in 1u32..=28, d2 in 1u32..=28, m in 0usize..12, y in 2019u16..2025) {
            let month = crate::reward::dates::tests::MONTHS[m];
            let one = format!("{d1} {month} {y}");
            let gold = gold_date(&stemmed_tokens(&one)).unwrap();
            prop_assert_eq!(score(&gold, &said(&one)), 1.0);
            let two = said(&format!("{d1} {month} {y}, {d2} {month} {y}"));
            prop_assert_eq!(score(&gold, &two), if d1 == d2 { 1.0 } else { 0.0 });
        }
    }

    const MONTHS: [&str; 12] =
        ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];
}
