//! `memgym learn`: Training-Free GRPO on memgym's own episodes, and the A/B that says whether what it
//! learned helps on questions it never saw. This joins the two halves memgym serves — rollouts of a real
//! policy ([`super`]) and experience banks that learn from groups (the Training-Free GRPO design's LearnFromGroup) — into the
//! one loop a user needs measured before paying for GPU training.
//!
//! Everything runs against one server (`--addr`): its episodes, its experience bank, and its LLM endpoint
//! as the learner. The loop, epoch N = 0, 1, …:
//! 1. The library as the epoch starts (`epoch-N/library-before.txt`, FormatForPrompt's text, read once)
//!    goes into the policy's system prompt as the semantic-memory design injects it ([`super::with_library`]).
//! 2. `--group` rollouts of every train question, with seed `--seed + N` (`epoch-N/`, a `memgym rollout`
//!    directory: resumable, replayable, with its report).
//! 3. LearnFromGroup on the groups, `--learn-batch` at a time (each call one learning step, consolidated
//!    once), at the bank version the previous step left: [`group_of`] says what the learner reads.
//!    Each step's answer is appended to `epoch-N/learned.jsonl`.
//! 4. The bank exported (`epoch-N/library.json`, memgym's format) with its prompt text
//!    (`epoch-N/library.txt`).
//!
//! Then the A/B ([`ab`]): the test questions played with no library, the first epoch's and the
//! final one, with the same episode and sampling seeds, each arm a `memgym rollout` directory under `ab/`.
//! Every step is kept on disk and skipped when done, so the same command resumes after any interruption.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use tonic::transport::Channel;

pub mod ab;

use crate::api::pb;
use crate::api::pb::banks_client::BanksClient;
use crate::api::pb::learn_client::LearnClient;
use crate::app::cli::LearnArgs;
use crate::dataset::{Dataset, Question};
use crate::harness::rollout::env::Env;
use crate::harness::rollout::library::{banks_client, channel, library};
use crate::harness::rollout::record::{Outcome, Status, Stop, Trajectory};
use crate::harness::rollout::report::Report;
use crate::harness::rollout::{finish_run, plan_for, play_all, with_library, Plan};
use crate::util::fnv::fnv1a;
use ab::Arm;

/// The schema of `learn.json`.
pub const SCHEMA: &str = "memgym.learn/1";
/// Characters of a call's arguments, and of its result, a summary step keeps.
pub const SUMMARY_CHARS: usize = 160;

/// Experiences in a library's prompt text (one `[G…]. ` line each: FormatForPrompt escapes line breaks).
pub fn experiences_in(text: &str) -> usize {
    text.lines().filter(|l| l.starts_with("[G")).count()
}

/// A reward mapped into LearnFromGroup's [0, 1]: `(r + 1) / 2`, clamped. Linear, so the learner sees the
/// order and the spread of a group's rewards as they were above −1; the whole-memory reward goes below −1
/// when an edit destroys other questions' facts, and every such rollout reads 0, the worst.
pub fn normalise(reward: f64) -> f64 {
    if reward.is_finite() {
        ((reward + 1.0) / 2.0).clamp(0.0, 1.0)
    } else {
        0.0
    }
}

/// `s` on one line, without characters the text rule refuses, cut to `n` characters (marked `…`).
fn cut(s: &str, n: usize) -> String {
    let one_line = crate::text::charset::strip(s).replace('\n', " ");
    match one_line.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &one_line[..i]),
        None => one_line,
    }
}

