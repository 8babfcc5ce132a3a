//! Edit operations on an experience library, parsed leniently from an LLM's reply.
//!
//! In Training-Free GRPO an experience library holds short natural-language experiences with ids
//! `G0`, `G1`, …; after each group of rollouts an LLM proposes edits to it as JSON operations. This
//! module turns such a reply into normalised [`Op`]s, one result per operation, so that one bad
//! operation never discards the good ones beside it.
//!
//! Two vocabularies are in use and both are accepted, also mixed within one batch:
//!
//! - the Training-Free GRPO design's: `{"option": "add" | "modify" | "delete" | "merge" | "keep", "experience": text,
//!   "modified_from": "G17", "delete_id": "G5", "merged_from": ["G1", "G3"]}`;
//! - upstream youtu-agent's: `{"operation": "ADD" | "UPDATE" | "DELETE" | "NONE", "id": "G3",
//!   "content": text}`. A `DELETE` needs no content (upstream silently dropped a `DELETE` whose
//!   content was null; here it deletes).
//!
//! Both may carry `"confidence"` (a number in [0, 1]) and `"domain"` (a string of 1 to 64
//! characters) on add, modify and merge.
//!
//! Leniency rules:
//!
//! - operation names and ids are trimmed and case-insensitive (`" Update "`, `"g12"`); an id is
//!   `"G12"`, `"12"` or the number `12`;
//! - aliases: `update` = `modify`, `none` = `keep`, `remove` = `delete`; the text is `experience` or
//!   `content`; the target of a modify is `modified_from` or `id`, of a delete `delete_id` or `id`;
//!   the sources of a merge are `merged_from` or `ids`. Both spellings at once must agree;
//! - a missing `option`/`operation` means add when the operation has a text (upstream's rule);
//! - a `null` value counts as absent; unknown keys (`"reason"`, `"rationale"`, …) and keys the
//!   operation does not use (the text of a delete, anything on a keep) are ignored and reported in
//!   [`Parsed::ignored_keys`] (unless null); key names themselves are matched exactly;
//! - the batch is a JSON array of operations, an object with an `"operations"` (or `"ops"`,
//!   `"updates"`) array, or a single operation object; when the whole reply is not JSON the first
//!   fenced block (```` ```json ```` or ```` ``` ````) that parses is used, else the first
//!   bracket-balanced `[…]` that parses, else the first balanced `{…}` that parses (an object that
//!   encloses the array wins, so a single operation in prose is not mistaken for its `merged_from`).
//!
//! Texts and domains pass the text rule ([`crate::text::charset`]: refused characters, NFC, trimming;
//! non-empty; texts at most [`OpLimits::max_text_chars`] characters, domains one line of at most 64); a
//! repeated key inside one object refuses the batch (strict JSON); a merge names 2 to [`OpLimits::max_merge_ids`]
//! distinct ids; a batch holds at most [`OpLimits::max_ops`] operations. Every error names the
//! operation's index and the field, and quotes at most a short prefix of a bad value. Parsing never
//! panics and its work and memory stay within a small multiple of the reply's size.

use crate::util::json::{kind_of, strict_value, StrictError};
use std::collections::HashSet;
use std::fmt;

use serde_json::{Map, Value};

use crate::text::charset::{self, Shape};
use crate::text::reply::balanced_end;
use crate::util::excerpt::{cut, quoted};

/// The normalised operations.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// A new experience.
    Add {
        /// The experience, trimmed.
        text: String,
        /// How sure the proposer is, in [0, 1].
        confidence: Option<f64>,
        /// The domain the experience applies to.
        domain: Option<String>,
    },
    /// Replace an experience's text (and its confidence and domain).
    Modify {
        /// The experience replaced (`G{id}`).
        id: u64,
        /// The new text, trimmed.
        text: String,
        /// How sure the proposer is, in [0, 1].
        confidence: Option<f64>,
        /// The domain the experience applies to.
        domain: Option<String>,
    },
    /// Remove an experience.
    Delete {
        /// The experience removed (`G{id}`).
        id: u64,
    },
    /// Replace >= 2 experiences by one new one.
    Merge {
        /// The experiences replaced: at least two, distinct, in the order given.
        ids: Vec<u64>,
        /// The merged text, trimmed.
        text: String,
        /// How sure the proposer is, in [0, 1].
        confidence: Option<f64>,
        /// The domain the experience applies to.
        domain: Option<String>,
    },
    /// Do nothing.
    Keep,
}

