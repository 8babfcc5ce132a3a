//! `memgym rollout --fork-at K --fork-group G`: forked groups beside the fresh ones, so a user sees whether
//! GRPO siblings that share an intermediate memory (LoGo-GRPO's local reroll, Memory-R2) spread their
//! rewards more or less than siblings that each edited M₀ from the start.
//!
//! For each question, one prefix rollout plays K replies on an episode of the group's seed, with its own
//! sampling seed ([`prefix_seed`]). `ForkEpisode` then copies its memory, steps and budget into G forks
//! (the parent's seed, so `memgym replay` reproduces a fork by replaying its whole call list on one fresh
//! episode), and each fork finishes the rollout with its own sampling seed ([`fork_seed`]) from reply K+1.
//! When the prefix's policy stops before K replies (a reply with no call), the shared part ends before
//! that reply: each fork samples its own reply there, so every fork is still a sample from one state.
//! Every fork is scored against the parent's p_old, which is the fresh groups' (the same M₀).
//!
//! A fork's trajectory holds the whole conversation, prefix included, with [`ForkOf`] saying where it
//! branched; they go to [`FILE`] (never into `trajectories.jsonl`, whose groups stay fresh). A rerun plays
//! again every group with a fork not scored (the whole group: its forks share one prefix).

use std::collections::HashSet;
use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::play::{self, Job, Table};
use super::record::{self, Status, Stop, Trajectory};
use super::report::{all_equal, bootstrap, complete_groups, moments, Mean};
use super::{episode_seed, fresh_episode_id, Plan, Progress};
use crate::dataset::Question;
use crate::util::fnv::fnv1a;

/// The forks' trajectories, beside `trajectories.jsonl`.
pub const FILE: &str = "forks.jsonl";
/// The fork settings of the run, beside `run.json`.
pub const SETTINGS: &str = "forks.json";

/// `--fork-at` and `--fork-group`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fork {
    /// Replies of the prefix.
    pub at: u32,
    /// Forks per question.
    pub group: u32,
}

/// Where a fork's rollout branched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkOf {
    /// The prefix's episode, the one forked.
    pub parent: String,
    /// `--fork-at`.
    pub requested_at: u32,
    /// Replies the forks share: `requested_at`, or fewer when the prefix's policy stopped earlier.
    pub at: u32,
    /// The prefix's sampling seed (its turns' seeds are in the shared turns).
    pub prefix_seed: u64,
}

/// The key of fork `i` of a question.
pub fn key(question_id: &str, i: u32) -> String {
    format!("{question_id}/fork{i}")
}

/// The prefix's first sampling seed, below 2³¹.
pub fn prefix_seed(seed: u64, question_id: &str) -> u64 {
    fnv1a(format!("prefix:{seed}:{question_id}").as_bytes()) % (1 << 31)
}

/// Fork `i`'s sampling seed (its turn k asks for seed + k), below 2³¹.
pub fn fork_seed(seed: u64, question_id: &str, i: u32) -> u64 {
    fnv1a(format!("fork:{seed}:{question_id}:{i}").as_bytes()) % (1 << 31)
}

/// Plays the forked group of every question whose forks are not all scored in [`FILE`], one group at a
/// time (its forks `concurrency` at a time); returns how many fork rollouts were played.
pub async fn play_all(
    plan: &Plan,
    f: Fork,
    questions: &[Question],
    table: &Table<'_>,
    out: &Path,
    concurrency: usize,
) -> anyhow::Result<usize> {
    let path = out.join(FILE);
    super::check_recorded(&out.join(SETTINGS), &f, &path)?;
    let scored: HashSet<String> = if path.exists() {
        record::read(&path)?.into_iter().filter(|t| t.status == Status::Scored).map(|t| t.key).collect()
    } else {
        HashSet::new()
    };
    let todo: Vec<&Question> = questions.iter().filter(|q| (0..f.group).any(|i| !scored.contains(&key(&q.id, i)))).collect();
    let total = questions.len() as u64 * u64::from(f.group);
    let skipped = total - todo.len() as u64 * u64::from(f.group);
    if skipped > 0 {
        eprintln!("resuming: {skipped} of {total} forks already scored in {}", path.display());
    }
    let mut writer = record::Writer::append(&path)?;
    let mut progress = Progress::new("forks", total, skipped);
    for q in &todo {
        for t in play_group(table, plan, f, q, concurrency).await {
            writer.write(&t)?;
            progress.step(&t);
        }
    }
    writer.sync().with_context(|| format!("cannot sync {}", path.display()))?;
    progress.finish();
    Ok(todo.len() * f.group as usize)
}

