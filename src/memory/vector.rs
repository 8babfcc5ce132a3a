//! Vector arithmetic for the exact scan: dot products over contiguous `f32` rows and top-k selection.
//!
//! Vectors are unit length, so the dot product is the cosine similarity. The dot product is written as
//! eight independent accumulators over `chunks_exact` so the compiler vectorises it; every path that scores a memory (exact
//! scan, HNSW re-scoring, the reward) goes through [`dot`], so equal inputs give bit-equal scores.

use std::cmp::Ordering;

/// Dot product of two equal-length slices.
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    // Eight independent lanes over `chunks_exact` (which the compiler turns into packed SIMD; indexing
    // with offsets did not vectorise), then a fixed reduction order, so results are deterministic.
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for j in 0..8 {
            acc[j] += x[j] * y[j];
        }
    }
    let mut s = (acc[0] + acc[4]) + (acc[1] + acc[5]) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

/// Scales `v` to unit length in place. Returns false (and leaves zeros) for a zero or non-finite vector.
pub fn normalize(v: &mut [f32]) -> bool {
    let norm = dot(v, v).sqrt();
    if !norm.is_finite() || norm <= f32::MIN_POSITIVE {
        v.iter_mut().for_each(|x| *x = 0.0);
        return false;
    }
    v.iter_mut().for_each(|x| *x /= norm);
    true
}

/// A scored candidate: `key` orders ties (lower key first) so results are deterministic.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    /// Cosine similarity.
    pub score: f32,
    /// Tie-break key (the memory id number).
    pub key: u32,
}

/// Best-first order: higher score, then lower key.
pub fn hit_order(a: &Hit, b: &Hit) -> Ordering {
    b.score.partial_cmp(&a.score).unwrap_or(Ordering::Equal).then(a.key.cmp(&b.key))
}

/// Keeps the best `k` hits seen so far (a small sorted buffer: k is at most 50 here).
#[derive(Debug)]
pub struct TopK {
    k: usize,
    hits: Vec<Hit>,
}

impl TopK {
    /// An empty collector for `k` hits.
    pub fn new(k: usize) -> Self {
        TopK { k, hits: Vec::with_capacity(k + 1) }
    }

    /// Offers a hit.
    #[inline]
    pub fn push(&mut self, h: Hit) {
        if self.k == 0 {
            return;
        }
        if self.hits.len() == self.k {
            let worst = self.hits[self.k - 1];
            if hit_order(&h, &worst) != Ordering::Less {
                return;
            }
        }
        let pos = self.hits.partition_point(|x| hit_order(x, &h) == Ordering::Less);
        self.hits.insert(pos, h);
        self.hits.truncate(self.k);
    }

    /// The hits, best first.
    pub fn into_sorted(self) -> Vec<Hit> {
        self.hits
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn dot_matches_naive(v in prop::collection::vec((-1.0f32..1.0, -1.0f32..1.0), 0..70)) {
            let a: Vec<f32> = v.iter().map(|p| p.0).collect();
            let b: Vec<f32> = v.iter().map(|p| p.1).collect();
            let naive: f64 = a.iter().zip(&b).map(|(x, y)| (*x as f64) * (*y as f64)).sum();
            prop_assert!((dot(&a, &b) as f64 - naive).abs() < 1e-4);
        }

        #[test]
        fn topk_matches_full_sort(scores in prop::collection::vec(-1.0f32..1.0, 0..200), k in 1usize..20) {
            let mut t = TopK::new(k);
            let mut all: Vec<Hit> = scores.iter().enumerate().map(|(i, s)| Hit { score: *s, key: i as u32 }).collect();
            for h in &all { t.push(*h); }
            all.sort_by(hit_order);
            all.truncate(k);
            prop_assert_eq!(t.into_sorted(), all);
        }
    }

    #[test]
    fn normalize_handles_zero_and_nan() {
        let mut z = vec![0.0f32; 4];
        assert!(!normalize(&mut z));
        let mut n = vec![f32::NAN, 1.0];
        assert!(!normalize(&mut n));
        assert!(n.iter().all(|x| *x == 0.0));
        let mut v = vec![3.0, 4.0];
        assert!(normalize(&mut v));
        assert!((v[0] - 0.6).abs() < 1e-6);
    }
}
