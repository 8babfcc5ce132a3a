//! Page tokens of `ListMemories` and `ListQuestions`: opaque, bound to the listing that issued them.
//!
//! Why this exists: plain offsets let a client forge tokens (`"0"`, `"+5"`, `"05"` all worked), let a
//! `ListQuestions` token page a `ListMemories` listing, and skipped a live memory when one on an earlier page
//! was deleted between two calls. A token is 40 lowercase hex digits: the listing's key (64 bits: a hash of
//! the RPC and every filter of the request), a position (64 bits) and a check (32 bits over both and the
//! RPC). Anything else — a token of another RPC, episode or filter, or one edited by hand — is
//! INVALID_ARGUMENT naming `page_token`. Tokens do not depend on the server instance (same request, same
//! token) and never expire.
//!
//! Positions: for `ListMemories`, the listing position of the last memory returned
//! ([`crate::memory::EpisodeMemory::listing`]); the next page holds the memories after it, so edits between
//! two pages never skip a live memory. For `ListQuestions`, an offset into the fixed dataset.

use tonic::Status;

use crate::util::fnv::{fnv1a_extend as fnv, FNV1A_OFFSET};

/// The listing a token belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rpc {
    /// `ListMemories`.
    Memories = 1,
    /// `ListQuestions`.
    Questions = 2,
    /// `ListExperiences`.
    Experiences = 3,
}

/// The key of one listing: the RPC and the request's filters (every part, in order).
pub fn listing_key(rpc: Rpc, parts: &[&str]) -> u64 {
    let mut h = fnv(FNV1A_OFFSET, &[rpc as u8]);
    for part in parts {
        h = fnv(h, &(part.len() as u64).to_le_bytes());
        h = fnv(h, part.as_bytes());
    }
    h
}

fn check(rpc: Rpc, key: u64, position: u64) -> u32 {
    let h = fnv(fnv(fnv(FNV1A_OFFSET, b"memgym-page"), &[rpc as u8]), &key.to_le_bytes());
    (fnv(h, &position.to_le_bytes()) >> 32) as u32
}

/// The token of `position` in the listing `key` of `rpc`.
pub fn encode(rpc: Rpc, key: u64, position: u64) -> String {
    format!("{key:016x}{position:016x}{:08x}", check(rpc, key, position))
}

fn refused(message: impl std::fmt::Display) -> Status {
    crate::api::status::refusal(
        tonic::Code::InvalidArgument,
        "INVALID_ARGUMENT",
        format!("invalid argument page_token: {message}"),
        Some("page_token"),
    )
}

/// The position in `token` (`None` for the empty token: the first page), or INVALID_ARGUMENT naming
/// `page_token` for a token this listing did not issue.
pub fn decode(rpc: Rpc, key: u64, token: &str) -> Result<Option<u64>, Status> {
    if token.is_empty() {
        return Ok(None);
    }
    let not_ours = || refused(format!("{} is not a token this listing issued", crate::util::excerpt::quoted(token)));
    if token.len() != 40 || !token.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return Err(not_ours());
    }
    let field = |r: std::ops::Range<usize>| u64::from_str_radix(&token[r], 16).map_err(|_| not_ours());
    let (got_key, position, sum) = (field(0..16)?, field(16..32)?, field(32..40)?);
    if sum != u64::from(check(rpc, got_key, position)) {
        return Err(not_ours());
    }
    if got_key != key {
        return Err(refused("the token belongs to another listing (another RPC, episode or filter): start again without one"));
    }
    Ok(Some(position))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn tokens_round_trip_and_are_bound_to_their_listing() {
        let k = listing_key(Rpc::Memories, &["ep-1", "0"]);
        let t = encode(Rpc::Memories, k, 183);
        assert_eq!(t.len(), 40);
        assert_eq!(decode(Rpc::Memories, k, &t).unwrap(), Some(183));
        assert_eq!(decode(Rpc::Memories, k, "").unwrap(), None);
        let other = listing_key(Rpc::Memories, &["ep-2", "0"]);
        assert!(decode(Rpc::Memories, other, &t).unwrap_err().message().contains("another listing"));
        let q = listing_key(Rpc::Questions, &["ep-1", "0"]);
        assert!(decode(Rpc::Questions, q, &t).is_err(), "a ListMemories token is not a ListQuestions token");
        for forged in ["0", "+5", "05", "5", &t.to_uppercase(), &format!("{}0", &t[..39])] {
            let e = decode(Rpc::Memories, k, forged).unwrap_err();
            assert!(e.message().starts_with("invalid argument page_token:"), "{forged}: {}", e.message());
        }
        // The parts are length-prefixed: ("ab", "c") and ("a", "bc") are different listings.
        assert_ne!(listing_key(Rpc::Memories, &["ab", "c"]), listing_key(Rpc::Memories, &["a", "bc"]));
    }

    proptest! {
        #[test]
        fn any_string_is_refused_or_a_token_of_this_listing(s in ".{0,80}", key in any::<u64>()) {
            match decode(Rpc::Questions, key, &s) {
                Ok(None) => prop_assert!(s.is_empty()),
                Ok(Some(p)) => prop_assert_eq!(encode(Rpc::Questions, key, p), s),
                Err(e) => prop_assert!(e.message().starts_with("invalid argument page_token:") && e.message().len() < 1024),
            }
        }

        #[test]
        fn every_position_round_trips(key in any::<u64>(), position in any::<u64>()) {
            prop_assert_eq!(decode(Rpc::Memories, key, &encode(Rpc::Memories, key, position)).unwrap(), Some(position));
        }
    }
}
