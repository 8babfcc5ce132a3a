//! What a NeMo Gym `/seed_session` and `/close_session` body says, read strictly, and the bindings of
//! NeMo Gym's session identities to memgym episodes.
//!
//! NeMo Gym seeds a resources server two ways. An agent's `/run` (every release) posts its whole run
//! request: `responses_create_params` and the dataset row's own fields, where memgym's episode keys
//! ([`OPEN_KEYS`]) sit at the top level. An Environment Server (0.7) posts
//! `{resources_session_id, episode_id, task_id, task_data}` with the row's fields in `task_data`, and later
//! closes that id; the same id seeded again must be the same session, seeded for another episode or task a
//! conflict. The episode's id is then the `resources_session_id` itself (on a replica, with its prefix), so
//! a repeated seed is memgym's idempotent CreateEpisode and a seed after the close is refused as the id of an
//! ended episode.

use std::collections::{HashMap, VecDeque};

use parking_lot::Mutex;
use serde_json::{Map, Value};
use tonic::Status;

use crate::api::faces::gateway::{kind, OPEN_KEYS};
use crate::api::status::invalid;
use crate::util::excerpt::name;

/// Keys NeMo Gym itself puts in a run request or a dataset row, which memgym does not read.
const NEMO_KEYS: [&str; 8] =
    ["responses_create_params", "response", "agent_ref", "task_source", "skills_ref", "task_id", "problem_id", "instance_id"];

/// Is `key` NeMo Gym's own (one of [`NEMO_KEYS`], or `_ng_`-prefixed)?
fn nemo_key(key: &str) -> bool {
    key.starts_with("_ng_") || NEMO_KEYS.contains(&key)
}

/// Who a 0.7 seed is for: fingerprints of its `episode_id` and of its `task_id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    /// `episode_id` (rollout id and attempt).
    pub episode: u64,
    /// `task_id` (taskset and task id).
    pub task: u64,
}

/// A seed body, read.
#[derive(Debug)]
pub enum Seed {
    /// An Environment Server's typed seed (0.7).
    Typed {
        /// `resources_session_id`.
        session: String,
        /// Its `episode_id` and `task_id`.
        identity: Identity,
        /// memgym's episode keys from `task_data`.
        open: Map<String, Value>,
    },
    /// An agent's run request: memgym's episode keys at the top level.
    Run {
        /// memgym's episode keys.
        open: Map<String, Value>,
    },
}

/// Reads a `/seed_session` body (a JSON object).
pub fn read_seed(body: &Map<String, Value>) -> Result<Seed, Status> {
    if !body.contains_key("resources_session_id") {
        return Ok(Seed::Run { open: open_keys(body, "")? });
    }
    only(body, &["resources_session_id", "episode_id", "task_id", "task_data"], "")?;
    let session = nonempty(body, "resources_session_id", "")?;
    let episode = episode_fingerprint(body.get("episode_id"), "episode_id")?;
    let task = match body.get("task_id") {
        Some(Value::Object(t)) => {
            only(t, &["taskset", "task_id"], "task_id.")?;
            let taskset = nonempty(t, "taskset", "task_id.")?;
            let id = nonempty(t, "task_id", "task_id.")?;
            fingerprint(&[&taskset, &id])
        }
        other => return Err(object_required("task_id", other)),
    };
    let mut open = match body.get("task_data") {
        Some(Value::Object(d)) => open_keys(d, "task_data.")?,
        other => return Err(object_required("task_data", other)),
    };
    // The same session seeded again must pick the same question: without a question id or a seed, the
    // session id seeds the pick.
    if !open.contains_key("question_id") && !open.contains_key("seed") {
        open.insert("seed".into(), Value::from(crate::util::fnv::fnv1a(session.as_bytes()) >> 11));
    }
    Ok(Seed::Typed { session, identity: Identity { episode, task }, open })
}

/// A `/close_session` body: `{resources_session_id, episode_id}` (its session and the fingerprint of its
/// episode id), or `None` for an empty body (close the cookie's session).
pub fn read_close(body: &Map<String, Value>) -> Result<Option<(String, u64)>, Status> {
    if body.is_empty() {
        return Ok(None);
    }
    only(body, &["resources_session_id", "episode_id"], "")?;
    let session = nonempty(body, "resources_session_id", "")?;
    let episode = episode_fingerprint(body.get("episode_id"), "episode_id")?;
    Ok(Some((session, episode)))
}

