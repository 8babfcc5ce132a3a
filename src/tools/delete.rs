//! delete_memory: really removes one or more memories, all or nothing (an unknown id deletes nothing).

use serde_json::{json, Value};

use crate::memory::{EpisodeMemory, MemoryId};

use super::args::*;
use super::llm_calls::{function, prop, prop_strings, Args};
use super::{join_ids, require_distinct_live, OutputKind, Prepared, Tool, ToolContext, ToolError, ToolOutput};

// ---- arguments: what the typed RPC and the LLM's JSON are validated into --------------------

/// delete_memory arguments, unvalidated.
#[derive(Debug, Clone, Default)]
pub struct RawDelete {
    /// memory_id (one id).
    pub memory_id: Option<String>,
    /// memory_ids (several).
    pub memory_ids: Option<Vec<String>>,
    /// reason.
    pub reason: Option<String>,
}

/// delete_memory arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct DeleteArgs {
    /// Ids to delete (distinct).
    pub ids: Vec<MemoryId>,
    /// Why.
    pub reason: Option<String>,
}

impl RawDelete {
    /// Validates: exactly one of memory_id / memory_ids.
    pub fn validate(self, limits: &ToolLimits) -> Result<DeleteArgs, ToolError> {
        let one = self.memory_id.as_deref().map(str::trim).filter(|s| !s.is_empty());
        let ids = match (one, self.memory_ids) {
            (Some(_), Some(_)) => return Err(ToolError::invalid("memory_ids", "give either memory_id or memory_ids, not both")),
            (Some(s), None) => vec![parse_id("memory_id", s)?],
            (None, Some(list)) => parse_ids("memory_ids", &list, MIN_IDS, limits.max_ids_per_call)?,
            (None, None) => return Err(ToolError::invalid("memory_id", "is required (or memory_ids)")),
        };
        Ok(DeleteArgs { ids, reason: label("reason", self.reason)? })
    }
}

/// A `memory_ids` list names at least this many ids (at most [`ToolLimits::max_ids_per_call`]).
const MIN_IDS: usize = 1;

/// The OpenAI function schema the LLM sees, with `memory_ids` bounded by `limits`.
pub(super) fn schema(limits: &ToolLimits) -> Value {
    function(
        "delete_memory",
        "Delete memory_id or memory_ids; nothing is deleted if any id is unknown.",
        json!({
            "memory_id": prop("string", "Id, as a search or sample result showed it."),
            "memory_ids": prop_strings("List of ids.", (MIN_IDS, limits.max_ids_per_call)),
            "reason": prop("string", "Why."),
        }),
        &[],
    )
}

/// The arguments from an LLM's JSON, validated as on the typed path.
pub(super) fn from_json(a: &mut Args, limits: &ToolLimits) -> Result<DeleteArgs, ToolError> {
    RawDelete { memory_id: a.string("memory_id")?, memory_ids: a.strings("memory_ids")?, reason: a.string("reason")? }.validate(limits)
}

/// Canonical JSON of the arguments (for the trace).
pub(super) fn canonical(a: &DeleteArgs) -> Value {
    json!({"memory_ids": id_strings(&a.ids), "reason": a.reason})
}

impl Tool for DeleteArgs {
    /// The ids to remove.
    type Plan = Vec<MemoryId>;

    fn prepare(&self, mem: &EpisodeMemory, _ctx: ToolContext<'_>) -> Result<Prepared<Vec<MemoryId>>, ToolError> {
        let field = if self.ids.len() == 1 { "memory_id" } else { "memory_ids" };
        require_distinct_live(mem, field, &self.ids)?;
        Ok(Prepared { plan: self.ids.clone(), texts: Vec::new() })
    }

    fn apply(mem: &mut EpisodeMemory, ids: Vec<MemoryId>, _vectors: &[Vec<f32>], _ctx: ToolContext<'_>) -> ToolOutput {
        for id in &ids {
            let removed = mem.remove(*id);
            debug_assert!(removed.is_some(), "prepare checked the ids");
        }
        let text = format!("deleted {} ({} memories left)", join_ids(&ids), mem.len());
        ToolOutput { kind: OutputKind::Deleted { ids, remaining: mem.len() }, text }
    }
}
