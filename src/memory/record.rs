//! The memory record: one fact with its metadata and provenance, and its compact id.
//!
//! Ids are numbers shown as `m0042`: the initial memory of a conversation takes `m0000..` in dataset
//! order (so ids are stable across every episode of that conversation), and each episode hands out new
//! ids above those, never reusing one.

use std::fmt;
use std::str::FromStr;

/// A memory id: `m` followed by a number, shown zero-padded to four digits (`m0042`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MemoryId(pub u32);

impl fmt::Display for MemoryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "m{:04}", self.0)
    }
}

/// The id the "not a memory id" refusal shows as its example: an id's shape that names no memory. An episode
/// hands out ids one at a time from |M₀| up, and its memories, steps and parts are capped far below a
/// billion, so a policy that copies the example names no memory it could change. The refusal once showed
/// `m0042`, which every LoCoMo conversation holds: a real model copied it and overwrote that memory.
pub const EXAMPLE_ID: &str = "m999999999";

/// The reason a string is not a memory id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a memory id: {} (expected 'm' followed by digits, like {EXAMPLE_ID})", crate::util::excerpt::quoted(.0))]
pub struct BadMemoryId(pub String);

/// Refusal wordings that changed, as (recorded, today's): `memgym replay` reads a recorded output in today's
/// wording before comparing it, and counts it apart. The only texts it rewords.
pub const REWORDED: [(&str, &str); 1] =
    [("(expected 'm' followed by digits, like m0042)", "(expected 'm' followed by digits, like m999999999)")];

impl FromStr for MemoryId {
    type Err = BadMemoryId;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let digits = t.strip_prefix('m').or_else(|| t.strip_prefix('M')).ok_or_else(|| BadMemoryId(s.to_string()))?;
        if digits.is_empty() || digits.len() > 9 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(BadMemoryId(s.to_string()));
        }
        digits.parse::<u32>().map(MemoryId).map_err(|_| BadMemoryId(s.to_string()))
    }
}

/// What kind of knowledge a memory holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemoryType {
    /// Something that happened.
    Episodic,
    /// A general fact or consolidated knowledge.
    Semantic,
    /// How to do something.
    Procedural,
}

impl MemoryType {
    /// The lowercase name used in tool arguments and Parquet.
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryType::Episodic => "episodic",
            MemoryType::Semantic => "semantic",
            MemoryType::Procedural => "procedural",
        }
    }
    /// All types, in schema order.
    pub const ALL: [MemoryType; 3] = [MemoryType::Episodic, MemoryType::Semantic, MemoryType::Procedural];
}

impl FromStr for MemoryType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "episodic" => Ok(MemoryType::Episodic),
            "semantic" => Ok(MemoryType::Semantic),
            "procedural" => Ok(MemoryType::Procedural),
            _ => Err(format!("unknown memory type {} (expected episodic, semantic or procedural)", crate::util::excerpt::quoted(s))),
        }
    }
}

/// One memory with its metadata and provenance.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryRecord {
    /// Stable short id.
    pub id: MemoryId,
    /// The text.
    pub text: String,
    /// Episodic, semantic or procedural.
    pub memory_type: MemoryType,
    /// Who it is about; `None` when unknown or mixed.
    pub speaker: Option<String>,
    /// LoCoMo session number.
    pub session: Option<u32>,
    /// The session's date as LoCoMo writes it.
    pub session_date: Option<String>,
    /// Dialogue ids the memory rests on (sorted, no duplicates after a merge).
    pub evidence: Vec<String>,
    /// Where it came from.
    pub source: String,
    /// The step that created or last rewrote it (0 = initial memory).
    pub created_step: u32,
    /// The episode wrote words of its own into it: created or rewritten, merged or split with text of its
    /// own, or cut or merged from such a memory. A concatenating or extractive merge, or a cut, of memories
    /// it did not author carries their text and is not authored ([`crate::reward::phrase`] reads an
    /// authored note's dates as the episode's claims, a carried one's as the conversation's).
    pub authored: bool,
}

impl MemoryRecord {
    /// Length in characters (Unicode scalar values, as Python's `len`), used by the density factor.
    pub fn char_len(&self) -> usize {
        self.text.chars().count()
    }

    /// The session date as a reader needs it: the day, without LoCoMo's time of day
    /// (`1:56 pm on 8 May, 2023` → `8 May 2023`); a date in another form is kept as written, trimmed.
    /// `None` without a date.
    pub fn date_label(&self) -> Option<String> {
        let d = self.session_date.as_deref()?.trim();
        if d.is_empty() {
            return None;
        }
        let day = d.rsplit_once(" on ").map_or(d, |(_, day)| day);
        // Commas dropped, whitespace collapsed to one space (a piece that was only commas is gone), in one
        // allocation: every memory read for a reward is labelled.
        let mut label = String::with_capacity(day.len());
        for piece in day.split_whitespace() {
            if piece.bytes().all(|b| b == b',') {
                continue;
            }
            if !label.is_empty() {
                label.push(' ');
            }
            label.extend(piece.chars().filter(|c| *c != ','));
        }
        Some(label)
    }

    /// The one view of a memory that every reader gets — the tools' text, the offline evaluators and the
    /// LLM evaluators' QA prompt: `8 May 2023: text` (LoCoMo's RAG rendering, with the day alone), or
    /// the text alone without a session date. A memory that says "yesterday" can only be resolved by a
    /// policy that sees the date it was said on.
    pub fn view(&self) -> String {
        match self.date_label() {
            Some(d) => format!("{d}: {}", self.text),
            None => self.text.clone(),
        }
    }

