//! The experience library: the Training-Free GRPO design's `ExperienceManager` semantics on a bank.
//!
//! - `add` → "G{N}" from the bank's counter, which persists, so ids are never reused;
//! - `modify` and `delete` of an unknown id are NotFound (the seed's `False`) and change nothing;
//! - `merge(ids, text)` creates a new id and removes the sources (two or more distinct live ids);
//! - `apply_operations` takes the Training-Free GRPO design's and upstream's vocabularies ([`super::ops`]); atomic by default
//!   (one unusable operation refuses the batch, naming its index and field), or `partial`, where each
//!   operation reports its result and the usable ones are applied as one write;
//! - `format_for_prompt` renders `[G0]. text` lines in id order, `""` for an empty library.
//!
//! Defaults where the seeds are silent: confidence 0.5, domain "general", the bank's epoch; a modify
//! keeps confidence and domain unless given; a merge takes the highest confidence of its sources, the sum of their usage (the latest last use) and
//! their domain if they agree (else the first source's), and is stamped with the current epoch.

use super::library::{show_id, Draft, Experience, Library};
use super::ops::{self, Op, OpLimits};
use super::store::BankMeta;
use super::{BankError, Banks};
use crate::text::charset::{self, Shape};

/// Confidence of an experience added without one.
pub const DEFAULT_CONFIDENCE: f64 = 0.5;

/// Domain of an experience added without one.
pub const DEFAULT_DOMAIN: &str = "general";

/// Below this spread a GRPO group has no variation.
pub const MIN_GROUP_SPREAD: f64 = 1e-9;

/// The semantic-memory design's confidence of a GRPO group: `max(advantage) − min(advantage)`, clamped to at most 1 (the
/// advantages of a group normalised by its standard deviation can spread wider than 1). `None` for a
/// group without variation, which adds nothing; an error for an empty group or a non-finite value.
pub fn group_confidence(advantages: &[f64]) -> Result<Option<f64>, BankError> {
    if advantages.is_empty() {
        return Err(BankError::invalid("group_advantages", "is empty"));
    }
    if let Some(i) = advantages.iter().position(|a| !a.is_finite()) {
        return Err(BankError::invalid(&format!("group_advantages[{i}]"), "must be a finite number"));
    }
    let max = advantages.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let min = advantages.iter().copied().fold(f64::INFINITY, f64::min);
    let spread = max - min;
    Ok((spread >= MIN_GROUP_SPREAD).then_some(spread.min(1.0)))
}

/// A new experience's optional fields.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewFields {
    /// In [0, 1].
    pub confidence: Option<f64>,
    /// The domain.
    pub domain: Option<String>,
    /// The epoch of creation.
    pub epoch: Option<u64>,
}

/// The text rule ([`crate::text::charset`]) for an experience's text; over the cap is RESOURCE_EXHAUSTED
/// (the banks' code for every cap), any other refusal INVALID_ARGUMENT.
pub(crate) fn check_text(field: &str, text: &str, limits: &OpLimits) -> Result<String, BankError> {
    charset::admit_required(text, Shape::Text, limits.max_text_chars).map_err(|why| BankError::refused_text(field, why))
}

fn check_confidence(field: &str, c: Option<f64>) -> Result<Option<f64>, BankError> {
    match c {
        Some(v) if !v.is_finite() || !(0.0..=1.0).contains(&v) => {
            Err(BankError::invalid(field, format!("must be a number in [0, 1], got {v}")))
        }
        other => Ok(other),
    }
}

/// The text rule for a domain: one line of 1 to 64 characters.
pub(crate) fn check_domain(field: &str, d: Option<&str>) -> Result<Option<String>, BankError> {
    let Some(d) = d else { return Ok(None) };
    charset::admit_required(d, Shape::Label, ops::MAX_DOMAIN_CHARS).map(Some).map_err(|why| BankError::invalid(field, why.to_string()))
}

/// A domain filter (`Retrieve`, `FormatForPrompt`, `ListExperiences`): empty means none; otherwise the
/// text rule for a domain, so the filter matches a domain stored in the same form.
pub fn domain_filter(field: &str, d: &str) -> Result<Option<String>, BankError> {
    if d.trim().is_empty() {
        return Ok(None);
    }
    check_domain(field, Some(d))
}

