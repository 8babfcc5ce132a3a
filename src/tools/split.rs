//! split_memory: replaces one memory by 2..max_parts memories, each carrying the original's provenance
//! (evidence, speaker, session, date, type). Parts come from `parts` when given, else from the offline
//! segmentation in [`super::text`] by time expressions, topic similarity or speaker mentions. A memory
//! that cannot be split is FailedPrecondition with the reason.

use crate::memory::{EpisodeMemory, MemoryId, MemoryRecord};

use super::text::split_text;
use super::{join_ids, require_room, OutputKind, Plan, Prepared, SplitArgs, ToolContext, ToolError, ToolOutput};

/// The speakers a split by speaker may name: the conversation's, plus the memory's own speaker.
pub(super) fn known_speakers<'m>(mem: &'m EpisodeMemory, original: &'m MemoryRecord) -> Vec<&'m str> {
    let mut speakers: Vec<&str> = mem.base().speakers().iter().map(String::as_str).collect();
    if let Some(s) = original.speaker.as_deref() {
        if !speakers.contains(&s) {
            speakers.push(s);
        }
    }
    speakers
}

pub(super) fn prepare(mem: &EpisodeMemory, a: &SplitArgs, ctx: ToolContext<'_>) -> Result<Prepared, ToolError> {
    let original = mem.get(a.id).ok_or(ToolError::MemoryNotFound { field: "memory_id".into(), id: a.id })?;
    let texts = match &a.parts {
        Some(p) => p.clone(),
        None => split_text(&original.text, a.criteria, a.max_parts, &known_speakers(mem, original))
            .map_err(|e| ToolError::FailedPrecondition { message: format!("cannot split {}: {e}", a.id) })?,
    };
    if texts.iter().any(|t| t.chars().count() > ctx.limits.max_text_chars) {
        return Err(ToolError::invalid("parts", format!("a part is over the limit of {} characters", ctx.limits.max_text_chars)));
    }
    require_room(mem, ctx.limits, 1, texts.len())?;
    let parts = texts
        .iter()
        .map(|t| MemoryRecord { id: MemoryId(0), text: t.clone(), source: "split".to_string(), created_step: ctx.step, ..original.clone() })
        .collect();
    Ok(Prepared { plan: Plan::Split { source: a.id, parts }, texts })
}

pub(super) fn apply(mem: &mut EpisodeMemory, source: MemoryId, mut parts: Vec<MemoryRecord>, vectors: &[Vec<f32>]) -> ToolOutput {
    let removed = mem.remove(source);
    debug_assert!(removed.is_some(), "prepare checked the id");
    for (p, v) in parts.iter_mut().zip(vectors) {
        p.id = mem.allocate_id();
        mem.insert(p.clone(), v);
    }
    let ids: Vec<MemoryId> = parts.iter().map(|p| p.id).collect();
    let lines: Vec<String> = parts.iter().map(|p| p.render_line(None)).collect();
    let text = format!("split {source} into {}:\n{}", join_ids(&ids), lines.join("\n"));
    ToolOutput { kind: OutputKind::Split { parts, removed: source }, text }
}
