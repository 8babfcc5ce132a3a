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
//!   agencies". A part that names a date is never partly stated (below). Scattered tokens never count.
//! - **Dates.** A memory is read in its view, `8 May 2023: text`; its date label counts only when the
//!   memory shares [`DATE_SHARED_WORDS`] content words with the question (every memory of a session
//!   carries the date, and only the one about what was asked says when it happened).
//! - **Not from the question.** A run of [`ECHO_TOKENS`] or more tokens copied from the question states
//!   nothing: "a national park or a theme park?" does not answer itself.
//! - **The reader answers once.** A part that names a date (a month, a year or a weekday) is read from one
//!   memory: of the memories read that are about the question ([`DATE_SHARED_WORDS`], as for date labels)
//!   and name a date, the one most about it ([`most_about`]); and from one date in it: its date
//!   expressions in its sentences most about the question, said whole, and, when it offers two or more
//!   different dates, only what all of them state ([`super::dates`]); its session date is read beside them,
//!   never as their rival (no tool sets it). Of the memories that restate the question and say more (answer cards:
//!   [`CARD_SHARE`] of its content words and at least [`CARD_MIN_WORDS`] of them, or the whole question),
//!   only the one most about the question counts, and a card the episode wrote whose claim is mostly not
//!   the answer offers candidates, which state nothing (M₀'s memories, and what a merge or a split carries
//!   of them, are what the conversation said: "John had their first dance with his wife at a cozy restaurant
//!   with music and candlelight" states "cozy restaurant").
//! - **Rival written notes state nothing.** "Most about the question" is the content words a memory shares
//!   with it, then whether it restates the question in full (the oracle's card does). Among the answer
//!   cards, or the dated memories, equally the most about it, the first read counts, unless the episode
//!   wrote two or more of them (of the dated ones, two or more naming a date in their own text): then the
//!   part scores the least of the written ones. Candidate dates or answers written side by side, each with
//!   the same words of the question, state none of them unless they all agree, whichever of them ranks
//!   first; one note is read as M₀'s are. A session date a written memory carries from M₀ (a merge or a
//!   split of M₀'s memories) is the conversation's, not a guess, and rivals nothing.
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

use super::dates::{self, DateSaid};
use super::reading::Reading;
use super::Target;
use crate::text::{content_words, is_stopword, stemmed_tokens};

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
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    (digits > 0 && matches!(&t[digits..], "" | "st" | "nd" | "rd" | "th")) || is_date_name(t)
}

