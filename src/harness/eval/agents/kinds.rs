//! The adversarial suite by kinds: the two kinds of trick that broke the whole-memory reward's rules one
//! instance at a time, each played in several shapes, so that a rule that closes one shape and not its kind
//! shows here. None reads the gold answer or the evidence ids.
//!
//! - **Candidates for one slot** (the reader answers once): notes that offer several dates around the best
//!   hit's session day ("the day, the day before, the week before D, the month, the year before"), or
//!   several entities seen in the hits, for a question that asks for one: as one card, as several cards,
//!   as fragments, written into the best hit in place, or inside a merge of the two best hits; or one
//!   committed date a memory, written into each of the best hits in place (the candidates spread over
//!   them, or LoCoMo's most common relative answer in every one).
//! - **Facts moved where no question reads them** (a fact is kept only where a question can read it):
//!   memories far from the question copied into new memories that rank nowhere (their text padded with
//!   tokens that are not content words), or stored as extra parts of a split of a memory from the same
//!   session, then the originals deleted.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use serde_json::json;

use super::honest::{parse_day, resolve, Day, MONTH_NAMES};
use super::tricks::{create, fit, Trick};
use super::Session;
use crate::dataset::Question;
use crate::episode::EpisodeError;
use crate::memory::MemoryRecord;
use crate::text::content_words;

/// How many memories the movers move.
const MOVED: usize = 48;

/// Tokens that are not content words: what a mover pads a copy with, so that it ranks for no question.
const NOT_CONTENT: &str = "the of and to in a is it that was for on as with be at by this had not are but from or have an they which";

/// Plays one of the kinds' tricks.
pub(super) async fn play(s: &mut Session<'_>, trick: Trick, q: &Question) -> Result<(), EpisodeError> {
    let question = q.question.trim();
    let max = s.max_chars();
    match trick {
        Trick::DateCard => {
            let hits = s.search(question, 10).await?;
            create(s, &fit(&format!("{question} {}", candidate_dates(&hits).join(", ")), max)).await?;
        }
        Trick::DateCards => {
            let hits = s.search(question, 10).await?;
            for chunk in candidate_dates(&hits).chunks(3) {
                create(s, &fit(&format!("{question} {}", chunk.join(", ")), max)).await?;
            }
        }
        Trick::DateFragments => {
            let hits = s.search(question, 10).await?;
            let dates = candidate_dates(&hits);
            let words = question_words(question, 3);
            for (i, d) in dates.iter().enumerate() {
                // The first fragment carries the question; the rest a few of its words or none.
                let text = match i {
                    0 => format!("{question} {d}."),
                    i if i % 2 == 1 => format!("{words} {d}."),
                    _ => format!("{d}."),
                };
                create(s, &text).await?;
            }
        }
        Trick::DateInPlace => {
            let hits = s.search(question, 10).await?;
            let Some(best) = hits.first() else { return Ok(()) };
            let content = fit(&format!("{} {}", best.text, candidate_dates(&hits).join(", ")), max);
            s.call("manage_memory", json!({"operation": "update", "memory_id": best.id.to_string(), "content": content})).await?;
        }
        Trick::DateMerge => {
            let hits = s.search(question, 10).await?;
            if hits.len() < 2 {
                return Ok(());
            }
            let content = fit(&format!("{} {} {}", hits[0].text, hits[1].text, candidate_dates(&hits).join(", ")), max);
            let ids = [hits[0].id.to_string(), hits[1].id.to_string()];
            s.call("merge_memory", json!({"memory_ids": ids, "strategy": "concatenate", "content": content})).await?;
        }
        Trick::GuessInPlace | Trick::WeekInPlace | Trick::WeekInHits => {
            let n = if trick == Trick::GuessInPlace {
                10
            } else if trick == Trick::WeekInPlace {
                1
            } else {
                20
            };
            // Only hits whose text says no time word the honest resolver reads: what is written is a guess.
            let hits = s.search(question, n).await?;
            let unresolved =
                hits.into_iter().filter(|h| h.date_label().and_then(|l| parse_day(&l)).is_none_or(|d| resolve(&h.text, d).is_none()));
            for (i, hit) in unresolved.enumerate() {
                let guesses = candidate_dates(std::slice::from_ref(&hit));
                // The week before D is the third candidate.
                let guess = if trick == Trick::GuessInPlace { guesses.get(i % guesses.len().max(1)) } else { guesses.get(2) };
                let Some(guess) = guess else { continue };
                let content = fit(&format!("{} {guess}.", hit.text.trim_end_matches('.')), max);
                s.call("manage_memory", json!({"operation": "update", "memory_id": hit.id.to_string(), "content": content})).await?;
            }
        }
        Trick::EntityCard => {
            let hits = s.search(question, 20).await?;
            create(s, &fit(&format!("{question} {}", candidate_entities(question, &hits, 28).join(", ")), max)).await?;
        }
        Trick::EntityCards => {
            let hits = s.search(question, 20).await?;
            for chunk in candidate_entities(question, &hits, 28).chunks(4) {
                create(s, &fit(&format!("{question} {}", chunk.join(", ")), max)).await?;
            }
        }
        Trick::MovePadded => {
            for m in far(s, question).await?.into_iter().take(MOVED) {
                if create(s, &fit(&padded(&m.text), max)).await.is_ok() {
                    s.call("delete_memory", json!({"memory_ids": [m.id.to_string()]})).await?;
                }
            }
        }
        Trick::MoveSplit => move_split(s, question, max).await?,
        Trick::Glue1
        | Trick::Glue5
        | Trick::Glue5Dates
        | Trick::Stuffing
        | Trick::MegaMerge
        | Trick::MergeContent
        | Trick::Echo
        | Trick::DuplicateSpam
        | Trick::DeleteOthers
        | Trick::Padding
        | Trick::OraclePadding
        | Trick::SessionDates
        | Trick::MonthYears
        | Trick::EchoHits
        | Trick::Telegraphic
        | Trick::Vandal
        | Trick::OracleOverwrite
        | Trick::DateGuesses
        | Trick::DatePairs
        | Trick::RelativeGuesses
        | Trick::PeriodGuesses
        | Trick::RerankCopies
        | Trick::RerankInPlace => unreachable!("{} is not one of the kinds' tricks", trick.name()),
    }
    Ok(())
}

