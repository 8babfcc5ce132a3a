//! The text ledger: the content words an episode's edits added to the memory, and the ones they took
//! away, counted where they were written.
//!
//! The single-question reward charged growth in characters, net: `max(0, chars_new − chars_old)`. Net
//! growth let a removal pay for an addition, so writing a fact *over* an unrelated memory cost less than
//! creating it, and deleting or overwriting memory that no question read cost nothing at all. A ledger over
//! the whole memory (M₀'s count of each word against the final memory's) closed that, but let words
//! *move* for free: copying a memory's text into a new memory, then deleting the original, changed no
//! count. So the ledger counts words in the unit the reading budget counts ([`crate::reward::reading::cost`]),
//! content words, **within each piece of provenance**: an M₀ memory the episode removed (deleted or
//! rewrote) and the records it wrote are joined when a record keeps the memory's id or one of its evidence
//! ids (a rewrite, a merge, a split); each group's words are compared as a multiset.
//!
//! - `added`: Σ over groups and words of max(0, written count − removed count). A new memory adds all of
//!   its words; a copy adds them again; a merge that concatenates, or a split that only cuts, adds nothing;
//!   a rewrite adds the words it did not keep.
//! - `removed`: Σ over groups and words of max(0, removed count − written count). A deletion removes its
//!   words; a rewrite removes the words it dropped; a memory whose text was copied elsewhere and then
//!   deleted removes them too (the copy, without the memory's provenance, is another group, and adds them).
//!
//! Both are divided by M₀'s content words. Keeping provenance never costs more than copying the same text
//! without it: a link only joins groups, and joining groups only cancels words. Overwriting memory *m* with
//! text *o* instead of creating *o* saves the words *o* shares with *m* and loses the words of *m* that *o*
//! does not repeat: it costs no less than creating *o* unless *o* repeats more than half of *m* (a rewrite
//! of *m*, not an unrelated memory), and wrecking memory always costs, whether or not a question reads it.

use std::collections::HashMap;

use crate::memory::MemoryRecord;
use crate::text::content_word_tokens;

/// Each record's group: records are joined when they share an id or an evidence id (union–find).
fn groups(all: &[(&MemoryRecord, i64)]) -> Vec<usize> {
    fn find(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let mut parent: Vec<usize> = (0..all.len()).collect();
    let mut first: HashMap<String, usize> = HashMap::new();
    for (i, (r, _)) in all.iter().enumerate() {
        let keys = std::iter::once(format!("#{}", r.id.0)).chain(r.evidence.iter().map(|e| format!("@{e}")));
        for key in keys {
            let j = *first.entry(key).or_insert(i);
            let (a, b) = (find(&mut parent, i), find(&mut parent, j));
            parent[a] = b;
        }
    }
    (0..all.len()).map(|i| find(&mut parent, i)).collect()
}

/// Content words added to and removed from a memory, against its M₀.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ledger {
    /// Content words of M₀.
    pub base: usize,
    /// Σ max(0, final − M₀) over words.
    pub added: usize,
    /// Σ max(0, M₀ − final) over words.
    pub removed: usize,
}

impl Ledger {
    /// The ledger of a memory that is M₀ less the `removed` records (M₀ records deleted or rewritten) plus the
    /// `written` records (the records the episode wrote), where M₀ holds `base` content words: words compared
    /// within each group of records joined by a shared id or evidence id.
    pub fn of(base: usize, removed: &[&MemoryRecord], written: &[&MemoryRecord]) -> Ledger {
        let all: Vec<(&MemoryRecord, i64)> = removed.iter().map(|r| (*r, -1)).chain(written.iter().map(|r| (*r, 1))).collect();
        let group = groups(&all);
        let mut net: HashMap<(usize, String), i64> = HashMap::new();
        for ((r, sign), g) in all.iter().zip(&group) {
            for w in content_word_tokens(&r.text) {
                *net.entry((*g, w)).or_default() += sign;
            }
        }
        let added = net.values().filter(|n| **n > 0).map(|n| *n as usize).sum();
        let removed = net.values().filter(|n| **n < 0).map(|n| n.unsigned_abs() as usize).sum();
        Ledger { base, added, removed }
    }

    /// Words added, as a share of M₀'s.
    pub fn growth(&self) -> f64 {
        self.added as f64 / self.base.max(1) as f64
    }

    /// Words removed, as a share of M₀'s.
    pub fn loss(&self) -> f64 {
        self.removed as f64 / self.base.max(1) as f64
    }
}