/// What the learner reads of a scored rollout. The summary is written here from the record — every call
/// with its arguments, what became of it and the start of its result, then how the episode ended — so
/// the learner's stage 1 (an LLM summarising) is skipped: it would only restate this, less faithfully.
pub fn trajectory_of(t: &Trajectory, gold: Option<&str>) -> pb::Trajectory {
    let mut steps = Vec::new();
    for c in t.calls() {
        let what = match c.outcome {
            Outcome::Done => "done",
            Outcome::Refused => "refused",
            Outcome::Unread => "not read",
        };
        steps.push(format!("{} {} → {what}: {}", c.call.name, cut(&c.call.arguments, SUMMARY_CHARS), cut(&c.result, SUMMARY_CHARS)));
    }
    let stop = match t.stop {
        Some(Stop::NoCall) => "stopped (a reply with no call)",
        Some(Stop::MaxTurns) => "ran out of turns",
        Some(Stop::Context) => "ran out of context",
        None => "ended",
    };
    let score = t.score.as_ref();
    let ending = score.map_or_else(String::new, |s| {
        format!(
            "; memories {} → {}; the question's answer retrievable: {:.2} before, {:.2} after",
            s.initial_memory_count, s.final_memory_count, s.p_old, s.p_new
        )
    });
    steps.push(format!("{stop}{ending}"));
    // Within what the learner's own stage 1 may write, so a small model's context holds a group.
    let summary: String = steps
        .iter()
        .enumerate()
        .map(|(i, s)| format!("{}. {s}", i + 1))
        .collect::<Vec<_>>()
        .join("\n")
        .chars()
        .take(crate::banks::learn::prompts::MAX_SUMMARY_CHARS)
        .collect();
    let last = t.messages.iter().rev().find(|m| m["role"] == "assistant").and_then(|m| m["content"].as_str()).unwrap_or("");
    pb::Trajectory {
        query: cut(&format!("Edit the memory so that this question can be answered from it: {}", t.job.question), 4_000),
        output: cut(last, 2000),
        reward: normalise(t.reward().unwrap_or(-1.0)),
        groundtruth: gold.map(crate::text::charset::strip),
        summary: Some(summary),
    }
}

/// The group of one question: its scored rollouts, in sample order.
pub fn group_of(ts: &[Trajectory], q: &Question) -> pb::TrajectoryGroup {
    let mut mine: Vec<&Trajectory> = ts.iter().filter(|t| t.job.question_id == q.id && t.status == Status::Scored).collect();
    mine.sort_by_key(|t| t.job.sample);
    pb::TrajectoryGroup { trajectories: mine.into_iter().map(|t| trajectory_of(t, q.answer.as_deref())).collect() }
}

/// `learn.json`: what a resumed run must share with the run it resumes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// [`SCHEMA`].
    pub schema: String,
    /// The bank.
    pub bank: String,
    /// Epochs.
    pub epochs: u32,
    /// Rollouts per train question.
    pub group: u32,
    /// Rollouts per test question per arm.
    pub ab_group: u32,
    /// Groups per LearnFromGroup call.
    pub learn_batch: usize,
    /// Operations per group.
    pub max_operations: u32,
    /// Seed.
    pub seed: u64,
    /// Train question ids.
    pub train: Vec<String>,
    /// Test question ids.
    pub test: Vec<String>,
}

/// One learning step (a line of `learned.jsonl`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// Epoch.
    pub epoch: u32,
    /// Step within the epoch.
    pub step: usize,
    /// The questions whose groups it read (a question with no scored rollout has none).
    pub questions: Vec<String>,
    /// Each group's normalised rewards.
    pub rewards: Vec<Vec<f64>>,
    /// Why each group gave no operation (empty when it gave some).
    pub skipped: Vec<String>,
    /// Each group's operations (JSON arrays).
    pub group_operations: Vec<String>,
    /// The consolidated plan applied.
    pub plan: String,
    /// Set when the consolidation failed and the groups' operations were applied as they were.
    pub fallback: String,
    /// Whether anything was written.
    pub applied: bool,
    /// The bank's version before and after.
    pub version_before: u64,
    /// See `version_before`.
    pub version_after: u64,
    /// Seconds the call took.
    pub seconds: f64,
}

