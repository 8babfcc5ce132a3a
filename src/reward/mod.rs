//! The reward, as pure functions: by default the target's p_new − p_old, plus what the edit does to every other
//! question of the conversation, minus the content words it added and removed ([`RewardFormula`]).
//!
//! A policy trained on this reward will find any way to raise it; every piece below is there because a
//! scripted policy that never saw the gold answer raised MemUpdate's reward without improving memory
//! (`memgym eval`'s adversarial suite measures each).
//!
//! - `p(M, q)` is an evaluator's score of what it reads of M for the question ([`Evaluator`]). It reads a
//!   [`reading::Reading`]: the retrieved memories, best first, within the content words M₀'s top-k held
//!   ([`Context::Budget`], the default), or MemUpdate's top-k by count ([`Context::TopK`]).
//! - The offline default is **answer-phrase** ([`phrase`]): the gold answer's parts stated as phrases in
//!   one focused memory. **answer-recall** (MemUpdate's) is kept for comparison: the share of the gold
//!   answer's distinct tokens present anywhere in the text read, after LoCoMo's official normalisation and
//!   NLTK-exact Porter stemming ([`crate::text::normalize`], [`crate::text::porter`]). Category-5
//!   (adversarial) questions have no answer in the conversation: for them the score is 1 − the score of
//!   the adversarial (trap) answer, so memory that makes the trap answer retrievable scores lower. They
//!   are refused by `CreateEpisode` unless asked for.
//! - The LLM evaluators (`llm-f1`, `llm-judge`) have an LLM answer from the top-k with LoCoMo's QA prompt
//!   ([`qa_prompt`]) and score the answer with LoCoMo's official metric ([`locomo_metric`], via
//!   [`llm_f1`]); `llm-judge` also asks the LLM for a strict CORRECT/WRONG verdict ([`judge`]) and scores
//!   the mean of the two. The LLM calls themselves live in [`llm_eval`]; the rest of this module is pure.
//! - `p_old` is computed on M₀ as it was at creation and `p_new` on the final memory (MemUpdate
//!   computed both on the final store, so its delta was ≈ 0).
//! - `growth = max(0, chars_new − chars_old) / chars_old`: added text costs, and nothing else about
//!   length pays ([`RewardFormula::DeltaGrowth`]). MemUpdate's `memory_efficiency = clamp(size × density
//!   × change, 0.1, 1.5)` is still computed and reported, and is the multiplier of
//!   [`RewardFormula::MemUpdate`] (with N_max = |M₀| by default instead of 100); its density factor paid
//!   up to 1.2× for longer memories, whatever they held, and a multiplier below 1 makes a negative delta
//!   less negative, so padding raised a bad edit's reward.

pub mod dates;
pub mod judge;
pub mod ledger;
pub mod llm_eval;
pub mod locomo_metric;
pub mod others;
pub mod phrase;
pub mod qa_prompt;
pub mod reading;

use std::collections::HashSet;

use crate::text::stemmed_tokens;
use reading::Reading;

/// What the memory is scored against.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// The question.
    pub question: String,
    /// Gold answer.
    pub answer: Option<String>,
    /// Category-5 trap answer.
    pub adversarial_answer: Option<String>,
    /// LoCoMo category (None for custom questions).
    pub category: Option<u8>,
    /// Evidence dialogue ids.
    pub evidence: Vec<String>,
}

/// Evaluators that turn retrieved memories into a score in [0, 1].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Evaluator {
    /// Offline: the gold answer stated as phrases in focused memories ([`phrase`]; the default).
    AnswerPhrase,
    /// Offline: MemUpdate's answer recall, the gold's tokens anywhere in the text read.
    AnswerRecall,
    /// An LLM answers from the top-k with LoCoMo's QA prompt; the answer's official LoCoMo F1.
    LlmF1,
    /// As `LlmF1`, plus a strict LLM verdict against the gold; the mean of F1 and verdict (the verdict
    /// is never the reward alone: a judge-only reward rewards verbose answers).
    LlmJudge,
}

impl Evaluator {
    /// Every evaluator, in documentation order.
    pub const ALL: [Evaluator; 4] = [Evaluator::AnswerPhrase, Evaluator::AnswerRecall, Evaluator::LlmF1, Evaluator::LlmJudge];

