//! BM25 over a fixed document set for the retrieval evaluation — the lexical baseline that dense
//! retrieval is measured against, and one half of the hybrid retriever. The scoring, ranking and fusion
//! are the memory layer's ([`crate::memory::lexical`]), so the evaluation measures exactly what
//! `--search hybrid` serves.

use crate::memory::lexical::{bm25_scores, Terms};
pub use crate::memory::lexical::{rank_by, rrf, RRF_K};

/// A BM25 index over a small document set.
#[derive(Debug, Clone)]
pub struct Bm25 {
    docs: Vec<Terms>,
}

impl Bm25 {
    /// Indexes the documents.
    pub fn new<'a>(docs: impl IntoIterator<Item = &'a str>) -> Self {
        Bm25 { docs: docs.into_iter().map(Terms::of).collect() }
    }

    /// Number of documents.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// The score of every document for the query, in document order.
    pub fn scores(&self, query: &str) -> Vec<f64> {
        let refs: Vec<&Terms> = self.docs.iter().collect();
        bm25_scores(query, &refs)
    }

    /// Document indices ranked best first (ties by index).
    pub fn rank(&self, query: &str) -> Vec<usize> {
        rank_by(&self.scores(query))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_by_term_rarity_and_frequency() {
        let docs = ["Caroline went to a support group", "Melanie paints sunsets", "Melanie paints and paints the lake", "the group met"];
        let idx = Bm25::new(docs);
        assert_eq!(idx.rank("painting")[..2], [2, 1], "two matches outrank one (stemmed: paints/painting)");
        assert_eq!(idx.rank("support group")[0], 0);
        assert!(idx.scores("zebra").iter().all(|s| *s == 0.0));
    }

    #[test]
    fn rrf_rewards_agreement() {
        let a = [0, 1, 2, 3];
        let b = [2, 0, 3, 1];
        assert_eq!(rrf(&[&a, &b], 4, 60.0)[..2], [0, 2]);
        assert_eq!(rrf(&[&a], 4, 60.0), vec![0, 1, 2, 3]);
    }
}
