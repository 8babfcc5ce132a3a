//! One rollout: open the episode, let the policy call tools turn by turn, score, close.
//!
//! Each turn sends every message so far; the reply's calls are read ([`super::parse`]) and run in order;
//! their results go back as the format says ([`super::prompt`]). The episode is scored once a reply
//! holds no call, or after `max_turns` replies. Whatever the model writes (malformed JSON, an unknown
//! tool, an id it invented) becomes a tool result it sees; only a failure of the endpoint or of the
//! environment fails the rollout, which is then recorded as failed, never scored.

use std::time::Instant;

use serde_json::{json, Value};

use super::env::{Env, ToolAnswer};
use super::parse::{self, Mode};
use super::policy::Policy;
use super::prompt::{self, ToolFormat};
use super::record::{CallRecord, Outcome, Score, Status, Stop, Timings, Tokens, Trajectory, Turn, SCHEMA};
use crate::api::pb;

/// What one rollout plays.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Job {
    /// The question.
    pub question_id: String,
    /// Its conversation.
    pub conversation_id: String,
    /// Its category.
    pub category: u8,
    /// The audit's status of its gold.
    pub gold_status: String,
    /// Its text.
    pub question: String,
    /// Index in the group.
    pub sample: u32,
    /// Group size.
    pub group: u32,
    /// `CreateEpisode.seed` (shared by the group).
    pub episode_seed: u64,
    /// The first turn's sampling seed.
    pub sampling_seed: u64,
    /// Ask for category 5.
    pub include_adversarial: bool,
    /// The episode id to open.
    pub episode_id: String,
    /// Set on a fork's rollout (`--fork-at`): the prefix it shares.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork: Option<super::fork::ForkOf>,
}

impl Job {
    /// Sample `sample` of `question`'s group of `group`, on an episode of `episode_seed`, with a fresh id
    /// starting `prefix`.
    pub fn of(question: &crate::dataset::Question, sample: u32, group: u32, episode_seed: u64, sampling_seed: u64, prefix: &str) -> Job {
        Job {
            question_id: question.id.clone(),
            conversation_id: question.conversation_id.clone(),
            category: question.category,
            gold_status: question.gold.status.name().to_string(),
            question: question.question.clone(),
            sample,
            group,
            episode_seed,
            sampling_seed,
            include_adversarial: question.category == crate::dataset::ADVERSARIAL_CATEGORY,
            episode_id: super::fresh_episode_id(prefix, &question.id, sample),
            fork: None,
        }
    }
}

/// What every rollout of a run shares.
pub struct Table<'a> {
    /// The environment.
    pub env: &'a Env,
    /// The policy.
    pub policy: &'a Policy,
    /// How tools are given.
    pub format: ToolFormat,
    /// `ListTools`' schemas.
    pub tools: &'a [Value],
    /// The system message.
    pub system: &'a str,
    /// Replies per rollout.
    pub max_turns: u32,
    /// The evaluator asked of every episode (`Unspecified`: the server's default).
    pub evaluator: pb::Evaluator,
}

/// Plays one rollout. Never fails: a failure is a trajectory with [`Status::Failed`].
pub async fn play(t: &Table<'_>, job: &Job) -> Trajectory {
    let started = Instant::now();
    let mut traj = begin(t, job);
    if open(t, &mut traj).await {
        match turns(t, &mut traj, t.max_turns).await {
            Err(why) => traj.failure = Some(why),
            Ok(()) => score(t, &mut traj).await,
        }
        close(t, &mut traj).await;
    }
    traj.timings.total_ms = ms(started);
    traj
}

/// A trajectory before its episode exists: the opening messages, nothing played.
pub fn begin(t: &Table<'_>, job: &Job) -> Trajectory {
    Trajectory {
        schema: SCHEMA.to_string(),
        key: super::record::key(&job.question_id, job.sample),
        job: job.clone(),
        tool_format: t.format,
        model: t.policy.config().model.clone(),
        status: Status::Failed,
        failure: None,
        stop: None,
        messages: prompt::opening(t.format, t.system, &job.question, t.tools),
        turns: Vec::new(),
        score: None,
        tokens: Tokens::default(),
        timings: Timings::default(),
    }
}

