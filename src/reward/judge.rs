//! The `llm-judge` evaluator's prompt and verdict, as pure functions: the LLM that answered the
//! question (with LoCoMo's QA prompt) is asked again, in a separate request, whether its answer matches
//! the gold answer. The prompt is strict — a vague, partial or hedged answer is WRONG, and a date must
//! name the same day, month or year as the gold — so the judge cannot be won by saying more. The verdict
//! is reported beside the official F1 and averaged with it, never used alone (see [`super::Evaluator`]).

use crate::llm::ChatRequest;

/// Reply length cap of a judge request (one word is expected).
pub const JUDGE_MAX_TOKENS: u32 = 8;

const JUDGE_PROMPT: &str = "You are a strict grader. Decide whether the ANSWER to the QUESTION means the same as the GOLD answer.\n\
Rules:\n\
- CORRECT only if the ANSWER states the fact of the GOLD answer: the same person, thing, place, number or time.\n\
- A vague, partial, hedged or evasive answer is WRONG. An answer that lists several guesses is WRONG.\n\
- For dates and times the ANSWER must name the same day, month or year as the GOLD answer; a relative time \
(\"last week\") is CORRECT only if the GOLD answer is given the same way.\n\
- Extra detail that does not contradict the GOLD answer is allowed. Wording, case and punctuation do not matter.\n\
- If the GOLD answer is \"Not mentioned in the conversation\", only an answer that says the information is not \
available is CORRECT.\n\
Reply with exactly one word: CORRECT or WRONG.\n\n";

/// The judge request for `answer` to `question` against `gold` (temperature 0).
pub fn request(question: &str, gold: &str, answer: &str) -> ChatRequest {
    ChatRequest::user(format!("{JUDGE_PROMPT}QUESTION: {question}\nGOLD: {gold}\nANSWER: {answer}\n\nVerdict:"), JUDGE_MAX_TOKENS)
}

/// 1.0 for CORRECT, 0.0 for WRONG: the first of the two words in the reply (case-insensitive, as a whole
/// word); `Err` with the reply when it has neither.
pub fn verdict(reply: &str) -> Result<f64, String> {
    let upper = reply.to_uppercase();
    let first = upper.split(|c: char| !c.is_ascii_alphabetic()).find_map(|w| match w {
        "CORRECT" => Some(1.0),
        "WRONG" | "INCORRECT" => Some(0.0),
        _ => None,
    });
    first.ok_or_else(|| {
        let shown: String = reply.chars().take(80).collect();
        format!("the judge replied {shown:?}, neither CORRECT nor WRONG")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_are_read_from_the_first_keyword() {
        for (reply, want) in [
            ("CORRECT", Ok(1.0)),
            ("correct.", Ok(1.0)),
            ("Verdict: WRONG", Ok(0.0)),
            ("**Incorrect**", Ok(0.0)),
            ("WRONG - the answer is not CORRECT", Ok(0.0)),
            ("The answer is correct", Ok(1.0)),
        ] {
            assert_eq!(verdict(reply), want, "{reply}");
        }
        // "INCORRECTLY" or "CORRECTLY" are not verdicts; nor is nothing.
        for reply in ["", "maybe", "CORRECTLY answered", "I cannot tell"] {
            assert!(verdict(reply).unwrap_err().contains("neither CORRECT nor WRONG"), "{reply}");
        }
    }

    #[test]
    fn the_request_is_strict_deterministic_and_carries_all_three_texts() {
        let r = request("When did Caroline go?", "7 May 2023", "in May");
        assert_eq!((r.temperature, r.max_tokens, r.messages.len()), (0.0, JUDGE_MAX_TOKENS, 1));
        let text = &r.messages[0].content;
        for part in ["QUESTION: When did Caroline go?", "GOLD: 7 May 2023", "ANSWER: in May", "vague", "CORRECT or WRONG"] {
            assert!(text.contains(part), "{part}");
        }
    }
}