    /// Name used on the command line and in breakdowns.
    pub fn name(self) -> &'static str {
        match self {
            Evaluator::AnswerPhrase => "answer-phrase",
            Evaluator::AnswerRecall => "answer-recall",
            Evaluator::LlmF1 => "llm-f1",
            Evaluator::LlmJudge => "llm-judge",
        }
    }

    /// The evaluator named `name`.
    pub fn parse(name: &str) -> Result<Evaluator, String> {
        Self::ALL.into_iter().find(|e| e.name() == name.trim()).ok_or_else(|| {
            let names: Vec<&str> = Self::ALL.iter().map(|e| e.name()).collect();
            format!("unknown evaluator {name:?}: expected one of {}", names.join(", "))
        })
    }

    /// Needs an LLM endpoint.
    pub fn needs_llm(self) -> bool {
        match self {
            Evaluator::AnswerPhrase | Evaluator::AnswerRecall => false,
            Evaluator::LlmF1 | Evaluator::LlmJudge => true,
        }
    }
}

/// What an evaluator reads of a memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Context {
    /// The retrieved memories within the content words of M₀'s top-k (the default; [`reading`]).
    Budget,
    /// MemUpdate's: the top-k memories, whatever their length.
    TopK,
}

impl Context {
    /// Both, default first.
    pub const ALL: [Context; 2] = [Context::Budget, Context::TopK];

    /// Name on the command line and in breakdowns.
    pub fn name(self) -> &'static str {
        match self {
            Context::Budget => "budget",
            Context::TopK => "top-k",
        }
    }

    /// The context named `name`.
    pub fn parse(name: &str) -> Result<Context, String> {
        Self::ALL.into_iter().find(|c| c.name() == name.trim()).ok_or_else(|| format!("unknown context {name:?}: expected budget or top-k"))
    }
}

/// The reward in one sentence, for the faces that describe it to a client or a policy (MCP's score tool,
/// OpenEnv's metadata, ORS's `submit`).
pub const IN_BRIEF: &str = "reward = the target question's performance_delta, plus half of the rises and minus the \
    facts lost on every other question of the conversation, minus the content words added and removed (the default \
    whole-memory formula; the server's --reward-formula may name another)";

/// How p_new − p_old, the other questions and the memory's growth make the reward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RewardFormula {
    /// The default: Δp_target + ½ Σ rises − Σ falls of the other questions − words added − words removed
    /// ([`others`], [`ledger`]).
    WholeMemory,
    /// Δp_target + λ · mean Δp of the other questions − words added − words removed.
    Collateral,
    /// Δp_target − Σ falls of the other questions − words added − words removed.
    Damage,
    /// The single-question reward: (p_new − p_old) − growth; added text only ever costs.
    DeltaGrowth,
    /// MemUpdate's (p_new − p_old) × memory_efficiency.
    MemUpdate,
}

impl RewardFormula {
    /// Every formula, default first.
    pub const ALL: [RewardFormula; 5] = [
        RewardFormula::WholeMemory,
        RewardFormula::Collateral,
        RewardFormula::Damage,
        RewardFormula::DeltaGrowth,
        RewardFormula::MemUpdate,
    ];

    /// Name on the command line and in breakdowns.
    pub fn name(self) -> &'static str {
        match self {
            RewardFormula::WholeMemory => "whole-memory",
            RewardFormula::Collateral => "collateral",
            RewardFormula::Damage => "damage",
            RewardFormula::DeltaGrowth => "delta-growth",
            RewardFormula::MemUpdate => "memupdate",
        }
    }

    /// The formula named `name`.
    pub fn parse(name: &str) -> Result<RewardFormula, String> {
        Self::ALL.into_iter().find(|f| f.name() == name.trim()).ok_or_else(|| {
            let names: Vec<&str> = Self::ALL.iter().map(|f| f.name()).collect();
            format!("unknown reward formula {name:?}: expected one of {}", names.join(", "))
        })
    }

    /// How the other questions enter the reward; `None` for the single-question formulas, which do not
    /// score them.
    pub fn others(self) -> Option<others::OthersWeights> {
        match self {
            RewardFormula::WholeMemory => Some(others::OthersWeights::whole_memory()),
            RewardFormula::Collateral => Some(others::OthersWeights::collateral()),
            RewardFormula::Damage => Some(others::OthersWeights::damage()),
            RewardFormula::DeltaGrowth | RewardFormula::MemUpdate => None,
        }
    }
}