impl Op {
    /// The operation's name in the Training-Free GRPO design's vocabulary: "add", "modify", "delete", "merge" or "keep".
    pub fn kind(&self) -> &'static str {
        match self {
            Op::Add { .. } => "add",
            Op::Modify { .. } => "modify",
            Op::Delete { .. } => "delete",
            Op::Merge { .. } => "merge",
            Op::Keep => "keep",
        }
    }
}

/// One parsed operation and what was ignored in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    /// The operation.
    pub op: Op,
    /// Keys of the operation object with a non-null value that were not used (unknown keys, or keys this kind ignores), in key order.
    pub ignored_keys: Vec<String>,
}

/// Why one operation is unusable: its index in the batch, the field, and what is wrong.
///
/// Displays as `operations[3].content: must not be empty`, or `operations[3]: must be a JSON object,
/// got a string` when the field is empty (the operation as a whole is wrong).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct OpError {
    /// The operation's index in the batch.
    pub index: usize,
    /// The field at fault (`"merged_from[1]"` for one element), or empty for the whole operation.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for OpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "operations[{}]: {}", self.index, self.message)
        } else {
            write!(f, "operations[{}].{}: {}", self.index, self.field, self.message)
        }
    }
}

/// Why the batch as a whole is unusable (not JSON anywhere, not an array/object, too many ops).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BatchError {
    /// No JSON value could be found in the reply.
    #[error("operations: {message}")]
    NotJson {
        /// What was looked for, a quoted prefix of the reply and the parser's complaint.
        message: String,
    },
    /// The JSON found is neither an array of operations, a wrapper object nor one operation.
    #[error("operations: must be an array of operations, an object with an \"operations\" array, or one operation, got {found}")]
    NotABatch {
        /// The kind of JSON value found: "a string", "a number", ….
        found: &'static str,
    },
    /// A JSON array of operations that never closes (an LLM reply stopped by its token limit): nothing of it
    /// is applied as a batch. [`parse_leading`] reads its complete leading operations for callers that may
    /// use part of a reply.
    #[error("operations: the JSON array is cut off after {complete} complete operation(s) (a reply stopped by its token limit?)")]
    Truncated {
        /// Complete operation objects before the cut.
        complete: usize,
    },
    /// The JSON found repeats a key inside one object: which of the two values was meant is unknown, so
    /// the batch is refused (strict JSON, [`crate::util::json::strict_value`]).
    #[error("operations: key {} appears twice in one object (duplicate JSON keys are refused)", quoted(key))]
    DuplicateKey {
        /// The repeated key.
        key: String,
    },
    /// More operations than [`OpLimits::max_ops`].
    #[error("operations: {count} operations in one batch, at most {max} allowed")]
    TooMany {
        /// Operations in the batch.
        count: usize,
        /// The limit.
        max: usize,
    },
}

/// Limits checked while parsing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpLimits {
    /// Operations in one batch at most (1000).
    pub max_ops: usize,
    /// Characters (not bytes) of an experience's text at most, after trimming (4000).
    pub max_text_chars: usize,
    /// Ids one merge may name at most (32).
    pub max_merge_ids: usize,
}

impl Default for OpLimits {
    fn default() -> Self {
        OpLimits { max_ops: 1000, max_text_chars: 4000, max_merge_ids: 32 }
    }
}

/// Candidate starts tried per kind of delimiter when looking for JSON inside prose (bounds the work to
/// a small multiple of the input size).
const MAX_TRIES: usize = 16;
/// Characters of a domain at most.
/// Most characters of a domain.
pub const MAX_DOMAIN_CHARS: usize = 64;
/// The accepted operation names, for error messages.
const KINDS: &str = "add, modify (update), delete (remove), merge, keep (none)";

