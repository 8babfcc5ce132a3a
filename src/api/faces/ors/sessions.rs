//! The ORS session table: session id → its episode. A session is given out by `/create_session` (no
//! episode yet), gets its episode from `/create`, and ends with `/delete` or after `--idle-ttl-secs`
//! unused (the episodes' own idle TTL, so that the two expire together; the SDK pings every 10 s).
//!
//! It also holds the once-only finish: the first call that ends the episode (`submit`, or the call that
//! spends the last step) claims the session's finish with its task id; a later call with another task id
//! is refused, and only the same task id sent again (a retry after a broken stream) is answered again.
//! So a session yields one reward, however its calls are repeated or raced.

use std::time::Duration;

use super::OrsError;
use crate::api::faces::sessions::{Full, SessionTable};
use crate::util::excerpt::quoted;

/// Characters of a session id at most.
const MAX_ID: usize = 128;

/// A live session's episode.
#[derive(Debug, Clone)]
pub(super) struct Live {
    /// The memgym episode.
    pub episode_id: String,
    /// The question it was opened for.
    pub question_id: String,
    /// The task id of the call that finished the episode, once one did.
    pub finished_by: Option<String>,
}

#[derive(Debug)]
enum State {
    /// Given out; no episode yet.
    Minted,
    /// `/create` is opening its episode.
    Opening,
    /// The episode is open.
    Live(Live),
}

/// What `/create` finds for a session.
pub(super) enum Creating {
    /// Open the episode (the session is now `Opening`).
    Open,
    /// The same task's episode is already open: answer as before.
    Again(Live),
}

/// Whether a call may finish the episode.
pub(super) enum Finish {
    /// This call finishes it.
    First,
    /// This call (its task id) finished it already: answer again.
    Again,
    /// Another call finished it.
    Taken,
}

/// The sessions of one ORS listener, on the faces' one session table.
#[derive(Debug)]
pub(super) struct Sessions {
    table: SessionTable<String, State>,
}

/// The episode a swept or removed session held, if any.
fn episode_of(state: State) -> Option<String> {
    match state {
        State::Live(l) => Some(l.episode_id),
        State::Minted | State::Opening => None,
    }
}

impl Sessions {
    /// At most `max` sessions; one unused for `idle` is dropped.
    pub fn new(max: usize, idle: Duration) -> Self {
        Sessions { table: SessionTable::new(max, idle) }
    }

    /// A new session id (32 hex digits), or `Full` at the cap. Idle sessions are dropped first; their
    /// episodes are returned for closing.
    pub fn mint(&self) -> Result<(String, Vec<String>), OrsError> {
        let id = format!("{:032x}", rand::random::<u128>());
        let (added, swept) = self.table.insert(id.clone(), State::Minted, |_| true);
        let dropped: Vec<String> = swept.into_iter().filter_map(|(_, st)| episode_of(st)).collect();
        match added {
            Ok(()) => Ok((id, dropped)),
            Err(Full { active, max }) => Err(OrsError::Full { active, max }),
        }
    }

    /// Runs `f` on session `sid`'s state (marking it used); `NoSession` for an unknown id.
    fn session<R>(&self, sid: &str, f: impl FnOnce(&mut State) -> Result<R, OrsError>) -> Result<R, OrsError> {
        self.table.with(sid, f).unwrap_or_else(|| Err(OrsError::NoSession(sid.to_string())))
    }

    /// `/create` for session `sid` and question `question_id`.
    pub fn begin_create(&self, sid: &str, question_id: &str) -> Result<Creating, OrsError> {
        self.session(sid, |state| match state {
            State::Minted => {
                *state = State::Opening;
                Ok(Creating::Open)
            }
            State::Opening => Err(OrsError::Conflict(format!("X-Session-ID: session {} is being created by another request", quoted(sid)))),
            State::Live(l) if l.question_id == question_id => Ok(Creating::Again(l.clone())),
            State::Live(l) => Err(OrsError::Conflict(format!(
                "X-Session-ID: session {} holds question {} already; one session is one task: get another from /create_session",
                quoted(sid),
                quoted(&l.question_id)
            ))),
        })
    }

    /// `/create` opened `live` for `sid` (or failed: `None` makes the session creatable again). Returns
    /// false when the session was deleted meanwhile (the caller closes the episode).
    pub fn end_create(&self, sid: &str, live: Option<Live>) -> bool {
        self.table
            .with(sid, |state| {
                *state = match live {
                    Some(l) => State::Live(l),
                    None => State::Minted,
                }
            })
            .is_some()
    }

    /// The live session `sid` (touched).
    pub fn live(&self, sid: &str) -> Result<Live, OrsError> {
        self.session(sid, |state| match state {
            State::Live(l) => Ok(l.clone()),
            State::Minted | State::Opening => Err(OrsError::NotCreated(sid.to_string())),
        })
    }