/// A stemmed month or weekday name. Most tokens are longer or shorter than every name, and are told apart
/// by their length alone (this runs for every token of every memory read).
fn is_date_name(t: &str) -> bool {
    static NAMES: OnceLock<(BTreeSet<String>, std::ops::RangeInclusive<usize>)> = OnceLock::new();
    let (names, lengths) = NAMES.get_or_init(|| {
        let names: BTreeSet<String> = [
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
        .collect();
        let shortest = names.iter().map(String::len).min().unwrap_or(0);
        let longest = names.iter().map(String::len).max().unwrap_or(0);
        (names, shortest..=longest)
    });
    lengths.contains(&t.len()) && names.contains(t)
}

/// One memory as `answer-phrase` reads it for one question.
#[derive(Debug, Clone, PartialEq)]
struct Read {
    /// Its stemmed tokens (without its date label when the memory is not about what was asked).
    tokens: Vec<String>,
    /// It restates the question ([`CARD_SHARE`] of its content words) and says something more: an
    /// answer card.
    card: bool,
    /// The dates its text gives for the question ([`dates::pick`]): a reader takes one, and several that
    /// disagree state none.
    dates: Vec<DateSaid>,
    /// Its session date, when it is about the question: the conversation's date of what it says, not a
    /// candidate the episode chose (no tool sets it), so it is read beside the text's date, never as its
    /// rival.
    label: Vec<DateSaid>,
    /// A card the episode wrote whose claim is mostly not the answer: a bag of candidates, which states none
    /// of them (never one of M₀'s memories: their words are what the conversation said).
    bag: bool,
    /// How much it is about the question: the content words it shares with it, then whether it restates
    /// every token of it (stopwords too): the question written out in full is the most.
    aboutness: (usize, bool),
    /// The episode wrote it.
    written: bool,
    /// The dates its text gives for the question hold one the episode wrote: a written memory, and a date
    /// whose day, month or year none of the M₀ memories it took the place of said ([`Unit::carried`]).
    ///
    /// [`Unit::carried`]: crate::reward::reading::Unit::carried
    fresh_date: bool,
    /// It names a date (a month, a year or a weekday, in its text or in a date label that counts).
    states_date: bool,
    /// It names a date in its own text (not only in the session date it carries from M₀).
    own_date: bool,
    /// It shares [`DATE_SHARED_WORDS`] content words with the question: only such a memory says when what
    /// was asked happened.
    about: bool,
}

impl Read {
    fn score(&self, part: &[String]) -> f64 {
        if self.bag {
            return 0.0;
        }
        part_score(part, &self.tokens)
    }

    /// Whether a reader could take `gold` from it: one of its dates, or its session date, says it.
    fn could_say(&self, gold: &DateSaid) -> bool {
        self.dates.iter().chain(&self.label).any(|d| d.states(gold))
    }

    /// The score of a part that names a date: a date part ([`dates::gold_date`]) against the dates this memory
    /// gives, whole; any other part only as a whole phrase, in a memory that gives at most one date.
    fn date_score(&self, part: &[String], date: Option<&DateSaid>) -> f64 {
        match date {
            Some(gold) => dates::score(gold, &self.dates).max(dates::score(gold, &self.label)),
            None if self.dates.len() > 1 => 0.0,
            None => f64::from(u8::from(self.tokens.windows(part.len()).any(|w| w == part))),
        }
    }
}

/// A date part's score where the reader's one answer is a wrong date the episode wrote: it costs what the
/// right date earns, so that p ranges over [−1, 1] for a memory the episode wrote into.
pub const MISSTATED: f64 = -1.0;

/// The share of the question's content words a memory must hold to count as an answer card.
pub const CARD_SHARE: f64 = 0.8;

/// The fewest of the question's content words an answer card holds, unless it restates the question in
/// full: a question of one or two content words ("What has Melanie painted?") is restated by every memory
/// about its person and topic, and those are plain memories, not notes written for the question.
pub const CARD_MIN_WORDS: usize = 3;

/// The mean over `gold`'s parts of its best score in the focused memories read; 0 without parts. Of the
/// answer cards (memories that restate the question and say more) only the one sharing the most of the
/// question's words counts, as a reader takes the note written for its question, and equals that
/// disagree state nothing: ten cards with ten guesses state no guess, not ten.
pub fn phrase_recall(gold: &str, category: Option<u8>, question: &str, reading: &Reading) -> f64 {
    Asked::new(gold, category, question).recall(reading)
}

/// A question and its gold answer, analysed once for any number of readings.
#[derive(Debug)]
pub struct Asked {
    parts: Vec<Vec<String>>,
    /// Every token of every part.
    part_tokens: BTreeSet<String>,
    asked: BTreeSet<String>,
    /// The dates the question itself names: a memory that repeats them gives no date.
    asked_dates: Vec<DateSaid>,
    /// Each part's date, when the part is a date and nothing else.
    part_dates: Vec<Option<DateSaid>>,
    /// The gold answer's content words: what an answer card's claim is measured against.
    gold_words: BTreeSet<String>,
    /// The question's tokens.
    echo: Echo,
    card_words: usize,
}

impl Asked {
    /// `gold` (of `category`) asked by `question`.
    pub fn new(gold: &str, category: Option<u8>, question: &str) -> Asked {
        let asked = content_words(question);
        let card_words = ((asked.len() as f64 * CARD_SHARE).ceil() as usize).max(1);
        let parts = gold_parts(gold, category);
        let part_tokens = parts.iter().flatten().cloned().collect();
        let part_dates = parts.iter().map(|p| dates::gold_date(p)).collect();
        let asked_dates = dates::expressions(&stemmed_tokens(question));
        let gold_words = content_words(gold);
        Asked { parts, part_tokens, part_dates, asked_dates, gold_words, echo: Echo::of(stemmed_tokens(question)), asked, card_words }
    }

    /// Whether `a` holds a token of the gold answer. A memory that holds none scores 0 on every part, alone
    /// or beside others that hold none: a part scores only a run of its own tokens in one memory.
    pub fn mentions(&self, a: &Analysed) -> bool {
        self.part_tokens.contains("") || a.view_stems.iter().any(|t| self.part_tokens.contains(t))
    }

    /// How many parts the gold answer has.
    pub fn parts(&self) -> usize {
        self.parts.len()
    }

    /// [`phrase_recall`] of `reading`.
    pub fn recall(&self, reading: &Reading) -> f64 {
        mean(&self.part_scores(reading))
    }

    /// Each part's score in `reading` (empty without parts).
    pub fn part_scores(&self, reading: &Reading) -> Vec<f64> {
        if self.parts.is_empty() {
            return Vec::new();
        }
        let analysed: Vec<Analysed> = reading.units.iter().map(Analysed::of).collect();
        self.part_scores_of(analysed.iter())
    }

    /// [`Self::recall`] of memories already analysed, in reading order.
    pub fn recall_of<'a>(&self, read: impl Iterator<Item = &'a Analysed>) -> f64 {
        mean(&self.part_scores_of(read))
    }

    /// [`Self::part_scores`] of memories already analysed, in reading order.
    pub fn part_scores_of<'a>(&self, read: impl Iterator<Item = &'a Analysed>) -> Vec<f64> {
        if self.parts.is_empty() {
            return Vec::new();
        }
        let prepared: Vec<Prepared> = read.map(|a| self.prepare(a)).collect();
        self.part_scores_prepared(prepared.iter())
    }

    /// A memory as this question reads it (its focus, how much it is about the question, its tokens
    /// without the question's echo, …): what scoring it for this question needs, prepared once.
    pub fn prepare(&self, a: &Analysed) -> Prepared {
        let asked = &self.asked;
        if a.text_words.difference(asked).count() > FOCUS_WORDS {
            return Prepared(None);
        }
        let shared = a.body_words.intersection(asked).count();
        let restated = self.echo.distinct.iter().all(|t| a.body_stem_set.contains(t));
        // The date a memory was said on answers "when" only for a memory about what was asked.
        let about = shared >= DATE_SHARED_WORDS.min(asked.len());
        let tokens = without_echo(if about { &a.view_stems } else { &a.body_stems }, &self.echo);
        let claim: Vec<&String> = a.body_words.difference(asked).collect();
        let states_date = tokens.iter().any(|t| names_date(t));
        let own_date = a.own_date;
        // A card restates the question: most of its content words, and at least CARD_MIN_WORDS of them
        // (every memory about a person and a topic shares a two-word question's words), or all of it.
        let card = !claim.is_empty() && ((shared >= self.card_words && shared >= CARD_MIN_WORDS) || (restated && !asked.is_empty()));
        // A card is the reader's answer; one the episode wrote whose claim is mostly not the answer offers
        // candidates. M₀'s memories (and what a merge or a split carries of them) are the conversation's
        // words, each said once: no tool chose them as candidates, and the context around an answer there is
        // what was said; so is an answer a rewrite carries from the memory it rewrote.
        let said: Vec<&&String> = claim.iter().filter(|w| self.gold_words.contains(**w)).collect();
        let carried = a.carried.as_ref().is_some_and(|c| !said.is_empty() && said.iter().all(|w| c.contains(**w)));
        let bag = card && a.written && !carried && 2 * said.len() < claim.len();
        let dates = a.dates_for(asked, &self.asked_dates);
        let fresh_date = a.written
            && dates.iter().any(|d| {
                let words = [d.day.map(|x| x.to_string()), d.month.clone(), d.year.map(|x| x.to_string())];
                a.carried.as_ref().is_none_or(|c| words.iter().flatten().any(|w| !c.contains(w)))
            });
        let label = if about { a.label_dates.iter().filter(|d| !self.asked_dates.contains(d)).cloned().collect() } else { Vec::new() };
        let aboutness = (shared, restated);
        Prepared(Some(Read { tokens, card, bag, dates, label, aboutness, states_date, own_date, about, written: a.written, fresh_date }))
    }

    /// [`Self::recall`] of memories already prepared for this question, in reading order.
    pub fn recall_prepared<'a>(&self, read: impl Iterator<Item = &'a Prepared>) -> f64 {
        mean(&self.part_scores_prepared(read))
    }

    /// Each part's score in memories already prepared for this question, in reading order.
    pub fn part_scores_prepared<'a>(&self, read: impl Iterator<Item = &'a Prepared>) -> Vec<f64> {
        if self.parts.is_empty() {
            return Vec::new();
        }
        let read: Vec<&Read> = read.filter_map(|p| p.0.as_ref()).collect();
        let read = read.into_iter();
        self.parts
            .iter()
            .zip(&self.part_dates)
            .map(|(p, date)| {
                if p.iter().any(|t| names_date(t)) {
                    // One date, from the memory most about the question; dates the episode wrote side by side
                    // that disagree state none (a session date carried from M₀ is the conversation's, not a
                    // guess: a merge of two M₀ memories is no rival of a fix).
                    let dated = read.clone().filter(|r| r.about && (r.states_date || !r.dates.is_empty() || !r.label.is_empty()));
                    let s = most_about(dated.clone(), |r| r.date_score(p, date.as_ref()), |r| r.written && r.own_date);
                    let Some(gold) = date.as_ref().filter(|_| s <= 0.0) else { return s };
                    // The reader's one answer is wrong: where the episode wrote that date, it misleads, and costs
                    // what the right one would have earned (a guess pays in expectation only if it is right more
                    // often than not). A wrong date M₀ said is the conversation's: it states nothing, as before.
                    // Misled only where no answer the reader could take is right: candidates that hold the right
                    // date among others (a note, or rival notes) leave it torn, and state none (above).
                    let most = dated.clone().map(|r| r.aboutness).max();
                    let mut equals = dated.clone().filter(|r| Some(r.aboutness) == most);
                    let misled = equals.clone().next().is_some_and(|t| t.fresh_date) && !equals.any(|r| r.could_say(gold));
                    return if misled { MISSTATED } else { s };
                }
                let plain = read.clone().filter(|r| !r.card).map(|r| r.score(p)).fold(0.0, f64::max);
                // The card most about the question is the one a reader takes; equals that disagree state none.
                plain.max(most_about(read.clone().filter(|r| r.card), |r| r.score(p), |r| r.written))
            })
            .collect()
    }
}

