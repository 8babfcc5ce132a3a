//! The six memory-editing tools, one file each, and the two-phase protocol they share.
//!
//! Each tool's validated arguments implement [`Tool`]. A call is first **prepared** against the episode's memory without changing it: every argument and
//! precondition is checked and the texts that need vectors are computed. The caller embeds those texts
//! (off the async workers), then **applies** the plan, which cannot fail. So a rejected call changes
//! nothing, and a call abandoned while embedding (client gone, deadline) changes nothing either.
//!
//! Each tool's file holds its semantics: its arguments (`Raw*` → `validate` → `*Args`), its JSON schema
//! and JSON reading, its strategies, and its prepare and apply. Arguments come from the typed RPCs
//! (converted in `api/`) or from LLM-emitted JSON ([`json`] dispatches by tool name); both go through the
//! same `validate`, with the shared rules of [`args`].

pub mod args;
mod delete;
pub mod llm_calls;
pub mod llm_edit;
mod manage;
mod merge;
mod sample;
mod search;
mod split;

pub use args::ToolLimits;
pub use delete::{DeleteArgs, RawDelete};
pub use manage::{ManageArgs, ManageOp, ManageOpKind, ManagePlan, RawManage};
pub use merge::{merge_texts, MergeArgs, MergePlan, MergeStrategy, RawMerge};
pub use sample::{RawSample, SampleArgs, SampleStrategy};
pub use search::{matched_nothing, RawSearch, SearchArgs};
pub use split::{split_text, RawSplit, SplitArgs, SplitCriteria, SplitPlan, SPLIT_PARTS};

use crate::memory::{EpisodeMemory, MemoryId, MemoryRecord, SearchPath};

/// Why an offline merge or split strategy could not produce a result; the tool reports it as
/// [`ToolError::FailedPrecondition`] after its own context ("cannot split m0012: ..."), so it displays
/// the bare reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TextError {
    /// `ExtractCommon`: no content word occurs in two or more of the sources.
    #[error("the memories have no content words in common")]
    NothingInCommon,
    /// The text cannot be split under the requested criterion.
    #[error("{reason}")]
    CannotSplit {
        /// Human-readable explanation, e.g. "fewer than two time expressions".
        reason: String,
    },
}

/// Why a tool call was refused. Nothing is changed when a call fails.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ToolError {
    /// An argument is missing, malformed or out of range.
    #[error(transparent)]
    InvalidArgument(#[from] crate::util::invalid::Invalid),
    /// A memory id does not name a live memory of the episode.
    #[error("{field}: memory {id} not found")]
    MemoryNotFound {
        /// The argument that named it.
        field: String,
        /// The id.
        id: MemoryId,
    },
    /// The call is well-formed but cannot be carried out on this memory.
    #[error("{message}")]
    FailedPrecondition {
        /// Why.
        message: String,
    },
    /// The call would exceed a cap (memories per episode).
    #[error("{message}")]
    ResourceExhausted {
        /// Which cap.
        message: String,
    },
}

impl ToolError {
    /// An [`ToolError::InvalidArgument`].
    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        ToolError::InvalidArgument(crate::util::invalid::Invalid::new(field, message))
    }
}

/// The six tools' OpenAI function names, in schema order.
pub const TOOL_NAMES: [&str; 6] = ["search_memory", "manage_memory", "delete_memory", "sample_memory", "merge_memory", "split_memory"];

/// One validated tool call.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolCall {
    /// search_memory.
    Search(SearchArgs),
    /// manage_memory.
    Manage(ManageArgs),
    /// delete_memory.
    Delete(DeleteArgs),
    /// sample_memory.
    Sample(SampleArgs),
    /// merge_memory.
    Merge(MergeArgs),
    /// split_memory.
    Split(SplitArgs),
}

impl ToolCall {
    /// The OpenAI function name.
    pub fn name(&self) -> &'static str {
        TOOL_NAMES[self.index()]
    }

    /// The tool's place in [`TOOL_NAMES`].
    pub fn index(&self) -> usize {
        match self {
            ToolCall::Search(_) => 0,
            ToolCall::Manage(_) => 1,
            ToolCall::Delete(_) => 2,
            ToolCall::Sample(_) => 3,
            ToolCall::Merge(_) => 4,
            ToolCall::Split(_) => 5,
        }
    }

    /// Canonical JSON of the arguments (for the trace).
    pub fn arguments_json(&self) -> String {
        llm_calls::canonical_arguments(self).to_string()
    }

    /// Prepare → embed → apply without an episode, `embed` giving one vector per text synchronously
    /// (benches and tests). The episode's step runs the same phases per tool with its async embedder.
    pub fn run_blocking(
        &self,
        mem: &mut EpisodeMemory,
        ctx: ToolContext<'_>,
        embed: impl FnOnce(&[String]) -> Vec<Vec<f32>>,
    ) -> Result<ToolOutput, ToolError> {
        fn one<T: Tool>(
            mem: &mut EpisodeMemory,
            args: &T,
            ctx: ToolContext<'_>,
            embed: impl FnOnce(&[String]) -> Vec<Vec<f32>>,
        ) -> Result<ToolOutput, ToolError> {
            let p = args.prepare(mem, ctx)?;
            let vectors = if p.texts.is_empty() { Vec::new() } else { embed(&p.texts) };
            Ok(T::apply(mem, p.plan, &vectors, ctx))
        }
        match self {
            ToolCall::Search(a) => one(mem, a, ctx, embed),
            ToolCall::Manage(a) => one(mem, a, ctx, embed),
            ToolCall::Delete(a) => one(mem, a, ctx, embed),
            ToolCall::Sample(a) => one(mem, a, ctx, embed),
            ToolCall::Merge(a) => one(mem, a, ctx, embed),
            ToolCall::Split(a) => one(mem, a, ctx, embed),
        }
    }
}