/// One epoch's outcome, for the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Epoch {
    /// Epoch.
    pub epoch: u32,
    /// Its rollouts' report.
    pub rollouts: Report,
    /// Its learning steps.
    pub steps: Vec<Step>,
    /// Experiences after it.
    pub library_size: usize,
    /// The library's prompt text after it.
    pub library: String,
    /// Its rollouts' time, summed over the rollouts recorded (resumed invocations included), seconds.
    pub rollout_seconds: f64,
}

/// What `memgym learn` writes to `summary.json` and prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The settings.
    pub settings: Settings,
    /// The policy's model and sampling, as each run's run.json records them.
    pub policy: String,
    /// The epochs.
    pub epochs: Vec<Epoch>,
    /// The A/B (absent with `--test-limit 0`).
    pub ab: Option<ab::Ab>,
    /// Wall time of this invocation, seconds (a resumed run counts only its own part).
    pub seconds: f64,
}

impl Summary {
    /// (rollouts, learning) seconds over everything recorded: every epoch's and arm's rollouts, every
    /// learning step, whichever invocation played them.
    pub fn compute_seconds(&self) -> (f64, f64) {
        let arms = self.ab.as_ref().map_or(0.0, |ab| ab.arms.iter().map(|a| a.rollout_seconds).sum());
        let rollouts = self.epochs.iter().map(|e| e.rollout_seconds).sum::<f64>() + arms;
        (rollouts, self.epochs.iter().flat_map(|e| e.steps.iter().map(|s| s.seconds)).sum())
    }
}

/// The questions, the settings and the base plan's inputs, checked before any work.
pub fn questions(a: &LearnArgs, ds: &Dataset) -> anyhow::Result<(Vec<Question>, Vec<Question>)> {
    if a.epochs == 0 {
        bail!("--epochs must be at least 1");
    }
    if a.group < 2 {
        bail!("--group must be at least 2 (LearnFromGroup learns from the differences within a group)");
    }
    if a.ab_group == 0 || a.learn_batch == 0 || !(1..=32).contains(&a.max_operations) {
        bail!("--ab-group and --learn-batch must be positive, --max-operations 1 to 32");
    }
    if a.train_limit == 0 {
        bail!("--train-limit must be positive");
    }
    crate::banks::check_name("--bank", &a.bank).map_err(|e| anyhow::anyhow!("{e}"))?;
    let train = crate::harness::rollout::pick_questions(&[], "train", Some(a.train_limit), a.include_adversarial, ds)?;
    let test = if a.test_limit == 0 {
        Vec::new()
    } else {
        crate::harness::rollout::pick_questions(&[], "test", Some(a.test_limit), a.include_adversarial, ds)?
    };
    Ok((train, test))
}

