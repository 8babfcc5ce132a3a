//! `memgym eval --evaluator …`: scripted agents as a sanity check of the reward.
//!
//! A reward is only worth training on if it moves the right way for edits whose effect is known. Four
//! scripted agents edit each question's episode on the in-process [`Environment`] (the code the gRPC
//! server runs, without the transport), one fresh episode per (question, agent, evaluator), closed as soon
//! as it is scored:
//!
//! - `no-op` scores at once: the reward must be exactly 0.
//! - `oracle` adds one memory, the question followed by its gold answer (category 5, whose answer is
//!   not in the conversation: the question followed by "Not mentioned in the conversation", the
//!   abstention LoCoMo's QA prompt expects). The reward should be > 0 unless `p_old` is already 1
//!   ("saturated").
//! - `destroyer` deletes every memory whose evidence ids meet the question's. The reward should be < 0
//!   unless `p_old` is already 0 ("nothing to lose"), no memory holds the evidence (nothing deleted), or
//!   none of M₀'s top-k does (the top-k is unchanged). On category 5 the evidence supports the trap
//!   answer, so deleting it should help: those episodes are not checked.
//! - `random` makes `--random-steps` edits drawn by a ChaCha8 generator seeded from `--seed` and the
//!   question id: delete a memory, merge two (summarize), split one (thematic), rewrite one with its
//!   words shuffled, or add a memory copied from another conversation. A call the environment refuses
//!   (a memory that cannot be split, …) is counted as refused and the agent moves on.
//!
//! Every evaluator sees the same edits: an agent's run is deterministic given the seed, and the edit log
//! of each evaluator's run is checked against the first evaluator's. An evaluator failure (an LLM that
//! does not answer) stops the evaluation with the error; it is never counted as a reward of 0.
//!
//! [`summarize`] is pure: per agent × category, the mean reward of each evaluator, the sign shares of the
//! first evaluator's reward, the sign agreement of every other evaluator with the first, and how often
//! the first evaluator's reward has the sign the agent should get ([`ExpectedSign`]).

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};

use crate::app::cli::{AgentEvalArgs, EnvArgs};
use crate::dataset::{category_name, Dataset, MemoryRow, Question, Split, ADVERSARIAL_CATEGORY};
use crate::episode::{CreateRequest, Environment, EpisodeError, EpisodeSource};
use crate::memory::MemoryRecord;
use crate::reward::qa_prompt::NOT_MENTIONED;
use crate::reward::reading::Reading;
use crate::reward::{Evaluator, RewardBreakdown};
use crate::tools::llm_calls::parse_call;
use crate::util::fnv::fnv1a;

mod goals;
mod honest;
mod kinds;
pub mod noise;
mod summary;
pub mod tricks;
pub use goals::*;
pub use summary::*;
pub use tricks::Trick;

pub use crate::reward::SIGN_EPSILON;

/// A scripted agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Agent {
    /// Changes nothing.
    NoOp,
    /// Adds the gold answer as a memory.
    Oracle,
    /// Deletes the evidence memories.
    Destroyer,
    /// Random edits.
    Random,
    /// Honest, without the gold: resolves relative dates in retrieved memories from their session date.
    Resolver,
    /// The resolver's dates written as answer cards for the question instead (the memories left as they
    /// were): the same information, serving only the question asked.
    ResolverCard,
    /// Honest, without the gold: resolves every dated time word in every memory it sees (the question's
    /// hits), not only the first in each.
    Sweep,
    /// A trick that adds no information about the answer ([`tricks`]).
    Trick(Trick),
}

/// The agents in report order: the four reference agents, the three honest ones, then every trick.
pub const AGENTS: [Agent; 7 + Trick::ALL.len()] = {
    let mut all = [Agent::NoOp; 7 + Trick::ALL.len()];
    all[1] = Agent::Oracle;
    all[2] = Agent::Destroyer;
    all[3] = Agent::Random;
    all[4] = Agent::Resolver;
    all[5] = Agent::ResolverCard;
    all[6] = Agent::Sweep;
    let mut i = 0;
    while i < Trick::ALL.len() {
        all[7 + i] = Agent::Trick(Trick::ALL[i]);
        i += 1;
    }
    all
};