/// Parses a batch: the batch-level error, or one result per operation in order (a bad op does not stop the others).
pub fn parse_batch(text: &str, limits: &OpLimits) -> Result<Vec<Result<Parsed, OpError>>, BatchError> {
    let ops = operations_of(find_json(text)?)?;
    if ops.len() > limits.max_ops {
        return Err(BatchError::TooMany { count: ops.len(), max: limits.max_ops });
    }
    Ok(ops.iter().enumerate().map(|(index, value)| parse_op(index, value, limits)).collect())
}

/// Parses the complete leading operations of a batch whose array is cut off ([`BatchError::Truncated`]);
/// `None` when the text holds no such array.
pub fn parse_leading(text: &str, limits: &OpLimits) -> Option<Vec<Result<Parsed, OpError>>> {
    let items = unterminated_array(text)?;
    Some(items.iter().take(limits.max_ops).enumerate().map(|(index, value)| parse_op(index, value, limits)).collect())
}

/// An array of objects that opens (at the first `[`, right before a `{`) and never closes: its complete
/// leading objects. A reply cut by its token limit looks like this; taking the first object inside it for
/// the whole batch would apply part of a batch without saying so.
fn unterminated_array(text: &str) -> Option<Vec<Value>> {
    let bytes = text.as_bytes();
    let start = bytes.iter().position(|&b| b == b'[')?;
    let next = start + 1 + bytes.get(start + 1..)?.iter().position(|b| !b.is_ascii_whitespace())?;
    if bytes[next] != b'{' || balanced_end(text, start, b'[', b']').is_some() {
        return None;
    }
    let mut items = Vec::new();
    let mut i = next;
    while let Some(end) = balanced_end(text, i, b'{', b'}') {
        match text.get(i..end).and_then(candidate) {
            Some(Ok(value)) => items.push(value),
            Some(Err(_)) | None => break,
        }
        match bytes.get(end..).and_then(|rest| rest.iter().position(|b| !(b.is_ascii_whitespace() || *b == b','))) {
            Some(skip) if bytes[end + skip] == b'{' => i = end + skip,
            Some(_) | None => break,
        }
    }
    Some(items)
}

/// The JSON value of an LLM reply: the whole reply, else the first fenced block, `[…]` or `{…}` that parses.
fn find_json(text: &str) -> Result<Value, BatchError> {
    let whole = match strict_value(text) {
        Ok(value) => return Ok(value),
        Err(StrictError::Duplicate(key)) => return Err(BatchError::DuplicateKey { key }),
        Err(StrictError::Syntax(e)) => e,
    };
    if let Some(value) = fenced(text) {
        return value;
    }
    if let Some(items) = unterminated_array(text) {
        return Err(BatchError::Truncated { complete: items.len() });
    }
    match (balanced(text, b'[', b']'), balanced(text, b'{', b'}')) {
        // An object around the array (one operation with a `merged_from`, a wrapper) is the batch.
        (Some((a_start, a_end, array)), Some((o_start, o_end, object))) => {
            if o_start < a_start && a_end <= o_end {
                object
            } else {
                array
            }
        }
        (Some((_, _, array)), None) => array,
        (None, Some((_, _, object))) => object,
        (None, None) if text.trim().is_empty() => Err(BatchError::NotJson { message: "the reply is empty".to_string() }),
        (None, None) => {
            Err(BatchError::NotJson { message: format!("no JSON array or object found in {}: {}", quoted(text), cut(&whole.to_string())) })
        }
    }
}

/// A candidate span read strictly: `None` when it is not JSON, an error when it repeats a key.
fn candidate(text: &str) -> Option<Result<Value, BatchError>> {
    match strict_value(text) {
        Ok(value) => Some(Ok(value)),
        Err(StrictError::Duplicate(key)) => Some(Err(BatchError::DuplicateKey { key })),
        Err(StrictError::Syntax(_)) => None,
    }
}