/// Runs (or resumes) the loop and the A/B; writes `summary.json` and `report.md` in `--out`.
pub async fn run(a: &LearnArgs, train: &[Question], test: &[Question]) -> anyhow::Result<Summary> {
    let started = Instant::now();
    let out = &a.out;
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let settings = Settings {
        schema: SCHEMA.to_string(),
        bank: a.bank.clone(),
        epochs: a.epochs,
        group: a.group,
        ab_group: a.ab_group,
        learn_batch: a.learn_batch,
        max_operations: a.max_operations,
        seed: a.seed,
        train: train.iter().map(|q| q.id.clone()).collect(),
        test: test.iter().map(|q| q.id.clone()).collect(),
    };
    crate::harness::rollout::check_recorded(&out.join("learn.json"), &settings, &epoch_dir(out, 0).join("trajectories.jsonl"))?;
    let env = Env::connect(&a.addr).await.map_err(anyhow::Error::msg)?;
    let mut banks = banks_client(&a.addr).await?;
    let mut learner = LearnClient::new(channel(&a.addr).await?).max_decoding_message_size(crate::api::MAX_MESSAGE_BYTES);
    banks
        .create_bank(pb::CreateBankRequest { name: a.bank.clone(), if_not_exists: true, ..Default::default() })
        .await
        .map_err(|s| anyhow::anyhow!("--bank {}: {}", crate::util::excerpt::quoted(&a.bank), s.message()))?;
    let environment = format!("grpc {}", a.addr);
    let mut epochs = Vec::new();
    for e in 0..a.epochs {
        let dir = epoch_dir(out, e);
        std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let before = dir.join("library-before.txt");
        let text = match std::fs::read_to_string(&before) {
            Ok(t) => t,
            Err(_) => {
                let (_, _, text) = library(&mut banks, &a.bank).await.with_context(|| format!("--bank {}", a.bank))?;
                crate::dataset::atomic_write(&before, text.as_bytes())?;
                text
            }
        };
        let mut plan = plan_for(&a.policy, a.group, a.seed + u64::from(e), &a.evaluator, environment.clone(), train)?;
        with_library(&mut plan, &format!("bank {} before epoch {e}", a.bank), &text);
        eprintln!("epoch {e}: {} train questions × {} rollouts", train.len(), a.group);
        let (rollouts, ts) = play_scored(&plan, train, &env, &dir, a.policy.concurrency).await?;
        let steps = learn_epoch(a, e, &ts, train, &dir, &mut banks, &mut learner).await?;
        // Written once, when the epoch's last step is done (a resumed run reads it: the bank has moved on).
        let after = dir.join("library.txt");
        let text = match std::fs::read_to_string(&after) {
            Ok(text) => text,
            Err(_) => {
                let (_, _, text) = library(&mut banks, &a.bank).await?;
                let export = banks
                    .export_bank(pb::ExportBankRequest { bank: a.bank.clone(), format: pb::BankFormat::MemgymJson as i32 })
                    .await
                    .map_err(|s| anyhow::anyhow!("ExportBank: {}", s.message()))?
                    .into_inner();
                crate::dataset::atomic_write(&dir.join("library.json"), export.data.as_bytes())?;
                crate::dataset::atomic_write(&after, text.as_bytes())?;
                text
            }
        };
        let rollout_seconds = ts.iter().map(|t| t.timings.total_ms / 1e3).sum();
        epochs.push(Epoch { epoch: e, rollouts, steps, library_size: experiences_in(&text), library: text, rollout_seconds });
    }
    let ab = if test.is_empty() { None } else { Some(run_ab(a, test, &env, &environment).await?) };
    let policy = format!(
        "{} · {} · tool choice {} · T {} · top-p {} · {} tokens · {} turns",
        a.policy.policy_model,
        a.policy.tool_format,
        a.policy.tool_choice.name(),
        a.policy.temperature,
        a.policy.top_p,
        a.policy.max_tokens,
        a.policy.max_turns
    );
    let summary = Summary { settings, policy, epochs, ab, seconds: started.elapsed().as_secs_f64() };
    crate::dataset::atomic_write(&out.join("summary.json"), serde_json::to_string_pretty(&summary)?.as_bytes())?;
    crate::dataset::atomic_write(&out.join("report.md"), ab::learn_markdown(&summary).as_bytes())?;
    Ok(summary)
}

/// Passes over a run's rollouts before [`play_scored`] gives up on one that keeps failing.
pub const PASSES: usize = 3;

/// Plays the run until every rollout is scored, at most [`PASSES`] passes (a failed rollout — an endpoint
/// that gave up, an episode reaped while a slow policy thought — is played again on a fresh episode, as a
/// rerun would), then writes its report; returns it with the run's trajectories. Learning and the A/B wait for every rollout: a group learned from
/// with a sample missing would not be the group the report shows.
async fn play_scored(
    plan: &Plan,
    questions: &[Question],
    env: &Env,
    dir: &Path,
    concurrency: usize,
) -> anyhow::Result<(Report, Vec<Trajectory>)> {
    let mut pass = 1;
    loop {
        play_all(plan, questions, env, dir, concurrency).await?;
        let (report, ts) = finish_run(plan, questions, env, dir).await?;
        if report.failed == 0 {
            return Ok((report, ts));
        }
        if pass == PASSES {
            bail!(
                "{} of {} rollouts in {} still fail after {PASSES} passes (first: {}); rerun the same command to retry them",
                report.failed,
                report.rollouts,
                dir.display(),
                report.failures.first().map_or("", String::as_str)
            );
        }
        pass += 1;
        eprintln!("{} rollouts failed; playing them again (pass {pass} of {PASSES})", report.failed);
    }
}

