//! The rollout report (`report.json`, `report.md`): what a policy earns, whether it can use the tools in
//! the format it was given, and whether a GRPO group of its rollouts carries any signal — beside the
//! scripted no-op and oracle on the same questions, so the numbers have their floor and their ceiling.
//!
//! Pure: built from the trajectories and the scripted agents' rewards.
//!
//! - Mean reward per category with a bootstrap 95% CI. The bootstrap resamples *questions* (each with
//!   all its rollouts), not rollouts: the samples of one group share an episode and are not independent.
//!   [`BOOTSTRAP_RESAMPLES`] resamples, seeded, so a report is reproducible.
//! - Signs: the share of scored rollouts with reward > 0, = 0 (|r| ≤ [`SIGN_EPSILON`]) and < 0.
//! - Calls: per tool (names the environment does not know are counted as `other`), per parse mode, and
//!   what became of them (done, refused, unread).
//! - Format or choice ([`super::conformance`]): the *format failures* — calls not valid under the tools'
//!   schemas, which a grammar-constrained decoder prevents unless the reply is cut by `max_tokens` (counted
//!   apart): a call attempt that could not be read (`invalid`), a call read leniently
//!   (`lenient`), a call whose name or arguments break the schema of the tool the policy was shown (unknown
//!   tool, repeated or unknown argument, wrong type, enum value not listed, out of bounds, missing
//!   required) — by kind, and how many memgym carried out all the same; and the *policy's choices* —
//!   what no grammar decides: the schema-valid calls, carried out or refused by the environment (by
//!   refusal kind), and the replies with no call attempt (the policy stopped).
//! - GRPO signal, over groups whose every sample was scored: the share whose rewards are all equal
//!   (max − min ≤ [`SIGN_EPSILON`]: a zero advantage for every sample), and the mean within-group
//!   standard deviation (population).

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::guessed_ids::{blind_calls, most_guessed, BlindCalls};
use super::parse::Mode;
use super::policy::ToolChoice;
use super::record::{Outcome, Status, Stop, Trajectory};
use crate::dataset::category_name;
use crate::tools::TOOL_NAMES;

pub use crate::reward::{sign, SIGN_EPSILON};

/// Bootstrap resamples per CI.
pub const BOOTSTRAP_RESAMPLES: usize = 2_000;
/// Refusal kinds listed in a report.
pub const TOP_REFUSALS: usize = 10;
/// Guessed ids listed in a report.
pub const TOP_GUESSED: usize = 5;

/// A scripted agent's reward on one question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    /// `no-op` or `oracle`.
    pub agent: String,
    /// The question.
    pub question_id: String,
    /// Its category.
    pub category: u8,
    /// The reward.
    pub reward: f64,
}

/// What the run was.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    /// The policy's model.
    pub model: String,
    /// Tool format.
    pub tool_format: String,
    /// The requests' `tool_choice` (`auto` in reports written before it).
    #[serde(default)]
    pub tool_choice: ToolChoice,
    /// `in-process` or `grpc`.
    pub env: String,
    /// Questions.
    pub questions: usize,
    /// Group size.
    pub group: u32,
    /// Replies per rollout at most.
    pub max_turns: u32,
    /// Sampling temperature.
    pub temperature: f32,
    /// Nucleus sampling.
    pub top_p: f32,
    /// Tokens per reply.
    pub max_tokens: u32,
    /// The run's seed.
    pub seed: u64,
    /// The system message (`default`, or the file and its hash).
    pub system_prompt: String,
    /// The evaluator of every episode.
    pub evaluator: String,
    /// Where episodes ran and their settings (`RunSettings::environment`).
    pub environment: String,
}

/// A mean with its 95% interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Mean {
    /// Rollouts.
    pub n: usize,
    /// Mean reward.
    pub mean: f64,
    /// 2.5th percentile of the bootstrap means.
    pub lo: f64,
    /// 97.5th percentile.
    pub hi: f64,
}

impl Mean {
    /// The mean of nothing.
    pub const EMPTY: Mean = Mean { n: 0, mean: 0.0, lo: 0.0, hi: 0.0 };
}

/// One row of the per-category table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CategoryRow {
    /// "all" or the category's name.
    pub category: String,
    /// The policy's reward.
    pub policy: Mean,
    /// Shares of scored rollouts with reward > 0, = 0, < 0.
    pub signs: [f64; 3],
    /// No-op's mean reward on the same questions.
    pub no_op: Option<f64>,
    /// The oracle's.
    pub oracle: Option<f64>,
}

