//! The stored trajectory: one JSON line per rollout in `trajectories.jsonl`, its versioned schema
//! ([`SCHEMA`]; the book's "Trajectories"), reading it back for resuming and `memgym replay`, and the
//! one-row-per-rollout `rollouts.parquet`.
//!
//! A line holds everything needed to check it without the policy: the question and episode ids, the
//! seeds, every message in the order it was sent or received (`messages`; turn *k* sent the first
//! `turns[k].sent` of them, with the run's sampling settings and `turns[k].seed`), each reply body as
//! received, every parsed call with its parse mode and the text its result showed the policy, the full
//! reward breakdown (`ScoreEpisode`'s fields), token counts and timings. A rerun appends; the last line
//! of a key wins.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use arrow_array::{ArrayRef, BooleanArray, Float64Array, RecordBatch, StringArray, UInt32Array, UInt64Array};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::parse::{Call, Mode};
use super::play::Job;
use super::prompt::ToolFormat;
use crate::api::pb;

/// The schema of a trajectory line; a reader refuses any other.
pub const SCHEMA: &str = "memgym.rollout/1";

/// How a rollout ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Played and scored.
    Scored,
    /// The policy's endpoint or the environment failed; not scored (never counted as a reward of 0).
    Failed,
}

/// Why the policy stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// A reply with no tool call.
    NoCall,
    /// `--max-turns` replies, the last with calls.
    MaxTurns,
    /// The endpoint refused the next turn because the conversation no longer fits the model's context
    /// (HTTP 400 naming the context): the episode is scored as it stands, as a trainer ends a trajectory
    /// at its length limit.
    Context,
}

impl Stop {
    /// The name in files (as serialized).
    pub fn name(self) -> &'static str {
        match self {
            Stop::NoCall => "no_call",
            Stop::MaxTurns => "max_turns",
            Stop::Context => "context",
        }
    }
}

/// What became of a parsed call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The environment carried it out.
    Done,
    /// The environment refused it (the policy saw `Error: …`).
    Refused,
    /// Not sent: an invalid call (the policy saw why).
    Unread,
}

/// One parsed call and what it gave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    /// The call as read.
    #[serde(flatten)]
    pub call: Call,
    /// What became of it.
    pub outcome: Outcome,
    /// The text the policy was shown.
    pub result: String,
    /// Environment time, milliseconds.
    pub env_ms: f64,
}

/// One turn: a request and its reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// Messages sent (a prefix of the trajectory's `messages`).
    pub sent: usize,
    /// The request's `seed`.
    pub seed: u64,
    /// The response body as received.
    pub reply: Value,
    /// `choices[0].finish_reason`.
    pub finish_reason: Option<String>,
    /// `usage.prompt_tokens`.
    pub prompt_tokens: Option<u64>,
    /// `usage.completion_tokens`.
    pub completion_tokens: Option<u64>,
    /// Request time, retries included, milliseconds.
    pub latency_ms: f64,
    /// The calls read from the reply.
    pub calls: Vec<CallRecord>,
    /// Calls past the per-reply cap, not read.
    pub dropped: usize,
}

impl Turn {
    /// Whether the reply was cut by `max_tokens` (`finish_reason` `length`): its last call, if any, did not fit,
    /// under any grammar.
    pub fn cut_by_max_tokens(&self) -> bool {
        self.finish_reason.as_deref() == Some("length")
    }
}

