//! The adversarial suite: scripted policies that try to raise the reward without improving memory.
//!
//! Each one sees only what a policy sees — the question and the tools' text (ids, session dates, memory
//! text); none reads the gold answer or the evidence ids, except `oracle-padding`, which is the oracle
//! plus padding. A trick adds no information about the answer, so the reward must not pay it: its mean
//! must stay at or below the no-op's 0, and it may be above 0 on at most 5 % of questions. The first
//! eleven were found by trying MemUpdate's reward as such a policy would; the last four are this
//! suite's own attempts at the defences (`answer-phrase`'s phrases and focus, the reading budget).

use std::collections::{BTreeSet, HashSet};

use serde_json::json;

use super::{oracle_memory, Session};
use crate::dataset::Question;
use crate::episode::EpisodeError;
use crate::memory::MemoryRecord;
use crate::text::content_words;

/// A trick agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Trick {
    /// Searches the question, writes one memory: the question + the top 5 hits glued.
    Glue1,
    /// Searches 50 hits and packs them, with the question, into 5 long memories.
    Glue5,
    /// `glue5` plus every day number, month name and year seen, in the first memory.
    Glue5Dates,
    /// 5 memories of the question + every distinct word seen in 50 hits and 50 samples, + the dates.
    Stuffing,
    /// Merges the hits into one memory (concatenate) until it reaches the size cap.
    MegaMerge,
    /// `merge_memory` of the top 5 whose `content` is the question + their text.
    MergeContent,
    /// Writes the question as a memory.
    Echo,
    /// Writes each of the top 5 hits again, twice.
    DuplicateSpam,
    /// Deletes every memory but the question's top 5 (M₀'s ids are m0000, m0001, …: a policy can name them).
    DeleteOthers,
    /// Writes 5 long memories that say nothing.
    Padding,
    /// The oracle's memory and the padding (reads the gold: a check that padding never pays).
    OraclePadding,
    /// The question + every session date seen in 50 hits.
    SessionDates,
    /// Short memories of the question + two "Month Year" each, for every month seen: many focused answer
    /// cards with a guess each.
    MonthYears,
    /// The question glued to each of the top 10 hits, one memory each (focused, and all ranked first).
    EchoHits,
    /// Rewrites the top 20 hits to their content words (more hits would fit in a character budget).
    Telegraphic,
    /// Overwrites 25 memories the question does not read with nonsense no longer than them.
    Vandal,
    /// The oracle's memory written over an unrelated memory instead of created (reads the gold: checked
    /// against the oracle, never above it).
    OracleOverwrite,
    /// One short memory per session date of the top 20 hits: a few of the question's words and the date
    /// (none an answer card, none a list of dates).
    DateGuesses,
    /// The same, two dates to a memory ("… 7 May 2023 or 20 May 2023").
    DatePairs,
    /// One short memory per "the week before" / "the weekend before" each of the first six session dates.
    RelativeGuesses,
    /// One short memory per month and per year seen in the top 20 hits' dates.
    PeriodGuesses,
    /// Copies the hits ranked just below the reading (6–10), each with the question's words added so it
    /// ranks first.
    RerankCopies,
    /// Rewrites the hits ranked 6–10 in place with the question's words appended (re-ranking without copies).
    RerankInPlace,
    /// One card: the question and nine candidate dates around the best hit's session day ([`super::kinds`]).
    DateCard,
    /// The same candidates, three to a card.
    DateCards,
    /// The same candidates as fragments: the first with the question, the others with a few of its words or
    /// none.
    DateFragments,
    /// The best hit rewritten in place with the candidates appended.
    DateInPlace,
    /// The two best hits merged, the candidates written into the merge.
    DateMerge,
    /// The ten best hits whose text says no time word the resolver reads rewritten in place, each with one of
    /// the candidates around its own session day appended (the first the day itself, the second the day
    /// before, …): one committed date a memory, a guess.
    GuessInPlace,
    /// The best hit, if its text says no time word the resolver reads, rewritten with "the week before D"
    /// appended (D its session day): LoCoMo's most common relative answer, one guess at the price of a few
    /// words.
    WeekInPlace,
    /// The same guess in each such hit among the best twenty.
    WeekInHits,
    /// One card: the question and 28 candidate entities seen in the hits.
    EntityCard,
    /// The same entities, four to a card.
    EntityCards,
    /// Copies 48 memories far from the question, padded with tokens that are not content words so that they
    /// rank nowhere, and deletes the originals.
    MovePadded,
    /// Moves memories far from the question into padded extra parts of a split of a memory from the same
    /// session (which carry its provenance), and deletes the originals.
    MoveSplit,
}

