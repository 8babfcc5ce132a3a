//! The ORS session routes: `/create_session`, `/create`, `/delete`, `/ping`, `/prompt`, `/messages`,
//! `/task_tools` and `/call`. A call runs in its own task (a dropped stream does not abandon it: the SDK
//! reconnects with the call's `task_id` and gets its result) and is answered as SSE: `task_id`, then the
//! result's JSON in `chunk`s of at most 4096 bytes and a last `end`, or an `error`, with a keep-alive
//! comment every 10 s (the SDK gives up on a stream silent for 30 s).
//!
//! A tool's result is ORS's `RunToolOutput`: `{"ok": true, "output": {"blocks", "metadata", "reward",
//! "finished"}}`, or `{"ok": false, "error", "reason"}` for a call the policy got wrong (`input_validation`:
//! bad arguments, an unknown memory, an edit the memory cannot take; `not_found`: an unknown tool) or made
//! too late (`episode_finished`). Those are answers to the policy, in-band, as the SDK's own servers give
//! them; a server failure (the embedder or LLM endpoint down) is an `error` event.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::stream::{self, StreamExt};
use http::{HeaderMap, StatusCode};
use serde_json::{json, Map, Value};
use tonic::Status;

use super::sessions::{session_id, Creating, Finish, Live};
use super::tasks::{from_spec, resolve_index, split_of, tasks_of, tool_list, SUBMIT};
use super::{body_object, check_env, check_name, known_keys, opt_int, opt_string, Ors, OrsError};
use crate::api::faces::gateway::{is_tool, score_text, Called};
use crate::api::status::code_name;
use crate::api::status::{reason_of, Fault};
use crate::dataset::verl::{prompt_messages, SYSTEM_PROMPT};
use crate::episode::EpisodeState;
use crate::tools::TOOL_NAMES;
use crate::util::excerpt::{name, quoted};

/// Bytes of a result per SSE event at most (the SDK's servers chunk at 4096 characters).
const CHUNK_BYTES: usize = 4096;

/// How often an SSE stream with nothing to say sends a keep-alive comment.
const KEEP_ALIVE: Duration = Duration::from_secs(10);

/// Whether a refusal says the episode is gone (closed, reaped, forgotten, or on another replica).
fn is_gone(s: &Status) -> bool {
    matches!(reason_of(s).as_ref().map(|(r, _)| r.as_str()), Some("EPISODE_NOT_FOUND" | "EPISODE_ENDED" | "WRONG_REPLICA"))
}

/// A gateway refusal on a session's episode: 410 when the episode is gone, else by its code.
fn on_episode(s: Status) -> OrsError {
    if is_gone(&s) {
        OrsError::Gone(format!("X-Session-ID: the session's episode ended: {}", s.message()))
    } else {
        OrsError::Status(s)
    }
}

/// The live session of the request and its episode's state.
async fn live_state(ors: &Ors, headers: &HeaderMap) -> Result<(String, Live, EpisodeState), OrsError> {
    let sid = session_id(headers)?;
    let live = ors.sessions.live(&sid)?;
    let state = ors.gateway.state(&live.episode_id).await.map_err(on_episode)?;
    Ok((sid, live, state))
}

/// Closes episodes in the background (dropped sessions).
fn close_all(ors: &Ors, episodes: Vec<String>) {
    for id in episodes {
        ors.gateway.close_later(id);
    }
}

/// `POST /create_session`: a new session id. As SSE (`task_id` with the id, then `end` with
/// `{"sid"}`) when the client accepts `text/event-stream`, as the SDK does; else `{"sid"}`.
pub(super) async fn create_session(State(ors): State<Arc<Ors>>, headers: HeaderMap, body: Bytes) -> Result<Response, OrsError> {
    let b = body_object(&body)?;
    if b.get("env").is_some_and(|v| !v.is_null()) {
        return Err(OrsError::BadRequest("env: memgym takes no environment overrides".into()));
    }
    known_keys(&b, &["env"])?;
    let (sid, dropped) = ors.sessions.mint()?;
    close_all(&ors, dropped);
    let sse = headers.get(http::header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("text/event-stream"));
    if !sse {
        return Ok(Json(json!({"sid": sid})).into_response());
    }
    let events = vec![Event::default().event("task_id").data(&sid), Event::default().event("end").data(json!({"sid": sid}).to_string())];
    Ok(sse_response(stream::iter(events)))
}

