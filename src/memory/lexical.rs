//! The lexical half of hybrid search: per-record stemmed tokens and BM25 (k1 = 1.2, b = 0.75) computed at
//! query time over an episode's *live* memories, so edits never leave a stale index behind.
//!
//! Only the query's terms matter, so document frequencies are counted for those terms alone, in one pass
//! over the live records (a few hundred here). Tokens are the reward's (LoCoMo normalisation + NLTK Porter
//! stemming), so the lexical signal agrees with what the reward counts.

use crate::text::stemmed_tokens;

/// A record's tokens: sorted distinct terms with their counts, and the total length.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Terms {
    terms: Vec<(String, u32)>,
    len: u32,
}

impl Terms {
    /// Heap bytes held (the term strings and the list), for ForkEpisode's cost.
    pub fn heap_bytes(&self) -> usize {
        self.terms.capacity() * std::mem::size_of::<(String, u32)>() + self.terms.iter().map(|(t, _)| t.capacity()).sum::<usize>()
    }

    /// Tokenises a text.
    pub fn of(text: &str) -> Self {
        let mut toks = stemmed_tokens(text);
        let len = toks.len() as u32;
        toks.sort();
        let mut terms: Vec<(String, u32)> = Vec::new();
        for t in toks {
            match terms.last_mut() {
                Some((last, n)) if *last == t => *n += 1,
                _ => terms.push((t, 1)),
            }
        }
        Terms { terms, len }
    }

    fn tf(&self, term: &str) -> u32 {
        self.terms.binary_search_by(|(t, _)| t.as_str().cmp(term)).map_or(0, |i| self.terms[i].1)
    }
}

/// BM25 for one query with the statistics of one set of documents (k1 = 1.2, b = 0.75): the idf of each
/// query term there and their mean length. A document outside the set is scored with the set's statistics.
#[derive(Debug, Clone, PartialEq)]
pub struct Bm25 {
    idf: Vec<(String, f64)>,
    avg: f64,
}

impl Bm25 {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;

    /// `query`'s BM25 with the statistics of `docs`.
    pub fn over(query: &str, docs: &[&Terms]) -> Bm25 {
        let mut q = stemmed_tokens(query);
        q.sort();
        q.dedup();
        let n = docs.len() as f64;
        let avg = docs.iter().map(|d| f64::from(d.len)).sum::<f64>() / n.max(1.0);
        let idf = q
            .into_iter()
            .filter_map(|t| {
                let df = docs.iter().filter(|d| d.tf(&t) > 0).count() as f64;
                (df > 0.0).then(|| {
                    let w = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                    (t, w)
                })
            })
            .collect();
        Bm25 { idf, avg }
    }

    /// The score of `doc`.
    pub fn score(&self, doc: &Terms) -> f64 {
        self.idf
            .iter()
            .map(|(t, w)| {
                let f = f64::from(doc.tf(t));
                if f == 0.0 {
                    0.0
                } else {
                    w * f * (Self::K1 + 1.0) / (f + Self::K1 * (1.0 - Self::B + Self::B * f64::from(doc.len) / self.avg.max(1e-9)))
                }
            })
            .sum()
    }
}

/// BM25 scores of `docs` for `query` (one score per doc, in order), with statistics over `docs` only.
pub fn bm25_scores(query: &str, docs: &[&Terms]) -> Vec<f64> {
    let bm25 = Bm25::over(query, docs);
    docs.iter().map(|d| bm25.score(d)).collect()
}

/// Reciprocal-rank-fusion constant (the usual 60).
pub const RRF_K: f64 = 60.0;

/// Indices sorted by score, best first, ties by index.
pub fn rank_by(scores: &[f64]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..scores.len()).collect();
    idx.sort_by(|a, b| scores[*b].total_cmp(&scores[*a]).then(a.cmp(b)));
    idx
}

/// Reciprocal-rank fusion of rankings (Cormack et al. 2009): score(d) = Σ 1 / (k + rank(d)), rank from 1;
/// the fused order, ties by index.
pub fn rrf(rankings: &[&[usize]], n: usize, k: f64) -> Vec<usize> {
    let mut score = vec![0.0f64; n];
    for r in rankings {
        for (pos, d) in r.iter().enumerate() {
            if *d < n {
                score[*d] += 1.0 / (k + pos as f64 + 1.0);
            }
        }
    }
    rank_by(&score)
}

