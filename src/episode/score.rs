//! Scoring an episode: `p_old` on the shared M₀ (cached per question, evaluator and model, computed once
//! even when a whole GRPO group scores at once), `p_new` on the episode's memory, and the reward. Apart
//! from the lifecycle in `mod.rs` because it is the one part that talks to the evaluators and the LLM.

use std::sync::Arc;

use super::{Environment, EpisodeError, EpisodeState, POld};
use crate::memory::{BaseMemory, EpisodeMemory, Filter, MemoryRecord};
use crate::reward::reading::Reading;
use crate::reward::{self, Context, Evaluation, Evaluator, RewardBreakdown, SizeInput, Target};

/// How deep an edited memory is searched to fill the text budget: the tools' own top_k cap.
const READ_DEPTH: usize = 50;

impl Environment {
    /// Scores the episode (idempotent) and finalises it.
    pub async fn score_episode(&self, episode_id: &str) -> Result<Arc<RewardBreakdown>, EpisodeError> {
        self.score_with_state(episode_id).await.map(|(b, _)| b)
    }

    /// Scores the episode and returns its state after scoring.
    pub async fn score_with_state(&self, episode_id: &str) -> Result<(Arc<RewardBreakdown>, EpisodeState), EpisodeError> {
        let started = std::time::Instant::now();
        let entry = self.entry(episode_id)?;
        let mut ep = entry.episode.lock().await;
        self.check_open(&ep)?;
        if let Some(b) = &ep.scored {
            return Ok((b.clone(), ep.state()));
        }
        let k = self.config.top_k;
        let evaluator = ep.evaluator;
        let base = ep.memory.base().clone();
        let old = match (&ep.conversation_id, &ep.question_id) {
            (Some(cid), Some(qid)) => self.p_old_cached(cid, qid, evaluator, &base, &ep.target).await?,
            _ => Arc::new(self.evaluate_base(evaluator, &base, &ep.target).await?),
        };
        let (query, old_eval) = (&old.0, old.1.clone());
        let new_eval = {
            let (hits, _) = ep.memory.search_text(query, &ep.target.question, self.read_depth(), &Filter::default(), None);
            let recs: Vec<&MemoryRecord> = hits.iter().map(|h| h.record).collect();
            let written: Vec<_> = ep.memory.additions().collect();
            let reading = match self.config.context {
                Context::Budget => Reading::budgeted(&recs, old_eval.budget),
                Context::TopK => Reading::whole(&recs),
            }
            .carrying(&super::others::carried(&ep.memory, &written));
            self.evaluate(evaluator, &ep.target, &reading).await?
        };
        let sizes = SizeInput {
            old_count: base.len(),
            new_count: ep.memory.len(),
            old_chars: base.total_chars(),
            new_chars: ep.memory.total_chars(),
            n_max: self.config.n_max.unwrap_or(base.len()).max(1),
        };
        let llm_model = self.llm_model(evaluator);
        let info = reward::ScoringInfo {
            top_k: k,
            evaluator,
            llm_model,
            embedder: self.embed.identity().to_string(),
            evidence_total: ep.target.evidence.len(),
            formula: self.config.formula,
            context: self.config.context,
        };
        let whole = self.whole(&ep).await?;
        let mut b = reward::breakdown(old_eval, new_eval, sizes, whole, info);
        b.score_ms = started.elapsed().as_secs_f64() * 1e3;
        let b = Arc::new(b);
        crate::util::prometheus::episodes(crate::util::prometheus::EpisodeEvent::Scored, 1);
        crate::util::prometheus::scored(evaluator.name(), b.reward, b.new.p);
        ep.scored = Some(b.clone());
        Ok((b, ep.state()))
    }

    /// How deep an edited memory is searched for a reading: deep enough to fill the budget, or the top-k.
    pub(super) fn read_depth(&self) -> usize {
        match self.config.context {
            Context::Budget => READ_DEPTH.max(self.config.top_k),
            Context::TopK => self.config.top_k,
        }
    }

    /// The model that answers for `evaluator`: the server's LLM for an LLM evaluator, else none.
    fn llm_model(&self, evaluator: Evaluator) -> Option<String> {
        self.llm.as_ref().filter(|_| evaluator.needs_llm()).map(|l| l.model().to_string())
    }

    /// Scores what was read with `evaluator` (the LLM ones through the server's LLM).
    pub async fn evaluate(&self, evaluator: Evaluator, target: &Target, reading: &Reading) -> Result<Evaluation, EpisodeError> {
        if !evaluator.needs_llm() {
            return Ok(reward::evaluate(evaluator, target, reading));
        }
        let llm =
            self.llm.as_ref().ok_or_else(|| EpisodeError::precondition(format!("evaluator {} needs an LLM endpoint", evaluator.name())))?;
        Ok(reward::llm_eval::evaluate(llm, evaluator, target, reading).await?)
    }

    async fn evaluate_base(
        &self,
        evaluator: Evaluator,
        base: &Arc<BaseMemory>,
        target: &Target,
    ) -> Result<(Vec<f32>, Evaluation), EpisodeError> {
        let q = self.embed.embed(vec![target.question.clone()]).await?.pop().unwrap_or_default();
        let view = EpisodeMemory::new(base.clone());
        let (hits, _) = view.search_text(&q, &target.question, self.config.top_k, &Filter::default(), None);
        let recs: Vec<&MemoryRecord> = hits.iter().map(|h| h.record).collect();
        // M₀'s top-k is read whole, under either context: its length is the budget of the edited memory.
        let eval = self.evaluate(evaluator, target, &Reading::whole(&recs)).await?;
        Ok((q, eval))
    }

    /// p_old depends only on (conversation, question, evaluator, model): computed once per key, even when
    /// a whole GRPO group scores at the same moment (the others wait for the first). A failure is not
    /// kept: the next scoring tries again.
    pub(super) async fn p_old_cached(
        &self,
        conversation_id: &str,
        question_id: &str,
        evaluator: Evaluator,
        base: &Arc<BaseMemory>,
        target: &Target,
    ) -> Result<POld, EpisodeError> {
        let key = (conversation_id.to_string(), question_id.to_string(), evaluator, self.llm_model(evaluator));
        let cell = self.p_old.lock().entry(key).or_default().clone();
        let old =
            cell.get_or_try_init(|| async { Ok::<_, EpisodeError>(Arc::new(self.evaluate_base(evaluator, base, target).await?)) }).await?;
        Ok(old.clone())
    }
}

/// What scoring found, for a trainer's per-step logs (`ScoreEpisodeResponse.metrics`), by name: the time
/// scoring took (stored with the score, so a repeated ScoreEpisode answers the same), the memories and their change since M₀, and how the set the evaluator read changed —
/// `retrieved_overlap` (|old ∩ new| / |old ∪ new| of the retrieved ids; 1 when both are empty) and
/// `retrieved_changed` (ids read now that were not read on M₀).
pub fn score_metrics(b: &RewardBreakdown) -> [(&'static str, f64); 5] {
    let old: std::collections::HashSet<_> = b.old.retrieved.iter().collect();
    let new: std::collections::HashSet<_> = b.new.retrieved.iter().collect();
    let union = old.union(&new).count();
    let overlap = if union == 0 { 1.0 } else { old.intersection(&new).count() as f64 / union as f64 };
    [
        ("score_ms", b.score_ms),
        ("memories", b.sizes.new_count as f64),
        ("memories_delta", b.sizes.new_count as f64 - b.sizes.old_count as f64),
        ("retrieved_overlap", overlap),
        ("retrieved_changed", new.difference(&old).count() as f64),
    ]
}
