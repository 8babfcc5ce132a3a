//! The JSON faces' one door into the environment. OpenEnv (HTTP and WebSocket) and MCP speak JSON, not
//! protobuf; both open episodes from a JSON object, call the six tools by name with JSON arguments, score
//! and close. This module does that once, on top of the same conversions and checks the gRPC handlers use
//! (`TryFrom<pb::CreateEpisodeRequest>`, [`json::parse_call`], [`tool_result`]), and renders results as
//! JSON whose field names are the gRPC messages' (so a breakdown read over MCP and one read over gRPC
//! compare key by key). Errors stay `tonic::Status` — the one exhaustive error map — and each face maps
//! the code to its own vocabulary.

use std::sync::Arc;

use serde_json::{json, Map, Value};
use tonic::Status;
use tracing::Instrument;

use crate::api::pb;
use crate::api::status::logged;
use crate::dataset::ADVERSARIAL_CATEGORY;
use crate::episode::{CreateRequest, Environment, EpisodeState};
use crate::reward::Evaluator;
use crate::tools::{llm_calls, TOOL_NAMES};
use crate::util::excerpt::{name, quoted};
use pb::call_tool_response::Result as R;

/// The keys that open an episode (OpenEnv reset data, MCP `create_episode` arguments), with their JSON
/// types and descriptions; the schemas of both faces are built from this table.
pub const OPEN_KEYS: [(&str, &str, &str); 7] = [
    ("question_id", "string", "LoCoMo question id, e.g. \"conv-26:q17\". Unset: the server picks a question (by seed when one is given)."),
    ("conversation_id", "string", "LoCoMo conversation, e.g. \"conv-26\" (must match question_id when both are given)."),
    ("seed", "integer", "Seed: picks the question when question_id is unset, and drives sample_memory's random strategy."),
    ("episode_id", "string", "Client-chosen episode id (letters, digits, '.', '_', ':', '-'; at most 128)."),
    ("max_steps", "integer", "Step budget (default 30)."),
    ("evaluator", "string", "The evaluator (unset: the server's default)."),
    ("include_adversarial", "boolean", "Allow category-5 (adversarial) questions."),
];

/// The evaluators' names as the JSON faces take them (`answer_recall`; the server's `answer-recall` is
/// accepted too).
pub fn evaluator_names() -> Vec<String> {
    Evaluator::ALL.iter().map(|e| e.name().replace('-', "_")).collect()
}

/// [`OPEN_KEYS`] as JSON Schema properties (the evaluator with its names as an enum).
pub fn open_properties() -> Map<String, Value> {
    let mut props = Map::new();
    for (key, ty, description) in OPEN_KEYS {
        let mut p = json!({"type": ty, "description": description});
        if key == "evaluator" {
            p["enum"] = json!(evaluator_names());
        }
        props.insert(key.into(), p);
    }
    props
}

/// Opens, steps, scores and closes episodes for the JSON faces.
#[derive(Debug, Clone)]
pub struct Gateway {
    env: Arc<Environment>,
}

/// An opened episode: its state and whether it was new (false for an idempotent repeat of a live id).
#[derive(Debug, Clone)]
pub struct Opened {
    /// State after creation.
    pub state: EpisodeState,
    /// False when the id named an episode that was already live.
    pub created: bool,
}

/// A tool call's JSON result: the compact text the policy reads and the structured result.
#[derive(Debug, Clone)]
pub struct Called {
    /// The text gRPC `CallTool` returns.
    pub text: String,
    /// `{"tool", "text", "step", ...}` with the typed response's fields.
    pub structured: Value,
    /// The budget is spent: no further tool call is accepted.
    pub done: bool,
}

impl Gateway {
    /// A gateway to `env`.
    pub fn new(env: Arc<Environment>) -> Self {
        Gateway { env }
    }

    /// The environment.
    pub fn env(&self) -> &Arc<Environment> {
        &self.env
    }

    /// Opens an episode from the JSON object `args` ([`OPEN_KEYS`]; `null` is unset; an unknown key is
    /// InvalidArgument naming it). Without a question id a question is picked: the `seed`-th
    /// non-adversarial question (of `conversation_id` when given, modulo their number), or a random one.
    pub async fn open(&self, args: &Map<String, Value>) -> Result<Opened, Status> {
        logged(self.open_inner(args).instrument(tracing::info_span!("open_episode")).await)
    }