/// `POST /create` (X-Session-ID) `{"task_spec"}` or `{"split", "index"}`, optionally `env_name`
/// (memgym), `toolset_name` (null: memgym serves no toolsets) and `secrets` (ignored): opens the
/// session's episode. Sent again for the same task it answers as before; for another task it is refused.
pub(super) async fn create(State(ors): State<Arc<Ors>>, headers: HeaderMap, body: Bytes) -> Result<Json<Value>, OrsError> {
    let sid = session_id(&headers)?;
    let b = body_object(&body)?;
    known_keys(&b, &["env_name", "task_spec", "split", "index", "toolset_name", "secrets"])?;
    if let Some(e) = opt_string(&b, "env_name")? {
        check_name(&e)?;
    }
    if opt_string(&b, "toolset_name")?.is_some() {
        return Err(OrsError::BadRequest("toolset_name: memgym serves no toolsets (send null)".into()));
    }
    if let Some(v) = b.get("secrets").filter(|v| !v.is_null() && !v.is_object()) {
        return Err(OrsError::BadRequest(format!("secrets: must be an object, got {}", crate::util::json::kind_of(v))));
    }
    let ds = ors.gateway.env().dataset();
    let spec = b.get("task_spec").filter(|v| !v.is_null());
    let (split_given, index) = (b.get("split").is_some_and(|v| !v.is_null()), opt_int(&b, "index")?);
    let (question, mut open) = match (spec, split_given, index) {
        (Some(_), true, _) | (Some(_), _, Some(_)) => {
            return Err(OrsError::BadRequest("task_spec: give task_spec, or split and index, not both".into()))
        }
        (Some(spec), false, None) => from_spec(ds, spec)?,
        (None, true, Some(index)) => {
            let tasks = tasks_of(ds, split_of(&b)?);
            (tasks[resolve_index(index, tasks.len())?], Map::new())
        }
        (None, true, None) => return Err(OrsError::BadRequest("index: is required with split".into())),
        (None, false, Some(_)) => return Err(OrsError::BadRequest("split: is required with index".into())),
        (None, false, None) => return Err(OrsError::BadRequest("task_spec: is required (or split and index)".into())),
    };
    let question_id = question.id.clone();
    let live = match ors.sessions.begin_create(&sid, &question_id)? {
        Creating::Again(live) => live,
        Creating::Open => {
            open.insert("question_id".into(), Value::String(question_id.clone()));
            match ors.gateway.open(&open).await {
                Err(s) => {
                    ors.sessions.end_create(&sid, None);
                    return Err(s.into());
                }
                Ok(opened) => {
                    let live = Live { episode_id: opened.state.episode_id, question_id, finished_by: None };
                    if !ors.sessions.end_create(&sid, Some(live.clone())) {
                        ors.gateway.close_later(live.episode_id);
                        return Err(OrsError::NoSession(sid));
                    }
                    live
                }
            }
        }
    };
    Ok(Json(json!({"sid": sid, "episode_id": live.episode_id})))
}

/// `POST /delete` and `POST /delete_session` (X-Session-ID): ends the session and closes its episode.
/// Idempotent: an unknown session is answered the same.
pub(super) async fn delete(State(ors): State<Arc<Ors>>, headers: HeaderMap) -> Result<Json<Value>, OrsError> {
    let sid = session_id(&headers)?;
    if let Some(episode) = ors.sessions.remove(&sid) {
        if let Err(s) = ors.gateway.close(&episode).await {
            if !is_gone(&s) {
                return Err(s.into());
            }
        }
    }
    Ok(Json(json!({"sid": sid})))
}

/// `POST /ping` (X-Session-ID): keeps the session and its episode from the idle sweep.
pub(super) async fn ping(State(ors): State<Arc<Ors>>, headers: HeaderMap) -> Result<Json<Value>, OrsError> {
    let sid = session_id(&headers)?;
    if let Some(episode) = ors.sessions.touch(&sid)? {
        ors.gateway.state(&episode).await.map_err(on_episode)?;
    }
    Ok(Json(json!({"status": "ok"})))
}

fn text_block(text: &str) -> Value {
    json!({"type": "text", "text": text, "detail": null})
}