impl Agent {
    /// Name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Agent::NoOp => "no-op",
            Agent::Oracle => "oracle",
            Agent::Destroyer => "destroyer",
            Agent::Random => "random",
            Agent::Resolver => "resolver",
            Agent::ResolverCard => "resolver-card",
            Agent::Sweep => "sweep",
            Agent::Trick(t) => t.name(),
        }
    }

    /// Whether the agent reads the gold answer or the evidence ids (no policy can).
    pub fn privileged(self) -> bool {
        match self {
            Agent::Oracle | Agent::Destroyer | Agent::Trick(Trick::OraclePadding | Trick::OracleOverwrite) => true,
            Agent::NoOp | Agent::Random | Agent::Resolver | Agent::ResolverCard | Agent::Sweep | Agent::Trick(_) => false,
        }
    }

    /// Whether the agent adds real information without reading the gold (the date resolvers): it may gain.
    pub fn honest(self) -> bool {
        matches!(self, Agent::Resolver | Agent::ResolverCard | Agent::Sweep)
    }
}

impl std::str::FromStr for Agent {
    type Err = String;

    fn from_str(name: &str) -> Result<Agent, String> {
        let name = name.trim();
        AGENTS.into_iter().find(|a| a.name() == name).ok_or_else(|| {
            let names: Vec<&str> = AGENTS.iter().map(|a| a.name()).collect();
            format!("unknown agent {name:?}: expected one of {}", names.join(", "))
        })
    }
}

impl serde::Serialize for Agent {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// What to run.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Agents, in report order.
    pub agents: Vec<Agent>,
    /// Evaluators; the first is the reference for sign agreement and expected signs. Never empty.
    pub evaluators: Vec<Evaluator>,
    /// Questions of this split; `None` for all.
    pub split: Option<Split>,
    /// At most this many questions, spread evenly.
    pub limit: Option<usize>,
    /// Edits of the random agent per episode.
    pub random_steps: usize,
    /// Seed of the episodes and of the random agent.
    pub seed: u64,
    /// Include category 5.
    pub include_adversarial: bool,
    /// Questions evaluated at once.
    pub concurrency: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            agents: AGENTS.to_vec(),
            evaluators: vec![Evaluator::AnswerPhrase],
            split: Some(Split::Test),
            limit: None,
            random_steps: 5,
            seed: 0,
            include_adversarial: false,
            concurrency: 2,
        }
    }
}

/// Validates the flags, before any work: the options, and the environment settings to build the
/// environment with. An LLM evaluator without `--llm-base-url` and `--llm-model` is an error here.
pub fn prepare(a: &AgentEvalArgs) -> anyhow::Result<(Options, EnvArgs)> {
    let mut evaluators: Vec<Evaluator> = Vec::new();
    for name in &a.evaluators {
        let e = Evaluator::parse(name).map_err(anyhow::Error::msg).context("--evaluator")?;
        if evaluators.contains(&e) {
            bail!("--evaluator {} is given twice", e.name());
        }
        evaluators.push(e);
    }
    let Some(first) = evaluators.first().copied() else { bail!("--evaluator: name at least one evaluator") };
    let mut agents: Vec<Agent> = Vec::new();
    for name in &a.agents {
        let agent: Agent = name.parse().map_err(anyhow::Error::msg).context("--agent")?;
        if !agents.contains(&agent) {
            agents.push(agent);
        }
    }
    if agents.is_empty() {
        agents = AGENTS.to_vec();
    }
    agents.sort();
    let split = match a.split.trim() {
        "all" => None,
        s => Some(s.parse::<Split>().map_err(|e| anyhow::anyhow!("--split: {e} (or \"all\")"))?),
    };
    if a.limit == Some(0) {
        bail!("--limit must be positive");
    }
    let cap = a.env.max_steps_cap as usize;
    if a.random_steps == 0 || a.random_steps > cap {
        bail!("--random-steps must be 1 to --max-steps-cap ({cap}), got {}", a.random_steps);
    }
    let llm: Vec<&str> = evaluators.iter().filter(|e| e.needs_llm()).map(|e| e.name()).collect();
    if !llm.is_empty() && (a.env.llm.llm_base_url.is_none() || a.env.llm.llm_model.is_none()) {
        bail!("evaluator {} needs an LLM endpoint: pass --llm-base-url and --llm-model", llm.join(", "));
    }
    let concurrency =
        if llm.is_empty() { std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2) } else { a.env.llm.llm_concurrency.max(1) };
    let mut env = a.env.clone();
    // Every episode names its evaluator; the default only makes the environment insist on an LLM.
    env.llm.evaluator = first.name().to_string();
    let options = Options {
        agents,
        evaluators,
        split,
        limit: a.limit,
        random_steps: a.random_steps,
        seed: a.seed,
        include_adversarial: a.include_adversarial,
        concurrency,
    };
    Ok((options, env))
}