/// `ScoreEpisode`'s answer, every field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct Score {
    pub reward: f64,
    pub p_old: f64,
    pub p_new: f64,
    pub performance_delta: f64,
    pub size_factor: f64,
    pub density_factor: f64,
    pub change_factor: f64,
    pub memory_efficiency: f64,
    pub growth: f64,
    pub reward_formula: String,
    pub context: String,
    pub evaluator: String,
    pub embedder: String,
    pub llm_model: String,
    pub evidence_recall_old: f64,
    pub evidence_recall_new: f64,
    pub evidence_total: u32,
    pub initial_memory_count: u32,
    pub final_memory_count: u32,
    pub n_max: u32,
    pub top_k: u32,
    pub steps_used: u32,
    pub retrieved_old: Vec<String>,
    pub retrieved_new: Vec<String>,
    pub answer_old: String,
    pub answer_new: String,
    pub f1_old: Option<f64>,
    pub f1_new: Option<f64>,
    pub judge_old: Option<f64>,
    pub judge_new: Option<f64>,
    pub context_chars_old: u32,
    pub context_chars_new: u32,
    /// The whole-memory formulas' other questions (absent from recordings made before them, as the next four).
    #[serde(default)]
    pub others: Option<OtherQuestions>,
    #[serde(default)]
    pub others_term: f64,
    #[serde(default)]
    pub words_initial: u32,
    #[serde(default)]
    pub words_added: u32,
    #[serde(default)]
    pub words_removed: u32,
}

/// `ScoreEpisode`'s `others`: the other questions of the conversation, in aggregate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct OtherQuestions {
    pub count: u32,
    pub rescored: u32,
    pub improved: u32,
    pub damaged: u32,
    pub mean_delta: f64,
    pub gain: f64,
    pub damage: f64,
    pub llm_scored: u32,
    pub evaluator: String,
    #[serde(default)]
    pub destroyed: f64,
    #[serde(default)]
    pub displaced: f64,
}

impl TryFrom<pb::ScoreEpisodeResponse> for Score {
    type Error = String;

    /// Through the JSON faces' rendering of the breakdown (`gateway::breakdown_json`, field for field), so
    /// a trajectory's `score` has the names a JSON client sees.
    fn try_from(r: pb::ScoreEpisodeResponse) -> Result<Self, String> {
        serde_json::from_value(crate::api::faces::gateway::breakdown_json(r)).map_err(|e| format!("the score breakdown: {e}"))
    }
}

/// Token counts of a rollout (sums of the replies' `usage`; 0 where an endpoint reports none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Tokens {
    /// Prompt tokens over every turn.
    pub prompt: u64,
    /// Completion tokens over every turn.
    pub completion: u64,
}

/// Where a rollout's time went, milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Timings {
    /// Waiting for the policy.
    pub policy_ms: f64,
    /// In the environment (create, calls, score, close).
    pub env_ms: f64,
    /// The whole rollout.
    pub total_ms: f64,
}

/// One rollout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trajectory {
    /// [`SCHEMA`].
    pub schema: String,
    /// `question_id/sample`: what a rerun skips when it is scored.
    pub key: String,
    /// The question, its group and its seeds, and the episode played (unique per attempt).
    #[serde(flatten)]
    pub job: Job,
    /// How tools were given.
    pub tool_format: ToolFormat,
    /// The policy's model name.
    pub model: String,
    /// Scored or failed.
    pub status: Status,
    /// Why it failed.
    pub failure: Option<String>,
    /// Why the policy stopped (`None` when the rollout failed first).
    pub stop: Option<Stop>,
    /// Every message, in order.
    pub messages: Vec<Value>,
    /// The turns.
    pub turns: Vec<Turn>,
    /// The reward breakdown (`None` when failed).
    pub score: Option<Score>,
    /// Tokens.
    pub tokens: Tokens,
    /// Timings.
    pub timings: Timings,
}

impl Trajectory {
    /// The parsed calls of every turn, in order.
    pub fn calls(&self) -> impl Iterator<Item = &CallRecord> {
        self.turns.iter().flat_map(|t| t.calls.iter())
    }

    /// The reward, when scored.
    pub fn reward(&self) -> Option<f64> {
        self.score.as_ref().map(|s| s.reward).filter(|_| self.status == Status::Scored)
    }
}

/// The key of a rollout.
pub fn key(question_id: &str, sample: u32) -> String {
    format!("{question_id}/{sample}")
}

