//! The pure half of `memgym eval`: per agent × category, the mean reward of each evaluator, the sign
//! shares of the first evaluator's reward, the sign agreement of every other evaluator with the first,
//! how often the first evaluator's reward has the sign the agent should get, and the table that prints
//! them.

use super::*;

pub use crate::reward::sign;

/// One evaluator's numbers in a [`SummaryRow`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct EvaluatorSummary {
    /// Evaluator name.
    pub evaluator: &'static str,
    /// Mean reward.
    pub mean_reward: f64,
    /// Mean p on M₀.
    pub mean_p_old: f64,
    /// Mean p on the edited memory.
    pub mean_p_new: f64,
    /// Share of episodes where this reward's sign equals the first evaluator's (`None` for the first).
    pub sign_agreement: Option<f64>,
}

/// How often the first evaluator's reward has the sign the agent should get. Episodes with no room for
/// it are counted apart, not checked.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ExpectedSign {
    /// "reward = 0" (no-op: exactly), "reward > 0" (oracle) or "reward < 0" (destroyer).
    pub rule: &'static str,
    /// Episodes checked.
    pub checked: usize,
    /// Of which the rule held.
    pub met: usize,
    /// Oracle: p_old was already 1.
    pub saturated: usize,
    /// Destroyer: p_old was already 0.
    pub nothing_to_lose: usize,
    /// Destroyer: no memory holds the question's evidence, so nothing was deleted.
    pub no_evidence_memory: usize,
    /// Destroyer: no memory of M₀'s top-k holds the evidence, so the deletions leave the top-k as it was.
    pub evidence_not_retrieved: usize,
    /// Destroyer: category-5 questions, whose evidence supports the trap answer: deleting it should
    /// raise p, not lower it.
    pub adversarial: usize,
    /// Destroyer: a memory it did not delete still states the answer.
    pub answer_elsewhere: usize,
    /// Question ids of the checked episodes where the rule did not hold.
    pub misses: Vec<String>,
}

/// One line of the report: an agent on one category (or all).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SummaryRow {
    /// Agent name.
    pub agent: &'static str,
    /// Category 1..=5; `None` for all.
    pub category: Option<u8>,
    /// Episodes (questions).
    pub episodes: usize,
    /// Per evaluator, in the order given.
    pub evaluators: Vec<EvaluatorSummary>,
    /// Share of episodes with the first evaluator's reward > 0.
    pub positive: f64,
    /// … = 0 (within [`SIGN_EPSILON`]).
    pub zero: f64,
    /// … < 0.
    pub negative: f64,
    /// Tool calls carried out.
    pub edits: usize,
    /// Tool calls refused.
    pub refused: usize,
    /// The expected-sign check; `None` for the random agent.
    pub expected: Option<ExpectedSign>,
}

/// The report: per agent (in [`AGENTS`] order), one row per category present, then "all". Every
/// row must carry the same evaluators in the same order.
pub fn summarize(rows: &[EpisodeRow]) -> Vec<SummaryRow> {
    let mut out = Vec::new();
    for agent in AGENTS {
        let mine: Vec<&EpisodeRow> = rows.iter().filter(|r| r.agent == agent).collect();
        if mine.is_empty() {
            continue;
        }
        for c in 1..=ADVERSARIAL_CATEGORY {
            let cat: Vec<&EpisodeRow> = mine.iter().copied().filter(|r| r.category == c).collect();
            if !cat.is_empty() {
                out.push(summary_row(agent, Some(c), &cat));
            }
        }
        out.push(summary_row(agent, None, &mine));
    }
    out
}