/// The questions an evaluation runs on, in dataset order: the split's (category 5 only when included).
/// With a limit of n, every k-th of them (k = total / n) in (category, conversation, question) order, so
/// each category and, within it, each conversation keeps its share: a category with at least k questions
/// is always represented.
pub fn select_questions<'a>(ds: &'a Dataset, o: &Options) -> Vec<&'a Question> {
    let all: Vec<&Question> = ds
        .questions
        .iter()
        .filter(|q| o.split.is_none_or(|s| q.split == s) && (o.include_adversarial || q.category != ADVERSARIAL_CATEGORY))
        .collect();
    match o.limit {
        Some(n) if n < all.len() => {
            let mut order: Vec<usize> = (0..all.len()).collect();
            order.sort_by_key(|&i| (all[i].category, i)); // stable in dataset order within a category
            let mut picked: Vec<usize> = (0..n).map(|j| order[j * all.len() / n]).collect();
            picked.sort_unstable();
            picked.into_iter().map(|i| all[i]).collect()
        }
        Some(_) | None => all,
    }
}

/// The oracle's memory: the question followed by its gold answer; for category 5, by LoCoMo's
/// abstention. `None` when a question has no gold answer (the oracle then changes nothing).
pub fn oracle_memory(q: &Question) -> Option<String> {
    if q.category == ADVERSARIAL_CATEGORY {
        return Some(format!("{} {NOT_MENTIONED}.", q.question.trim()));
    }
    q.answer.as_deref().map(str::trim).filter(|a| !a.is_empty()).map(|a| format!("{} {a}", q.question.trim()))
}

/// One evaluator's score of an episode.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Score {
    /// Evaluator name.
    pub evaluator: &'static str,
    /// p on M₀.
    pub p_old: f64,
    /// p on the edited memory.
    pub p_new: f64,
    /// The reward.
    pub reward: f64,
    /// The other questions whose p rose (0 under a single-question formula).
    pub others_improved: usize,
    /// … whose p fell.
    pub others_damaged: usize,
    /// What the other questions added to the reward.
    pub others_term: f64,
    /// Σ of the other questions' credited rises (paid in full in `others_term`).
    pub others_gain: f64,
    /// Σ of their falls the memory no longer states where they can read it (charged in full).
    pub others_destroyed: f64,
    /// Σ of their falls still stated where they can read it (charged half).
    pub others_displaced: f64,
}

impl From<&RewardBreakdown> for Score {
    fn from(b: &RewardBreakdown) -> Self {
        let (others_improved, others_damaged) = b.others.as_ref().map_or((0, 0), |o| (o.improved, o.damaged));
        let (others_gain, others_destroyed, others_displaced) =
            b.others.as_ref().map_or((0.0, 0.0, 0.0), |o| (o.gain, o.destroyed, o.displaced));
        Score {
            evaluator: b.evaluator,
            p_old: b.old.p,
            p_new: b.new.p,
            reward: b.reward,
            others_improved,
            others_damaged,
            others_term: b.others_term,
            others_gain,
            others_destroyed,
            others_displaced,
        }
    }
}