    async fn open_inner(&self, args: &Map<String, Value>) -> Result<Opened, Status> {
        let mut req = open_request(args)?;
        if req.question_id.is_empty() {
            req.question_id = self.pick_question(&req)?;
        }
        let create = CreateRequest::try_from(req)?;
        let created = self.env.create_episode(create).await?;
        Ok(Opened { state: created.state, created: created.created })
    }

    fn pick_question(&self, req: &pb::CreateEpisodeRequest) -> Result<String, Status> {
        let ds = self.env.dataset();
        let conversation = req.conversation_id.trim();
        if !conversation.is_empty() && ds.conversation(conversation).is_none() {
            return Err(crate::api::status::refusal(
                tonic::Code::NotFound,
                "DATASET_NOT_FOUND",
                format!("conversation {} not found", quoted(conversation)),
                None,
            ));
        }
        let pool: Vec<&str> = ds
            .questions
            .iter()
            .filter(|q| {
                (conversation.is_empty() || q.conversation_id == conversation)
                    && (q.category != ADVERSARIAL_CATEGORY || req.include_adversarial)
            })
            .map(|q| q.id.as_str())
            .collect();
        if pool.is_empty() {
            return Err(crate::api::status::refusal(
                tonic::Code::FailedPrecondition,
                "EPISODE_PRECONDITION",
                "no question to pick: give question_id".into(),
                None,
            ));
        }
        let i = match req.seed {
            Some(seed) => (seed % pool.len() as u64) as usize,
            None => rand::random_range(0..pool.len()),
        };
        Ok(pool[i].to_string())
    }

    /// Calls `tool` with the JSON `arguments` on episode `id`, once per `call_id` when one is given. A
    /// refused call changes nothing (and counts as a rejection, as over gRPC).
    pub async fn call(&self, id: &str, tool: &str, arguments: &Value, call_id: Option<&str>) -> Result<Called, Status> {
        let span = tracing::info_span!("tool", episode_id = %name(id), tool = %name(tool));
        logged(self.call_inner(id, tool, arguments, call_id).instrument(span).await)
    }

    async fn call_inner(&self, id: &str, tool: &str, arguments: &Value, call_id: Option<&str>) -> Result<Called, Status> {
        let args = match arguments {
            Value::Null => String::new(),
            Value::Object(_) => arguments.to_string(),
            other @ (Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Array(_)) => {
                return Err(crate::api::status::invalid(format!("arguments: must be a JSON object, got {}", kind(other))))
            }
        };
        let call = llm_calls::parse_call(tool, &args, &self.env.config().limits.tools);
        let r = crate::api::calls::run(&self.env, id, call, call_id).await?;
        let metrics: serde_json::Map<String, Value> = r.metrics.iter().map(|(k, v)| ((*k).to_string(), json!(v))).collect();
        let (text, done) = (r.text, r.done);
        let mut structured = result_json(tool.trim(), &text, r.result);
        structured["metrics"] = Value::Object(metrics);
        Ok(Called { structured, text, done })
    }

    /// Scores episode `id` (idempotent): ScoreEpisodeResponse's fields as JSON.
    pub async fn score(&self, id: &str) -> Result<Value, Status> {
        let scored = crate::api::calls::score(&self.env, id).instrument(tracing::info_span!("score_episode", episode_id = %name(id))).await;
        Ok(breakdown_json(logged(scored)?))
    }

    /// Forks `id` (ForkEpisode) with the JSON arguments `count`, `fork_ids` and `seeds` (each optional;
    /// any other key is refused, naming it).
    pub async fn fork(&self, id: &str, args: &Map<String, Value>) -> Result<Vec<EpisodeState>, Status> {
        let mut req = pb::ForkEpisodeRequest { episode_id: id.to_string(), ..Default::default() };
        for (k, v) in args {
            match k.as_str() {
                "count" => {
                    req.count = v
                        .as_u64()
                        .and_then(|n| u32::try_from(n).ok())
                        .ok_or_else(|| crate::api::status::invalid(format!("count: must be a whole number >= 0, got {}", kind(v))))?
                }
                "fork_ids" => {
                    req.fork_ids = json_list(v, "fork_ids", |x| x.as_str().map(str::to_string), "a string")?;
                }
                "seeds" => req.seeds = json_list(v, "seeds", Value::as_u64, "a whole number >= 0")?,
                other => return Err(crate::api::status::invalid(format!("{}: unknown argument", name(other)))),
            }
        }
        let fork = crate::episode::ForkRequest::try_from(req)?;
        let forks = self.env.fork_episode(fork).instrument(tracing::info_span!("fork_episode", episode_id = %name(id))).await;
        logged(forks.map_err(Status::from))
    }

