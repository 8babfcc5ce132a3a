//! 64-bit FNV-1a, the crate's one non-cryptographic hash: embedder identities and fingerprints, the hash
//! embedder's feature buckets, and per-question seeds. A std-only leaf (it imports nothing from the
//! crate) so that the embedders, the LLM clients and the harness can all share the one definition.

/// FNV-1a's 64-bit offset basis: the state before any byte.
pub const FNV1A_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// 64-bit FNV-1a of `bytes` (identities and fingerprints; not for security).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    fnv1a_extend(FNV1A_OFFSET, bytes)
}

/// Continues an FNV-1a hash whose state is `h` over more bytes.
pub fn fnv1a_extend(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_matches_reference_values() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