/// One agent on one question, scored by every evaluator.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct EpisodeRow {
    /// The agent.
    pub agent: Agent,
    /// The question.
    pub question_id: String,
    /// Its category.
    pub category: u8,
    /// What the LoCoMo audit says of its gold answer (`ok`, `wrong-citation`, `flagged`).
    pub gold: &'static str,
    /// Tool calls the environment carried out.
    pub edits: usize,
    /// Tool calls it refused (and edits the agent could not attempt).
    pub refused: usize,
    /// Evidence recall of M₀'s top-k: 0 when no retrieved memory holds the question's evidence.
    pub evidence_recall_old: f64,
    /// Destroyer: a memory it did not delete still states the answer (`answer-phrase` over every memory
    /// left, read whole, scores at least p_old): deleting the evidence destroyed no fact.
    pub answer_elsewhere: bool,
    /// One score per evaluator, in [`Options::evaluators`] order.
    pub scores: Vec<Score>,
}

/// Why an evaluation stopped.
#[derive(Debug, thiserror::Error)]
pub enum AgentEvalError {
    /// The environment failed (an LLM evaluator's endpoint, the embedder, …).
    #[error("agent {agent} on {question_id} scored by {evaluator}")]
    Episode {
        /// The agent.
        agent: &'static str,
        /// The question.
        question_id: String,
        /// The evaluator.
        evaluator: &'static str,
        /// What failed.
        #[source]
        source: EpisodeError,
    },
    /// An agent made other edits for another evaluator (it must be deterministic).
    #[error("agent {agent} on {question_id} made other edits under {evaluator} than under {first}")]
    Diverged {
        /// The agent.
        agent: &'static str,
        /// The question.
        question_id: String,
        /// The reference evaluator.
        first: &'static str,
        /// The evaluator whose run differed.
        evaluator: &'static str,
    },
    /// A worker task panicked.
    #[error("an evaluation task failed: {0}")]
    Join(String),
}

/// Runs the agents on the selected questions, `o.concurrency` questions at a time. Rows come by agent,
/// then in question order, whatever the concurrency.
pub async fn evaluate(env: &Arc<Environment>, o: &Options) -> Result<Vec<EpisodeRow>, AgentEvalError> {
    let questions: Vec<Question> = select_questions(env.dataset(), o).into_iter().cloned().collect();
    let total = questions.len();
    let shared = Arc::new(o.clone());
    let mut pending = questions.into_iter().enumerate();
    let mut tasks = tokio::task::JoinSet::new();
    let mut done: Vec<(usize, Vec<EpisodeRow>)> = Vec::with_capacity(total);
    let mut reported = 0;
    loop {
        while tasks.len() < o.concurrency.max(1) {
            let Some((i, q)) = pending.next() else { break };
            let (env, o) = (env.clone(), shared.clone());
            tasks.spawn(async move { question_rows(&env, &o, &q).await.map(|rows| (i, rows)) });
        }
        // Dropping the set on an error aborts the questions still running.
        let Some(joined) = tasks.join_next().await else { break };
        done.push(joined.map_err(|e| AgentEvalError::Join(e.to_string()))??);
        if done.len() * 10 / total.max(1) > reported {
            reported = done.len() * 10 / total.max(1);
            tracing::info!(questions = done.len(), total, "scripted agents");
        }
    }
    done.sort_by_key(|(i, _)| *i);
    let mut rows: Vec<EpisodeRow> = done.into_iter().flat_map(|(_, rows)| rows).collect();
    rows.sort_by_key(|r| r.agent); // stable: question order within an agent
    Ok(rows)
}