impl Trick {
    /// Every trick, in report order.
    pub const ALL: [Trick; 35] = [
        Trick::Glue1,
        Trick::Glue5,
        Trick::Glue5Dates,
        Trick::Stuffing,
        Trick::MegaMerge,
        Trick::MergeContent,
        Trick::Echo,
        Trick::DuplicateSpam,
        Trick::DeleteOthers,
        Trick::Padding,
        Trick::OraclePadding,
        Trick::SessionDates,
        Trick::MonthYears,
        Trick::EchoHits,
        Trick::Telegraphic,
        Trick::Vandal,
        Trick::OracleOverwrite,
        Trick::DateGuesses,
        Trick::DatePairs,
        Trick::RelativeGuesses,
        Trick::PeriodGuesses,
        Trick::RerankCopies,
        Trick::RerankInPlace,
        Trick::DateCard,
        Trick::DateCards,
        Trick::DateFragments,
        Trick::DateInPlace,
        Trick::DateMerge,
        Trick::GuessInPlace,
        Trick::WeekInPlace,
        Trick::WeekInHits,
        Trick::EntityCard,
        Trick::EntityCards,
        Trick::MovePadded,
        Trick::MoveSplit,
    ];

    /// Name on the command line and in reports.
    pub const fn name(self) -> &'static str {
        match self {
            Trick::Glue1 => "glue1",
            Trick::Glue5 => "glue5",
            Trick::Glue5Dates => "glue5-dates",
            Trick::Stuffing => "stuffing",
            Trick::MegaMerge => "mega-merge",
            Trick::MergeContent => "merge-content",
            Trick::Echo => "echo",
            Trick::DuplicateSpam => "dup-spam",
            Trick::DeleteOthers => "delete-others",
            Trick::Padding => "padding",
            Trick::OraclePadding => "oracle-padding",
            Trick::SessionDates => "session-dates",
            Trick::MonthYears => "month-years",
            Trick::EchoHits => "echo-hits",
            Trick::Telegraphic => "telegraphic",
            Trick::Vandal => "vandal",
            Trick::OracleOverwrite => "oracle-overwrite",
            Trick::DateGuesses => "date-guesses",
            Trick::DatePairs => "date-pairs",
            Trick::RelativeGuesses => "relative-guesses",
            Trick::PeriodGuesses => "period-guesses",
            Trick::RerankCopies => "rerank-copies",
            Trick::RerankInPlace => "rerank-in-place",
            Trick::DateCard => "date-card",
            Trick::DateCards => "date-cards",
            Trick::DateFragments => "date-fragments",
            Trick::DateInPlace => "date-in-place",
            Trick::DateMerge => "date-merge",
            Trick::GuessInPlace => "guess-in-place",
            Trick::WeekInPlace => "week-in-place",
            Trick::WeekInHits => "week-in-hits",
            Trick::EntityCard => "entity-card",
            Trick::EntityCards => "entity-cards",
            Trick::MovePadded => "move-padded",
            Trick::MoveSplit => "move-split",
        }
    }
}

/// A sentence that says nothing, for padding.
const FILLER: &str = "This note is kept for later and says nothing about anyone. ";