/// A reward with |r| at or below this has sign 0, and rewards this close are equal: the one threshold every
/// report (`memgym eval`, `memgym rollout`'s GRPO signal) reads signs and ties with.
pub const SIGN_EPSILON: f64 = 1e-9;

/// The sign of a reward: 0 within [`SIGN_EPSILON`] of zero.
pub fn sign(x: f64) -> i8 {
    if x > SIGN_EPSILON {
        1
    } else if x < -SIGN_EPSILON {
        -1
    } else {
        0
    }
}

/// Answer recall of the text read (category 5: one minus the recall of the trap answer).
pub fn answer_recall_score(target: &Target, reading: &Reading) -> f64 {
    let context = reading.texts().join("\n");
    match (target.category, &target.adversarial_answer, &target.answer) {
        (Some(5), Some(trap), _) => 1.0 - answer_recall(trap, &context),
        (_, _, Some(gold)) => answer_recall(gold, &context),
        (_, _, None) => 0.0,
    }
}

/// How much of a target's answer one memory states, read alone, part by part: `answer-phrase`'s parts of
/// the gold, or for any other evaluator the gold's distinct tokens (answer recall). What a set of memories
/// states *somewhere* is the mean over parts of the best memory's score ([`Stater::somewhere`]): the
/// whole-memory formulas credit another question's rise only above what M₀ states somewhere, and tell a
/// fact that fell out of a reading (still stated somewhere) from one that is gone.
#[derive(Debug)]
pub enum Stater {
    /// `answer-phrase`'s parts.
    Phrase(Box<phrase::Asked>),
    /// Answer recall's distinct gold tokens.
    Tokens(Vec<String>),
    /// Nothing to state (no gold answer, or category 5, which is not scored this way).
    Nothing,
}

impl Stater {
    /// The stater of `target` under `evaluator`.
    pub fn new(evaluator: Evaluator, target: &Target) -> Stater {
        let (Some(gold), false) = (&target.answer, target.category == Some(5)) else { return Stater::Nothing };
        match evaluator {
            Evaluator::AnswerPhrase => Stater::Phrase(Box::new(phrase::Asked::new(gold, target.category, &target.question))),
            Evaluator::AnswerRecall | Evaluator::LlmF1 | Evaluator::LlmJudge => {
                let tokens: HashSet<String> = stemmed_tokens(gold).into_iter().collect();
                let mut tokens: Vec<String> = tokens.into_iter().collect();
                tokens.sort();
                Stater::Tokens(tokens)
            }
        }
    }

    /// Each part's score in `record` read alone (empty without parts).
    pub fn parts(&self, record: &crate::memory::MemoryRecord) -> Vec<f64> {
        match self {
            Stater::Phrase(asked) => asked.part_scores(&Reading::whole(&[record])),
            Stater::Tokens(tokens) => {
                let have: HashSet<String> = stemmed_tokens(&record.view()).into_iter().collect();
                tokens.iter().map(|t| if have.contains(t) { 1.0 } else { 0.0 }).collect()
            }
            Stater::Nothing => Vec::new(),
        }
    }

    /// [`Self::parts`] of a record whose one-unit reading is already analysed (`answer-phrase`); `record`
    /// for the other evaluators.
    pub fn parts_analysed(&self, record: &crate::memory::MemoryRecord, analysed: &phrase::Analysed) -> Vec<f64> {
        match self {
            Stater::Phrase(asked) => asked.part_scores_of(std::iter::once(analysed)),
            Stater::Tokens(_) | Stater::Nothing => self.parts(record),
        }
    }

    /// A memory prepared for this question (`answer-phrase`; `None` for the other evaluators).
    pub fn prepare(&self, analysed: &phrase::Analysed) -> Option<phrase::Prepared> {
        match self {
            Stater::Phrase(asked) => Some(asked.prepare(analysed)),
            Stater::Tokens(_) | Stater::Nothing => None,
        }
    }

    /// Whether [`Self::parts_analysed`] of `analysed` could be more than zeros: `answer-phrase` scores only
    /// memories that hold a token of the gold answer ([`phrase::Asked::mentions`]).
    pub fn could_state(&self, analysed: &phrase::Analysed) -> bool {
        match self {
            Stater::Phrase(asked) => asked.mentions(analysed),
            Stater::Tokens(_) => true,
            Stater::Nothing => false,
        }
    }

