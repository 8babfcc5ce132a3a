//! `memgym.v1.AgentMemory`: thin handlers over the agent banks ([`crate::banks::agent`]). Each handler
//! destructures its request completely, converts, calls the banks and converts back; errors go through
//! the one `Status` map. Requests run in a tracing span naming the bank; memory texts are never logged.

use std::sync::Arc;

use tonic::{Request, Response, Status};
use tracing::Instrument;

use crate::api::grpc::banks_service::respond;
use crate::api::pb;
use crate::api::pb::agent_memory_server::AgentMemory as AgentRpc;
use crate::banks::agent::{CardInput, CardOutcome, ConsolidateMode, Episode, DEFAULT_MAX_RECENT, DEFAULT_MAX_RULES};
use crate::banks::{BankError, Banks};
use crate::util::excerpt::name;

/// The AgentMemory service.
#[derive(Debug, Clone)]
pub struct AgentService {
    banks: Arc<Banks>,
}

impl AgentService {
    /// Serves the agent banks of `banks`.
    pub fn new(banks: Arc<Banks>) -> Self {
        AgentService { banks }
    }
}

/// An empty proto string is an absent value.
fn given(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

impl From<pb::MistakeCardInput> for CardInput {
    fn from(c: pb::MistakeCardInput) -> Self {
        let pb::MistakeCardInput { mistake_type, task_id, worker_id, bad_decision, correct_decision, evidence, lesson } = c;
        CardInput {
            mistake_type: given(mistake_type),
            task_id: given(task_id),
            worker_id: given(worker_id),
            bad_decision: given(bad_decision),
            correct_decision: given(correct_decision),
            evidence: given(evidence),
            lesson: given(lesson),
        }
    }
}

fn mode_in(v: i32) -> Result<ConsolidateMode, BankError> {
    match pb::ConsolidationMode::try_from(v).map_err(|_| BankError::invalid("mode", format!("unknown enum value {v}")))? {
        pb::ConsolidationMode::Unspecified | pb::ConsolidationMode::Auto => Ok(ConsolidateMode::Auto),
        pb::ConsolidationMode::Heuristic => Ok(ConsolidateMode::Heuristic),
        pb::ConsolidationMode::Llm => Ok(ConsolidateMode::Llm),
    }
}

#[tonic::async_trait]
impl AgentRpc for AgentService {
    async fn record_episode(&self, request: Request<pb::RecordEpisodeRequest>) -> Result<Response<pb::RecordEpisodeResponse>, Status> {
        let pb::RecordEpisodeRequest {
            bank,
            task_id,
            score,
            steps,
            trajectory_summary,
            mistakes,
            successes,
            mistake_cards,
            expected_version,
        } = request.into_inner();
        let span = tracing::info_span!("record_episode", bank = %name(&bank));
        let episode = Episode {
            task_id,
            score,
            steps,
            trajectory_summary: given(trajectory_summary),
            mistakes,
            successes,
            mistake_cards: mistake_cards.into_iter().map(CardInput::from).collect(),
        };
        respond(
            async {
                let (o, meta) = self.banks.record_episode(&bank, &episode, expected_version).await?;
                Ok(pb::RecordEpisodeResponse {
                    version: meta.version,
                    total_episodes: o.total_episodes,
                    task_id: o.task_id,
                    rules_added: o.rules_added,
                    cards: o
                        .cards
                        .into_iter()
                        .map(|c| match c {
                            CardOutcome::New { kept } => pb::CardResult { new: true, kept, seen_count: 1 },
                            CardOutcome::Matched { seen_count } => pb::CardResult { new: false, kept: true, seen_count },
                        })
                        .collect(),
                })
            }
            .instrument(span)
            .await,
        )
    }

    async fn build_memory_context(
        &self,
        request: Request<pb::BuildMemoryContextRequest>,
    ) -> Result<Response<pb::BuildMemoryContextResponse>, Status> {
        let pb::BuildMemoryContextRequest { bank, task_id, max_rules, max_recent } = request.into_inner();
        let rules = max_rules.map_or(DEFAULT_MAX_RULES, |n| n as usize);
        let recent = max_recent.map_or(DEFAULT_MAX_RECENT, |n| n as usize);
        respond(
            self.banks
                .memory_context(&bank, task_id.as_deref(), rules, recent)
                .await
                .map(|context| pb::BuildMemoryContextResponse { context }),
        )
    }

    async fn maybe_consolidate(
        &self,
        request: Request<pb::MaybeConsolidateRequest>,
    ) -> Result<Response<pb::MaybeConsolidateResponse>, Status> {
        let pb::MaybeConsolidateRequest { bank, mode, force, expected_version } = request.into_inner();
        let span = tracing::info_span!("maybe_consolidate", bank = %name(&bank), force);
        respond(
            async {
                let (c, meta) = self.banks.consolidate(&bank, mode_in(mode)?, force, expected_version).await?;
                Ok(pb::MaybeConsolidateResponse {
                    ran: c.ran,
                    mode: c.mode.to_string(),
                    rules_added: c.rules_added,
                    error: c.error,
                    total_episodes: c.total_episodes,
                    last_consolidated_at: c.last_consolidated_at,
                    version: meta.version,
                })
            }
            .instrument(span)
            .await,
        )
    }

    async fn get_agent_summary(&self, request: Request<pb::GetAgentSummaryRequest>) -> Result<Response<pb::AgentSummary>, Status> {
        let pb::GetAgentSummaryRequest { bank } = request.into_inner();
        respond(self.banks.agent_summary(&bank).await.map(|(s, meta)| {
            pb::AgentSummary {
                total_episodes: s.total_episodes,
                global_rules: s.global_rules as u32,
                task_rules: s.task_rules.into_iter().map(|(k, n)| (k, n as u32)).collect(),
                mistakes_stored: s.mistakes_stored as u32,
                mistake_cards_stored: s.mistake_cards_stored as u32,
                top_mistake_cards: s
                    .top_mistake_cards
                    .into_iter()
                    .map(|c| pb::TopMistakeCard { mistake_type: c.mistake_type, task_id: c.task_id, seen_count: c.seen_count })
                    .collect(),
                scores_by_task: s.scores_by_task.into_iter().collect(),
                episodes_by_task: s.episodes_by_task.into_iter().map(|(k, n)| (k, n as u32)).collect(),
                version: meta.version,
            }
        }))
    }

    async fn import_agent_memory(
        &self,
        request: Request<pb::ImportAgentMemoryRequest>,
    ) -> Result<Response<pb::ImportAgentMemoryResponse>, Status> {
        let pb::ImportAgentMemoryRequest { bank, data, replace, expected_version } = request.into_inner();
        let span = tracing::info_span!("import_agent_memory", bank = %name(&bank), replace);
        respond(
            async {
                let (meta, total_episodes) = self.banks.import_agent(&bank, &data, replace, expected_version).await?;
                Ok(pb::ImportAgentMemoryResponse { version: meta.version, total_episodes })
            }
            .instrument(span)
            .await,
        )
    }

    async fn export_agent_memory(
        &self,
        request: Request<pb::ExportAgentMemoryRequest>,
    ) -> Result<Response<pb::ExportAgentMemoryResponse>, Status> {
        let pb::ExportAgentMemoryRequest { bank } = request.into_inner();
        respond(self.banks.export_agent(&bank).await.map(|data| pb::ExportAgentMemoryResponse { data }))
    }
}
