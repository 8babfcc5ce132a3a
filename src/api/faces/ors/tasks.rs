//! ORS discovery: the one environment, its tools (the six memory tools and `submit`), its splits and
//! their tasks. A task is a LoCoMo question (category 5 left out); its spec is what a trainer's dataset
//! row holds (TRL folds it into the row's columns), so it carries the question and its ids and never the
//! gold answer.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Map, Value};

use super::{body_object, check_env, known_keys, opt_int, opt_string, Ors, OrsError};
use crate::dataset::{Dataset, Question, Split, ADVERSARIAL_CATEGORY};
use crate::util::excerpt::quoted;

/// The environment's name (`GET /list_environments`, the `/{env_name}/` routes).
pub const ENV_NAME: &str = "memgym";

/// The tool that scores the episode and ends the session.
pub const SUBMIT: &str = "submit";

/// What `submit` says to the policy.
fn submit_description() -> String {
    format!("Finish: score the memory as it is now and end the episode: {}. No tool call is accepted after it.", crate::reward::IN_BRIEF)
}

/// The tools as ORS lists them (`GET /tools`, `GET /task_tools`): the six memory tools with the server's
/// schemas, then `submit`, which takes no arguments.
pub(super) fn tool_list(ors: &Ors) -> Value {
    let mut tools: Vec<Value> = crate::api::faces::gateway::tool_schemas(&ors.gateway)
        .into_iter()
        .map(|s| {
            let f = &s["function"];
            json!({"name": f["name"], "description": f["description"], "input_schema": f["parameters"]})
        })
        .collect();
    tools.push(json!({"name": SUBMIT, "description": submit_description(),
        "input_schema": {"type": "object", "properties": {}, "required": []}}));
    json!({"tools": tools, "terminal_tool": null, "supports_score_group": false, "message_block_types": ["text"]})
}

/// `GET /tools`.
pub(super) async fn tools(State(ors): State<Arc<Ors>>, env_name: Option<Path<String>>) -> Result<Json<Value>, OrsError> {
    check_env(&env_name)?;
    Ok(Json(tool_list(&ors)))
}

/// `GET /splits`.
pub(super) async fn splits(env_name: Option<Path<String>>) -> Result<Json<Value>, OrsError> {
    check_env(&env_name)?;
    let splits: Vec<Value> = Split::ALL.iter().map(|s| json!({"name": s.as_str(), "type": s.as_str()})).collect();
    Ok(Json(Value::Array(splits)))
}

/// A task's spec: the question's ids, its text, its category and its split.
pub fn task_spec(q: &Question) -> Value {
    json!({"question_id": q.id, "conversation_id": q.conversation_id, "question": q.question, "category": q.category,
        "split": q.split.as_str()})
}

/// The tasks of `split`, in dataset order.
pub(super) fn tasks_of(ds: &Dataset, split: Split) -> Vec<&Question> {
    ds.questions.iter().filter(|q| q.split == split && q.category != ADVERSARIAL_CATEGORY).collect()
}

/// The split `body["split"]` names (required).
pub(super) fn split_of(body: &Map<String, Value>) -> Result<Split, OrsError> {
    let Some(s) = opt_string(body, "split")? else { return Err(OrsError::BadRequest("split: is required".into())) };
    s.parse().map_err(|_| OrsError::BadRequest(format!("split: unknown split {} (expected train or test)", quoted(&s))))
}

/// Task `index` of `n` (a negative index counts from the end, as Python's does).
pub(super) fn resolve_index(index: i64, n: usize) -> Result<usize, OrsError> {
    let n_i = i64::try_from(n).unwrap_or(i64::MAX);
    let i = if index < 0 { index.saturating_add(n_i) } else { index };
    if (0..n_i).contains(&i) {
        Ok(i as usize)
    } else {
        Err(OrsError::BadRequest(format!("index: {index} is out of range: the split has {n} tasks")))
    }
}

/// A request body read strictly with only `known` keys.
fn read(body: &[u8], known: &[&str]) -> Result<Map<String, Value>, OrsError> {
    let b = body_object(body)?;
    known_keys(&b, known)?;
    Ok(b)
}

/// `POST /tasks` `{"split"}`: every task of the split.
pub(super) async fn list_tasks(State(ors): State<Arc<Ors>>, env_name: Option<Path<String>>, body: Bytes) -> Result<Json<Value>, OrsError> {
    check_env(&env_name)?;
    let split = split_of(&read(&body, &["split"])?)?;
    let ds = ors.gateway.env().dataset();
    let tasks: Vec<Value> = tasks_of(ds, split).into_iter().map(task_spec).collect();
    Ok(Json(json!({"tasks": tasks, "env_name": ENV_NAME})))
}

