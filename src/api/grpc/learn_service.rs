//! `memgym.v1.Learn`: thin handlers over LearnFromGroup and its stages ([`crate::banks::learn`]). Each
//! handler destructures its request completely, converts, calls, and converts back; errors go through
//! the one `Status` map. Trajectory texts are never logged.

use std::sync::Arc;

use serde_json::Value;
use tonic::{Request, Response, Status};
use tracing::Instrument;

use crate::api::grpc::banks_service::{outcome_out, respond};
use crate::api::pb;
use crate::api::pb::learn_server::Learn as LearnRpc;
use crate::banks::learn::{self, LearnOptions, Mode, Trajectory, Variation, DEFAULT_MAX_OPERATIONS};
use crate::banks::ops::{to_seed_json, Op};
use crate::banks::{BankError, Banks};
use crate::llm::LlmError;
use crate::util::excerpt::name;
use crate::util::invalid::Invalid;

/// The Learn service.
#[derive(Debug, Clone)]
pub struct LearnService {
    banks: Arc<Banks>,
}

impl LearnService {
    /// Serves LearnFromGroup on the experience banks of `banks`.
    pub fn new(banks: Arc<Banks>) -> Self {
        LearnService { banks }
    }
}

impl From<pb::Trajectory> for Trajectory {
    fn from(t: pb::Trajectory) -> Self {
        let pb::Trajectory { query, output, reward, groundtruth, summary } = t;
        Trajectory { query, output, reward, groundtruth, summary }
    }
}

fn variation_in(v: i32) -> Result<Variation, BankError> {
    match pb::VariationRule::try_from(v).map_err(|_| BankError::invalid("variation", format!("unknown enum value {v}")))? {
        pb::VariationRule::Unspecified | pb::VariationRule::Spread => Ok(Variation::Spread),
        pb::VariationRule::MeanBetween => Ok(Variation::MeanBetween),
    }
}

fn mode_in(v: i32) -> Result<Mode, BankError> {
    match pb::LearnMode::try_from(v).map_err(|_| BankError::invalid("mode", format!("unknown enum value {v}")))? {
        pb::LearnMode::Unspecified | pb::LearnMode::ThreeStage => Ok(Mode::ThreeStage),
        pb::LearnMode::FourStage => Ok(Mode::FourStage),
    }
}

fn options(max_operations: Option<u32>, use_groundtruth: Option<bool>, variation: i32, mode: i32) -> Result<LearnOptions, BankError> {
    Ok(LearnOptions {
        max_operations: max_operations.map_or(DEFAULT_MAX_OPERATIONS, |n| n as usize),
        use_groundtruth: use_groundtruth.unwrap_or(true),
        variation: variation_in(variation)?,
        mode: mode_in(mode)?,
        ..LearnOptions::default()
    })
}

/// Operations as a JSON array in the Training-Free GRPO design's vocabulary.
fn ops_json(ops: &[Op]) -> String {
    Value::Array(ops.iter().map(to_seed_json).collect()).to_string()
}

#[tonic::async_trait]
impl LearnRpc for LearnService {
    async fn learn_from_group(&self, request: Request<pb::LearnFromGroupRequest>) -> Result<Response<pb::LearnFromGroupResponse>, Status> {
        let pb::LearnFromGroupRequest { bank, groups, max_operations, use_groundtruth, variation, mode, dry_run, expected_version } =
            request.into_inner();
        let span = tracing::info_span!("learn_from_group", bank = %name(&bank), groups = groups.len(), dry_run);
        respond(
            async {
                let o = LearnOptions { dry_run, expected_version, ..options(max_operations, use_groundtruth, variation, mode)? };
                let groups: Vec<Vec<Trajectory>> =
                    groups.into_iter().map(|g| g.trajectories.into_iter().map(Trajectory::from).collect()).collect();
                let r = self.banks.learn_from_group(&bank, groups, &o).await?;
                Ok(pb::LearnFromGroupResponse {
                    groups: r
                        .groups
                        .into_iter()
                        .map(|g| pb::GroupResult {
                            summaries: g.summaries.into_iter().map(Option::unwrap_or_default).collect(),
                            critique: g.critique.unwrap_or_default(),
                            operations_json: ops_json(&g.operations),
                            rejected: g.rejected,
                            confidence: g.confidence,
                            skipped: g.skipped.unwrap_or_default(),
                        })
                        .collect(),
                    plan_json: ops_json(&r.plan),
                    fallback: r.fallback.unwrap_or_default(),
                    rejected: r.rejected,
                    results: r.results.into_iter().map(outcome_out).collect(),
                    applied: r.applied,
                    version: r.version,
                })
            }
            .instrument(span)
            .await,
        )
    }