/// Reads a trajectories file: the last line of each key, in first-seen order. Every line must parse and
/// carry [`SCHEMA`]; a line cut short by a crash (the last, without its newline, even mid-character) is
/// skipped with a warning.
pub fn read(path: &Path) -> anyhow::Result<Vec<Trajectory>> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut order: Vec<String> = Vec::new();
    let mut by_key: HashMap<String, Trajectory> = HashMap::new();
    let complete = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    if complete < bytes.len() {
        // A line without its newline: a crash cut it while it was written (a rerun truncates it).
        tracing::warn!(file = %path.display(), bytes = bytes.len() - complete, "skipping a trajectory line cut short");
    }
    for (i, line) in bytes[..complete].split(|b| *b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let t: Trajectory =
            serde_json::from_slice(line).map_err(|e| anyhow::anyhow!("{} line {}: not a trajectory: {e}", path.display(), i + 1))?;
        if t.schema != SCHEMA {
            anyhow::bail!("{} line {}: schema {:?}, expected {SCHEMA:?}", path.display(), i + 1, t.schema);
        }
        if !by_key.contains_key(&t.key) {
            order.push(t.key.clone());
        }
        by_key.insert(t.key.clone(), t);
    }
    Ok(order.into_iter().filter_map(|k| by_key.remove(&k)).collect())
}

/// Appends trajectories to a file, one line each, handed to the OS as written (a crash of the process loses
/// none) and synced to disk by [`Writer::sync`] at the end of a run (a power cut loses at most the rollouts
/// since, which a rerun plays again).
pub struct Writer {
    file: std::fs::File,
    path: std::path::PathBuf,
}

impl Writer {
    /// Opens `path` for appending (creating it). A line left cut short by a crash is cut off first, so that
    /// every line of the file stays whole.
    pub fn append(path: &Path) -> anyhow::Result<Writer> {
        let file =
            std::fs::OpenOptions::new().create(true).append(true).open(path).with_context(|| format!("cannot open {}", path.display()))?;
        let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        let complete = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        if complete < bytes.len() {
            file.set_len(complete as u64).with_context(|| format!("cannot truncate the cut last line of {}", path.display()))?;
        }
        Ok(Writer { file, path: path.to_path_buf() })
    }

    /// Writes one line (one `write` call, so a crash leaves whole lines and at most one cut short).
    pub fn write(&mut self, t: &Trajectory) -> anyhow::Result<()> {
        let mut line = serde_json::to_vec(t)?;
        line.push(b'\n');
        self.file.write_all(&line).with_context(|| format!("cannot write to {}", self.path.display()))?;
        Ok(())
    }

    /// Syncs what was written to disk.
    pub fn sync(&mut self) -> anyhow::Result<()> {
        self.file.sync_data().with_context(|| format!("cannot sync {}", self.path.display()))?;
        Ok(())
    }
}

