//! manage_memory: create a memory (a new id) or update one (new text, re-embedded, provenance kept).
//! Update of an unknown id is NotFound — never a silent upsert, as MemUpdate's was.

use crate::memory::{EpisodeMemory, MemoryRecord, MemoryType};

use super::{require_room, ManageArgs, ManageOp, OutputKind, Plan, Prepared, ToolContext, ToolError, ToolOutput};

pub(super) fn prepare(mem: &EpisodeMemory, a: &ManageArgs, ctx: ToolContext<'_>) -> Result<Prepared, ToolError> {
    let plan = match a.op {
        ManageOp::Create => {
            require_room(mem, ctx.limits, 0, 1)?;
            Plan::Create(MemoryRecord {
                id: mem.peek_next_id(),
                text: a.content.clone(),
                memory_type: a.memory_type.unwrap_or(MemoryType::Semantic),
                speaker: a.speaker.clone(),
                session: None,
                session_date: None,
                evidence: Vec::new(),
                source: a.source.clone().unwrap_or_else(|| "agent".to_string()),
                created_step: ctx.step,
            })
        }
        ManageOp::Update(id) => {
            let old = mem.get(id).ok_or(ToolError::MemoryNotFound { field: "memory_id".into(), id })?;
            Plan::Update(MemoryRecord {
                id,
                text: a.content.clone(),
                memory_type: a.memory_type.unwrap_or(old.memory_type),
                speaker: a.speaker.clone().or_else(|| old.speaker.clone()),
                session: old.session,
                session_date: old.session_date.clone(),
                evidence: old.evidence.clone(),
                source: a.source.clone().unwrap_or_else(|| old.source.clone()),
                created_step: ctx.step,
            })
        }
    };
    Ok(Prepared { texts: vec![a.content.clone()], plan })
}

pub(super) fn apply_create(mem: &mut EpisodeMemory, mut r: MemoryRecord, v: &[f32]) -> ToolOutput {
    r.id = mem.allocate_id();
    let text = format!("created {}", r.render_line(None));
    mem.insert(r.clone(), v);
    ToolOutput { kind: OutputKind::Created(r), text }
}

pub(super) fn apply_update(mem: &mut EpisodeMemory, r: MemoryRecord, v: &[f32]) -> ToolOutput {
    let text = format!("updated {}", r.render_line(None));
    let replaced = mem.replace(r.clone(), v);
    debug_assert!(replaced, "prepare checked the id");
    ToolOutput { kind: OutputKind::Updated(r), text }
}