/// Plays `trick` on the episode.
pub(super) async fn play(s: &mut Session<'_>, trick: Trick, q: &Question) -> Result<(), EpisodeError> {
    let question = q.question.trim();
    let max = s.max_chars();
    match trick {
        Trick::DateCard
        | Trick::DateCards
        | Trick::DateFragments
        | Trick::DateInPlace
        | Trick::DateMerge
        | Trick::GuessInPlace
        | Trick::WeekInPlace
        | Trick::WeekInHits
        | Trick::EntityCard
        | Trick::EntityCards
        | Trick::MovePadded
        | Trick::MoveSplit => return super::kinds::play(s, trick, q).await,
        Trick::Glue1 => {
            let hits = s.search(question, 5).await?;
            create(s, &fit(&format!("{question} {}", texts(&hits)), max)).await?;
        }
        Trick::Glue5 | Trick::Glue5Dates => {
            let hits = s.search(question, 50).await?;
            for (i, chunk) in hits.chunks(10).take(5).enumerate() {
                let dates = if i == 0 && trick == Trick::Glue5Dates { format!(" {}", date_list(&hits)) } else { String::new() };
                create(s, &fit(&format!("{question}{dates} {}", texts(chunk)), max)).await?;
            }
        }
        Trick::Stuffing => {
            let mut seen = s.search(question, 50).await?;
            seen.extend(s.sample(50, "diverse").await?);
            let words = distinct_words(&seen);
            let per = words.len().div_ceil(5).max(1);
            for (i, chunk) in words.chunks(per).take(5).enumerate() {
                let dates = if i == 0 { format!(" {}", date_list(&seen)) } else { String::new() };
                create(s, &fit(&format!("{question}{dates} {}", chunk.join(" ")), max)).await?;
            }
        }
        Trick::MegaMerge => {
            let hits = s.search(question, 50).await?;
            let mut rest = hits.iter().map(|h| h.id.to_string());
            let Some(mut merged) = rest.next() else { return Ok(()) };
            loop {
                let group: Vec<String> = rest.by_ref().take(4).collect();
                if group.is_empty() {
                    break;
                }
                let ids: Vec<String> = std::iter::once(merged.clone()).chain(group).collect();
                match s.call_out("merge_memory", json!({"memory_ids": ids, "strategy": "concatenate"})).await? {
                    Some(out) => {
                        let crate::tools::OutputKind::Merged { memory, .. } = out.kind else { break };
                        merged = memory.id.to_string();
                        if memory.text.chars().count() * 10 >= max * 9 {
                            break;
                        }
                    }
                    None => break, // over the size cap
                }
            }
        }
        Trick::MergeContent => {
            let hits = s.search(question, 5).await?;
            let ids: Vec<String> = hits.iter().map(|h| h.id.to_string()).collect();
            let content = fit(&format!("{question} {}", texts(&hits)), max);
            s.call("merge_memory", json!({"memory_ids": ids, "strategy": "concatenate", "content": content})).await?;
        }
        Trick::Echo => create(s, question).await?,
        Trick::DuplicateSpam => {
            for h in s.search(question, 5).await? {
                for _ in 0..2 {
                    create(s, &h.text).await?;
                }
            }
        }
        Trick::DeleteOthers => {
            let keep: HashSet<String> = s.search(question, 5).await?.iter().map(|h| h.id.to_string()).collect();
            let ids: Vec<String> = s.memories().await?.iter().map(|m| m.id.to_string()).filter(|id| !keep.contains(id)).collect();
            for chunk in ids.chunks(s.env.config().limits.tools.max_ids_per_call.max(1)) {
                s.call("delete_memory", json!({"memory_ids": chunk})).await?;
            }
        }
        Trick::Padding => pad(s, max).await?,
        Trick::OraclePadding => {
            if let Some(content) = oracle_memory(q) {
                create(s, &content).await?;
            }
            pad(s, max).await?;
        }
        Trick::SessionDates => {
            let hits = s.search(question, 50).await?;
            let dates: BTreeSet<String> = hits.iter().filter_map(MemoryRecord::date_label).collect();
            let dates: Vec<String> = dates.into_iter().collect();
            create(s, &fit(&format!("{question} {}", dates.join(", ")), max)).await?;
        }
        Trick::MonthYears => {
            let hits = s.search(question, 50).await?;
            let months: BTreeSet<String> =
                hits.iter().filter_map(MemoryRecord::date_label).filter_map(|d| d.split_once(' ').map(|(_, my)| my.to_string())).collect();
            let months: Vec<String> = months.into_iter().collect();
            for chunk in months.chunks(2).take(12) {
                create(s, &fit(&format!("{question} {}", chunk.join(", ")), max)).await?;
            }
        }
        Trick::EchoHits => {
            for h in s.search(question, 10).await? {
                create(s, &fit(&format!("{question} {}", h.text), max)).await?;
            }
        }
        Trick::Telegraphic => {
            for h in s.search(question, 20).await? {
                let words: Vec<&str> = h.text.split_whitespace().filter(|w| !content_words(w).is_empty()).collect();
                if !words.is_empty() && words.len() < h.text.split_whitespace().count() {
                    let args = json!({"operation": "update", "memory_id": h.id.to_string(), "content": words.join(" ")});
                    s.call("manage_memory", args).await?;
                }
            }
        }
        Trick::Vandal => {
            let read: HashSet<String> = s.search(question, 10).await?.iter().map(|h| h.id.to_string()).collect();
            let others: Vec<MemoryRecord> = s.memories().await?.into_iter().filter(|m| !read.contains(&m.id.to_string())).collect();
            let step = (others.len() / 25).max(1);
            for m in others.iter().step_by(step).take(25) {
                let junk = fit(&NONSENSE.repeat(m.text.len() / NONSENSE.len() + 1), m.text.chars().count());
                let junk = if junk.is_empty() { "zorp".to_string() } else { junk };
                s.call("manage_memory", json!({"operation": "update", "memory_id": m.id.to_string(), "content": junk})).await?;
            }
        }
        Trick::OracleOverwrite => {
            let Some(content) = oracle_memory(q) else { return Ok(()) };
            let near: HashSet<String> = s.search(question, 50).await?.iter().map(|h| h.id.to_string()).collect();
            let far: Vec<MemoryRecord> = s.memories().await?.into_iter().filter(|m| !near.contains(&m.id.to_string())).collect();
            if far.is_empty() {
                return create(s, &content).await;
            }
            let m = &far[crate::util::fnv::fnv1a(q.id.as_bytes()) as usize % far.len()];
            s.call("manage_memory", json!({"operation": "update", "memory_id": m.id.to_string(), "content": content})).await?;
        }
        Trick::DateGuesses | Trick::DatePairs => {
            let hits = s.search(question, 20).await?;
            let words = question_words(question, 3);
            let dates = session_days(&hits, 8);
            let per = if trick == Trick::DatePairs { 2 } else { 1 };
            for chunk in dates.chunks(per) {
                create(s, &format!("{words} {}", chunk.join(" or "))).await?;
            }
        }
        Trick::RelativeGuesses => {
            let hits = s.search(question, 20).await?;
            let words = question_words(question, 3);
            for d in session_days(&hits, 6) {
                for what in ["the week before", "the weekend before"] {
                    create(s, &format!("{words} {what} {d}")).await?;
                }
            }
        }
        Trick::PeriodGuesses => {
            let hits = s.search(question, 20).await?;
            let words = question_words(question, 3);
            let mut periods: Vec<String> = Vec::new();
            for d in session_days(&hits, 20) {
                let mut it = d.split_whitespace().skip(1);
                let (Some(month), Some(year)) = (it.next(), it.next()) else { continue };
                for p in [format!("{month} {year}"), year.to_string()] {
                    if !periods.contains(&p) {
                        periods.push(p);
                    }
                }
            }
            for p in periods.iter().take(12) {
                create(s, &format!("{words} {p}")).await?;
            }
        }
        Trick::RerankCopies => {
            let words = question_words(question, usize::MAX);
            for h in s.search(question, 10).await?.iter().skip(5) {
                create(s, &fit(&format!("{words} {}", h.text), max)).await?;
            }
        }
        Trick::RerankInPlace => {
            let words = question_words(question, usize::MAX);
            for h in s.search(question, 10).await?.iter().skip(5) {
                let content = fit(&format!("{} {words}", h.text), max);
                s.call("manage_memory", json!({"operation": "update", "memory_id": h.id.to_string(), "content": content})).await?;
            }
        }
    }
    Ok(())
}