/// The first closed fenced block ([`crate::text::reply::fences`]) whose content parses as an array or object.
fn fenced(text: &str) -> Option<Result<Value, BatchError>> {
    for fence in crate::text::reply::fences(text).into_iter().filter(|f| f.closed).take(MAX_TRIES) {
        match candidate(fence.body) {
            Some(Ok(value @ (Value::Array(_) | Value::Object(_)))) => return Some(Ok(value)),
            Some(Err(e)) => return Some(Err(e)),
            Some(Ok(Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_))) | None => {}
        }
    }
    None
}

/// The first `open`…`close` span (balanced, skipping JSON strings) that parses: its byte range and value.
fn balanced(text: &str, open: u8, close: u8) -> Option<(usize, usize, Result<Value, BatchError>)> {
    let bytes = text.as_bytes();
    let mut from = 0;
    for _ in 0..MAX_TRIES {
        let start = from + bytes.get(from..)?.iter().position(|&b| b == open)?;
        from = start + 1;
        let Some(end) = balanced_end(text, start, open, close) else { continue };
        if let Some(value) = text.get(start..end).and_then(candidate) {
            return Some((start, end, value));
        }
    }
    None
}

/// The operation objects of a batch value.
fn operations_of(value: Value) -> Result<Vec<Value>, BatchError> {
    let inner = match value {
        Value::Object(mut map) => match ["operations", "ops", "updates"].into_iter().find_map(|key| map.remove(key)) {
            Some(Value::Object(op)) => return Ok(vec![Value::Object(op)]),
            Some(inner) => inner,
            None => return Ok(vec![Value::Object(map)]),
        },
        batch @ (Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Array(_)) => batch,
    };
    match inner {
        Value::Array(ops) => Ok(ops),
        ref other @ (Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Object(_)) => {
            Err(BatchError::NotABatch { found: kind_of(other) })
        }
    }
}

/// An operation object being read: remembers which keys were used.
struct Fields<'a> {
    index: usize,
    map: &'a Map<String, Value>,
    used: Vec<&'static str>,
}

impl<'a> Fields<'a> {
    /// The value at `key` unless absent or null; marks the key used.
    fn get(&mut self, key: &'static str) -> Option<&'a Value> {
        self.used.push(key);
        self.map.get(key).filter(|v| !v.is_null())
    }

    fn has(&self, key: &str) -> bool {
        self.map.get(key).is_some_and(|v| !v.is_null())
    }

    fn err(&self, field: &str, message: impl Into<String>) -> OpError {
        OpError { index: self.index, field: field.to_string(), message: message.into() }
    }

    /// The kind named at `key`.
    fn kind(&self, key: &str, value: &Value) -> Result<&'static str, OpError> {
        let Value::String(name) = value else {
            return Err(self.err(key, format!("must be a string, one of {KINDS}, got {}", kind_of(value))));
        };
        let trimmed = name.trim();
        Ok(match (trimmed.len() <= 8).then(|| trimmed.to_ascii_lowercase()).as_deref() {
            Some("add") => "add",
            Some("modify" | "update") => "modify",
            Some("delete" | "remove") => "delete",
            Some("merge") => "merge",
            Some("keep" | "none") => "keep",
            Some(_) | None => return Err(self.err(key, format!("unknown operation {}, expected one of {KINDS}", quoted(name)))),
        })
    }

    /// The id at `key`.
    fn id(&self, key: &str, value: &Value) -> Result<u64, OpError> {
        parse_id(value).map_err(|m| self.err(key, m))
    }

    /// The target of a modify or delete: `primary` or `id`, which must agree when both are given.
    fn target(&mut self, primary: &'static str, upstream: bool, verb: &str) -> Result<u64, OpError> {
        match (self.get(primary), self.get("id")) {
            (Some(a), Some(b)) => {
                let (a, b) = (self.id(primary, a)?, self.id("id", b)?);
                if a == b {
                    Ok(a)
                } else {
                    Err(self.err("id", format!("{} conflicts with \"{primary}\": {}; give the id once", show_id(b), show_id(a))))
                }
            }
            (Some(a), None) => self.id(primary, a),
            (None, Some(b)) => self.id("id", b),
            (None, None) => Err(self.err(if upstream { "id" } else { primary }, format!("missing: the id to {verb}, like \"G12\""))),
        }
    }

