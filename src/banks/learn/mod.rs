//! LearnFromGroup: the Training-Free GRPO design's `SemanticExtractor`, server-side. An LLM reads groups of rollouts and
//! proposes the edits to an experience bank that Training-Free GRPO learns by.
//!
//! 1. **Summarise** each trajectory that has no summary yet as numbered steps.
//! 2. **Extract**: each group with reward variation gives at most `max_operations` operations from the
//!    contrast between its better and worse trajectories and the library as it was when the call began.
//!    A group without variation gives nothing (skipped, with the reason). In the **four-stage** mode
//!    (upstream's practice pipeline) this is a prose critique followed by a per-group update.
//! 3. **Consolidate** every group's operations against the library into one plan that may merge and
//!    delete.
//! 4. **Apply** the plan with `apply_operations` at the version the library was read at, in one write: a
//!    write made meanwhile makes the call ABORTED instead of being overwritten. The plan's usable
//!    operations are applied together; one the library refuses (an id that does not exist) is reported
//!    with its reason and changes nothing (`apply_operations`' `partial`).
//!
//! Failures never crash the call: a group whose stage 1 or 2 fails is skipped and says why; a failed or
//! unusable consolidation falls back to the groups' operations flattened, as the Training-Free GRPO design does, and says so.
//! Malformed operations are dropped one by one with their index and field. LLM calls go through the
//! server's client (its concurrency limit, cache and retries), concurrently per group.

pub mod prompts;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use serde_json::Value;

use super::experience::{group_confidence, render, OpOutcome};
use super::ops::{parse_batch, parse_leading, to_seed_json, BatchError, Op, OpLimits};
use super::{BankError, Banks};
use crate::llm::Llm;

/// The Training-Free GRPO design's `max_operations` default.
pub const DEFAULT_MAX_OPERATIONS: usize = 3;
/// Groups per call at most.
pub const MAX_GROUPS: usize = 256;
/// Trajectories per group at most.
pub const MAX_GROUP_SIZE: usize = 64;
/// Operations per group at most.
pub const MAX_OPERATIONS: usize = 32;
/// Characters of a query, output, ground truth or summary at most.
pub const MAX_TEXT_CHARS: usize = 100_000;

/// One rollout (the Training-Free GRPO design's `Trajectory`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Trajectory {
    /// The task.
    pub query: String,
    /// The policy's output.
    pub output: String,
    /// In [0, 1].
    pub reward: f64,
    /// The expected answer, if known.
    pub groundtruth: Option<String>,
    /// Numbered steps; written by stage 1 when absent.
    pub summary: Option<String>,
}

/// Which groups have "reward variation".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Variation {
    /// Rewards differ (max − min > 0): the Training-Free GRPO design's "no variation" rule, and the semantic-memory design's `std > 0`.
    #[default]
    Spread,
    /// 0 < mean reward < 1: upstream's rule when ground truth is given. For 0/1 rewards it is the same
    /// as [`Variation::Spread`]; with graded rewards it also keeps a group whose rewards are all equal
    /// and strictly between 0 and 1 (confidence 0), and it drops none that varies.
    MeanBetween,
}

/// The pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Summaries, group operations, consolidation (the Training-Free GRPO design).
    #[default]
    ThreeStage,
    /// Summaries, a group critique, a per-group update, consolidation (upstream's practice pipeline).
    FourStage,
}

/// LearnFromGroup's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct LearnOptions {
    /// Operations per group at most.
    pub max_operations: usize,
    /// Show the ground truth to the LLM.
    pub use_groundtruth: bool,
    /// The variation rule.
    pub variation: Variation,
    /// The pipeline.
    pub mode: Mode,
    /// Return the plan without applying it.
    pub dry_run: bool,
    /// The bank must be at this version when the call begins.
    pub expected_version: Option<u64>,
}

impl Default for LearnOptions {
    fn default() -> Self {
        LearnOptions {
            max_operations: DEFAULT_MAX_OPERATIONS,
            use_groundtruth: true,
            variation: Variation::Spread,
            mode: Mode::ThreeStage,
            dry_run: false,
            expected_version: None,
        }
    }
}

/// What happened to one group.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GroupReport {
    /// Each trajectory's summary (given or written; `None` where stage 1 failed).
    pub summaries: Vec<Option<String>>,
    /// The four-stage mode's critique.
    pub critique: Option<String>,
    /// The group's operations.
    pub operations: Vec<Op>,
    /// Operations of the reply that could not be used, each with its index and field.
    pub rejected: Vec<String>,
    /// `min(1, max − min)` of the rewards; `None` without variation.
    pub confidence: Option<f64>,
    /// Why the group gave no operations (no variation, or a failed stage), if it gave none.
    pub skipped: Option<String>,
}