/// The mean of the parts' scores; 0 without parts.
fn mean(scores: &[f64]) -> f64 {
    if scores.is_empty() {
        0.0
    } else {
        scores.iter().sum::<f64>() / scores.len() as f64
    }
}

/// A memory as one question reads it ([`Asked::prepare`]); `None` inside when it holds too many words to
/// state anything (the focus rule).
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared(Option<Read>);

/// A memory as read, analysed once for any number of questions: the words and tokens `answer-phrase` reads
/// in it, whatever is asked.
#[derive(Debug, Clone, PartialEq)]
pub struct Analysed {
    /// Content words of the whole view (the focus rule).
    text_words: BTreeSet<String>,
    /// Content words of the text without its date label.
    body_words: BTreeSet<String>,
    /// Stemmed tokens of the text without its date label.
    body_stems: Vec<String>,
    /// … as a set.
    body_stem_set: BTreeSet<String>,
    /// Stemmed tokens of the whole view.
    view_stems: Vec<String>,
    /// Its text (without the date label) names a date ([`names_date`]).
    own_date: bool,
    /// Its text's units that name a date ([`dates::date_units`]): each one's content words and dates.
    date_units: Vec<(BTreeSet<String>, Vec<DateSaid>)>,
    /// The dates its date label names (its session day).
    label_dates: Vec<DateSaid>,
    /// The episode wrote it.
    written: bool,
    /// What it carries of the M₀ memories it took the place of ([`crate::reward::reading::Unit::carried`]).
    carried: Option<std::sync::Arc<BTreeSet<String>>>,
}