/// `rollouts.parquet`: one row per rollout (the scalar columns of a trajectory).
pub fn write_parquet(path: &Path, ts: &[Trajectory]) -> anyhow::Result<()> {
    let s = |f: &dyn Fn(&Trajectory) -> String| -> ArrayRef { Arc::new(ts.iter().map(f).map(Some).collect::<StringArray>()) };
    let f = |f: &dyn Fn(&Trajectory) -> Option<f64>| -> ArrayRef { Arc::new(ts.iter().map(f).collect::<Float64Array>()) };
    let u = |f: &dyn Fn(&Trajectory) -> u32| -> ArrayRef { Arc::new(ts.iter().map(|t| Some(f(t))).collect::<UInt32Array>()) };
    let count = |t: &Trajectory, m: Mode| t.calls().filter(|c| c.call.mode == m).count() as u32;
    let outcome = |t: &Trajectory, o: Outcome| t.calls().filter(|c| c.outcome == o).count() as u32;
    let batch = RecordBatch::try_from_iter(vec![
        ("key", s(&|t| t.key.clone())),
        ("question_id", s(&|t| t.job.question_id.clone())),
        ("conversation_id", s(&|t| t.job.conversation_id.clone())),
        ("category", u(&|t| u32::from(t.job.category))),
        ("gold_status", s(&|t| t.job.gold_status.clone())),
        ("sample", u(&|t| t.job.sample)),
        ("group", u(&|t| t.job.group)),
        ("episode_id", s(&|t| t.job.episode_id.clone())),
        ("episode_seed", Arc::new(ts.iter().map(|t| Some(t.job.episode_seed)).collect::<UInt64Array>()) as ArrayRef),
        ("sampling_seed", Arc::new(ts.iter().map(|t| Some(t.job.sampling_seed)).collect::<UInt64Array>()) as ArrayRef),
        ("tool_format", s(&|t| t.tool_format.name().to_string())),
        ("model", s(&|t| t.model.clone())),
        ("scored", Arc::new(ts.iter().map(|t| Some(t.status == Status::Scored)).collect::<BooleanArray>()) as ArrayRef),
        ("failure", Arc::new(ts.iter().map(|t| t.failure.clone()).collect::<StringArray>()) as ArrayRef),
        ("stop", Arc::new(ts.iter().map(|t| t.stop.map(Stop::name)).collect::<StringArray>()) as ArrayRef),
        ("reward", f(&|t| t.reward())),
        ("p_old", f(&|t| t.score.as_ref().map(|s| s.p_old))),
        ("p_new", f(&|t| t.score.as_ref().map(|s| s.p_new))),
        ("growth", f(&|t| t.score.as_ref().map(|s| s.growth))),
        ("evaluator", Arc::new(ts.iter().map(|t| t.score.as_ref().map(|s| s.evaluator.clone())).collect::<StringArray>()) as ArrayRef),
        ("turns", u(&|t| t.turns.len() as u32)),
        ("calls_strict", u(&|t| count(t, Mode::Strict))),
        ("calls_lenient", u(&|t| count(t, Mode::Lenient))),
        ("calls_invalid", u(&|t| count(t, Mode::Invalid))),
        ("calls_done", u(&|t| outcome(t, Outcome::Done))),
        ("calls_refused", u(&|t| outcome(t, Outcome::Refused))),
        ("prompt_tokens", Arc::new(ts.iter().map(|t| Some(t.tokens.prompt)).collect::<UInt64Array>()) as ArrayRef),
        ("completion_tokens", Arc::new(ts.iter().map(|t| Some(t.tokens.completion)).collect::<UInt64Array>()) as ArrayRef),
        ("policy_ms", f(&|t| Some(t.timings.policy_ms))),
        ("env_ms", f(&|t| Some(t.timings.env_ms))),
        ("total_ms", f(&|t| Some(t.timings.total_ms))),
    ])?;
    crate::dataset::write_batch(path, &batch)?;
    Ok(())
}

/// Trajectories and run descriptions for the harness's unit tests.
#[cfg(test)]
pub mod test_support {
    use super::*;