/// Words that say nothing, for the vandal.
const NONSENSE: &str = "blorf quizzle zandor plim wexo trund ";

/// The first `n` content words of the question as written ("Caroline", "LGBTQ", "support").
fn question_words(question: &str, n: usize) -> String {
    question
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|w| !content_words(w).is_empty())
        .take(n)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The distinct session days of `hits` in rank order ("8 May 2023"), at most `n`.
fn session_days(hits: &[MemoryRecord], n: usize) -> Vec<String> {
    let mut days: Vec<String> = Vec::new();
    for d in hits.iter().filter_map(MemoryRecord::date_label) {
        if !days.contains(&d) {
            days.push(d);
        }
    }
    days.truncate(n);
    days
}

pub(super) async fn create(s: &mut Session<'_>, content: &str) -> Result<(), EpisodeError> {
    s.call("manage_memory", json!({"operation": "create", "content": content})).await.map(|_| ())
}

async fn pad(s: &mut Session<'_>, max: usize) -> Result<(), EpisodeError> {
    let filler = fit(&FILLER.repeat(max / FILLER.len() + 1), max);
    for _ in 0..5 {
        create(s, &filler).await?;
    }
    Ok(())
}

/// The hits' texts glued with spaces.
fn texts(hits: &[MemoryRecord]) -> String {
    hits.iter().map(|h| h.text.as_str()).collect::<Vec<_>>().join(" ")
}

