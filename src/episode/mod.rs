//! Episodes: their lifecycle (create → tool calls → score → close), the registry that holds them, the
//! caps that protect the server, the idle reaper, and the remembered ids of ended episodes (ids are
//! never reused while remembered: a call on one is FAILED_PRECONDITION saying how and when it ended).
//!
//! [`Environment`] is the domain service the gRPC layer calls. It owns the dataset, one shared read-only
//! M₀ per conversation (built once at startup), the embedder, the registry and the `p_old` cache.
//! Creating an episode is O(1) in |M₀|: it makes an [`EpisodeMemory`] view of the shared M₀.

mod custom;
mod ended;
mod error;
mod limits;
mod registry;
mod score;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub use ended::{Ending, Tombstone};
pub use error::EpisodeError;
pub use limits::{Clock, Limits, ManualClock, SystemClock};
use parking_lot::Mutex;
pub use registry::{Entry, Inserted, Lookup, Registry};

use crate::dataset::Dataset;
use crate::embed::{EmbedError, EmbedService};
use crate::llm::Llm;
use crate::memory::{BaseMemory, EpisodeMemory, Filter, IndexConfig, MemoryId, MemoryRecord, MemoryType};
use crate::reward::{Evaluation, Evaluator, RewardBreakdown, Target};
use crate::tools::{self, ToolCall, ToolContext, ToolOutput};

/// Environment settings.
#[derive(Debug, Clone)]
pub struct EnvConfig {
    /// Caps.
    pub limits: Limits,
    /// Index planner settings.
    pub index: IndexConfig,
    /// Memories retrieved per evaluation.
    pub top_k: usize,
    /// Size budget N_max; `None` means |M₀|.
    pub n_max: Option<usize>,
    /// The default evaluator (episodes may choose another).
    pub evaluator: Evaluator,
    /// merge_memory (summarize, extract_common) and split_memory ask the LLM for their text.
    pub llm_edit: bool,
}

impl Default for EnvConfig {
    fn default() -> Self {
        EnvConfig {
            limits: Limits::default(),
            index: IndexConfig::default(),
            top_k: 5,
            n_max: None,
            evaluator: Evaluator::AnswerRecall,
            llm_edit: false,
        }
    }
}

/// A memory supplied for a custom episode.
#[derive(Debug, Clone, PartialEq)]
pub struct NewMemory {
    /// Text.
    pub text: String,
    /// Type.
    pub memory_type: MemoryType,
    /// Speaker.
    pub speaker: Option<String>,
    /// Session.
    pub session: Option<u32>,
    /// Session date.
    pub session_date: Option<String>,
    /// Evidence ids.
    pub evidence: Vec<String>,
    /// Source label.
    pub source: Option<String>,
}

/// What an episode is about.
#[derive(Debug, Clone, PartialEq)]
pub enum EpisodeSource {
    /// A LoCoMo question (and, optionally, the conversation it must belong to).
    Locomo {
        /// "conv-26:q17".
        question_id: String,
        /// Must match the question's conversation when given.
        conversation_id: Option<String>,
    },
    /// Custom memories and question.
    Custom {
        /// Initial memory.
        memories: Vec<NewMemory>,
        /// Question.
        question: String,
        /// Gold answer.
        answer: String,
        /// Evidence ids.
        evidence: Vec<String>,
    },
}

/// A CreateEpisode request in domain terms.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateRequest {
    /// Client-chosen id.
    pub episode_id: Option<String>,
    /// What the episode is about.
    pub source: EpisodeSource,
    /// Seed.
    pub seed: Option<u64>,
    /// Step budget.
    pub max_steps: Option<u32>,
    /// Allow category-5 questions.
    pub include_adversarial: bool,
    /// The evaluator; `None` for the server's default.
    pub evaluator: Option<Evaluator>,
}

/// One recorded tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceEntry {
    /// Step.
    pub step: u32,
    /// Tool name.
    pub tool_name: &'static str,
    /// Canonical arguments.
    pub arguments_json: String,
    /// Ids returned or touched.
    pub result_ids: Vec<MemoryId>,
}

