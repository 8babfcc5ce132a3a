//! The episode's data: settings, requests, the episode itself and its state, and what the operations
//! return. No behaviour beyond small accessors; the operations live in `build`, `create`, `step`,
//! `score` and `mod.rs`.

use std::sync::Arc;

use crate::memory::{EpisodeMemory, IndexConfig, MemoryId, MemoryRecord, MemoryType};
use crate::reward::{Context, Evaluator, RewardBreakdown, RewardFormula, Target};
use crate::tools::ToolOutput;

use super::*;

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
    /// What the evaluators read: the text budget of M₀'s top-k, or the top-k by count.
    pub context: Context,
    /// How the delta and the memory's growth make the reward.
    pub formula: RewardFormula,
    /// merge_memory (summarize, extract_common) and split_memory ask the LLM for their text.
    pub llm_edit: bool,
    /// With an LLM evaluator, how many of the re-scored other questions the LLM scores too (the rest are
    /// scored offline).
    pub others_llm: usize,
    /// How many threads one scoring spreads the other questions over (at least 1).
    pub score_threads: usize,
}

/// The default of [`EnvConfig::score_threads`]: one per core, at most four (a scoring's 80–198 questions
/// gain little from more).
pub fn default_score_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).min(4)
}

impl Default for EnvConfig {
    fn default() -> Self {
        EnvConfig {
            limits: Limits::default(),
            index: IndexConfig::default(),
            top_k: 5,
            n_max: None,
            evaluator: Evaluator::AnswerPhrase,
            context: Context::Budget,
            formula: RewardFormula::WholeMemory,
            llm_edit: false,
            others_llm: 0,
            score_threads: default_score_threads(),
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
    pub(super) id: String,
    pub(super) conversation_id: Option<String>,
    pub(super) question_id: Option<String>,
    pub(super) target: Arc<Target>,
    pub(super) evaluator: Evaluator,
    pub(super) memory: EpisodeMemory,
    pub(super) seed: u64,
    pub(super) max_steps: u32,
    pub(super) steps_used: u32,
    pub(super) rejected: u32,
    pub(super) scored: Option<Arc<RewardBreakdown>>,
    pub(super) trace: super::trace::Trace,
    /// The calls applied under a `call_id`, for exactly-once retries ([`super::once`]).
    pub(super) applied: super::once::Applied,
    pub(super) definition: String,
    /// Set, under the episode's lock, when it is closed or reaped: a call that fetched the entry before
    /// then and waited for the lock must not run on it.
    pub(super) ended: Option<Tombstone>,
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
    pub(super) fn state(&self) -> EpisodeState {
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

/// What a tool call did to the episode, for a trainer's per-step logs (`CallToolResponse.metrics`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct StepMetrics {
    /// The call's time inside the episode (embedding and applying), milliseconds.
    pub tool_ms: f64,
    /// Memories after the call.
    pub memories: usize,
    /// Memories after minus before.
    pub memories_delta: i64,
    /// Characters of all memories after the call.
    pub memory_chars: usize,
    /// Steps used after the call.
    pub steps_used: u32,
    /// Steps left.
    pub steps_left: u32,
}

impl StepMetrics {
    /// The metrics by name, as every face reports them.
    pub fn pairs(&self) -> [(&'static str, f64); 6] {
        [
            ("tool_ms", self.tool_ms),
            ("memories", self.memories as f64),
            ("memories_delta", self.memories_delta as f64),
            ("memory_chars", self.memory_chars as f64),
            ("steps_used", f64::from(self.steps_used)),
            ("steps_left", f64::from(self.steps_left)),
        ]
    }
}

/// A tool call's result.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// What the tool did.
    pub output: ToolOutput,
    /// Step accounting.
    pub step: StepInfo,
    /// Per-step metrics.
    pub metrics: StepMetrics,
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