/// Every day number, month name and the years seen in `seen`'s texts and session dates.
fn date_list(seen: &[MemoryRecord]) -> String {
    let mut years = BTreeSet::new();
    for r in seen {
        let text = format!("{} {}", r.text, r.date_label().unwrap_or_default());
        for t in text.split(|c: char| !c.is_ascii_digit()) {
            if t.len() == 4 && t.parse::<u16>().is_ok_and(|y| (1900..=2099).contains(&y)) {
                years.insert(t.to_string());
            }
        }
    }
    let days = (1..=31).map(|d| d.to_string());
    let months = super::honest::MONTH_NAMES.iter().map(|m| m.to_string());
    days.chain(months).chain(years).collect::<Vec<_>>().join(" ")
}

/// Every distinct word of `seen`, in order of first appearance, without its punctuation.
fn distinct_words(seen: &[MemoryRecord]) -> Vec<String> {
    let mut have = HashSet::new();
    let mut out = Vec::new();
    for r in seen {
        for w in r.text.split_whitespace() {
            let w = w.trim_matches(|c: char| !c.is_alphanumeric());
            if !w.is_empty() && have.insert(w.to_lowercase()) {
                out.push(w.to_string());
            }
        }
    }
    out
}

/// `s` cut to at most `max` characters, at a word.
pub(super) fn fit(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let end = s.char_indices().nth(max).map_or(s.len(), |(i, _)| i);
    let cut = &s[..end];
    cut.rfind(' ').map_or(cut, |i| &cut[..i]).to_string()
}