/// An open episode.
#[derive(Debug)]
pub struct Episode {
    id: String,
    conversation_id: Option<String>,
    question_id: Option<String>,
    target: Arc<Target>,
    evaluator: Evaluator,
    memory: EpisodeMemory,
    seed: u64,
    max_steps: u32,
    steps_used: u32,
    rejected: u32,
    scored: Option<Arc<RewardBreakdown>>,
    trace: Vec<TraceEntry>,
    definition: String,
    /// Set, under the episode's lock, when it is closed or reaped: a call that fetched the entry before
    /// then and waited for the lock must not run on it.
    ended: Option<Tombstone>,
}

/// A snapshot of an episode's state.
#[derive(Debug, Clone, PartialEq)]
pub struct EpisodeState {
    /// Id.
    pub episode_id: String,
    /// LoCoMo conversation.
    pub conversation_id: Option<String>,
    /// LoCoMo question.
    pub question_id: Option<String>,
    /// Question text.
    pub question: String,
    /// Steps used.
    pub steps_used: u32,
    /// Budget.
    pub max_steps: u32,
    /// Memories now.
    pub memory_count: usize,
    /// |M₀|.
    pub initial_memory_count: usize,
    /// No further tool call accepted.
    pub done: bool,
    /// Scored.
    pub scored: bool,
    /// Seed.
    pub seed: u64,
    /// Rejected calls.
    pub rejected_calls: u32,
    /// The evaluator that scores the episode.
    pub evaluator: Evaluator,
}

impl EpisodeState {
    /// Steps left.
    pub fn steps_left(&self) -> u32 {
        self.max_steps.saturating_sub(self.steps_used)
    }
}

impl Episode {
    fn state(&self) -> EpisodeState {
        EpisodeState {
            episode_id: self.id.clone(),
            conversation_id: self.conversation_id.clone(),
            question_id: self.question_id.clone(),
            question: self.target.question.clone(),
            steps_used: self.steps_used,
            max_steps: self.max_steps,
            memory_count: self.memory.len(),
            initial_memory_count: self.memory.base().len(),
            done: self.scored.is_some() || self.steps_used >= self.max_steps,
            scored: self.scored.is_some(),
            seed: self.seed,
            rejected_calls: self.rejected,
            evaluator: self.evaluator,
        }
    }
}

/// The outcome of CreateEpisode.
#[derive(Debug, Clone, PartialEq)]
pub struct Created {
    /// State after creation (or of the existing episode).
    pub state: EpisodeState,
    /// False for an idempotent repeat.
    pub created: bool,
}

/// Step accounting after a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepInfo {
    /// The step this call used.
    pub step: u32,
    /// Steps left.
    pub steps_left: u32,
    /// Budget spent.
    pub done: bool,
}

/// A tool call's result.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// What the tool did.
    pub output: ToolOutput,
    /// Step accounting.
    pub step: StepInfo,
}

/// A page of memories.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryPage {
    /// Memories.
    pub memories: Vec<MemoryRecord>,
    /// The listing position the next page starts after ([`crate::memory::EpisodeMemory::listing`]); `None`
    /// on the last page.
    pub next_after: Option<u64>,
    /// Matching memories in all.
    pub total: usize,
}

/// A question's embedding and its evaluation on M₀ (cached per question: `p_old`).
type POld = Arc<(Vec<f32>, Evaluation)>;

/// What `p_old` depends on: (conversation, question, evaluator, LLM model). M₀ and the embedder are
/// fixed for the server's life.
type POldKey = (String, String, Evaluator, Option<String>);

/// The domain service: everything the gRPC layer can ask of episodes.
pub struct Environment {
    config: EnvConfig,
    dataset: Arc<Dataset>,
    bases: HashMap<String, Arc<BaseMemory>>,
    embed: EmbedService,
    registry: Registry,
    clock: Arc<dyn Clock>,
    llm: Option<Arc<Llm>>,
    p_old: Mutex<HashMap<POldKey, Arc<tokio::sync::OnceCell<POld>>>>,
    next_id: AtomicU64,
    id_salt: u64,
}

impl std::fmt::Debug for Environment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Environment").field("open", &self.registry.len()).field("embed", &self.embed).finish()
    }
}

