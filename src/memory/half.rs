//! Half-precision vectors: how memory keeps what an episode (or a bank's overlay) writes in half the room.
//!
//! An episode's own records are most of what it holds: a 384-dimension vector in `f32` is 1,536 bytes, its
//! text a few dozen. So the overlay keeps each written vector as IEEE half floats (`f16`, 768 bytes), and
//! every vector memory holds is *rounded to half precision*, M₀'s included ([`round`] runs when a
//! [`super::BaseMemory`] is assembled). One rule for every vector means a record's score never depends on
//! where it lives: a memory rewritten with its own text gets back exactly the vector it had, and a bank's
//! experience scores the same in the overlay as after compaction moves it into the base. An episode's
//! M₀ stays in `f32` (holding the rounded values) so its exact scan runs at full speed; a bank's M₀ keeps
//! the `f16`s themselves ([`super::vectors`]).
//!
//! What rounding costs: a unit vector's components are far from `f16`'s limits (below 6·10⁻⁵ it keeps
//! fewer bits, and such a component moves a cosine by less than that), and each keeps 11 significant bits,
//! so a cosine moves by about 10⁻⁵. Tools show scores to two decimals.

use half::f16;
use half::slice::HalfFloatSliceExt;

/// Components converted per step (a stack buffer; the conversion uses F16C where the CPU has it).
const CHUNK: usize = 512;

/// Rounds every component to the nearest half-precision value, in place. Idempotent.
pub fn round(v: &mut [f32]) {
    let mut buf = [f16::ZERO; CHUNK];
    for part in v.chunks_mut(CHUNK) {
        let b = &mut buf[..part.len()];
        b.convert_from_f32_slice(part);
        b.convert_to_f32_slice(part);
    }
}

/// Rounds a large buffer on up to `threads` threads (a 1,000,000-row bank's vectors are 1.5 GB).
pub fn round_parallel(v: &mut [f32], threads: usize) {
    const PER_THREAD_MIN: usize = 1 << 20;
    let threads = threads.clamp(1, v.len().div_ceil(PER_THREAD_MIN).max(1));
    if threads == 1 {
        return round(v);
    }
    let per = v.len().div_ceil(threads);
    std::thread::scope(|s| {
        for part in v.chunks_mut(per) {
            s.spawn(move || round(part));
        }
    });
}

/// One vector in half precision, sized exactly (no spare capacity).
#[derive(Debug, Clone, PartialEq)]
pub struct HalfVec(Box<[f16]>);

impl HalfVec {
    /// Rounds `v` to half precision.
    pub fn from_f32(v: &[f32]) -> Self {
        let mut out = vec![f16::ZERO; v.len()].into_boxed_slice();
        out.convert_from_f32_slice(v);
        HalfVec(out)
    }

    /// The components as little-endian `f16` bytes, appended to `out` (how a bank's store keeps them).
    pub fn extend_le_bytes(&self, out: &mut Vec<u8>) {
        for h in self.0.iter() {
            out.extend_from_slice(&h.to_le_bytes());
        }
    }

    /// The vector whose components `bytes` holds as little-endian `f16`s (an even number of bytes; a trailing
    /// odd byte is ignored).
    pub fn from_le_bytes(bytes: &[u8]) -> Self {
        HalfVec(bytes.chunks_exact(2).map(|b| f16::from_le_bytes([b[0], b[1]])).collect())
    }

    /// Writes the components as `f32` into `out` (which must have as many components): exactly the
    /// values [`round`] gives the vector this was made from.
    pub fn decode_into(&self, out: &mut [f32]) {
        self.0.convert_to_f32_slice(out);
    }

    /// The components as `f32`.
    pub fn to_f32(&self) -> Vec<f32> {
        let mut out = vec![0.0; self.0.len()];
        self.decode_into(&mut out);
        out
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.0.len() * std::mem::size_of::<f16>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A half vector decodes to exactly the rounded `f32`s, rounding is idempotent, and a unit vector's
        /// cosine with itself moves by less than 10⁻³.
        #[test]
        fn half_vectors_decode_to_the_rounded_values(raw in proptest::collection::vec(-1.0f32..1.0, 1..600)) {
            let mut v = raw.clone();
            crate::util::vector::normalize(&mut v);
            let h = HalfVec::from_f32(&v);
            let mut rounded = v.clone();
            round(&mut rounded);
            prop_assert_eq!(h.to_f32(), rounded.clone());
            let mut again = rounded.clone();
            round(&mut again);
            prop_assert_eq!(&again, &rounded);
            prop_assert_eq!(HalfVec::from_f32(&rounded), h.clone());
            prop_assert!(rounded.iter().all(|x| f16::from_f32(*x).to_f32().to_bits() == x.to_bits()));
            let mut bytes = Vec::new();
            h.extend_le_bytes(&mut bytes);
            prop_assert_eq!(HalfVec::from_le_bytes(&bytes).to_f32(), rounded.clone());
            let norm = crate::util::vector::dot(&v, &v);
            if norm > 0.5 {
                prop_assert!((crate::util::vector::dot(&v, &rounded) - norm).abs() < 1e-3);
            }
        }
    }

    #[test]
    fn parallel_rounding_matches_rounding() {
        let v: Vec<f32> = (0..3_000_001).map(|i| ((i as f32) * 0.7311).sin() * 0.1).collect();
        let (mut a, mut b) = (v.clone(), v);
        round(&mut a);
        round_parallel(&mut b, 2);
        assert_eq!(a, b);
        assert!(a.iter().all(|x| f16::from_f32(*x).to_f32() == *x));
    }
}