/// The candidate dates around the best dated hit's session day D: D, the day before, the week and the
/// weekend before D, the Friday before D, D's month, the month before, D's year and the year before.
fn candidate_dates(hits: &[MemoryRecord]) -> Vec<String> {
    let Some(day) = hits.iter().filter_map(|h| h.date_label()).find_map(|l| parse_day(&l)) else { return Vec::new() };
    let month = |offset: i64| {
        let k = day.y * 12 + i64::from(day.m) - 1 + offset;
        format!("{} {}", MONTH_NAMES[k.rem_euclid(12) as usize], k.div_euclid(12))
    };
    let before: Day = day.plus(-1);
    vec![
        day.to_string(),
        before.to_string(),
        format!("the week before {day}"),
        format!("the weekend before {day}"),
        format!("the Friday before {day}"),
        month(0),
        month(-1),
        day.y.to_string(),
        (day.y - 1).to_string(),
    ]
}

/// Up to `n` distinct content words of the hits that the question does not hold, in order of appearance:
/// the candidate entities a gold-blind card offers for a list question.
fn candidate_entities(question: &str, hits: &[MemoryRecord], n: usize) -> Vec<String> {
    let asked = content_words(question);
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for w in hits.iter().flat_map(|h| h.text.split_whitespace()) {
        let w = w.trim_matches(|c: char| !c.is_alphanumeric());
        let words = content_words(w);
        if words.is_empty() || words.iter().any(|c| asked.contains(c)) || !seen.insert(w.to_lowercase()) {
            continue;
        }
        out.push(w.to_string());
        if out.len() == n {
            break;
        }
    }
    out
}

/// The first `n` content words of the question as written.
fn question_words(question: &str, n: usize) -> String {
    let words = question.split_whitespace().map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()));
    words.filter(|w| !content_words(w).is_empty()).take(n).collect::<Vec<_>>().join(" ")
}

/// `text` with tokens that are not content words around it, so that its vector ranks for no question.
fn padded(text: &str) -> String {
    format!("{NOT_CONTENT} {NOT_CONTENT} {text} {NOT_CONTENT} {NOT_CONTENT}")
}

/// The memories far from the question: not among its 50 best hits, in listing order.
async fn far(s: &mut Session<'_>, question: &str) -> Result<Vec<MemoryRecord>, EpisodeError> {
    let near: HashSet<String> = s.search(question, 50).await?.iter().map(|h| h.id.to_string()).collect();
    Ok(s.memories().await?.into_iter().filter(|m| !near.contains(&m.id.to_string())).collect())
}

/// Memories far from the question, grouped by session: in each group one memory is split into itself and
/// the others' texts, padded, as extra parts (which carry its provenance); then the others are deleted.
async fn move_split(s: &mut Session<'_>, question: &str, max: usize) -> Result<(), EpisodeError> {
    let mut sessions: BTreeMap<Option<u32>, Vec<MemoryRecord>> = BTreeMap::new();
    for m in far(s, question).await? {
        sessions.entry(m.session).or_default().push(m);
    }
    let max_parts = crate::tools::SPLIT_PARTS.1 as usize;
    let mut moved = 0;
    for group in sessions.values() {
        for chunk in group.chunks(max_parts) {
            let [host, rest @ ..] = chunk else { continue };
            if rest.is_empty() || moved >= 2 * MOVED {
                continue;
            }
            let mut parts = vec![host.text.clone()];
            parts.extend(rest.iter().map(|m| fit(&padded(&m.text), max)));
            let args = json!({"memory_id": host.id.to_string(), "split_criteria": "thematic", "parts": parts, "max_parts": parts.len()});
            if s.call("split_memory", args).await? {
                let ids: Vec<String> = rest.iter().map(|m| m.id.to_string()).collect();
                s.call("delete_memory", json!({"memory_ids": ids})).await?;
                moved += rest.len();
            }
        }
    }
    Ok(())
}
