//! A stored experience's vector as bytes, the same in both stores.
//!
//! Every vector memory holds is at half precision ([`crate::memory::half`]), so a store keeps it in half the
//! bytes: a tag byte `h` then the components as little-endian `f16`, 1 + 2·dim bytes. That length is odd,
//! which tells it from the `f32` rows earlier versions wrote (4·dim bytes, little-endian), still read (and
//! rounded, as memory rounds every vector). A 1,000,000-experience bank writes and reads 768 MB less at 384
//! dimensions.

use half::f16;
use half::slice::HalfFloatSliceExt;

use crate::memory::half::HalfVec;

/// The tag of a half-precision vector.
const HALF: u8 = b'h';

/// The bytes of `v`, rounded to half precision.
pub fn encode(v: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + 2 * v.len());
    out.push(HALF);
    HalfVec::from_f32(v).extend_le_bytes(&mut out);
    out
}

/// The vector in `bytes` (the tagged half-precision form, or an older row's `f32`s, rounded to half
/// precision as memory holds every vector); empty bytes are an empty vector. The error says what the bytes
/// are instead. What it returns is at half precision, so a bank opened on its rows is not rounded again.
pub fn decode(bytes: &[u8]) -> Result<Vec<f32>, String> {
    let mut v = Vec::new();
    decode_half_into(bytes, &mut v)?;
    Ok(v.to_f32_vec())
}

/// [`decode`], appending the components to `out` as `f16`s (exactly: they are at half precision); returns
/// how many it appended (none on an error). A tagged row's bytes are its `f16`s as they are.
pub fn decode_half_into(bytes: &[u8], out: &mut Vec<f16>) -> Result<usize, String> {
    let start = out.len();
    match bytes.split_first() {
        None => {}
        Some((&HALF, rest)) if rest.len().is_multiple_of(2) => {
            out.extend(rest.chunks_exact(2).map(|b| f16::from_le_bytes([b[0], b[1]])));
        }
        Some(_) if bytes.len().is_multiple_of(4) => {
            out.extend(bytes.chunks_exact(4).map(|b| f16::from_f32(f32::from_le_bytes([b[0], b[1], b[2], b[3]]))));
        }
        Some(_) => return Err(format!("a vector of {} bytes", bytes.len())),
    }
    Ok(out.len() - start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A vector comes back as memory holds it (rounded to half precision), an older row's `f32`s too;
        /// any other length is refused, never misread.
        #[test]
        fn vectors_round_trip_and_old_rows_still_read(v in proptest::collection::vec(-1.0f32..1.0, 0..400), junk in proptest::collection::vec(any::<u8>(), 0..40)) {
            let mut rounded = v.clone();
            crate::memory::half::round(&mut rounded);
            prop_assert_eq!(decode(&encode(&v)).unwrap(), rounded.clone());
            let old: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            prop_assert_eq!(decode(&old).unwrap(), rounded.clone());
            // Read as `f16`s, both forms hold exactly the rounded values.
            for bytes in [encode(&v), old] {
                let mut h = vec![f16::ONE];
                prop_assert_eq!(decode_half_into(&bytes, &mut h).unwrap(), v.len());
                prop_assert_eq!(h[1..].iter().map(|x| x.to_f32()).collect::<Vec<_>>(), rounded.clone());
            }
            match decode(&junk) {
                Ok(d) => prop_assert!(junk.is_empty() || junk.len() % 4 == 0 || (junk[0] == HALF && junk.len() % 2 == 1), "{} from {} bytes", d.len(), junk.len()),
                Err(e) => prop_assert!(e.contains(&junk.len().to_string())),
            }
        }
    }
}
