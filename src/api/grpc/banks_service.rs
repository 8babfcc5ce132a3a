//! `memgym.v1.Banks`: thin handlers over [`crate::banks::Banks`]. Each handler destructures its request
//! completely (a new proto field is a compile error here until it is handled), converts, calls the
//! banks, and converts back; errors go through the one `Status` map. Requests run in a tracing span
//! naming the bank; experience texts are never logged above debug.

use std::sync::Arc;

use tonic::{Request, Response, Status};
use tracing::Instrument;

use crate::api::grpc::convert::page_size;
use crate::api::grpc::page;
use crate::api::pb;
use crate::api::pb::banks_server::Banks as BanksRpc;
use crate::banks::experience::{group_confidence, NewFields, OpOutcome, OpStatus};
use crate::banks::formats::Format;
use crate::banks::semantic::{self, Query, DEFAULT_MERGE_THRESHOLD, DEFAULT_PROMPT_TOP_K, DEFAULT_TOP_K};
use crate::banks::store::BankMeta;
use crate::banks::{show_id, BankError, Banks, Experience, Kind};
use crate::util::excerpt::name;

/// The Banks service.
#[derive(Debug, Clone)]
pub struct BanksService {
    banks: Arc<Banks>,
}

impl BanksService {
    /// Serves `banks`.
    pub fn new(banks: Arc<Banks>) -> Self {
        BanksService { banks }
    }
}

/// The response, or the error's `Status`, logged by [`crate::api::status::logged`].
pub(super) fn respond<T>(r: Result<T, BankError>) -> Result<Response<T>, Status> {
    crate::api::status::logged(r.map(Response::new).map_err(Status::from))
}

fn bank_out(m: &BankMeta, size: usize) -> pb::Bank {
    pb::Bank {
        name: m.name.clone(),
        kind: kind_out(&m.kind).into(),
        version: m.version,
        size: size as u32,
        next_id: m.next_id,
        epoch: m.epoch,
        max_size: m.max_size,
        embedder: Some(pb::EmbedderInfo {
            name: m.embedder_name.clone(),
            dim: m.embedder_dim,
            fingerprint: m.embedder_fingerprint.clone(),
        }),
        created_at: m.created_at.clone(),
    }
}

impl From<&Experience> for pb::Experience {
    fn from(e: &Experience) -> Self {
        pb::Experience {
            id: show_id(e.id),
            text: e.text.clone(),
            confidence: e.confidence,
            domain: e.domain.clone(),
            created_epoch: e.created_epoch,
            usage_count: e.usage_count,
            last_used_epoch: e.last_used_epoch,
        }
    }
}

fn written(e: &Experience, m: &BankMeta) -> pb::WriteResponse {
    pb::WriteResponse { version: m.version, id: show_id(e.id), experience: Some(e.into()) }
}

fn kind_in(v: i32) -> Result<Kind, BankError> {
    match pb::BankKind::try_from(v).map_err(|_| BankError::invalid("kind", format!("unknown enum value {v}")))? {
        pb::BankKind::Unspecified | pb::BankKind::Experience => Ok(Kind::Experience),
        pb::BankKind::Agent => Ok(Kind::Agent),
    }
}

fn kind_out(stored: &str) -> pb::BankKind {
    match Kind::parse(stored) {
        Some(Kind::Experience) => pb::BankKind::Experience,
        Some(Kind::Agent) => pb::BankKind::Agent,
        None => pb::BankKind::Unspecified,
    }
}

fn format_in(v: i32) -> Result<Format, BankError> {
    match pb::BankFormat::try_from(v).map_err(|_| BankError::invalid("format", format!("unknown enum value {v}")))? {
        pb::BankFormat::Unspecified => Err(BankError::invalid("format", "is required (SEED_JSON, UPSTREAM_JSON or MEMGYM_JSON)")),
        pb::BankFormat::SeedJson => Ok(Format::Seed),
        pb::BankFormat::UpstreamJson => Ok(Format::Upstream),
        pb::BankFormat::MemgymJson => Ok(Format::Memgym),
    }
}