/// Every agent on one question, each scored by every evaluator on a fresh episode.
async fn question_rows(env: &Environment, o: &Options, q: &Question) -> Result<Vec<EpisodeRow>, AgentEvalError> {
    let distractors: Vec<&MemoryRow> = if o.agents.contains(&Agent::Random) {
        env.dataset().memories.iter().filter(|m| m.conversation_id != q.conversation_id).collect()
    } else {
        Vec::new()
    };
    let mut rows = Vec::with_capacity(o.agents.len());
    for &agent in &o.agents {
        let mut first: Option<(Evaluator, Run)> = None;
        let mut scores = Vec::with_capacity(o.evaluators.len());
        for &evaluator in &o.evaluators {
            let run = run_episode(env, o, agent, q, evaluator, &distractors).await.map_err(|source| AgentEvalError::Episode {
                agent: agent.name(),
                question_id: q.id.clone(),
                evaluator: evaluator.name(),
                source,
            })?;
            scores.push(Score::from(&*run.breakdown));
            match &first {
                None => first = Some((evaluator, run)),
                Some((reference, r)) if r.log != run.log => {
                    return Err(AgentEvalError::Diverged {
                        agent: agent.name(),
                        question_id: q.id.clone(),
                        first: reference.name(),
                        evaluator: evaluator.name(),
                    })
                }
                Some(_) => {}
            }
        }
        let (edits, refused, evidence_recall_old, left_states) =
            first.map_or((0, 0, 0.0, None), |(_, r)| (r.edits, r.refused, r.breakdown.old.evidence_recall, r.left_states));
        let gold = q.gold.status.name();
        // The answer is stated elsewhere when the memory left states as much of it as M₀'s top-k did.
        let answer_elsewhere = left_states.zip(scores.first()).is_some_and(|(left, s)| left > 0.0 && left >= s.p_old);
        rows.push(EpisodeRow {
            agent,
            question_id: q.id.clone(),
            category: q.category,
            gold,
            edits,
            refused,
            evidence_recall_old,
            answer_elsewhere,
            scores,
        });
    }
    Ok(rows)
}

/// What one episode did and scored.
struct Run {
    log: Vec<String>,
    edits: usize,
    refused: usize,
    breakdown: Arc<RewardBreakdown>,
    /// Destroyer: `answer-phrase`'s score of every memory left, each read whole.
    left_states: Option<f64>,
}

/// Makes every episode id of the process unique.
static NEXT_EPISODE: AtomicU64 = AtomicU64::new(0);

/// Creates an episode, lets the agent edit it, scores it, and closes it on every path.
async fn run_episode(
    env: &Environment,
    o: &Options,
    agent: Agent,
    q: &Question,
    evaluator: Evaluator,
    distractors: &[&MemoryRow],
) -> Result<Run, EpisodeError> {
    let n = NEXT_EPISODE.fetch_add(1, Ordering::Relaxed);
    let id = format!("eval-{n}-{}-{}-{}", agent.name(), evaluator.name(), q.id);
    env.create_episode(CreateRequest {
        episode_id: Some(id.clone()),
        source: EpisodeSource::Locomo { question_id: q.id.clone(), conversation_id: None },
        seed: Some(o.seed),
        max_steps: Some(env.config().limits.max_steps_cap),
        include_adversarial: o.include_adversarial,
        evaluator: Some(evaluator),
    })
    .await?;
    let mut s = Session { env, id: &id, log: Vec::new(), edits: 0, refused: 0 };
    let mut left_states = None;
    let scored = async {
        act(&mut s, o, agent, q, distractors).await?;
        if agent == Agent::Destroyer {
            // Whether the answer is still stated somewhere in memory after the evidence is gone.
            let left = s.memories().await?;
            let refs: Vec<&MemoryRecord> = left.iter().collect();
            left_states = Some(crate::reward::phrase::score(&crate::reward::Target::from(q), &Reading::whole(&refs)));
        }
        env.score_episode(&id).await
    }
    .await;
    // An episode that failed is closed too: nothing is left open for the caps to count.
    let _ = env.close_episode(&id).await;
    Ok(Run { breakdown: scored?, log: s.log, edits: s.edits, refused: s.refused, left_states })
}

