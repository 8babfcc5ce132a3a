//! delete_memory: really removes one or more memories, all or nothing (an unknown id deletes nothing).

use crate::memory::{EpisodeMemory, MemoryId};

use super::{join_ids, require_distinct_live, DeleteArgs, OutputKind, Plan, Prepared, ToolError, ToolOutput};

pub(super) fn prepare(mem: &EpisodeMemory, a: &DeleteArgs) -> Result<Prepared, ToolError> {
    let field = if a.ids.len() == 1 { "memory_id" } else { "memory_ids" };
    require_distinct_live(mem, field, &a.ids)?;
    Ok(Prepared { plan: Plan::Delete(a.ids.clone()), texts: Vec::new() })
}

pub(super) fn apply(mem: &mut EpisodeMemory, ids: Vec<MemoryId>) -> ToolOutput {
    for id in &ids {
        let removed = mem.remove(*id);
        debug_assert!(removed.is_some(), "prepare checked the ids");
    }
    let text = format!("deleted {} ({} memories left)", join_ids(&ids), mem.len());
    ToolOutput { kind: OutputKind::Deleted { ids, remaining: mem.len() }, text }
}