fn summary_row(agent: Agent, category: Option<u8>, rows: &[&EpisodeRow]) -> SummaryRow {
    let d = rows.len().max(1) as f64;
    let names: Vec<&'static str> = rows.first().map(|r| r.scores.iter().map(|s| s.evaluator).collect()).unwrap_or_default();
    let first_sign = |r: &EpisodeRow| r.scores.first().map_or(0, |s| sign(s.reward));
    let evaluators = names
        .iter()
        .enumerate()
        .map(|(k, &evaluator)| {
            let mean = |f: fn(&Score) -> f64| rows.iter().map(|r| f(&r.scores[k])).sum::<f64>() / d;
            let agreeing = rows.iter().filter(|r| sign(r.scores[k].reward) == first_sign(r)).count();
            EvaluatorSummary {
                evaluator,
                mean_reward: mean(|s| s.reward),
                mean_p_old: mean(|s| s.p_old),
                mean_p_new: mean(|s| s.p_new),
                sign_agreement: (k > 0).then(|| agreeing as f64 / d),
            }
        })
        .collect();
    let share = |s: i8| rows.iter().filter(|r| first_sign(r) == s).count() as f64 / d;
    SummaryRow {
        agent: agent.name(),
        category,
        episodes: rows.len(),
        evaluators,
        positive: share(1),
        zero: share(0),
        negative: share(-1),
        edits: rows.iter().map(|r| r.edits).sum(),
        refused: rows.iter().map(|r| r.refused).sum(),
        expected: expected_sign(agent, rows),
    }
}

fn expected_sign(agent: Agent, rows: &[&EpisodeRow]) -> Option<ExpectedSign> {
    let rule = match agent {
        Agent::NoOp => "reward = 0",
        Agent::Oracle => "reward > 0",
        Agent::Destroyer => "reward < 0",
        Agent::Trick(Trick::OraclePadding | Trick::OracleOverwrite)
        | Agent::Random
        | Agent::Resolver
        | Agent::ResolverCard
        | Agent::Sweep => return None,
        Agent::Trick(_) => "reward <= 0",
    };
    let mut e = ExpectedSign { rule, ..ExpectedSign::default() };
    for r in rows {
        let Some(s) = r.scores.first() else { continue };
        let met = match agent {
            // Exactly 0, not within epsilon: the no-op must not move the reward at all.
            Agent::NoOp => s.reward == 0.0,
            Agent::Oracle if s.p_old >= 1.0 => {
                e.saturated += 1;
                continue;
            }
            Agent::Oracle => sign(s.reward) > 0,
            Agent::Destroyer if r.category == ADVERSARIAL_CATEGORY => {
                e.adversarial += 1;
                continue;
            }
            Agent::Destroyer if r.edits == 0 => {
                e.no_evidence_memory += 1;
                continue;
            }
            Agent::Destroyer if s.p_old <= 0.0 => {
                e.nothing_to_lose += 1;
                continue;
            }
            Agent::Destroyer if r.evidence_recall_old <= 0.0 => {
                e.evidence_not_retrieved += 1;
                continue;
            }
            Agent::Destroyer if r.answer_elsewhere => {
                e.answer_elsewhere += 1;
                continue;
            }
            Agent::Destroyer => sign(s.reward) < 0,
            Agent::Trick(_) => sign(s.reward) <= 0,
            Agent::Random | Agent::Resolver | Agent::ResolverCard | Agent::Sweep => continue,
        };
        e.checked += 1;
        if met {
            e.met += 1;
        } else {
            e.misses.push(r.question_id.clone());
        }
    }
    Some(e)
}

/// The best trick's mean reward against the oracle's, for one category (or all).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Exploit {
    /// Category 1..=5; `None` for all.
    pub category: Option<u8>,
    /// The trick with the highest mean reward (first evaluator).
    pub best: &'static str,
    /// Its mean reward.
    pub best_mean: f64,
    /// The oracle's mean reward.
    pub oracle_mean: f64,
    /// best_mean / oracle_mean (0 when the oracle's mean is not positive).
    pub share: f64,
}