/// `--out/epoch-N`.
pub fn epoch_dir(out: &Path, e: u32) -> PathBuf {
    out.join(format!("epoch-{e}"))
}

/// The learning steps of an epoch not yet in `learned.jsonl`, each at the version the last one left.
async fn learn_epoch(
    a: &LearnArgs,
    e: u32,
    ts: &[Trajectory],
    train: &[Question],
    dir: &Path,
    banks: &mut BanksClient<Channel>,
    learner: &mut LearnClient<Channel>,
) -> anyhow::Result<Vec<Step>> {
    let path = dir.join("learned.jsonl");
    let mut steps: Vec<Step> = match std::fs::read_to_string(&path) {
        Ok(text) => text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(serde_json::from_str)
            .collect::<Result<_, _>>()
            .with_context(|| format!("{}", path.display()))?,
        Err(_) => Vec::new(),
    };
    for (k, batch) in train.chunks(a.learn_batch).enumerate() {
        if steps.iter().any(|s| s.step == k) {
            continue;
        }
        let version_before = match steps.last() {
            Some(s) => s.version_after,
            None => {
                banks
                    .get_bank(pb::GetBankRequest { name: a.bank.clone() })
                    .await
                    .map_err(|s| anyhow::anyhow!("{}", s.message()))?
                    .into_inner()
                    .version
            }
        };
        // A question whose rollouts all failed has no group (LearnFromGroup refuses an empty one).
        let (asked, groups): (Vec<&Question>, Vec<pb::TrajectoryGroup>) =
            batch.iter().map(|q| (q, group_of(ts, q))).filter(|(_, g)| !g.trajectories.is_empty()).unzip();
        let clock = Instant::now();
        if groups.is_empty() {
            let step = Step {
                epoch: e,
                step: k,
                questions: Vec::new(),
                rewards: Vec::new(),
                skipped: Vec::new(),
                group_operations: Vec::new(),
                plan: "[]".into(),
                fallback: "no scored rollout in this step's groups: nothing to learn from".into(),
                applied: false,
                version_before,
                version_after: version_before,
                seconds: 0.0,
            };
            append_line(&path, &step)?;
            steps.push(step);
            continue;
        }
        let r = learner
            .learn_from_group(pb::LearnFromGroupRequest {
                bank: a.bank.clone(),
                groups: groups.clone(),
                max_operations: Some(a.max_operations),
                use_groundtruth: Some(true),
                variation: pb::VariationRule::Spread as i32,
                mode: pb::LearnMode::ThreeStage as i32,
                dry_run: false,
                expected_version: Some(version_before),
            })
            .await;
        let r = match r {
            Ok(r) => r.into_inner(),
            Err(s) if s.code() == tonic::Code::Aborted => bail!(
                "epoch {e} step {k}: bank {} is no longer at version {version_before}, where the run left it ({}); \
                 was it written by someone else, or did a step apply without being recorded? Restore it from {} and rerun",
                a.bank,
                s.message(),
                dir.join("library-before.txt").display()
            ),
            Err(s) => bail!("epoch {e} step {k}: LearnFromGroup: {}: {}", s.code(), s.message()),
        };
        let step = Step {
            epoch: e,
            step: k,
            questions: asked.iter().map(|q| q.id.clone()).collect(),
            rewards: groups.iter().map(|g| g.trajectories.iter().map(|t| t.reward).collect()).collect(),
            skipped: r.groups.iter().map(|g| g.skipped.clone()).collect(),
            group_operations: r.groups.iter().map(|g| g.operations_json.clone()).collect(),
            plan: r.plan_json.clone(),
            fallback: r.fallback.clone(),
            applied: r.applied,
            version_before,
            version_after: r.version,
            seconds: clock.elapsed().as_secs_f64(),
        };
        append_line(&path, &step)?;
        eprintln!(
            "epoch {e} step {}/{}: {} groups, plan of {} operations{}, {:.0} s",
            k + 1,
            train.len().div_ceil(a.learn_batch),
            batch.len(),
            serde_json::from_str::<Vec<serde_json::Value>>(&r.plan_json).map_or(0, |p| p.len()),
            if r.applied { " applied" } else { "" },
            step.seconds
        );
        steps.push(step);
    }
    steps.sort_by_key(|s| s.step);
    Ok(steps)
}