pub(super) fn outcome_out(o: OpOutcome) -> pb::OperationResult {
    let status = match o.status {
        OpStatus::Applied => pb::OperationStatus::Applied,
        OpStatus::Kept => pb::OperationStatus::Kept,
        OpStatus::NotFound => pb::OperationStatus::NotFound,
        OpStatus::Invalid => pb::OperationStatus::Invalid,
    };
    pb::OperationResult {
        index: o.index as u32,
        kind: o.kind.to_string(),
        status: status.into(),
        id: o.id.map(show_id).unwrap_or_default(),
        removed_ids: o.removed.into_iter().map(show_id).collect(),
        message: o.message,
        ignored_keys: o.ignored_keys,
    }
}

#[tonic::async_trait]
impl BanksRpc for BanksService {
    async fn create_bank(&self, request: Request<pb::CreateBankRequest>) -> Result<Response<pb::Bank>, Status> {
        let pb::CreateBankRequest { name: bank, kind, max_size, if_not_exists } = request.into_inner();
        let span = tracing::info_span!("create_bank", bank = %name(&bank));
        respond(
            async {
                self.banks.create(&bank, kind_in(kind)?, max_size, if_not_exists).await?;
                let (meta, size) = self.banks.describe(&bank).await?;
                Ok(bank_out(&meta, size))
            }
            .instrument(span)
            .await,
        )
    }

    async fn get_bank(&self, request: Request<pb::GetBankRequest>) -> Result<Response<pb::Bank>, Status> {
        let pb::GetBankRequest { name: bank } = request.into_inner();
        respond(self.banks.describe(&bank).await.map(|(m, n)| bank_out(&m, n)))
    }

    async fn list_banks(&self, _request: Request<pb::ListBanksRequest>) -> Result<Response<pb::ListBanksResponse>, Status> {
        respond(
            async { Ok(pb::ListBanksResponse { banks: self.banks.list().await?.iter().map(|(m, n)| bank_out(m, *n)).collect() }) }.await,
        )
    }

    async fn delete_bank(&self, request: Request<pb::DeleteBankRequest>) -> Result<Response<pb::DeleteBankResponse>, Status> {
        let pb::DeleteBankRequest { name: bank, expected_version } = request.into_inner();
        let span = tracing::info_span!("delete_bank", bank = %name(&bank));
        respond(self.banks.delete(&bank, expected_version).instrument(span).await.map(|()| pb::DeleteBankResponse {}))
    }

    async fn add_experience(&self, request: Request<pb::AddExperienceRequest>) -> Result<Response<pb::WriteResponse>, Status> {
        let pb::AddExperienceRequest { bank, text, confidence, domain, epoch, expected_version, group_advantages } = request.into_inner();
        let span = tracing::info_span!("add_experience", bank = %name(&bank));
        respond(
            async {
                let confidence = match (confidence, group_advantages.is_empty()) {
                    (Some(c), _) => Some(c),
                    (None, true) => None,
                    (None, false) => Some(group_confidence(&group_advantages)?.ok_or_else(|| BankError::FailedPrecondition {
                        message: "group_advantages: the group has no variation (max − min below 1e-9); nothing was added".into(),
                    })?),
                };
                let (e, m) = self.banks.add(&bank, &text, NewFields { confidence, domain, epoch }, expected_version).await?;
                Ok(written(&e, &m))
            }
            .instrument(span)
            .await,
        )
    }

    async fn modify_experience(&self, request: Request<pb::ModifyExperienceRequest>) -> Result<Response<pb::WriteResponse>, Status> {
        let pb::ModifyExperienceRequest { bank, id, text, confidence, domain, expected_version } = request.into_inner();
        let span = tracing::info_span!("modify_experience", bank = %name(&bank), id = %name(&id));
        respond(
            self.banks
                .modify(&bank, &id, &text, confidence, domain.as_deref(), expected_version)
                .instrument(span)
                .await
                .map(|(e, m)| written(&e, &m)),
        )
    }

