//! `memgym replay TRAJ.jsonl`: the recorded tool calls of every scored rollout, re-run on a fresh episode
//! with the same question and seed, without the policy.
//!
//! - Every recorded reply is read again by today's parser: the calls must be the ones recorded (a parser
//!   change since the recording shows here, naming the turn).
//! - Under `--tool-choice required` every recorded reply must carry a tool call (an entry of its
//!   `tool_calls`): one that does not shows an endpoint that did not honour the constraint, named by its
//!   turn (a reply cut by `max_tokens`, finish reason `length`, is not one: the call did not fit). The trajectories do not record the tool choice; the run's `run.json` does, and replay reads it
//!   from the trajectories file's directory ([`recorded_tool_choice`]: every `memgym rollout` directory and
//!   each of `memgym learn`'s epoch and A/B arm directories holds one; without one, or one written before
//!   the setting, the choice is `auto`, what every request sent then).
//! - Every call that reached the environment is sent again as recorded (name and argument text); its
//!   output must be byte-identical to what the policy was shown. Calls the parser could not read were
//!   never sent and are not sent now. A refusal whose wording changed since the recording
//!   ([`crate::memory::REWORDED`]: the "not a memory id" refusal's example id) is read in today's wording
//!   before the comparison, and counted apart (`reworded`): the environment did the same thing.
//! - The episode is re-scored with the recorded evaluator; the reward must be bit-identical.
//! - With another evaluator (`--evaluator X` given explicitly), the same calls are replayed on a second
//!   fresh episode that asks for X, and both rewards are reported side by side with every sign flip: a
//!   reward change checked against real trajectories without rerunning the policy.
//!
//! Any divergence (an output, a reward, a call the environment now fails) is reported and makes the
//! command exit non-zero.

use std::path::Path;

use anyhow::Context;
use serde::Serialize;
use serde_json::Value;

use super::env::{Env, ToolAnswer};
use super::play::{create_request, read_calls, Job};
use super::policy::ToolChoice;
use super::record::{Outcome, Status, Trajectory};
use super::report::sign;
use crate::api::pb;
use crate::reward::Evaluator;

/// One rollout replayed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Replayed {
    /// The rollout's key.
    pub key: String,
    /// Its category.
    pub category: u8,
    /// Calls re-sent.
    pub calls: usize,
    /// The recorded reward.
    pub recorded: f64,
    /// The reward now, with the recorded evaluator.
    pub replayed: Option<f64>,
    /// With the other evaluator, when asked.
    pub rescored: Option<f64>,
    /// Outputs that equal today's only once a recorded refusal is read in today's wording.
    pub reworded: usize,
    /// What diverged.
    pub divergences: Vec<String>,
}

impl Replayed {
    /// Whether the other evaluator's reward has another sign than the recorded one.
    pub fn sign_flip(&self) -> bool {
        self.rescored.is_some_and(|r| sign(r) != sign(self.recorded))
    }
}

/// The tool choice of the run that wrote `trajectories`: its `run.json`'s, from the same directory
/// (`auto` when there is no such file, or it predates the setting).
pub fn recorded_tool_choice(trajectories: &Path) -> anyhow::Result<ToolChoice> {
    let path = trajectories.parent().unwrap_or(Path::new(".")).join("run.json");
    if !path.exists() {
        return Ok(ToolChoice::Auto);
    }
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let run: Value = serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    match run.get("tool_choice") {
        None => Ok(ToolChoice::Auto),
        Some(v) => serde_json::from_value(v.clone()).with_context(|| format!("{}: tool_choice", path.display())),
    }
}