    /// How many parts [`Self::parts`] scores.
    pub fn part_count(&self) -> usize {
        match self {
            Stater::Phrase(asked) => asked.parts(),
            Stater::Tokens(tokens) => tokens.len(),
            Stater::Nothing => 0,
        }
    }

    /// [`Self::parts`] of a memory already prepared for this question (`answer-phrase`; `None` for the other
    /// evaluators).
    pub fn parts_prepared(&self, prepared: &phrase::Prepared) -> Option<Vec<f64>> {
        match self {
            Stater::Phrase(asked) => Some(asked.part_scores_prepared(std::iter::once(prepared))),
            Stater::Tokens(_) | Stater::Nothing => None,
        }
    }

    /// The p of a reading whose units are already prepared for this question, in reading order
    /// (`answer-phrase`; `None` for the other evaluators: score the reading itself).
    pub fn recall_prepared<'a>(&self, read: impl Iterator<Item = &'a phrase::Prepared>) -> Option<f64> {
        match self {
            Stater::Phrase(asked) => Some(asked.recall_prepared(read)),
            Stater::Tokens(_) | Stater::Nothing => None,
        }
    }

    /// The mean over parts of the best of `scores` (each a [`Self::parts`] vector): what those memories state
    /// somewhere. 0 without parts.
    pub fn somewhere<'a>(scores: impl IntoIterator<Item = &'a [f64]>) -> f64 {
        let mut best: Vec<f64> = Vec::new();
        for s in scores {
            if best.len() < s.len() {
                best.resize(s.len(), 0.0);
            }
            for (b, x) in best.iter_mut().zip(s) {
                *b = b.max(*x);
            }
        }
        if best.is_empty() {
            0.0
        } else {
            best.iter().sum::<f64>() / best.len() as f64
        }
    }
}

/// What `records` state of the target's answer somewhere ([`Stater`]).
pub fn stated_anywhere(evaluator: Evaluator, target: &Target, records: &[&crate::memory::MemoryRecord]) -> f64 {
    let stater = Stater::new(evaluator, target);
    let scores: Vec<Vec<f64>> = records.iter().map(|r| stater.parts(r)).collect();
    Stater::somewhere(scores.iter().map(Vec::as_slice))
}

/// The official LoCoMo score of an LLM's `answer` (already resolved from a category-5 option letter):
/// per-category F1 for LoCoMo questions, plain token F1 for custom ones, 0 without a gold answer.
pub fn llm_f1(target: &Target, answer: &str) -> f64 {
    match (target.category, &target.answer) {
        (Some(5), _) => locomo_metric::score(answer, "", 5).unwrap_or(0.0),
        (Some(c), Some(gold)) => locomo_metric::score(answer, gold, c).unwrap_or_else(|| locomo_metric::f1_score(answer, gold)),
        (None, Some(gold)) => locomo_metric::f1_score(answer, gold),
        (_, None) => 0.0,
    }
}

/// The gold answer the judge compares against ("Not mentioned in the conversation" for category 5).
pub fn judge_gold(target: &Target) -> &str {
    match (target.category, &target.answer) {
        (Some(5), _) => qa_prompt::NOT_MENTIONED,
        (_, Some(gold)) => gold,
        (_, None) => "",
    }
}

/// Share of the distinct normalised, stemmed tokens of `gold` that occur in `context`. 0 when the gold
/// answer has no tokens after normalisation.
pub fn answer_recall(gold: &str, context: &str) -> f64 {
    let gold: HashSet<String> = stemmed_tokens(gold).into_iter().collect();
    if gold.is_empty() {
        return 0.0;
    }
    let ctx: HashSet<String> = stemmed_tokens(context).into_iter().collect();
    gold.iter().filter(|t| ctx.contains(*t)).count() as f64 / gold.len() as f64
}

/// Growth of the memory's text: max(0, chars_new − chars_old) / max(chars_old, 1).
pub fn growth(s: SizeInput) -> f64 {
    s.new_chars.saturating_sub(s.old_chars) as f64 / s.old_chars.max(1) as f64
}

/// Memory counts and sizes before and after.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SizeInput {
    /// |M₀|.
    pub old_count: usize,
    /// |M_final|.
    pub new_count: usize,
    /// Characters in M₀.
    pub old_chars: usize,
    /// Characters in M_final.
    pub new_chars: usize,
    /// Size budget N_max (≥ 1).
    pub n_max: usize,
}