impl Analysed {
    /// `unit` analysed.
    ///
    /// The view is its date label, `": "`, then its body, and both analyses split at that `": "` (no token
    /// or word runs across it), so the body is analysed once and the label's tokens and words are put in
    /// front of it. A label the budget cut, or one that is not ASCII, is analysed with the view instead.
    pub fn of(unit: &crate::reward::reading::Unit) -> Analysed {
        let body = unit.body();
        let body_stems = stemmed_tokens(body);
        let body_words = content_words(body);
        let (view_stems, text_words) = match unit.text.get(..unit.label) {
            Some("") => (body_stems.clone(), body_words.clone()),
            Some(label) if label.is_ascii() && label.ends_with(": ") => {
                let mut stems = stemmed_tokens(label);
                stems.extend(body_stems.iter().cloned());
                let mut words = content_words(label);
                words.extend(body_words.iter().cloned());
                (stems, words)
            }
            _ => (stemmed_tokens(&unit.text), content_words(&unit.text)),
        };
        let own_date = body_stems.iter().any(|t| names_date(t));
        Analysed {
            text_words,
            body_words,
            body_stem_set: body_stems.iter().cloned().collect(),
            own_date,
            date_units: dates::date_units(body, own_date),
            label_dates: dates::expressions(&view_stems[..view_stems.len() - body_stems.len()]),
            view_stems,
            body_stems,
            written: unit.written,
            carried: unit.carried.clone(),
        }
    }

    /// The dates its text gives for a question of content words `asked` ([`dates::pick`]).
    fn dates_for(&self, asked: &BTreeSet<String>, asked_dates: &[DateSaid]) -> Vec<DateSaid> {
        dates::pick(&self.date_units, asked, asked_dates)
    }

    /// [`Self::of`] read straight from the whole view: what the split analysis must equal.
    #[cfg(test)]
    fn of_view(unit: &crate::reward::reading::Unit) -> Analysed {
        let body_stems = stemmed_tokens(unit.body());
        let view_stems = stemmed_tokens(&unit.text);
        Analysed {
            text_words: content_words(&unit.text),
            body_words: content_words(unit.body()),
            body_stem_set: body_stems.iter().cloned().collect(),
            own_date: body_stems.iter().any(|t| names_date(t)),
            date_units: dates::date_units(unit.body(), true),
            label_dates: dates::expressions(&view_stems[..view_stems.len().saturating_sub(body_stems.len())]),
            view_stems,
            body_stems,
            written: unit.written,
            carried: unit.carried.clone(),
        }
    }
}

/// The score of `part` in the memory of `candidates` most about the question ([`Read::aboutness`]): the
/// first read of those equally most about it, unless two or more of them are `rival` notes the episode
/// wrote; then the least of those notes' scores. Rival notes written side by side, each as much about what was asked as the
/// other and saying something else, leave a reader torn: candidates written for the question state none of
/// them unless they all agree, whichever ranks first. One note written beside M₀'s is read as M₀'s are: the
/// first read counts (a right fix ranked first counts; a wrong guess ranked first costs M₀'s answer). 0
/// without a candidate.
fn most_about<'a>(candidates: impl Iterator<Item = &'a Read> + Clone, score: impl Fn(&Read) -> f64, rival: impl Fn(&Read) -> bool) -> f64 {
    let Some(most) = candidates.clone().map(|r| r.aboutness).max() else { return 0.0 };
    let mut equals = candidates.filter(|r| r.aboutness == most).peekable();
    let first = equals.peek().map_or(0.0, |r| score(r));
    let written: Vec<f64> = equals.filter(|r| rival(r)).map(&score).collect();
    if written.len() >= 2 {
        written.into_iter().fold(f64::INFINITY, f64::min)
    } else {
        first
    }
}