/// What a tool needs from the episode besides its memory.
#[derive(Debug, Clone, Copy)]
pub struct ToolContext<'a> {
    /// The step number this call will take (1-based).
    pub step: u32,
    /// The episode seed.
    pub seed: u64,
    /// Caps.
    pub limits: &'a ToolLimits,
}

/// The two-phase protocol, implemented by each tool's validated arguments in the tool's own file.
pub trait Tool {
    /// What [`Tool::prepare`] decided, carried to [`Tool::apply`].
    type Plan: Send;

    /// Checks the call against `mem` and computes the plan and the texts that need vectors. Changes nothing.
    fn prepare(&self, mem: &EpisodeMemory, ctx: ToolContext<'_>) -> Result<Prepared<Self::Plan>, ToolError>;

    /// Applies a plan with one unit vector per text of [`Prepared::texts`], in order. Cannot fail: every
    /// check ran in [`Tool::prepare`] against the same memory state.
    fn apply(mem: &mut EpisodeMemory, plan: Self::Plan, vectors: &[Vec<f32>], ctx: ToolContext<'_>) -> ToolOutput;
}

/// A checked call: its plan and the texts it needs embedded before [`Tool::apply`].
#[derive(Debug, Clone)]
pub struct Prepared<P> {
    /// What to apply.
    pub plan: P,
    /// Texts to embed, in order.
    pub texts: Vec<String>,
}

/// The result of a tool call: typed data plus the compact text for the LLM.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// Typed result.
    pub kind: OutputKind,
    /// Compact rendering that leads with memory ids.
    pub text: String,
}

/// Typed tool results.
#[derive(Debug, Clone, PartialEq)]
pub enum OutputKind {
    /// Search hits, best first, and the path that answered.
    Search {
        /// (score, record).
        hits: Vec<(f32, MemoryRecord)>,
        /// Exact scan or HNSW.
        path: SearchPath,
    },
    /// A created memory.
    Created(MemoryRecord),
    /// An updated memory.
    Updated(MemoryRecord),
    /// Deleted ids and the count left.
    Deleted {
        /// The ids.
        ids: Vec<MemoryId>,
        /// Memories left.
        remaining: usize,
    },
    /// Sampled memories.
    Sampled(Vec<MemoryRecord>),
    /// A merge.
    Merged {
        /// The new memory.
        memory: MemoryRecord,
        /// The removed sources.
        removed: Vec<MemoryId>,
    },
    /// A split.
    Split {
        /// The new memories.
        parts: Vec<MemoryRecord>,
        /// The removed original.
        removed: MemoryId,
    },
}

impl ToolOutput {
    /// Memory ids the call returned, created or touched (recorded in the trace).
    pub fn result_ids(&self) -> Vec<MemoryId> {
        match &self.kind {
            OutputKind::Search { hits, .. } => hits.iter().map(|h| h.1.id).collect(),
            OutputKind::Created(r) | OutputKind::Updated(r) => vec![r.id],
            OutputKind::Deleted { ids, .. } => ids.clone(),
            OutputKind::Sampled(rs) => rs.iter().map(|r| r.id).collect(),
            OutputKind::Merged { memory, removed } => std::iter::once(memory.id).chain(removed.iter().copied()).collect(),
            OutputKind::Split { parts, removed } => parts.iter().map(|r| r.id).chain(std::iter::once(*removed)).collect(),
        }
    }
}

/// Looks up every id, refusing duplicates and unknown ids (the first problem is reported).
fn require_distinct_live<'m>(mem: &'m EpisodeMemory, field: &str, ids: &[MemoryId]) -> Result<Vec<&'m MemoryRecord>, ToolError> {
    let mut out = Vec::with_capacity(ids.len());
    for (i, id) in ids.iter().enumerate() {
        if ids[..i].contains(id) {
            return Err(ToolError::invalid(field, format!("duplicate id {id}")));
        }
        out.push(mem.get(*id).ok_or(ToolError::MemoryNotFound { field: field.to_string(), id: *id })?);
    }
    Ok(out)
}

/// Refuses a call that would leave more than the cap of memories.
fn require_room(mem: &EpisodeMemory, limits: &ToolLimits, removed: usize, added: usize) -> Result<(), ToolError> {
    let after = mem.len() - removed + added;
    if added > removed && after > limits.max_memories {
        return Err(ToolError::ResourceExhausted {
            message: format!("the episode would hold {after} memories, over the cap of {}", limits.max_memories),
        });
    }
    Ok(())
}

/// Joins id lists for tool texts.
fn join_ids(ids: &[MemoryId]) -> String {
    ids.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests;
