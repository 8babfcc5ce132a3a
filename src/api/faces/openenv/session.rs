//! One OpenEnv environment instance: at most one episode, the OpenEnv step counter, and the three actions
//! (`list_tools`, `call_tool`, `score`). The WebSocket loop drives one per connection; the stateless HTTP
//! `/reset` and `/step` drive a throwaway one per request. Observations follow OpenEnv's serialisation:
//! `{"observation": {...fields, "metadata"}, "reward", "done"}` plus a top-level `metadata` when non-empty.

use serde_json::{json, Map, Value};
use tonic::{Code, Status};

use crate::api::faces::gateway::{episode_json, is_tool, kind, score_text, tool_schemas, Gateway};
use crate::api::status::{fault_of, Fault};
use crate::episode::EpisodeState;

/// OpenEnv's WebSocket error codes (`WSErrorCode`) that memgym sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// A frame that is not JSON.
    InvalidJson,
    /// A message `type` that is not reset, step, state, close or mcp.
    UnknownType,
    /// A message or action of the wrong shape (extra keys, wrong types, bad reset keys).
    Validation,
    /// The environment refused the request (no episode yet, scoring failed).
    Execution,
    /// The server is at its session cap.
    CapacityReached,
    /// A `session_id` that names no session.
    Session,
}

impl ErrorCode {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidJson => "INVALID_JSON",
            ErrorCode::UnknownType => "UNKNOWN_TYPE",
            ErrorCode::Validation => "VALIDATION_ERROR",
            ErrorCode::Execution => "EXECUTION_ERROR",
            ErrorCode::CapacityReached => "CAPACITY_REACHED",
            ErrorCode::Session => "SESSION_ERROR",
        }
    }
}

/// A request the session could not serve.
#[derive(Debug, Clone)]
pub struct Failure {
    /// OpenEnv's code.
    pub code: ErrorCode,
    /// What went wrong, naming the field.
    pub message: String,
    /// The environment's status code, when the environment refused (the HTTP routes map it).
    pub status: Option<Code>,
    /// The refusal's reason and whether it is retryable ([`crate::api::status::reason_of`]).
    pub reason: Option<(String, bool)>,
}

impl Failure {
    pub(super) fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Failure { code, message: message.into(), status: None, reason: None }
    }

    /// A status from the environment: the caller's fault (a bad value, an unknown question, an id in use)
    /// is a validation error, the rest execution errors ([`fault_of`]).
    fn from_status(s: &Status) -> Self {
        let code = match fault_of(s) {
            Fault::Call | Fault::Client => ErrorCode::Validation,
            Fault::EpisodeOver | Fault::Timeout | Fault::Server => ErrorCode::Execution,
        };
        Failure { code, message: s.message().to_string(), status: Some(s.code()), reason: crate::api::status::reason_of(s) }
    }
}

/// One environment instance.
#[derive(Debug)]
pub struct Session {
    gw: Gateway,
    episode: Option<String>,
    step_count: u64,
}

/// Observation fields; every one is present on the wire (`null` when not applicable).
#[derive(Debug, Default)]
struct Obs {
    text: String,
    question: Option<String>,
    tool_name: Option<String>,
    result: Option<Value>,
    error: Option<Value>,
    tools: Option<Value>,
    reward: Option<f64>,
    done: bool,
    metadata: Option<Value>,
}

impl Session {
    /// A session without an episode.
    pub fn new(gw: Gateway) -> Self {
        Session { gw, episode: None, step_count: 0 }
    }