/// Runs of [`ECHO_TOKENS`] or more tokens copied from the question, in a memory's tokens.
pub const ECHO_TOKENS: usize = 4;

/// The question's tokens as [`without_echo`] looks for them: in order, as a set, and its content words (not
/// stopwords) in order and as a set.
#[derive(Debug)]
struct Echo {
    tokens: Vec<String>,
    distinct: BTreeSet<String>,
    content: Vec<String>,
    content_set: BTreeSet<String>,
}

impl Echo {
    fn of(tokens: Vec<String>) -> Echo {
        let content: Vec<String> = tokens.iter().filter(|t| !t.is_empty() && !is_stopword(t)).cloned().collect();
        Echo { distinct: tokens.iter().cloned().collect(), content_set: content.iter().cloned().collect(), content, tokens }
    }
}

/// `tokens` with every run of at least [`ECHO_TOKENS`] tokens that also occurs in the question replaced
/// by one empty token (which matches nothing), and then every run of at least [`ECHO_TOKENS`] of the
/// question's content words in its order (its stopwords left out, as a restatement leaves them out): the
/// question's own words never state its answer ("national park or a theme park?" does not say "national
/// park", nor does "Dave prefer working Dodge Charger Subaru Forester" say "Dodge Charger").
fn without_echo(tokens: &[String], echo: &Echo) -> Vec<String> {
    let question = &echo.tokens;
    let mut out = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        // Most tokens are not the question's: no run starts there.
        let run = if echo.distinct.contains(&tokens[i]) {
            (0..question.len()).map(|j| tokens[i..].iter().zip(&question[j..]).take_while(|(a, b)| a == b).count()).max().unwrap_or(0)
        } else {
            0
        };
        if run >= ECHO_TOKENS {
            out.push(String::new());
            i += run;
        } else {
            out.push(tokens[i].clone());
            i += 1;
        }
    }
    without_content_echo(out, echo)
}

/// `tokens` with every run of at least [`ECHO_TOKENS`] content words that follows the question's content
/// words in order replaced by one empty token (the stopwords between them go with it).
fn without_content_echo(tokens: Vec<String>, echo: &Echo) -> Vec<String> {
    let asked = &echo.content;
    if asked.len() < ECHO_TOKENS {
        return tokens;
    }
    let at: Vec<usize> = (0..tokens.len()).filter(|i| !tokens[*i].is_empty() && !is_stopword(&tokens[*i])).collect();
    if at.len() < ECHO_TOKENS {
        return tokens;
    }
    let mut drop = vec![false; tokens.len()];
    let mut k = 0;
    while k < at.len() {
        let run = if echo.content_set.contains(&tokens[at[k]]) {
            (0..asked.len()).map(|j| at[k..].iter().zip(&asked[j..]).take_while(|(i, q)| tokens[**i] == **q).count()).max().unwrap_or(0)
        } else {
            0
        };
        if run >= ECHO_TOKENS {
            drop[at[k]..=at[k + run - 1]].iter_mut().for_each(|d| *d = true);
            k += run;
        } else {
            k += 1;
        }
    }
    let mut out = Vec::with_capacity(tokens.len());
    for (i, t) in tokens.into_iter().enumerate() {
        if !drop[i] {
            out.push(t);
        } else if i == 0 || !drop[i - 1] {
            out.push(String::new());
        }
    }
    out
}

/// A stemmed token that names a date on its own: a month, a weekday or a year (a bare number does not).
fn names_date(t: &str) -> bool {
    is_month(t) || is_year(t) || WEEKDAY_STEMS.contains(&t)
}

pub(super) fn is_year(t: &str) -> bool {
    t.len() == 4 && t.parse::<u16>().is_ok_and(|y| (1900..=2099).contains(&y))
}