/// Parses "G12" (also "g12", "12") into 12.
pub fn parse_id(field: &str, s: &str) -> Result<u64, BankError> {
    ops::parse_id(&serde_json::Value::String(s.to_string())).map_err(|m| BankError::invalid(field, m))
}

fn not_found(lib: &Library, field: &str, id: u64) -> BankError {
    BankError::ExperienceNotFound { bank: lib.meta().name.clone(), field: field.to_string(), id: show_id(id) }
}

/// Plans an add into `draft`; returns the new experience.
fn plan_add(draft: &mut Draft, text: String, fields: &NewFields) -> Experience {
    let id = draft.allocate();
    let exp = Experience {
        id,
        text,
        confidence: fields.confidence.unwrap_or(DEFAULT_CONFIDENCE),
        domain: fields.domain.clone().unwrap_or_else(|| DEFAULT_DOMAIN.to_string()),
        created_epoch: fields.epoch.unwrap_or(draft.epoch),
        usage_count: 0,
        last_used_epoch: None,
    };
    draft.put(exp.clone());
    exp
}

/// Plans a modify; `None` when the id is not live in the draft.
fn plan_modify(
    lib: &Library,
    draft: &mut Draft,
    id: u64,
    text: String,
    confidence: Option<f64>,
    domain: Option<String>,
) -> Option<Experience> {
    let old = draft.get(lib, id)?.clone();
    let exp = Experience { text, confidence: confidence.unwrap_or(old.confidence), domain: domain.unwrap_or(old.domain.clone()), ..old };
    draft.put(exp.clone());
    Some(exp)
}

/// Plans a merge; the first id not live in the draft when one is missing.
fn plan_merge(
    lib: &Library,
    draft: &mut Draft,
    ids: &[u64],
    text: String,
    confidence: Option<f64>,
    domain: Option<String>,
) -> Result<Experience, u64> {
    let mut sources = Vec::with_capacity(ids.len());
    for id in ids {
        sources.push(draft.get(lib, *id).cloned().ok_or(*id)?);
    }
    let fields = NewFields {
        confidence: Some(confidence.unwrap_or_else(|| sources.iter().map(|s| s.confidence).fold(0.0, f64::max))),
        // The sources' domain when they agree, else the first source's: the first source's either way.
        domain: Some(domain.unwrap_or_else(|| sources[0].domain.clone())),
        epoch: None,
    };
    // Usage is the sources' (the semantic-memory design sums it): what they were retrieved for is now retrieved as this.
    let usage: Vec<(u64, Option<u64>)> = sources.iter().map(|s| lib.usage(s)).collect();
    for id in ids {
        draft.delete(*id);
    }
    let mut exp = plan_add(draft, text, &fields);
    exp.usage_count = usage.iter().map(|u| u.0).fold(0, u64::saturating_add);
    exp.last_used_epoch = usage.iter().filter_map(|u| u.1).max();
    draft.put(exp.clone());
    Ok(exp)
}

/// The result of one operation of a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct OpOutcome {
    /// Position in the batch.
    pub index: usize,
    /// add, modify, delete, merge, keep; empty when unreadable.
    pub kind: &'static str,
    /// What happened.
    pub status: OpStatus,
    /// The experience created or changed.
    pub id: Option<u64>,
    /// Ids a merge removed.
    pub removed: Vec<u64>,
    /// Why it was not applied.
    pub message: String,
    /// Keys ignored.
    pub ignored_keys: Vec<String>,
}

/// What happened to one operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpStatus {
    /// Applied (or would be).
    Applied,
    /// keep / NONE.
    Kept,
    /// Names an id that is not live.
    NotFound,
    /// Malformed.
    Invalid,
}

impl Banks {
    /// The limits operations are read with (the banks' text and batch caps).
    pub fn op_limits(&self) -> OpLimits {
        let l = &self.config().limits;
        OpLimits { max_ops: l.max_ops, max_text_chars: l.max_text_chars, ..OpLimits::default() }
    }