/// The opening of the request's session: (role, text) of the system message and the user message (the
/// verl rows' and `memgym rollout`'s, `dataset::verl::prompt_messages`).
async fn opening(ors: &Ors, env_name: &Option<Path<String>>, headers: &HeaderMap) -> Result<[(&'static str, String); 2], OrsError> {
    check_env(env_name)?;
    let (_, _, state) = live_state(ors, headers).await?;
    Ok(prompt_messages(SYSTEM_PROMPT, &state.question))
}

/// `GET /prompt` (X-Session-ID): the opening as text blocks, the system message then the user message.
pub(super) async fn prompt(
    State(ors): State<Arc<Ors>>,
    env_name: Option<Path<String>>,
    headers: HeaderMap,
) -> Result<Json<Value>, OrsError> {
    let blocks = opening(&ors, &env_name, &headers).await?.iter().map(|(_, text)| text_block(text)).collect();
    Ok(Json(Value::Array(blocks)))
}

/// `GET /messages` (X-Session-ID): the opening as role-tagged messages (SDK 0.1.157).
pub(super) async fn messages(
    State(ors): State<Arc<Ors>>,
    env_name: Option<Path<String>>,
    headers: HeaderMap,
) -> Result<Json<Value>, OrsError> {
    let opening = opening(&ors, &env_name, &headers).await?;
    let messages = opening.iter().map(|(role, text)| json!({"role": role, "blocks": [text_block(text)], "detail": null})).collect();
    Ok(Json(Value::Array(messages)))
}

/// `GET /task_tools` (X-Session-ID): the session's tools, which are every session's.
pub(super) async fn task_tools(
    State(ors): State<Arc<Ors>>,
    env_name: Option<Path<String>>,
    headers: HeaderMap,
) -> Result<Json<Value>, OrsError> {
    check_env(&env_name)?;
    ors.sessions.touch(&session_id(&headers)?)?;
    Ok(Json(tool_list(&ors)))
}

/// `POST /score_group`: not offered (`supports_score_group` is false); 404, which the SDK reads as
/// unsupported.
pub(super) async fn score_group(env_name: Option<Path<String>>) -> Result<Response, OrsError> {
    check_env(&env_name)?;
    let detail = "score_group: memgym does not score groups (supports_score_group is false); each session's submit gives its reward";
    Ok((StatusCode::NOT_FOUND, Json(json!({"detail": detail}))).into_response())
}

/// A task id: 1 to 128 letters, digits, '.', '_', ':' or '-' (it becomes the episode's `call_id`).
fn valid_task_id(id: &str) -> Result<(), OrsError> {
    if id.is_empty() || id.len() > 128 || !id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')) {
        return Err(OrsError::BadRequest(format!("task_id: must be 1 to 128 letters, digits, '.', '_', ':' or '-', got {}", quoted(id))));
    }
    Ok(())
}

/// `POST /call` (X-Session-ID) `{"name", "input", "task_id"?}`: runs the tool, answered as SSE.
pub(super) async fn call(
    State(ors): State<Arc<Ors>>,
    env_name: Option<Path<String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, OrsError> {
    check_env(&env_name)?;
    let b = body_object(&body)?;
    known_keys(&b, &["name", "input", "task_id"])?;
    let Some(tool) = opt_string(&b, "name")? else { return Err(OrsError::BadRequest("name: is required (the tool to call)".into())) };
    let input = match b.get("input") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(o)) => o.clone(),
        Some(v) => return Err(OrsError::BadRequest(format!("input: must be an object, got {}", crate::util::json::kind_of(v)))),
    };
    let task_id = match opt_string(&b, "task_id")? {
        Some(t) => {
            valid_task_id(&t)?;
            t
        }
        None => format!("{:032x}", rand::random::<u128>()),
    };
    let (sid, live, _) = live_state(&ors, &headers).await?;
    let work = tokio::spawn(run(ors.clone(), sid, live, tool, input, task_id.clone()));
    let result = async move {
        let result = match work.await {
            Ok(r) => r,
            Err(e) => Err(format!("internal: the call failed ({e})")),
        };
        match result {
            Ok(v) => chunks(&v.to_string()),
            Err(message) => vec![Event::default().event("error").data(message.replace(['\r', '\n'], " "))],
        }
    };
    let events = stream::once(std::future::ready(vec![Event::default().event("task_id").data(task_id)]))
        .chain(stream::once(result))
        .flat_map(stream::iter);
    Ok(sse_response(events))
}

/// `text` as `chunk` events of at most [`CHUNK_BYTES`] (cut at character boundaries) and a last `end`.
fn chunks(text: &str) -> Vec<Event> {
    let mut out = Vec::new();
    let mut rest = text;
    loop {
        let mut cut = rest.len().min(CHUNK_BYTES);
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let (head, tail) = rest.split_at(cut);
        if tail.is_empty() {
            out.push(Event::default().event("end").data(head));
            return out;
        }
        out.push(Event::default().event("chunk").data(head));
        rest = tail;
    }
}

/// An SSE response of `events`, with keep-alive comments and the headers the SDK's servers send.
fn sse_response(events: impl futures_util::Stream<Item = Event> + Send + 'static) -> Response {
    let mut r = Sse::new(events.map(Ok::<_, Infallible>)).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)).into_response();
    r.headers_mut().insert(http::header::CACHE_CONTROL, http::HeaderValue::from_static("no-cache"));
    r.headers_mut().insert("x-accel-buffering", http::HeaderValue::from_static("no"));
    r
}