    /// The state of episode `id`.
    pub async fn state(&self, id: &str) -> Result<EpisodeState, Status> {
        Ok(self.env.get_episode(id, false).await?.0)
    }

    /// Closes episode `id` (idempotent while its id is remembered).
    pub async fn close(&self, id: &str) -> Result<(), Status> {
        self.env.close_episode(id).await?;
        Ok(())
    }

    /// Closes episode `id`, or remembers an id that names none as closed, so that it is never opened later.
    pub async fn retire(&self, id: &str) -> Result<(), Status> {
        self.env.retire_episode(id).await?;
        Ok(())
    }

    /// Closes `id` in the background, logging a failure (for disconnects and replaced episodes).
    pub fn close_later(&self, id: String) {
        let gw = self.clone();
        // Outside a runtime (a process shutting down) there is nothing left to close it on.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        runtime.spawn(async move {
            if let Err(s) = gw.close(&id).await {
                tracing::debug!(episode_id = %name(&id), error = %s.message(), "close after disconnect");
            }
        });
    }
}

/// Is `tool` one of the six tools (after trimming, as [`llm_calls::parse_call`] reads it)?
pub fn is_tool(tool: &str) -> bool {
    TOOL_NAMES.contains(&tool.trim())
}

/// The six tools' OpenAI function schemas (ListTools'), with the bounds of `gw`'s tool limits.
pub fn tool_schemas(gw: &Gateway) -> Vec<Value> {
    llm_calls::tool_schemas(&gw.env().config().limits.tools)
}

/// Reads the episode-opening keys into a CreateEpisode request (question_id may stay empty).
fn open_request(args: &Map<String, Value>) -> Result<pb::CreateEpisodeRequest, Status> {
    if let Some(k) = args.keys().find(|k| !OPEN_KEYS.iter().any(|(n, _, _)| n == k)) {
        let names: Vec<&str> = OPEN_KEYS.iter().map(|(n, _, _)| *n).collect();
        return Err(crate::api::status::invalid(format!("{}: unknown key (expected one of {})", name(k), names.join(", "))));
    }
    let get = |k: &str| args.get(k).filter(|v| !v.is_null());
    let string = |k: &str| -> Result<String, Status> {
        match get(k) {
            None => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(v) => Err(crate::api::status::invalid(format!("{k}: must be a string, got {}", kind(v)))),
        }
    };
    let uint = |k: &str| -> Result<Option<u64>, Status> {
        match get(k) {
            None => Ok(None),
            Some(Value::Number(n)) => n
                .as_u64()
                .or_else(|| n.as_f64().filter(|f| f.is_finite() && f.fract() == 0.0 && *f >= 0.0 && *f < 9.0e15).map(|f| f as u64))
                .map(Some)
                .ok_or_else(|| crate::api::status::invalid(format!("{k}: must be a non-negative integer, got {n}"))),
            Some(v) => Err(crate::api::status::invalid(format!("{k}: must be a non-negative integer, got {}", kind(v)))),
        }
    };
    let max_steps = match uint("max_steps")? {
        None => None,
        Some(n) => Some(u32::try_from(n).map_err(|_| crate::api::status::invalid(format!("max_steps: too large ({n})")))?),
    };
    let include_adversarial = match get("include_adversarial") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(v) => return Err(crate::api::status::invalid(format!("include_adversarial: must be a boolean, got {}", kind(v)))),
    };
    let given = string("evaluator")?;
    let evaluator = match given.trim() {
        "" => pb::Evaluator::Unspecified,
        // The server's names ("answer-recall", as breakdowns report them) or with underscores.
        name => match Evaluator::parse(&name.to_ascii_lowercase().replace('_', "-")) {
            Ok(e) => crate::api::grpc::convert::evaluator_out(e),
            Err(_) => {
                return Err(crate::api::status::invalid(format!(
                    "evaluator: must be one of {}, got {}",
                    evaluator_names().join(", "),
                    quoted(&given)
                )))
            }
        },
    };
    Ok(pb::CreateEpisodeRequest {
        episode_id: string("episode_id")?,
        conversation_id: string("conversation_id")?,
        question_id: string("question_id")?,
        custom: None,
        seed: uint("seed")?,
        max_steps,
        include_adversarial,
        evaluator: evaluator as i32,
    })
}

