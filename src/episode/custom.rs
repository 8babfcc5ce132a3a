//! Validation of a custom episode (its memories, question, answer and evidence) before anything is
//! embedded: every field passes the text rule ([`crate::text::charset`]: refused characters, NFC,
//! trimming, its cap) and is stored as the rule leaves it; a refusal names the field. Kept apart from the
//! lifecycle code in `mod.rs`.

use crate::text::charset::{self, Shape};

use super::{EpisodeError, Limits, NewMemory};

/// Most characters of a speaker or source label (as for `manage_memory`'s labels).
pub const MAX_LABEL_CHARS: usize = 200;
/// Most characters of a session date ("1:56 pm on 8 May, 2023" is 22).
pub const MAX_DATE_CHARS: usize = 64;
/// Most evidence ids per memory, and for the question.
pub const MAX_EVIDENCE_IDS: usize = 100;
/// Most characters of one evidence id ("D12:34").
pub const MAX_EVIDENCE_ID_CHARS: usize = 32;

/// Checks a custom episode and puts each text in its stored form: 1 to `max_custom_memories` memories
/// (more is RESOURCE_EXHAUSTED, the code of every memory cap), each field within its cap and free of
/// refused characters (INVALID_ARGUMENT). On an error nothing is changed that matters: the caller drops
/// the request.
pub fn admit(
    limits: &Limits,
    memories: &mut [NewMemory],
    question: &mut String,
    answer: &mut String,
    evidence: &[String],
) -> Result<(), EpisodeError> {
    let max = limits.max_custom_memories;
    if memories.is_empty() {
        return Err(EpisodeError::invalid("custom.memories", "must hold at least one memory"));
    }
    if memories.len() > max {
        return Err(EpisodeError::ResourceExhausted {
            message: format!("custom.memories holds {} memories, over the cap of {max} memories per episode", memories.len()),
        });
    }
    let max_chars = limits.tools.max_text_chars;
    for (i, m) in memories.iter_mut().enumerate() {
        let at = |f: &str| format!("custom.memories[{i}].{f}");
        m.text = text(&at("text"), &m.text, max_chars)?;
        for (f, v, cap) in [
            ("speaker", &mut m.speaker, MAX_LABEL_CHARS),
            ("session_date", &mut m.session_date, MAX_DATE_CHARS),
            ("source", &mut m.source, MAX_LABEL_CHARS),
        ] {
            if let Some(s) = v.as_deref() {
                *v = label(&at(f), s, cap)?;
            }
        }
        evidence_ids(&at("evidence"), &m.evidence)?;
    }
    *question = text("custom.question", question, max_chars)?;
    *answer = text("custom.answer", answer, max_chars)?;
    evidence_ids("custom.evidence", evidence)
}

fn text(field: &str, v: &str, max: usize) -> Result<String, EpisodeError> {
    charset::admit_required(v, Shape::Text, max).map_err(|why| EpisodeError::invalid(field, why.to_string()))
}

/// A one-line label; one that is empty after trimming counts as absent.
fn label(field: &str, v: &str, max: usize) -> Result<Option<String>, EpisodeError> {
    let t = charset::admit(v, Shape::Label, max).map_err(|why| EpisodeError::invalid(field, why.to_string()))?;
    Ok((!t.is_empty()).then_some(t))
}

fn evidence_ids(field: &str, ids: &[String]) -> Result<(), EpisodeError> {
    if ids.len() > MAX_EVIDENCE_IDS {
        return Err(EpisodeError::invalid(field, format!("lists {} ids, over the limit of {MAX_EVIDENCE_IDS}", ids.len())));
    }
    for (j, id) in ids.iter().enumerate() {
        let n = id.chars().count();
        let ok =
            (1..=MAX_EVIDENCE_ID_CHARS).contains(&n) && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, ':' | '.' | '_' | '-'));
        if !ok {
            return Err(EpisodeError::invalid(
                &format!("{field}[{j}]"),
                format!("must be 1 to {MAX_EVIDENCE_ID_CHARS} letters, digits, ':', '.', '_' or '-' (a dialogue id like \"D1:3\"), got {} ({n} characters)", crate::util::excerpt::quoted(id)),
            ));
        }
    }
    Ok(())
}
