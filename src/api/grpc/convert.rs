//! Conversions between protobuf messages and domain types.
//!
//! Input conversions are `TryFrom` impls that destructure the message completely, so adding a field to
//! the .proto is a compile error here until it is handled. Unknown enum values (proto3 keeps them as
//! integers) are InvalidArgument naming the field. Output conversions are `From` impls.

use tonic::Status;

use crate::api::pb;
use crate::dataset::{Question, Split};
use crate::episode::{CreateRequest, EpisodeSource, EpisodeState, ForkRequest, NewMemory, StepInfo, ToolResult, TraceEntry};
use crate::memory::{MemoryRecord, MemoryType};
use crate::reward::{Evaluator, RewardBreakdown};
use crate::tools::ManageOpKind;
use crate::tools::{
    MergeStrategy, OutputKind, RawDelete, RawManage, RawMerge, RawSample, RawSearch, RawSplit, SampleStrategy, SplitCriteria, ToolError,
};

fn bad(field: &str, message: impl Into<String>) -> Status {
    crate::api::status::refusal(
        tonic::Code::InvalidArgument,
        "INVALID_ARGUMENT",
        format!("invalid argument {field}: {}", message.into()),
        Some(field),
    )
}

fn bad_enum(field: &str, v: i32) -> ToolError {
    ToolError::invalid(field, format!("unknown enum value {v}"))
}

/// `MEMORY_TYPE_UNSPECIFIED` → `None`.
pub fn memory_type_in(field: &str, v: i32) -> Result<Option<MemoryType>, ToolError> {
    match pb::MemoryType::try_from(v).map_err(|_| bad_enum(field, v))? {
        pb::MemoryType::Unspecified => Ok(None),
        pb::MemoryType::Episodic => Ok(Some(MemoryType::Episodic)),
        pb::MemoryType::Semantic => Ok(Some(MemoryType::Semantic)),
        pb::MemoryType::Procedural => Ok(Some(MemoryType::Procedural)),
    }
}

fn memory_type_out(t: MemoryType) -> pb::MemoryType {
    match t {
        MemoryType::Episodic => pb::MemoryType::Episodic,
        MemoryType::Semantic => pb::MemoryType::Semantic,
        MemoryType::Procedural => pb::MemoryType::Procedural,
    }
}

/// Empty string → `None` (proto3 cannot tell unset from empty).
fn opt(s: String) -> Option<String> {
    (!s.trim().is_empty()).then_some(s)
}

/// A typed tool request: its episode id, and its arguments or the refusal of one (an unknown enum
/// value), which the caller counts against the episode like any other refused call.
#[derive(Debug)]
pub struct Typed<Raw> {
    /// The episode id (not empty).
    pub episode_id: String,
    /// The unvalidated arguments, or why they could not even be read.
    pub raw: Result<Raw, ToolError>,
}

/// Checks the episode id, then reads the arguments.
fn typed<Raw>(id: String, raw: impl FnOnce() -> Result<Raw, ToolError>) -> Result<Typed<Raw>, Status> {
    Ok(Typed { episode_id: episode_id(id)?, raw: raw() })
}

/// The episode id of a tool request: required.
pub fn episode_id(id: String) -> Result<String, Status> {
    if id.trim().is_empty() {
        return Err(bad("episode_id", "is required"));
    }
    Ok(id)
}

impl From<&MemoryRecord> for pb::Memory {
    fn from(r: &MemoryRecord) -> Self {
        pb::Memory {
            id: r.id.to_string(),
            text: r.text.clone(),
            memory_type: memory_type_out(r.memory_type) as i32,
            speaker: r.speaker.clone().unwrap_or_default(),
            session: r.session,
            session_date: r.session_date.clone().unwrap_or_default(),
            evidence: r.evidence.clone(),
            source: r.source.clone(),
            created_step: r.created_step,
        }
    }
}