/// What LearnFromGroup did.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LearnReport {
    /// One per group, in order.
    pub groups: Vec<GroupReport>,
    /// The final plan.
    pub plan: Vec<Op>,
    /// Set when the consolidation failed and the plan is the groups' operations flattened.
    pub fallback: Option<String>,
    /// Operations of the consolidation's reply that could not be used.
    pub rejected: Vec<String>,
    /// Each plan operation's result (empty when the plan is empty).
    pub results: Vec<OpOutcome>,
    /// Whether the plan was written (not a dry run, not empty).
    pub applied: bool,
    /// The bank's version after the call.
    pub version: u64,
}

/// The text rule ([`crate::text::charset`]) on a trajectory's field: refused characters are
/// INVALID_ARGUMENT, over the cap RESOURCE_EXHAUSTED. Trajectories are read, not stored, and the prompts
/// show every field through [`crate::text::charset::inline`], so a field cannot forge a prompt's lines.
fn check_text(field: &str, s: &str) -> Result<(), BankError> {
    BankError::admit_text(field, s, MAX_TEXT_CHARS).map(drop)
}

/// Most characters of a library passed as text to the stage RPCs (`experiences`).
pub const MAX_LIBRARY_CHARS: usize = 1_000_000;

/// The text rule's character check and the cap on a library passed as `[G0]. text` lines.
pub fn check_library(field: &str, s: &str) -> Result<(), BankError> {
    BankError::admit_text(field, s, MAX_LIBRARY_CHARS).map(drop)
}

/// Checks the groups and the settings (every field named).
pub fn validate(groups: &[Vec<Trajectory>], o: &LearnOptions) -> Result<(), BankError> {
    if groups.is_empty() {
        return Err(BankError::invalid("groups", "is empty"));
    }
    if groups.len() > MAX_GROUPS {
        return Err(BankError::ResourceExhausted { message: format!("{} groups; at most {MAX_GROUPS} per call", groups.len()) });
    }
    if !(1..=MAX_OPERATIONS).contains(&o.max_operations) {
        return Err(BankError::invalid("max_operations", format!("must be 1 to {MAX_OPERATIONS}, got {}", o.max_operations)));
    }
    for (g, group) in groups.iter().enumerate() {
        if group.is_empty() {
            return Err(BankError::invalid(&format!("groups[{g}].trajectories"), "is empty"));
        }
        if group.len() > MAX_GROUP_SIZE {
            return Err(BankError::ResourceExhausted {
                message: format!("groups[{g}] holds {} trajectories; at most {MAX_GROUP_SIZE}", group.len()),
            });
        }
        for (i, t) in group.iter().enumerate() {
            let at = |f: &str| format!("groups[{g}].trajectories[{i}].{f}");
            if !t.reward.is_finite() || !(0.0..=1.0).contains(&t.reward) {
                return Err(BankError::invalid(&at("reward"), format!("must be a number in [0, 1], got {}", t.reward)));
            }
            if t.query.trim().is_empty() {
                return Err(BankError::invalid(&at("query"), "is empty"));
            }
            check_text(&at("query"), &t.query)?;
            check_text(&at("output"), &t.output)?;
            check_text(&at("groundtruth"), t.groundtruth.as_deref().unwrap_or(""))?;
            check_text(&at("summary"), t.summary.as_deref().unwrap_or(""))?;
        }
    }
    Ok(())
}

/// `min(1, max − min)` of the rewards when the group varies by `rule`, else `None` (the spread rule is
/// [`group_confidence`]'s, as for `AddExperience.group_advantages`).
pub fn variation(group: &[Trajectory], rule: Variation) -> Option<f64> {
    let rewards: Vec<f64> = group.iter().map(|t| t.reward).collect();
    // Validated groups are non-empty and finite, so only "no variation" gives `None`.
    let spread = group_confidence(&rewards).ok().flatten();
    match rule {
        Variation::Spread => spread,
        Variation::MeanBetween => {
            let mean = rewards.iter().sum::<f64>() / rewards.len() as f64;
            (mean > 0.0 && mean < 1.0).then(|| spread.unwrap_or(0.0))
        }
    }
}

