//! The other questions of an episode's conversation, scored for the whole-memory reward
//! ([`crate::reward::others`]): every question of categories 1–4 with a gold answer, the target aside.
//!
//! What each one reads on M₀ is computed once per (conversation, offline evaluator) and shared by every
//! episode of the conversation (a [`Panel`]): the question's embedding, the ids M₀'s top-k holds, their
//! budget, the score of the last one read, and p_old. Scoring an episode then re-scores only the questions
//! whose reading its edits could have changed. A reading is a prefix of the question's ranking, so it is
//! the same as on M₀ unless
//!
//! - a memory it read is gone or rewritten, or
//! - a memory the episode wrote scores at least as high as the last memory it read (ties are re-scored);
//!
//! every other question reads exactly what it read on M₀. Hybrid search (`--search hybrid`) fuses ranks,
//! so one edit shifts the fused score of every memory below it and readings far from the edit reorder:
//! there the other questions read M₀'s fusion frozen ([`crate::memory::lexical::FrozenFusion`]), with what
//! the episode wrote placed in it, so that only what it wrote or removed moves them (the target reads the
//! live search). The LLM evaluators score the others offline (`answer-phrase`), and with `--others-llm K` also
//! pay for an LLM's answer on the K re-scored questions whose reading moved most.

mod panel;

use std::sync::Arc;

pub(super) use panel::carried;
pub use panel::{Other, Panel, Scored};

use super::{Environment, EpisodeError};
use crate::embed::EmbedError;
use crate::memory::BaseMemory;
use crate::reward::others::{OtherDelta, Others};
use crate::reward::{self, Evaluator, Target};

/// The evaluator that scores the other questions of an episode scored by `evaluator`: itself when offline,
/// else `answer-phrase`.
pub fn offline(evaluator: Evaluator) -> Evaluator {
    if evaluator.needs_llm() {
        Evaluator::AnswerPhrase
    } else {
        evaluator
    }
}

impl Environment {
    /// The other questions of `conversation_id` under the offline `evaluator`, built on first use (the
    /// questions embedded, M₀ searched and scored once for every episode of the conversation).
    pub(super) async fn panel(
        &self,
        conversation_id: &str,
        evaluator: Evaluator,
        base: &Arc<BaseMemory>,
    ) -> Result<Arc<Panel>, EpisodeError> {
        let key = (conversation_id.to_string(), evaluator);
        let cell = self.panels.lock().entry(key).or_default().clone();
        let panel = cell
            .get_or_try_init(|| async {
                let questions: Vec<(String, Target)> = self
                    .dataset
                    .questions_of(conversation_id)
                    .filter(|q| {
                        q.category != crate::dataset::ADVERSARIAL_CATEGORY && q.answer.as_deref().is_some_and(|a| !a.trim().is_empty())
                    })
                    .map(|q| (q.id.clone(), Target::from(q)))
                    .collect();
                let texts: Vec<String> = questions.iter().map(|(_, t)| t.question.clone()).collect();
                let queries = self.embed.embed(texts).await?;
                let (base, k, depth, threads) = (base.clone(), self.config.top_k, self.read_depth(), self.config.score_threads);
                let built = tokio::task::spawn_blocking(move || Panel::build(evaluator, &base, k, depth, questions, queries, threads))
                    .await
                    .map_err(|e| EpisodeError::Embed(EmbedError::Join(e.to_string())))?;
                Ok::<_, EpisodeError>(Arc::new(built))
            })
            .await?;
        Ok(panel.clone())
    }