/// One query's hybrid ranking of a fixed set of documents (M₀), kept so that other documents can be placed
/// in it without moving it: each document's fused score, and what a new document would fuse to with its
/// dense score and text, ranked against the set's own dense and BM25 scores (the set's statistics).
///
/// Reciprocal-rank fusion ranks by positions, so adding, removing or rewriting one document shifts the
/// fused score of every document below it in either ranking, and readings far from the edit reorder. The
/// whole-memory reward scores the questions an edit did not aim at against this frozen ranking, so that
/// only what the edit wrote or removed moves what they read.
#[derive(Debug, Clone, PartialEq)]
pub struct FrozenFusion {
    /// The set's dense scores, best first.
    dense: Vec<f64>,
    /// The set's BM25 scores, best first.
    lexical: Vec<f64>,
    bm25: Bm25,
    /// Each document's fused score, in set order.
    fused: Vec<f64>,
}

impl FrozenFusion {
    /// The fusion of `dense` (one score per document) and BM25 of `query` over `docs`.
    pub fn new(query: &str, dense: Vec<f64>, docs: &[&Terms]) -> FrozenFusion {
        let bm25 = Bm25::over(query, docs);
        let lexical: Vec<f64> = docs.iter().map(|d| bm25.score(d)).collect();
        let mut fused = vec![0.0f64; dense.len()];
        for scores in [&dense, &lexical] {
            for (pos, d) in rank_by(scores).into_iter().enumerate() {
                fused[d] += 1.0 / (RRF_K + pos as f64 + 1.0);
            }
        }
        let sorted = |mut v: Vec<f64>| {
            v.sort_by(|a, b| b.total_cmp(a));
            v
        };
        FrozenFusion { dense: sorted(dense), lexical: sorted(lexical), bm25, fused }
    }

    /// The fused score of the set's document `i`.
    pub fn fused(&self, i: usize) -> f64 {
        self.fused[i]
    }

    /// The fused score a document outside the set, with dense score `dense` and terms `doc`, takes among the
    /// set's documents (after those it ties, as a later id ranks).
    pub fn place(&self, dense: f64, doc: &Terms) -> f64 {
        let rank = |sorted: &[f64], s: f64| sorted.partition_point(|x| *x >= s) as f64 + 1.0;
        1.0 / (RRF_K + rank(&self.dense, dense)) + 1.0 / (RRF_K + rank(&self.lexical, self.bm25.score(doc)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Expected values from an independent Python BM25 (same formula, NLTK Porter stemming, LoCoMo
    /// normalisation) over the same documents.
    #[test]
    fn matches_a_reference_bm25() {
        let docs = ["Caroline went to a support group", "Melanie paints sunsets", "Melanie paints and paints the lake", "the group met"];
        let terms: Vec<Terms> = docs.iter().map(|d| Terms::of(d)).collect();
        let refs: Vec<&Terms> = terms.iter().collect();
        let cases: [(&str, [f64; 4]); 4] = [
            ("painting the lake", [0.0, 0.7361701090084937, 2.053759004124773, 0.0]),
            ("support group", [1.6141241860355016, 0.0, 0.0, 0.8405091795766266]),
            ("Melanie", [0.0, 0.7361701090084937, 0.6548752503449791, 0.0]),
            ("zebra", [0.0; 4]),
        ];
        for (q, want) in cases {
            let got = bm25_scores(q, &refs);
            for (x, y) in got.iter().zip(&want) {
                assert!((x - y).abs() < 1e-12, "{q}: {got:?} vs {want:?}");
            }
        }
    }

    #[test]
    fn a_frozen_fusion_is_the_fusion_and_places_a_new_document_without_moving_the_rest() {
        let docs = ["Caroline went to a support group", "Melanie paints sunsets", "Melanie paints and paints the lake", "the group met"];
        let terms: Vec<Terms> = docs.iter().map(|d| Terms::of(d)).collect();
        let refs: Vec<&Terms> = terms.iter().collect();
        let dense = vec![0.1, 0.9, 0.5, 0.3];
        let q = "support group";
        let frozen = FrozenFusion::new(q, dense.clone(), &refs);
        // The same order as the fusion of the two rankings.
        let fused_order = rrf(&[&rank_by(&dense), &rank_by(&bm25_scores(q, &refs))], 4, RRF_K);
        let frozen_order = rank_by(&(0..4).map(|i| frozen.fused(i)).collect::<Vec<_>>());
        assert_eq!(fused_order, frozen_order);
        // A copy of a document, placed, ranks below it (ties go to the earlier document) …
        let copy = frozen.place(dense[0], &terms[0]);
        assert!(copy < frozen.fused(0), "{copy} {:?}", frozen.fused);
        // … at the fused score of the rank after the original's in each ranking.
        assert!((copy - (1.0 / (RRF_K + 5.0) + 1.0 / (RRF_K + 2.0))).abs() < 1e-15);
        // Worst in both: below every document.
        let worst = frozen.place(-1.0, &Terms::of("zebra"));
        assert!((0..4).all(|i| worst < frozen.fused(i)));
        // Best in both rankings: above every document.
        let best = frozen.place(1.0, &Terms::of("support group support group"));
        assert!((0..4).all(|i| best > frozen.fused(i)));
    }
}
