//! The rules every tool's arguments share: per-call caps ([`ToolLimits`]), required and optional text,
//! labels, integer ranges, memory ids, and names of enum values.
//!
//! Each tool's own `Raw*` struct, validated `*Args` and `validate` live in the tool's file: the typed
//! RPCs and `CallTool`'s JSON both fill the `Raw*` struct (unset = `None`) and call its `validate`, so
//! both paths accept and refuse exactly the same calls. Errors name the argument with its OpenAI schema
//! name (`top_k`, `memory_ids`, ...).

use crate::memory::MemoryId;
use crate::text::charset::{self, Shape};

use super::ToolError;

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

/// Results a search may ask for, and memories a sample may draw: (least, most). The tool schemas' `top_k`
/// and `k` bounds.
pub const TOP_K: (i64, i64) = (1, 50);
const MAX_LABEL_CHARS: usize = 200;

/// The value of `all` whose `name` is exactly `s`, else "must be one of <the names>": the one rule by
/// which enum arguments are read from their names.
pub(crate) fn by_name<'a, T: Copy>(all: &[T], name: impl Fn(T) -> &'a str, s: &str) -> Result<T, String> {
    all.iter().copied().find(|&v| name(v) == s).ok_or_else(|| {
        let names: Vec<&str> = all.iter().map(|&v| name(v)).collect();
        format!("must be one of {}", names.join(", "))
    })
}

pub(super) fn text_arg(field: &str, v: Option<String>, limits: &ToolLimits) -> Result<String, ToolError> {
    let v = v.ok_or_else(|| ToolError::invalid(field, "is required"))?;
    checked_text(field, &v, limits.max_text_chars)
}

/// A required text in its stored form: the text rule ([`charset::admit_required`]: refused characters,
/// NFC, trimming, the cap).
pub(super) fn checked_text(field: &str, v: &str, max: usize) -> Result<String, ToolError> {
    charset::admit_required(v, Shape::Text, max).map_err(|why| ToolError::invalid(field, why.to_string()))
}

/// An optional one-line label in its stored form; one that is empty after trimming counts as absent.
pub(super) fn label(field: &str, v: Option<String>) -> Result<Option<String>, ToolError> {
    let Some(v) = v else { return Ok(None) };
    let t = charset::admit(&v, Shape::Label, MAX_LABEL_CHARS).map_err(|why| ToolError::invalid(field, why.to_string()))?;
    Ok((!t.is_empty()).then_some(t))
}

/// `v` (or `default` when unset) within `(lo, hi)`, both included: the range a tool schema states as
/// `minimum`/`maximum`.
pub(super) fn int_in(field: &str, v: Option<i64>, default: i64, (lo, hi): (i64, i64)) -> Result<usize, ToolError> {
    let x = v.unwrap_or(default);
    if x < lo || x > hi {
        return Err(ToolError::invalid(field, format!("must be between {lo} and {hi}, got {x}")));
    }
    Ok(x as usize)
}

pub(super) fn parse_id(field: &str, s: &str) -> Result<MemoryId, ToolError> {
    s.parse::<MemoryId>().map_err(|e| ToolError::invalid(field, e.to_string()))
}

/// Ids as the schema writes them (`m0042`), for canonical arguments.
pub(super) fn id_strings(ids: &[MemoryId]) -> Vec<String> {
    ids.iter().map(ToString::to_string).collect()
}

pub(super) fn parse_ids(field: &str, ids: &[String], lo: usize, hi: usize) -> Result<Vec<MemoryId>, ToolError> {
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
