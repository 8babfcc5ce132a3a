//! Validation of a custom episode (its memories, question, answer and evidence) before anything is
//! embedded: every field is capped and checked for refused characters, and a refusal names the field.
//! Kept apart from the lifecycle code in `mod.rs`.

use crate::text::charset;

use super::{EpisodeError, Limits, NewMemory};

/// Most characters of a speaker or source label (as for `manage_memory`'s labels).
pub const MAX_LABEL_CHARS: usize = 200;
/// Most characters of a session date ("1:56 pm on 8 May, 2023" is 22).
pub const MAX_DATE_CHARS: usize = 64;
/// Most evidence ids per memory, and for the question.
pub const MAX_EVIDENCE_IDS: usize = 100;
/// Most characters of one evidence id ("D12:34").
pub const MAX_EVIDENCE_ID_CHARS: usize = 32;

/// Checks a custom episode: 1 to `max_custom_memories` memories (more is RESOURCE_EXHAUSTED, the code
/// of every memory cap), each field within its cap and free of refused characters (INVALID_ARGUMENT).
pub fn check(limits: &Limits, memories: &[NewMemory], question: &str, answer: &str, evidence: &[String]) -> Result<(), EpisodeError> {
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
    for (i, m) in memories.iter().enumerate() {
        let at = |f: &str| format!("custom.memories[{i}].{f}");
        text(&at("text"), &m.text, max_chars)?;
        for (f, v, cap) in [
            ("speaker", &m.speaker, MAX_LABEL_CHARS),
            ("session_date", &m.session_date, MAX_DATE_CHARS),
            ("source", &m.source, MAX_LABEL_CHARS),
        ] {
            if let Some(v) = v {
                label(&at(f), v, cap)?;
            }
        }
        evidence_ids(&at("evidence"), &m.evidence)?;
    }
    text("custom.question", question, max_chars)?;
    text("custom.answer", answer, max_chars)?;
    evidence_ids("custom.evidence", evidence)
}

fn text(field: &str, v: &str, max: usize) -> Result<(), EpisodeError> {
    let n = v.trim().chars().count();
    if n == 0 || n > max {
        return Err(EpisodeError::invalid(field, format!("must be 1 to {max} characters (not only whitespace), got {n}")));
    }
    match charset::check(v.trim(), charset::refused_in_text) {
        Some(why) => Err(EpisodeError::invalid(field, why)),
        None => Ok(()),
    }
}

fn label(field: &str, v: &str, max: usize) -> Result<(), EpisodeError> {
    let n = v.chars().count();
    if n > max {
        return Err(EpisodeError::invalid(field, format!("is {n} characters long, over the limit of {max}")));
    }
    match charset::check(v, charset::refused_in_label) {
        Some(why) => Err(EpisodeError::invalid(field, why)),
        None => Ok(()),
    }
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
                format!("must be 1 to {MAX_EVIDENCE_ID_CHARS} letters, digits, ':', '.', '_' or '-' (a dialogue id like \"D1:3\"), got {} ({n} characters)", crate::quote::quoted(id)),
            ));
        }
    }
    Ok(())
}
