//! The reader's noise floor for an LLM evaluator: the same memory, M₀'s top-k, read in rank order and in
//! reverse order. No fact changes between the two, so any difference in p is the model's noise alone,
//! and the share of questions where it moves is the floor under which no agent's "> 0" share can be
//! read as a trick paying (the adversarial suite's 5 % goal).

use crate::dataset::Question;
use crate::episode::{Environment, EpisodeError};
use crate::memory::{EpisodeMemory, Filter, MemoryRecord};
use crate::reward::reading::Reading;
use crate::reward::{Evaluator, Target};

/// p on M₀'s top-k read in rank order and reversed, for one question.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct NoiseRow {
    /// The question.
    pub question_id: String,
    /// p in rank order.
    pub p_forward: f64,
    /// p with the same memories in reverse order.
    pub p_reversed: f64,
}

/// Scores M₀'s top-k of every question both ways with `evaluator` (an LLM evaluator needs the server's
/// LLM). `answer-recall` reads a set, so its two p are equal; `answer-phrase` reads one answer card, the
/// first among equals, so order can move it where two cards tie.
pub async fn reader_noise(env: &Environment, evaluator: Evaluator, questions: &[&Question]) -> Result<Vec<NoiseRow>, EpisodeError> {
    let mut rows = Vec::with_capacity(questions.len());
    for q in questions {
        let base = env
            .base(&q.conversation_id)
            .ok_or_else(|| EpisodeError::DatasetNotFound { what: "conversation", id: q.conversation_id.clone() })?;
        let query = env.embedder().embed(vec![q.question.clone()]).await?.pop().unwrap_or_default();
        let view = EpisodeMemory::new(base.clone());
        let (hits, _) = view.search_text(&query, &q.question, env.config().top_k, &Filter::default(), None);
        let mut recs: Vec<&MemoryRecord> = hits.iter().map(|h| h.record).collect();
        let target = Target::from(*q);
        let forward = Reading::whole(&recs);
        recs.reverse();
        let reversed = Reading::whole(&recs);
        let p_forward = env.evaluate(evaluator, &target, &forward).await?.p;
        let p_reversed = env.evaluate(evaluator, &target, &reversed).await?.p;
        rows.push(NoiseRow { question_id: q.id.clone(), p_forward, p_reversed });
    }
    Ok(rows)
}

/// One line: on how many questions p moved, and the mean |Δp|.
pub fn noise_line(evaluator: Evaluator, rows: &[NoiseRow]) -> String {
    let moved = rows.iter().filter(|r| (r.p_forward - r.p_reversed).abs() > super::SIGN_EPSILON).count();
    let up = rows.iter().filter(|r| r.p_reversed - r.p_forward > super::SIGN_EPSILON).count();
    let mean = rows.iter().map(|r| (r.p_forward - r.p_reversed).abs()).sum::<f64>() / rows.len().max(1) as f64;
    format!(
        "reader noise under {}: M₀'s top-k read in reverse order moves p on {moved}/{} questions (up on {up}), mean |Δp| {mean:.4}",
        evaluator.name(),
        rows.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::{EmbedService, HashEmbedder};
    use crate::episode::{EnvConfig, SystemClock};
    use crate::llm::fake::ScriptedChat;
    use crate::llm::Llm;
    use std::sync::Arc;

    #[tokio::test]
    async fn an_order_sensitive_reader_moves_and_an_offline_evaluator_does_not() {
        let dataset = Arc::new(crate::dataset::Dataset::load(None).unwrap());
        let embed = EmbedService::new(Arc::new(HashEmbedder::default()), 2);
        // A reader that answers with the first line of its context: order is all it sees.
        let chat = Arc::new(ScriptedChat::new(|r| Ok(r.messages[0].content.lines().next().unwrap_or("").to_string())));
        let env = Environment::new(EnvConfig::default(), dataset, embed, Arc::new(SystemClock::default())).unwrap();
        let env = env.with_llm(Some(Arc::new(Llm::new(chat, 256)))).unwrap();
        let qs: Vec<&Question> =
            env.dataset().questions.iter().filter(|q| q.conversation_id == "conv-26" && q.category != 5).take(12).collect();
        let offline = reader_noise(&env, Evaluator::AnswerRecall, &qs).await.unwrap();
        assert!(offline.iter().all(|r| r.p_forward == r.p_reversed), "answer recall reads a set");
        let llm = reader_noise(&env, Evaluator::LlmF1, &qs).await.unwrap();
        assert!(llm.iter().any(|r| r.p_forward != r.p_reversed), "{llm:?}");
        assert!(noise_line(Evaluator::LlmF1, &llm).contains("/12 questions"));
    }
}