/// A tool's output: its text, metadata, reward (`null` until the episode is scored) and whether the
/// episode is over.
fn output(text: &str, metadata: Value, reward: Option<f64>, finished: bool) -> Value {
    json!({"ok": true, "output": {"blocks": [text_block(text)], "metadata": metadata, "reward": reward, "finished": finished}})
}

/// A call refused in-band, with ORS's reason.
fn refused(reason: &str, error: String) -> Value {
    json!({"ok": false, "error": error, "reason": reason})
}

fn finished_refusal(tool: &str) -> Value {
    refused(
        "episode_finished",
        format!("{} was not run: the episode has finished (a tool returned finished=true); open a new session", name(tool)),
    )
}

/// Runs one call of a session: the output JSON, or an `error` event's text.
async fn run(ors: Arc<Ors>, sid: String, live: Live, tool: String, input: Map<String, Value>, task_id: String) -> Result<Value, String> {
    let t = tool.trim();
    if t == SUBMIT {
        if let Some(k) = input.keys().next() {
            return Ok(refused("input_validation", format!("{}: unknown argument: submit takes none", name(k))));
        }
        return finish(&ors, &sid, &live, &task_id, None).await;
    }
    if !is_tool(t) {
        return Ok(refused("not_found", format!("tool {} not found (expected one of {}, {SUBMIT})", quoted(&tool), TOOL_NAMES.join(", "))));
    }
    if live.finished_by.as_ref().is_some_and(|by| *by != task_id) {
        return Ok(finished_refusal(t));
    }
    match ors.gateway.call(&live.episode_id, t, &Value::Object(input), Some(&task_id)).await {
        Ok(c) if c.done => finish(&ors, &sid, &live, &task_id, Some(c)).await,
        Ok(c) => Ok(output(&c.text, c.structured, None, false)),
        Err(s) => in_band(t, &s),
    }
}

/// Scores the episode for the call `task_id` that finishes it: `submit` (`called` None) or the call that
/// spent the last step (its result). The first such call gets the reward; another is refused.
async fn finish(ors: &Ors, sid: &str, live: &Live, task_id: &str, called: Option<Called>) -> Result<Value, String> {
    let claim = ors.sessions.finish(sid, task_id).map_err(|e| e.to_string())?;
    if matches!(claim, Finish::Taken) {
        return Ok(match called {
            // The edit was applied; the episode's reward went to the call that finished it.
            Some(c) => output(&c.text, c.structured, None, true),
            None => finished_refusal(SUBMIT),
        });
    }
    match ors.gateway.score(&live.episode_id).await {
        Ok(breakdown) => {
            let reward = breakdown["reward"].as_f64();
            let scored = score_text(&breakdown);
            let (text, mut metadata) = match called {
                Some(c) => (format!("{}\nThe step budget is spent. {scored}", c.text), c.structured),
                None => (scored, json!({})),
            };
            metadata["episode_id"] = Value::String(live.episode_id.clone());
            metadata["score"] = breakdown;
            Ok(output(&text, metadata, reward, true))
        }
        Err(s) => {
            if matches!(claim, Finish::First) {
                ors.sessions.unfinish(sid, task_id);
            }
            match called {
                // The edit stands; submit can score it once the failure passes.
                Some(c) => Ok(output(
                    &format!("{}\nThe step budget is spent; scoring failed ({}): call submit.", c.text, s.message()),
                    c.structured,
                    None,
                    false,
                )),
                None => Err(failure(&s)),
            }
        }
    }
}

/// A refused tool call: in-band when the policy caused it, an `error` event when the server failed.
fn in_band(tool: &str, s: &Status) -> Result<Value, String> {
    match crate::api::status::fault_of(s) {
        Fault::EpisodeOver => Ok(refused("episode_finished", format!("{} was not run: {}", name(tool), s.message()))),
        Fault::Call => Ok(refused("input_validation", s.message().to_string())),
        Fault::Timeout | Fault::Client | Fault::Server => Err(failure(s)),
    }
}

/// An `error` event's text for a server-side failure: the code, the reason and whether a retry may help.
fn failure(s: &Status) -> String {
    match reason_of(s) {
        Some((reason, retryable)) => format!("{} ({reason}, retryable: {retryable}): {}", code_name(s.code()), s.message()),
        None => format!("{}: {}", code_name(s.code()), s.message()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_chunked_at_character_boundaries() {
        let text = "é".repeat(3000); // 6000 bytes
        let events = chunks(&text);
        assert_eq!(events.len(), 2);
        let one = chunks("{}");
        assert_eq!(one.len(), 1);
        assert!(valid_task_id("0123abcdef").is_ok());
        let e = valid_task_id(&"x y".repeat(100)).unwrap_err().to_string();
        assert!(e.starts_with("task_id: must be") && e.len() < 300, "{e}");
    }
}