/// Replays one scored trajectory of a run played with `choice` (see the module doc).
pub async fn replay(env: &Env, t: &Trajectory, other: Option<Evaluator>, choice: ToolChoice) -> Replayed {
    let recorded_score = t.score.as_ref();
    let mut r = Replayed {
        key: t.key.clone(),
        category: t.job.category,
        calls: 0,
        recorded: recorded_score.map_or(0.0, |s| s.reward),
        replayed: None,
        rescored: None,
        reworded: 0,
        divergences: Vec::new(),
    };
    let Some(score) = recorded_score.filter(|_| t.status == Status::Scored) else {
        r.divergences.push("the rollout was not scored; nothing to replay".into());
        return r;
    };
    let recorded_evaluator = match Evaluator::parse(&score.evaluator) {
        Ok(e) => e,
        Err(e) => {
            r.divergences.push(format!("recorded evaluator: {e}"));
            return r;
        }
    };
    r.divergences.extend(reread(t, choice));
    match episode(env, t, recorded_evaluator, true).await {
        Ok((now, Sent { calls, reworded }, divergences)) => {
            r.calls = calls;
            r.reworded = reworded;
            r.replayed = Some(now.reward);
            // Another environment explains every other difference: say so first.
            let setting = |name: &str, then: String, now: String| {
                (then != now).then(|| format!("environment differs: {name} {then} recorded, {now} now"))
            };
            r.divergences.extend(
                [
                    setting("embedder", score.embedder.clone(), now.embedder.clone()),
                    setting("reward formula", score.reward_formula.clone(), now.reward_formula.clone()),
                    setting("context", score.context.clone(), now.context.clone()),
                    setting("top_k", score.top_k.to_string(), now.top_k.to_string()),
                    setting("llm model", score.llm_model.clone(), now.llm_model.clone()),
                ]
                .into_iter()
                .flatten(),
            );
            r.divergences.extend(divergences);
            if now.reward.to_bits() != score.reward.to_bits() {
                r.divergences.push(format!("reward {} now, {} recorded", now.reward, score.reward));
            }
        }
        Err(e) => r.divergences.push(e),
    }
    if let Some(other) = other.filter(|o| *o != recorded_evaluator) {
        match episode(env, t, other, false).await {
            Ok((now, _, divergences)) => {
                r.rescored = Some(now.reward);
                r.divergences.extend(divergences);
            }
            Err(e) => r.divergences.push(e),
        }
    } else if other.is_some() {
        r.rescored = r.replayed;
    }
    r
}

/// Each recorded reply read again by today's parser: a turn whose calls now read differently (a parser
/// change since the recording) is a divergence naming the turn; so is, under `required`, a reply with no
/// tool call that was not cut by `max_tokens`.
fn reread(t: &Trajectory, choice: ToolChoice) -> Vec<String> {
    let mut out = Vec::new();
    for (k, turn) in t.turns.iter().enumerate() {
        let message = turn.reply.pointer("/choices/0/message").cloned().unwrap_or(Value::Null);
        let calls = message.get("tool_calls").and_then(Value::as_array).map_or(0, Vec::len);
        // A reply cut by max_tokens honoured the constraint: the call did not fit.
        if choice == ToolChoice::Required && calls == 0 && !turn.cut_by_max_tokens() {
            out.push(format!("turn {}: the reply has no tool call under tool_choice required (the endpoint did not honour it)", k + 1));
        }
        let now = read_calls(t.tool_format, &message);
        let recorded: Vec<&super::parse::Call> = turn.calls.iter().map(|c| &c.call).collect();
        if now.calls.iter().collect::<Vec<_>>() != recorded || now.dropped != turn.dropped {
            let modes = |calls: &mut dyn Iterator<Item = &super::parse::Call>| {
                calls.map(|c| format!("{} {}", c.mode.name(), c.name)).collect::<Vec<_>>().join(", ")
            };
            out.push(format!(
                "turn {}: the reply reads as [{}] now, [{}] recorded",
                k + 1,
                modes(&mut now.calls.iter()),
                modes(&mut recorded.iter().copied())
            ));
        }
    }
    out
}

/// What a replay sent.
struct Sent {
    /// Calls sent.
    calls: usize,
    /// Outputs equal to the recording once its refusals are read in today's wording.
    reworded: usize,
}

/// `recorded` in today's wording of every reworded refusal ([`crate::memory::REWORDED`]).
fn in_todays_words(recorded: &str) -> String {
    crate::memory::REWORDED.iter().fold(recorded.to_string(), |text, (then, now)| text.replace(then, now))
}