fn append_line(path: &Path, v: &impl Serialize) -> anyhow::Result<()> {
    use std::io::Write;
    let mut f =
        std::fs::OpenOptions::new().create(true).append(true).open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut line = serde_json::to_string(v)?;
    line.push('\n');
    f.write_all(line.as_bytes())?;
    f.sync_all().with_context(|| format!("cannot sync {}", path.display()))
}

/// The A/B's arms: no library, the first epoch's (with two epochs or more) and the final one.
async fn run_ab(a: &LearnArgs, test: &[Question], env: &Env, environment: &str) -> anyhow::Result<ab::Ab> {
    let last = a.epochs - 1;
    let mut arms: Vec<(String, Option<u32>)> = vec![("none".into(), None)];
    if a.epochs >= 2 {
        arms.push(("epoch-0".into(), Some(0)));
    }
    arms.push(("final".into(), Some(last)));
    let mut played: Vec<Arm> = Vec::new();
    let mut texts: Vec<String> = Vec::new();
    for (name, epoch) in arms {
        let text = match epoch {
            None => String::new(),
            Some(e) => {
                let p = epoch_dir(&a.out, e).join("library.txt");
                std::fs::read_to_string(&p).with_context(|| format!("cannot read {}", p.display()))?
            }
        };
        // The same library is the same prompt, and the arms share their seeds: playing it again would
        // repeat the earlier arm's requests. Its rollouts stand for this arm's (the report says so).
        if let Some(i) = texts.iter().position(|t| *t == text) {
            let earlier = &played[i];
            eprintln!("A/B arm {name}: the same library as {}, not played again", earlier.name);
            let arm = Arm {
                name,
                experiences: earlier.experiences,
                library_fnv: earlier.library_fnv.clone(),
                same_as: Some(earlier.name.clone()),
                report: earlier.report.clone(),
                trajectories: earlier.trajectories.clone(),
            };
            played.push(arm);
            texts.push(text);
            continue;
        }
        let dir = a.out.join("ab").join(&name);
        let mut plan = plan_for(&a.policy, a.ab_group, a.seed, &a.evaluator, environment.to_string(), test)?;
        with_library(&mut plan, &format!("A/B arm {name}"), &text);
        eprintln!("A/B arm {name}: {} test questions × {} rollouts", test.len(), a.ab_group);
        let (report, ts) = play_scored(&plan, test, env, &dir, a.policy.concurrency).await?;
        played.push(Arm {
            name,
            experiences: experiences_in(&text),
            library_fnv: format!("{:016x}", fnv1a(text.as_bytes())),
            same_as: None,
            report,
            trajectories: ts,
        });
        texts.push(text);
    }
    Ok(ab::compare(&played))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewards_map_linearly_into_the_unit_interval() {
        assert_eq!(normalise(-1.0), 0.0);
        assert_eq!(normalise(0.0), 0.5);
        assert_eq!(normalise(1.0), 1.0);
        assert_eq!(normalise(0.5), 0.75);
        assert_eq!(normalise(-1.7), 0.0, "growth below −1 clamps");
        assert_eq!(normalise(1.4), 1.0);
        assert_eq!(normalise(f64::NAN), 0.0);
    }

    #[test]
    fn a_cut_keeps_one_line_and_marks_the_cut() {
        assert_eq!(cut("a\nb", 10), "a b");
        assert_eq!(cut("ééééé", 3), "ééé…");
    }
}
