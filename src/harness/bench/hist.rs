//! A fixed-size latency histogram for `memgym bench`.
//!
//! A `--duration` run records millions of latencies; keeping them all would grow the bench's own RSS
//! (which the in-process mode reports) and cost a sort per percentile. Log-linear buckets (64 per
//! power of two, as HdrHistogram does with two significant digits) keep every percentile within 1/64
//! (1.6%) of the exact value in ~30 KiB, however long the run. The maximum is kept exactly.

use std::time::Duration;

/// Sub-buckets per power of two, as a bit count.
const SUB_BITS: u32 = 6;
const SUB: u64 = 1 << SUB_BITS;
/// Enough buckets for any `u64` nanosecond count.
const BUCKETS: usize = ((64 - SUB_BITS + 1) as usize) * SUB as usize;

/// Latency histogram (nanosecond resolution, ≤ 1.6% relative error on percentiles).
#[derive(Debug, Clone)]
pub struct Hist {
    counts: Vec<u64>,
    n: u64,
    max_ns: u64,
}

impl Default for Hist {
    fn default() -> Self {
        Hist { counts: vec![0; BUCKETS], n: 0, max_ns: 0 }
    }
}

fn index(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let e = 63 - v.leading_zeros(); // floor(log2 v) ≥ SUB_BITS
    let top = v >> (e - SUB_BITS); // in [SUB, 2·SUB)
    ((e - SUB_BITS + 1) as usize) * SUB as usize + (top - SUB) as usize
}

/// The smallest value and the width of bucket `i`.
fn bounds(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < SUB {
        return (i, 1);
    }
    let k = i / SUB; // ≥ 1
    let top = i % SUB + SUB;
    let shift = (k - 1) as u32;
    (top << shift, 1 << shift)
}

impl Hist {
    /// Records one latency.
    pub fn record(&mut self, d: Duration) {
        let v = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.counts[index(v)] += 1;
        self.n += 1;
        self.max_ns = self.max_ns.max(v);
    }

    /// Adds every latency of `other`.
    pub fn merge(&mut self, other: &Hist) {
        for (c, o) in self.counts.iter_mut().zip(&other.counts) {
            *c += o;
        }
        self.n += other.n;
        self.max_ns = self.max_ns.max(other.max_ns);
    }

    /// Number of recorded latencies.
    pub fn len(&self) -> u64 {
        self.n
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The `p`-th percentile (0 < p ≤ 100) in milliseconds; p = 100 is the exact maximum; 0 when empty.
    pub fn pct_ms(&self, p: f64) -> f64 {
        if self.n == 0 {
            return 0.0;
        }
        if p >= 100.0 {
            return self.max_ns as f64 / 1e6;
        }
        // Nearest rank: the smallest value with at least ⌈p·n⌉ values at or below it.
        let rank = ((p / 100.0) * self.n as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, width) = bounds(i);
                let mid = lo + width / 2;
                return mid.min(self.max_ns) as f64 / 1e6;
            }
        }
        self.max_ns as f64 / 1e6
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn buckets_tile_the_range_without_gaps() {
        let mut next = 0u64;
        for i in 0..BUCKETS {
            let (lo, width) = bounds(i);
            assert_eq!(lo, next, "bucket {i}");
            assert_eq!(index(lo), i);
            assert_eq!(index(lo + (width - 1)), i);
            next = lo.saturating_add(width);
            if next == u64::MAX || lo.checked_add(width).is_none() {
                break;
            }
        }
        assert_eq!(index(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn empty_and_single() {
        let mut h = Hist::default();
        assert_eq!((h.len(), h.pct_ms(50.0), h.pct_ms(100.0)), (0, 0.0, 0.0));
        h.record(Duration::from_micros(1500));
        assert_eq!(h.pct_ms(100.0), 1.5);
        assert!((h.pct_ms(50.0) - 1.5).abs() <= 1.5 / 64.0);
    }

    proptest! {
        /// Every percentile is within 1/64 of the exact nearest-rank percentile.
        #[test]
        fn percentiles_match_the_sorted_samples(mut xs in prop::collection::vec(1u64..5_000_000_000, 1..400), p in 1.0f64..100.0) {
            let mut all = Hist::default();
            for &x in &xs {
                all.record(Duration::from_nanos(x));
            }
            xs.sort_unstable();
            let rank = ((p / 100.0) * xs.len() as f64).ceil().max(1.0) as usize;
            let exact = xs[rank - 1] as f64 / 1e6;
            let got = all.pct_ms(p);
            prop_assert!((got - exact).abs() <= exact / 64.0 + 1e-6, "p{} exact {} got {}", p, exact, got);
            prop_assert_eq!(all.pct_ms(100.0), *xs.last().unwrap() as f64 / 1e6);
        }
    }
}
