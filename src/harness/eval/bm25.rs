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
    use crate::memory::tests::locomo_base;
    use crate::memory::{EpisodeMemory, Filter};

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

    // The memory layer's hybrid search, served by `--search hybrid`, ranks exactly as this evaluation's BM25
    // and reciprocal-rank fusion over the same dense scores.
    #[test]
    fn the_served_hybrid_search_is_exactly_the_evaluated_fusion() {
        let (base, questions, embed) = locomo_base("conv-30", true);
        let mem = EpisodeMemory::new(base.clone());
        let texts: Vec<&str> = base.records().iter().map(|r| r.text.as_str()).collect();
        let bm25 = Bm25::new(texts.iter().copied());
        for q in questions.iter().take(40) {
            let qv = embed.embed_blocking(&[q.question.as_str()]).unwrap().remove(0);
            let dense: Vec<f64> = (0..base.len()).map(|i| f64::from(base.dot(&qv, i))).collect();
            let want: Vec<u32> =
                rrf(&[&rank_by(&dense), &bm25.rank(&q.question)], base.len(), 60.0).into_iter().take(10).map(|i| i as u32).collect();
            let (got, _) = mem.search_text(&qv, &q.question, 10, &Filter::default(), None);
            let got: Vec<u32> = got.iter().map(|s| s.record.id.0).collect();
            assert_eq!(got, want, "{}", q.id);
        }
        // Dense mode ignores the text.
        let (dense_base, _, _) = locomo_base("conv-30", false);
        let plain = EpisodeMemory::new(dense_base);
        let qv = embed.embed_blocking(&["Jon's dance studio"]).unwrap().remove(0);
        assert_eq!(
            plain.search_text(&qv, "anything", 5, &Filter::default(), None).0.iter().map(|s| s.record.id).collect::<Vec<_>>(),
            plain.search(&qv, 5, &Filter::default(), None).0.iter().map(|s| s.record.id).collect::<Vec<_>>()
        );
    }
}