    /// ExperienceManager.add (with semantic memory's confidence, domain and epoch).
    pub async fn add(&self, bank: &str, text: &str, fields: NewFields, expected: Option<u64>) -> Result<(Experience, BankMeta), BankError> {
        let limits = self.op_limits();
        let text = check_text("text", text, &limits)?;
        let fields = NewFields {
            confidence: check_confidence("confidence", fields.confidence)?,
            domain: check_domain("domain", fields.domain.as_deref())?,
            ..fields
        };
        self.write(bank, expected, |_, draft| Ok(plan_add(draft, text.clone(), &fields))).await
    }

    /// ExperienceManager.modify.
    pub async fn modify(
        &self,
        bank: &str,
        id: &str,
        text: &str,
        confidence: Option<f64>,
        domain: Option<&str>,
        expected: Option<u64>,
    ) -> Result<(Experience, BankMeta), BankError> {
        let id = parse_id("id", id)?;
        let text = check_text("text", text, &self.op_limits())?;
        let confidence = check_confidence("confidence", confidence)?;
        let domain = check_domain("domain", domain)?;
        self.write(bank, expected, |lib, draft| {
            plan_modify(lib, draft, id, text.clone(), confidence, domain.clone()).ok_or_else(|| not_found(lib, "id", id))
        })
        .await
    }

    /// ExperienceManager.delete.
    pub async fn delete_experience(&self, bank: &str, id: &str, expected: Option<u64>) -> Result<BankMeta, BankError> {
        let id = parse_id("id", id)?;
        let ((), meta) = self
            .write(bank, expected, |lib, draft| {
                lib.get(id).ok_or_else(|| not_found(lib, "id", id))?;
                draft.delete(id);
                Ok(())
            })
            .await?;
        Ok(meta)
    }

    /// ExperienceManager.merge.
    pub async fn merge(
        &self,
        bank: &str,
        ids: &[String],
        text: &str,
        confidence: Option<f64>,
        domain: Option<&str>,
        expected: Option<u64>,
    ) -> Result<(Experience, BankMeta), BankError> {
        let mut parsed = Vec::with_capacity(ids.len());
        for (i, s) in ids.iter().enumerate() {
            let id = parse_id(&format!("ids[{i}]"), s)?;
            if parsed.contains(&id) {
                return Err(BankError::invalid(&format!("ids[{i}]"), format!("{} is given twice", show_id(id))));
            }
            parsed.push(id);
        }
        if parsed.len() < 2 {
            return Err(BankError::invalid("ids", "a merge needs at least two experiences"));
        }
        let text = check_text("text", text, &self.op_limits())?;
        let confidence = check_confidence("confidence", confidence)?;
        let domain = check_domain("domain", domain)?;
        self.write(bank, expected, |lib, draft| {
            plan_merge(lib, draft, &parsed, text.clone(), confidence, domain.clone()).map_err(|missing| {
                let i = parsed.iter().position(|p| *p == missing).unwrap_or(0);
                not_found(lib, &format!("ids[{i}]"), missing)
            })
        })
        .await
    }