    /// Opens an episode from the reset data (closing the previous one).
    pub async fn reset(&mut self, data: &Map<String, Value>) -> Result<Value, Failure> {
        let opened = self.gw.open(data).await.map_err(|s| Failure::from_status(&s))?;
        if !opened.created {
            // A reset opens a new episode: one that is live already (another connection's, or this one's)
            // is not taken over.
            return Err(Failure {
                code: ErrorCode::Validation,
                message: format!(
                    "episode_id: episode {} is already open; a reset needs a new id",
                    crate::util::excerpt::quoted(&opened.state.episode_id)
                ),
                status: Some(Code::AlreadyExists),
                reason: Some(("EPISODE_EXISTS".into(), false)),
            });
        }
        if let Some(old) = self.episode.replace(opened.state.episode_id.clone()) {
            self.gw.close_later(old);
        }
        self.step_count = 0;
        let s = &opened.state;
        let text = format!(
            "Question: {}\nThe memory holds {} memories; you have {} tool calls. Edit it so that the question can be answered from it, then score.",
            s.question,
            s.memory_count,
            s.steps_left()
        );
        let mut metadata = episode_json(s, Some(opened.created));
        if let Value::Object(o) = &mut metadata {
            o.remove("question");
        }
        Ok(self.render(s, Obs { text, question: Some(s.question.clone()), metadata: Some(metadata), ..Obs::default() }))
    }

    /// Runs one action.
    pub async fn step(&mut self, action: &Value) -> Result<Value, Failure> {
        let action = Action::parse(action)?;
        let Some(id) = self.episode.clone() else {
            return Err(Failure::new(ErrorCode::Execution, "no episode: send a reset first"));
        };
        let obs = match action {
            Action::ListTools => {
                let tools: Vec<Value> = tool_schemas(&self.gw)
                    .iter()
                    .map(|s| json!({"name": s["function"]["name"], "description": s["function"]["description"], "input_schema": s["function"]["parameters"]}))
                    .collect();
                let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
                Obs { text: format!("Tools: {}", names.join(", ")), tools: Some(Value::Array(tools)), reward: Some(0.0), ..Obs::default() }
            }
            Action::CallTool { name, arguments } => self.call(&id, name, &arguments).await?,
            Action::Score => {
                let b = self.gw.score(&id).await.map_err(|s| Failure::from_status(&s))?;
                let reward = b["reward"].as_f64();
                Obs { text: score_text(&b), reward, done: true, metadata: Some(b), ..Obs::default() }
            }
        };
        self.step_count += 1;
        let state = self.gw.state(&id).await.map_err(|s| Failure::from_status(&s))?;
        Ok(self.render(&state, obs))
    }

    async fn call(&self, id: &str, name: String, arguments: &Value) -> Result<Obs, Failure> {
        let called = self.gw.call(id, &name, arguments, None).await;
        // The name goes back in the observation: a prefix of an unknown one at most.
        let name = if is_tool(&name) { name } else { crate::util::excerpt::cut(&name) };
        match called {
            Ok(c) => {
                let mut obs = Obs { text: c.text, tool_name: Some(name), result: Some(c.structured), reward: Some(0.0), ..Obs::default() };
                if c.done {
                    // The budget is spent: the episode's reward is this step's.
                    let b = self.gw.score(id).await.map_err(|s| Failure::from_status(&s))?;
                    obs.text = format!("{}\n{}", obs.text, score_text(&b));
                    obs.reward = b["reward"].as_f64();
                    obs.done = true;
                    obs.metadata = Some(b);
                }
                Ok(obs)
            }
            Err(s) => {
                // OpenEnv's error types, by whose fault the refusal is (the one rule, api::status).
                let error_type = match fault_of(&s) {
                    Fault::Call if !is_tool(&name) => "tool_not_found",
                    Fault::Call => "invalid_args",
                    Fault::Timeout => "timeout",
                    Fault::EpisodeOver | Fault::Client | Fault::Server => "execution_error",
                };
                let done = self.gw.state(id).await.map(|st| st.done).unwrap_or(true);
                Ok(Obs {
                    text: format!("Error: {}", s.message()),
                    tool_name: Some(name),
                    error: Some({
                        let mut e = crate::api::status::error_json(&s);
                        e["error_type"] = json!(error_type);
                        e
                    }),
                    reward: Some(0.0),
                    done,
                    ..Obs::default()
                })
            }
        }
    }

