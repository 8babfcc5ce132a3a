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
    /// Builds the prompt for a question of `category` over the memories read, each in its view
    /// ([`crate::memory::MemoryRecord::view`]: `8 May 2023: text`). `answer` is the category-5 option
    /// besides "Not mentioned"; `seed` decides the option order.
    pub fn build(question: &str, category: Option<u8>, answer: Option<&str>, context: &[&str], seed: u64) -> QaPrompt {
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

    /// The answer to score: for category 5, a reply that picks an option by its letter is replaced by the
    /// option's text. Accepted: a bare letter (`a`, `(b)`, `B.`), optionally after "The answer is"; or a
    /// letter marker (`(a)`, `a)`, `a.`, `a:`) followed by that option's own text (`(b) a sunset.`, real
    /// replies of a 0.5B model). A marker followed by other text (the other option, a free answer) is
    /// ambiguous and left as written, for the metric to score.
    pub fn resolve<'a>(&'a self, reply: &'a str) -> &'a str {
        let Some(opts) = &self.options else { return reply };
        let lower = reply.trim().to_ascii_lowercase();
        let mut rest = lower.as_str();
        for lead in ["the correct answer is", "the answer is", "correct answer:", "answer:"] {
            if let Some(r) = rest.strip_prefix(lead) {
                rest = r.trim_start();
                break;
            }
        }
        let (letter, after) = match rest.as_bytes() {
            [b'(', l @ (b'a' | b'b'), b')', ..] => (*l, &rest[3..]),
            [l @ (b'a' | b'b'), b')' | b'.' | b':', ..] => (*l, &rest[2..]),
            [l @ (b'a' | b'b')] => (*l, ""),
            _ => return reply,
        };
        let option = &opts[usize::from(letter - b'a')];
        let after = after.trim().trim_end_matches(['.', '!']).trim();
        let words = |s: &str| s.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect::<Vec<_>>();
        if after.is_empty() || words(after) == words(option) {
            option
        } else {
            reply
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{MemoryId, MemoryRecord, MemoryType};
    use crate::reward::locomo_metric::score;

    /// The memory's view, as a reading gives it to the prompt.
    fn mem(text: &str, date: &str) -> String {
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
            authored: false,
        }
        .view()
    }

    #[test]
    fn prompts_follow_locomo() {
        let m = mem("Caroline attended an LGBTQ support group.", "1:56 pm on 8 May, 2023");
        let p = QaPrompt::build("When did Caroline go to the group?", Some(2), Some("7 May 2023"), &[m.as_str()], 0);
        assert_eq!(
            p.text,
            "8 May 2023: Caroline attended an LGBTQ support group.\n\nBased on the above context, write an answer in the form \
of a short phrase for the following question. Answer with exact words from the context whenever possible.\n\nQuestion: When did \
Caroline go to the group? Use DATE of CONVERSATION to answer with an approximate date. Short answer:"
        );
        assert!(p.options.is_none());
        let p4 = QaPrompt::build("What did she attend?", Some(4), Some("a support group"), &[m.as_str()], 0);
        assert!(p4.text.ends_with("Question: What did she attend? Short answer:"));
    }

    #[test]
    fn adversarial_options_and_letters() {
        let m = mem("Melanie paints.", "");
        let a = QaPrompt::build("What does Caroline paint?", Some(5), Some("sunsets"), &[m.as_str()], 0);
        assert!(a.text.starts_with("Melanie paints.\n\n"));
        assert!(a.text.contains("Select the correct answer: (a) Not mentioned in the conversation (b) sunsets. "));
        assert_eq!(a.resolve("(a)"), NOT_MENTIONED);
        assert_eq!(a.resolve("b."), "sunsets");
        assert_eq!(score(a.resolve("a"), "", 5), Some(1.0));
        let b = QaPrompt::build("What does Caroline paint?", Some(5), Some("sunsets"), &[m.as_str()], 1);
        assert_eq!(b.resolve("A"), "sunsets");
        assert_eq!(score(b.resolve("a"), "", 5), Some(0.0));
        assert_eq!(b.resolve("It is not mentioned"), "It is not mentioned");
    }

    #[test]
    fn option_markers_with_their_own_text_are_resolved() {
        // Real replies of Qwen2.5-Coder-0.5B-Instruct (scripts/install-llm.sh) to LoCoMo's category-5 prompt.
        let m = mem("Melanie is painting a sunset with her kids.", "8 May, 2023");
        let p = QaPrompt::build("What did Caroline paint?", Some(5), Some("a sunset"), &[m.as_str()], 0);
        assert_eq!(p.options.as_ref().unwrap()[1], "a sunset");
        assert_eq!(p.resolve("(b) a sunset."), "a sunset");
        let q = QaPrompt::build("What did Caroline paint?", Some(5), Some("a sunset"), &[m.as_str()], 1);
        assert_eq!(q.resolve("a) a sunset"), "a sunset");
        assert_eq!(q.resolve("(b) Not mentioned in the conversation."), NOT_MENTIONED);
        assert_eq!(q.resolve("The answer is (b)."), NOT_MENTIONED);
        assert_eq!(q.resolve("Answer: B"), NOT_MENTIONED);
        // A marker with the other option's text, or with free text, is ambiguous: left for the metric.
        assert_eq!(q.resolve("(a) Not mentioned in the conversation."), "(a) Not mentioned in the conversation.");
        assert_eq!(q.resolve("(a) She painted a lake."), "(a) She painted a lake.");
        assert_eq!(q.resolve("a sunset"), "a sunset");
        assert_eq!(q.resolve("absolutely"), "absolutely");
        // Not category 5: nothing is mapped.
        let r = QaPrompt::build("What did Caroline paint?", Some(4), Some("a sunset"), &[m.as_str()], 1);
        assert_eq!(r.resolve("(a)"), "(a)");
    }

    proptest::proptest! {
        #[test]
        fn resolve_returns_the_reply_or_one_option(reply in "(\\(?[abAB][).:]? ?)?\\PC{0,40}", seed in 0u64..4) {
            let m = mem("Melanie paints.", "");
            let p = QaPrompt::build("What does Caroline paint?", Some(5), Some("sunsets"), &[m.as_str()], seed);
            let got = p.resolve(&reply);
            proptest::prop_assert!(got == reply || got == NOT_MENTIONED || got == "sunsets", "{got:?}");
        }
    }
}