    /// ExperienceManager.apply_operations: the outcomes, and the counters after the batch.
    pub async fn apply_operations(
        &self,
        bank: &str,
        operations_json: &str,
        partial: bool,
        dry_run: bool,
        expected: Option<u64>,
    ) -> Result<(Vec<OpOutcome>, BankMeta), BankError> {
        let limits = self.op_limits();
        let parsed = ops::parse_batch(operations_json, &limits).map_err(|e| match e {
            ops::BatchError::TooMany { .. } => BankError::ResourceExhausted { message: e.to_string() },
            other @ (ops::BatchError::NotJson { .. }
            | ops::BatchError::NotABatch { .. }
            | ops::BatchError::Truncated { .. }
            | ops::BatchError::DuplicateKey { .. }) => BankError::invalid("operations_json", other.to_string()),
        })?;
        if !partial {
            if let Some(Err(e)) = parsed.iter().find(|p| p.is_err()) {
                return Err(BankError::invalid(&format!("operations[{}].{}", e.index, e.field), e.message.clone()));
            }
        }
        let plan = move |lib: &Library, draft: &mut Draft| -> Result<Vec<OpOutcome>, BankError> {
            let mut out = Vec::with_capacity(parsed.len());
            for (index, p) in parsed.iter().cloned().enumerate() {
                let p = match p {
                    Ok(p) => p,
                    Err(e) => {
                        out.push(OpOutcome {
                            index,
                            kind: "",
                            status: OpStatus::Invalid,
                            id: None,
                            removed: Vec::new(),
                            message: e.to_string(),
                            ignored_keys: Vec::new(),
                        });
                        continue;
                    }
                };
                let kind = p.op.kind();
                let mut o = OpOutcome {
                    index,
                    kind,
                    status: OpStatus::Applied,
                    id: None,
                    removed: Vec::new(),
                    message: String::new(),
                    ignored_keys: p.ignored_keys,
                };
                let mut missing: Option<(&str, u64)> = None;
                match p.op {
                    Op::Keep => o.status = OpStatus::Kept,
                    Op::Add { text, confidence, domain } => {
                        o.id = Some(plan_add(draft, text, &NewFields { confidence, domain, epoch: None }).id);
                    }
                    Op::Modify { id, text, confidence, domain } => match plan_modify(lib, draft, id, text, confidence, domain) {
                        Some(e) => o.id = Some(e.id),
                        None => missing = Some(("modified_from", id)),
                    },
                    Op::Delete { id } => {
                        if draft.get(lib, id).is_some() {
                            draft.delete(id);
                            o.id = Some(id);
                        } else {
                            missing = Some(("delete_id", id));
                        }
                    }
                    Op::Merge { ids, text, confidence, domain } => match plan_merge(lib, draft, &ids, text, confidence, domain) {
                        Ok(e) => {
                            o.id = Some(e.id);
                            o.removed = ids;
                        }
                        Err(id) => missing = Some(("merged_from", id)),
                    },
                }
                if let Some((field, id)) = missing {
                    if !partial {
                        return Err(not_found(lib, &format!("operations[{index}].{field}"), id));
                    }
                    o.status = OpStatus::NotFound;
                    o.message = format!("operations[{index}].{field}: experience {} not found", show_id(id));
                }
                out.push(o);
            }
            if dry_run {
                *draft = Draft::of(lib);
            }
            Ok(out)
        };
        self.write(bank, expected, plan).await
    }

    /// ExperienceManager.format_for_prompt: every experience as `[G0]. text`, in id order.
    pub async fn format_all(&self, bank: &str) -> Result<(String, Vec<u64>), BankError> {
        self.read(bank, |lib| {
            let ids: Vec<u64> = lib.iter().map(|e| e.id).collect();
            (render(lib.iter()), ids)
        })
        .await
    }
}

/// `[G0]. text` lines joined by `\n` (the Training-Free GRPO design's `format_for_prompt`); each text through
/// [`charset::inline`], so a stored line break cannot forge another entry.
pub fn render<'a>(exps: impl IntoIterator<Item = &'a Experience>) -> String {
    exps.into_iter().map(|e| format!("[{}]. {}", show_id(e.id), charset::inline(&e.text))).collect::<Vec<_>>().join("\n")
}

/// Most characters of the system prompt `FormatForPrompt` injects the experiences into.
pub const MAX_SYSTEM_CHARS: usize = 100_000;

/// The cap and the refused characters of a caller's system prompt (it is returned, not stored, so it is
/// not trimmed or normalised).
pub fn check_system(field: &str, s: &str) -> Result<(), BankError> {
    if let Some(why) = charset::check(s, charset::refused_in_text) {
        return Err(BankError::invalid(field, why));
    }
    let n = s.chars().take(MAX_SYSTEM_CHARS + 1).count();
    if n > MAX_SYSTEM_CHARS {
        return Err(BankError::ResourceExhausted { message: format!("{field} is over the limit of {MAX_SYSTEM_CHARS} characters") });
    }
    Ok(())
}

/// The semantic-memory design's injection into a system prompt: `"{system}\n\n# Learned Experiences\n{experiences}"`, or
/// the system prompt alone when there is nothing to list.
pub fn inject(system: &str, experiences: &str) -> String {
    if experiences.is_empty() {
        system.to_string()
    } else {
        format!("{system}\n\n# Learned Experiences\n{experiences}")
    }
}
