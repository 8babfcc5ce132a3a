//! manage_memory: create a memory (a new id) or update one (new text, re-embedded, provenance kept).
//! Update of an unknown id is NotFound — never a silent upsert, as MemUpdate's was.

use serde_json::{json, Value};

use crate::memory::{EpisodeMemory, MemoryId, MemoryRecord, MemoryType};

use super::args::*;
use super::llm_calls::{function, prop, prop_enum, Args, TYPES};
use super::{require_room, OutputKind, Prepared, Tool, ToolContext, ToolError, ToolOutput};

// ---- arguments: what the typed RPC and the LLM's JSON are validated into --------------------

/// manage_memory's operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ManageOpKind {
    /// create.
    Create,
    /// update.
    Update,
}

/// manage_memory arguments, unvalidated.
#[derive(Debug, Clone, Default)]
pub struct RawManage {
    /// operation.
    pub operation: Option<ManageOpKind>,
    /// content.
    pub content: Option<String>,
    /// memory_id.
    pub memory_id: Option<String>,
    /// memory_type.
    pub memory_type: Option<MemoryType>,
    /// speaker.
    pub speaker: Option<String>,
    /// source.
    pub source: Option<String>,
}

/// What manage_memory does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ManageOp {
    /// Add a memory.
    Create,
    /// Rewrite this memory.
    Update(MemoryId),
}

/// manage_memory arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct ManageArgs {
    /// create or update.
    pub op: ManageOp,
    /// New text.
    pub content: String,
    /// Type (create default: semantic; update: keep).
    pub memory_type: Option<MemoryType>,
    /// Speaker (update: keep when unset).
    pub speaker: Option<String>,
    /// Source label (create default: "agent"; update: keep when unset).
    pub source: Option<String>,
}

impl RawManage {
    /// Validates.
    pub fn validate(self, limits: &ToolLimits) -> Result<ManageArgs, ToolError> {
        let kind = self.operation.ok_or_else(|| ToolError::invalid("operation", "is required (create or update)"))?;
        let id = self.memory_id.as_deref().map(str::trim).filter(|s| !s.is_empty());
        let op = match (kind, id) {
            (ManageOpKind::Create, None) => ManageOp::Create,
            (ManageOpKind::Create, Some(_)) => return Err(ToolError::invalid("memory_id", "is only for update; create assigns a new id")),
            (ManageOpKind::Update, Some(s)) => ManageOp::Update(parse_id("memory_id", s)?),
            (ManageOpKind::Update, None) => return Err(ToolError::invalid("memory_id", "is required for update")),
        };
        let content = text_arg("content", self.content, limits)?;
        Ok(ManageArgs {
            op,
            content,
            memory_type: self.memory_type,
            speaker: label("speaker", self.speaker)?,
            source: label("source", self.source)?,
        })
    }
}

/// The OpenAI function schema the LLM sees.
pub(super) fn schema() -> Value {
    function(
        "manage_memory",
        "Create a memory, or update the text of one (its id and evidence stay).",
        json!({
            "operation": prop_enum("create or update.", &["create", "update"]),
            "content": prop("string", "The memory text."),
            "memory_id": prop("string", "The memory to update, as a search or sample result showed it."),
            "memory_type": prop_enum("Type (create: default semantic).", &TYPES),
            "speaker": prop("string", "Who it is about."),
            "source": prop("string", "Where it comes from."),
        }),
        &["operation", "content"],
    )
}

/// The arguments from an LLM's JSON, validated as on the typed path.
pub(super) fn from_json(a: &mut Args, limits: &ToolLimits) -> Result<ManageArgs, ToolError> {
    RawManage {
        operation: a.choice("operation", &[("create", ManageOpKind::Create), ("update", ManageOpKind::Update)])?,
        content: a.string("content")?,
        memory_id: a.string("memory_id")?,
        memory_type: a.memory_type("memory_type")?,
        speaker: a.string("speaker")?,
        source: a.string("source")?,
    }
    .validate(limits)
}

/// Canonical JSON of the arguments (for the trace).
pub(super) fn canonical(a: &ManageArgs) -> Value {
    let (op, id) = match a.op {
        ManageOp::Create => ("create", None),
        ManageOp::Update(id) => ("update", Some(id.to_string())),
    };
    json!({"operation": op, "content": a.content, "memory_id": id,
            "memory_type": a.memory_type.map(MemoryType::as_str), "speaker": a.speaker, "source": a.source})
}

/// A checked create or update: the record to write (a create's id is allocated on apply).
#[derive(Debug, Clone)]
pub enum ManagePlan {
    /// A new memory.
    Create(MemoryRecord),
    /// The replacement of a live memory.
    Update(MemoryRecord),
}

impl Tool for ManageArgs {
    type Plan = ManagePlan;

    fn prepare(&self, mem: &EpisodeMemory, ctx: ToolContext<'_>) -> Result<Prepared<ManagePlan>, ToolError> {
        let a = self;
        let plan = match a.op {
            ManageOp::Create => {
                require_room(mem, ctx.limits, 0, 1)?;
                ManagePlan::Create(MemoryRecord {
                    id: mem.peek_next_id(),
                    text: a.content.clone(),
                    memory_type: a.memory_type.unwrap_or(MemoryType::Semantic),
                    speaker: a.speaker.clone(),
                    session: None,
                    session_date: None,
                    evidence: Vec::new(),
                    source: a.source.clone().unwrap_or_else(|| "agent".to_string()),
                    created_step: ctx.step,
                    authored: true,
                })
            }
            ManageOp::Update(id) => {
                let old = mem.get(id).ok_or(ToolError::MemoryNotFound { field: "memory_id".into(), id })?;
                ManagePlan::Update(MemoryRecord {
                    id,
                    text: a.content.clone(),
                    memory_type: a.memory_type.unwrap_or(old.memory_type),
                    speaker: a.speaker.clone().or_else(|| old.speaker.clone()),
                    session: old.session,
                    session_date: old.session_date.clone(),
                    evidence: old.evidence.clone(),
                    source: a.source.clone().unwrap_or_else(|| old.source.clone()),
                    created_step: ctx.step,
                    authored: true,
                })
            }
        };
        Ok(Prepared { texts: vec![a.content.clone()], plan })
    }

    fn apply(mem: &mut EpisodeMemory, plan: ManagePlan, vectors: &[Vec<f32>], _ctx: ToolContext<'_>) -> ToolOutput {
        match plan {
            ManagePlan::Create(mut r) => {
                r.id = mem.allocate_id();
                let text = format!("created {}", r.render_line(None));
                mem.insert(r.clone(), &vectors[0]);
                ToolOutput { kind: OutputKind::Created(r), text }
            }
            ManagePlan::Update(r) => {
                let text = format!("updated {}", r.render_line(None));
                let replaced = mem.replace(r.clone(), &vectors[0]);
                debug_assert!(replaced, "prepare checked the id");
                ToolOutput { kind: OutputKind::Updated(r), text }
            }
        }
    }
}