/// Stage 1 of one trajectory: its summary, or why there is none.
pub async fn summarize(llm: &Llm, t: &Trajectory, use_groundtruth: bool) -> Result<String, String> {
    let reply = llm.ask(&prompts::summarize(t, use_groundtruth)).await.map_err(|e| format!("stage 1 (summary) failed: {e}"))?;
    prompts::parse_text(&reply).map_err(|why| format!("stage 1 (summary) reply unusable: {why}"))
}

/// Operations of an LLM reply: the usable ones (at most `max`), and why the others were dropped.
///
/// A reply cut off by the model's token limit inside its array keeps its complete leading operations, and
/// the cut is reported among the rejections.
pub fn read_operations(reply: &str, max: usize, limits: &OpLimits) -> Result<(Vec<Op>, Vec<String>), String> {
    let (parsed, mut rejected) = match parse_batch(reply, limits) {
        Ok(parsed) => (parsed, Vec::new()),
        Err(e @ BatchError::Truncated { .. }) => match parse_leading(reply, limits) {
            Some(leading) if !leading.is_empty() => (leading, vec![e.to_string()]),
            Some(_) | None => return Err(e.to_string()),
        },
        Err(
            e @ (BatchError::NotJson { .. } | BatchError::NotABatch { .. } | BatchError::TooMany { .. } | BatchError::DuplicateKey { .. }),
        ) => return Err(e.to_string()),
    };
    let mut ops = Vec::new();
    for p in parsed {
        match p {
            Ok(p) if matches!(p.op, Op::Keep) => {}
            Ok(p) if ops.len() < max => ops.push(p.op),
            Ok(p) => rejected.push(format!("a {} beyond the {max} operations allowed", p.op.kind())),
            Err(e) => rejected.push(e.to_string()),
        }
    }
    Ok((ops, rejected))
}

/// Stage 2 of one group (and, in the four-stage mode, its critique and update): the operations, the
/// rejected ones, and the critique.
pub async fn extract(
    llm: &Llm,
    group: &[Trajectory],
    library: &str,
    o: &LearnOptions,
    limits: &OpLimits,
) -> Result<(Vec<Op>, Vec<String>, Option<String>), String> {
    match o.mode {
        Mode::ThreeStage => {
            let request = prompts::extract(group, library, o.max_operations, o.use_groundtruth);
            let reply = llm.ask(&request).await.map_err(|e| format!("stage 2 (group operations) failed: {e}"))?;
            let (ops, rejected) = read_operations(&reply, o.max_operations, limits).map_err(|e| format!("stage 2 reply unusable: {e}"))?;
            Ok((ops, rejected, None))
        }
        Mode::FourStage => {
            let reply =
                llm.ask(&prompts::critique(group, o.use_groundtruth)).await.map_err(|e| format!("stage 2 (critique) failed: {e}"))?;
            let critique = prompts::parse_text(&reply).map_err(|why| format!("stage 2 (critique) reply unusable: {why}"))?;
            let reply = llm
                .ask(&prompts::update(&critique, library, o.max_operations))
                .await
                .map_err(|e| format!("stage 3 (group update) failed: {e}"))?;
            let (ops, rejected) = read_operations(&reply, o.max_operations, limits).map_err(|e| format!("stage 3 reply unusable: {e}"))?;
            Ok((ops, rejected, Some(critique)))
        }
    }
}

/// The last stage: the final plan from the groups' operations, and the rejected operations.
pub async fn consolidate(llm: &Llm, groups: &[Vec<Op>], library: &str, limits: &OpLimits) -> Result<(Vec<Op>, Vec<String>), String> {
    let reply = llm.ask(&prompts::consolidate(groups, library)).await.map_err(|e| format!("the consolidation failed: {e}"))?;
    let (plan, rejected) =
        read_operations(&reply, limits.max_ops, limits).map_err(|e| format!("the consolidation reply was unusable: {e}"))?;
    if plan.is_empty() && groups.iter().any(|g| !g.is_empty()) && !rejected.is_empty() {
        return Err(format!("the consolidation reply had no usable operation ({})", rejected.join("; ")));
    }
    Ok((plan, rejected))
}

/// The plan as `apply_operations` JSON, every add, modify and merge without a confidence given the
/// batch's: the mean confidence of the groups that proposed operations.
fn plan_json(plan: &[Op], confidence: Option<f64>) -> String {
    let ops: Vec<Value> = plan
        .iter()
        .map(|op| {
            let mut v = to_seed_json(op);
            if let (
                Some(c),
                Value::Object(m),
                Op::Add { confidence: None, .. } | Op::Modify { confidence: None, .. } | Op::Merge { confidence: None, .. },
            ) = (confidence, &mut v, op)
            {
                m.insert("confidence".into(), Value::from(c));
            }
            v
        })
        .collect();
    Value::Array(ops).to_string()
}