impl From<EpisodeState> for pb::EpisodeState {
    fn from(s: EpisodeState) -> Self {
        let steps_left = s.steps_left();
        pb::EpisodeState {
            episode_id: s.episode_id,
            conversation_id: s.conversation_id.unwrap_or_default(),
            question_id: s.question_id.unwrap_or_default(),
            question: s.question,
            steps_used: s.steps_used,
            steps_left,
            max_steps: s.max_steps,
            memory_count: s.memory_count as u32,
            initial_memory_count: s.initial_memory_count as u32,
            done: s.done,
            scored: s.scored,
            seed: s.seed,
            rejected_calls: s.rejected_calls,
            evaluator: evaluator_out(s.evaluator) as i32,
        }
    }
}

impl From<TraceEntry> for pb::TraceEntry {
    fn from(t: TraceEntry) -> Self {
        pb::TraceEntry {
            step: t.step,
            tool_name: t.tool_name.to_string(),
            arguments_json: t.arguments_json,
            result_ids: t.result_ids.iter().map(ToString::to_string).collect(),
        }
    }
}

impl From<StepInfo> for pb::StepInfo {
    fn from(s: StepInfo) -> Self {
        pb::StepInfo { step: s.step, steps_left: s.steps_left, done: s.done }
    }
}

impl From<&RewardBreakdown> for pb::ScoreEpisodeResponse {
    fn from(b: &RewardBreakdown) -> Self {
        let ids = |v: &[crate::memory::MemoryId]| v.iter().map(ToString::to_string).collect();
        pb::ScoreEpisodeResponse {
            p_old: b.old.p,
            p_new: b.new.p,
            performance_delta: b.performance_delta,
            size_factor: b.efficiency.size_factor,
            density_factor: b.efficiency.density_factor,
            change_factor: b.efficiency.change_factor,
            memory_efficiency: b.efficiency.memory_efficiency,
            reward: b.reward,
            evidence_recall_old: b.old.evidence_recall,
            evidence_recall_new: b.new.evidence_recall,
            initial_memory_count: b.sizes.old_count as u32,
            final_memory_count: b.sizes.new_count as u32,
            n_max: b.sizes.n_max as u32,
            top_k: b.top_k as u32,
            evaluator: b.evaluator.to_string(),
            embedder: b.embedder.clone(),
            retrieved_old: ids(&b.old.retrieved),
            retrieved_new: ids(&b.new.retrieved),
            evidence_total: b.evidence_total as u32,
            steps_used: 0,
            llm_model: b.llm_model.clone().unwrap_or_default(),
            answer_old: b.old.answer.clone().unwrap_or_default(),
            answer_new: b.new.answer.clone().unwrap_or_default(),
            f1_old: b.old.f1,
            f1_new: b.new.f1,
            judge_old: b.old.judge,
            judge_new: b.new.judge,
            reward_formula: b.formula.name().to_string(),
            growth: b.growth,
            context: b.context.name().to_string(),
            context_chars_old: b.old.context_chars as u32,
            context_chars_new: b.new.context_chars as u32,
            metrics: std::collections::HashMap::new(),
            others: b.others.as_ref().map(|o| pb::OtherQuestions {
                count: o.count as u32,
                rescored: o.rescored as u32,
                improved: o.improved as u32,
                damaged: o.damaged as u32,
                mean_delta: o.mean_delta,
                gain: o.gain,
                damage: o.damage,
                llm_scored: o.llm_scored as u32,
                evaluator: o.evaluator.to_string(),
                destroyed: o.destroyed,
                displaced: o.displaced,
            }),
            others_term: b.others_term,
            words_initial: b.ledger.base as u32,
            words_added: b.ledger.added as u32,
            words_removed: b.ledger.removed as u32,
        }
    }
}

impl TryFrom<pb::NewMemory> for NewMemory {
    type Error = ToolError;
    fn try_from(m: pb::NewMemory) -> Result<Self, Self::Error> {
        let pb::NewMemory { text, memory_type, speaker, session, session_date, evidence, source } = m;
        Ok(NewMemory {
            text,
            memory_type: memory_type_in("custom.memories.memory_type", memory_type)?.unwrap_or(MemoryType::Episodic),
            speaker: opt(speaker),
            session,
            session_date: opt(session_date),
            evidence,
            source: opt(source),
        })
    }
}

