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

/// BM25 scores of `docs` for `query` (one score per doc, in order), with statistics over `docs` only.
pub fn bm25_scores(query: &str, docs: &[&Terms]) -> Vec<f64> {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;
    let mut q = stemmed_tokens(query);
    q.sort();
    q.dedup();
    let n = docs.len() as f64;
    let avg = docs.iter().map(|d| f64::from(d.len)).sum::<f64>() / n.max(1.0);
    let idf: Vec<(&str, f64)> = q
        .iter()
        .filter_map(|t| {
            let df = docs.iter().filter(|d| d.tf(t) > 0).count() as f64;
            (df > 0.0).then(|| (t.as_str(), ((n - df + 0.5) / (df + 0.5) + 1.0).ln()))
        })
        .collect();
    docs.iter()
        .map(|d| {
            idf.iter()
                .map(|(t, w)| {
                    let f = f64::from(d.tf(t));
                    if f == 0.0 {
                        0.0
                    } else {
                        w * f * (K1 + 1.0) / (f + K1 * (1.0 - B + B * f64::from(d.len) / avg.max(1e-9)))
                    }
                })
                .sum()
        })
        .collect()
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
}