    /// The sources of a merge: `merged_from` or `ids`, at least two distinct ids.
    fn merge_ids(&mut self, limits: &OpLimits) -> Result<Vec<u64>, OpError> {
        let (key, value) = match (self.get("merged_from"), self.get("ids")) {
            (Some(a), Some(b)) if a != b => return Err(self.err("ids", "conflicts with \"merged_from\"; give the ids once")),
            (Some(a), _) => ("merged_from", a),
            (None, Some(b)) => ("ids", b),
            (None, None) => return Err(self.err("merged_from", "missing: the ids of the experiences to merge, like [\"G1\", \"G3\"]")),
        };
        let Value::Array(items) = value else {
            return Err(self.err(key, format!("must be an array of at least 2 ids like [\"G1\", \"G3\"], got {}", kind_of(value))));
        };
        if items.len() > limits.max_merge_ids {
            return Err(self.err(key, format!("has {} ids, at most {} allowed", items.len(), limits.max_merge_ids)));
        }
        let mut ids = Vec::with_capacity(items.len());
        let mut seen = HashSet::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let id = self.id(&format!("{key}[{i}]"), item)?;
            if !seen.insert(id) {
                return Err(self.err(key, format!("{} appears more than once", show_id(id))));
            }
            ids.push(id);
        }
        if ids.len() < 2 {
            return Err(self.err(key, format!("needs at least 2 distinct ids, got {}", ids.len())));
        }
        Ok(ids)
    }

    /// The text (`experience` or `content`, which must agree when both are given), if any.
    fn text(&mut self, limits: &OpLimits) -> Result<Option<String>, OpError> {
        let (key, value) = match (self.get("experience"), self.get("content")) {
            (Some(a), Some(b)) if a != b => return Err(self.err("content", "differs from \"experience\"; give the text once")),
            (Some(a), _) => ("experience", a),
            (None, Some(b)) => ("content", b),
            (None, None) => return Ok(None),
        };
        let Value::String(text) = value else {
            return Err(self.err(key, format!("must be a string, got {}", kind_of(value))));
        };
        charset::admit_required(text, Shape::Text, limits.max_text_chars).map(Some).map_err(|why| self.err(key, why.to_string()))
    }

    /// The required text and the optional confidence and domain of an add, modify or merge.
    fn payload(&mut self, kind: &str, upstream: bool, limits: &OpLimits) -> Result<(String, Option<f64>, Option<String>), OpError> {
        let Some(text) = self.text(limits)? else {
            let key = if upstream { "content" } else { "experience" };
            return Err(self.err(key, format!("missing: the experience's text is required for {kind}")));
        };
        Ok((text, self.confidence()?, self.domain()?))
    }

    /// The optional confidence, a number in [0, 1].
    fn confidence(&mut self) -> Result<Option<f64>, OpError> {
        let Some(value) = self.get("confidence") else { return Ok(None) };
        match value.as_f64() {
            Some(c) if c.is_finite() && (0.0..=1.0).contains(&c) => Ok(Some(c)),
            Some(_) => Err(self.err("confidence", format!("must be a number in [0, 1], got {value}"))),
            None => Err(self.err("confidence", format!("must be a number in [0, 1], got {}", kind_of(value)))),
        }
    }

    /// The optional domain, a string of 1 to 64 characters without control characters.
    fn domain(&mut self) -> Result<Option<String>, OpError> {
        let Some(value) = self.get("domain") else { return Ok(None) };
        let Value::String(domain) = value else {
            return Err(self.err("domain", format!("must be a string, got {}", kind_of(value))));
        };
        charset::admit_required(domain, Shape::Label, MAX_DOMAIN_CHARS).map(Some).map_err(|why| self.err("domain", why.to_string()))
    }
}