    async fn delete_experience(&self, request: Request<pb::DeleteExperienceRequest>) -> Result<Response<pb::WriteResponse>, Status> {
        let pb::DeleteExperienceRequest { bank, id, expected_version } = request.into_inner();
        let span = tracing::info_span!("delete_experience", bank = %name(&bank), id = %name(&id));
        respond(self.banks.delete_experience(&bank, &id, expected_version).instrument(span).await.map(|m| pb::WriteResponse {
            version: m.version,
            id: id.trim().to_uppercase(),
            experience: None,
        }))
    }

    async fn merge_experiences(&self, request: Request<pb::MergeExperiencesRequest>) -> Result<Response<pb::WriteResponse>, Status> {
        let pb::MergeExperiencesRequest { bank, ids, text, confidence, domain, expected_version } = request.into_inner();
        let span = tracing::info_span!("merge_experiences", bank = %name(&bank));
        respond(
            self.banks
                .merge(&bank, &ids, &text, confidence, domain.as_deref(), expected_version)
                .instrument(span)
                .await
                .map(|(e, m)| written(&e, &m)),
        )
    }

    async fn apply_operations(
        &self,
        request: Request<pb::ApplyOperationsRequest>,
    ) -> Result<Response<pb::ApplyOperationsResponse>, Status> {
        let pb::ApplyOperationsRequest { bank, operations_json, expected_version, partial, dry_run } = request.into_inner();
        let span = tracing::info_span!("apply_operations", bank = %name(&bank), partial, dry_run);
        respond(self.banks.apply_operations(&bank, &operations_json, partial, dry_run, expected_version).instrument(span).await.map(
            |(outs, m)| {
                let applied = outs.iter().filter(|o| o.status == OpStatus::Applied).count() as u32;
                pb::ApplyOperationsResponse {
                    version: m.version,
                    applied: if dry_run { 0 } else { applied },
                    results: outs.into_iter().map(outcome_out).collect(),
                }
            },
        ))
    }

    async fn get_experience(&self, request: Request<pb::GetExperienceRequest>) -> Result<Response<pb::Experience>, Status> {
        let pb::GetExperienceRequest { bank, id } = request.into_inner();
        respond(
            async {
                let n = crate::banks::experience::parse_id("id", &id)?;
                self.banks
                    .read(&bank, |lib| lib.get(n).map(|e| pb::Experience::from(&lib.with_usage(e))))
                    .await?
                    .ok_or_else(|| BankError::ExperienceNotFound { bank: bank.clone(), field: "id".into(), id: show_id(n) })
            }
            .await,
        )
    }

    async fn list_experiences(
        &self,
        request: Request<pb::ListExperiencesRequest>,
    ) -> Result<Response<pb::ListExperiencesResponse>, Status> {
        let pb::ListExperiencesRequest { bank, page_size: size, page_token, domain } = request.into_inner();
        let size = page_size(size, 100, 1_000)?;
        let key = page::listing_key(page::Rpc::Experiences, &[&bank, &domain]);
        let after = page::decode(page::Rpc::Experiences, key, &page_token)?;
        let domain = crate::banks::experience::domain_filter("domain", &domain)?;
        respond(
            self.banks
                .read(&bank, |lib| {
                    let matches = |e: &&Experience| domain.as_ref().is_none_or(|d| e.domain == *d);
                    let total = lib.iter().filter(matches).count();
                    let page: Vec<&Experience> =
                        lib.iter().filter(matches).filter(|e| after.is_none_or(|a| e.id >= a)).take(size + 1).collect();
                    let more = page.len() > size;
                    let next = if more { page.get(size).map(|e| page::encode(page::Rpc::Experiences, key, e.id)) } else { None };
                    pb::ListExperiencesResponse {
                        experiences: page.iter().take(size).map(|e| pb::Experience::from(&lib.with_usage(e))).collect(),
                        next_page_token: next.unwrap_or_default(),
                        total: total as u32,
                    }
                })
                .await,
        )
    }