/// The efficiency terms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Efficiency {
    /// 1 up to N_max, then max(0.1, 1 − (n − N_max)/N_max).
    pub size_factor: f64,
    /// min(1.2, density_new / max(density_old, 1)); 1 when M₀ is empty.
    pub density_factor: f64,
    /// max(0.8, 1 − 0.5·|n − n₀| / max(n₀, 1)).
    pub change_factor: f64,
    /// clamp(size × density × change, 0.1, 1.5).
    pub memory_efficiency: f64,
}

/// MemUpdate's efficiency formulas.
pub fn memory_efficiency(s: SizeInput) -> Efficiency {
    let (old, new, n_max) = (s.old_count as f64, s.new_count as f64, s.n_max.max(1) as f64);
    let size_factor = if new > n_max { (1.0 - (new - n_max) / n_max).max(0.1) } else { 1.0 };
    let density_factor = if s.old_count > 0 {
        let d_old = s.old_chars as f64 / old.max(1.0);
        let d_new = s.new_chars as f64 / new.max(1.0);
        (d_new / d_old.max(1.0)).min(1.2)
    } else {
        1.0
    };
    let change_factor = (1.0 - 0.5 * (new - old).abs() / old.max(1.0)).max(0.8);
    let memory_efficiency = (size_factor * density_factor * change_factor).clamp(0.1, 1.5);
    Efficiency { size_factor, density_factor, change_factor, memory_efficiency }
}

/// One evaluation of a memory for the target.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    /// Evaluator score.
    pub p: f64,
    /// LLM evaluators: the LLM's answer (after mapping a category-5 option letter to its text).
    pub answer: Option<String>,
    /// LLM evaluators: the official LoCoMo F1 of the answer.
    pub f1: Option<f64>,
    /// `llm-judge`: the verdict, 1 (CORRECT) or 0 (WRONG).
    pub judge: Option<f64>,
    /// Evidence recall of the memories read.
    pub evidence_recall: f64,
    /// Ids of the memories read, best first.
    pub retrieved: Vec<crate::memory::MemoryId>,
    /// Characters read.
    pub context_chars: usize,
    /// The reading's budget.
    pub budget: usize,
}

/// An offline evaluation of what was read (`answer-phrase`, or `answer-recall` for any other evaluator).
pub fn evaluate(evaluator: Evaluator, target: &Target, reading: &Reading) -> Evaluation {
    let p = match evaluator {
        Evaluator::AnswerPhrase => phrase::score(target, reading),
        Evaluator::AnswerRecall | Evaluator::LlmF1 | Evaluator::LlmJudge => answer_recall_score(target, reading),
    };
    Evaluation {
        p,
        answer: None,
        f1: None,
        judge: None,
        evidence_recall: reading.evidence_recall(&target.evidence),
        retrieved: reading.ids(),
        context_chars: reading.chars(),
        budget: reading.budget,
    }
}

/// An LLM evaluation: the score of `answer` (resolved), and for `llm-judge` the mean with `judge`.
pub fn llm_evaluation(target: &Target, reading: &Reading, answer: String, judge: Option<f64>) -> Evaluation {
    let f1 = llm_f1(target, &answer);
    let p = match judge {
        Some(j) => (f1 + j) / 2.0,
        None => f1,
    };
    Evaluation {
        p,
        answer: Some(answer),
        f1: Some(f1),
        judge,
        evidence_recall: reading.evidence_recall(&target.evidence),
        retrieved: reading.ids(),
        context_chars: reading.chars(),
        budget: reading.budget,
    }
}

/// The full breakdown `ScoreEpisode` returns.
#[derive(Debug, Clone, PartialEq)]
pub struct RewardBreakdown {
    /// On M₀.
    pub old: Evaluation,
    /// On the final memory.
    pub new: Evaluation,
    /// p_new − p_old.
    pub performance_delta: f64,
    /// Efficiency terms (MemUpdate's).
    pub efficiency: Efficiency,
    /// max(0, chars_new − chars_old) / chars_old.
    pub growth: f64,
    /// Content words added to and removed from the memory ([`ledger`]).
    pub ledger: ledger::Ledger,
    /// The other questions of the conversation ([`others`]); `None` when the formula does not score them or
    /// the episode has none (a custom episode).
    pub others: Option<others::Others>,
    /// What the other questions added to the reward (0 without them).
    pub others_term: f64,
    /// The formula that made the reward.
    pub formula: RewardFormula,
    /// What the evaluator read.
    pub context: Context,
    /// The reward.
    pub reward: f64,
    /// The sizes used.
    pub sizes: SizeInput,
    /// k.
    pub top_k: usize,
    /// Evaluator name.
    pub evaluator: &'static str,
    /// The LLM model of an LLM evaluator.
    pub llm_model: Option<String>,
    /// Embedder identity.
    pub embedder: String,
    /// Evidence ids of the question.
    pub evidence_total: usize,
    /// How long scoring took, milliseconds (set by the episode that scored; 0 here).
    pub score_ms: f64,
}