fn valid_episode_id(id: &str) -> Result<(), EpisodeError> {
    if id.is_empty() || id.len() > 128 {
        return Err(EpisodeError::invalid("episode_id", format!("must be 1 to 128 characters, got {}", id.len())));
    }
    if let Some(c) = id.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'))) {
        return Err(EpisodeError::invalid("episode_id", format!("may hold only letters, digits, '.', '_', ':' and '-', found {c:?}")));
    }
    Ok(())
}

impl Environment {
    /// Builds the environment: embeds every conversation's M₀ once and builds its index.
    pub fn new(config: EnvConfig, dataset: Arc<Dataset>, embed: EmbedService, clock: Arc<dyn Clock>) -> Result<Self, EmbedError> {
        Self::with_vectors(config, dataset, embed, clock, None, &mut |_, _| {})
    }

    /// Like [`Self::new`], but takes M₀ vectors from `vectors` where they cover a conversation exactly
    /// (same embedder — the caller checks the identity — same ids in order), and reports embedding
    /// progress (`done`, `total` memories) for the rest.
    pub fn with_vectors(
        config: EnvConfig,
        dataset: Arc<Dataset>,
        embed: EmbedService,
        clock: Arc<dyn Clock>,
        vectors: Option<&crate::dataset::VectorSet>,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Self, EmbedError> {
        let mut bases = HashMap::new();
        let total = dataset.memories.len();
        let mut done = 0;
        for conv in &dataset.conversations {
            let rows = dataset.memories_of(&conv.id);
            let records = initial_records(rows);
            let stored = vectors.and_then(|v| v.by_conversation.get(&conv.id)).filter(|stored| {
                stored.len() == rows.len() && stored.iter().zip(rows).all(|((id, v), m)| *id == m.memory_id && v.len() == embed.dim())
            });
            let base = match stored {
                Some(stored) => {
                    let mut flat = Vec::with_capacity(rows.len() * embed.dim());
                    for (_, v) in stored {
                        // Stored vectors came out of an EmbedService, already unit length: use them bit for
                        // bit (normalising again moves them by an ulp, and ties could then rank
                        // differently than on a server that embedded M₀ itself).
                        let norm = crate::memory::vector::dot(v, v).sqrt();
                        if (norm - 1.0).abs() <= 1e-4 {
                            flat.extend_from_slice(v);
                        } else {
                            let mut v = v.clone();
                            crate::memory::vector::normalize(&mut v);
                            flat.extend_from_slice(&v);
                        }
                    }
                    BaseMemory::build(conv.id.clone(), records, flat, embed.dim(), config.index.clone())
                }
                None => build_base(&embed, conv.id.clone(), records, &config.index)?,
            };
            done += rows.len();
            progress(done, total);
            bases.insert(conv.id.clone(), Arc::new(base));
        }
        let id_salt = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
        Ok(Environment {
            registry: Registry::new(config.limits.max_open_episodes, config.limits.max_closed_ids, config.limits.forget_closed_after),
            config,
            dataset,
            bases,
            embed,
            clock,
            llm: None,
            p_old: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            id_salt,
        })
    }

    /// Sets the LLM used by the LLM evaluators and, with `llm_edit`, by merge and split. Fails when
    /// the default evaluator or `llm_edit` needs an LLM and there is none.
    pub fn with_llm(mut self, llm: Option<Arc<Llm>>) -> Result<Self, EpisodeError> {
        if llm.is_none() {
            if self.config.evaluator.needs_llm() {
                return Err(EpisodeError::invalid(
                    "evaluator",
                    format!("{} needs an LLM endpoint (--llm-base-url and --llm-model)", self.config.evaluator.name()),
                ));
            }
            if self.config.llm_edit {
                return Err(EpisodeError::invalid("llm_edit", "needs an LLM endpoint (--llm-base-url and --llm-model)"));
            }
        }
        self.llm = llm;
        Ok(self)
    }

    /// The LLM, when the server has one.
    pub fn llm(&self) -> Option<&Arc<Llm>> {
        self.llm.as_ref()
    }

    /// The dataset.
    pub fn dataset(&self) -> &Dataset {
        &self.dataset
    }
    /// The settings.
    pub fn config(&self) -> &EnvConfig {
        &self.config
    }
    /// The embedder.
    pub fn embedder(&self) -> &EmbedService {
        &self.embed
    }
    /// Open episodes.
    pub fn open_episodes(&self) -> usize {
        self.registry.len()
    }
    /// The shared M₀ of a conversation.
    pub fn base(&self, conversation_id: &str) -> Option<&Arc<BaseMemory>> {
        self.bases.get(conversation_id)
    }

    fn fresh_id(&self) -> String {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut z = n.wrapping_add(self.id_salt).wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        format!("ep-{:016x}", z ^ (z >> 31))
    }

    /// The open entry of `id`; EpisodeEnded for a remembered ended id, else EpisodeNotFound.
    fn entry(&self, id: &str) -> Result<Arc<Entry>, EpisodeError> {
        let now = self.clock.now_ms();
        match self.registry.find(id, now) {
            Lookup::Live(e) => {
                e.touch(now);
                Ok(e)
            }
            Lookup::Ended(t) => Err(self.ended(id, t)),
            Lookup::Unknown => Err(EpisodeError::EpisodeNotFound { id: id.to_string() }),
        }
    }

    /// The error for a call on the ended episode `id`.
    fn ended(&self, id: &str, tombstone: Tombstone) -> EpisodeError {
        let ago_secs = self.clock.now_ms().saturating_sub(tombstone.at_ms) / 1000;
        EpisodeError::EpisodeEnded { id: id.to_string(), tombstone, ago_secs }
    }

    /// Refuses a locked episode that was closed or reaped while the caller waited for its lock.
    fn check_open(&self, ep: &Episode) -> Result<(), EpisodeError> {
        match ep.ended {
            Some(t) => Err(self.ended(&ep.id, t)),
            None => Ok(()),
        }
    }

    /// Opens an episode, or returns the live one with the same id.
    pub async fn create_episode(&self, req: CreateRequest) -> Result<Created, EpisodeError> {
        if let Some(id) = &req.episode_id {
            valid_episode_id(id)?;
        }
        let max_steps = req.max_steps.unwrap_or(self.config.limits.default_max_steps);
        if max_steps == 0 || max_steps > self.config.limits.max_steps_cap {
            return Err(EpisodeError::invalid("max_steps", format!("must be 1 to {}, got {max_steps}", self.config.limits.max_steps_cap)));
        }
        let seed = req.seed.unwrap_or(0);
        let evaluator = req.evaluator.unwrap_or(self.config.evaluator);
        if evaluator.needs_llm() && self.llm.is_none() {
            return Err(EpisodeError::precondition(format!(
                "evaluator {} needs an LLM endpoint and this server has none; start it with --llm-base-url and --llm-model",
                evaluator.name()
            )));
        }
        let (base, target, conversation_id, question_id, what) = match &req.source {
            EpisodeSource::Locomo { question_id, conversation_id } => {
                let q = self
                    .dataset
                    .question(question_id)
                    .ok_or_else(|| EpisodeError::DatasetNotFound { what: "question", id: question_id.clone() })?;
                if let Some(c) = conversation_id {
                    if self.dataset.conversation(c).is_none() {
                        return Err(EpisodeError::DatasetNotFound { what: "conversation", id: c.clone() });
                    }
                    if *c != q.conversation_id {
                        return Err(EpisodeError::invalid(
                            "conversation_id",
                            format!("question {question_id} belongs to {}, not {c}", q.conversation_id),
                        ));
                    }
                }
                if q.category == 5 && !req.include_adversarial {
                    return Err(EpisodeError::precondition(format!(
                        "question {question_id} is category 5 (adversarial), which is excluded by default; set include_adversarial"
                    )));
                }
                let base = self
                    .bases
                    .get(&q.conversation_id)
                    .cloned()
                    .ok_or_else(|| EpisodeError::DatasetNotFound { what: "conversation", id: q.conversation_id.clone() })?;
                (Some(base), Target::from(q), Some(q.conversation_id.clone()), Some(q.id.clone()), q.id.clone())
            }
            EpisodeSource::Custom { memories, question, answer, evidence } => {
                custom::check(&self.config.limits, memories, question, answer, evidence)?;
                let target = Target {
                    question: question.trim().to_string(),
                    answer: Some(answer.trim().to_string()),
                    adversarial_answer: None,
                    category: None,
                    evidence: evidence.clone(),
                };
                let mut h: u64 = 0xcbf2_9ce4_8422_2325;
                for b in memories.iter().flat_map(|m| m.text.trim().bytes().chain(std::iter::once(0))) {
                    h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
                }
                (None, target, None, None, format!("custom:{}:{}:{h:016x}", question.trim(), memories.len()))
            }
        };
        let definition = format!("{what} seed={seed} max_steps={max_steps} evaluator={}", evaluator.name());
        // An idempotent repeat must not pay for embedding custom memories again, nor a remembered id.
        if let Some(id) = &req.episode_id {
            let now = self.clock.now_ms();
            match self.registry.find(id, now) {
                Lookup::Live(existing) => {
                    existing.touch(now);
                    return self.existing(&existing, &definition).await;
                }
                Lookup::Ended(t) => return Err(self.ended(id, t)),
                Lookup::Unknown => {}
            }
        }
        let base = match base {
            Some(b) => b,
            None => {
                let EpisodeSource::Custom { memories, .. } = &req.source else { unreachable!("LoCoMo has a base") };
                Arc::new(self.custom_base(req.episode_id.as_deref().unwrap_or("custom"), memories).await?)
            }
        };
        let id = req.episode_id.clone().unwrap_or_else(|| self.fresh_id());
        let make = || Episode {
            id: id.clone(),
            conversation_id,
            question_id,
            target: Arc::new(target),
            evaluator,
            memory: EpisodeMemory::new(base),
            seed,
            max_steps,
            steps_used: 0,
            rejected: 0,
            scored: None,
            trace: Vec::new(),
            definition: definition.clone(),
            ended: None,
        };
        match self.registry.insert_with(&id, self.clock.now_ms(), make) {
            Inserted::New(e) => Ok(Created { state: e.episode.lock().await.state(), created: true }),
            Inserted::Existing(e) => self.existing(&e, &definition).await,
            Inserted::Ended(t) => Err(self.ended(&id, t)),
            Inserted::Full => Err(EpisodeError::ResourceExhausted {
                message: format!("{} episodes are open, the server's cap; close finished episodes", self.config.limits.max_open_episodes),
            }),
        }
    }

    async fn existing(&self, e: &Entry, definition: &str) -> Result<Created, EpisodeError> {
        let ep = e.episode.lock().await;
        self.check_open(&ep)?;
        if ep.definition != definition {
            return Err(EpisodeError::AlreadyExists {
                message: format!(
                    "episode {} is live as ({}), not ({})",
                    ep.id,
                    crate::quote::cut(&ep.definition),
                    crate::quote::cut(definition)
                ),
            });
        }
        Ok(Created { state: ep.state(), created: false })
    }

    async fn custom_base(&self, key: &str, memories: &[NewMemory]) -> Result<BaseMemory, EpisodeError> {
        let records: Vec<MemoryRecord> = memories
            .iter()
            .enumerate()
            .map(|(i, m)| MemoryRecord {
                id: MemoryId(i as u32),
                text: m.text.trim().to_string(),
                memory_type: m.memory_type,
                speaker: m.speaker.clone(),
                session: m.session,
                session_date: m.session_date.clone(),
                evidence: m.evidence.clone(),
                source: m.source.clone().unwrap_or_else(|| "custom".to_string()),
                created_step: 0,
            })
            .collect();
        let texts: Vec<String> = records.iter().map(|r| r.text.clone()).collect();
        let vectors = self.embed.embed(texts).await?;
        let (key, index, dim) = (key.to_string(), self.config.index.clone(), self.embed.dim());
        // Building an index is CPU work: keep it off the async workers.
        tokio::task::spawn_blocking(move || BaseMemory::build(key, records, vectors.concat(), dim, index))
            .await
            .map_err(|e| EmbedError::Join(e.to_string()).into())
    }

    /// Counts a call refused before it reached the episode (bad arguments). Unknown ids are ignored. It
    /// waits for the episode's lock like any call, so a refusal is counted even while another call on
    /// the episode is running.
    pub async fn record_rejection(&self, episode_id: &str) {
        if let Some(e) = self.registry.get(episode_id) {
            e.episode.lock().await.rejected += 1;
        }
    }

    /// Runs one tool call: validate, embed, apply, count the step, record the trace.
    pub async fn call_tool(&self, episode_id: &str, call: ToolCall) -> Result<ToolResult, EpisodeError> {
        let entry = self.entry(episode_id)?;
        let mut ep = entry.episode.lock().await;
        self.check_open(&ep)?;
        if ep.scored.is_some() {
            ep.rejected += 1;
            return Err(EpisodeError::precondition(format!("episode {episode_id} is scored; no further edits")));
        }
        if ep.steps_used >= ep.max_steps {
            ep.rejected += 1;
            return Err(EpisodeError::precondition(format!("episode {episode_id} has used its budget of {} steps", ep.max_steps)));
        }
        let ctx = ToolContext { step: ep.steps_used + 1, seed: ep.seed, limits: &self.config.limits.tools };
        // --llm-edit: the LLM writes the text of merge/split; nothing has changed yet if this is abandoned.
        let (edited, note) = self.llm_text(&ep.memory, &call).await;
        let prepared = match tools::prepare(&ep.memory, edited.as_ref().unwrap_or(&call), ctx) {
            Ok(p) => p,
            Err(e) => {
                ep.rejected += 1;
                return Err(e.into());
            }
        };
        // Nothing has changed yet: if this await is abandoned, the episode is as it was.
        let vectors = self.embed.embed(prepared.texts().to_vec()).await?;
        let mut output = tools::apply(&mut ep.memory, prepared, &vectors, ctx);
        if let Some(note) = note {
            output.text.push('\n');
            output.text.push_str(&note);
        }
        ep.steps_used += 1;
        let step = ep.steps_used;
        ep.trace.push(TraceEntry { step, tool_name: call.name(), arguments_json: call.arguments_json(), result_ids: output.result_ids() });
        let steps_left = ep.max_steps - step;
        Ok(ToolResult { output, step: StepInfo { step, steps_left, done: steps_left == 0 } })
    }

    /// With `--llm-edit`, the call with the LLM's text for merge/split and the note for the tool text;
    /// `(None, None)` when the call does not use LLM text; `(None, Some(note))` when the LLM failed or
    /// its reply was unusable and the offline strategy runs instead.
    async fn llm_text(&self, mem: &EpisodeMemory, call: &ToolCall) -> (Option<ToolCall>, Option<String>) {
        let Some(llm) = self.llm.as_ref().filter(|_| self.config.llm_edit) else { return (None, None) };
        let limits = &self.config.limits.tools;
        let Some((request, kind)) = tools::llm_edit::edit_request(mem, call, limits) else { return (None, None) };
        let reason = match llm.ask(&request).await {
            Ok(reply) => match tools::llm_edit::with_llm_text(call, kind, &reply, limits) {
                Ok(edited) => return (Some(edited), Some(tools::llm_edit::llm_note(llm.model()))),
                Err(reason) => format!("the LLM reply was unusable ({reason})"),
            },
            Err(e) => {
                tracing::warn!(error = %e, tool = call.name(), "LLM edit failed; using the offline strategy");
                format!("the LLM failed ({e})")
            }
        };
        (None, Some(tools::llm_edit::fallback_note(call, &reason)))
    }

    /// State and, optionally, trace.
    pub async fn get_episode(&self, episode_id: &str, with_trace: bool) -> Result<(EpisodeState, Vec<TraceEntry>), EpisodeError> {
        let entry = self.entry(episode_id)?;
        let ep = entry.episode.lock().await;
        self.check_open(&ep)?;
        Ok((ep.state(), if with_trace { ep.trace.clone() } else { Vec::new() }))
    }

    /// A page of memories in listing order: the first `page_size` matching memories after listing position
    /// `after` (all from the start with `None`). Stable under edits between pages: nothing live is skipped;
    /// a memory created or updated after an earlier page was read comes (again, in its new version) later.
    pub async fn list_memories(
        &self,
        episode_id: &str,
        after: Option<u64>,
        page_size: usize,
        memory_type: Option<MemoryType>,
    ) -> Result<MemoryPage, EpisodeError> {
        let entry = self.entry(episode_id)?;
        let ep = entry.episode.lock().await;
        self.check_open(&ep)?;
        let filter = Filter { memory_type, ..Filter::default() };
        let mut total = 0;
        let mut memories = Vec::with_capacity(page_size.min(ep.memory.len()));
        let (mut last, mut more) = (None, false);
        for (pos, r) in ep.memory.listing().filter(|(_, r)| filter.matches(r)) {
            total += 1;
            if after.is_some_and(|a| pos <= a) {
                continue;
            }
            if memories.len() < page_size {
                memories.push(r.clone());
                last = Some(pos);
            } else {
                more = true;
            }
        }
        Ok(MemoryPage { memories, next_after: if more { last } else { None }, total })
    }

    /// Closes the episode (after a call in flight on it) and remembers its id; returns its last state.
    /// Idempotent: an episode already closed or reaped whose id is remembered gives `None`.
    pub async fn close_episode(&self, episode_id: &str) -> Result<Option<EpisodeState>, EpisodeError> {
        let entry = match self.registry.find(episode_id, self.clock.now_ms()) {
            Lookup::Live(e) => e,
            Lookup::Ended(_) => return Ok(None),
            Lookup::Unknown => return Err(EpisodeError::EpisodeNotFound { id: episode_id.to_string() }),
        };
        let mut ep = entry.episode.lock().await;
        if ep.ended.is_some() {
            return Ok(None); // closed or reaped while this call waited for the lock
        }
        let t = Tombstone { ending: Ending::Closed, scored: ep.scored.is_some(), steps_used: ep.steps_used, at_ms: self.clock.now_ms() };
        ep.ended = Some(t);
        self.registry.close(episode_id, &entry, t);
        Ok(Some(ep.state()))
    }

    /// Closes episodes idle for at least the TTL (remembering their ids) and forgets remembered ids past
    /// their time.
    pub fn reap_idle(&self) -> Swept {
        let now = self.clock.now_ms();
        let reaped = self.registry.reap_idle(now, self.config.limits.idle_ttl.as_millis() as u64);
        Swept { reaped, forgotten: self.registry.forget_expired(now), remembered: self.registry.remembered() }
    }
}

/// What one pass of the reaper did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    /// Idle episodes closed.
    pub reaped: usize,
    /// Remembered ids of ended episodes forgotten (past `--forget-closed-after-secs`).
    pub forgotten: usize,
    /// Ids still remembered.
    pub remembered: usize,
}