impl TryFrom<pb::ForkEpisodeRequest> for ForkRequest {
    type Error = Status;
    fn try_from(r: pb::ForkEpisodeRequest) -> Result<Self, Self::Error> {
        let pb::ForkEpisodeRequest { episode_id: id, count, fork_ids, seeds } = r;
        Ok(ForkRequest { episode_id: episode_id(id)?, count: count as usize, fork_ids, seeds })
    }
}

impl TryFrom<pb::CreateEpisodeRequest> for CreateRequest {
    type Error = Status;
    fn try_from(r: pb::CreateEpisodeRequest) -> Result<Self, Self::Error> {
        let pb::CreateEpisodeRequest { episode_id, conversation_id, question_id, custom, seed, max_steps, include_adversarial, evaluator } =
            r;
        let evaluator = evaluator_in(evaluator)?;
        let source = match (opt(question_id), custom) {
            (Some(_), Some(_)) => return Err(bad("custom", "give either question_id or custom, not both")),
            (Some(q), None) => EpisodeSource::Locomo {
                question_id: q.trim().to_string(),
                conversation_id: opt(conversation_id).map(|c| c.trim().to_string()),
            },
            (None, Some(c)) => {
                if opt(conversation_id).is_some() {
                    return Err(bad("conversation_id", "is not used with custom"));
                }
                let pb::CustomEpisode { memories, question, answer, evidence } = c;
                let memories = memories.into_iter().map(NewMemory::try_from).collect::<Result<Vec<_>, _>>().map_err(Status::from)?;
                EpisodeSource::Custom { memories, question, answer, evidence }
            }
            (None, None) => return Err(bad("question_id", "is required (or custom)")),
        };
        Ok(CreateRequest { episode_id: opt(episode_id), source, seed, max_steps, include_adversarial, evaluator })
    }
}

impl TryFrom<pb::SearchRequest> for Typed<RawSearch> {
    type Error = Status;
    fn try_from(r: pb::SearchRequest) -> Result<Self, Self::Error> {
        let pb::SearchRequest { episode_id: id, query, top_k, threshold, memory_type, speaker, session } = r;
        typed(id, move || {
            let raw = RawSearch {
                query: Some(query),
                top_k: top_k.map(i64::from),
                threshold: threshold.map(f64::from),
                memory_type: memory_type_in("memory_type", memory_type)?,
                speaker: opt(speaker),
                session: session.map(i64::from),
            };
            Ok(raw)
        })
    }
}

impl TryFrom<pb::ManageRequest> for Typed<RawManage> {
    type Error = Status;
    fn try_from(r: pb::ManageRequest) -> Result<Self, Self::Error> {
        let pb::ManageRequest { episode_id: id, operation, content, memory_id, memory_type, speaker, source } = r;
        typed(id, move || {
            let operation = match pb::ManageOperation::try_from(operation).map_err(|_| bad_enum("operation", operation))? {
                pb::ManageOperation::Unspecified => None,
                pb::ManageOperation::Create => Some(ManageOpKind::Create),
                pb::ManageOperation::Update => Some(ManageOpKind::Update),
            };
            let raw = RawManage {
                operation,
                content: Some(content),
                memory_id: opt(memory_id),
                memory_type: memory_type_in("memory_type", memory_type)?,
                speaker: opt(speaker),
                source: opt(source),
            };
            Ok(raw)
        })
    }
}

impl TryFrom<pb::DeleteRequest> for Typed<RawDelete> {
    type Error = Status;
    fn try_from(r: pb::DeleteRequest) -> Result<Self, Self::Error> {
        let pb::DeleteRequest { episode_id: id, memory_ids, reason } = r;
        typed(id, move || Ok(RawDelete { memory_id: None, memory_ids: Some(memory_ids), reason: opt(reason) }))
    }
}

