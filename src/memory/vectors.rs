//! M₀'s vectors in one row-major buffer, kept as `f32` or as `f16`.
//!
//! Every vector memory holds is at half precision ([`super::half`]), so keeping them as `f16` loses
//! nothing: a row widened to `f32` holds exactly the values an `f32` buffer would, and is scored with the
//! same [`dot`], so a score is bit-equal whichever way its row is kept. Episodes' M₀s stay `f32`: they are
//! small and scanned on every search call, where widening would cost the tool-call path. Banks keep `f16`:
//! a million 384-dimension vectors in 768 MB instead of 1.5 GB, and half the bytes a graph search pulls
//! from memory per node it scores.

use std::borrow::Cow;
use std::cell::RefCell;

use half::f16;
use half::slice::HalfFloatSliceExt;

use crate::util::vector::{dot, dot4, dot_rows};

/// The owned buffer.
#[derive(Debug, Clone, PartialEq)]
pub enum Vectors {
    /// `f32` values.
    Full(Vec<f32>),
    /// `f16` values, widened to `f32` as they are scored.
    Half(Vec<f16>),
}

/// A borrowed view of a buffer (what a graph search scores against).
#[derive(Debug, Clone, Copy)]
pub enum VectorRows<'a> {
    /// `f32` values.
    Full(&'a [f32]),
    /// `f16` values.
    Half(&'a [f16]),
}

/// Rows at most this wide are widened on the stack; wider ones in a per-thread buffer.
const STACK: usize = 512;

thread_local! {
    static WIDE: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` on `row` widened to `f32` (exactly: every `f16` is an `f32`). `f` must not widen again.
#[inline]
fn widened<T>(row: &[f16], f: impl FnOnce(&[f32]) -> T) -> T {
    if row.len() <= STACK {
        let mut buf = [0.0f32; STACK];
        let b = &mut buf[..row.len()];
        row.convert_to_f32_slice(b);
        f(b)
    } else {
        WIDE.with(|w| {
            let mut w = w.borrow_mut();
            w.resize(row.len(), 0.0);
            row.convert_to_f32_slice(&mut w[..]);
            f(&w[..])
        })
    }
}

impl Vectors {
    /// Asks for huge pages under the buffer ([`crate::util::huge`]); left alone under its threshold.
    pub fn back_with_huge_pages(&self) -> crate::util::huge::Backing {
        match self {
            Vectors::Full(v) => crate::util::huge::back_with_huge_pages(v),
            Vectors::Half(v) => crate::util::huge::back_with_huge_pages(v),
        }
    }

    /// The borrowed view.
    pub fn view(&self) -> VectorRows<'_> {
        match self {
            Vectors::Full(v) => VectorRows::Full(v),
            Vectors::Half(v) => VectorRows::Half(v),
        }
    }
}

impl<'a> VectorRows<'a> {
    /// Number of values (rows × dim).
    pub fn len(self) -> usize {
        match self {
            VectorRows::Full(v) => v.len(),
            VectorRows::Half(v) => v.len(),
        }
    }

    /// True when there are no values.
    pub fn is_empty(self) -> bool {
        self.len() == 0
    }

    /// Row `i` as `f32` (borrowed from an `f32` buffer, widened from an `f16` one).
    pub fn row(self, i: usize, dim: usize) -> Cow<'a, [f32]> {
        match self {
            VectorRows::Full(v) => Cow::Borrowed(&v[i * dim..][..dim]),
            VectorRows::Half(v) => Cow::Owned(v[i * dim..][..dim].to_f32_vec()),
        }
    }

    /// Writes row `i` into `out` (`dim` values) as `f32`: the values [`VectorRows::row`] gives, without
    /// an allocation.
    pub fn copy_row(self, i: usize, dim: usize, out: &mut [f32]) {
        match self {
            VectorRows::Full(v) => out.copy_from_slice(&v[i * dim..][..dim]),
            VectorRows::Half(v) => v[i * dim..][..dim].convert_to_f32_slice(out),
        }
    }

    /// [`dot`] of `query` with row `i`: bit-equal for an `f32` and an `f16` buffer holding the same rows.
    #[inline]
    pub fn dot(self, query: &[f32], i: usize, dim: usize) -> f32 {
        match self {
            VectorRows::Full(v) => dot(query, &v[i * dim..][..dim]),
            VectorRows::Half(v) => widened(&v[i * dim..][..dim], |r| dot(query, r)),
        }
    }

    /// `out[j] = dot(query, row ids[j])` (bit-equal to [`VectorRows::dot`]), scored four rows at a time:
    /// a graph search's fresh neighbours, whose scattered rows would otherwise each wait on one chain of
    /// adds. `out` must be as long as `ids`.
    pub fn dot_each(self, query: &[f32], ids: &[u32], dim: usize, out: &mut [f32]) {
        assert_eq!(ids.len(), out.len(), "dot_each: one score per id");
        if matches!(self, VectorRows::Half(_)) && dim > STACK {
            // Rows too wide to widen four at a time on the stack: one at a time.
            for (id, o) in ids.iter().zip(out) {
                *o = self.dot(query, *id as usize, dim);
            }
            return;
        }
        let q = &query[..query.len().min(dim)];
        let mut groups = ids.chunks_exact(4);
        let mut outs = out.chunks_exact_mut(4);
        match self {
            VectorRows::Full(v) => {
                for (g, o) in (&mut groups).zip(&mut outs) {
                    let row = |j: usize| &v[g[j] as usize * dim..][..dim];
                    o.copy_from_slice(&dot4(q, [row(0), row(1), row(2), row(3)]));
                }
            }
            VectorRows::Half(v) => {
                let mut buf = [0.0f32; 4 * STACK];
                for (g, o) in (&mut groups).zip(&mut outs) {
                    for (j, &id) in g.iter().enumerate() {
                        v[id as usize * dim..][..dim].convert_to_f32_slice(&mut buf[j * dim..][..dim]);
                    }
                    let (r0, rest) = buf.split_at(dim);
                    let (r1, rest) = rest.split_at(dim);
                    let (r2, rest) = rest.split_at(dim);
                    o.copy_from_slice(&dot4(q, [r0, r1, r2, &rest[..dim]]));
                }
            }
        }
        // The last ids, fewer than four.
        let done = ids.len() - groups.remainder().len();
        for (id, o) in ids[done..].iter().zip(&mut out[done..]) {
            *o = self.dot(query, *id as usize, dim);
        }
    }

    /// Offers `f(i, dot(query, row i))` for every row, in order, several rows at a time ([`dot_rows`],
    /// bit-equal to [`dot`]); an `f16` buffer is widened a block of rows at a time.
    pub fn for_each_score(self, query: &[f32], dim: usize, mut f: impl FnMut(usize, f32)) {
        if dim == 0 {
            return;
        }
        /// Rows per block: the scores stay in a small stack buffer.
        const BLOCK: usize = 256;
        /// Rows per widened block of an `f16` buffer.
        const HALF_BLOCK: usize = 32;
        let mut scores = [0.0f32; BLOCK];
        match self {
            VectorRows::Full(v) => {
                for (b, rows) in v.chunks(BLOCK * dim).enumerate() {
                    let scores = &mut scores[..rows.len() / dim];
                    dot_rows(query, rows, dim, scores);
                    for (j, s) in scores.iter().enumerate() {
                        f(b * BLOCK + j, *s);
                    }
                }
            }
            VectorRows::Half(v) => {
                let mut wide = vec![0.0f32; HALF_BLOCK * dim];
                for (b, rows) in v.chunks(HALF_BLOCK * dim).enumerate() {
                    let wide = &mut wide[..rows.len()];
                    rows.convert_to_f32_slice(wide);
                    let scores = &mut scores[..rows.len() / dim];
                    dot_rows(query, wide, dim, scores);
                    for (j, s) in scores.iter().enumerate() {
                        f(b * HALF_BLOCK + j, *s);
                    }
                }
            }
        }
    }

    /// Reads one value from every cache line of the `rows`, before they are scored: their misses then
    /// overlap (the loads are independent) instead of each row's waiting for the previous row's dot
    /// product. A software prefetch without `unsafe`.
    #[inline]
    pub fn touch(self, rows: &[u32], dim: usize) {
        let mut sink = 0u32;
        match self {
            VectorRows::Full(v) => {
                for &r in rows {
                    for x in v[r as usize * dim..][..dim].iter().step_by(16) {
                        sink ^= x.to_bits();
                    }
                }
            }
            VectorRows::Half(v) => {
                for &r in rows {
                    for x in v[r as usize * dim..][..dim].iter().step_by(32) {
                        sink ^= u32::from(x.to_bits());
                    }
                }
            }
        }
        std::hint::black_box(sink);
    }
}

/// Appends `v` to the row-major `f16` buffer `out` (exactly, when `v` is at half precision, as every vector
/// memory holds is), or `dim` zeros when `v` is not `dim` long (a row without a vector).
pub fn push_narrowed(out: &mut Vec<f16>, v: &[f32], dim: usize) {
    let start = out.len();
    out.resize(start + dim, f16::ZERO);
    if v.len() == dim {
        out[start..].convert_from_f32_slice(v);
    }
}

/// `v` as `f16`s (exactly, when `v` is at half precision).
pub fn narrowed(v: &[f32]) -> Vec<f16> {
    let mut out = Vec::with_capacity(v.len());
    push_narrowed(&mut out, v, v.len());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The same rows kept as `f32` and as `f16` give bit-equal scores, one row at a time and in blocks,
        /// and the same widened rows, at dimensions on both sides of the stack buffer's width.
        #[test]
        fn half_rows_score_bit_equal_to_full_rows(
            n in 0usize..80, dim in prop_oneof![1usize..40, 500usize..530], seed in any::<u64>(),
        ) {
            use rand::{Rng, SeedableRng};
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let mut full: Vec<f32> = (0..n * dim).map(|_| rng.random_range(-1.0f32..1.0)).collect();
            crate::memory::half::round(&mut full);
            let query: Vec<f32> = (0..dim).map(|_| rng.random_range(-1.0f32..1.0)).collect();
            let (f, h) = (Vectors::Full(full.clone()), Vectors::Half(narrowed(&full)));
            prop_assert_eq!(h.view().len(), f.view().len());
            let (mut a, mut b) = (Vec::new(), Vec::new());
            f.view().for_each_score(&query, dim, |i, s| a.push((i, s.to_bits())));
            h.view().for_each_score(&query, dim, |i, s| b.push((i, s.to_bits())));
            prop_assert_eq!(a.len(), n);
            prop_assert_eq!(&a, &b);
            for &(i, bits) in &a {
                prop_assert_eq!(f.view().dot(&query, i, dim).to_bits(), bits);
                prop_assert_eq!(h.view().dot(&query, i, dim).to_bits(), bits);
                prop_assert_eq!(h.view().row(i, dim), f.view().row(i, dim));
                let mut copied = vec![f32::NAN; dim];
                h.view().copy_row(i, dim, &mut copied);
                prop_assert_eq!(&copied[..], &f.view().row(i, dim)[..]);
            }
            // Scored four scattered rows at a time: the same bits.
            let reversed: Vec<u32> = (0..n as u32).rev().collect();
            for view in [f.view(), h.view()] {
                let mut each = vec![f32::NAN; n];
                view.dot_each(&query, &reversed, dim, &mut each);
                for (&i, s) in reversed.iter().zip(&each) {
                    prop_assert_eq!(s.to_bits(), a[i as usize].1);
                }
            }
            let all: Vec<u32> = (0..n as u32).collect();
            h.view().touch(&all, dim);
            f.view().touch(&all, dim);
        }
    }
}