/// An agent's view of its episode: tool calls by name and JSON arguments, as a policy makes them.
struct Session<'a> {
    env: &'a Environment,
    id: &'a str,
    /// Every call and whether it was carried out.
    log: Vec<String>,
    edits: usize,
    refused: usize,
}

impl Session<'_> {
    /// Makes one tool call; `Ok(false)` when the environment refuses it (bad arguments, an id that is
    /// gone, a memory that cannot be split or merged, a cap).
    async fn call(&mut self, tool: &str, args: Value) -> Result<bool, EpisodeError> {
        Ok(self.call_out(tool, args).await?.is_some())
    }

    /// Makes one tool call and returns what it gave (`None` when refused).
    async fn call_out(&mut self, tool: &str, args: Value) -> Result<Option<crate::tools::ToolOutput>, EpisodeError> {
        let args = args.to_string();
        let result = match parse_call(tool, &args, &self.env.config().limits.tools) {
            Ok(call) => self.env.call_tool(self.id, call).await.map(|r| r.output),
            Err(e) => Err(EpisodeError::Tool(e)),
        };
        let out = match result {
            Ok(out) => Some(out),
            Err(EpisodeError::Tool(_)) => None,
            Err(e) => return Err(e),
        };
        self.log.push(format!("{tool} {args} {}", if out.is_some() { "ok" } else { "refused" }));
        if out.is_some() {
            self.edits += 1;
        } else {
            self.refused += 1;
        }
        Ok(out)
    }

    /// The search tool's hits for `query`, best first (what its text shows a policy).
    async fn search(&mut self, query: &str, top_k: usize) -> Result<Vec<MemoryRecord>, EpisodeError> {
        let out = self.call_out("search_memory", json!({"query": query, "top_k": top_k})).await?;
        Ok(match out.map(|o| o.kind) {
            Some(crate::tools::OutputKind::Search { hits, .. }) => hits.into_iter().map(|(_, r)| r).collect(),
            _ => Vec::new(),
        })
    }

    /// The sample tool's memories.
    async fn sample(&mut self, k: usize, strategy: &str) -> Result<Vec<MemoryRecord>, EpisodeError> {
        let out = self.call_out("sample_memory", json!({"k": k, "strategy": strategy})).await?;
        Ok(match out.map(|o| o.kind) {
            Some(crate::tools::OutputKind::Sampled(rs)) => rs,
            _ => Vec::new(),
        })
    }

    /// The longest text a memory may hold.
    fn max_chars(&self) -> usize {
        self.env.config().limits.tools.max_text_chars
    }

    /// Counts an edit the agent could not attempt (too few memories).
    fn skip(&mut self, what: &str) {
        self.log.push(format!("{what} skipped"));
        self.refused += 1;
    }

    /// The episode's memories now, in listing order.
    async fn memories(&self) -> Result<Vec<MemoryRecord>, EpisodeError> {
        let mut out = Vec::new();
        let mut after = None;
        loop {
            let page = self.env.list_memories(self.id, after, 1024, None).await?;
            out.extend(page.memories);
            match page.next_after {
                Some(next) => after = Some(next),
                None => return Ok(out),
            }
        }
    }
}