/// Counts of calls.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CallCounts {
    /// Calls.
    pub calls: usize,
    /// Carried out.
    pub done: usize,
    /// Refused by the environment.
    pub refused: usize,
    /// Not readable, not sent.
    pub unread: usize,
}

impl CallCounts {
    fn add(&mut self, o: Outcome) {
        self.calls += 1;
        match o {
            Outcome::Done => self.done += 1,
            Outcome::Refused => self.refused += 1,
            Outcome::Unread => self.unread += 1,
        }
    }
}

/// GRPO's view of the groups.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GroupSignal {
    /// Groups with every sample scored.
    pub groups: usize,
    /// Share of them whose rewards are all equal.
    pub all_equal: f64,
    /// Mean within-group standard deviation of the reward.
    pub mean_std: f64,
}

/// Calls that name memory ids no earlier result showed ([`super::guessed_ids`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlindSummary {
    /// Calls naming at least one memory id.
    pub naming_calls: usize,
    /// Of those, calls naming an id not shown before.
    pub blind_calls: usize,
    /// Of those, edits carried out.
    pub blind_edits_done: usize,
    /// Share of scored rollouts with at least one blind edit carried out.
    pub rollouts_with_blind_edit: f64,
    /// Mean reward of those rollouts, and of the other scored ones.
    pub reward_with: Option<f64>,
    /// See `reward_with`.
    pub reward_without: Option<f64>,
    /// The ids guessed most often, as (id, calls).
    pub most_guessed: Vec<(String, usize)>,
}

/// Searches carried out and how many matched nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct EmptySearches {
    /// `search_memory` calls carried out.
    pub done: usize,
    /// Of those, the ones whose result said nothing matched.
    pub empty: usize,
}

/// The searches carried out in `ts`, and how many of them matched nothing.
pub fn empty_searches(ts: &[Trajectory]) -> EmptySearches {
    let mut s = EmptySearches::default();
    for c in ts.iter().flat_map(Trajectory::calls).filter(|c| c.outcome == Outcome::Done && c.call.name.trim() == "search_memory") {
        s.done += 1;
        s.empty += usize::from(crate::tools::matched_nothing(&c.result));
    }
    s
}

/// The report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The run.
    pub run: RunInfo,
    /// Rollouts in the file.
    pub rollouts: usize,
    /// Scored.
    pub scored: usize,
    /// Failed (endpoint or environment), not scored.
    pub failed: usize,
    /// The first few failures' messages.
    pub failures: Vec<String>,
    /// "all" first, then per category.
    pub categories: Vec<CategoryRow>,
    /// Per tool name (and `other`).
    pub tools: BTreeMap<String, CallCounts>,
    /// Per parse mode.
    pub modes: BTreeMap<String, CallCounts>,
    /// The most frequent refusals and unread calls, as (message with values masked, count), most frequent
    /// first (at most [`TOP_REFUSALS`]).
    pub refusals: Vec<(String, usize)>,
    /// Rollouts with at least one call carried out.
    pub edited_share: f64,
    /// Searches carried out, and of those the ones that matched nothing (an invented filter or threshold
    /// empties a search: the policy then sees no memory to act on).
    #[serde(default)]
    pub searches: EmptySearches,
    /// Rollouts by turns used (1..=max_turns).
    pub turns: BTreeMap<u32, usize>,
    /// Mean turns used.
    pub mean_turns: f64,
    /// Why the policy stopped: no call / max turns.
    pub stops: BTreeMap<String, usize>,
    /// Calls on ids the policy was never shown.
    pub blind: BlindSummary,
    /// Format failures and policy's choices (absent from reports written before them).
    #[serde(default)]
    pub format_or_choice: super::conformance::FormatOrChoice,
    /// GRPO signal.
    pub grpo: GroupSignal,
    /// Mean prompt and completion tokens per scored rollout.
    pub tokens_per_rollout: [f64; 2],
    /// Mean policy latency per turn, milliseconds.
    pub policy_ms_per_turn: f64,
    /// Mean environment time per call, milliseconds.
    pub env_ms_per_call: f64,
    /// `--fork-at`: forked against fresh groups ([`super::fork`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forks: Option<super::fork::Comparison>,
}

