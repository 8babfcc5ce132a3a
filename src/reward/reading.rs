//! What an evaluator reads: the retrieved memories as one text budget, not as a count of memories.
//!
//! MemUpdate's evaluator read the top-k memories, whatever their length. A policy then gains by packing:
//! five long memories glued from fifty search hits put ten times the conversation in front of the
//! evaluator, with no fact added. Here the evaluator reads **as much text as M₀'s top-k held for this
//! question** and no more:
//!
//! - on M₀ it reads the top-k whole ([`Reading::whole`]); their length is the question's budget;
//! - on the edited memory it reads the retrieved memories in rank order until that budget is spent
//!   ([`Reading::budgeted`]), the last one cut at a word boundary.
//!
//! So an unchanged memory is read exactly as before (a no-op scores exactly 0); packing fits no more text
//! than it displaces; and a memory that says the same in fewer characters lets more of the relevant
//! memory be read, which is an improvement a reader would see too.
//!
//! Each memory is read in its [`MemoryRecord::view`] (`8 May 2023: text`), the view the tools show the
//! policy and the LLM evaluators' QA prompt shows the model.

use std::collections::HashSet;

use crate::memory::{MemoryId, MemoryRecord};

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
}

/// The memories an evaluator read for a question, best first.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Reading {
    /// In rank order.
    pub units: Vec<Unit>,
    /// The text budget, in characters of views.
    pub budget: usize,
}

impl Reading {
    /// The memories read whole; the budget is the length of their views (M₀'s top-k).
    pub fn whole(ranked: &[&MemoryRecord]) -> Reading {
        let units: Vec<Unit> = ranked.iter().map(|r| unit(r, r.view(), false)).collect();
        let budget = units.iter().map(|u| u.text.chars().count()).sum();
        Reading { units, budget }
    }

    /// The memories in rank order until `budget` characters of views are read; the last is cut at the
    /// last whitespace within the budget (a unit cut to nothing is not read).
    pub fn budgeted(ranked: &[&MemoryRecord], budget: usize) -> Reading {
        let mut left = budget;
        let mut units = Vec::new();
        for r in ranked {
            if left == 0 {
                break;
            }
            let view = r.view();
            let n = view.chars().count();
            if n <= left {
                left -= n;
                units.push(unit(r, view, false));
                continue;
            }
            let cut = cut_at_word(&view, left);
            if !cut.is_empty() {
                units.push(unit(r, cut.to_string(), true));
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

fn unit(r: &MemoryRecord, text: String, truncated: bool) -> Unit {
    let label = r.date_label().map_or(0, |d| (d.len() + 2).min(text.len()));
    Unit { id: r.id, text, evidence: r.evidence.clone(), truncated, label }
}

impl Unit {
    /// The memory's own text as read, without its date label.
    pub fn body(&self) -> &str {
        self.text.get(self.label..).unwrap_or("")
    }
}

/// The longest prefix of `s` of at most `max` characters that ends before a whitespace (no word is cut);
/// empty when the first word is longer than `max`.
fn cut_at_word(s: &str, max: usize) -> &str {
    let end = s.char_indices().nth(max).map_or(s.len(), |(i, _)| i);
    if end == s.len() {
        return s;
    }
    if s[end..].starts_with(char::is_whitespace) {
        return s[..end].trim_end();
    }
    match s[..end].rfind(char::is_whitespace) {
        Some(i) => s[..i].trim_end(),
        None => "",
    }
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
        }
    }

    #[test]
    fn the_top_k_sets_the_budget_and_an_edited_memory_is_read_up_to_it() {
        let a = rec(1, "Caroline went hiking.", Some("1:56 pm on 8 May, 2023"));
        let b = rec(2, "Melanie paints sunsets.", None);
        let whole = Reading::whole(&[&a, &b]);
        assert_eq!(whole.texts(), ["8 May 2023: Caroline went hiking.", "Melanie paints sunsets."]);
        assert_eq!(whole.budget, 33 + 23);
        // The same memories in the same order read the same.
        assert_eq!(Reading::budgeted(&[&a, &b], whole.budget), whole);
        // A long memory first is cut at a word; nothing after it is read.
        let long = rec(3, "one two three four five six seven eight nine ten eleven twelve", None);
        let r = Reading::budgeted(&[&long, &a, &b], 20);
        assert_eq!(r.texts(), ["one two three four"]);
        assert!(r.units[0].truncated);
        assert_eq!(r.evidence_recall(&["D1:3".into(), "D1:1".into()]), 0.5);
        // A first word longer than the budget reads nothing of that memory.
        assert!(Reading::budgeted(&[&long], 2).units.is_empty());
        assert_eq!(Reading::budgeted(&[&long], 3).texts(), ["one"]);
        assert_eq!(Reading::budgeted(&[], 10).chars(), 0);
    }

    proptest! {
        #[test]
        fn never_reads_past_the_budget(texts in proptest::collection::vec("[a-z ]{0,40}", 0..8), budget in 0usize..200) {
            let recs: Vec<MemoryRecord> = texts.iter().enumerate().map(|(i, t)| rec(i as u32, t, None)).collect();
            let refs: Vec<&MemoryRecord> = recs.iter().collect();
            let r = Reading::budgeted(&refs, budget);
            prop_assert!(r.chars() <= budget);
            for (u, m) in r.units.iter().zip(&recs) {
                prop_assert!(m.view().starts_with(&u.text));
            }
        }
    }
}