/// memgym's episode keys of `fields` (the episode id excluded: the session names the episode), skipping
/// NeMo Gym's own keys and refusing any other, naming it.
fn open_keys(fields: &Map<String, Value>, at: &str) -> Result<Map<String, Value>, Status> {
    let mut open = Map::new();
    for (k, v) in fields {
        if k == "episode_id" {
            return Err(invalid(format!("{at}episode_id: not taken here: the session cookie (or resources_session_id) names the episode")));
        }
        if OPEN_KEYS.iter().any(|(n, _, _)| n == k) {
            open.insert(k.clone(), v.clone());
        } else if !nemo_key(k) {
            let keys: Vec<&str> = OPEN_KEYS.iter().map(|(n, _, _)| *n).filter(|n| *n != "episode_id").collect();
            return Err(invalid(format!(
                "{at}{}: unknown key (memgym reads {}; NeMo Gym's own keys are skipped)",
                name(k),
                keys.join(", ")
            )));
        }
    }
    Ok(open)
}

fn episode_fingerprint(v: Option<&Value>, field: &str) -> Result<u64, Status> {
    let Some(Value::Object(e)) = v else { return Err(object_required(field, v)) };
    only(e, &["rollout_id", "attempt"], "episode_id.")?;
    let rollout = nonempty(e, "rollout_id", "episode_id.")?;
    let attempt = match e.get("attempt") {
        None => 0,
        Some(a) => a.as_u64().ok_or_else(|| invalid(format!("episode_id.attempt: must be an integer >= 0, got {}", kind(a))))?,
    };
    Ok(fingerprint(&[&rollout, &attempt.to_string()]))
}

fn fingerprint(parts: &[&str]) -> u64 {
    let mut h = crate::util::fnv::FNV1A_OFFSET;
    for p in parts {
        h = crate::util::fnv::fnv1a_extend(crate::util::fnv::fnv1a_extend(h, p.as_bytes()), &[0]);
    }
    h
}

/// Refuses a key of `fields` not in `allowed` (NeMo Gym's models forbid extra keys).
fn only(fields: &Map<String, Value>, allowed: &[&str], at: &str) -> Result<(), Status> {
    match fields.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(invalid(format!("{at}{}: unknown key (expected {})", name(k), allowed.join(", ")))),
        None => Ok(()),
    }
}

fn nonempty(fields: &Map<String, Value>, key: &str, at: &str) -> Result<String, Status> {
    match fields.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        Some(Value::String(_)) => Err(invalid(format!("{at}{key}: must not be empty"))),
        None | Some(Value::Null) => Err(invalid(format!("{at}{key}: is required"))),
        Some(v) => Err(invalid(format!("{at}{key}: must be a string, got {}", kind(v)))),
    }
}

fn object_required(field: &str, v: Option<&Value>) -> Status {
    match v {
        None | Some(Value::Null) => invalid(format!("{field}: is required")),
        Some(v) => invalid(format!("{field}: must be an object, got {}", kind(v))),
    }
}

/// The identities typed seeds bound to episodes, so that a seed of the same session for another episode
/// or task, or a close naming another episode, is a conflict. At most `cap` (the open-episode cap), the
/// oldest forgotten first: a forgotten binding only stops that check, never the episode.
#[derive(Debug)]
pub struct Bindings {
    inner: Mutex<Inner>,
    cap: usize,
}

#[derive(Debug, Default)]
struct Inner {
    by_id: HashMap<String, Identity>,
    /// Ids in binding order; may hold ids since unbound (skipped, and compacted away).
    order: VecDeque<String>,
}

/// The result of [`Bindings::bind`].
#[derive(Debug, PartialEq, Eq)]
pub enum Bound {
    /// Bound now (undo with [`Bindings::unbind`] if the seed then fails).
    New,
    /// Already bound to the same identity.
    Same,
    /// Bound to another identity.
    Other,
}

impl Bindings {
    /// Empty, holding at most `cap` bindings.
    pub fn new(cap: usize) -> Self {
        Bindings { inner: Mutex::new(Inner::default()), cap: cap.max(1) }
    }

    /// Binds `id` to `identity` unless it is bound already.
    pub fn bind(&self, id: &str, identity: Identity) -> Bound {
        let mut g = self.inner.lock();
        match g.by_id.get(id) {
            Some(i) if *i == identity => return Bound::Same,
            Some(_) => return Bound::Other,
            None => {}
        }
        while g.by_id.len() >= self.cap {
            let Some(old) = g.order.pop_front() else { break };
            g.by_id.remove(&old);
        }
        if g.order.len() >= 2 * self.cap {
            let Inner { by_id, order } = &mut *g;
            order.retain(|k| by_id.contains_key(k));
        }
        g.by_id.insert(id.to_string(), identity);
        g.order.push_back(id.to_string());
        Bound::New
    }