/// Builds the report; `schemas` are the tools the policy was shown (ListTools'), against which a call's
/// conformance is judged.
pub fn build(run: RunInfo, ts: &[Trajectory], baselines: &[Baseline], schemas: &[serde_json::Value]) -> Report {
    let scored: Vec<&Trajectory> = ts.iter().filter(|t| t.status == Status::Scored).collect();
    let failures: Vec<String> = ts.iter().filter_map(|t| t.failure.as_ref().map(|f| format!("{}: {f}", t.key))).take(5).collect();
    let mut categories = vec![category_row("all".into(), &scored, baselines, |_| true)];
    let mut cats: Vec<u8> = scored.iter().map(|t| t.job.category).collect();
    cats.sort_unstable();
    cats.dedup();
    for c in cats {
        let name = category_name(c).map_or_else(|| format!("category {c}"), str::to_string);
        categories.push(category_row(name, &scored, baselines, |cat| cat == c));
    }
    let mut tools: BTreeMap<String, CallCounts> = BTreeMap::new();
    let mut modes: BTreeMap<String, CallCounts> = Mode::ALL.iter().map(|m| (m.name().to_string(), CallCounts::default())).collect();
    let mut calls = 0usize;
    let mut env_ms = 0.0;
    let mut refusals: BTreeMap<String, usize> = BTreeMap::new();
    for t in ts {
        for c in t.calls() {
            if c.outcome != Outcome::Done {
                *refusals.entry(refusal_kind(&c.result)).or_default() += 1;
            }
            let name = if TOOL_NAMES.contains(&c.call.name.trim()) { c.call.name.trim().to_string() } else { "other".to_string() };
            tools.entry(name).or_default().add(c.outcome);
            modes.entry(c.call.mode.name().to_string()).or_default().add(c.outcome);
            calls += 1;
            env_ms += c.env_ms;
        }
    }
    let mut turns: BTreeMap<u32, usize> = BTreeMap::new();
    let mut stops: BTreeMap<String, usize> = BTreeMap::new();
    for t in &scored {
        *turns.entry(t.turns.len() as u32).or_default() += 1;
        let stop = t.stop.map_or("none", Stop::name);
        *stops.entry(stop.to_string()).or_default() += 1;
    }
    let n = scored.len().max(1) as f64;
    let turn_count: usize = ts.iter().map(|t| t.turns.len()).sum();
    Report {
        run,
        rollouts: ts.len(),
        scored: scored.len(),
        failed: ts.len() - scored.len(),
        failures,
        categories,
        tools,
        modes,
        refusals: {
            let mut v: Vec<(String, usize)> = refusals.into_iter().collect();
            v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            v.truncate(TOP_REFUSALS);
            v
        },
        searches: empty_searches(ts),
        edited_share: scored.iter().filter(|t| t.calls().any(|c| c.outcome == Outcome::Done && edits(&c.call.name))).count() as f64 / n,
        mean_turns: scored.iter().map(|t| t.turns.len() as f64).sum::<f64>() / n,
        turns,
        stops,
        blind: blind_summary(ts, scored.len()),
        format_or_choice: super::conformance::split(ts, schemas),
        grpo: group_signal(ts),
        tokens_per_rollout: [
            scored.iter().map(|t| t.tokens.prompt as f64).sum::<f64>() / n,
            scored.iter().map(|t| t.tokens.completion as f64).sum::<f64>() / n,
        ],
        policy_ms_per_turn: ts.iter().flat_map(|t| t.turns.iter().map(|u| u.latency_ms)).sum::<f64>() / turn_count.max(1) as f64,
        env_ms_per_call: env_ms / calls.max(1) as f64,
        forks: None,
    }
}

/// A refusal's message with its values masked, so that refusals of one kind count together: quoted values
/// become `"…"`, memory ids `m#`, other numbers `#`; at most 100 characters.
pub fn refusal_kind(result: &str) -> String {
    let text = result.strip_prefix("Error: ").unwrap_or(result);
    let mut out = String::with_capacity(text.len().min(120));
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                for d in chars.by_ref() {
                    if d == '"' {
                        break;
                    }
                }
                out.push_str("\"…\"");
            }
            'm' if chars.peek().is_some_and(char::is_ascii_digit) && !out.ends_with(|p: char| p.is_alphanumeric()) => {
                while chars.peek().is_some_and(char::is_ascii_digit) {
                    chars.next();
                }
                out.push_str("m#");
            }
            d if d.is_ascii_digit() => {
                while chars.peek().is_some_and(|x| x.is_ascii_digit() || *x == '.') {
                    chars.next();
                }
                out.push('#');
            }
            other => out.push(other),
        }
        if out.chars().count() >= 100 {
            break;
        }
    }
    out
}