impl Banks {
    /// LearnFromGroup on `bank` (see the module doc).
    pub async fn learn_from_group(&self, bank: &str, mut groups: Vec<Vec<Trajectory>>, o: &LearnOptions) -> Result<LearnReport, BankError> {
        validate(&groups, o)?;
        let llm = self.require_llm("learning from groups")?;
        let limits = self.op_limits();
        let (library, version) = self.read(bank, |lib| (render(lib.iter()), lib.meta().version)).await?;
        if let Some(e) = o.expected_version.filter(|e| *e != version) {
            return Err(BankError::VersionConflict { name: bank.to_string(), expected: e, current: version });
        }
        let mut reports: Vec<GroupReport> =
            groups.iter().map(|g| GroupReport { confidence: variation(g, o.variation), ..GroupReport::default() }).collect();
        for (r, g) in reports.iter_mut().zip(&groups) {
            if r.confidence.is_none() {
                r.skipped = Some(match o.variation {
                    Variation::Spread => "no reward variation".to_string(),
                    Variation::MeanBetween => "no reward variation (mean reward not strictly between 0 and 1)".to_string(),
                });
            }
            r.summaries = g.iter().map(|t| t.summary.clone()).collect();
        }
        // Stage 1, every missing summary of the groups that go on, at once.
        let mut tasks = tokio::task::JoinSet::new();
        for (gi, g) in groups.iter().enumerate().filter(|(gi, _)| reports[*gi].skipped.is_none()) {
            for (ti, t) in g.iter().enumerate().filter(|(_, t)| t.summary.is_none()) {
                let (llm, t, gt) = (Arc::clone(&llm), t.clone(), o.use_groundtruth);
                tasks.spawn(async move { (gi, ti, summarize(&llm, &t, gt).await) });
            }
        }
        while let Some(done) = tasks.join_next().await {
            let (gi, ti, r) = done.map_err(|e| BankError::FailedPrecondition { message: format!("a summary task failed: {e}") })?;
            match r {
                Ok(s) => {
                    groups[gi][ti].summary = Some(s.clone());
                    reports[gi].summaries[ti] = Some(s);
                }
                Err(why) => {
                    reports[gi].skipped.get_or_insert(format!("trajectory {ti}: {why}"));
                }
            }
        }
        // Stage 2 (and the four-stage update), per group, at once, against the library as read.
        let mut tasks = tokio::task::JoinSet::new();
        for (gi, g) in groups.iter().enumerate().filter(|(gi, _)| reports[*gi].skipped.is_none()) {
            let (llm, g, library, o) = (Arc::clone(&llm), g.clone(), library.clone(), o.clone());
            tasks.spawn(async move { (gi, extract(&llm, &g, &library, &o, &limits).await) });
        }
        while let Some(done) = tasks.join_next().await {
            let (gi, r) = done.map_err(|e| BankError::FailedPrecondition { message: format!("a group task failed: {e}") })?;
            match r {
                Ok((ops, rejected, critique)) => {
                    let r = &mut reports[gi];
                    (r.operations, r.rejected, r.critique) = (ops, rejected, critique);
                }
                Err(why) => reports[gi].skipped = Some(why),
            }
        }
        let proposed: Vec<Vec<Op>> = reports.iter().map(|r| r.operations.clone()).collect();
        let contributing: Vec<f64> = reports.iter().filter(|r| !r.operations.is_empty()).filter_map(|r| r.confidence).collect();
        let confidence = (!contributing.is_empty()).then(|| contributing.iter().sum::<f64>() / contributing.len() as f64);
        let mut report = LearnReport { groups: reports, version, ..LearnReport::default() };
        if proposed.iter().all(Vec::is_empty) {
            return Ok(report);
        }
        match consolidate(&llm, &proposed, &library, &limits).await {
            Ok((plan, rejected)) => (report.plan, report.rejected) = (plan, rejected),
            Err(why) => {
                report.plan = proposed.into_iter().flatten().collect();
                report.fallback = Some(format!("{why}; applying the groups' operations unconsolidated"));
            }
        }
        if report.plan.is_empty() {
            return Ok(report);
        }
        let (results, meta) = self.apply_operations(bank, &plan_json(&report.plan, confidence), true, o.dry_run, Some(version)).await?;
        report.applied = !o.dry_run;
        report.results = results;
        report.version = meta.version;
        Ok(report)
    }
}
