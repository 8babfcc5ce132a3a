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
}

impl Trick {
    /// Every trick, in report order.
    pub const ALL: [Trick; 15] = [
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
    }
    Ok(())
}

async fn create(s: &mut Session<'_>, content: &str) -> Result<(), EpisodeError> {
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
fn fit(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let end = s.char_indices().nth(max).map_or(s.len(), |(i, _)| i);
    let cut = &s[..end];
    cut.rfind(' ').map_or(cut, |i| &cut[..i]).to_string()
}