/// Per category and overall, the best mean reward of an agent that neither reads the gold nor adds
/// information (the tricks, no-op and random) as a share of the oracle's; `None` without an oracle or a
/// trick in the rows.
pub fn exploit(summary: &[SummaryRow]) -> Vec<Exploit> {
    let mut cats: Vec<Option<u8>> = (1..=ADVERSARIAL_CATEGORY).map(Some).collect();
    cats.push(None);
    let mean = |r: &SummaryRow| r.evaluators.first().map_or(0.0, |e| e.mean_reward);
    let unprivileged = |name: &str| AGENTS.iter().any(|a| a.name() == name && !a.privileged() && !a.honest());
    cats.into_iter()
        .filter_map(|c| {
            let oracle = summary.iter().find(|r| r.agent == "oracle" && r.category == c)?;
            let best = summary.iter().filter(|r| r.category == c && unprivileged(r.agent)).max_by(|a, b| mean(a).total_cmp(&mean(b)))?;
            let (best_mean, oracle_mean) = (mean(best), mean(oracle));
            let share = if oracle_mean > 0.0 { best_mean / oracle_mean } else { 0.0 };
            Some(Exploit { category: c, best: best.agent, best_mean, oracle_mean, share })
        })
        .collect()
}

/// Per agent and gold status (first evaluator): episodes, mean reward and the share > 0, as text; one
/// line per agent with a column per status present. Empty without rows.
pub fn gold_table(rows: &[EpisodeRow]) -> String {
    use std::fmt::Write as _;
    let statuses: Vec<&str> =
        crate::dataset::GoldStatus::ALL.iter().map(|s| s.name()).filter(|n| rows.iter().any(|r| r.gold == *n)).collect();
    if rows.is_empty() {
        return String::new();
    }
    let first = rows[0].scores.first().map_or("-", |s| s.evaluator);
    let mut s = format!("by gold status (the LoCoMo audit), {first} reward: mean (share > 0) over n questions\n");
    let _ = write!(s, "{:<14}", "agent");
    for st in &statuses {
        let _ = write!(s, "  {st:>28}");
    }
    s.push('\n');
    for agent in AGENTS {
        let mine: Vec<&EpisodeRow> = rows.iter().filter(|r| r.agent == agent).collect();
        if mine.is_empty() {
            continue;
        }
        let _ = write!(s, "{:<14}", agent.name());
        for st in &statuses {
            let these: Vec<f64> = mine.iter().filter(|r| r.gold == *st).filter_map(|r| r.scores.first().map(|x| x.reward)).collect();
            let n = these.len().max(1) as f64;
            let mean = these.iter().sum::<f64>() / n;
            let pos = these.iter().filter(|r| sign(**r) > 0).count() as f64 / n;
            let cell = format!("{mean:+.4} ({}) n={}", percent(pos), these.len());
            let _ = write!(s, "  {cell:>28}");
        }
        s.push('\n');
    }
    s
}

/// Question ids of misses the table shows per agent.
const MISSES_SHOWN: usize = 8;

fn percent(share: f64) -> String {
    format!("{:.1}%", 100.0 * share)
}