/// `CreateEpisode` of the trajectory's job; false (with the failure recorded) when it was refused.
pub async fn open(t: &Table<'_>, traj: &mut Trajectory) -> bool {
    let clock = Instant::now();
    let created = t.env.create(create_request(&traj.job, t.evaluator)).await;
    traj.timings.env_ms += ms(clock);
    match created {
        Err(s) => {
            traj.failure = Some(format!("CreateEpisode: {}: {}", s.code(), s.message()));
            false
        }
        Ok(r) => {
            // From now on the episode is the server's id: the same, or behind replicas, the one that
            // names its replica (the trajectory records it, so a replay finds the same replica).
            if !r.episode_id.is_empty() {
                traj.job.episode_id = r.episode_id;
            }
            true
        }
    }
}

/// `ScoreEpisode` of the trajectory's episode: scored, or the failure recorded.
pub async fn score(t: &Table<'_>, traj: &mut Trajectory) {
    let clock = Instant::now();
    match t.env.score(&traj.job.episode_id).await {
        Ok(r) => match Score::try_from(r) {
            Ok(score) => {
                traj.score = Some(score);
                traj.status = Status::Scored;
            }
            Err(e) => traj.failure = Some(e),
        },
        Err(s) => traj.failure = Some(format!("ScoreEpisode: {}: {}", s.code(), s.message())),
    }
    traj.timings.env_ms += ms(clock);
}

/// `CloseEpisode` of the trajectory's episode.
pub async fn close(t: &Table<'_>, traj: &mut Trajectory) {
    let clock = Instant::now();
    t.env.close(&traj.job.episode_id).await;
    traj.timings.env_ms += ms(clock);
}

/// The `CreateEpisode` of a job (every sample of a group gets the same seed).
pub fn create_request(job: &Job, evaluator: pb::Evaluator) -> pb::CreateEpisodeRequest {
    pb::CreateEpisodeRequest {
        episode_id: job.episode_id.clone(),
        conversation_id: String::new(),
        question_id: job.question_id.clone(),
        custom: None,
        seed: Some(job.episode_seed),
        max_steps: None,
        include_adversarial: job.include_adversarial,
        evaluator: evaluator as i32,
    }
}

/// The turns after those the trajectory holds, up to `until` replies in all; `Err` with why the rollout
/// failed. The policy stopping sets [`Trajectory::stop`]; reaching `until` sets it only when `until` is the
/// table's `max_turns` (a fork's prefix stops short of it with no stop).
pub async fn turns(t: &Table<'_>, traj: &mut Trajectory, until: u32) -> Result<(), String> {
    let tools = (t.format == ToolFormat::OpenAi).then_some(t.tools);
    let from = u32::try_from(traj.turns.len()).unwrap_or(u32::MAX);
    for k in from..until.min(t.max_turns) {
        let seed = super::turn_seed(traj.job.sampling_seed, k);
        let body = t.policy.body(&traj.messages, tools, seed);
        let reply = match t.policy.complete(&body).await {
            Ok(r) => r,
            Err(e) if k > 0 && context_overflow(&e) => {
                tracing::debug!(turn = k + 1, error = %e.message, "the conversation no longer fits the policy's context");
                traj.stop = Some(Stop::Context);
                return Ok(());
            }
            Err(e) => return Err(format!("the policy endpoint failed on turn {}: {}", k + 1, e.message)),
        };
        traj.timings.policy_ms += reply.latency.as_secs_f64() * 1e3;
        traj.tokens.prompt += reply.prompt_tokens.unwrap_or(0);
        traj.tokens.completion += reply.completion_tokens.unwrap_or(0);
        let content = reply.message.get("content").and_then(Value::as_str).unwrap_or("").to_string();
        let parsed = read_calls(t.format, &reply.message);
        let mut turn = Turn {
            sent: traj.messages.len(),
            seed,
            reply: reply.body.clone(),
            finish_reason: reply.finish_reason.clone(),
            prompt_tokens: reply.prompt_tokens,
            completion_tokens: reply.completion_tokens,
            latency_ms: reply.latency.as_secs_f64() * 1e3,
            calls: Vec::with_capacity(parsed.calls.len()),
            dropped: parsed.dropped,
        };
        traj.messages.push(assistant_message(&reply.message, &content, t.format, k));
        if parsed.calls.is_empty() {
            traj.turns.push(turn);
            traj.stop = Some(Stop::NoCall);
            return Ok(());
        }
        for call in parsed.calls {
            let clock = Instant::now();
            let (outcome, result) = match call.mode {
                Mode::Invalid => (Outcome::Unread, format!("Error: {}", call.error.as_deref().unwrap_or("the call could not be read"))),
                Mode::Strict | Mode::Lenient => match t.env.call(&traj.job.episode_id, &call.name, &call.arguments).await {
                    Ok(ToolAnswer::Done(text)) => (Outcome::Done, text),
                    Ok(ToolAnswer::Refused(text)) => (Outcome::Refused, text),
                    Err(s) => return Err(format!("CallTool {}: {}: {}", call.name, s.code(), s.message())),
                },
            };
            let env_ms = ms(clock);
            traj.timings.env_ms += env_ms;
            turn.calls.push(CallRecord { call, outcome, result, env_ms });
        }
        answer(&mut traj.messages, &turn.calls);
        traj.turns.push(turn);
    }
    if until >= t.max_turns {
        traj.stop = Some(Stop::MaxTurns);
    }
    Ok(())
}

