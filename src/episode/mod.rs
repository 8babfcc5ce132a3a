//! Episodes: their lifecycle (create → tool calls → score → close), the registry that holds them, the
//! caps that protect the server, the idle reaper, and the remembered ids of ended episodes (ids are
//! never reused while remembered: a call on one is FAILED_PRECONDITION saying how and when it ended).
//!
//! [`Environment`] is the domain service the gRPC layer calls. It owns the dataset, one shared read-only
//! M₀ per conversation (built once at startup), the embedder, the registry and the `p_old` cache.
//! Creating an episode is O(1) in |M₀|: it makes an [`EpisodeMemory`] view of the shared M₀.

mod build;
mod create;
mod custom;
mod ended;
mod error;
mod fork;
mod limits;
pub mod once;
pub mod others;
mod registry;
pub mod replica;
mod score;
pub use score::score_metrics;
mod step;
mod trace;
mod types;

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

pub use build::{build_base, initial_records};
pub use ended::{Ending, Tombstone};
pub use error::EpisodeError;
pub use fork::{ForkRequest, MAX_FORKS};
pub use limits::{Clock, Limits, ManualClock, SystemClock};
use parking_lot::Mutex;
pub use registry::{Entry, Inserted, Lookup, Registry};
pub use types::*;

use crate::dataset::Dataset;
use crate::embed::{EmbedError, EmbedService};
use crate::llm::Llm;
use crate::memory::{BaseMemory, Filter, MemoryType};
use crate::reward::{Evaluation, Evaluator};

/// A question's embedding and its evaluation on M₀ (cached per question: `p_old`).
type POld = Arc<(Vec<f32>, Evaluation)>;

/// What `p_old` depends on: (conversation, question, evaluator, LLM model). M₀ and the embedder are
/// fixed for the server's life.
type POldKey = (String, String, Evaluator, Option<String>);

/// A conversation's panel of other questions, built by the first episode that needs it.
type PanelCell = Arc<tokio::sync::OnceCell<Arc<others::Panel>>>;

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
    /// The other questions of each conversation, per offline evaluator ([`others`]).
    panels: Mutex<HashMap<(String, Evaluator), PanelCell>>,
    /// Content words of each conversation's M₀ (the text ledger's base).
    base_words: HashMap<String, usize>,
    next_id: AtomicU64,
    id_salt: u64,
    replica: replica::Replica,
}

impl std::fmt::Debug for Environment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Environment").field("open", &self.registry.len()).field("embed", &self.embed).finish()
    }
}

impl Environment {
    /// Builds the environment: embeds every conversation's M₀ once and builds its index.
    pub fn new(config: EnvConfig, dataset: Arc<Dataset>, embed: EmbedService, clock: Arc<dyn Clock>) -> Result<Self, EmbedError> {
        Self::with_vectors(config, dataset, embed, clock, None, &mut |_, _| {})
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

    /// Names this server as one of several replicas (`--replica`): every id it gives out starts with
    /// `name.`, and calls for ids naming another replica are refused ([`replica`]).
    pub fn with_replica(mut self, name: Option<String>) -> Result<Self, EpisodeError> {
        if let Some(n) = &name {
            replica::valid_replica_name(n).map_err(|m| EpisodeError::invalid("replica", m))?;
        }
        self.replica = replica::Replica::new(name);
        Ok(self)
    }

    /// The replica this server is, and whether it drains.
    pub fn replica(&self) -> &replica::Replica {
        &self.replica
    }

    /// Open episodes not yet scored: what a drain waits for.
    pub fn unscored_episodes(&self) -> usize {
        self.registry.count_unscored()
    }

    /// The shared M₀ of a conversation.
    pub fn base(&self, conversation_id: &str) -> Option<&Arc<BaseMemory>> {
        self.bases.get(conversation_id)
    }

    /// The open entry of `id`; EpisodeEnded for a remembered ended id, else EpisodeNotFound.
    fn entry(&self, id: &str) -> Result<Arc<Entry>, EpisodeError> {
        create::valid_id("episode_id", id)?;
        self.replica.check(id)?;
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

    /// State and, optionally, trace.
    pub async fn get_episode(&self, episode_id: &str, with_trace: bool) -> Result<(EpisodeState, Vec<TraceEntry>), EpisodeError> {
        let entry = self.entry(episode_id)?;
        let ep = entry.episode.lock().await;
        self.check_open(&ep)?;
        Ok((ep.state(), if with_trace { ep.trace.entries() } else { Vec::new() }))
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
        create::valid_id("episode_id", episode_id)?;
        self.replica.check(episode_id)?;
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

    /// Closes `episode_id` as [`Self::close_episode`] does, and remembers an id that names no episode as
    /// closed all the same, so that no later CreateEpisode opens it: a close that overtook its create (a
    /// client that lost the create's reply closes the id it chose) must not let that create open it late.
    pub async fn retire_episode(&self, episode_id: &str) -> Result<Option<EpisodeState>, EpisodeError> {
        create::valid_id("episode_id", episode_id)?;
        loop {
            match self.close_episode(episode_id).await {
                Err(EpisodeError::EpisodeNotFound { .. }) => {
                    let now = self.clock.now_ms();
                    let t = Tombstone { ending: Ending::Closed, scored: false, steps_used: 0, at_ms: now };
                    if self.registry.retire(episode_id, now, t) {
                        return Ok(None);
                    }
                    // Opened in between: close it.
                }
                other => return other,
            }
        }
    }

    /// Closes episodes idle for at least the TTL (remembering their ids) and forgets remembered ids past
    /// their time.
    pub fn reap_idle(&self) -> Swept {
        let now = self.clock.now_ms();
        let reaped = self.registry.reap_idle(now, self.config.limits.idle_ttl.as_millis() as u64);
        Swept { reaped, forgotten: self.registry.forget_expired(now), remembered: self.registry.remembered() }
    }
}

#[cfg(test)]
mod tests;