/// One question's forked group (see the module doc). Never fails: a failure of the prefix or of the fork
/// fails each fork's trajectory with its reason.
pub async fn play_group(t: &Table<'_>, plan: &Plan, f: Fork, q: &Question, concurrency: usize) -> Vec<Trajectory> {
    let seed = plan.settings.seed;
    let base = Job::of(q, 0, f.group, episode_seed(seed, &q.id), prefix_seed(seed, &q.id), "prefix");
    let started = std::time::Instant::now();
    let mut prefix = play::begin(t, &base);
    let opened = play::open(t, &mut prefix).await;
    if opened {
        if let Err(why) = play::turns(t, &mut prefix, f.at).await {
            prefix.failure = Some(why);
        }
    }
    // The reply that ended the prefix early has no call: unshared, each fork samples its own there.
    if prefix.stop == Some(Stop::NoCall) {
        if let Some(last) = prefix.turns.pop() {
            prefix.messages.truncate(last.sent);
            prefix.tokens.prompt -= last.prompt_tokens.unwrap_or(0);
            prefix.tokens.completion -= last.completion_tokens.unwrap_or(0);
            prefix.timings.policy_ms -= last.latency_ms;
        }
    }
    prefix.stop = None;
    let at = u32::try_from(prefix.turns.len()).unwrap_or(u32::MAX);
    let ids: Vec<String> = (0..f.group).map(|i| fresh_episode_id("fork", &q.id, i)).collect();
    let forked = match (opened, &prefix.failure) {
        (true, None) => t.env.fork(&prefix.job.episode_id, &ids).await.map_err(|s| format!("ForkEpisode: {}: {}", s.code(), s.message())),
        (_, failure) => Err(format!("the prefix failed: {}", failure.as_deref().unwrap_or("CreateEpisode"))),
    };
    if opened {
        play::close(t, &mut prefix).await;
    }
    let prefix_ms = started.elapsed().as_secs_f64() * 1e3;
    let branch = ForkOf { parent: prefix.job.episode_id.clone(), requested_at: f.at, at, prefix_seed: base.sampling_seed };
    let forks = ids.iter().enumerate().map(|(i, id)| {
        let i = u32::try_from(i).unwrap_or(u32::MAX);
        let mut traj = prefix.clone();
        traj.key = key(&q.id, i);
        // The server's id for the fork when it forked (the same as asked, but behind replicas).
        let id = forked.as_ref().ok().and_then(|given| given.get(i as usize)).unwrap_or(id).clone();
        traj.job = Job { sample: i, sampling_seed: fork_seed(seed, &q.id, i), episode_id: id, fork: Some(branch.clone()), ..base.clone() };
        let forked = &forked;
        async move {
            let clock = std::time::Instant::now();
            match forked {
                Err(why) => traj.failure = Some(why.clone()),
                Ok(_) => {
                    traj.failure = None;
                    match play::turns(t, &mut traj, t.max_turns).await {
                        Err(why) => traj.failure = Some(why),
                        Ok(()) => play::score(t, &mut traj).await,
                    }
                    play::close(t, &mut traj).await;
                }
            }
            traj.timings.total_ms = prefix_ms + clock.elapsed().as_secs_f64() * 1e3;
            traj
        }
    });
    use futures_util::stream::StreamExt;
    futures_util::stream::iter(forks).buffered(concurrency.max(1)).collect().await
}

/// The spread of a kind of group.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Group size.
    pub group: u32,
    /// Mean within-group standard deviation of the reward (population).
    pub mean_std: f64,
    /// Mean within-group variance (population).
    pub mean_variance: f64,
    /// Share of the groups whose rewards are all equal (no GRPO signal).
    pub all_equal: f64,
}

/// Forked groups against fresh groups, on the questions where both are complete.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// `--fork-at`.
    pub fork_at: u32,
    /// Questions with both groups complete.
    pub questions: usize,
    /// Mean replies the forks shared.
    pub mean_shared_turns: f64,
    /// Groups whose prefix's policy stopped before `fork_at` replies.
    pub prefix_stopped_early: usize,
    /// The fresh groups.
    pub fresh: Spread,
    /// The forked groups.
    pub forked: Spread,
    /// Per question, the forked group's standard deviation minus the fresh group's: mean and bootstrap 95% CI.
    pub std_difference: Mean,
    /// The forked groups' mean reward.
    pub forked_mean_reward: f64,
    /// The fresh groups' mean reward on the same questions.
    pub fresh_mean_reward: f64,
}

fn spread(groups: &[&Vec<f64>], group: u32) -> Spread {
    let n = groups.len().max(1) as f64;
    let equal = groups.iter().filter(|r| all_equal(r)).count();
    Spread {
        group,
        mean_std: groups.iter().map(|r| moments(r).1.sqrt()).sum::<f64>() / n,
        mean_variance: groups.iter().map(|r| moments(r).1).sum::<f64>() / n,
        all_equal: equal as f64 / n,
    }
}

