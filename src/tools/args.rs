//! Validated tool arguments and the raw forms they are built from.
//!
//! The typed RPCs and `CallTool`'s JSON both fill a `Raw*` struct (unset = `None`) and call its
//! `validate`, so both paths accept and refuse exactly the same calls. Errors name the argument with
//! its OpenAI schema name (`top_k`, `memory_ids`, ...).

use crate::memory::{Filter, MemoryId, MemoryType};
use crate::text::charset;

use super::{MergeStrategy, SplitCriteria, ToolError};

/// Per-call caps.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolLimits {
    /// Longest memory text, query or part, in characters.
    pub max_text_chars: usize,
    /// Most ids one delete may name.
    pub max_ids_per_call: usize,
    /// Most memories an episode may hold.
    pub max_memories: usize,
}

impl Default for ToolLimits {
    fn default() -> Self {
        ToolLimits { max_text_chars: 2_000, max_ids_per_call: 50, max_memories: 5_000 }
    }
}

/// Most results a search may ask for, and most memories a sample may draw.
pub const MAX_TOP_K: i64 = 50;
/// Default search size.
pub const DEFAULT_TOP_K: i64 = 5;
/// Default sample size.
pub const DEFAULT_SAMPLE_K: i64 = 3;
/// Merge takes this many memories at least / at most.
pub const MERGE_IDS: (usize, usize) = (2, 5);
/// Split's max_parts range and default.
pub const SPLIT_PARTS: (i64, i64, i64) = (2, 5, 3);
const MAX_LABEL_CHARS: usize = 200;

/// manage_memory's operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ManageOpKind {
    /// create.
    Create,
    /// update.
    Update,
}

/// sample_memory's strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleStrategy {
    /// Uniform, seeded.
    Random,
    /// Farthest-point in embedding space.
    Diverse,
    /// Newest first.
    Recent,
}

impl SampleStrategy {
    /// Schema name.
    pub fn as_str(self) -> &'static str {
        match self {
            SampleStrategy::Random => "random",
            SampleStrategy::Diverse => "diverse",
            SampleStrategy::Recent => "recent",
        }
    }
}

/// The value of `all` whose `name` is exactly `s`, else "must be one of <the names>": the one rule by
/// which enum arguments are read from their names.
pub(crate) fn by_name<'a, T: Copy>(all: &[T], name: impl Fn(T) -> &'a str, s: &str) -> Result<T, String> {
    all.iter().copied().find(|&v| name(v) == s).ok_or_else(|| {
        let names: Vec<&str> = all.iter().map(|&v| name(v)).collect();
        format!("must be one of {}", names.join(", "))
    })
}

fn text_arg(field: &str, v: Option<String>, limits: &ToolLimits) -> Result<String, ToolError> {
    let v = v.ok_or_else(|| ToolError::invalid(field, "is required"))?;
    checked_text(field, &v, limits.max_text_chars)
}

fn checked_text(field: &str, v: &str, max: usize) -> Result<String, ToolError> {
    let t = v.trim();
    if t.is_empty() {
        return Err(ToolError::invalid(field, "must not be empty or only whitespace"));
    }
    let n = t.chars().count();
    if n > max {
        return Err(ToolError::invalid(field, format!("is {n} characters long, over the limit of {max}")));
    }
    if let Some(why) = charset::check(t, charset::refused_in_text) {
        return Err(ToolError::invalid(field, why));
    }
    Ok(t.to_string())
}

fn label(field: &str, v: Option<String>) -> Result<Option<String>, ToolError> {
    match v.as_deref().map(str::trim) {
        None | Some("") => Ok(None),
        Some(t) => match charset::check(t, charset::refused_in_label) {
            Some(why) => Err(ToolError::invalid(field, why)),
            None => checked_text(field, t, MAX_LABEL_CHARS).map(Some),
        },
    }
}

fn int_in(field: &str, v: Option<i64>, default: i64, lo: i64, hi: i64) -> Result<usize, ToolError> {
    let x = v.unwrap_or(default);
    if x < lo || x > hi {
        return Err(ToolError::invalid(field, format!("must be between {lo} and {hi}, got {x}")));
    }
    Ok(x as usize)
}

fn parse_id(field: &str, s: &str) -> Result<MemoryId, ToolError> {
    s.parse::<MemoryId>().map_err(|e| ToolError::invalid(field, e.to_string()))
}

