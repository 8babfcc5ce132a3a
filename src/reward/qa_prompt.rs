//! LoCoMo's QA prompt (`snap-research/locomo`, `task_eval/gpt_utils.py`), built from retrieved memories,
//! for the LLM evaluators: the model answers from what the memory retrieves, as in LoCoMo's RAG mode.
//!
//! - Context: one line per retrieved memory, `"{session date}: {text}"` (LoCoMo's RAG rendering), then a
//!   blank line and the QA prompt.
//! - QA prompt: "Based on the above context, write an answer in the form of a short phrase for the
//!   following question. Answer with exact words from the context whenever possible.\n\nQuestion: {q}
//!   Short answer:".
//! - Category 2 (temporal) appends " Use DATE of CONVERSATION to answer with an approximate date." to the
//!   question.
//! - Category 5 (adversarial) asks "{q} Select the correct answer: (a) {x} (b) {y}. " where x and y are
//!   "Not mentioned in the conversation" and the (trap) answer in an order drawn from a seed; a reply of
//!   `a`, `b`, `(a)` or `(b)` is mapped back to the option's text before scoring.
//! - Requests use temperature 0 and at most 32 tokens ([`TEMPERATURE`], [`MAX_TOKENS`]).

use crate::memory::MemoryRecord;

/// Sampling temperature of the official evaluation.
pub const TEMPERATURE: f32 = 0.0;
/// Answer length cap of the official evaluation.
pub const MAX_TOKENS: u32 = 32;
/// The abstention option of category 5.
pub const NOT_MENTIONED: &str = "Not mentioned in the conversation";

const QA_PROMPT: &str = "Based on the above context, write an answer in the form of a short phrase for the following question. \
Answer with exact words from the context whenever possible.\n\nQuestion: {} Short answer:";
const DATE_HINT: &str = " Use DATE of CONVERSATION to answer with an approximate date.";

/// A prompt and, for category 5, the two options in the order shown.
#[derive(Debug, Clone, PartialEq)]
pub struct QaPrompt {
    /// The user message.
    pub text: String,
    /// Category 5: options (a) and (b).
    pub options: Option<[String; 2]>,
}

impl QaPrompt {
    /// Builds the prompt for a question of `category` over the retrieved memories. `answer` is the
    /// category-5 option besides "Not mentioned"; `seed` decides the option order.
    pub fn build(question: &str, category: Option<u8>, answer: Option<&str>, retrieved: &[&MemoryRecord], seed: u64) -> QaPrompt {
        let context: Vec<String> = retrieved
            .iter()
            .map(|r| match r.session_date.as_deref() {
                Some(d) if !d.is_empty() => format!("{d}: {}", r.text),
                _ => r.text.clone(),
            })
            .collect();
        let (q, options) = match category {
            Some(2) => (format!("{question}{DATE_HINT}"), None),
            Some(5) => {
                let other = answer.unwrap_or("").to_string();
                let opts = if seed.is_multiple_of(2) { [NOT_MENTIONED.to_string(), other] } else { [other, NOT_MENTIONED.to_string()] };
                (format!("{question} Select the correct answer: (a) {} (b) {}. ", opts[0], opts[1]), Some(opts))
            }
            _ => (question.to_string(), None),
        };
        let text = format!("{}\n\n{}", context.join("\n"), QA_PROMPT.replace("{}", &q));
        QaPrompt { text, options }
    }

    /// The answer to score: for category 5, a bare option letter is replaced by the option's text.
    pub fn resolve<'a>(&'a self, reply: &'a str) -> &'a str {
        let Some(opts) = &self.options else { return reply };
        match reply.trim().trim_end_matches('.').to_ascii_lowercase().as_str() {
            "a" | "(a)" => &opts[0],
            "b" | "(b)" => &opts[1],
            _ => reply,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{MemoryId, MemoryType};
    use crate::reward::locomo_metric::score;

    fn mem(text: &str, date: &str) -> MemoryRecord {
        MemoryRecord {
            id: MemoryId(0),
            text: text.into(),
            memory_type: MemoryType::Episodic,
            speaker: None,
            session: None,
            session_date: Some(date.into()),
            evidence: vec![],
            source: "t".into(),
            created_step: 0,
        }
    }

    #[test]
    fn prompts_follow_locomo() {
        let m = mem("Caroline attended an LGBTQ support group.", "1:56 pm on 8 May, 2023");
        let p = QaPrompt::build("When did Caroline go to the group?", Some(2), Some("7 May 2023"), &[&m], 0);
        assert_eq!(
            p.text,
            "1:56 pm on 8 May, 2023: Caroline attended an LGBTQ support group.\n\nBased on the above context, write an answer in the form \
of a short phrase for the following question. Answer with exact words from the context whenever possible.\n\nQuestion: When did \
Caroline go to the group? Use DATE of CONVERSATION to answer with an approximate date. Short answer:"
        );
        assert!(p.options.is_none());
        let p4 = QaPrompt::build("What did she attend?", Some(4), Some("a support group"), &[&m], 0);
        assert!(p4.text.ends_with("Question: What did she attend? Short answer:"));
    }

    #[test]
    fn adversarial_options_and_letters() {
        let m = mem("Melanie paints.", "");
        let a = QaPrompt::build("What does Caroline paint?", Some(5), Some("sunsets"), &[&m], 0);
        assert!(a.text.starts_with("Melanie paints.\n\n"));
        assert!(a.text.contains("Select the correct answer: (a) Not mentioned in the conversation (b) sunsets. "));
        assert_eq!(a.resolve("(a)"), NOT_MENTIONED);
        assert_eq!(a.resolve("b."), "sunsets");
        assert_eq!(score(a.resolve("a"), "", 5), Some(1.0));
        let b = QaPrompt::build("What does Caroline paint?", Some(5), Some("sunsets"), &[&m], 1);
        assert_eq!(b.resolve("A"), "sunsets");
        assert_eq!(score(b.resolve("a"), "", 5), Some(0.0));
        assert_eq!(b.resolve("It is not mentioned"), "It is not mentioned");
    }
}
