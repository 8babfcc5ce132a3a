//! `memgym rollout`: a real LLM plays memgym's episodes, so a user measures what a policy earns, whether
//! it can drive the six tools in the format a trainer gives it, and whether a GRPO group of its rollouts
//! carries any signal — before paying for GPU hours. `memgym replay` ([`replay`]) re-runs the stored
//! trajectories without the policy.
//!
//! The policy sees what the trainer shows it: the verl dataset's opening messages (one rule,
//! [`crate::dataset::verl::prompt_messages`]) and `ListTools`' schemas, in one of two formats
//! ([`prompt`]), with the `tool_choice` `--tool-choice` names ([`policy::ToolChoice`]; under `required` a
//! rollout never stops early). Episodes run in-process (the gRPC handlers without the transport) or on a server
//! (`--addr`) ([`env`]). Questions are chosen as `memgym eval` chooses them. Each question gets `--group`
//! rollouts on episodes with the same seed, each with its own sampling seed. Trajectories are appended to
//! `trajectories.jsonl` as they finish, so an interrupted run resumes: the same command skips every
//! scored rollout and retries failed ones (`run.json` holds the settings; a rerun with others is refused).
//! Then `rollouts.parquet`, `report.json` and `report.md` ([`report`]) are written from the whole file.

pub mod conformance;
pub mod env;
pub mod fork;
pub mod guessed_ids;
pub mod library;
pub mod parse;
pub mod play;
pub mod policy;
pub mod prompt;
pub mod record;
pub mod replay;
pub mod report;

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::app::cli::{PolicyArgs, RolloutArgs};
use crate::dataset::{Dataset, Question, Split};
use crate::reward::Evaluator;
use crate::util::fnv::fnv1a;
use env::{Env, ToolAnswer};
use play::{Job, Table};
use policy::{Policy, PolicyConfig, ToolChoice};
use prompt::ToolFormat;
use record::{Status, Trajectory};
use report::{Baseline, RunInfo};

/// The settings a resumed run must share with the run it resumes (`run.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSettings {
    /// [`record::SCHEMA`].
    pub schema: String,
    /// The policy's model.
    pub model: String,
    /// The policy's base URL (recorded; a resumed run may reach the same model at another address).
    pub base_url: String,
    /// Tool format.
    pub tool_format: ToolFormat,
    /// The request's `tool_choice` (absent from run.json files written before it: `auto`, what every
    /// request sent then).
    #[serde(default)]
    pub tool_choice: ToolChoice,
    /// Replies per rollout.
    pub max_turns: u32,
    /// Tokens per reply.
    pub max_tokens: u32,
    /// Temperature.
    pub temperature: f32,
    /// Nucleus sampling.
    pub top_p: f32,
    /// Seed.
    pub seed: u64,
    /// Group size.
    pub group: u32,
    /// Evaluator asked of every episode.
    pub evaluator: String,
    /// The system message: `default` or `--system-prompt-file`'s path, with the FNV-1a hash of its text (a
    /// run resumed after the default prompt changed is refused).
    pub system_prompt: String,
    /// Where episodes run and what scores them: `grpc ADDR`, or in-process with the embedder, the gold
    /// mode, the reward formula, the context and the step budget.
    pub environment: String,
    /// The question ids, in order.
    pub questions: Vec<String>,
}

/// A validated `memgym rollout` command.
pub struct Plan {
    /// The policy client.
    pub policy: Policy,
    /// The settings (`run.json`; the tool format among them).
    pub settings: RunSettings,
    /// Evaluator.
    pub evaluator: Evaluator,
    /// The system message.
    pub system: String,
    /// `--fork-at`/`--fork-group`: a forked group of each question too.
    pub fork: Option<fork::Fork>,
}