impl TryFrom<pb::SampleRequest> for Typed<RawSample> {
    type Error = Status;
    fn try_from(r: pb::SampleRequest) -> Result<Self, Self::Error> {
        let pb::SampleRequest { episode_id: id, k, strategy, memory_type } = r;
        typed(id, move || {
            let strategy = match pb::SampleStrategy::try_from(strategy).map_err(|_| bad_enum("strategy", strategy))? {
                pb::SampleStrategy::Unspecified => None,
                pb::SampleStrategy::Random => Some(SampleStrategy::Random),
                pb::SampleStrategy::Diverse => Some(SampleStrategy::Diverse),
                pb::SampleStrategy::Recent => Some(SampleStrategy::Recent),
            };
            let raw = RawSample { k: k.map(i64::from), strategy, memory_type: memory_type_in("memory_type", memory_type)? };
            Ok(raw)
        })
    }
}

impl TryFrom<pb::MergeRequest> for Typed<RawMerge> {
    type Error = Status;
    fn try_from(r: pb::MergeRequest) -> Result<Self, Self::Error> {
        let pb::MergeRequest { episode_id: id, memory_ids, strategy, content } = r;
        typed(id, move || {
            let strategy = match pb::MergeStrategy::try_from(strategy).map_err(|_| bad_enum("strategy", strategy))? {
                pb::MergeStrategy::Unspecified => None,
                pb::MergeStrategy::Summarize => Some(MergeStrategy::Summarize),
                pb::MergeStrategy::Concatenate => Some(MergeStrategy::Concatenate),
                pb::MergeStrategy::ExtractCommon => Some(MergeStrategy::ExtractCommon),
            };
            Ok(RawMerge { memory_ids: Some(memory_ids), strategy, content })
        })
    }
}

impl TryFrom<pb::SplitRequest> for Typed<RawSplit> {
    type Error = Status;
    fn try_from(r: pb::SplitRequest) -> Result<Self, Self::Error> {
        let pb::SplitRequest { episode_id: id, memory_id, split_criteria, max_parts, parts } = r;
        typed(id, move || {
            let criteria = match pb::SplitCriteria::try_from(split_criteria).map_err(|_| bad_enum("split_criteria", split_criteria))? {
                pb::SplitCriteria::Unspecified => None,
                pb::SplitCriteria::Temporal => Some(SplitCriteria::Temporal),
                pb::SplitCriteria::Thematic => Some(SplitCriteria::Thematic),
                pb::SplitCriteria::Speaker => Some(SplitCriteria::Speaker),
            };
            let raw = RawSplit {
                memory_id: opt(memory_id),
                split_criteria: criteria,
                max_parts: max_parts.map(i64::from),
                parts: (!parts.is_empty()).then_some(parts),
            };
            Ok(raw)
        })
    }
}