    async fn format_for_prompt(
        &self,
        request: Request<pb::FormatForPromptRequest>,
    ) -> Result<Response<pb::FormatForPromptResponse>, Status> {
        let pb::FormatForPromptRequest { bank, query, top_k, domain, min_similarity, system, read_only } = request.into_inner();
        let span = tracing::info_span!("format_for_prompt", bank = %name(&bank));
        respond(
            async {
                if let Some(s) = &system {
                    crate::banks::experience::check_system("system", s)?;
                }
                let domain = crate::banks::experience::domain_filter("domain", &domain)?;
                let (text, ids) = if query.trim().is_empty() {
                    self.banks.format_all(&bank).await?
                } else {
                    let q = Query {
                        text: &query,
                        top_k: if top_k == 0 { DEFAULT_PROMPT_TOP_K } else { top_k as usize },
                        min_similarity,
                        domain: domain.as_deref(),
                        count: !read_only,
                    };
                    self.banks.format_relevant(&bank, q).await?
                };
                let text = match &system {
                    Some(s) => crate::banks::experience::inject(s, &text),
                    None => text,
                };
                Ok(pb::FormatForPromptResponse { text, ids: ids.into_iter().map(show_id).collect() })
            }
            .instrument(span)
            .await,
        )
    }

    async fn retrieve(&self, request: Request<pb::RetrieveRequest>) -> Result<Response<pb::RetrieveResponse>, Status> {
        let pb::RetrieveRequest { bank, query, top_k, min_similarity, domain, read_only } = request.into_inner();
        let span = tracing::info_span!("retrieve", bank = %name(&bank));
        respond(
            async {
                let domain = crate::banks::experience::domain_filter("domain", &domain)?;
                let q = Query {
                    text: &query,
                    top_k: if top_k == 0 { DEFAULT_TOP_K } else { top_k as usize },
                    min_similarity,
                    domain: domain.as_deref(),
                    count: !read_only,
                };
                let (hits, path) = self.banks.retrieve(&bank, q).await?;
                Ok(pb::RetrieveResponse {
                    hits: hits
                        .iter()
                        .map(|h| pb::RetrievedExperience {
                            id: show_id(h.exp.id),
                            similarity: h.similarity,
                            text: h.exp.text.clone(),
                            experience: Some((&h.exp).into()),
                        })
                        .collect(),
                    path: match path {
                        crate::memory::SearchPath::Exact => "exact",
                        crate::memory::SearchPath::Hnsw => "hnsw",
                    }
                    .into(),
                })
            }
            .instrument(span)
            .await,
        )
    }

    async fn set_epoch(&self, request: Request<pb::SetEpochRequest>) -> Result<Response<pb::WriteResponse>, Status> {
        let pb::SetEpochRequest { bank, epoch, expected_version } = request.into_inner();
        respond(self.banks.set_epoch(&bank, epoch, expected_version).await.map(|m| pb::WriteResponse {
            version: m.version,
            id: String::new(),
            experience: None,
        }))
    }

    async fn get_stats(&self, request: Request<pb::GetStatsRequest>) -> Result<Response<pb::BankStats>, Status> {
        let pb::GetStatsRequest { bank } = request.into_inner();
        respond(self.banks.stats(&bank).await.map(|s| pb::BankStats {
            total_experiences: s.total as u32,
            avg_confidence: s.avg_confidence,
            domains: s.domains.into_iter().map(|(k, v)| (k, v as u32)).collect(),
            total_usage: s.total_usage,
            used_experiences: s.used as u32,
            epoch: s.meta.epoch,
            version: s.meta.version,
            max_size: s.meta.max_size,
        }))
    }