/// `--report-only`: the run as `run.json` recorded it (its settings, evaluator and questions) in place of
/// what the command's flags say now, since a report describes the rollouts that were played. A run begun
/// under an older built-in prompt is reported as it was, not refused. Without a `run.json` the flags' plan
/// stands (and [`finish`] says there is nothing to report).
pub fn recorded(plan: Plan, questions: Vec<Question>, out: &Path, ds: &Dataset) -> anyhow::Result<(Plan, Vec<Question>)> {
    let path = out.join("run.json");
    if !path.exists() {
        return Ok((plan, questions));
    }
    let text = std::fs::read_to_string(&path).with_context(|| format!("--report-only: cannot read {}", path.display()))?;
    let settings: RunSettings = serde_json::from_str(&text).with_context(|| format!("{} is not a run's settings", path.display()))?;
    let evaluator =
        Evaluator::parse(&settings.evaluator).map_err(anyhow::Error::msg).with_context(|| format!("{}: evaluator", path.display()))?;
    let mut questions = Vec::with_capacity(settings.questions.len());
    for id in &settings.questions {
        let q = ds.questions.iter().find(|q| &q.id == id);
        questions.push(
            q.cloned()
                .with_context(|| format!("{}: question {} is not in the dataset", path.display(), crate::util::excerpt::quoted(id)))?,
        );
    }
    Ok((Plan { settings, evaluator, ..plan }, questions))
}

/// Checks every flag before any work (the policy's settings, the format, the group, the questions).
pub fn plan(a: &RolloutArgs, ds: &Dataset) -> anyhow::Result<(Plan, Vec<Question>)> {
    let questions = pick_questions(&a.questions, &a.split, a.limit, a.include_adversarial, ds)?;
    let environment = match &a.addr {
        Some(addr) => format!("grpc {addr}"),
        None => format!(
            "in-process · embedder {} · gold {} · reward {} · context {} · max steps {}{}",
            a.env.embed.embedder,
            a.env.gold,
            a.env.reward_formula,
            a.env.context,
            a.env.default_max_steps,
            if a.env.llm.llm_edit { " · llm-edit" } else { "" }
        ),
    };
    let mut plan = plan_for(&a.policy, a.group, a.seed, &a.env.llm.evaluator, environment, &questions)?;
    if let Some(at) = a.fork_at {
        let group = a.fork_group.unwrap_or(a.group);
        if at == 0 || at >= a.policy.max_turns {
            bail!("--fork-at must be at least 1 and below --max-turns ({})", a.policy.max_turns);
        }
        if !(2..=crate::episode::MAX_FORKS).contains(&(group as usize)) {
            bail!("--fork-group must be 2 to {}", crate::episode::MAX_FORKS);
        }
        plan.fork = Some(fork::Fork { at, group });
    }
    Ok((plan, questions))
}

/// The plan of a policy on `questions` (`rollout`, and each of `learn`'s runs): the policy's client, its
/// system message (built in or `--system-prompt-file`) and the settings `run.json` records.
pub fn plan_for(
    p: &PolicyArgs,
    group: u32,
    seed: u64,
    evaluator: &str,
    environment: String,
    questions: &[Question],
) -> anyhow::Result<Plan> {
    let format: ToolFormat = p.tool_format.parse().map_err(anyhow::Error::msg).context("--tool-format")?;
    let evaluator = Evaluator::parse(evaluator).map_err(anyhow::Error::msg).context("--evaluator")?;
    if p.tool_choice == ToolChoice::Required && format == ToolFormat::Hermes {
        bail!(
            "--tool-choice required needs --tool-format openai: --tool-format hermes sends no tools parameter, so there is no tool_choice to send"
        );
    }
    if group == 0 {
        bail!("--group must be at least 1");
    }
    if p.max_turns == 0 {
        bail!("--max-turns must be at least 1");
    }
    if p.concurrency == 0 {
        bail!("--concurrency must be at least 1");
    }
    let policy = Policy::new(PolicyConfig {
        base_url: p.policy_base_url.clone(),
        model: p.policy_model.clone(),
        api_key: crate::app::config::api_key(p.policy_api_key_file.as_deref())?,
        timeout: Duration::from_millis(p.policy_timeout_ms),
        max_retries: p.policy_max_retries,
        temperature: p.temperature,
        top_p: p.top_p,
        max_tokens: p.max_tokens,
        tool_choice: p.tool_choice,
    })
    .map_err(anyhow::Error::msg)?;
    let (system, source) = match &p.system_prompt_file {
        Some(path) => (crate::dataset::verl::read_system_prompt(path).map_err(anyhow::Error::msg)?, format!("file {}", path.display())),
        None => (crate::dataset::verl::SYSTEM_PROMPT.to_string(), "default".to_string()),
    };
    let system_id = format!("{source} (fnv1a {:016x})", fnv1a(system.as_bytes()));
    let settings = RunSettings {
        schema: record::SCHEMA.to_string(),
        model: p.policy_model.clone(),
        base_url: policy.config().base_url.clone(),
        tool_format: format,
        tool_choice: p.tool_choice,
        max_turns: p.max_turns,
        max_tokens: p.max_tokens,
        temperature: p.temperature,
        top_p: p.top_p,
        seed,
        group,
        evaluator: evaluator.name().to_string(),
        system_prompt: system_id,
        environment,
        questions: questions.iter().map(|q| q.id.clone()).collect(),
    };
    Ok(Plan { policy, settings, evaluator, system, fork: None })
}