    /// A scored (with `reward`) or failed rollout of question `q`, sample `sample` of a group of `group`.
    pub fn traj(q: &str, category: u8, sample: u32, group: u32, reward: Option<f64>) -> Trajectory {
        let mut t: Trajectory = serde_json::from_value(serde_json::json!({
            "schema": SCHEMA, "key": key(q, sample), "question_id": q, "conversation_id": "c", "category": category,
            "gold_status": "ok", "question": "?", "sample": sample, "group": group, "episode_seed": 1, "sampling_seed": 2,
            "include_adversarial": false, "episode_id": "e", "tool_format": "openai", "model": "m", "status": "failed",
            "failure": null, "stop": null, "messages": [], "turns": [], "score": null, "tokens": {"prompt": 0, "completion": 0},
            "timings": {"policy_ms": 0.0, "env_ms": 0.0, "total_ms": 0.0}
        }))
        .unwrap();
        if let Some(r) = reward {
            t.status = Status::Scored;
            t.score = Some(
                serde_json::from_value(serde_json::json!({
                    "reward": r, "p_old": 0.0, "p_new": 0.0, "performance_delta": 0.0, "size_factor": 1.0, "density_factor": 1.0,
                    "change_factor": 1.0, "memory_efficiency": 1.0, "growth": 0.0, "reward_formula": "x", "context": "x",
                    "evaluator": "x", "embedder": "x", "llm_model": "", "evidence_recall_old": 0.0, "evidence_recall_new": 0.0,
                    "evidence_total": 0, "initial_memory_count": 0, "final_memory_count": 0, "n_max": 0, "top_k": 5,
                    "steps_used": 0, "retrieved_old": [], "retrieved_new": [], "answer_old": "", "answer_new": "",
                    "f1_old": null, "f1_new": null, "judge_old": null, "judge_new": null, "context_chars_old": 0,
                    "context_chars_new": 0
                }))
                .unwrap(),
            );
        }
        t
    }

    /// A run's description.
    pub fn run_info() -> super::super::report::RunInfo {
        super::super::report::RunInfo {
            model: "m".into(),
            tool_format: "openai".into(),
            tool_choice: super::super::policy::ToolChoice::Auto,
            env: "in-process".into(),
            questions: 0,
            group: 1,
            max_turns: 4,
            temperature: 0.7,
            top_p: 1.0,
            max_tokens: 512,
            seed: 0,
            system_prompt: "default".into(),
            evaluator: "answer-phrase".into(),
            environment: "x".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trajectory(key: &str, question: &str) -> Trajectory {
        serde_json::from_value(serde_json::json!({
            "schema": SCHEMA, "key": key, "question_id": "q", "conversation_id": "c", "category": 1,
            "gold_status": "ok", "question": question, "sample": 0, "group": 1, "episode_id": "e", "episode_seed": 1,
            "sampling_seed": 2, "include_adversarial": false, "tool_format": "hermes", "model": "m",
            "status": "failed", "failure": "x", "stop": null, "messages": [], "turns": [], "score": null,
            "tokens": {"prompt": 0, "completion": 0}, "timings": {"policy_ms": 0.0, "env_ms": 0.0, "total_ms": 0.0}
        }))
        .unwrap()
    }

    /// A crash mid-line (here mid-character) loses that line only: reading skips it, and the next run's
    /// writer cuts it off before appending, so every line of the file stays whole.
    #[test]
    fn a_line_cut_by_a_crash_is_skipped_then_cut_off() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let mut w = Writer::append(&path).unwrap();
        w.write(&trajectory("a/0", "déjà vu?")).unwrap();
        w.write(&trajectory("b/0", "Où?")).unwrap();
        drop(w);
        let mut bytes = std::fs::read(&path).unwrap();
        let whole = bytes.len();
        let cut = serde_json::to_vec(&trajectory("c/0", "é")).unwrap();
        let at = cut.iter().position(|b| *b >= 0x80).unwrap() + 1; // inside the two bytes of "é"
        bytes.extend_from_slice(&cut[..at]);
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(read(&path).unwrap().len(), 2);
        let mut w = Writer::append(&path).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len() as usize, whole, "the cut line is cut off");
        w.write(&trajectory("a/0", "again")).unwrap();
        w.sync().unwrap();
        let ts = read(&path).unwrap();
        assert_eq!(ts.iter().map(|t| t.key.as_str()).collect::<Vec<_>>(), ["a/0", "b/0"]);
        assert_eq!(ts[0].job.question, "again", "the last line of a key wins");
        std::fs::write(&path, "{\"schema\": \"other\"}\n").unwrap();
        assert!(read(&path).unwrap_err().to_string().contains("line 1"));
    }
}