    async fn compress(&self, request: Request<pb::CompressRequest>) -> Result<Response<pb::CompressResponse>, Status> {
        let pb::CompressRequest { bank, max_size, strategy, decay, seed, dry_run, expected_version } = request.into_inner();
        let span = tracing::info_span!("compress", bank = %name(&bank), strategy = %name(&strategy), dry_run);
        respond(
            async {
                let strategy = semantic::strategy("strategy", &strategy)?;
                let defaults = crate::banks::compress::Params::default();
                let params = crate::banks::compress::Params {
                    decay: decay.unwrap_or(defaults.decay),
                    seed: seed.unwrap_or(defaults.seed),
                    ..defaults
                };
                if !params.decay.is_finite() || params.decay < 0.0 {
                    return Err(BankError::invalid("decay", format!("must be a finite number >= 0, got {}", params.decay)));
                }
                let (removed, remaining, m) = self.banks.compress(&bank, max_size, strategy, params, dry_run, expected_version).await?;
                Ok(pb::CompressResponse {
                    removed_ids: removed.into_iter().map(show_id).collect(),
                    remaining: remaining as u32,
                    version: m.version,
                })
            }
            .instrument(span)
            .await,
        )
    }

    async fn merge_similar(&self, request: Request<pb::MergeSimilarRequest>) -> Result<Response<pb::MergeSimilarResponse>, Status> {
        let pb::MergeSimilarRequest { bank, threshold, use_llm, dry_run, expected_version } = request.into_inner();
        let span = tracing::info_span!("merge_similar", bank = %name(&bank), use_llm, dry_run);
        respond(
            async {
                let threshold = threshold.unwrap_or(DEFAULT_MERGE_THRESHOLD);
                let (groups, m) = self.banks.merge_similar(&bank, threshold, use_llm, dry_run, expected_version).await?;
                let merged = groups.iter().map(|g| g.sources.len() as u32).sum();
                Ok(pb::MergeSimilarResponse {
                    merged: if dry_run { 0 } else { merged },
                    groups: groups
                        .into_iter()
                        .map(|g| pb::MergedGroup {
                            source_ids: g.sources.into_iter().map(show_id).collect(),
                            new_id: g.new_id.map(show_id).unwrap_or_default(),
                            text: g.text,
                            note: g.note.unwrap_or_default(),
                        })
                        .collect(),
                    version: m.version,
                })
            }
            .instrument(span)
            .await,
        )
    }

    async fn import_bank(&self, request: Request<pb::ImportBankRequest>) -> Result<Response<pb::ImportBankResponse>, Status> {
        let pb::ImportBankRequest { bank, format, data, replace, expected_version } = request.into_inner();
        let span = tracing::info_span!("import_bank", bank = %name(&bank), replace);
        respond(
            async {
                let format = format_in(format)?;
                let (n, m) = self.banks.import(&bank, format, &data, replace, expected_version).await?;
                Ok(pb::ImportBankResponse { imported: n as u32, version: m.version, next_id: m.next_id })
            }
            .instrument(span)
            .await,
        )
    }

    async fn import_bank_stream(
        &self,
        request: Request<tonic::Streaming<pb::ImportBankChunk>>,
    ) -> Result<Response<pb::ImportBankResponse>, Status> {
        let mut stream = request.into_inner();
        let mut assembly = super::import_stream::Assembly::default();
        let mut received = 0usize;
        let (request, chunks) = loop {
            match stream.message().await {
                Ok(Some(chunk)) => {
                    received += 1;
                    if let Err(e) = assembly.push(chunk) {
                        return respond(Err(e));
                    }
                }
                Ok(None) => match assembly.finish() {
                    Ok(r) => break (r, received),
                    Err(e) => return respond(Err(e)),
                },
                // The client's stream broke (or sent a message over the cap): nothing was written.
                Err(status) => return crate::api::status::logged(Err(status)),
            }
        };
        tracing::debug!(chunks, bytes = request.data.len(), "import stream assembled");
        self.import_bank(Request::new(request)).await
    }

    async fn export_bank(&self, request: Request<pb::ExportBankRequest>) -> Result<Response<pb::ExportBankResponse>, Status> {
        let pb::ExportBankRequest { bank, format } = request.into_inner();
        respond(
            async {
                let (data, m) = self.banks.export(&bank, format_in(format)?).await?;
                Ok(pb::ExportBankResponse { data, version: m.version })
            }
            .await,
        )
    }
}