/// Puts an experience library (FormatForPrompt's text) into the plan's system message as the semantic-memory design
/// injects it ([`crate::banks::experience::inject`]: nothing when the text is empty), and records `label`
/// and the text's hash in the run's `system_prompt`, so a run resumed under another library is refused.
pub fn with_library(plan: &mut Plan, label: &str, text: &str) {
    plan.system = crate::banks::experience::inject(&plan.system, text);
    plan.settings.system_prompt = format!("{} + {label} (fnv1a {:016x})", plan.settings.system_prompt, fnv1a(text.as_bytes()));
}

/// `--experience-bank`: reads the bank's library from the server at `addr` (FormatForPrompt, every
/// experience, read-only) and puts it into the plan's system message ([`with_library`]), recording the
/// bank, its version and its size.
pub async fn with_experiences(plan: &mut Plan, addr: &str, bank: &str) -> anyhow::Result<()> {
    crate::banks::check_name("--experience-bank", bank).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut client = library::banks_client(addr).await?;
    let (version, size, text) =
        library::library(&mut client, bank).await.with_context(|| format!("--experience-bank {}", crate::util::excerpt::quoted(bank)))?;
    with_library(plan, &format!("bank {bank} version {version} ({size} experiences)"), &text);
    Ok(())
}

/// `--questions`, or `--split`/`--limit` as `memgym eval` picks them.
pub fn pick_questions(
    ids: &[String],
    split: &str,
    limit: Option<usize>,
    include_adversarial: bool,
    ds: &Dataset,
) -> anyhow::Result<Vec<Question>> {
    if !ids.is_empty() {
        let mut out = Vec::new();
        for id in ids {
            let id = id.trim();
            let q = ds
                .questions
                .iter()
                .find(|q| q.id == id)
                .with_context(|| format!("--questions: no question {}", crate::util::excerpt::quoted(id)))?;
            if q.category == crate::dataset::ADVERSARIAL_CATEGORY && !include_adversarial {
                bail!("--questions: {id} is category 5 (adversarial): add --include-adversarial");
            }
            if !out.iter().any(|o: &Question| o.id == q.id) {
                out.push(q.clone());
            }
        }
        return Ok(out);
    }
    let named = split;
    let split = match split.trim() {
        "all" => None,
        s => Some(s.parse::<Split>().map_err(|e| anyhow::anyhow!("--split: {e} (or \"all\")"))?),
    };
    if limit == Some(0) {
        bail!("--limit must be positive");
    }
    let o = crate::harness::eval::agents::Options { split, limit, include_adversarial, ..Default::default() };
    let qs: Vec<Question> = crate::harness::eval::agents::select_questions(ds, &o).into_iter().cloned().collect();
    if qs.is_empty() {
        bail!("no questions match --split {named} (is the dataset's gold mode excluding them all?)");
    }
    Ok(qs)
}

/// The episode seed of a question: the same for every sample of its group.
pub fn episode_seed(seed: u64, question_id: &str) -> u64 {
    fnv1a(format!("episode:{seed}:{question_id}").as_bytes())
}

/// The first turn's sampling seed of a sample, below 2³¹ (what every server accepts).
pub fn sampling_seed(seed: u64, question_id: &str, sample: u32) -> u64 {
    fnv1a(format!("sample:{seed}:{question_id}:{sample}").as_bytes()) % (1 << 31)
}

/// The request `seed` of turn `k`: the sample's seed plus k, kept below 2³¹.
pub fn turn_seed(sampling_seed: u64, k: u32) -> u64 {
    (sampling_seed + u64::from(k)) % (1 << 31)
}