    /// Marks `sid` used; its episode, when it has one. Unknown: `NoSession`.
    pub fn touch(&self, sid: &str) -> Result<Option<String>, OrsError> {
        self.session(sid, |state| {
            Ok(match state {
                State::Live(l) => Some(l.episode_id.clone()),
                State::Minted | State::Opening => None,
            })
        })
    }

    /// Removes `sid`; the episode it held, if any.
    pub fn remove(&self, sid: &str) -> Option<String> {
        episode_of(self.table.remove(sid)?)
    }

    /// Claims the finish of `sid`'s episode for the call `task_id`.
    pub fn finish(&self, sid: &str, task_id: &str) -> Result<Finish, OrsError> {
        self.session(sid, |state| {
            let State::Live(l) = state else { return Err(OrsError::NotCreated(sid.to_string())) };
            Ok(match &l.finished_by {
                None => {
                    l.finished_by = Some(task_id.to_string());
                    Finish::First
                }
                Some(t) if t == task_id => Finish::Again,
                Some(_) => Finish::Taken,
            })
        })
    }

    /// Gives back the finish `task_id` claimed (its scoring failed: the episode may be scored again).
    pub fn unfinish(&self, sid: &str, task_id: &str) {
        self.table.with(sid, |state| {
            if let State::Live(l) = state {
                if l.finished_by.as_deref() == Some(task_id) {
                    l.finished_by = None;
                }
            }
        });
    }
}

/// The session id of the `X-Session-ID` header (required; at most [`MAX_ID`] characters).
pub(super) fn session_id(headers: &http::HeaderMap) -> Result<String, OrsError> {
    let Some(v) = headers.get("x-session-id") else { return Err(OrsError::BadRequest("X-Session-ID: header is required".into())) };
    let s = v.to_str().map_err(|_| OrsError::BadRequest("X-Session-ID: must be visible ASCII".into()))?.trim();
    if s.is_empty() || s.len() > MAX_ID {
        return Err(OrsError::BadRequest(format!("X-Session-ID: must be 1 to {MAX_ID} characters, got {}", s.len())));
    }
    Ok(s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(q: &str) -> Live {
        Live { episode_id: format!("ep-{q}"), question_id: q.into(), finished_by: None }
    }

    #[test]
    fn a_session_is_created_once_per_task_and_finished_once() {
        let s = Sessions::new(2, Duration::from_secs(60));
        let (sid, _) = s.mint().unwrap();
        assert!(matches!(s.live(&sid), Err(OrsError::NotCreated(_))));
        assert!(matches!(s.begin_create(&sid, "q1"), Ok(Creating::Open)));
        assert!(matches!(s.begin_create(&sid, "q1"), Err(OrsError::Conflict(_))), "a second /create while the first opens");
        assert!(s.end_create(&sid, Some(live("q1"))));
        assert!(matches!(s.begin_create(&sid, "q1"), Ok(Creating::Again(l)) if l.episode_id == "ep-q1"), "the same task again");
        assert!(matches!(s.begin_create(&sid, "q2"), Err(OrsError::Conflict(m)) if m.contains("one session is one task")));
        assert!(matches!(s.finish(&sid, "t1"), Ok(Finish::First)));
        assert!(matches!(s.finish(&sid, "t1"), Ok(Finish::Again)));
        assert!(matches!(s.finish(&sid, "t2"), Ok(Finish::Taken)));
        s.unfinish(&sid, "t2");
        assert!(matches!(s.finish(&sid, "t2"), Ok(Finish::Taken)), "only the claimer gives the finish back");
        s.unfinish(&sid, "t1");
        assert!(matches!(s.finish(&sid, "t2"), Ok(Finish::First)));
        assert_eq!(s.remove(&sid).as_deref(), Some("ep-q1"));
        assert!(matches!(s.live(&sid), Err(OrsError::NoSession(_))));
    }

    #[test]
    fn the_cap_counts_sessions_and_idle_ones_are_dropped() {
        let s = Sessions::new(2, Duration::from_secs(60));
        let (a, _) = s.mint().unwrap();
        s.mint().unwrap();
        assert!(matches!(s.mint(), Err(OrsError::Full { active: 2, max: 2 })));
        s.remove(&a);
        s.mint().unwrap();
        let quick = Sessions::new(1, Duration::ZERO);
        let (sid, _) = quick.mint().unwrap();
        assert!(matches!(quick.begin_create(&sid, "q"), Ok(Creating::Open)));
        quick.end_create(&sid, Some(live("q")));
        let (_, dropped) = quick.mint().unwrap();
        assert_eq!(dropped, ["ep-q"], "the idle session's episode is handed back for closing");
    }

    #[test]
    fn the_session_header_is_required_and_bounded() {
        let mut h = http::HeaderMap::new();
        assert!(session_id(&h).unwrap_err().to_string().starts_with("X-Session-ID: header is required"));
        h.insert("x-session-id", "x".repeat(200).parse().unwrap());
        assert!(session_id(&h).unwrap_err().to_string().contains("1 to 128 characters, got 200"));
        h.insert("x-session-id", " abc ".parse().unwrap());
        assert_eq!(session_id(&h).unwrap(), "abc");
    }
}