    /// OpenEnv's `State`: `episode_id` and `step_count`, plus the episode's own fields.
    pub async fn state(&self) -> Value {
        let Some(id) = &self.episode else { return json!({"episode_id": null, "step_count": 0}) };
        let mut v = match self.gw.state(id).await {
            Ok(s) => {
                let mut v = episode_json(&s, None);
                if let Value::Object(o) = &mut v {
                    o.remove("seed");
                    o.remove("rejected_calls");
                }
                v
            }
            Err(s) => json!({"episode_id": id, "ended": s.message()}),
        };
        v["step_count"] = json!(self.step_count);
        v
    }

    /// Closes the episode, if any, in the background.
    pub fn end(&mut self) {
        if let Some(id) = self.episode.take() {
            self.gw.close_later(id);
        }
    }

    /// Closes the episode, if any, and waits.
    pub async fn end_now(&mut self) {
        if let Some(id) = self.episode.take() {
            let _ = self.gw.close(&id).await;
        }
    }

    fn render(&self, st: &EpisodeState, o: Obs) -> Value {
        let Obs { text, question, tool_name, result, error, tools, reward, done, metadata } = o;
        let metadata = metadata.unwrap_or_else(|| json!({}));
        let mut data = json!({
            "observation": {
                "episode_id": st.episode_id, "text": text, "question": question, "tool_name": tool_name, "result": result,
                "error": error, "tools": tools, "steps_used": st.steps_used, "steps_left": st.steps_left(),
                "memory_count": st.memory_count, "metadata": metadata,
            },
            "reward": reward,
            "done": done || st.done,
        });
        if metadata.as_object().is_some_and(|m| !m.is_empty()) {
            data["metadata"] = metadata;
        }
        data
    }
}

impl Drop for Session {
    /// A session dropped with its episode (a client gone mid-request, a task aborted) closes it.
    fn drop(&mut self) {
        self.end();
    }
}

/// The three actions.
#[derive(Debug)]
pub(super) enum Action {
    ListTools,
    CallTool { name: String, arguments: Value },
    Score,
}

impl Action {
    pub(super) fn parse(v: &Value) -> Result<Action, Failure> {
        let bad = |m: String| Failure::new(ErrorCode::Validation, m);
        let Value::Object(o) = v else { return Err(bad(format!("action: must be a JSON object, got {}", kind(v)))) };
        let ty = match o.get("type") {
            Some(Value::String(t)) => t.as_str(),
            Some(v) => return Err(bad(format!("action.type: must be a string, got {}", kind(v)))),
            None => return Err(bad("action.type: is required (list_tools, call_tool or score)".into())),
        };
        let allowed: &[&str] = match ty {
            "list_tools" | "score" => &["type", "metadata"],
            "call_tool" => &["type", "tool_name", "arguments", "metadata"],
            other => {
                return Err(bad(format!(
                    "action.type: must be list_tools, call_tool or score, got {}",
                    crate::util::excerpt::quoted(other)
                )))
            }
        };
        if let Some(k) = o.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(bad(format!("action.{}: unknown key for {ty} (expected {})", crate::util::excerpt::name(k), allowed.join(", "))));
        }
        Ok(match ty {
            "list_tools" => Action::ListTools,
            "score" => Action::Score,
            _ => {
                let name = match o.get("tool_name") {
                    Some(Value::String(s)) => s.clone(),
                    Some(v) => return Err(bad(format!("action.tool_name: must be a string, got {}", kind(v)))),
                    None => return Err(bad("action.tool_name: is required".into())),
                };
                let arguments = match o.get("arguments") {
                    None | Some(Value::Null) => Value::Object(Map::new()),
                    Some(a @ Value::Object(_)) => a.clone(),
                    Some(v) => return Err(bad(format!("action.arguments: must be a JSON object, got {}", kind(v)))),
                };
                Action::CallTool { name, arguments }
            }
        })
    }
}