/// The calls of a reply's message as the format reads them (`replay` reads recorded replies again with it).
pub fn read_calls(format: ToolFormat, message: &Value) -> parse::Parsed {
    match format {
        ToolFormat::OpenAi => parse::from_message(message),
        ToolFormat::Hermes => parse::from_text(message.get("content").and_then(Value::as_str).unwrap_or("")),
    }
}

/// The assistant message sent back: its content, and under `openai` its `tool_calls` (at most
/// [`parse::MAX_CALLS`]), each with an id (one the endpoint left out is made up as `call_<turn>_<i>`, and
/// the same id answers it) and `arguments` a JSON object's text: an entry the parser could not read is sent
/// back with `"{}"` (its reply is recorded as received), since strict servers refuse the whole request
/// otherwise.
fn assistant_message(message: &Value, content: &str, format: ToolFormat, turn: u32) -> Value {
    let mut m = json!({"role": "assistant", "content": content});
    if format == ToolFormat::OpenAi {
        if let Some(calls) = message.get("tool_calls").and_then(Value::as_array).filter(|c| !c.is_empty()) {
            let calls: Vec<Value> = calls
                .iter()
                .take(parse::MAX_CALLS)
                .enumerate()
                .map(|(i, c)| {
                    let id = c.get("id").and_then(Value::as_str).map_or_else(|| format!("call_{turn}_{i}"), str::to_string);
                    let name = c.pointer("/function/name").and_then(Value::as_str).filter(|n| !n.trim().is_empty()).unwrap_or("unknown");
                    let arguments = c
                        .pointer("/function/arguments")
                        .and_then(Value::as_str)
                        .filter(|a| serde_json::from_str::<serde_json::Map<String, Value>>(a).is_ok())
                        .unwrap_or("{}");
                    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
                })
                .collect();
            m["tool_calls"] = Value::Array(calls);
        }
    }
    m
}

/// The results, appended as the format says. When the assistant message just sent back carries
/// `tool_calls` (`openai`; every call then came from them, in order), a `tool` message answers each of its
/// ids; otherwise one `user` message holds every result in `<tool_response>` tags.
fn answer(messages: &mut Vec<Value>, calls: &[CallRecord]) {
    let ids: Vec<String> = messages
        .last()
        .and_then(|m| m.get("tool_calls"))
        .and_then(Value::as_array)
        .map(|c| c.iter().map(|c| c["id"].as_str().unwrap_or_default().to_string()).collect())
        .unwrap_or_default();
    if ids.is_empty() {
        let results: Vec<&str> = calls.iter().map(|c| c.result.as_str()).collect();
        messages.push(prompt::tool_responses(&results));
    } else {
        for (id, c) in ids.iter().zip(calls) {
            messages.push(prompt::tool_message(id, &c.result));
        }
    }
}

/// A 400 that names the context: the prompt no longer fits (vLLM "maximum context length", llama.cpp
/// "exceeds the available context size", OpenAI `context_length_exceeded`, `scripts/llm-server.py`).
fn context_overflow(e: &crate::util::openai_compat::GaveUp) -> bool {
    e.kind == crate::util::openai_compat::FailureKind::Status(400) && e.message.to_ascii_lowercase().contains("context")
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}
