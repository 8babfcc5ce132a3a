//! BM25 (Okapi, k1 = 1.2, b = 0.75) over LoCoMo-normalised, Porter-stemmed tokens: the lexical baseline
//! that dense retrieval is measured against, and one half of the hybrid retriever.

use std::collections::HashMap;

use crate::reward::normalize::stemmed_tokens;

const K1: f64 = 1.2;
const B: f64 = 0.75;

/// A BM25 index over a small document set.
#[derive(Debug, Clone)]
pub struct Bm25 {
    docs: Vec<HashMap<String, u32>>,
    lengths: Vec<f64>,
    avg_len: f64,
    df: HashMap<String, u32>,
}

impl Bm25 {
    /// Indexes the documents.
    pub fn new<'a>(docs: impl IntoIterator<Item = &'a str>) -> Self {
        let mut df: HashMap<String, u32> = HashMap::new();
        let mut tfs = Vec::new();
        let mut lengths = Vec::new();
        for d in docs {
            let toks = stemmed_tokens(d);
            lengths.push(toks.len() as f64);
            let mut tf: HashMap<String, u32> = HashMap::new();
            for t in toks {
                *tf.entry(t).or_default() += 1;
            }
            for t in tf.keys() {
                *df.entry(t.clone()).or_default() += 1;
            }
            tfs.push(tf);
        }
        let avg_len = if lengths.is_empty() { 0.0 } else { lengths.iter().sum::<f64>() / lengths.len() as f64 };
        Bm25 { docs: tfs, lengths, avg_len, df }
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
        let n = self.docs.len() as f64;
        let mut q = stemmed_tokens(query);
        q.sort();
        q.dedup();
        let idf: Vec<(String, f64)> = q
            .into_iter()
            .filter_map(|t| {
                let df = f64::from(*self.df.get(&t)?);
                Some((t, ((n - df + 0.5) / (df + 0.5) + 1.0).ln()))
            })
            .collect();
        self.docs
            .iter()
            .zip(&self.lengths)
            .map(|(tf, len)| {
                idf.iter()
                    .map(|(t, w)| {
                        let f = f64::from(tf.get(t).copied().unwrap_or(0));
                        if f == 0.0 {
                            0.0
                        } else {
                            w * f * (K1 + 1.0) / (f + K1 * (1.0 - B + B * len / self.avg_len.max(1e-9)))
                        }
                    })
                    .sum()
            })
            .collect()
    }

    /// Document indices ranked best first (ties by index).
    pub fn rank(&self, query: &str) -> Vec<usize> {
        rank_by(&self.scores(query))
    }
}

/// Indices sorted by score, best first, ties by index.
pub fn rank_by(scores: &[f64]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..scores.len()).collect();
    idx.sort_by(|a, b| scores[*b].total_cmp(&scores[*a]).then(a.cmp(b)));
    idx
}

/// Reciprocal-rank fusion of rankings (Cormack et al. 2009): score(d) = Σ 1 / (k + rank(d)), rank from 1.
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