/// The agent's edits.
async fn act(s: &mut Session<'_>, o: &Options, agent: Agent, q: &Question, distractors: &[&MemoryRow]) -> Result<(), EpisodeError> {
    match agent {
        Agent::NoOp => {}
        Agent::Oracle => {
            if let Some(content) = oracle_memory(q) {
                s.call("manage_memory", json!({"operation": "create", "content": content})).await?;
            }
        }
        Agent::Destroyer => {
            let evidence: HashSet<&str> = q.evidence.iter().map(String::as_str).collect();
            let ids: Vec<String> = s
                .memories()
                .await?
                .iter()
                .filter(|m| m.evidence.iter().any(|e| evidence.contains(e.as_str())))
                .map(|m| m.id.to_string())
                .collect();
            for chunk in ids.chunks(s.env.config().limits.tools.max_ids_per_call.max(1)) {
                s.call("delete_memory", json!({"memory_ids": chunk, "reason": "evidence of the question"})).await?;
            }
        }
        Agent::Random => random_edits(s, o, q, distractors).await?,
        Agent::Resolver => honest::resolve_dates(s, q).await?,
        Agent::ResolverCard => honest::resolved_cards(s, q).await?,
        Agent::Sweep => honest::sweep(s, q).await?,
        Agent::Trick(t) => tricks::play(s, t, q).await?,
    }
    Ok(())
}

/// The random agent's kinds of edit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RandomEdit {
    Delete,
    Merge,
    Split,
    Shuffle,
    Distract,
}

impl RandomEdit {
    /// Every kind; `Distract` last (left out when there is no other conversation to copy from).
    const ALL: [RandomEdit; 5] = [RandomEdit::Delete, RandomEdit::Merge, RandomEdit::Split, RandomEdit::Shuffle, RandomEdit::Distract];

    fn name(self) -> &'static str {
        match self {
            RandomEdit::Delete => "delete",
            RandomEdit::Merge => "merge",
            RandomEdit::Split => "split",
            RandomEdit::Shuffle => "shuffle",
            RandomEdit::Distract => "distract",
        }
    }

    /// Memories the edit needs.
    fn needs(self) -> usize {
        match self {
            RandomEdit::Merge => 2,
            RandomEdit::Delete | RandomEdit::Split | RandomEdit::Shuffle => 1,
            RandomEdit::Distract => 0,
        }
    }
}

/// `o.random_steps` random edits, drawn from a generator seeded by `o.seed` and the question id.
async fn random_edits(s: &mut Session<'_>, o: &Options, q: &Question, distractors: &[&MemoryRow]) -> Result<(), EpisodeError> {
    let mut rng = ChaCha8Rng::seed_from_u64(fnv1a(format!("{}:{}", o.seed, q.id).as_bytes()));
    let kinds = if distractors.is_empty() { &RandomEdit::ALL[..4] } else { &RandomEdit::ALL[..] };
    for _ in 0..o.random_steps {
        let kind = kinds[rng.random_range(0..kinds.len())];
        let mems = if kind.needs() > 0 { s.memories().await? } else { Vec::new() };
        if mems.len() < kind.needs() {
            s.skip(kind.name());
            continue;
        }
        let n = mems.len();
        match kind {
            RandomEdit::Delete => {
                let m = &mems[rng.random_range(0..n)];
                s.call("delete_memory", json!({"memory_id": m.id.to_string(), "reason": "random"})).await?
            }
            RandomEdit::Merge => {
                let i = rng.random_range(0..n);
                let j = rng.random_range(0..n - 1);
                let j = if j >= i { j + 1 } else { j };
                let ids = [mems[i].id.to_string(), mems[j].id.to_string()];
                s.call("merge_memory", json!({"memory_ids": ids, "strategy": "summarize"})).await?
            }
            RandomEdit::Split => {
                let m = &mems[rng.random_range(0..n)];
                s.call("split_memory", json!({"memory_id": m.id.to_string(), "split_criteria": "thematic"})).await?
            }
            RandomEdit::Shuffle => {
                let m = &mems[rng.random_range(0..n)];
                let mut words: Vec<&str> = m.text.split_whitespace().collect();
                words.shuffle(&mut rng);
                let args = json!({"operation": "update", "memory_id": m.id.to_string(), "content": words.join(" ")});
                s.call("manage_memory", args).await?
            }
            RandomEdit::Distract => {
                let d = distractors[rng.random_range(0..distractors.len())];
                let args = json!({"operation": "create", "content": d.text, "speaker": d.speaker, "source": "distractor"});
                s.call("manage_memory", args).await?
            }
        };
    }
    Ok(())
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod adversarial_tests;