/// The JSON type name of `v`, for error messages.
pub use crate::util::json::kind_of as kind;

/// A JSON array's items read by `item`, refusing the first that is not `what`, naming it (`field[i]`).
fn json_list<T>(v: &Value, field: &str, item: impl Fn(&Value) -> Option<T>, what: &str) -> Result<Vec<T>, Status> {
    let Value::Array(items) = v else { return Err(crate::api::status::invalid(format!("{field}: must be an array, got {}", kind(v)))) };
    items
        .iter()
        .enumerate()
        .map(|(i, x)| item(x).ok_or_else(|| crate::api::status::invalid(format!("{field}[{i}]: must be {what}, got {}", kind(x)))))
        .collect()
}

/// An episode's state as JSON (`created` for create_episode and reset).
pub fn episode_json(s: &EpisodeState, created: Option<bool>) -> Value {
    let EpisodeState {
        episode_id,
        conversation_id,
        question_id,
        question,
        steps_used,
        max_steps,
        memory_count,
        initial_memory_count,
        done,
        scored,
        seed,
        rejected_calls,
        evaluator,
    } = s;
    let mut v = json!({
        "episode_id": episode_id, "question": question, "conversation_id": conversation_id, "question_id": question_id,
        "initial_memory_count": initial_memory_count, "memory_count": memory_count, "max_steps": max_steps,
        "steps_used": steps_used, "steps_left": s.steps_left(), "done": done, "scored": scored, "seed": seed,
        "rejected_calls": rejected_calls, "evaluator": evaluator.name(),
    });
    if let Some(c) = created {
        v["created"] = Value::Bool(c);
    }
    v
}

fn memory_json(m: &pb::Memory) -> Value {
    let pb::Memory { id, text, memory_type, speaker, session, session_date, evidence, source, created_step } = m;
    let memory_type = match pb::MemoryType::try_from(*memory_type) {
        Ok(pb::MemoryType::Episodic) => "episodic",
        Ok(pb::MemoryType::Semantic) => "semantic",
        Ok(pb::MemoryType::Procedural) => "procedural",
        Ok(pb::MemoryType::Unspecified) | Err(_) => "unspecified",
    };
    json!({"id": id, "text": text, "memory_type": memory_type, "speaker": speaker, "session": session,
        "session_date": session_date, "evidence": evidence, "source": source, "created_step": created_step})
}

fn step_json(s: &Option<pb::StepInfo>) -> Value {
    match s {
        Some(pb::StepInfo { step, steps_left, done }) => json!({"step": step, "steps_left": steps_left, "done": done}),
        None => Value::Null,
    }
}

/// A tool's typed result as JSON: `tool`, `text`, `step`, and the typed response's own fields.
fn result_json(tool: &str, text: &str, r: R) -> Value {
    let mut v = json!({"tool": tool, "text": text});
    let (step, extra) = match &r {
        R::Search(pb::SearchResponse { results, text: _, step }) => (
            step,
            json!({"results": results.iter().map(|s| json!({"score": s.score, "memory": s.memory.as_ref().map(memory_json)})).collect::<Vec<_>>()}),
        ),
        R::Manage(pb::ManageResponse { memory, text: _, step }) => (step, json!({"memory": memory.as_ref().map(memory_json)})),
        R::Delete(pb::DeleteResponse { deleted_ids, memory_count, text: _, step }) => {
            (step, json!({"deleted_ids": deleted_ids, "memory_count": memory_count}))
        }
        R::Sample(pb::SampleResponse { memories, text: _, step }) => {
            (step, json!({"memories": memories.iter().map(memory_json).collect::<Vec<_>>()}))
        }
        R::Merge(pb::MergeResponse { memory, removed_ids, text: _, step }) => {
            (step, json!({"memory": memory.as_ref().map(memory_json), "removed_ids": removed_ids}))
        }
        R::Split(pb::SplitResponse { parts, removed_id, text: _, step }) => {
            (step, json!({"parts": parts.iter().map(memory_json).collect::<Vec<_>>(), "removed_id": removed_id}))
        }
    };
    v["step"] = step_json(step);
    if let (Value::Object(o), Value::Object(e)) = (&mut v, extra) {
        o.extend(e);
    }
    v
}