/// The report as an aligned text table, a legend, and the expected-sign lines.
pub fn table(rows: &[SummaryRow]) -> String {
    use std::fmt::Write as _;
    let names: Vec<&str> = rows.first().map(|r| r.evaluators.iter().map(|e| e.evaluator).collect()).unwrap_or_default();
    let first = names.first().copied().unwrap_or("-");
    let width = |label: &str| label.len().max(7);
    let mut s = format!("{:<14}  {:<13} {:>5}", "agent", "category", "n");
    for name in &names {
        let label = format!("reward {name}");
        let _ = write!(s, "  {label:>w$}", w = width(&label));
    }
    let _ = write!(s, "  {:>6}  {:>6}  {:>6}", ">0", "=0", "<0");
    for name in names.iter().skip(1) {
        let label = format!("agree {name}");
        let _ = write!(s, "  {label:>w$}", w = width(&label));
    }
    let _ = writeln!(s, "  {:>6}  {:>7}", "edits", "refused");
    for r in rows {
        let cat = match r.category {
            None => "all".to_string(),
            Some(c) => format!("{c} {}", category_name(c).unwrap_or("?")),
        };
        let _ = write!(s, "{:<14}  {:<13} {:>5}", r.agent, cat, r.episodes);
        for e in &r.evaluators {
            let _ = write!(s, "  {:>w$.4}", e.mean_reward, w = width(&format!("reward {}", e.evaluator)));
        }
        let _ = write!(s, "  {:>6}  {:>6}  {:>6}", percent(r.positive), percent(r.zero), percent(r.negative));
        for e in r.evaluators.iter().skip(1) {
            let agree = e.sign_agreement.map_or("-".to_string(), percent);
            let _ = write!(s, "  {agree:>w$}", w = width(&format!("agree {}", e.evaluator)));
        }
        let _ = writeln!(s, "  {:>6}  {:>7}", r.edits, r.refused);
    }
    let _ = writeln!(
        s,
        "\nreward E: mean reward under evaluator E. >0 =0 <0: share of episodes by the sign of the {first} reward \
         (|reward| <= {SIGN_EPSILON:e} counts as 0)."
    );
    if names.len() > 1 {
        let _ = writeln!(s, "agree E: share of episodes where E's reward has the sign of the {first} reward.");
    }
    let _ = writeln!(s, "edits / refused: tool calls the environment carried out / refused (or could not be attempted).");
    let exploits = exploit(rows);
    if !exploits.is_empty() {
        let _ = writeln!(s, "\nexploit under {first}: the best mean reward of an agent that neither reads the gold nor adds information, as a share of the oracle's:");
        for e in &exploits {
            let cat = match e.category {
                None => "all".to_string(),
                Some(c) => format!("{c} {}", category_name(c).unwrap_or("?")),
            };
            let _ = writeln!(s, "  {cat:<13}  {:>7.1}%  ({} {:+.4}, oracle {:+.4})", 100.0 * e.share, e.best, e.best_mean, e.oracle_mean);
        }
    }
    let _ = writeln!(s, "\nexpected sign under {first}:");
    for r in rows.iter().filter(|r| r.category.is_none()) {
        let Some(e) = &r.expected else {
            let why = match r.agent {
                "random" => "random edits",
                "resolver" => "honest: > 0 where its rewrite helps",
                _ => "checked against the oracle below",
            };
            let _ = writeln!(s, "  {:<14}  no sign expected ({why})", r.agent);
            continue;
        };
        let rate = if e.checked == 0 { "-".to_string() } else { percent(e.met as f64 / e.checked as f64) };
        let _ = write!(s, "  {:<14}  {:<11}  {}/{} ({rate})", r.agent, e.rule, e.met, e.checked);
        let apart: Vec<String> = [
            (e.saturated, "saturated (p_old = 1)"),
            (e.nothing_to_lose, "nothing to lose (p_old = 0)"),
            (e.no_evidence_memory, "without an evidence memory (nothing deleted)"),
            (e.evidence_not_retrieved, "evidence not in M₀'s top-k (top-k unchanged)"),
            (e.adversarial, "adversarial (the evidence supports the trap answer)"),
            (e.answer_elsewhere, "answer stated elsewhere (a memory not deleted states it)"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
        if apart.is_empty() {
            let _ = writeln!(s);
        } else {
            let _ = writeln!(s, "; not checked: {}", apart.join(", "));
        }
        if !e.misses.is_empty() {
            let more = e.misses.len().saturating_sub(MISSES_SHOWN);
            let more = if more > 0 { format!(" (+{more} more; --json lists all)") } else { String::new() };
            let _ = writeln!(s, "  {:<14}  missed: {}{more}", "", e.misses[..e.misses.len().min(MISSES_SHOWN)].join(", "));
        }
    }
    s
}
