//! The text ledger: the content words an episode's edits added to the memory, and the ones they took
//! away.
//!
//! The single-question reward charged growth in characters, net: `max(0, chars_new − chars_old)`. Net
//! growth let a removal pay for an addition, so writing a fact *over* an unrelated memory cost less than
//! creating it (the overwritten memory's characters paid for the new ones), and deleting or overwriting
//! memory that no question read cost nothing at all. The ledger keeps both sides apart, in the unit the
//! reading budget counts ([`crate::reward::reading::cost`]): content words, as a multiset over the whole
//! memory (M₀'s count of each word against the final memory's).
//!
//! - `added`: Σ over words of max(0, final count − M₀ count). A copy of a memory adds its words again; a
//!   merge that concatenates, or a split that only cuts, adds nothing; a rewrite adds the words it did not
//!   keep.
//! - `removed`: Σ over words of max(0, M₀ count − final count): what is no longer said anywhere as often as
//!   it was. A deletion removes its words; a rewrite removes the words it dropped.
//!
//! Both are divided by M₀'s content words. Overwriting memory *m* with text *o* instead of creating *o*
//! then saves the words *o* shares with *m* and loses the words of *m* that *o* does not repeat: it costs
//! no less than creating *o* unless *o* repeats more than half of *m* (a rewrite of *m*, not an
//! unrelated memory), and wrecking memory always costs, whether or not a question reads it.

use std::collections::HashMap;

use crate::text::content_word_tokens;

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
    /// The ledger of a memory that is M₀ less the `removed` texts (M₀ records deleted or rewritten) plus the
    /// `written` texts (the records the episode wrote), where M₀ holds `base` content words.
    pub fn of<'a>(base: usize, removed: impl IntoIterator<Item = &'a str>, written: impl IntoIterator<Item = &'a str>) -> Ledger {
        let mut net: HashMap<String, i64> = HashMap::new();
        for text in removed {
            for w in content_word_tokens(text) {
                *net.entry(w).or_default() -= 1;
            }
        }
        for text in written {
            for w in content_word_tokens(text) {
                *net.entry(w).or_default() += 1;
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
    use proptest::prelude::*;

    #[test]
    fn copies_add_rewrites_trade_and_cuts_cost_nothing() {
        let m = "Caroline went to the LGBTQ support group yesterday.";
        // A copy adds every content word again (caroline, went, lgbtq, support, group, yesterday).
        assert_eq!(words(m), 6);
        assert_eq!(Ledger::of(100, [], [m]), Ledger { base: 100, added: 6, removed: 0 });
        // Deleting it removes them.
        assert_eq!(Ledger::of(100, [m], []), Ledger { base: 100, added: 0, removed: 6 });
        // A split that only cuts, or a merge that concatenates, moves no word.
        let parts = ["Caroline went to the LGBTQ", "support group yesterday."];
        assert_eq!(Ledger::of(100, [m], parts), Ledger { base: 100, added: 0, removed: 0 });
        // Resolving a date trades one word for three.
        let resolved = "Caroline went to the LGBTQ support group on 7 May 2023.";
        assert_eq!(Ledger::of(100, [m], [resolved]), Ledger { base: 100, added: 3, removed: 1 });
        assert!((Ledger::of(100, [m], [resolved]).growth() - 0.03).abs() < 1e-12);
        assert_eq!(Ledger::default().loss(), 0.0);
    }

    #[test]
    fn overwriting_an_unrelated_memory_costs_more_than_creating_the_text() {
        let oracle = "When did Caroline go to the LGBTQ support group? 7 May 2023";
        let unrelated = "Melanie painted a sunset over the lake with her kids.";
        let create = Ledger::of(1000, [], [oracle]);
        let over = Ledger::of(1000, [unrelated], [oracle]);
        assert!(over.growth() + over.loss() > create.growth() + create.loss());
    }

    proptest! {
        #[test]
        fn a_round_trip_is_free_and_both_sides_are_bounded(a in "[a-z ]{0,60}", b in "[a-z ]{0,60}") {
            // Writing back what was removed leaves nothing in the ledger.
            prop_assert_eq!(Ledger::of(10, [a.as_str()], [a.as_str()]), Ledger { base: 10, added: 0, removed: 0 });
            let l = Ledger::of(10, [a.as_str()], [b.as_str()]);
            prop_assert!(l.added <= words(&b) && l.removed <= words(&a));
            // What one side gains the other gives back: added − removed is the change in word count.
            prop_assert_eq!(l.added as i64 - l.removed as i64, words(&b) as i64 - words(&a) as i64);
        }
    }
}
