//! merge_memory: replaces 2..5 memories by one. The sources are removed; the new memory's provenance is
//! the union of theirs (evidence sorted and deduplicated; speaker, session and date kept when all
//! sources agree). Text comes from `content` when given, else from the offline strategy in
//! [`super::text`].

use crate::memory::{EpisodeMemory, MemoryId, MemoryRecord, MemoryType};

use super::text::merge_texts;
use super::{join_ids, require_distinct_live, require_room, MergeArgs, OutputKind, Plan, Prepared, ToolContext, ToolError, ToolOutput};

/// The same value in every source, else `None`.
fn agreed<T: PartialEq + Clone>(values: impl IntoIterator<Item = Option<T>>) -> Option<T> {
    let mut it = values.into_iter();
    let first = it.next()??;
    it.all(|v| v.as_ref() == Some(&first)).then_some(first)
}

/// Union of evidence ids in dialogue order (D<session>:<turn> compared numerically).
pub(super) fn union_evidence<'a>(lists: impl IntoIterator<Item = &'a [String]>) -> Vec<String> {
    let mut all: Vec<String> = lists.into_iter().flatten().cloned().collect();
    let key = |s: &String| {
        let mut nums = s.trim_start_matches('D').split(':').map(|p| p.parse::<u32>().unwrap_or(u32::MAX));
        (nums.next().unwrap_or(u32::MAX), nums.next().unwrap_or(u32::MAX), s.clone())
    };
    all.sort_by_key(key);
    all.dedup();
    all
}

pub(super) fn prepare(mem: &EpisodeMemory, a: &MergeArgs, ctx: ToolContext<'_>) -> Result<Prepared, ToolError> {
    let sources = require_distinct_live(mem, "memory_ids", &a.ids)?;
    require_room(mem, ctx.limits, a.ids.len(), 1)?;
    let text = match &a.content {
        Some(c) => c.clone(),
        None => {
            let texts: Vec<&str> = sources.iter().map(|r| r.text.as_str()).collect();
            merge_texts(&texts, a.strategy).map_err(|e| ToolError::FailedPrecondition { message: format!("cannot merge: {e}") })?
        }
    };
    let n = text.chars().count();
    if n == 0 {
        return Err(ToolError::FailedPrecondition { message: "cannot merge: the strategy left no text; pass content".into() });
    }
    if n > ctx.limits.max_text_chars {
        return Err(ToolError::FailedPrecondition {
            message: format!(
                "the merged text would be {n} characters, over the limit of {}; use summarize or pass content",
                ctx.limits.max_text_chars
            ),
        });
    }
    let merged = MemoryRecord {
        id: mem.peek_next_id(),
        text: text.clone(),
        memory_type: agreed(sources.iter().map(|r| Some(r.memory_type))).unwrap_or(MemoryType::Semantic),
        speaker: agreed(sources.iter().map(|r| r.speaker.clone())),
        session: agreed(sources.iter().map(|r| r.session)),
        session_date: agreed(sources.iter().map(|r| r.session_date.clone())),
        evidence: union_evidence(sources.iter().map(|r| r.evidence.as_slice())),
        source: "merge".to_string(),
        created_step: ctx.step,
    };
    Ok(Prepared { plan: Plan::Merge { sources: a.ids.clone(), merged }, texts: vec![text] })
}

pub(super) fn apply(mem: &mut EpisodeMemory, sources: Vec<MemoryId>, mut merged: MemoryRecord, v: &[f32]) -> ToolOutput {
    for id in &sources {
        let removed = mem.remove(*id);
        debug_assert!(removed.is_some(), "prepare checked the ids");
    }
    merged.id = mem.allocate_id();
    let text = format!("merged {} into {}", join_ids(&sources), merged.render_line(None));
    mem.insert(merged.clone(), v);
    ToolOutput { kind: OutputKind::Merged { memory: merged, removed: sources }, text }
}
