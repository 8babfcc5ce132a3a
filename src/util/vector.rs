//! Vector arithmetic for the exact scan: dot products over contiguous `f32` rows and top-k selection.
//!
//! Vectors are unit length, so the dot product is the cosine similarity. Every path that scores a memory
//! (exact scan, HNSW re-scoring, the reward) goes through [`dot`] or [`dot_rows`], which do the same
//! operations in the same order: eight lanes per row, lane j accumulating `x[8c + j] · y[8c + j]` over
//! the chunks c in order (a multiply, then an add; Rust never fuses them), then the fixed reduction
//! `((l0 + l4) + (l1 + l5)) + ((l2 + l6) + (l3 + l7))`, then the tail of a length that is not a
//! multiple of eight, in order. Equal inputs give bit-equal scores on every path.
//!
//! Speed: a row's eight lanes are one chain of dependent adds (two 4-wide SSE2 vectors), so a lone
//! dot product waits on the add latency, not on memory. [`dot_rows`], the exact scan's kernel, scores
//! four rows at once against the same query: four independent chains, 2.6× faster on cache-resident
//! rows, and at 3k × 384 as fast as a plain read of the same bytes (`cargo bench --bench search --
//! bandwidth` prints the bound and the scan). A build for AVX (runtime dispatch) measured no faster
//! than this SSE2 baseline build, so there is none.

use std::cmp::Ordering;

/// Lanes per row: the kernel's accumulator width.
const LANES: usize = 8;

/// Rows [`dot_rows`] scores together.
const ROWS: usize = 4;

/// One step of a row's eight lanes: `acc[j] += x[j] · y[j]` (a multiply, then an add).
#[inline(always)]
fn mac(acc: &mut [f32; LANES], x: &[f32; LANES], y: &[f32; LANES]) {
    for j in 0..LANES {
        acc[j] += x[j] * y[j];
    }
}

/// The fixed reduction of a row's lanes.
#[inline(always)]
fn reduce(a: &[f32; LANES]) -> f32 {
    (a[0] + a[4]) + (a[1] + a[5]) + ((a[2] + a[6]) + (a[3] + a[7]))
}

/// [`reduce`], kept out of line for [`dot4`]: inlined, the four rows' reductions and the store of
/// their results invite the compiler to vectorise across rows (lane j of four rows in one register,
/// with shuffles on every load); out of line, it vectorises along the lanes as [`dot`] does.
#[inline(never)]
fn reduce_outlined(a: &[f32; LANES]) -> f32 {
    reduce(a)
}

/// Adds the tail `Σ x[i] · y[i]` (in order) to a reduced sum.
#[inline(always)]
fn tail(mut s: f32, x: &[f32], y: &[f32]) -> f32 {
    for (x, y) in x.iter().zip(y) {
        s += x * y;
    }
    s
}

/// Dot product of two slices over their common length.
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let ((ca, ta), (cb, tb)) = (a[..n].as_chunks::<LANES>(), b[..n].as_chunks::<LANES>());
    let mut acc = [0.0f32; LANES];
    for (x, y) in ca.iter().zip(cb) {
        mac(&mut acc, x, y);
    }
    tail(reduce(&acc), ta, tb)
}

/// [`dot`] of `q` with four rows at once (each at least `q.len()` long): four independent chains of
/// adds instead of one, the same operations per row, so each score is bit-equal to [`dot`]'s.
#[inline(always)]
pub fn dot4(q: &[f32], rows: [&[f32]; 4]) -> [f32; 4] {
    let n = q.len();
    let (qc, qt) = q.as_chunks::<LANES>();
    let [(c0, t0), (c1, t1), (c2, t2), (c3, t3)] = rows.map(|r| r[..n].as_chunks::<LANES>());
    let mut acc = [[0.0f32; LANES]; 4];
    for ((((x, y0), y1), y2), y3) in qc.iter().zip(c0).zip(c1).zip(c2).zip(c3) {
        mac(&mut acc[0], x, y0);
        mac(&mut acc[1], x, y1);
        mac(&mut acc[2], x, y2);
        mac(&mut acc[3], x, y3);
    }
    [
        tail(reduce_outlined(&acc[0]), qt, t0),
        tail(reduce_outlined(&acc[1]), qt, t1),
        tail(reduce_outlined(&acc[2]), qt, t2),
        tail(reduce_outlined(&acc[3]), qt, t3),
    ]
}