    /// The compact one-line rendering tools give the LLM: `[m0042 0.83] 8 May 2023: text (D1:3)`, the
    /// [`MemoryRecord::view`] between the id and the evidence.
    pub fn render_line(&self, score: Option<f32>) -> String {
        let mut s = String::with_capacity(self.text.len() + 40);
        use std::fmt::Write as _;
        match score {
            Some(sc) => {
                let _ = write!(s, "[{} {:.2}] ", self.id, sc);
            }
            None => {
                let _ = write!(s, "[{}] ", self.id);
            }
        }
        s.push_str(&self.view());
        if !self.evidence.is_empty() {
            s.push_str(" (");
            s.push_str(&self.evidence.join(","));
            s.push(')');
        }
        s
    }
}

/// Metadata filters shared by search and sample.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    /// Only this type.
    pub memory_type: Option<MemoryType>,
    /// Only this speaker (compared case-insensitively; stored lowercase).
    pub speaker: Option<String>,
    /// Only this session.
    pub session: Option<u32>,
    /// Only records whose `source` label is exactly this (a bank's domain).
    pub source: Option<String>,
}

impl Filter {
    /// True when no condition is set.
    pub fn is_empty(&self) -> bool {
        self.memory_type.is_none() && self.speaker.is_none() && self.session.is_none() && self.source.is_none()
    }

    /// Whether a record passes.
    pub fn matches(&self, r: &MemoryRecord) -> bool {
        if let Some(t) = self.memory_type {
            if r.memory_type != t {
                return false;
            }
        }
        if let Some(s) = &self.speaker {
            match &r.speaker {
                Some(rs) if rs.eq_ignore_ascii_case(s) || rs.to_lowercase() == *s => {}
                _ => return false,
            }
        }
        if let Some(sess) = self.session {
            if r.session != Some(sess) {
                return false;
            }
        }
        if let Some(src) = &self.source {
            if r.source != *src {
                return false;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_reject_garbage() {
        assert_eq!(MemoryId(42).to_string(), "m0042");
        assert_eq!(MemoryId(12345).to_string(), "m12345");
        assert_eq!("m0042".parse::<MemoryId>(), Ok(MemoryId(42)));
        assert_eq!(" m7 ".parse::<MemoryId>(), Ok(MemoryId(7)));
        for bad in ["", "m", "42", "x0042", "m-1", "m00a1", "m99999999999", "m 1"] {
            assert!(bad.parse::<MemoryId>().is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn the_refusal_shows_an_id_no_memory_can_have_and_knows_its_old_wording() {
        let id: MemoryId = EXAMPLE_ID.parse().unwrap();
        // Far above any id an episode allocates: every cap on memories and steps is orders of magnitude lower.
        assert!(id.0 >= 999_999_999 && id.to_string() == EXAMPLE_ID);
        let refusal = "x".parse::<MemoryId>().unwrap_err().to_string();
        assert_eq!(refusal, format!("not a memory id: \"x\" (expected 'm' followed by digits, like {EXAMPLE_ID})"));
        // Today's wording of each reworded refusal is the one the refusal gives now.
        for (old, new) in REWORDED {
            assert!(refusal.ends_with(new) && old != new && !refusal.contains(old), "{old} → {new}");
        }
    }

    #[test]
    fn render_line_leads_with_id() {
        let r = MemoryRecord {
            id: MemoryId(42),
            text: "Caroline joined an LGBTQ support group".into(),
            memory_type: MemoryType::Episodic,
            speaker: Some("Caroline".into()),
            session: Some(1),
            session_date: None,
            evidence: vec!["D1:3".into()],
            source: "conversation_observations".into(),
            created_step: 0,
            authored: false,
        };
        assert_eq!(r.render_line(Some(0.834)), "[m0042 0.83] Caroline joined an LGBTQ support group (D1:3)");
        assert_eq!(r.render_line(None), "[m0042] Caroline joined an LGBTQ support group (D1:3)");
        let dated = MemoryRecord { session_date: Some("1:56 pm on 8 May, 2023".into()), ..r };
        assert_eq!(dated.date_label().as_deref(), Some("8 May 2023"));
        assert_eq!(dated.render_line(None), "[m0042] 8 May 2023: Caroline joined an LGBTQ support group (D1:3)");
        let other = MemoryRecord { session_date: Some(" 2023-05-08 ".into()), ..dated.clone() };
        assert_eq!(other.view(), "2023-05-08: Caroline joined an LGBTQ support group");
        assert_eq!(MemoryRecord { session_date: Some("  ".into()), ..dated }.date_label(), None);
    }

    proptest::proptest! {
        /// The label built in one pass is the commas removed, then the whitespace collapsed.
        #[test]
        fn the_date_label_drops_commas_then_collapses_whitespace(d in "[0-9a-zA-Z ,:\\t\u{a0}\u{2003}]{0,30}|\\PC{0,20}") {
            let r = MemoryRecord {
                id: MemoryId(1),
                text: "text".into(),
                memory_type: MemoryType::Episodic,
                speaker: None,
                session: None,
                session_date: Some(d.clone()),
                evidence: vec![],
                source: "t".into(),
                created_step: 0,
                authored: false,
            };
            let t = d.trim();
            let want = (!t.is_empty()).then(|| {
                let day = t.rsplit_once(" on ").map_or(t, |(_, day)| day);
                day.replace(',', "").split_whitespace().collect::<Vec<_>>().join(" ")
            });
            proptest::prop_assert_eq!(r.date_label(), want);
        }
    }
}