/// A fresh episode id: the question, the sample and a per-process nonce (ids are never reused).
pub fn fresh_episode_id(prefix: &str, question_id: &str, sample: u32) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros()).unwrap_or(0);
    format!("{prefix}-{question_id}-{sample}-{t:x}-{n}")
}

/// Runs the plan on `env`: the rollouts not yet scored in `out`, then the scripted agents, the parquet
/// file and the report. Returns the report.
pub async fn run(plan: &Plan, questions: &[Question], env: &Env, out: &Path, concurrency: usize) -> anyhow::Result<report::Report> {
    play_all(plan, questions, env, out, concurrency).await?;
    finish(plan, questions, env, out).await
}

/// The rollouts not yet scored in `out`, `concurrency` at a time, each appended to `trajectories.jsonl` as
/// it finishes; returns how many were played.
pub async fn play_all(plan: &Plan, questions: &[Question], env: &Env, out: &Path, concurrency: usize) -> anyhow::Result<usize> {
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    check_settings(out, &plan.settings)?;
    let traj_path = out.join("trajectories.jsonl");
    let done: HashSet<String> = if traj_path.exists() {
        record::read(&traj_path)?.into_iter().filter(|t| t.status == Status::Scored).map(|t| t.key).collect()
    } else {
        HashSet::new()
    };
    let tools = env.tools().await.map_err(|s| anyhow::anyhow!("ListTools: {}: {}", s.code(), s.message()))?;
    let group = plan.settings.group;
    let mut jobs: Vec<Job> = Vec::new();
    for q in questions {
        for sample in 0..group {
            if done.contains(&record::key(&q.id, sample)) {
                continue;
            }
            jobs.push(Job::of(
                q,
                sample,
                group,
                episode_seed(plan.settings.seed, &q.id),
                sampling_seed(plan.settings.seed, &q.id, sample),
                "rollout",
            ));
        }
    }
    let total = questions.len() * group as usize;
    let skipped = total - jobs.len();
    if skipped > 0 {
        eprintln!("resuming: {skipped} of {total} rollouts already scored in {}", traj_path.display());
    }
    let table = Table {
        env,
        policy: &plan.policy,
        format: plan.settings.tool_format,
        tools: &tools,
        system: &plan.system,
        max_turns: plan.settings.max_turns,
        evaluator: crate::api::grpc::convert::evaluator_out(plan.evaluator),
    };
    let mut writer = record::Writer::append(&traj_path)?;
    let mut progress = Progress::new("rollouts", total as u64, skipped as u64);
    {
        use futures_util::stream::StreamExt;
        let table = &table;
        let mut stream = futures_util::stream::iter(jobs.iter()).map(|job| play::play(table, job)).buffer_unordered(concurrency.max(1));
        while let Some(t) = stream.next().await {
            writer.write(&t)?;
            progress.step(&t);
        }
    }
    writer.sync()?;
    progress.finish();
    let mut played = jobs.len();
    if let Some(f) = plan.fork {
        played += fork::play_all(plan, f, questions, &table, out, concurrency).await?;
    }
    Ok(played)
}

/// The scripted agents, the parquet file and the report, from the whole trajectories file.
pub async fn finish(plan: &Plan, questions: &[Question], env: &Env, out: &Path) -> anyhow::Result<report::Report> {
    finish_run(plan, questions, env, out).await.map(|(r, _)| r)
}