/// ScoreEpisodeResponse as JSON, field for field.
pub fn breakdown_json(r: pb::ScoreEpisodeResponse) -> Value {
    let pb::ScoreEpisodeResponse {
        p_old,
        p_new,
        performance_delta,
        size_factor,
        density_factor,
        change_factor,
        memory_efficiency,
        reward,
        evidence_recall_old,
        evidence_recall_new,
        initial_memory_count,
        final_memory_count,
        n_max,
        top_k,
        evaluator,
        embedder,
        retrieved_old,
        retrieved_new,
        evidence_total,
        steps_used,
        llm_model,
        answer_old,
        answer_new,
        f1_old,
        f1_new,
        judge_old,
        judge_new,
        reward_formula,
        growth,
        context,
        context_chars_old,
        context_chars_new,
        metrics,
        others,
        others_term,
        words_initial,
        words_added,
        words_removed,
    } = r;
    let others = others.map(|o| {
        let pb::OtherQuestions {
            count,
            rescored,
            improved,
            damaged,
            mean_delta,
            gain,
            damage,
            llm_scored,
            evaluator,
            destroyed,
            displaced,
        } = o;
        json!({
            "count": count, "rescored": rescored, "improved": improved, "damaged": damaged, "mean_delta": mean_delta,
            "gain": gain, "damage": damage, "llm_scored": llm_scored, "evaluator": evaluator,
            "destroyed": destroyed, "displaced": displaced,
        })
    });
    json!({
        "p_old": p_old, "p_new": p_new, "performance_delta": performance_delta, "size_factor": size_factor,
        "density_factor": density_factor, "change_factor": change_factor, "memory_efficiency": memory_efficiency,
        "reward": reward, "evidence_recall_old": evidence_recall_old, "evidence_recall_new": evidence_recall_new,
        "initial_memory_count": initial_memory_count, "final_memory_count": final_memory_count, "n_max": n_max,
        "top_k": top_k, "evaluator": evaluator, "embedder": embedder, "retrieved_old": retrieved_old,
        "retrieved_new": retrieved_new, "evidence_total": evidence_total, "steps_used": steps_used,
        "llm_model": llm_model, "answer_old": answer_old, "answer_new": answer_new, "f1_old": f1_old, "f1_new": f1_new,
        "judge_old": judge_old, "judge_new": judge_new, "reward_formula": reward_formula, "growth": growth,
        "context": context, "context_chars_old": context_chars_old, "context_chars_new": context_chars_new,
        "metrics": metrics.into_iter().collect::<std::collections::BTreeMap<_, _>>(),
        "others": others, "others_term": others_term, "words_initial": words_initial, "words_added": words_added,
        "words_removed": words_removed,
    })
}

/// One line for the policy after scoring.
pub fn score_text(b: &Value) -> String {
    let f = |k: &str| b[k].as_f64().unwrap_or(f64::NAN);
    let (delta, p_old, p_new) = (f("performance_delta"), f("p_old"), f("p_new"));
    match b["reward_formula"].as_str() {
        Some("memupdate") => format!(
            "Scored: reward {:.4} = performance delta {delta:.4} (p {p_old:.4} -> {p_new:.4}) x memory efficiency {:.4}.",
            f("reward"),
            f("memory_efficiency")
        ),
        Some("delta-growth") => format!(
            "Scored: reward {:.4} = performance delta {delta:.4} (p {p_old:.4} -> {p_new:.4}) - growth {:.4}.",
            f("reward"),
            f("growth")
        ),
        _ => {
            let words = |k: &str| f(k) / f("words_initial").max(1.0);
            format!(
                "Scored: reward {:.4} = performance delta {delta:.4} (p {p_old:.4} -> {p_new:.4}) + the rest of memory {:.4} \
                 - words added {:.4} - words removed {:.4}.",
                f("reward"),
                f("others_term"),
                words("words_added"),
                words("words_removed")
            )
        }
    }
}

#[cfg(test)]
mod tests;