    async fn summarize_trajectory(
        &self,
        request: Request<pb::SummarizeTrajectoryRequest>,
    ) -> Result<Response<pb::SummarizeTrajectoryResponse>, Status> {
        let pb::SummarizeTrajectoryRequest { trajectory, use_groundtruth } = request.into_inner();
        respond(
            async {
                let t = Trajectory::from(trajectory.ok_or_else(|| BankError::invalid("trajectory", "is required"))?);
                let o = options(None, use_groundtruth, 0, 0)?;
                learn::validate(std::slice::from_ref(&vec![t.clone()]), &o)
                    .map_err(|e| rename(e, "groups[0].trajectories[0]", "trajectory"))?;
                let llm = self.banks.require_llm("learning from groups")?;
                let summary = learn::summarize(&llm, &t, o.use_groundtruth)
                    .await
                    .map_err(|message| BankError::Llm(LlmError::BadReply { message }))?;
                Ok(pb::SummarizeTrajectoryResponse { summary })
            }
            .await,
        )
    }

    async fn extract_group_operations(
        &self,
        request: Request<pb::ExtractGroupOperationsRequest>,
    ) -> Result<Response<pb::ExtractGroupOperationsResponse>, Status> {
        let pb::ExtractGroupOperationsRequest { trajectories, experiences, max_operations, use_groundtruth, variation, mode } =
            request.into_inner();
        respond(
            async {
                let o = options(max_operations, use_groundtruth, variation, mode)?;
                learn::check_library("experiences", &experiences)?;
                let group: Vec<Trajectory> = trajectories.into_iter().map(Trajectory::from).collect();
                learn::validate(std::slice::from_ref(&group), &o).map_err(|e| rename(e, "groups[0].trajectories", "trajectories"))?;
                let confidence = learn::variation(&group, o.variation);
                if confidence.is_none() {
                    return Ok(pb::ExtractGroupOperationsResponse {
                        operations_json: "[]".into(),
                        skipped: "no reward variation".into(),
                        ..Default::default()
                    });
                }
                let llm = self.banks.require_llm("learning from groups")?;
                Ok(match learn::extract(&llm, &group, &experiences, &o, &self.banks.op_limits()).await {
                    Ok((ops, rejected, critique)) => pb::ExtractGroupOperationsResponse {
                        operations_json: ops_json(&ops),
                        rejected,
                        critique: critique.unwrap_or_default(),
                        confidence,
                        skipped: String::new(),
                    },
                    Err(why) => {
                        pb::ExtractGroupOperationsResponse { operations_json: "[]".into(), confidence, skipped: why, ..Default::default() }
                    }
                })
            }
            .await,
        )
    }

    async fn consolidate_operations(
        &self,
        request: Request<pb::ConsolidateOperationsRequest>,
    ) -> Result<Response<pb::ConsolidateOperationsResponse>, Status> {
        let pb::ConsolidateOperationsRequest { group_operations_json, experiences } = request.into_inner();
        respond(
            async {
                let limits = self.banks.op_limits();
                learn::check_library("experiences", &experiences)?;
                if group_operations_json.len() > learn::MAX_GROUPS {
                    return Err(BankError::ResourceExhausted {
                        message: format!(
                            "group_operations_json holds {} groups; at most {}",
                            group_operations_json.len(),
                            learn::MAX_GROUPS
                        ),
                    });
                }
                let mut groups = Vec::with_capacity(group_operations_json.len());
                let mut rejected = Vec::new();
                for (i, json) in group_operations_json.iter().enumerate() {
                    let (ops, bad) = learn::read_operations(json, limits.max_ops, &limits)
                        .map_err(|e| BankError::invalid(&format!("group_operations_json[{i}]"), e))?;
                    rejected.extend(bad.into_iter().map(|b| format!("group_operations_json[{i}]: {b}")));
                    groups.push(ops);
                }
                let llm = self.banks.require_llm("learning from groups")?;
                Ok(match learn::consolidate(&llm, &groups, &experiences, &limits).await {
                    Ok((plan, bad)) => {
                        rejected.extend(bad);
                        pb::ConsolidateOperationsResponse { operations_json: ops_json(&plan), rejected, fallback: String::new() }
                    }
                    Err(why) => pb::ConsolidateOperationsResponse {
                        operations_json: ops_json(&groups.into_iter().flatten().collect::<Vec<_>>()),
                        rejected,
                        fallback: format!("{why}; the groups' operations flattened"),
                    },
                })
            }
            .await,
        )
    }
}

/// An error of [`learn::validate`] with its field path rewritten for a stage RPC's request.
fn rename(e: BankError, from: &str, to: &str) -> BankError {
    if let BankError::InvalidArgument(Invalid { field, message }) = e {
        return BankError::invalid(&field.replacen(from, to, 1), message);
    }
    e
}