/// Replays the calls on a fresh episode scored by `evaluator`: (its score, what was sent, divergences).
async fn episode(
    env: &Env,
    t: &Trajectory,
    evaluator: Evaluator,
    check: bool,
) -> Result<(pb::ScoreEpisodeResponse, Sent, Vec<String>), String> {
    let job = Job { episode_id: super::fresh_episode_id("replay", &t.job.question_id, t.job.sample), ..t.job.clone() };
    let pb_evaluator: pb::Evaluator = crate::api::grpc::convert::evaluator_out(evaluator);
    // The server's id (behind replicas, the replica's name in front of the one asked for).
    let id = env
        .create(create_request(&job, pb_evaluator))
        .await
        .map_err(|s| format!("CreateEpisode: {}: {}", s.code(), s.message()))?
        .episode_id;
    let result = async {
        let mut divergences = Vec::new();
        let mut sent = Sent { calls: 0, reworded: 0 };
        for (i, c) in t.calls().enumerate() {
            if c.outcome == Outcome::Unread {
                continue;
            }
            sent.calls += 1;
            let now = env
                .call(&id, &c.call.name, &c.call.arguments)
                .await
                .map_err(|s| format!("call {} ({}): {}: {}", i + 1, c.call.name, s.code(), s.message()))?;
            let outcome = match &now {
                ToolAnswer::Done(_) => Outcome::Done,
                ToolAnswer::Refused(_) => Outcome::Refused,
            };
            // A refusal may name the episode (its step budget): the recorded id reads as the new one.
            let mut recorded = c.result.replace(&t.job.episode_id, &id);
            if let Some(f) = &t.job.fork {
                recorded = recorded.replace(&f.parent, &id); // a fork's shared calls ran on its parent
            }
            if check && outcome == c.outcome && now.text() != recorded && now.text() == in_todays_words(&recorded) {
                sent.reworded += 1;
            } else if check && (outcome != c.outcome || now.text() != recorded) {
                divergences.push(format!(
                    "call {} ({}): output differs ({} bytes now, {} recorded; first difference at byte {})",
                    i + 1,
                    c.call.name,
                    now.text().len(),
                    recorded.len(),
                    first_difference(now.text(), &recorded)
                ));
            }
        }
        let score = env.score(&id).await.map_err(|s| format!("ScoreEpisode: {}: {}", s.code(), s.message()))?;
        Ok((score, sent, divergences))
    }
    .await;
    env.close(&id).await;
    result
}

fn first_difference(a: &str, b: &str) -> usize {
    a.bytes().zip(b.bytes()).position(|(x, y)| x != y).unwrap_or(a.len().min(b.len()))
}

/// The summary printed by `memgym replay` of a run played with `choice`.
pub fn summary(rows: &[Replayed], other: Option<Evaluator>, recorded: &str, choice: ToolChoice) -> String {
    let mut s = String::new();
    let diverged: Vec<&Replayed> = rows.iter().filter(|r| !r.divergences.is_empty()).collect();
    let calls: usize = rows.iter().map(|r| r.calls).sum();
    let reworded: usize = rows.iter().map(|r| r.reworded).sum();
    let reworded = if reworded > 0 { format!(" ({reworded} refusals read in today's wording)") } else { String::new() };
    let required = match choice {
        ToolChoice::Required => " · tool choice required: every reply checked for a tool call",
        ToolChoice::Auto => "",
    };
    s.push_str(&format!(
        "replayed {} rollouts ({calls} tool calls{required}): {} reproduced byte for byte{reworded}, {} diverged\n",
        rows.len(),
        rows.len() - diverged.len(),
        diverged.len()
    ));
    for r in diverged.iter().take(20) {
        for d in &r.divergences {
            s.push_str(&format!("  {}: {d}\n", r.key));
        }
    }
    if let Some(other) = other {
        let mean = |f: &dyn Fn(&Replayed) -> Option<f64>| {
            let v: Vec<f64> = rows.iter().filter_map(f).collect();
            if v.is_empty() {
                0.0
            } else {
                v.iter().sum::<f64>() / v.len() as f64
            }
        };
        let flips: Vec<&Replayed> = rows.iter().filter(|r| r.sign_flip()).collect();
        // Both means over the rollouts re-scored by both.
        s.push_str(&format!(
            "\nmean reward over {} rollouts: {recorded} {:+.4} · {} {:+.4} · sign flips {}/{}\n",
            rows.iter().filter(|r| r.rescored.is_some()).count(),
            mean(&|r| r.rescored.map(|_| r.recorded)),
            other.name(),
            mean(&|r| r.rescored),
            flips.len(),
            rows.len()
        ));
        for r in flips {
            s.push_str(&format!("  flip {}: {recorded} {:+.4} → {} {:+.4}\n", r.key, r.recorded, other.name(), r.rescored.unwrap_or(0.0)));
        }
    }
    s
}