    /// The identity `id` is bound to.
    pub fn get(&self, id: &str) -> Option<Identity> {
        self.inner.lock().by_id.get(id).copied()
    }

    /// Forgets `id`'s binding.
    pub fn unbind(&self, id: &str) {
        self.inner.lock().by_id.remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        let Value::Object(o) = v else { panic!("an object") };
        o
    }

    fn typed(extra: Value) -> Value {
        let mut v = json!({"resources_session_id": "s1", "episode_id": {"rollout_id": "r", "attempt": 0},
            "task_id": {"taskset": "memgym", "task_id": "0"}, "task_data": {"question_id": "conv-26:q0"}});
        if let (Value::Object(o), Value::Object(e)) = (&mut v, extra) {
            o.extend(e);
        }
        v
    }

    #[test]
    fn a_run_request_gives_its_memgym_keys_and_skips_nemo_gyms() {
        let body = obj(
            json!({"responses_create_params": {"input": "q"}, "question_id": "conv-26:q3", "_ng_task_index": 2, "agent_ref": {"name": "a"}}),
        );
        let Seed::Run { open } = read_seed(&body).unwrap() else { panic!("a run seed") };
        assert_eq!(Value::Object(open), json!({"question_id": "conv-26:q3"}));
    }

    #[test]
    fn bad_seeds_name_their_field() {
        let cases = [
            (json!({"questionid": "x"}), "questionid"),
            (json!({"episode_id": "x"}), "episode_id"),
            (typed(json!({"extra": 1})), "extra"),
            (typed(json!({"resources_session_id": ""})), "resources_session_id"),
            (typed(json!({"episode_id": {"rollout_id": "r", "attempt": -1}})), "episode_id.attempt"),
            (typed(json!({"episode_id": "r"})), "episode_id"),
            (typed(json!({"task_id": {"taskset": "t"}})), "task_id.task_id"),
            (typed(json!({"task_data": {"seed": 1, "nope": 2}})), "task_data.nope"),
            (typed(json!({"task_data": []})), "task_data"),
        ];
        for (body, field) in cases {
            let e = read_seed(&obj(body.clone())).expect_err(&body.to_string());
            assert_eq!(e.code(), tonic::Code::InvalidArgument);
            assert!(e.message().starts_with(&format!("{field}:")), "{body}: {}", e.message());
        }
    }

    #[test]
    fn a_typed_seed_without_question_or_seed_is_seeded_by_its_session() {
        let body = typed(json!({"task_data": {}}));
        let read = |b: &Value| match read_seed(&obj(b.clone())).unwrap() {
            Seed::Typed { open, identity, .. } => (open, identity),
            Seed::Run { .. } => panic!("typed"),
        };
        let (a, ia) = read(&body);
        let (b, ib) = read(&body);
        assert_eq!(a, b, "the same session picks the same question");
        assert_eq!(ia, ib);
        assert!(a["seed"].as_u64().is_some());
        let (_, other) = read(&typed(json!({"episode_id": {"rollout_id": "r", "attempt": 1}})));
        assert_ne!(other.episode, ia.episode);
        assert_eq!(other.task, ia.task);
    }

    #[test]
    fn bindings_conflict_and_stay_bounded() {
        let b = Bindings::new(2);
        let i = Identity { episode: 1, task: 2 };
        assert_eq!(b.bind("a", i), Bound::New);
        assert_eq!(b.bind("a", i), Bound::Same);
        assert_eq!(b.bind("a", Identity { episode: 9, task: 2 }), Bound::Other);
        assert_eq!(b.bind("b", i), Bound::New);
        assert_eq!(b.bind("c", i), Bound::New);
        assert_eq!(b.get("a"), None, "the oldest is forgotten at the cap");
        for n in 0..100 {
            let id = format!("x{n}");
            b.bind(&id, i);
            b.unbind(&id);
        }
        assert!(b.inner.lock().order.len() <= 4, "unbound ids are compacted away");
    }

    #[test]
    fn a_close_body_is_typed_or_empty() {
        assert_eq!(read_close(&Map::new()).unwrap(), None);
        let (s, _) = read_close(&obj(json!({"resources_session_id": "s", "episode_id": {"rollout_id": "r"}}))).unwrap().unwrap();
        assert_eq!(s, "s");
        let e = read_close(&obj(json!({"resources_session_id": "s"}))).unwrap_err();
        assert!(e.message().starts_with("episode_id:"), "{}", e.message());
    }
}