fn blind_summary(ts: &[Trajectory], scored: usize) -> BlindSummary {
    let all: Vec<BlindCalls> = ts.iter().map(blind_calls).collect();
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for (t, b) in ts.iter().zip(&all) {
        if let Some(r) = t.reward() {
            if b.blind_edits_done > 0 {
                with.push(r)
            } else {
                without.push(r)
            }
        }
    }
    BlindSummary {
        naming_calls: all.iter().map(|b| b.naming).sum(),
        blind_calls: all.iter().map(|b| b.blind).sum(),
        blind_edits_done: all.iter().map(|b| b.blind_edits_done).sum(),
        rollouts_with_blind_edit: with.len() as f64 / scored.max(1) as f64,
        reward_with: mean(&with),
        reward_without: mean(&without),
        most_guessed: most_guessed(&all, TOP_GUESSED),
    }
}

/// Whether a tool changes memory (search and sample only read it).
pub(super) fn edits(tool: &str) -> bool {
    !matches!(tool.trim(), "search_memory" | "sample_memory")
}

fn category_row(name: String, scored: &[&Trajectory], baselines: &[Baseline], keep: impl Fn(u8) -> bool) -> CategoryRow {
    let rows: Vec<&&Trajectory> = scored.iter().filter(|t| keep(t.job.category)).collect();
    // By question, in first-seen order, for the cluster bootstrap.
    let mut by_question: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for t in &rows {
        by_question.entry(t.job.question_id.as_str()).or_default().extend(t.reward());
    }
    let clusters: Vec<Vec<f64>> = by_question.into_values().collect();
    let rewards: Vec<f64> = clusters.iter().flatten().copied().collect();
    let k = rewards.len().max(1) as f64;
    let share = |s: i8| rewards.iter().filter(|r| sign(**r) == s).count() as f64 / k;
    let signs = [share(1), share(0), share(-1)];
    let questions: std::collections::HashSet<&str> = rows.iter().map(|t| t.job.question_id.as_str()).collect();
    let agent_mean = |agent: &str| {
        let v: Vec<f64> =
            baselines.iter().filter(|b| b.agent == agent && questions.contains(b.question_id.as_str())).map(|b| b.reward).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    CategoryRow { category: name, policy: bootstrap(&clusters), signs, no_op: agent_mean("no-op"), oracle: agent_mean("oracle") }
}

/// Mean of all values and its cluster-bootstrap 95% interval.
pub fn bootstrap(clusters: &[Vec<f64>]) -> Mean {
    let all: Vec<f64> = clusters.iter().flatten().copied().collect();
    let n = all.len();
    if n == 0 {
        return Mean::EMPTY;
    }
    let mean = all.iter().sum::<f64>() / n as f64;
    let mut rng = ChaCha8Rng::seed_from_u64(0x6d656d67);
    let mut means: Vec<f64> = Vec::with_capacity(BOOTSTRAP_RESAMPLES);
    for _ in 0..BOOTSTRAP_RESAMPLES {
        let (mut sum, mut count) = (0.0, 0usize);
        for _ in 0..clusters.len() {
            let c = &clusters[rng.random_range(0..clusters.len())];
            sum += c.iter().sum::<f64>();
            count += c.len();
        }
        if count > 0 {
            means.push(sum / count as f64);
        }
    }
    means.sort_by(f64::total_cmp);
    let at = |q: f64| means[((means.len() - 1) as f64 * q).round() as usize];
    Mean { n, mean, lo: at(0.025), hi: at(0.975) }
}

/// Each question's group whose every sample was scored, with two samples or more: its rewards and one of
/// its trajectories, by question.
pub fn complete_groups(ts: &[Trajectory]) -> BTreeMap<&str, (Vec<f64>, &Trajectory)> {
    let mut groups: BTreeMap<&str, (Vec<f64>, &Trajectory)> = BTreeMap::new();
    for t in ts {
        let g = groups.entry(t.job.question_id.as_str()).or_insert((Vec::new(), t));
        if let Some(r) = t.reward() {
            g.0.push(r);
        }
    }
    groups.retain(|_, (r, t)| r.len() as u32 == t.job.group && r.len() > 1);
    groups
}

/// The mean and the population variance of a group's rewards.
pub fn moments(r: &[f64]) -> (f64, f64) {
    let n = r.len() as f64;
    let m = r.iter().sum::<f64>() / n;
    (m, r.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n)
}

/// Whether a group's rewards are all equal (max − min ≤ [`SIGN_EPSILON`]): a zero advantage for each.
pub fn all_equal(r: &[f64]) -> bool {
    r.iter().copied().fold(f64::NEG_INFINITY, f64::max) - r.iter().copied().fold(f64::INFINITY, f64::min) <= SIGN_EPSILON
}

/// The GRPO signal of the groups whose every sample was scored.
pub fn group_signal(ts: &[Trajectory]) -> GroupSignal {
    let full = complete_groups(ts);
    let count = full.len();
    let equal = full.values().filter(|(r, _)| all_equal(r)).count();
    GroupSignal {
        groups: count,
        all_equal: if count == 0 { 0.0 } else { equal as f64 / count as f64 },
        mean_std: if count == 0 { 0.0 } else { full.values().map(|(r, _)| moments(r).1.sqrt()).sum::<f64>() / count as f64 },
    }
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

fn opt(x: Option<f64>) -> String {
    x.map_or("—".into(), |v| format!("{v:+.3}"))
}

/// The report as Markdown.
pub fn markdown(r: &Report) -> String {
    let run = &r.run;
    let mut s = String::new();
    s.push_str(&format!(
        "# memgym rollout report\n\npolicy `{}` · tool format `{}` · tool choice `{}` · environment {} · {} questions × G = {} · max {} turns · \
         temperature {} · top-p {} · max tokens {} · seed {}\n\nrollouts {} · scored {} · failed {}\n",
        run.model,
        run.tool_format,
        run.tool_choice.name(),
        run.env,
        run.questions,
        run.group,
        run.max_turns,
        run.temperature,
        run.top_p,
        run.max_tokens,
        run.seed,
        r.rollouts,
        r.scored,
        r.failed
    ));
    for f in &r.failures {
        s.push_str(&format!("- failed: {f}\n"));
    }
    s.push_str("\n## Reward\n\n| category | n | mean reward | 95% CI | > 0 | = 0 | < 0 | no-op | oracle |\n|---|---:|---:|---|---:|---:|---:|---:|---:|\n");
    for c in &r.categories {
        s.push_str(&format!(
            "| {} | {} | {:+.4} | [{:+.4}, {:+.4}] | {} | {} | {} | {} | {} |\n",
            c.category,
            c.policy.n,
            c.policy.mean,
            c.policy.lo,
            c.policy.hi,
            pct(c.signs[0]),
            pct(c.signs[1]),
            pct(c.signs[2]),
            opt(c.no_op),
            opt(c.oracle)
        ));
    }
    s.push_str(&format!(
        "\n## GRPO signal\n\n{} complete groups · all rewards equal in {} · mean within-group std {:.4}\n",
        r.grpo.groups,
        pct(r.grpo.all_equal),
        r.grpo.mean_std
    ));
    s.push_str("\n## Tool calls\n\n| tool | calls | done | refused | unread |\n|---|---:|---:|---:|---:|\n");
    for (name, c) in &r.tools {
        s.push_str(&format!("| {name} | {} | {} | {} | {} |\n", c.calls, c.done, c.refused, c.unread));
    }
    s.push_str("\n| parse mode | calls | done | refused | unread |\n|---|---:|---:|---:|---:|\n");
    for (name, c) in &r.modes {
        s.push_str(&format!("| {name} | {} | {} | {} | {} |\n", c.calls, c.done, c.refused, c.unread));
    }
    if !r.refusals.is_empty() {
        s.push_str("\n| refused or unread, by message | calls |\n|---|---:|\n");
        for (kind, n) in &r.refusals {
            s.push_str(&format!("| {} | {n} |\n", kind.replace('|', "\\|")));
        }
    }
    let b = &r.blind;
    let guessed: Vec<String> = b.most_guessed.iter().map(|(id, n)| format!("{id}: {n}")).collect();
    s.push_str(&format!(
        "\ncalls naming a memory id: {} · naming an id no earlier result showed (guessed): {} · guessed edits carried out: {} \
         · most guessed {{{}}}\n\nrollouts with a guessed edit carried out: {} · their mean reward {} · the others' {}\n",
        b.naming_calls,
        b.blind_calls,
        b.blind_edits_done,
        guessed.join(", "),
        pct(b.rollouts_with_blind_edit),
        opt(b.reward_with),
        opt(b.reward_without)
    ));
    s.push_str(&format!("\nrollouts that edited memory (a create, update, delete, merge or split carried out): {}\n", pct(r.edited_share)));
    s.push_str(&format!("\nsearches carried out: {} · of them matched nothing: {}\n", r.searches.done, r.searches.empty));
    s.push_str(&super::conformance::markdown(&r.format_or_choice));
    let turns: Vec<String> = r.turns.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    let stops: Vec<String> = r.stops.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    s.push_str(&format!(
        "\n## Turns\n\nmean {:.2} · by turns used {{{}}} · stopped by {{{}}}\n",
        r.mean_turns,
        turns.join(", "),
        stops.join(", ")
    ));
    s.push_str(&format!(
        "\n## Cost\n\nper rollout {:.0} prompt + {:.0} completion tokens · policy {:.0} ms per turn · environment {:.2} ms per call\n",
        r.tokens_per_rollout[0], r.tokens_per_rollout[1], r.policy_ms_per_turn, r.env_ms_per_call
    ));
    if let Some(c) = &r.forks {
        s.push_str(&super::fork::markdown(c));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_of_one_kind_count_together() {
        let a = refusal_kind("Error: memory_ids: memory m0042 not found");
        assert_eq!(a, "memory_ids: memory m# not found");
        assert_eq!(refusal_kind("Error: memory_ids: memory m0007 not found"), a);
        assert_eq!(
            refusal_kind(r#"Error: invalid argument tool_name: unknown tool "update_memory" (expected one of search_memory)"#),
            r#"invalid argument tool_name: unknown tool "…" (expected one of search_memory)"#
        );
        assert_eq!(refusal_kind("Error: top_k must be 1 to 50, got 500"), "top_k must be # to #, got #");
        assert!(refusal_kind(&"x".repeat(500)).chars().count() <= 100);
    }

    #[test]
    fn the_grpo_signal_counts_complete_groups_only() {
        let t = |q: &str, reward: Option<f64>| {
            let mut t: Trajectory = serde_json::from_value(serde_json::json!({
                "schema": "memgym.rollout/1", "key": "k", "question_id": q, "conversation_id": "c", "category": 1,
                "gold_status": "ok", "question": "?", "sample": 0, "group": 2, "episode_id": "e", "episode_seed": 1,
                "sampling_seed": 2, "include_adversarial": false, "tool_format": "openai", "model": "m",
                "status": "failed", "failure": null, "stop": null, "messages": [], "turns": [], "score": null,
                "tokens": {"prompt": 0, "completion": 0}, "timings": {"policy_ms": 0.0, "env_ms": 0.0, "total_ms": 0.0}
            }))
            .unwrap();
            if let Some(r) = reward {
                t.status = Status::Scored;
                t.score = Some(
                    serde_json::from_value(crate::api::faces::gateway::breakdown_json(crate::api::pb::ScoreEpisodeResponse {
                        reward: r,
                        ..Default::default()
                    }))
                    .unwrap(),
                );
            }
            t
        };
        let ts = [t("a", Some(0.0)), t("a", Some(0.0)), t("b", Some(0.5)), t("b", Some(-0.5)), t("c", Some(1.0)), t("c", None)];
        let g = group_signal(&ts);
        assert_eq!(g.groups, 2, "c lost a sample");
        assert_eq!(g.all_equal, 0.5);
        assert!((g.mean_std - 0.25).abs() < 1e-12, "{g:?}");
        let m = bootstrap(&[vec![0.0, 0.0], vec![1.0, 1.0]]);
        assert_eq!((m.n, m.mean), (4, 0.5));
        assert!(m.lo >= 0.0 && m.hi <= 1.0 && m.lo < m.hi, "{m:?}");
    }
}