/// [`finish`], returning the run's trajectories too (the plan's questions × group, read once).
pub async fn finish_run(plan: &Plan, questions: &[Question], env: &Env, out: &Path) -> anyhow::Result<(report::Report, Vec<Trajectory>)> {
    if !out.join("trajectories.jsonl").exists() {
        bail!("{} holds no trajectories.jsonl: nothing to report", out.display());
    }
    check_settings(out, &plan.settings)?;
    let keys: HashSet<String> = questions.iter().flat_map(|q| (0..plan.settings.group).map(|s| record::key(&q.id, s))).collect();
    let ts: Vec<Trajectory> = record::read(&out.join("trajectories.jsonl"))?.into_iter().filter(|t| keys.contains(&t.key)).collect();
    // The scripted agents never block the report: without them its no-op and oracle columns are empty.
    let baselines = match scripted(plan, questions, env, out).await {
        Ok(b) => b,
        Err(e) => {
            eprintln!("warning: the scripted no-op and oracle were not scored ({e:#}); the report has no baselines");
            Vec::new()
        }
    };
    record::write_parquet(&out.join("rollouts.parquet"), &ts)?;
    let info = RunInfo {
        model: plan.settings.model.clone(),
        tool_format: plan.settings.tool_format.name().to_string(),
        tool_choice: plan.settings.tool_choice,
        env: env.describe().to_string(),
        questions: questions.len(),
        group: plan.settings.group,
        max_turns: plan.settings.max_turns,
        temperature: plan.settings.temperature,
        top_p: plan.settings.top_p,
        max_tokens: plan.settings.max_tokens,
        seed: plan.settings.seed,
        system_prompt: plan.settings.system_prompt.clone(),
        evaluator: plan.settings.evaluator.clone(),
        environment: plan.settings.environment.clone(),
    };
    // The tools as the environment lists them now (the run's, unless its limits changed since), else the
    // built-in schemas with the default limits.
    let schemas = match env.tools().await {
        Ok(tools) => tools,
        Err(s) => {
            eprintln!("warning: ListTools failed ({}); tool calls are judged against the default schemas", s.message());
            crate::tools::llm_calls::tool_schemas(&crate::tools::ToolLimits::default())
        }
    };
    let mut r = report::build(info, &ts, &baselines, &schemas);
    let forks = out.join(fork::FILE);
    if forks.exists() {
        let keys: HashSet<&str> = questions.iter().map(|q| q.id.as_str()).collect();
        let forked: Vec<Trajectory> = record::read(&forks)?.into_iter().filter(|t| keys.contains(t.job.question_id.as_str())).collect();
        r.forks = fork::compare(&ts, &forked);
    }
    crate::dataset::atomic_write(&out.join("report.json"), serde_json::to_string_pretty(&r)?.as_bytes())?;
    crate::dataset::atomic_write(&out.join("report.md"), report::markdown(&r).as_bytes())?;
    Ok((r, ts))
}

/// The scripted no-op and oracle on the same questions, on episodes with the same seeds, kept in
/// `baselines.jsonl` (a rerun and `--report-only` score only the questions not in it).
async fn scripted(plan: &Plan, questions: &[Question], env: &Env, out: &Path) -> anyhow::Result<Vec<Baseline>> {
    let path = out.join("baselines.jsonl");
    let mut known: Vec<Baseline> = match std::fs::read_to_string(&path) {
        Ok(text) => text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect(),
        Err(_) => Vec::new(),
    };
    let evaluator = crate::api::grpc::convert::evaluator_out(plan.evaluator);
    let mut added = false;
    for q in questions {
        for agent in ["no-op", "oracle"] {
            if known.iter().any(|b| b.agent == agent && b.question_id == q.id) {
                continue;
            }
            let job = Job::of(q, 0, 1, episode_seed(plan.settings.seed, &q.id), 0, &format!("rollout-{agent}"));
            // The server's id (behind replicas, the replica's name in front of the one asked for).
            let id = env
                .create(play::create_request(&job, evaluator))
                .await
                .map_err(|s| anyhow::anyhow!("CreateEpisode for the {agent} on {}: {}", q.id, s.message()))?
                .episode_id;
            let scored = async {
                if agent == "oracle" {
                    if let Some(content) = crate::harness::eval::agents::oracle_memory(q) {
                        let args = serde_json::json!({"operation": "create", "content": content}).to_string();
                        if let ToolAnswer::Refused(why) = env.call(&id, "manage_memory", &args).await? {
                            tracing::warn!(question = %q.id, %why, "the oracle's memory was refused");
                        }
                    }
                }
                env.score(&id).await
            }
            .await;
            env.close(&id).await;
            let r = scored.map_err(|s| anyhow::anyhow!("scoring the {agent} on {}: {}", q.id, s.message()))?;
            known.push(Baseline { agent: agent.to_string(), question_id: q.id.clone(), category: q.category, reward: r.reward });
            added = true;
        }
    }
    if added {
        let mut text = String::new();
        for b in &known {
            text.push_str(&serde_json::to_string(b)?);
            text.push('\n');
        }
        crate::dataset::atomic_write(&path, text.as_bytes())?;
    }
    Ok(known)
}