pub(super) fn is_month(t: &str) -> bool {
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
                authored: false,
            })
            .collect();
        Reading::whole(&recs.iter().collect::<Vec<_>>())
    }

    const Q: &str = "When did Caroline go to the LGBTQ support group?";

    #[test]
    fn a_stated_answer_counts_and_scattered_tokens_do_not() {
        let p = |gold: &str, texts: &[&str]| phrase_recall(gold, Some(2), Q, &reading(texts));
        assert_eq!(p("7 May 2023", &["Caroline went to the LGBTQ group on 7 May, 2023."]), 1.0);
        // A date counts only in a memory about the question (3 of its content words).
        assert_eq!(p("7 May 2023", &["Caroline went to the group on 7 May, 2023."]), 0.0);
        assert_eq!(p("7 May 2023", &["Caroline went on the 7th.", "It was May.", "In 2023."]), 0.0);
        assert_eq!(p("7 May 2023", &["1 2 3 4 5 6 7 8 9 10 January February March April May June 2022 2023"]), 0.0);
        assert_eq!(p("7 May 2023", &["8 May 2023: Caroline went to the group yesterday."]), 0.0);
        let week = p("The week before 9 June 2023", &["9 June 2023: she went last week"]);
        assert_eq!(week, 0.0);
        // A date is said whole: "before 9 June 2023" is not "the week before 9 June 2023", nor is "the week
        // before" the Friday before (a partial run paid 0.8 for a wrong date).
        assert_eq!(p("The week before 9 June 2023", &["Caroline went to the LGBTQ support group before 9 June 2023"]), 0.0);
        assert_eq!(p("The Friday before 9 June 2023", &["Caroline went to the LGBTQ support group the week before 9 June 2023"]), 0.0);
        assert_eq!(p("The week before 9 June 2023", &["Caroline went to the LGBTQ support group the week before 9 June 2023"]), 1.0);
        assert_eq!(p("May 1, 2023", &["Caroline went to the LGBTQ support group on 1 May 2023"]), 1.0, "however the date is written");
        assert_eq!(p("researching adoption agencies", &["Caroline researched adoption agencies."]), 1.0);
        let partial = p("she researched many adoption agencies", &["Caroline looked at adoption agencies."]);
        assert!((partial - 2.0 / 5.0).abs() < 1e-12, "{partial}");
    }

    /// A reading of (text, session date, written by the episode) memories, in reading order.
    fn notes(memories: &[(&str, Option<&str>, bool)]) -> Reading {
        let recs: Vec<MemoryRecord> = memories
            .iter()
            .enumerate()
            .map(|(i, (t, date, written))| MemoryRecord {
                id: MemoryId(i as u32),
                text: t.to_string(),
                memory_type: MemoryType::Episodic,
                speaker: None,
                session: None,
                session_date: date.map(str::to_string),
                evidence: vec![],
                source: "t".into(),
                created_step: u32::from(*written),
                authored: *written,
            })
            .collect();
        Reading::whole(&recs.iter().collect::<Vec<_>>())
    }

    #[test]
    fn rival_written_dates_state_none_but_a_carried_session_date_rivals_nothing() {
        let p = |memories: &[(&str, Option<&str>, bool)]| phrase_recall("7 May 2023", Some(2), Q, &notes(memories));
        let fix = ("Caroline went to the LGBTQ support group on 7 May 2023.", Some("8 May 2023"), true);
        assert_eq!(p(&[fix]), 1.0, "one note is read as M₀'s are");
        // Two guesses side by side, equally about the question: the least of them.
        let guess = ("Caroline went to the LGBTQ support group on 20 May 2023.", None, true);
        assert_eq!(p(&[fix, guess]), 0.0);
        assert_eq!(p(&[guess, fix]), 0.0, "whichever ranks first");
        // A merge of two M₀ memories, as much about the question, carrying its session's date and naming none
        // in its text: no rival of the fix ranked first.
        let merged = ("Caroline joined an LGBTQ activist group. The support group was great.", Some("20 July 2023"), true);
        assert_eq!(p(&[fix, merged]), 1.0);
        // Ranked first, it is the note a reader takes, as an M₀ memory would be.
        assert_eq!(p(&[merged, fix]), 0.0);
    }

    #[test]
    fn a_wrong_date_the_episode_wrote_costs_what_the_right_one_earns() {
        let p = |memories: &[(&str, Option<&str>, bool)]| phrase_recall("7 May 2023", Some(2), Q, &notes(memories));
        let right = ("Caroline went to the LGBTQ support group on 7 May 2023.", Some("8 May 2023"), true);
        let wrong = ("Caroline went to the LGBTQ support group on 20 May 2023.", Some("21 May 2023"), true);
        let m0 = ("Caroline went to the LGBTQ support group on 20 May 2023.", Some("21 May 2023"), false);
        assert_eq!(p(&[right]), 1.0);
        assert_eq!(p(&[wrong]), MISSTATED, "the reader's one answer, written by the episode, is wrong");
        assert_eq!(p(&[m0]), 0.0, "a wrong date M₀ said states nothing, as before");
        assert_eq!(p(&[wrong, m0]), MISSTATED, "ranked first, the guess is the answer taken");
        assert_eq!(p(&[m0, wrong]), 0.0, "ranked below M₀'s memory, it is not");
        assert_eq!(p(&[right, wrong]), 0.0, "rival notes leave the reader torn, not misled");
        assert_eq!(p(&[wrong, wrong]), MISSTATED, "notes that agree on a wrong date mislead as one does");
        let card = format!("{Q} 20 May 2023, 21 May 2023");
        assert_eq!(p(&[(&card, None, true)]), MISSTATED, "no candidate of a card is right");
        let card = format!("{Q} 20 May 2023, 7 May 2023");
        assert_eq!(p(&[(&card, None, true)]), 0.0, "a card that holds the right date among others states none");
        // A session date that is the answer is read beside a wrong written date: not misled.
        let beside = ("Caroline went to the LGBTQ support group on 20 May 2023.", Some("7 May 2023"), true);
        assert_eq!(p(&[beside]), 1.0);
        // A card restating a question that ends in a time word: its answer's date is its own sentence's.
        let q = "When did Caroline go to a pride parade during the summer?";
        let card =
            phrase_recall("The week before 3 July 2023", Some(2), q, &notes(&[(&format!("{q} The week before 3 July 2023"), None, true)]));
        assert_eq!(card, 1.0);
        // A list part that is no date is never misstated: an entity guess states nothing.
        let list = phrase_recall(
            "pottery, painting",
            Some(1),
            "What activities does Melanie do?",
            &notes(&[("Melanie does camping.", None, true)]),
        );
        assert_eq!(list, 0.0);
    }

    #[test]
    fn a_note_that_offers_candidates_states_none_of_them() {
        let p = |memories: &[(&str, Option<&str>, bool)]| phrase_recall("7 May 2023", Some(2), Q, &notes(memories));
        let card = format!("{Q} 7 May 2023, 6 May 2023, the week before 8 May 2023, May 2023, 2022");
        assert_eq!(p(&[(&card, None, true)]), 0.0, "one card with candidate dates");
        let in_place = "Caroline went to the LGBTQ support group yesterday. 7 May 2023, 6 May 2023, April 2023.";
        assert_eq!(p(&[(in_place, Some("8 May 2023"), true)]), 0.0, "a memory rewritten in place with them");
        assert_eq!(p(&[(&format!("{Q} 7 May 2023"), None, true)]), 1.0, "one answer is read");
        // The session date is the conversation's, read beside the text's date and never its rival: a memory
        // whose date was resolved still says when it was said.
        let resolved = "Caroline went to the LGBTQ support group on 7 May 2023.";
        assert_eq!(phrase_recall("8 May 2023", Some(2), Q, &notes(&[(resolved, Some("8 May 2023"), false)])), 1.0);
        assert_eq!(phrase_recall("7 May 2023", Some(2), Q, &notes(&[(resolved, Some("8 May 2023"), false)])), 1.0);
        assert_eq!(
            phrase_recall(
                "8 May 2023",
                Some(2),
                Q,
                &notes(&[("Caroline went to the LGBTQ support group today.", Some("8 May 2023"), false)])
            ),
            1.0
        );
        // A card for a list question whose claim is mostly not the answer is a bag of candidates.
        let q = "What activities does Melanie partake in?";
        let list = |texts: &[&str]| phrase_recall("pottery, camping, painting, swimming", Some(1), q, &reading(texts));
        let bag = format!("{q} pottery, hiking, Sweden, beach, kids, sunset, lake, violin, dinosaurs, books, running, painting");
        let written = |texts: &[&str]| {
            let memories: Vec<(&str, Option<&str>, bool)> = texts.iter().map(|t| (*t, None, true)).collect();
            phrase_recall("pottery, camping, painting, swimming", Some(1), q, &notes(&memories))
        };
        assert_eq!(written(&[&bag]), 0.0);
        // M₀'s own card says what the conversation said: its context is no list of candidates.
        let m0 = "John had their first dance with his wife at a cozy restaurant with music and candlelight, finding it dreamy.";
        let dance = "What was the setting for John and his wife's first dance?";
        assert_eq!(phrase_recall("Cozy restaurant", Some(4), dance, &reading(&[m0])), 1.0);
        let guess = "John and his wife's first dance was for a formal dance at a particularly busy weekend.";
        assert_eq!(
            phrase_recall("Cozy restaurant", Some(4), dance, &notes(&[(guess, None, true), (m0, None, false)])),
            0.0,
            "a wrong card read first"
        );
        // A rewrite carries its answer from the memory it rewrote: what it adds around it offers no candidate.
        let swept =
            "John had their first dance with his wife at a cozy restaurant with music and candlelight the week before 11 August 2023.";
        let rewrite = notes(&[(swept, None, true)]);
        let carried = std::collections::HashMap::from([(MemoryId(0), std::sync::Arc::new(content_words(m0)))]);
        assert_eq!(phrase_recall("Cozy restaurant", Some(4), dance, &rewrite.clone().carrying(&carried)), 1.0);
        assert_eq!(phrase_recall("Cozy restaurant", Some(4), dance, &rewrite), 0.0, "the same words written fresh are a bag");
        assert_eq!(list(&[&format!("{q} pottery, camping, painting")]), 0.75, "an answer with three of the four");
        assert_eq!(list(&["Melanie loves pottery.", "She went camping."]), 0.5, "facts of two memories still count");
    }

    #[test]
    fn the_questions_content_words_restated_without_its_stopwords_state_nothing() {
        let q = "Would Dave prefer working on a Dodge Charger or a Subaru Forester?";
        let p = |texts: &[&str]| phrase_recall("Dodge Charger", Some(3), q, &reading(texts));
        assert_eq!(p(&["Dave prefer working Dodge Charger Subaru Forester Dave loves working on cars."]), 0.0);
        assert_eq!(p(&["Would Dave prefer working on a Dodge Charger or a Subaru Forester?"]), 0.0);
        // The question restated, then the answer said: the answer counts.
        assert_eq!(p(&["Would Dave prefer working on a Dodge Charger or a Subaru Forester? Dodge Charger"]), 1.0);
        assert_eq!(p(&["Dave restored a Dodge Charger last summer."]), 1.0);
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
        /// The reader answers once: the same candidate dates spread over more notes, each as much about the
        /// question, never state more than one note offering them all, and neither states more than the best
        /// single candidate alone.
        #[test]
        fn spreading_candidates_over_more_notes_never_raises_p(
            days in proptest::collection::vec((1u32..=28, 0usize..3), 1..8),
            gold in (1u32..=28, 0usize..3),
            split in 1usize..8,
            prefix in prop_oneof![Just(Q.to_string()), Just("Caroline LGBTQ support group".to_string())],
        ) {
            const MONTHS: [&str; 3] = ["April", "May", "June"];
            let date = |(d, m): (u32, usize)| format!("{d} {} 2023", MONTHS[m]);
            let gold = date(gold);
            let candidates: Vec<String> = days.iter().map(|c| date(*c)).collect();
            let p = |texts: Vec<String>| {
                let memories: Vec<(&str, Option<&str>, bool)> = texts.iter().map(|t| (t.as_str(), None, true)).collect();
                phrase_recall(&gold, Some(2), Q, &notes(&memories))
            };
            let one = p(vec![format!("{prefix} {}", candidates.join(", "))]);
            let spread = p(candidates.chunks(split).map(|c| format!("{prefix} {}", c.join(", "))).collect());
            let best = candidates.iter().map(|c| p(vec![format!("{prefix} {c}")])).fold(0.0, f64::max);
            prop_assert!(spread <= one, "{spread} > {one}");
            prop_assert!(one <= best && spread <= best);
        }

        /// The label and the body analysed apart, then joined, are the view analysed whole: for any date
        /// (ASCII or not), any text, read whole or cut by any budget.
        #[test]
        fn a_view_analysed_in_two_parts_equals_it_analysed_whole(
            date in prop::option::of(prop_oneof!["[ -~]{0,24}", "[0-9 a-zA-Z:,.Σİß\u{301}]{0,16}", "\\PC{0,12}"]),
            text in prop_oneof!["[ -~]{0,80}", "[a-zA-Z ΣσςİßÉ\u{301}\u{1c}:,.'-]{0,60}", "\\PC{0,60}"],
            budget in 0usize..12,
        ) {
            let r = MemoryRecord {
                id: MemoryId(0),
                text,
                memory_type: MemoryType::Episodic,
                speaker: None,
                session: None,
                session_date: date,
                evidence: vec![],
                source: "t".into(),
                created_step: 0,
                authored: false,
            };
            let readings = [Reading::whole(&[&r]), Reading::budgeted(&[&r], budget)];
            for u in readings.iter().flat_map(|r| &r.units) {
                prop_assert_eq!(Analysed::of(u), Analysed::of_view(u), "{:?}", u);
            }
        }

        /// A memory without a token of the answer states none of it: what lets the whole-memory reward skip
        /// preparing it.
        #[test]
        fn a_memory_that_does_not_mention_the_answer_states_nothing(
            gold in "[a-e0-9 ,]{1,16}|May 2023|7 May, 2023",
            question in "[a-e ]{0,24}",
            text in "[a-h0-9 ,.:]{0,60}",
            date in prop::option::of("[0-9]{1,2} (May|June) 2023"),
            category in 1u8..5,
        ) {
            let asked = Asked::new(&gold, Some(category), &question);
            let r = notes(&[(&text, date.as_deref(), false)]);
            let a = Analysed::of(&r.units[0]);
            if !asked.mentions(&a) {
                let scores = asked.part_scores_of(std::iter::once(&a));
                prop_assert!(scores.iter().all(|s| *s == 0.0), "{:?}", scores);
            }
        }

        #[test]
        fn a_share_and_the_gold_states_itself(gold in "[a-z0-9 ]{0,20}(, [a-z0-9 ]{1,20}){0,3}", ctx in "[a-z0-9 ,.]{0,80}") {
            let p = phrase_recall(&gold, Some(1), "q", &reading(&[&ctx]));
            prop_assert!((0.0..=1.0).contains(&p));
            let own = phrase_recall(&gold, Some(1), "q", &reading(&[&gold]));
            prop_assert!(own == 1.0 || gold_parts(&gold, Some(1)).is_empty() || content_words(&gold).len() > FOCUS_WORDS);
        }
    }
}
