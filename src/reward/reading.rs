//! What an evaluator reads: the retrieved memories within one budget of content words, not a count of
//! memories.
//!
//! MemUpdate's evaluator read the top-k memories, whatever their length. A policy then gains by packing:
//! five long memories glued from fifty search hits put ten times the conversation in front of the
//! evaluator, with no fact added. Here the evaluator reads **as many content words as M₀'s top-k held for
//! this question** and no more ([`cost`]):
//!
//! - on M₀ it reads the top-k whole ([`Reading::whole`]); their content words are the question's budget;
//! - on the edited memory it reads the retrieved memories in rank order until that budget is spent
//!   ([`Reading::budgeted`]), the last one cut at a word.
//!
//! So an unchanged memory is read exactly as before (a no-op scores exactly 0); packing fits no more
//! words than it displaces; stripping memories to their content words fits no more of them; and a memory
//! that drops a repeated fact lets more of the relevant memory be read, which a reader would see too.
//!
//! Each memory is read in its [`MemoryRecord::view`] (`8 May 2023: text`), the view the tools show the
//! policy and the LLM evaluators' QA prompt shows the model.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use crate::memory::{MemoryId, MemoryRecord};
use crate::text::has_content_word;

/// One memory as the evaluator read it.
#[derive(Debug, Clone, PartialEq)]
pub struct Unit {
    /// Its id.
    pub id: MemoryId,
    /// Its view, cut at the budget for the last one read.
    pub text: String,
    /// Bytes of `text` that are the date label and its `": "` (0 without a date).
    pub label: usize,
    /// Its evidence ids.
    pub evidence: Vec<String>,
    /// Whether the budget cut it.
    pub truncated: bool,
    /// Whether the episode wrote words of its own into it ([`MemoryRecord::authored`]; M₀'s memories, and
    /// what a merge or a cut carries of them, were written by no step).
    pub written: bool,
    /// For a unit the episode wrote: the content words of the M₀ memories it took the place of (those it
    /// removed that share its id or an evidence id: a rewrite, a merge, a split), when known
    /// ([`Reading::carrying`]). An answer it carries from them is what the conversation said, not a
    /// candidate it offers.
    pub carried: Option<Arc<BTreeSet<String>>>,
}

/// The memories an evaluator read for a question, best first.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Reading {
    /// In rank order.
    pub units: Vec<Unit>,
    /// The budget, in content words of views ([`cost`]).
    pub budget: usize,
}

impl Reading {
    /// The memories read whole; the budget is the [`cost`] of their views (M₀'s top-k).
    pub fn whole(ranked: &[&MemoryRecord]) -> Reading {
        let units: Vec<Unit> = ranked
            .iter()
            .map(|r| {
                let view = r.view();
                let full = view.len();
                unit(r, view, full, false)
            })
            .collect();
        let budget = units.iter().map(|u| cost(&u.text)).sum();
        Reading { units, budget }
    }

    /// The memories in rank order until views of `budget` [`cost`] are read; the last is cut at the last
    /// word within the budget (a unit cut to nothing is not read).
    pub fn budgeted(ranked: &[&MemoryRecord], budget: usize) -> Reading {
        Self::budgeted_by(ranked, budget, |r| cost(&r.view()))
    }

    /// [`Self::budgeted`], with each record's view's [`cost`] given by `cost_of` (a caller that reads the
    /// same memories for many questions keeps their costs).
    pub fn budgeted_by(ranked: &[&MemoryRecord], budget: usize, cost_of: impl Fn(&MemoryRecord) -> usize) -> Reading {
        let mut left = budget;
        let mut units = Vec::new();
        for r in ranked {
            if left == 0 {
                break;
            }
            let n = cost_of(r);
            let view = r.view();
            let full = view.len();
            if n <= left {
                left -= n;
                units.push(unit(r, view, full, false));
                continue;
            }
            let cut = cut_to_cost(&view, left);
            if !cut.is_empty() {
                units.push(unit(r, cut.to_string(), full, true));
            }
            break;
        }
        Reading { units, budget }
    }

    /// Characters read.
    pub fn chars(&self) -> usize {
        self.units.iter().map(|u| u.text.chars().count()).sum()
    }

    /// The unit texts, in rank order.
    pub fn texts(&self) -> Vec<&str> {
        self.units.iter().map(|u| u.text.as_str()).collect()
    }

    /// Gives each unit the episode wrote what it carries of M₀ (`carried`, by id: [`Unit::carried`]).
    pub fn carrying(mut self, carried: &HashMap<MemoryId, Arc<BTreeSet<String>>>) -> Reading {
        for u in self.units.iter_mut().filter(|u| u.written) {
            u.carried = carried.get(&u.id).cloned();
        }
        self
    }

    /// Ids read, in rank order.
    pub fn ids(&self) -> Vec<MemoryId> {
        self.units.iter().map(|u| u.id).collect()
    }

    /// Share of `evidence` ids covered by the provenance of the memories read (even in part); 0 when
    /// there is no evidence.
    pub fn evidence_recall(&self, evidence: &[String]) -> f64 {
        let wanted: HashSet<&str> = evidence.iter().map(String::as_str).collect();
        if wanted.is_empty() {
            return 0.0;
        }
        let covered: HashSet<&str> = self.units.iter().flat_map(|u| u.evidence.iter().map(String::as_str)).collect();
        wanted.iter().filter(|e| covered.contains(*e)).count() as f64 / wanted.len() as f64
    }
}