/// What a breakdown records besides the evaluations and sizes.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoringInfo {
    /// k.
    pub top_k: usize,
    /// The evaluator.
    pub evaluator: Evaluator,
    /// The LLM model of an LLM evaluator.
    pub llm_model: Option<String>,
    /// Embedder identity.
    pub embedder: String,
    /// Evidence ids of the question.
    pub evidence_total: usize,
    /// The reward formula.
    pub formula: RewardFormula,
    /// What the evaluator read.
    pub context: Context,
}

/// What the memory as a whole did: its content words' ledger and, for the whole-memory formulas, the other
/// questions.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Whole {
    /// Content words added and removed.
    pub ledger: ledger::Ledger,
    /// The other questions, when scored.
    pub others: Option<others::Others>,
}

/// Combines the two evaluations, the sizes and the whole memory's terms into the reward.
pub fn breakdown(old: Evaluation, new: Evaluation, sizes: SizeInput, whole: Whole, info: ScoringInfo) -> RewardBreakdown {
    let performance_delta = new.p - old.p;
    let efficiency = memory_efficiency(sizes);
    let growth = growth(sizes);
    let ScoringInfo { top_k, evaluator, llm_model, embedder, evidence_total, formula, context } = info;
    let Whole { ledger, others } = whole;
    let others_term = match (formula.others(), &others) {
        (Some(w), Some(o)) => w.term(o),
        _ => 0.0,
    };
    let reward = match formula {
        RewardFormula::WholeMemory | RewardFormula::Collateral | RewardFormula::Damage => {
            performance_delta + others_term - ledger.growth() - ledger.loss()
        }
        RewardFormula::DeltaGrowth => performance_delta - growth,
        RewardFormula::MemUpdate => performance_delta * efficiency.memory_efficiency,
    };
    RewardBreakdown {
        old,
        new,
        performance_delta,
        efficiency,
        growth,
        ledger,
        others,
        others_term,
        formula,
        context,
        reward,
        sizes,
        top_k,
        evaluator: evaluator.name(),
        llm_model,
        embedder,
        evidence_total,
        score_ms: 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn answer_recall_uses_official_normalisation_and_stems() {
        assert_eq!(answer_recall("The painting, and sunsets", "She paints a sunset every day"), 1.0);
        assert!((answer_recall("painting of sunsets", "She paints a sunset") - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(answer_recall("Adoption agencies", "Caroline researched adoption"), 0.5);
        assert_eq!(answer_recall("!!!", "anything"), 0.0);
        assert_eq!(answer_recall("2022", "In 2022 she moved"), 1.0);
    }

    #[test]
    fn efficiency_matches_memupdate_formulas() {
        let e = memory_efficiency(SizeInput { old_count: 100, new_count: 100, old_chars: 8800, new_chars: 8800, n_max: 100 });
        assert_eq!((e.size_factor, e.density_factor, e.change_factor, e.memory_efficiency), (1.0, 1.0, 1.0, 1.0));
        // MemUpdate's N_max = 100 with 184 memories: size factor 0.16.
        let e = memory_efficiency(SizeInput { old_count: 184, new_count: 184, old_chars: 1, new_chars: 1, n_max: 100 });
        assert!((e.size_factor - 0.16).abs() < 1e-12);
        let e = memory_efficiency(SizeInput { old_count: 10, new_count: 20, old_chars: 1000, new_chars: 1000, n_max: 10 });
        assert_eq!(e.size_factor, 0.1);
        assert_eq!(e.change_factor, 0.8);
        assert_eq!(e.density_factor, 0.5);
        assert_eq!(e.memory_efficiency, 0.1);
    }

    fn target(category: Option<u8>, answer: Option<&str>, trap: Option<&str>) -> Target {
        Target {
            question: "q".into(),
            answer: answer.map(str::to_string),
            adversarial_answer: trap.map(str::to_string),
            category,
            evidence: vec![],
        }
    }

    #[test]
    fn memupdate_lets_padding_soften_a_loss_and_delta_growth_does_not() {
        let ev = |p: f64| Evaluation {
            p,
            answer: None,
            f1: None,
            judge: None,
            evidence_recall: 0.0,
            retrieved: vec![],
            context_chars: 0,
            budget: 0,
        };
        let info = |formula| ScoringInfo {
            top_k: 5,
            evaluator: Evaluator::AnswerPhrase,
            llm_model: None,
            embedder: "x".into(),
            evidence_total: 0,
            formula,
            context: Context::Budget,
        };
        let plain = SizeInput { old_count: 100, new_count: 100, old_chars: 10_000, new_chars: 10_000, n_max: 100 };
        let padded = SizeInput { new_count: 105, new_chars: 20_000, ..plain };
        // MemUpdate's density factor pays up to 1.2x for longer memories: padding raises a gain …
        let gain = |f, s| breakdown(ev(0.0), ev(0.5), s, Whole::default(), info(f)).reward;
        assert!(gain(RewardFormula::MemUpdate, padded) > gain(RewardFormula::MemUpdate, plain));
        assert!(gain(RewardFormula::DeltaGrowth, padded) < gain(RewardFormula::DeltaGrowth, plain));
        // … and a factor below 1 (here the size factor past N_max) softens a loss.
        let loss = |f, s| breakdown(ev(0.5), ev(0.0), s, Whole::default(), info(f)).reward;
        let many = SizeInput { new_count: 190, new_chars: 19_000, ..plain };
        assert!(loss(RewardFormula::MemUpdate, many) > loss(RewardFormula::MemUpdate, plain));
        assert!(loss(RewardFormula::DeltaGrowth, many) < loss(RewardFormula::DeltaGrowth, plain));
        assert_eq!(loss(RewardFormula::DeltaGrowth, plain), -0.5);
        assert_eq!(growth(padded), 1.0);
        assert_eq!(growth(SizeInput { new_chars: 5_000, ..plain }), 0.0);
        for f in RewardFormula::ALL {
            assert_eq!(RewardFormula::parse(f.name()), Ok(f));
        }
        for c in Context::ALL {
            assert_eq!(Context::parse(c.name()), Ok(c));
        }
        assert!(RewardFormula::parse("x").unwrap_err().contains("whole-memory, collateral, damage, delta-growth, memupdate"));
    }

    #[test]
    fn evaluators_parse_by_name_and_say_whether_they_need_an_llm() {
        for e in Evaluator::ALL {
            assert_eq!(Evaluator::parse(e.name()), Ok(e));
        }
        assert_eq!(Evaluator::parse(" llm-f1 "), Ok(Evaluator::LlmF1));
        assert!(Evaluator::parse("f1").unwrap_err().contains("answer-phrase, answer-recall, llm-f1, llm-judge"));
        assert!(
            !Evaluator::AnswerPhrase.needs_llm()
                && !Evaluator::AnswerRecall.needs_llm()
                && Evaluator::LlmF1.needs_llm()
                && Evaluator::LlmJudge.needs_llm()
        );
    }

    #[test]
    fn llm_answers_are_scored_with_the_official_metric_per_category() {
        assert_eq!(llm_f1(&target(Some(1), Some("Pottery, painting, running"), None), "running, pottery"), 2.0 / 3.0);
        assert_eq!(llm_f1(&target(Some(2), Some("7 May 2023"), None), "7 May 2023"), 1.0);
        assert_eq!(llm_f1(&target(Some(3), Some("Likely no; she prefers dogs"), None), "Likely no"), 1.0);
        assert_eq!(llm_f1(&target(Some(5), None, Some("Paris")), "Not mentioned in the conversation"), 1.0);
        assert_eq!(llm_f1(&target(Some(5), None, Some("Paris")), "Paris"), 0.0);
        assert_eq!(llm_f1(&target(None, Some("the beach"), None), "The beach."), 1.0);
        assert_eq!(llm_f1(&target(None, None, None), "anything"), 0.0);
        assert_eq!(judge_gold(&target(Some(5), None, Some("Paris"))), "Not mentioned in the conversation");
        assert_eq!(judge_gold(&target(Some(4), Some("the beach"), None)), "the beach");
    }

    #[test]
    fn the_judge_is_averaged_with_f1_never_alone() {
        let t = target(Some(4), Some("Adoption agencies"), None);
        let e = llm_evaluation(&t, &Reading::default(), "researching adoption agency options".into(), Some(1.0));
        let f1 = 2.0 / 3.0;
        assert_eq!((e.f1, e.judge), (Some(f1), Some(1.0)));
        assert!((e.p - (f1 + 1.0) / 2.0).abs() < 1e-12);
        // A verbose answer the judge accepts still loses to a short exact one.
        let verbose = llm_evaluation(
            &t,
            &Reading::default(),
            "she has been looking into many things including adoption agencies and more".into(),
            Some(1.0),
        );
        let exact = llm_evaluation(&t, &Reading::default(), "Adoption agencies".into(), Some(1.0));
        assert!(verbose.p < exact.p);
        assert_eq!(llm_evaluation(&t, &Reading::default(), "Adoption agencies".into(), None).p, 1.0);
    }

    proptest! {
        #[test]
        fn factors_stay_in_bounds(old in 0usize..3000, new in 0usize..3000, oc in 0usize..500_000, nc in 0usize..500_000, n_max in 0usize..3000) {
            let e = memory_efficiency(SizeInput { old_count: old, new_count: new, old_chars: oc, new_chars: nc, n_max });
            prop_assert!((0.1..=1.0).contains(&e.size_factor));
            prop_assert!((0.0..=1.2).contains(&e.density_factor));
            prop_assert!((0.8..=1.0).contains(&e.change_factor));
            prop_assert!((0.1..=1.5).contains(&e.memory_efficiency));
            prop_assert!(e.memory_efficiency.is_finite());
        }

        #[test]
        fn recall_is_a_share(gold in "[a-z ,.]{0,40}", ctx in "[a-z ,.]{0,80}") {
            let r = answer_recall(&gold, &ctx);
            prop_assert!((0.0..=1.0).contains(&r));
            // The gold text always covers itself.
            prop_assert!(answer_recall(&gold, &gold) == 1.0 || stemmed_tokens(&gold).is_empty());
        }

        #[test]
        fn reward_is_bounded_and_zero_without_change(p_old in 0.0f64..=1.0, p_new in 0.0f64..=1.0, n in 1usize..500) {
            let ev = |p: f64| Evaluation { p, answer: None, f1: None, judge: None, evidence_recall: 0.0, retrieved: vec![], context_chars: 0, budget: 0 };
            let sizes = SizeInput { old_count: n, new_count: n, old_chars: 10 * n, new_chars: 10 * n, n_max: n };
            for formula in RewardFormula::ALL {
                let info = ScoringInfo {
                    top_k: 5,
                    evaluator: Evaluator::AnswerRecall,
                    llm_model: None,
                    embedder: "x".into(),
                    evidence_total: 0,
                    formula,
                    context: Context::Budget,
                };
                let b = breakdown(ev(p_old), ev(p_new), sizes, Whole::default(), info.clone());
                prop_assert!(b.reward.abs() <= 1.5);
                let same = breakdown(ev(p_old), ev(p_old), sizes, Whole::default(), info);
                prop_assert_eq!(same.reward, 0.0);
            }
        }

        #[test]
        fn added_text_never_raises_the_default_reward(p_old in 0.0f64..=1.0, p_new in 0.0f64..=1.0, n in 1usize..500, chars in 1usize..100_000, pad in 0usize..100_000) {
            let ev = |p: f64| Evaluation { p, answer: None, f1: None, judge: None, evidence_recall: 0.0, retrieved: vec![], context_chars: 0, budget: 0 };
            let info = ScoringInfo {
                top_k: 5,
                evaluator: Evaluator::AnswerPhrase,
                llm_model: None,
                embedder: "x".into(),
                evidence_total: 0,
                formula: RewardFormula::DeltaGrowth,
                context: Context::Budget,
            };
            let at = |new_chars: usize| {
                let sizes = SizeInput { old_count: n, new_count: n + 1, old_chars: chars, new_chars, n_max: n };
                breakdown(ev(p_old), ev(p_new), sizes, Whole::default(), info.clone()).reward
            };
            // The same delta with more text: never a higher reward, whatever the sign of the delta.
            prop_assert!(at(chars + pad) <= at(chars));
            prop_assert!(at(chars.saturating_sub(pad)) == at(chars));
        }
    }
}
