//! Evidence normalisation: LoCoMo cites dialogue turns as `D<session>:<turn>` ids, but a few raw
//! entries are malformed (several ids in one string, a stray `D`, a leading zero). This file turns
//! raw evidence strings into clean, canonical, de-duplicated dia ids and counts what it repaired.

/// How raw evidence entries were treated while normalising (see [`normalize_evidence`]).
///
/// An *entry* is one raw string: one element of a question's `evidence` list, or one dia id of an
/// observation pair (a list-valued dia id contributes one entry per element).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EvidenceRepairs {
    /// Raw entries examined.
    pub raw_entries: u32,
    /// Entries that already were exactly one canonical dia id.
    pub clean: u32,
    /// Entries that were not canonical but yielded at least one dia id (split on separators,
    /// trimmed, or leading zeros removed).
    pub repaired: u32,
    /// Entries that yielded no dia id at all and were dropped.
    pub dropped: u32,
    /// Tokens discarded because they were not `D<digits>:<digits>` (e.g. `D`, `D:11:26`).
    pub dropped_tokens: u32,
    /// Dia ids removed because they repeated an earlier id of the same list.
    pub duplicates_removed: u32,
}

impl EvidenceRepairs {
    /// Adds the counts of `other` to `self`.
    pub fn add(&mut self, other: &EvidenceRepairs) {
        self.raw_entries += other.raw_entries;
        self.clean += other.clean;
        self.repaired += other.repaired;
        self.dropped += other.dropped;
        self.dropped_tokens += other.dropped_tokens;
        self.duplicates_removed += other.duplicates_removed;
    }
}

/// Parses one token as a dia id and returns its canonical form `D<session>:<turn>` (decimal, no
/// leading zeros), or `None` if the token is not exactly `D<digits>:<digits>` or a number does
/// not fit in a `u32`.
pub fn canonical_dia_id(token: &str) -> Option<String> {
    let rest = token.strip_prefix('D')?;
    let (session, turn) = rest.split_once(':')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(session) || !digits(turn) {
        return None;
    }
    let session: u32 = session.parse().ok()?;
    let turn: u32 = turn.parse().ok()?;
    Some(format!("D{session}:{turn}"))
}

/// True if `id` is a canonical dia id: `D<digits>:<digits>` without leading zeros.
pub fn is_dia_id(id: &str) -> bool {
    canonical_dia_id(id).as_deref() == Some(id)
}

/// Normalises raw evidence entries into dia ids.
///
/// Every entry is split on `;`, `,` and whitespace; each token that is exactly
/// `D<digits>:<digits>` is kept in canonical form (leading zeros removed, so `D30:05` becomes
/// `D30:5`), every other token is dropped, and repeated ids are removed keeping the first.
/// Order is preserved. The counts go to `repairs`.
pub fn normalize_evidence<'a, I>(entries: I, repairs: &mut EvidenceRepairs) -> Vec<String>
where
    I: IntoIterator<Item = &'a str>,
{
    let mut out: Vec<String> = Vec::new();
    for entry in entries {
        repairs.raw_entries += 1;
        let mut yielded = 0u32;
        let mut tokens = 0u32;
        for token in entry.split(|c: char| c == ';' || c == ',' || c.is_whitespace()).filter(|t| !t.is_empty()) {
            tokens += 1;
            match canonical_dia_id(token) {
                Some(id) => {
                    yielded += 1;
                    if out.contains(&id) {
                        repairs.duplicates_removed += 1;
                    } else {
                        out.push(id);
                    }
                }
                None => repairs.dropped_tokens += 1,
            }
        }
        if yielded == 0 {
            repairs.dropped += 1;
        } else if tokens == 1 && yielded == 1 && is_dia_id(entry) {
            repairs.clean += 1;
        } else {
            repairs.repaired += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(entries: &[&str]) -> (Vec<String>, EvidenceRepairs) {
        let mut r = EvidenceRepairs::default();
        let v = normalize_evidence(entries.iter().copied(), &mut r);
        (v, r)
    }

    #[test]
    fn clean_entries_pass_through() {
        let (v, r) = norm(&["D1:3", "D10:2"]);
        assert_eq!(v, ["D1:3", "D10:2"]);
        assert_eq!((r.raw_entries, r.clean, r.repaired, r.dropped), (2, 2, 0, 0));
    }

    #[test]
    fn the_locomo_malformations_are_repaired_or_dropped() {
        let (v, r) = norm(&["D8:6; D9:17"]);
        assert_eq!(v, ["D8:6", "D9:17"]);
        assert_eq!(r.repaired, 1);
        let (v, r) = norm(&["D1:18", "D", "D1:20"]);
        assert_eq!(v, ["D1:18", "D1:20"]);
        assert_eq!((r.clean, r.dropped, r.dropped_tokens), (2, 1, 1));
        let (v, r) = norm(&["D1:14", "D:11:26"]);
        assert_eq!(v, ["D1:14"]);
        assert_eq!((r.dropped, r.dropped_tokens), (1, 1));
        let (v, _) = norm(&["D9:1 D4:4 D4:6"]);
        assert_eq!(v, ["D9:1", "D4:4", "D4:6"]);
        let (v, r) = norm(&["D26:14, D26:34, D26:42"]);
        assert_eq!(v, ["D26:14", "D26:34", "D26:42"]);
        assert_eq!(r.repaired, 1);
        let (v, r) = norm(&["D30:05"]);
        assert_eq!(v, ["D30:5"]);
        assert_eq!(r.repaired, 1);
        let (v, r) = norm(&["D4:5", "D4:5", "D5:5"]);
        assert_eq!(v, ["D4:5", "D5:5"]);
        assert_eq!((r.clean, r.duplicates_removed), (3, 1));
    }

    #[test]
    fn dia_id_syntax() {
        assert!(is_dia_id("D1:3"));
        assert!(!is_dia_id("D01:3"));
        assert!(!is_dia_id("d1:3"));
        assert!(!is_dia_id("D1:3 "));
        assert!(!is_dia_id("D1:"));
        assert!(!is_dia_id("D99999999999:1"));
        assert!(!is_dia_id("D1:+3"));
    }
}
