//! search_memory: ranked semantic search with scores, optional threshold and metadata filters.
//! Results always show memory ids (MemUpdate's search hid them, which made update and delete unusable).

use serde_json::{json, Value};

use crate::memory::{EpisodeMemory, Filter, MemoryType};

use super::args::*;
use super::llm_calls::{function, prop, prop_enum, prop_int, prop_number, Args, TYPES};
use super::{OutputKind, Prepared, Tool, ToolContext, ToolError, ToolOutput};

// ---- arguments: what the typed RPC and the LLM's JSON are validated into --------------------

/// search_memory arguments, unvalidated.
#[derive(Debug, Clone, Default)]
pub struct RawSearch {
    /// query.
    pub query: Option<String>,
    /// top_k.
    pub top_k: Option<i64>,
    /// threshold.
    pub threshold: Option<f64>,
    /// memory_type.
    pub memory_type: Option<MemoryType>,
    /// speaker.
    pub speaker: Option<String>,
    /// session.
    pub session: Option<i64>,
}

/// search_memory arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchArgs {
    /// The query text.
    pub query: String,
    /// Results wanted (1..=50).
    pub top_k: usize,
    /// Minimum score in [0, 1].
    pub threshold: Option<f32>,
    /// Metadata filter.
    pub filter: Filter,
}

impl RawSearch {
    /// Validates.
    pub fn validate(self, limits: &ToolLimits) -> Result<SearchArgs, ToolError> {
        let query = text_arg("query", self.query, limits)?;
        let top_k = int_in("top_k", self.top_k, DEFAULT_TOP_K, TOP_K)?;
        let threshold = match self.threshold {
            None => None,
            Some(t) if t.is_finite() && (THRESHOLD.0..=THRESHOLD.1).contains(&t) => Some(t as f32),
            Some(t) => {
                let (lo, hi) = THRESHOLD;
                return Err(ToolError::invalid("threshold", format!("must be a number between {lo} and {hi}, got {t:?}")));
            }
        };
        let speaker = label("speaker", self.speaker)?.map(|s| s.to_lowercase());
        let session = match self.session {
            None => None,
            Some(s) if (SESSION.0..=SESSION.1).contains(&s) => Some(s as u32),
            Some(s) => return Err(ToolError::invalid("session", format!("must be a non-negative session number, got {s}"))),
        };
        Ok(SearchArgs { query, top_k, threshold, filter: Filter { memory_type: self.memory_type, speaker, session, source: None } })
    }
}

/// Default search size.
pub const DEFAULT_TOP_K: i64 = 5;

/// A search's `threshold`: (least, most), a similarity.
pub const THRESHOLD: (f64, f64) = (0.0, 1.0);

/// A search's `session` filter: (least, most), a session number (`u32`).
pub const SESSION: (i64, i64) = (0, u32::MAX as i64);

/// The OpenAI function schema the LLM sees.
pub(super) fn schema() -> Value {
    function(
        "search_memory",
        "Search memories by meaning. Returns lines [id score] text (evidence), best first. Filters are optional.",
        json!({
            "query": prop("string", "What to look for."),
            "top_k": prop_int("Results, 1-50 (default 5).", TOP_K),
            "threshold": prop_number("Minimum similarity, 0-1.", THRESHOLD),
            "memory_type": prop_enum("Only this type.", &TYPES),
            "speaker": prop("string", "Only this speaker."),
            "session": prop_int("Only this session number.", SESSION),
        }),
        &["query"],
    )
}

/// The arguments from an LLM's JSON, validated as on the typed path.
pub(super) fn from_json(a: &mut Args, limits: &ToolLimits) -> Result<SearchArgs, ToolError> {
    RawSearch {
        query: a.string("query")?,
        top_k: a.int("top_k")?,
        threshold: a.number("threshold")?,
        memory_type: a.memory_type("memory_type")?,
        speaker: a.string("speaker")?,
        session: a.int("session")?,
    }
    .validate(limits)
}

/// Canonical JSON of the arguments (for the trace).
pub(super) fn canonical(a: &SearchArgs) -> Value {
    json!({
        "query": a.query, "top_k": a.top_k, "threshold": a.threshold,
        "memory_type": a.filter.memory_type.map(MemoryType::as_str), "speaker": a.filter.speaker, "session": a.filter.session,
    })
}

impl Tool for SearchArgs {
    type Plan = SearchArgs;

    fn prepare(&self, _mem: &EpisodeMemory, _ctx: ToolContext<'_>) -> Result<Prepared<SearchArgs>, ToolError> {
        Ok(Prepared { texts: vec![self.query.clone()], plan: self.clone() })
    }

    fn apply(mem: &mut EpisodeMemory, a: SearchArgs, vectors: &[Vec<f32>], _ctx: ToolContext<'_>) -> ToolOutput {
        search(mem, &a, &vectors[0])
    }
}

/// How a search's result begins when nothing matched.
const NO_MATCH: &str = "no memories matched";

/// Whether a search's result text says nothing matched (the rollout report counts these searches as empty).
pub fn matched_nothing(result: &str) -> bool {
    result.starts_with(NO_MATCH)
}

fn search(mem: &EpisodeMemory, a: &SearchArgs, query: &[f32]) -> ToolOutput {
    let (hits, path) = mem.search_text(query, &a.query, a.top_k, &a.filter, a.threshold);
    let text = if hits.is_empty() {
        let why = match a.threshold {
            Some(t) => format!(" at or above {t:.2}"),
            None => String::new(),
        };
        format!("{NO_MATCH}{why} ({} in memory)", mem.len())
    } else {
        hits.iter().map(|h| h.record.render_line(Some(h.score))).collect::<Vec<_>>().join("\n")
    };
    let hits = hits.into_iter().map(|h| (h.score, h.record.clone())).collect();
    ToolOutput { kind: OutputKind::Search { hits, path }, text }
}