/// `out[i] = dot(query, row i)` for the `out.len()` rows of `rows` (row-major, `dim` values each),
/// bit-equal to calling [`dot`] on each row, computed four rows at a time.
pub fn dot_rows(query: &[f32], rows: &[f32], dim: usize, out: &mut [f32]) {
    assert_eq!(rows.len(), out.len() * dim, "dot_rows: rows must be out.len() rows of dim values");
    if dim == 0 {
        out.fill(0.0);
        return;
    }
    let q = &query[..query.len().min(dim)];
    let mut groups = rows.chunks_exact(ROWS * dim);
    let mut outs = out.chunks_exact_mut(ROWS);
    for (g, o) in (&mut groups).zip(&mut outs) {
        let (r0, g) = g.split_at(dim);
        let (r1, g) = g.split_at(dim);
        let (r2, r3) = g.split_at(dim);
        o.copy_from_slice(&dot4(q, [r0, r1, r2, r3]));
    }
    for (row, o) in groups.remainder().chunks_exact(dim).zip(outs.into_remainder()) {
        *o = dot(q, row);
    }
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
            // Most offers of a scan lose to the k-th best on score alone: one float compare.
            if h.score < worst.score || hit_order(&h, &worst) != Ordering::Less {
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

    /// The dot product as it was written before [`dot_rows`]: the scores every stored result and
    /// reward was computed with.
    fn dot_reference(a: &[f32], b: &[f32]) -> f32 {
        let n = a.len().min(b.len());
        let (a, b) = (&a[..n], &b[..n]);
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

    /// A query of `query_len` values (the same as `dim` or not: [`dot`] uses the common length) and
    /// whole rows of `dim` values, from a flat list of random values.
    fn split(values: &[f32], dim: usize, query_len: usize) -> (Vec<f32>, Vec<f32>) {
        let (q, rest) = values.split_at(query_len);
        let n_rows = rest.len() / dim;
        (q.to_vec(), rest[..n_rows * dim].to_vec())
    }

    proptest! {
        #[test]
        fn dot_matches_naive(v in prop::collection::vec((-1.0f32..1.0, -1.0f32..1.0), 0..70)) {
            let a: Vec<f32> = v.iter().map(|p| p.0).collect();
            let b: Vec<f32> = v.iter().map(|p| p.1).collect();
            let naive: f64 = a.iter().zip(&b).map(|(x, y)| (*x as f64) * (*y as f64)).sum();
            prop_assert!((dot(&a, &b) as f64 - naive).abs() < 1e-4);
        }

        #[test]
        fn dot_rows_and_dot_bit_equal_to_reference(
            dim in 1usize..80,
            query_len in 0usize..90,
            values in prop::collection::vec(-1.0f32..1.0, 90..1400),
        ) {
            let (q, rows) = split(&values, dim, query_len);
            let n = rows.len() / dim;
            let mut out = vec![0.0f32; n];
            dot_rows(&q, &rows, dim, &mut out);
            for (i, row) in rows.chunks_exact(dim).enumerate() {
                let want = dot_reference(&q, row).to_bits();
                prop_assert_eq!(out[i].to_bits(), want, "dot_rows, row {} of {}, dim {}", i, n, dim);
                prop_assert_eq!(dot(&q, row).to_bits(), want, "dot, row {} of {}, dim {}", i, n, dim);
            }
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
    fn dot_rows_bit_equal_at_384_with_extreme_magnitudes() {
        // Large and tiny magnitudes make any change of operation order (or a fused multiply-add) visible.
        let dim = 384;
        let gen = |i: usize| ((i * 2_654_435_761) % 1_000_003) as f32 / 1_000_003.0 - 0.5;
        let q: Vec<f32> = (0..dim).map(|i| gen(i) * if i % 7 == 0 { 1e6 } else { 1e-3 }).collect();
        let rows: Vec<f32> = (0..dim * 11).map(|i| gen(i + 977) * if i % 5 == 0 { 1e5 } else { 1.0 }).collect();
        let mut out = vec![0.0f32; 11];
        dot_rows(&q, &rows, dim, &mut out);
        for (i, row) in rows.chunks_exact(dim).enumerate() {
            assert_eq!(out[i].to_bits(), dot_reference(&q, row).to_bits(), "row {i}");
        }
    }

    #[test]
    fn dot_rows_handles_empty() {
        dot_rows(&[1.0; 4], &[], 4, &mut []);
        let mut out = [1.0f32; 3];
        dot_rows(&[1.0; 4], &[], 0, &mut out);
        assert_eq!(out, [0.0; 3]);
        dot_rows(&[], &[1.0; 8], 4, &mut out[..2]);
        assert_eq!(out[..2], [0.0; 2]);
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
