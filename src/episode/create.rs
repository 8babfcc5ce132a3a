//! Opening an episode: id checks, idempotent re-creation of a live id, and the episode's M₀ view
//! (O(1) in |M₀|: an overlay of the shared base).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::memory::EpisodeMemory;
use crate::reward::Target;
use crate::util::fnv::{fnv1a_extend, FNV1A_OFFSET};

use super::*;

fn valid_episode_id(id: &str) -> Result<(), EpisodeError> {
    valid_id("episode_id", id)
}

/// The rule for a client-chosen episode id, refusing as `field`.
pub(super) fn valid_id(field: &str, id: &str) -> Result<(), EpisodeError> {
    if id.is_empty() || id.len() > 128 {
        return Err(EpisodeError::invalid(
            field,
            format!("must be 1 to 128 characters, got {} ({})", id.len(), crate::util::excerpt::quoted(id)),
        ));
    }
    if let Some(c) = id.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'))) {
        return Err(EpisodeError::invalid(field, format!("may hold only letters, digits, '.', '_', ':' and '-', found {c:?}")));
    }
    Ok(())
}

impl Environment {
    pub(super) fn fresh_id(&self) -> String {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut z = n.wrapping_add(self.id_salt).wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        self.replica.prefixed(format!("ep-{:016x}", z ^ (z >> 31)))
    }

    /// Opens an episode, or returns the live one with the same id.
    pub async fn create_episode(&self, mut req: CreateRequest) -> Result<Created, EpisodeError> {
        if let Some(id) = &req.episode_id {
            valid_episode_id(id)?;
            req.episode_id = Some(self.replica.own("episode_id", id)?);
        }
        self.replica.admit_new()?;
        let max_steps = req.max_steps.unwrap_or(self.config.limits.default_max_steps);
        if max_steps == 0 || max_steps > self.config.limits.max_steps_cap {
            return Err(EpisodeError::invalid("max_steps", format!("must be 1 to {}, got {max_steps}", self.config.limits.max_steps_cap)));
        }
        if let EpisodeSource::Custom { memories, question, answer, evidence } = &mut req.source {
            custom::admit(&self.config.limits, memories, question, answer, evidence)?;
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
                let q = self.dataset.question(question_id).ok_or_else(|| match self.dataset.excluded(question_id) {
                    Some(error) => EpisodeError::precondition(format!(
                        "question {question_id} is excluded: the LoCoMo audit flags its gold answer ({error}) and this server \
                         runs with --gold exclude-flagged"
                    )),
                    None => EpisodeError::DatasetNotFound { what: "question", id: question_id.clone() },
                })?;
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
                let target = Target {
                    question: question.clone(),
                    answer: Some(answer.clone()),
                    adversarial_answer: None,
                    category: None,
                    evidence: evidence.clone(),
                };
                let h = memories.iter().fold(FNV1A_OFFSET, |h, m| fnv1a_extend(fnv1a_extend(h, m.text.as_bytes()), &[0]));
                (None, target, None, None, format!("custom:{question}:{}:{h:016x}", memories.len()))
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
            trace: super::trace::Trace::default(),
            applied: super::once::Applied::default(),
            definition: definition.clone(),
            ended: None,
        };
        match self.registry.insert_with(&id, self.clock.now_ms(), make) {
            Inserted::New(e) => {
                crate::util::prometheus::episodes(crate::util::prometheus::EpisodeEvent::Created, 1);
                Ok(Created { state: e.episode.lock().await.state(), created: true })
            }
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
                    crate::util::excerpt::cut(&ep.definition),
                    crate::util::excerpt::cut(definition)
                ),
            });
        }
        Ok(Created { state: ep.state(), created: false })
    }
}