/// Parses one op object (already JSON) at `index`.
pub fn parse_op(index: usize, value: &Value, limits: &OpLimits) -> Result<Parsed, OpError> {
    let Value::Object(map) = value else {
        return Err(OpError { index, field: String::new(), message: format!("must be a JSON object, got {}", kind_of(value)) });
    };
    let mut f = Fields { index, map, used: Vec::with_capacity(8) };
    let (option, operation) = (f.get("option"), f.get("operation"));
    let upstream = option.is_none() && (operation.is_some() || (!f.has("experience") && f.has("content")));
    let kind = match (option, operation) {
        (Some(a), Some(b)) => {
            let (a, b) = (f.kind("option", a)?, f.kind("operation", b)?);
            if a != b {
                return Err(f.err("operation", format!("{b} conflicts with \"option\": {a}; give the operation once")));
            }
            a
        }
        (Some(a), None) => f.kind("option", a)?,
        (None, Some(b)) => f.kind("operation", b)?,
        (None, None) if f.has("experience") || f.has("content") => "add",
        (None, None) => return Err(f.err("option", format!("missing: give \"option\" or \"operation\", one of {KINDS}"))),
    };
    let op = match kind {
        "keep" => Op::Keep,
        "delete" => Op::Delete { id: f.target("delete_id", upstream, "delete")? },
        "add" => {
            let (text, confidence, domain) = f.payload(kind, upstream, limits)?;
            Op::Add { text, confidence, domain }
        }
        "modify" => {
            let id = f.target("modified_from", upstream, "modify")?;
            let (text, confidence, domain) = f.payload(kind, upstream, limits)?;
            Op::Modify { id, text, confidence, domain }
        }
        // "merge", the last name `Fields::kind` returns.
        _ => {
            let ids = f.merge_ids(limits)?;
            let (text, confidence, domain) = f.payload(kind, upstream, limits)?;
            Op::Merge { ids, text, confidence, domain }
        }
    };
    let ignored_keys = map.iter().filter(|(k, v)| !v.is_null() && !f.used.contains(&k.as_str())).map(|(k, _)| k.clone()).collect();
    Ok(Parsed { op, ignored_keys })
}

/// Parses an id ("G12", "g12", " G12 ", 12, "12") into 12; error message says what an id looks like and quotes a prefix of the bad value.
pub fn parse_id(value: &Value) -> Result<u64, String> {
    const LOOKS: &str = "must be an experience id like \"G12\" (or 12)";
    match value {
        Value::String(s) => {
            let t = s.trim();
            let digits = t.strip_prefix(['G', 'g']).unwrap_or(t);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!("{LOOKS}, got {}", quoted(s)));
            }
            digits.parse::<u64>().map_err(|_| format!("{LOOKS}, got {} (too large)", quoted(s)))
        }
        Value::Number(n) => n.as_u64().ok_or_else(|| format!("{LOOKS}, got {n}")),
        Value::Null | Value::Bool(_) | Value::Array(_) | Value::Object(_) => Err(format!("{LOOKS}, got {}", kind_of(value))),
    }
}

/// The id as shown: "G12".
pub fn show_id(id: u64) -> String {
    format!("G{id}")
}

/// Canonical JSON of an op in the Training-Free GRPO design's vocabulary (for traces and export): {"option":"add","experience":...} etc., including confidence/domain when set.
pub fn to_seed_json(op: &Op) -> Value {
    let mut map = Map::new();
    map.insert("option".into(), op.kind().into());
    let (text, confidence, domain) = match op {
        Op::Add { text, confidence, domain } => (Some(text), confidence, domain),
        Op::Modify { id, text, confidence, domain } => {
            map.insert("modified_from".into(), show_id(*id).into());
            (Some(text), confidence, domain)
        }
        Op::Merge { ids, text, confidence, domain } => {
            map.insert("merged_from".into(), ids.iter().map(|&id| Value::from(show_id(id))).collect());
            (Some(text), confidence, domain)
        }
        Op::Delete { id } => {
            map.insert("delete_id".into(), show_id(*id).into());
            (None, &None, &None)
        }
        Op::Keep => (None, &None, &None),
    };
    if let Some(text) = text {
        map.insert("experience".into(), text.as_str().into());
    }
    if let Some(c) = confidence.and_then(serde_json::Number::from_f64) {
        map.insert("confidence".into(), Value::Number(c));
    }
    if let Some(domain) = domain {
        map.insert("domain".into(), domain.as_str().into());
    }
    Value::Object(map)
}

#[cfg(test)]
mod tests;