fn parse_ids(field: &str, ids: &[String], lo: usize, hi: usize) -> Result<Vec<MemoryId>, ToolError> {
    if ids.len() < lo || ids.len() > hi {
        return Err(ToolError::invalid(field, format!("must list {lo} to {hi} ids, got {}", ids.len())));
    }
    let mut out = Vec::with_capacity(ids.len());
    for s in ids {
        let id = parse_id(field, s)?;
        if out.contains(&id) {
            return Err(ToolError::invalid(field, format!("duplicate id {id}")));
        }
        out.push(id);
    }
    Ok(out)
}

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
        let top_k = int_in("top_k", self.top_k, DEFAULT_TOP_K, 1, MAX_TOP_K)?;
        let threshold = match self.threshold {
            None => None,
            Some(t) if t.is_finite() && (0.0..=1.0).contains(&t) => Some(t as f32),
            Some(t) => return Err(ToolError::invalid("threshold", format!("must be a number between 0 and 1, got {t:?}"))),
        };
        let speaker = label("speaker", self.speaker)?.map(|s| s.to_lowercase());
        let session = match self.session {
            None => None,
            Some(s) if (0..=u32::MAX as i64).contains(&s) => Some(s as u32),
            Some(s) => return Err(ToolError::invalid("session", format!("must be a non-negative session number, got {s}"))),
        };
        Ok(SearchArgs { query, top_k, threshold, filter: Filter { memory_type: self.memory_type, speaker, session } })
    }
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
            (None, Some(list)) => parse_ids("memory_ids", &list, 1, limits.max_ids_per_call)?,
            (None, None) => return Err(ToolError::invalid("memory_id", "is required (or memory_ids)")),
        };
        Ok(DeleteArgs { ids, reason: label("reason", self.reason)? })
    }
}

/// sample_memory arguments, unvalidated.
#[derive(Debug, Clone, Default)]
pub struct RawSample {
    /// k.
    pub k: Option<i64>,
    /// strategy.
    pub strategy: Option<SampleStrategy>,
    /// memory_type.
    pub memory_type: Option<MemoryType>,
}

/// sample_memory arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleArgs {
    /// How many (1..=50).
    pub k: usize,
    /// Strategy.
    pub strategy: SampleStrategy,
    /// Type filter.
    pub memory_type: Option<MemoryType>,
}

impl RawSample {
    /// Validates.
    pub fn validate(self) -> Result<SampleArgs, ToolError> {
        Ok(SampleArgs {
            k: int_in("k", self.k, DEFAULT_SAMPLE_K, 1, MAX_TOP_K)?,
            strategy: self.strategy.unwrap_or(SampleStrategy::Random),
            memory_type: self.memory_type,
        })
    }
}

/// merge_memory arguments, unvalidated.
#[derive(Debug, Clone, Default)]
pub struct RawMerge {
    /// memory_ids.
    pub memory_ids: Option<Vec<String>>,
    /// strategy.
    pub strategy: Option<MergeStrategy>,
    /// content.
    pub content: Option<String>,
}

/// merge_memory arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct MergeArgs {
    /// 2..=5 distinct ids.
    pub ids: Vec<MemoryId>,
    /// Strategy.
    pub strategy: MergeStrategy,
    /// Text overriding the strategy's.
    pub content: Option<String>,
}

impl RawMerge {
    /// Validates.
    pub fn validate(self, limits: &ToolLimits) -> Result<MergeArgs, ToolError> {
        let list = self.memory_ids.ok_or_else(|| ToolError::invalid("memory_ids", "is required"))?;
        let ids = parse_ids("memory_ids", &list, MERGE_IDS.0, MERGE_IDS.1)?;
        let strategy =
            self.strategy.ok_or_else(|| ToolError::invalid("strategy", "is required (summarize, concatenate or extract_common)"))?;
        let content = match self.content {
            None => None,
            Some(c) => Some(checked_text("content", &c, limits.max_text_chars)?),
        };
        Ok(MergeArgs { ids, strategy, content })
    }
}

/// split_memory arguments, unvalidated.
#[derive(Debug, Clone, Default)]
pub struct RawSplit {
    /// memory_id.
    pub memory_id: Option<String>,
    /// split_criteria.
    pub split_criteria: Option<SplitCriteria>,
    /// max_parts.
    pub max_parts: Option<i64>,
    /// parts.
    pub parts: Option<Vec<String>>,
}

/// split_memory arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct SplitArgs {
    /// The memory to split.
    pub id: MemoryId,
    /// Criterion.
    pub criteria: SplitCriteria,
    /// Most parts (2..=5).
    pub max_parts: usize,
    /// Explicit parts.
    pub parts: Option<Vec<String>>,
}

impl RawSplit {
    /// Validates.
    pub fn validate(self, limits: &ToolLimits) -> Result<SplitArgs, ToolError> {
        let id = match self.memory_id.as_deref().map(str::trim) {
            None | Some("") => return Err(ToolError::invalid("memory_id", "is required")),
            Some(s) => parse_id("memory_id", s)?,
        };
        let criteria =
            self.split_criteria.ok_or_else(|| ToolError::invalid("split_criteria", "is required (temporal, thematic or speaker)"))?;
        let max_parts = int_in("max_parts", self.max_parts, SPLIT_PARTS.2, SPLIT_PARTS.0, SPLIT_PARTS.1)?;
        let parts = match self.parts {
            None => None,
            Some(ps) => {
                if ps.len() < 2 || ps.len() > max_parts {
                    return Err(ToolError::invalid("parts", format!("must list 2 to {max_parts} texts, got {}", ps.len())));
                }
                let mut out = Vec::with_capacity(ps.len());
                for p in &ps {
                    out.push(checked_text("parts", p, limits.max_text_chars)?);
                }
                Some(out)
            }
        };
        Ok(SplitArgs { id, criteria, max_parts, parts })
    }
}
