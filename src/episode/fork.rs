//! ForkEpisode: N independent copies of a live episode's current state, for GRPO groups that reroll
//! from one shared intermediate memory (Memory-R2's LoGo-GRPO) instead of from M₀.
//!
//! Why it is cheap: an episode's memory is an overlay on the shared M₀, so a fork copies the overlay
//! (tombstones, added records with their vectors and terms) and the counters; M₀ is shared through its
//! `Arc` and never embedded again.
//!
//! What a fork is:
//! - its memory, steps used, budget, rejected-call count and trace are the parent's at the moment of the
//!   fork; its seed is the parent's unless given;
//! - it is independent: an edit in one fork is invisible to the others and to the parent;
//! - it scores against the parent's `p_old` (the memory at creation: the same M₀, question and
//!   evaluator), so siblings' rewards are comparable with each other and with the parent's;
//! - forks count against the open-episode cap, and the call is all or nothing: if one fork cannot be
//!   opened (the cap, a client-chosen id in use or remembered), none is;
//! - a parent that was scored, closed or reaped is refused (FAILED_PRECONDITION).

use std::collections::HashSet;
use std::sync::Arc;

use super::registry::{Entry, Inserted, Lookup};
use super::{Environment, Episode, EpisodeError, EpisodeState};

/// The most forks one call may make.
pub const MAX_FORKS: usize = 256;

/// A ForkEpisode request in domain terms.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ForkRequest {
    /// The live episode to copy.
    pub episode_id: String,
    /// How many forks; 0 means as many as `fork_ids` or `seeds` name, else 1.
    pub count: usize,
    /// The forks' ids (none: fresh ids); as many as `count` when given.
    pub fork_ids: Vec<String>,
    /// The forks' seeds (none: the parent's); as many as `count` when given.
    pub seeds: Vec<u64>,
}

/// How many forks `req` asks for, after checking that its lists agree.
fn fork_count(req: &ForkRequest) -> Result<usize, EpisodeError> {
    let implied = req.fork_ids.len().max(req.seeds.len());
    let n = if req.count == 0 { implied.max(1) } else { req.count };
    if n > MAX_FORKS {
        return Err(EpisodeError::invalid("count", format!("must be 1 to {MAX_FORKS}, got {n}")));
    }
    for (field, len) in [("fork_ids", req.fork_ids.len()), ("seeds", req.seeds.len())] {
        if len != 0 && len != n {
            return Err(EpisodeError::invalid(field, format!("names {len} forks, but count is {n}")));
        }
    }
    Ok(n)
}

impl Environment {
    /// Copies a live episode into independent forks (module doc); returns their states in order.
    pub async fn fork_episode(&self, mut req: ForkRequest) -> Result<Vec<EpisodeState>, EpisodeError> {
        let n = fork_count(&req)?;
        let mut seen = HashSet::with_capacity(req.fork_ids.len());
        for (i, id) in req.fork_ids.iter_mut().enumerate() {
            let field = format!("fork_ids[{i}]");
            super::create::valid_id(&field, id)?;
            *id = self.replica.own(&field, id)?;
        }
        for (i, id) in req.fork_ids.iter().enumerate() {
            let field = format!("fork_ids[{i}]");
            if id == &req.episode_id || !seen.insert(id.as_str()) {
                return Err(EpisodeError::invalid(
                    &field,
                    format!("{} is named twice (or is the parent's id)", crate::util::excerpt::quoted(id)),
                ));
            }
        }
        super::create::valid_id("episode_id", &req.episode_id)?;
        self.replica.check(&req.episode_id)?;
        self.replica.admit_new()?;
        let now = self.clock.now_ms();
        let entry = match self.registry.find(&req.episode_id, now) {
            Lookup::Live(e) => e,
            Lookup::Ended(t) => return Err(self.ended(&req.episode_id, t)),
            Lookup::Unknown => return Err(EpisodeError::EpisodeNotFound { id: req.episode_id.clone() }),
        };
        let parent = entry.episode.lock().await;
        self.check_open(&parent)?;
        if parent.scored.is_some() {
            return Err(EpisodeError::precondition(format!(
                "episode {} is scored: a fork must start from an episode that can still be edited",
                crate::util::excerpt::quoted(&parent.id)
            )));
        }
        entry.touch(now);
        let ids: Vec<String> = if req.fork_ids.is_empty() { (0..n).map(|_| self.fresh_id()).collect() } else { req.fork_ids.clone() };
        let mut made: Vec<(String, Arc<Entry>)> = Vec::with_capacity(n);
        let mut states = Vec::with_capacity(n);
        for (i, id) in ids.iter().enumerate() {
            let seed = req.seeds.get(i).copied().unwrap_or(parent.seed);
            let fork = Episode {
                id: id.clone(),
                conversation_id: parent.conversation_id.clone(),
                question_id: parent.question_id.clone(),
                target: parent.target.clone(),
                evaluator: parent.evaluator,
                memory: parent.memory.clone(),
                seed,
                max_steps: parent.max_steps,
                steps_used: parent.steps_used,
                rejected: parent.rejected,
                scored: None,
                trace: parent.trace.clone(),
                applied: parent.applied.clone(),
                definition: format!("{} fork of {}", parent.definition, parent.id),
                ended: None,
            };
            let state = fork.state();
            let refused = match self.registry.insert_with(id, now, move || fork) {
                Inserted::New(e) => {
                    states.push(state);
                    made.push((id.clone(), e));
                    continue;
                }
                Inserted::Existing(_) => {
                    EpisodeError::AlreadyExists { message: format!("fork_ids[{i}]: episode {} is live", crate::util::excerpt::quoted(id)) }
                }
                Inserted::Ended(t) => self.ended(id, t),
                Inserted::Full => EpisodeError::ResourceExhausted {
                    message: format!(
                        "{} episodes are open, the server's cap; {n} forks would pass it (close finished episodes)",
                        self.config.limits.max_open_episodes
                    ),
                },
            };
            // All or nothing: the forks made so far are withdrawn, as if never opened.
            for (id, e) in &made {
                self.registry.withdraw(id, e);
            }
            return Err(refused);
        }
        let n = states.len() as u64;
        crate::util::prometheus::episodes(crate::util::prometheus::EpisodeEvent::Created, n);
        crate::util::prometheus::episodes(crate::util::prometheus::EpisodeEvent::Forked, n);
        Ok(states)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(count: usize, ids: &[&str], seeds: &[u64]) -> ForkRequest {
        ForkRequest { episode_id: "p".into(), count, fork_ids: ids.iter().map(|s| s.to_string()).collect(), seeds: seeds.to_vec() }
    }

    #[test]
    fn the_count_follows_the_lists_and_its_cap() {
        assert_eq!(fork_count(&req(0, &[], &[])).unwrap(), 1);
        assert_eq!(fork_count(&req(0, &["a", "b"], &[])).unwrap(), 2);
        assert_eq!(fork_count(&req(3, &[], &[1, 2, 3])).unwrap(), 3);
        assert!(fork_count(&req(2, &["a"], &[])).unwrap_err().to_string().contains("fork_ids"));
        assert!(fork_count(&req(0, &["a"], &[1, 2])).unwrap_err().to_string().contains("fork_ids"));
        assert!(fork_count(&req(MAX_FORKS + 1, &[], &[])).unwrap_err().to_string().contains("count"));
    }
}