/// `POST /num_tasks` `{"split"}`.
pub(super) async fn num_tasks(State(ors): State<Arc<Ors>>, env_name: Option<Path<String>>, body: Bytes) -> Result<Json<Value>, OrsError> {
    check_env(&env_name)?;
    let split = split_of(&read(&body, &["split"])?)?;
    Ok(Json(json!({"num_tasks": tasks_of(ors.gateway.env().dataset(), split).len()})))
}

/// `POST /task` `{"split", "index"}`.
pub(super) async fn get_task(State(ors): State<Arc<Ors>>, env_name: Option<Path<String>>, body: Bytes) -> Result<Json<Value>, OrsError> {
    check_env(&env_name)?;
    let b = read(&body, &["split", "index"])?;
    let split = split_of(&b)?;
    let Some(index) = opt_int(&b, "index")? else { return Err(OrsError::BadRequest("index: is required".into())) };
    let tasks = tasks_of(ors.gateway.env().dataset(), split);
    let q = tasks[resolve_index(index, tasks.len())?];
    Ok(Json(json!({"task": task_spec(q), "env_name": ENV_NAME})))
}

/// `POST /task_range` `{"split", "start", "stop"}`: the tasks of `range(start, stop)` with Python's
/// slice rules (either end may be absent or negative; out-of-range ends are clipped).
pub(super) async fn task_range(State(ors): State<Arc<Ors>>, env_name: Option<Path<String>>, body: Bytes) -> Result<Json<Value>, OrsError> {
    check_env(&env_name)?;
    let b = read(&body, &["split", "start", "stop"])?;
    let split = split_of(&b)?;
    let tasks = tasks_of(ors.gateway.env().dataset(), split);
    let n = i64::try_from(tasks.len()).unwrap_or(i64::MAX);
    let clip = |v: Option<i64>, default: i64| {
        let v = v.unwrap_or(default);
        (if v < 0 { v.saturating_add(n) } else { v }).clamp(0, n) as usize
    };
    let (start, stop) = (clip(opt_int(&b, "start")?, 0), clip(opt_int(&b, "stop")?, n));
    let page: Vec<Value> = tasks.get(start..stop.max(start)).unwrap_or_default().iter().map(|q| task_spec(q)).collect();
    Ok(Json(json!({"tasks": page, "env_name": ENV_NAME})))
}

/// The episode-opening options a `task_spec` may carry beside the task's own keys.
const SPEC_OPTIONS: [&str; 3] = ["seed", "max_steps", "evaluator"];

/// The question a `task_spec` names (by `question_id`), and the CreateEpisode keys it carries: any other
/// key of the task's spec must hold that task's value (a spec of another dataset is refused, naming it).
pub(super) fn from_spec<'a>(ds: &'a Dataset, spec: &Value) -> Result<(&'a Question, Map<String, Value>), OrsError> {
    let Value::Object(spec) = spec else {
        return Err(OrsError::BadRequest(format!("task_spec: must be an object, got {}", crate::util::json::kind_of(spec))));
    };
    let Some(Value::String(id)) = spec.get("question_id") else {
        return Err(OrsError::BadRequest("task_spec.question_id: is required (a string, as /tasks lists it)".into()));
    };
    let Some(q) = ds.question(id) else {
        return Err(OrsError::BadRequest(format!("task_spec.question_id: question {} not found", quoted(id))));
    };
    let canonical = task_spec(q);
    let mut options = Map::new();
    for (k, v) in spec {
        if SPEC_OPTIONS.contains(&k.as_str()) {
            options.insert(k.clone(), v.clone());
        } else if canonical.get(k).is_none() {
            let mut known: Vec<&str> = canonical.as_object().map(|o| o.keys().map(String::as_str).collect()).unwrap_or_default();
            known.extend(SPEC_OPTIONS);
            return Err(OrsError::BadRequest(format!(
                "task_spec.{}: unknown key (expected {})",
                crate::util::excerpt::name(k),
                known.join(", ")
            )));
        } else if canonical[k.as_str()] != *v {
            return Err(OrsError::BadRequest(format!(
                "task_spec.{k}: does not match question {} ({} here)",
                quoted(id),
                canonical[k.as_str()]
            )));
        }
    }
    if q.category == ADVERSARIAL_CATEGORY {
        return Err(OrsError::BadRequest(format!(
            "task_spec.question_id: {} is adversarial (category 5), which is not an ORS task",
            quoted(id)
        )));
    }
    Ok((q, options))
}