    /// The whole-memory terms of an episode: its content words' ledger, and, when the formula scores them
    /// and the episode is on a LoCoMo question, the other questions of its conversation.
    pub(super) async fn whole(&self, ep: &super::Episode) -> Result<reward::Whole, EpisodeError> {
        let base = ep.memory.base().clone();
        let base_words = match &ep.conversation_id {
            Some(cid) => self.base_words.get(cid).copied(),
            None => None,
        };
        let with_others = self.config.formula.others().is_some();
        let panel = match (&ep.conversation_id, with_others) {
            (Some(cid), true) => Some(self.panel(cid, offline(ep.evaluator), &base).await?),
            _ => None,
        };
        let memory = ep.memory.clone();
        let skip = ep.question_id.clone().unwrap_or_default();
        let context = self.config.context;
        let job_panel = panel.clone();
        let (ledger, scored) = tokio::task::spawn_blocking(move || {
            let base_words = base_words.unwrap_or_else(|| base.records().iter().map(|r| reward::ledger::words(&r.text)).sum());
            let removed: Vec<&crate::memory::MemoryRecord> = memory.removed_originals().collect();
            let written: Vec<&crate::memory::MemoryRecord> = memory.additions().map(|(r, _)| r).collect();
            let ledger = reward::ledger::Ledger::of(base_words, &removed, &written);
            let scored = job_panel.map(|p| p.score(&memory, &skip, context, false));
            (ledger, scored)
        })
        .await
        .map_err(|e| EpisodeError::Embed(EmbedError::Join(e.to_string())))?;
        let others = match (panel, scored) {
            (Some(panel), Some(mut scored)) => {
                let llm_scored = self.others_by_llm(ep, &panel, &mut scored).await?;
                Some(Others::of(&scored.deltas, scored.rescored.len(), llm_scored, panel.evaluator.name()))
            }
            _ => None,
        };
        Ok(reward::Whole { ledger, others })
    }

    /// `--others-llm K`: with an LLM evaluator, scores the K re-scored questions whose reading moved most
    /// (ties in dataset order) with it too, replacing their offline Δp. Returns how many.
    async fn others_by_llm(&self, ep: &super::Episode, panel: &Panel, scored: &mut Scored) -> Result<usize, EpisodeError> {
        let k = self.config.others_llm;
        if k == 0 || !ep.evaluator.needs_llm() {
            return Ok(0);
        }
        let (Some(cid), base) = (&ep.conversation_id, ep.memory.base()) else { return Ok(0) };
        let mut picked = scored.rescored.clone();
        picked.sort_by_key(|(i, _, moved)| (std::cmp::Reverse(*moved), *i));
        picked.truncate(k);
        for &(i, at, _) in &picked {
            let o = &panel.questions()[i];
            let old = self.p_old_cached(cid, &o.id, ep.evaluator, base, &o.target).await?;
            let reading = panel::reading(panel, &ep.memory, o, self.config.context);
            let new = self.evaluate(ep.evaluator, &o.target, &reading).await?;
            // The LLM is not asked twice: its rise is credited as far as the offline evaluator credits one here.
            // And its fall is destroyed or displaced as far as the offline evaluator says the fact is gone.
            let offline = scored.deltas[at];
            let credited = offline.credited_rise() > 0.0;
            let p_m0 = if credited { old.1.p.min(new.p) } else { new.p };
            let gone = offline.p_old > 0.0 && offline.destroyed() >= offline.fall() && offline.fall() > 0.0;
            let p_now = if gone { new.p } else { old.1.p.max(new.p) };
            let p_virtual = if offline.displaced() > 0.0 { old.1.p.min(new.p) } else { old.1.p.max(new.p) };
            scored.deltas[at] = OtherDelta { p_old: old.1.p, p_new: new.p, p_m0, p_grounded: new.p, p_now, p_virtual };
        }
        Ok(picked.len())
    }
}

impl Environment {
    /// The other questions of a live episode scored as scoring does (the changed readings only, read from the
    /// kept rankings, memories prepared and cached), and scored again the reference way: every one re-scored
    /// from a full search (`Reference::Search`), or every reading scored by the evaluator itself from the
    /// units' own text (`Reference::Plain`). Tests hold the two equal.
    #[cfg(test)]
    pub(super) async fn others_against(&self, episode_id: &str, reference: Reference) -> Result<(Scored, Scored), EpisodeError> {
        let entry = self.entry(episode_id)?;
        let ep = entry.episode.lock().await;
        let (Some(cid), Some(qid)) = (&ep.conversation_id, &ep.question_id) else { return Err(EpisodeError::precondition("not LoCoMo")) };
        let panel = self.panel(cid, offline(ep.evaluator), ep.memory.base()).await?;
        let context = self.config.context;
        let again = match reference {
            Reference::Search => panel.score_with(&ep.memory, qid, context, true, true, false),
            Reference::Plain => panel.score_with(&ep.memory, qid, context, false, false, true),
        };
        Ok((panel.score(&ep.memory, qid, context, false), again))
    }
}

/// How [`Environment::others_against`] scores the reference.
#[cfg(test)]
#[derive(Debug, Clone, Copy)]
pub(super) enum Reference {
    /// Every question re-scored, every ranking from a full search.
    Search,
    /// Every reading scored by the evaluator on its text, nothing prepared or cached.
    Plain,
}