/// `run.json`: written on the first run; a rerun must have the same settings, unless nothing was scored yet
/// (a first attempt with a wrong endpoint may be corrected).
fn check_settings(out: &Path, settings: &RunSettings) -> anyhow::Result<()> {
    check_recorded(&out.join("run.json"), settings, &out.join("trajectories.jsonl"))
}

/// A settings file `path` beside the trajectories it describes (`data`): written when missing; when it
/// differs, refused if `data` holds a scored rollout, else replaced. A setting added since the file was
/// written (absent from it, `#[serde(default)]` in `T`) reads as its default, so an older run resumes.
pub(crate) fn check_recorded<T: Serialize + serde::de::DeserializeOwned>(path: &Path, settings: &T, data: &Path) -> anyhow::Result<()> {
    let out = path.parent().unwrap_or(Path::new("."));
    // Through text, as the file is written (an f32 compared as written, not widened).
    let new: Value = serde_json::from_str(&serde_json::to_string(settings)?)?;
    if path.exists() {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        let old: Value = serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
        // Through the type when the file reads as one (its missing settings filled with their defaults),
        // and through text both ways, as `new`.
        let old = match serde_json::from_str::<T>(&text).map(|t| serde_json::to_string(&t)) {
            Ok(Ok(filled)) => serde_json::from_str(&filled)?,
            Ok(Err(_)) | Err(_) => old,
        };
        let (Some(o), Some(n)) = (old.as_object(), new.as_object()) else {
            bail!("{} is not a JSON object", path.display());
        };
        // The endpoint's address may move (another port, another machine); the model and the rest may not.
        let differ: Vec<&str> = n.keys().filter(|k| *k != "base_url" && o.get(*k) != n.get(*k)).map(String::as_str).collect();
        if !differ.is_empty() {
            let scored = data.exists() && record::read(data)?.iter().any(|t| t.status == Status::Scored);
            if scored {
                bail!(
                    "{} holds a run with other settings ({}); use another --out, or the same settings to resume",
                    out.display(),
                    differ.join(", ")
                );
            }
            eprintln!("{} held no scored rollout: its settings are replaced ({})", out.display(), differ.join(", "));
        } else if o == n {
            return Ok(());
        }
    }
    crate::dataset::atomic_write(path, serde_json::to_string_pretty(&new)?.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// The progress of a run: a bar with ETA and the running mean reward on a terminal, a plain line every
/// tenth (or minute) otherwise.
pub(crate) struct Progress {
    label: &'static str,
    bar: Option<indicatif::ProgressBar>,
    total: u64,
    done: u64,
    started: Instant,
    last_line: Instant,
    rewards: (f64, u64),
    failed: u64,
}

impl Progress {
    pub(crate) fn new(label: &'static str, total: u64, skipped: u64) -> Progress {
        let bar = std::io::IsTerminal::is_terminal(&std::io::stderr()).then(|| {
            let b = indicatif::ProgressBar::new(total);
            b.set_style(
                indicatif::ProgressStyle::with_template("{prefix} {bar:30} {pos}/{len} · ETA {eta} · {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            b.set_prefix(label);
            b.set_position(skipped);
            b.reset_eta(); // the skipped rollouts took no time now
            b
        });
        Progress { label, bar, total, done: skipped, started: Instant::now(), last_line: Instant::now(), rewards: (0.0, 0), failed: 0 }
    }

    pub(crate) fn step(&mut self, t: &Trajectory) {
        self.done += 1;
        match t.reward() {
            Some(r) => {
                self.rewards.0 += r;
                self.rewards.1 += 1;
            }
            None => self.failed += 1,
        }
        let mean = if self.rewards.1 == 0 { 0.0 } else { self.rewards.0 / self.rewards.1 as f64 };
        let msg = format!("mean reward {mean:+.4} · failed {}", self.failed);
        match &self.bar {
            Some(b) => {
                b.set_position(self.done);
                b.set_message(msg);
            }
            None => {
                let tenth = self.total.div_ceil(10).max(1);
                if self.done.is_multiple_of(tenth) || self.done == self.total || self.last_line.elapsed() > Duration::from_secs(60) {
                    self.last_line = Instant::now();
                    eprintln!("{} {}/{} · {:.0} s · {msg}", self.label, self.done, self.total, self.started.elapsed().as_secs_f64());
                }
            }
        }
    }

    pub(crate) fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish();
        }
    }
}

#[cfg(test)]
mod tests;