/// The comparison, or `None` when no question has both groups complete.
pub fn compare(fresh: &[Trajectory], forked: &[Trajectory]) -> Option<Comparison> {
    let fresh_groups = complete_groups(fresh);
    let forked_groups = complete_groups(forked);
    let both: Vec<&str> = forked_groups.keys().filter(|q| fresh_groups.contains_key(*q)).copied().collect();
    if both.is_empty() {
        return None;
    }
    let fr: Vec<&Vec<f64>> = both.iter().map(|q| &fresh_groups[q].0).collect();
    let fk: Vec<&Vec<f64>> = both.iter().map(|q| &forked_groups[q].0).collect();
    let branches: Vec<&ForkOf> = both.iter().filter_map(|q| forked_groups[q].1.job.fork.as_ref()).collect();
    let fork_at = branches.first().map_or(0, |b| b.requested_at);
    let diffs: Vec<Vec<f64>> = fr.iter().zip(&fk).map(|(a, b)| vec![moments(b).1.sqrt() - moments(a).1.sqrt()]).collect();
    let mean_of = |gs: &[&Vec<f64>]| gs.iter().map(|r| moments(r).0).sum::<f64>() / gs.len() as f64;
    Some(Comparison {
        fork_at,
        questions: both.len(),
        mean_shared_turns: branches.iter().map(|b| f64::from(b.at)).sum::<f64>() / branches.len().max(1) as f64,
        prefix_stopped_early: branches.iter().filter(|b| b.at < b.requested_at).count(),
        fresh: spread(&fr, fresh_groups[both[0]].1.job.group),
        forked: spread(&fk, forked_groups[both[0]].1.job.group),
        std_difference: bootstrap(&diffs),
        forked_mean_reward: mean_of(&fk),
        fresh_mean_reward: mean_of(&fr),
    })
}

/// The report's section.
pub fn markdown(c: &Comparison) -> String {
    let row = |name: String, s: &Spread, mean: f64| {
        format!("| {name} | {} | {:+.4} | {:.4} | {:.5} | {:.1}% |\n", s.group, mean, s.mean_std, s.mean_variance, s.all_equal * 100.0)
    };
    let mut s = format!(
        "\n## Forked against fresh groups\n\n{} questions with both groups complete · forks share {:.2} replies on average (--fork-at {}; {} prefixes stopped earlier)\n\n",
        c.questions, c.mean_shared_turns, c.fork_at, c.prefix_stopped_early
    );
    s.push_str("| groups | G | mean reward | mean within-group std | mean variance | all equal (no signal) |\n|---|---|---|---|---|---|\n");
    s.push_str(&row("fresh (each from M₀)".into(), &c.fresh, c.fresh_mean_reward));
    s.push_str(&row(format!("forked after reply {}", c.fork_at), &c.forked, c.forked_mean_reward));
    let d = &c.std_difference;
    s.push_str(&format!(
        "\nForked − fresh within-group std, per question: {:+.4} [{:+.4}, {:+.4}] (bootstrap 95% CI over questions).\n",
        d.mean, d.lo, d.hi
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn traj(q: &str, sample: u32, group: u32, reward: Option<f64>, fork: Option<u32>) -> Trajectory {
        let mut t = crate::harness::rollout::record::test_support::traj(q, 1, sample, group, reward);
        t.job.fork = fork.map(|at| ForkOf { parent: "p".into(), requested_at: 2, at, prefix_seed: 3 });
        t
    }

    #[test]
    fn seeds_differ_per_fork_and_from_the_prefix() {
        let s: HashSet<u64> = (0..4).map(|i| fork_seed(0, "q", i)).chain([prefix_seed(0, "q")]).collect();
        assert_eq!(s.len(), 5);
        assert!(s.iter().all(|x| *x < 1 << 31));
        assert_eq!(key("conv-26:q3", 2), "conv-26:q3/fork2");
    }

    #[test]
    fn the_comparison_pairs_complete_groups_by_question() {
        let fresh = vec![
            traj("a", 0, 2, Some(0.0), None),
            traj("a", 1, 2, Some(1.0), None),
            traj("b", 0, 2, Some(0.5), None),
            traj("b", 1, 2, Some(0.5), None),
            traj("c", 0, 2, Some(0.5), None),
            traj("c", 1, 2, None, None),
        ];
        let forked = vec![
            traj("a", 0, 2, Some(0.2), Some(2)),
            traj("a", 1, 2, Some(0.2), Some(2)),
            traj("b", 0, 2, Some(0.0), Some(1)),
            traj("b", 1, 2, Some(1.0), Some(1)),
            traj("c", 0, 2, Some(0.0), Some(2)),
            traj("c", 1, 2, Some(1.0), Some(2)),
        ];
        let c = compare(&fresh, &forked).unwrap();
        assert_eq!(c.questions, 2, "c's fresh group is incomplete");
        assert_eq!((c.fresh.mean_std, c.forked.mean_std), (0.25, 0.25));
        assert_eq!((c.fresh.all_equal, c.forked.all_equal), (0.5, 0.5));
        assert_eq!(c.std_difference.mean, 0.0, "a: 0 − 0.5, b: 0.5 − 0");
        assert!(c.std_difference.lo < 0.0 && c.std_difference.hi > 0.0);
        assert_eq!((c.mean_shared_turns, c.prefix_stopped_early), (1.5, 1));
        assert!((c.fresh_mean_reward - 0.5).abs() < 1e-12 && (c.forked_mean_reward - 0.35).abs() < 1e-12);
        assert!(markdown(&c).contains("| forked after reply 2 | 2 | +0.3500 | 0.2500 |"), "{}", markdown(&c));
        assert!(compare(&fresh, &[]).is_none());
    }
}