/// What an episode on a LoCoMo question is scored against. Here, not in `reward`, so that the reward
/// does not know the dataset: the episode is where the two meet.
impl From<&crate::dataset::Question> for Target {
    fn from(q: &crate::dataset::Question) -> Self {
        Target {
            question: q.question.clone(),
            answer: q.answer.clone(),
            adversarial_answer: q.adversarial_answer.clone(),
            category: Some(q.category),
            evidence: q.evidence.clone(),
        }
    }
}

/// The initial memory records of a conversation's dataset rows: ids `m0000…` by position, metadata kept.
pub fn initial_records(rows: &[crate::dataset::MemoryRow]) -> Vec<MemoryRecord> {
    rows.iter()
        .enumerate()
        .map(|(i, m)| MemoryRecord {
            id: MemoryId(i as u32),
            text: m.text.clone(),
            // The dataset validator admits only the three type names.
            memory_type: m.memory_type.parse().unwrap_or(MemoryType::Episodic),
            speaker: Some(m.speaker.clone()),
            session: Some(m.session),
            session_date: Some(m.session_date.clone()),
            evidence: m.evidence.clone(),
            source: m.source.clone(),
            created_step: 0,
        })
        .collect()
}

/// Embeds records (batched) and builds an M₀.
pub fn build_base(embed: &EmbedService, key: String, records: Vec<MemoryRecord>, index: &IndexConfig) -> Result<BaseMemory, EmbedError> {
    let mut vectors = Vec::with_capacity(records.len() * embed.dim());
    for chunk in records.chunks(256) {
        let texts: Vec<&str> = chunk.iter().map(|r| r.text.as_str()).collect();
        for v in embed.embed_blocking(&texts)? {
            vectors.extend_from_slice(&v);
        }
    }
    Ok(BaseMemory::build(key, records, vectors, embed.dim(), index.clone()))
}

#[cfg(test)]
mod tests;