/// Per-step metrics by name, as the responses' `metrics` maps carry them.
pub fn named(pairs: &[(&'static str, f64)]) -> std::collections::HashMap<String, f64> {
    pairs.iter().map(|(k, v)| ((*k).to_string(), *v)).collect()
}

/// A tool result as the typed response of its tool, plus the text.
pub fn tool_result(r: ToolResult) -> (String, pb::call_tool_response::Result) {
    use pb::call_tool_response::Result as R;
    let step = Some(pb::StepInfo::from(r.step));
    let text = r.output.text;
    let out = match r.output.kind {
        OutputKind::Search { hits, .. } => R::Search(pb::SearchResponse {
            results: hits.iter().map(|(score, m)| pb::ScoredMemory { memory: Some(m.into()), score: *score }).collect(),
            text: text.clone(),
            step,
        }),
        OutputKind::Created(m) | OutputKind::Updated(m) => {
            R::Manage(pb::ManageResponse { memory: Some((&m).into()), text: text.clone(), step })
        }
        OutputKind::Deleted { ids, remaining } => R::Delete(pb::DeleteResponse {
            deleted_ids: ids.iter().map(ToString::to_string).collect(),
            memory_count: remaining as u32,
            text: text.clone(),
            step,
        }),
        OutputKind::Sampled(ms) => {
            R::Sample(pb::SampleResponse { memories: ms.iter().map(pb::Memory::from).collect(), text: text.clone(), step })
        }
        OutputKind::Merged { memory, removed } => R::Merge(pb::MergeResponse {
            memory: Some((&memory).into()),
            removed_ids: removed.iter().map(ToString::to_string).collect(),
            text: text.clone(),
            step,
        }),
        OutputKind::Split { parts, removed } => R::Split(pb::SplitResponse {
            parts: parts.iter().map(pb::Memory::from).collect(),
            removed_id: removed.to_string(),
            text: text.clone(),
            step,
        }),
    };
    (text, out)
}

/// Split → protobuf enum.
pub fn split_out(s: Split) -> pb::Split {
    match s {
        Split::Train => pb::Split::Train,
        Split::Test => pb::Split::Test,
    }
}

/// Split filter: unspecified → `None`.
pub fn split_in(v: i32) -> Result<Option<Split>, Status> {
    match pb::Split::try_from(v).map_err(|_| bad("split", format!("unknown enum value {v}")))? {
        pb::Split::Unspecified => Ok(None),
        pb::Split::Train => Ok(Some(Split::Train)),
        pb::Split::Test => Ok(Some(Split::Test)),
    }
}

impl From<&Question> for pb::QuestionRecord {
    fn from(q: &Question) -> Self {
        pb::QuestionRecord {
            id: q.id.clone(),
            conversation_id: q.conversation_id.clone(),
            question: q.question.clone(),
            answer: q.answer.clone().unwrap_or_default(),
            category: u32::from(q.category),
            evidence: q.evidence.clone(),
            split: split_out(q.split) as i32,
            adversarial_answer: q.adversarial_answer.clone().unwrap_or_default(),
            gold_status: q.gold.status.name().to_string(),
            gold_error_type: q.gold.error_type.clone().unwrap_or_default(),
            corrected_answer: q.gold.corrected_answer.clone().unwrap_or_default(),
            corrected_evidence: q.gold.corrected_evidence.clone().unwrap_or_default(),
        }
    }
}

/// Page size with a default and a cap.
pub fn page_size(v: u32, default: u32, max: u32) -> Result<usize, Status> {
    match v {
        0 => Ok(default as usize),
        n if n <= max => Ok(n as usize),
        n => Err(bad("page_size", format!("must be at most {max}, got {n}"))),
    }
}

/// The proto enum of an evaluator.
pub(crate) fn evaluator_out(e: Evaluator) -> pb::Evaluator {
    match e {
        Evaluator::AnswerPhrase => pb::Evaluator::AnswerPhrase,
        Evaluator::AnswerRecall => pb::Evaluator::AnswerRecall,
        Evaluator::LlmF1 => pb::Evaluator::LlmF1,
        Evaluator::LlmJudge => pb::Evaluator::LlmJudge,
    }
}

/// The evaluator of a request (`None` when unspecified); an unknown number is InvalidArgument.
fn evaluator_in(v: i32) -> Result<Option<Evaluator>, Status> {
    match pb::Evaluator::try_from(v) {
        Ok(pb::Evaluator::Unspecified) => Ok(None),
        Ok(pb::Evaluator::AnswerPhrase) => Ok(Some(Evaluator::AnswerPhrase)),
        Ok(pb::Evaluator::AnswerRecall) => Ok(Some(Evaluator::AnswerRecall)),
        Ok(pb::Evaluator::LlmF1) => Ok(Some(Evaluator::LlmF1)),
        Ok(pb::Evaluator::LlmJudge) => Ok(Some(Evaluator::LlmJudge)),
        Err(_) => Err(bad("evaluator", format!("unknown value {v}"))),
    }
}

#[cfg(test)]
#[path = "convert_fuzz.rs"]
mod fuzz;