/// `r` read as `text` (its view, `full` bytes long, or a cut of it). The view is the date label, `": "` and the
/// text, or the text alone: what it holds beyond the text is the label and its `": "`.
fn unit(r: &MemoryRecord, text: String, full: usize, truncated: bool) -> Unit {
    let label = full.saturating_sub(r.text.len()).min(text.len());
    Unit { id: r.id, text, evidence: r.evidence.clone(), truncated, label, written: r.authored, carried: None }
}

impl Unit {
    /// The memory's own text as read, without its date label.
    pub fn body(&self) -> &str {
        self.text.get(self.label..).unwrap_or("")
    }
}

/// What reading `text` costs: its content words (words that are not stopwords, [`crate::text::content_words`]). A
/// character budget paid for terseness: rewriting the hits to their content words fitted more hits into
/// it with no fact added; a content-word budget reads as much information as M₀'s top-k held, however it
/// is worded.
pub fn cost(text: &str) -> usize {
    text.split_whitespace().filter(|w| has_content_word(w)).count()
}

/// The longest prefix of `s` whose [`cost`] is at most `max`, ending at a word.
fn cut_to_cost(s: &str, max: usize) -> &str {
    let mut used = 0;
    let mut end = 0;
    for w in s.split_whitespace() {
        let at = w.as_ptr() as usize - s.as_ptr() as usize;
        let c = usize::from(has_content_word(w));
        if used + c > max {
            break;
        }
        used += c;
        end = at + w.len();
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MemoryType;
    use proptest::prelude::*;

    fn rec(id: u32, text: &str, date: Option<&str>) -> MemoryRecord {
        MemoryRecord {
            id: MemoryId(id),
            text: text.into(),
            memory_type: MemoryType::Episodic,
            speaker: None,
            session: None,
            session_date: date.map(str::to_string),
            evidence: vec![format!("D1:{id}")],
            source: "t".into(),
            created_step: 0,
            authored: false,
        }
    }

    #[test]
    fn the_top_k_sets_the_budget_and_an_edited_memory_is_read_up_to_it() {
        let a = rec(1, "Caroline went hiking.", Some("1:56 pm on 8 May, 2023"));
        let b = rec(2, "Melanie paints sunsets.", None);
        let whole = Reading::whole(&[&a, &b]);
        assert_eq!(whole.texts(), ["8 May 2023: Caroline went hiking.", "Melanie paints sunsets."]);
        assert_eq!(whole.budget, cost("8 May 2023: Caroline went hiking.") + 3);
        // The same memories in the same order read the same.
        assert_eq!(Reading::budgeted(&[&a, &b], whole.budget), whole);
        // A long memory first is cut at a word; nothing after it is read.
        let long = rec(3, "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima", None);
        let r = Reading::budgeted(&[&long, &a, &b], 4);
        assert_eq!(r.texts(), ["alpha bravo charlie delta"]);
        assert!(r.units[0].truncated);
        assert_eq!(r.evidence_recall(&["D1:3".into(), "D1:1".into()]), 0.5);
        assert!(Reading::budgeted(&[&long], 0).units.is_empty());
        assert_eq!(Reading::budgeted(&[], 10).chars(), 0);
    }

    #[test]
    fn the_budget_counts_content_words_so_terse_text_reads_no_more() {
        let plain = rec(1, "Caroline went to the beach with her kids last summer.", None);
        let terse = rec(2, "Caroline went beach kids last summer.", None);
        assert_eq!(cost(&plain.view()), cost(&terse.view()), "stopwords cost nothing");
        let next = rec(3, "Melanie paints sunsets.", None);
        let budget = Reading::whole(&[&plain]).budget;
        assert_eq!(Reading::budgeted(&[&terse, &next], budget).units.len(), 1, "the terse memory fills the same budget");
    }

    proptest! {
        #[test]
        fn never_reads_past_the_budget(texts in proptest::collection::vec("[a-z ]{0,40}", 0..8), budget in 0usize..200) {
            let recs: Vec<MemoryRecord> = texts.iter().enumerate().map(|(i, t)| rec(i as u32, t, None)).collect();
            let refs: Vec<&MemoryRecord> = recs.iter().collect();
            let r = Reading::budgeted(&refs, budget);
            prop_assert!(r.units.iter().map(|u| cost(&u.text)).sum::<usize>() <= budget);
            for (u, m) in r.units.iter().zip(&recs) {
                prop_assert!(m.view().starts_with(&u.text));
            }
        }

        /// A unit's label is its date label and `": "`, as much of it as was read.
        #[test]
        fn the_label_is_the_date_label_read(text in "\\PC{0,30}", date in prop::option::of("\\PC{0,16}|[0-9]{1,2} May, 2023"), budget in 0usize..8) {
            let r = rec(1, &text, date.as_deref());
            for u in Reading::whole(&[&r]).units.iter().chain(&Reading::budgeted(&[&r], budget).units) {
                prop_assert_eq!(u.label, r.date_label().map_or(0, |d| (d.len() + 2).min(u.text.len())));
            }
        }
    }
}