/// Content words of `text` (with repeats): what it puts in the ledger.
pub fn words(text: &str) -> usize {
    content_word_tokens(text).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{MemoryId, MemoryType};
    use proptest::prelude::*;

    fn rec(id: u32, text: &str, evidence: &[&str]) -> MemoryRecord {
        MemoryRecord {
            id: MemoryId(id),
            text: text.into(),
            memory_type: MemoryType::Episodic,
            speaker: None,
            session: None,
            session_date: None,
            evidence: evidence.iter().map(|e| e.to_string()).collect(),
            source: "t".into(),
            created_step: 0,
            authored: false,
        }
    }

    #[test]
    fn copies_add_rewrites_trade_and_cuts_cost_nothing() {
        let text = "Caroline went to the LGBTQ support group yesterday.";
        let m = rec(1, text, &["D1:3"]);
        // A copy adds every content word again (caroline, went, lgbtq, support, group, yesterday).
        assert_eq!(words(text), 6);
        assert_eq!(Ledger::of(100, &[], &[&rec(9, text, &[])]), Ledger { base: 100, added: 6, removed: 0 });
        // Deleting it removes them.
        assert_eq!(Ledger::of(100, &[&m], &[]), Ledger { base: 100, added: 0, removed: 6 });
        // A split that only cuts, or a merge that concatenates, moves no word: the parts keep its evidence.
        let parts = [rec(9, "Caroline went to the LGBTQ", &["D1:3"]), rec(10, "support group yesterday.", &["D1:3"])];
        assert_eq!(Ledger::of(100, &[&m], &[&parts[0], &parts[1]]), Ledger { base: 100, added: 0, removed: 0 });
        // Resolving a date in place trades one word for three.
        let resolved = rec(1, "Caroline went to the LGBTQ support group on 7 May 2023.", &["D1:3"]);
        assert_eq!(Ledger::of(100, &[&m], &[&resolved]), Ledger { base: 100, added: 3, removed: 1 });
        assert!((Ledger::of(100, &[&m], &[&resolved]).growth() - 0.03).abs() < 1e-12);
        assert_eq!(Ledger::default().loss(), 0.0);
    }

    #[test]
    fn words_moved_to_a_copy_cost_as_added_and_removed() {
        let text = "Caroline went to the LGBTQ support group yesterday.";
        let m = rec(1, text, &["D1:3"]);
        // The text copied into a new memory without its provenance, the original deleted: the words are
        // removed from where they were and added where they went.
        let moved = Ledger::of(100, &[&m], &[&rec(9, text, &[])]);
        assert_eq!(moved, Ledger { base: 100, added: 6, removed: 6 });
        assert!(moved.growth() + moved.loss() > Ledger::of(100, &[&m], &[]).loss(), "moving costs more than deleting");
    }

    #[test]
    fn overwriting_an_unrelated_memory_costs_more_than_creating_the_text() {
        let oracle = rec(9, "When did Caroline go to the LGBTQ support group? 7 May 2023", &[]);
        let unrelated = rec(3, "Melanie painted a sunset over the lake with her kids.", &["D1:7"]);
        let written_over = MemoryRecord { id: unrelated.id, evidence: unrelated.evidence.clone(), ..oracle.clone() };
        let create = Ledger::of(1000, &[], &[&oracle]);
        let over = Ledger::of(1000, &[&unrelated], &[&written_over]);
        assert!(over.growth() + over.loss() > create.growth() + create.loss());
    }

    proptest! {
        #[test]
        fn a_round_trip_is_free_and_both_sides_are_bounded(a in "[a-z ]{0,60}", b in "[a-z ]{0,60}") {
            // Writing back what was removed, in its place, leaves nothing in the ledger.
            let (ra, rb) = (rec(1, &a, &["D1:1"]), rec(1, &b, &["D1:1"]));
            prop_assert_eq!(Ledger::of(10, &[&ra], &[&ra]), Ledger { base: 10, added: 0, removed: 0 });
            let l = Ledger::of(10, &[&ra], &[&rb]);
            prop_assert!(l.added <= words(&b) && l.removed <= words(&a));
            // What one side gains the other gives back: added − removed is the change in word count.
            prop_assert_eq!(l.added as i64 - l.removed as i64, words(&b) as i64 - words(&a) as i64);
        }

        /// Provenance is never taxed: the same texts written with the removed memories' evidence cost no more
        /// than written without it.
        #[test]
        fn keeping_evidence_never_costs_more(
            removed in proptest::collection::vec("[a-f ]{0,30}", 0..4),
            written in proptest::collection::vec(("[a-f ]{0,30}", proptest::option::of(0usize..4)), 0..4),
        ) {
            let removed: Vec<MemoryRecord> =
                removed.iter().enumerate().map(|(i, t)| rec(i as u32, t, &[format!("D1:{i}").as_str()])).collect();
            let with: Vec<MemoryRecord> = written
                .iter()
                .enumerate()
                .map(|(i, (t, of))| rec(100 + i as u32, t, &of.map(|k| format!("D1:{k}")).iter().map(String::as_str).collect::<Vec<_>>()))
                .collect();
            let without: Vec<MemoryRecord> = with.iter().map(|r| MemoryRecord { evidence: vec![], ..r.clone() }).collect();
            let cost = |w: &[MemoryRecord]| {
                let l = Ledger::of(100, &removed.iter().collect::<Vec<_>>(), &w.iter().collect::<Vec<_>>());
                l.added + l.removed
            };
            prop_assert!(cost(&with) <= cost(&without));
        }
    }
}
