//! Exactly-once tool calls. A client that loses its connection mid-call cannot tell whether the call was
//! applied; sending it again would apply an edit twice (MCP clients reconnect and retry under load:
//! prime-rl #3084, verifiers #2062). A call may carry a `call_id`: the episode remembers the id of every
//! call it applied with a fingerprint of that call, and keeps the results of the last [`KEPT`]. The same id
//! again, with the same call, gets the first call's result without a new step; with another call it is
//! refused as a misuse of the key. An id whose result is no longer kept is refused, naming its step.

use std::collections::{HashMap, VecDeque};

use super::{EpisodeError, ToolResult};
use crate::tools::ToolCall;
use crate::util::fnv::{fnv1a_extend, FNV1A_OFFSET};

/// Results kept per episode: a retry comes right after its failed try, so only the last few matter.
pub const KEPT: usize = 4;

/// The calls an episode applied under a `call_id`.
#[derive(Debug, Clone, Default)]
pub struct Applied {
    /// call_id → (fingerprint of the call, the step it made).
    ids: HashMap<String, (u64, u32)>,
    /// The last [`KEPT`] results, oldest first: (call_id, result).
    results: VecDeque<(String, ToolResult)>,
}

/// What to do with a call that carries a `call_id`.
pub enum Seen {
    /// Not applied before: run it.
    New,
    /// Applied before: this is its result.
    Again(Box<ToolResult>),
}

fn fingerprint(call: &ToolCall) -> u64 {
    fnv1a_extend(fnv1a_extend(FNV1A_OFFSET, call.name().as_bytes()), call.arguments_json().as_bytes())
}

impl Applied {
    /// Looks `call_id` up for `call`.
    pub fn seen(&self, call_id: &str, call: &ToolCall) -> Result<Seen, EpisodeError> {
        let Some(&(print, step)) = self.ids.get(call_id) else { return Ok(Seen::New) };
        if print != fingerprint(call) {
            return Err(EpisodeError::invalid(
                "call_id",
                format!("{} was used for another call (step {step}); use a new id for each call", crate::util::excerpt::quoted(call_id)),
            ));
        }
        match self.results.iter().find(|(id, _)| id == call_id) {
            Some((_, r)) => Ok(Seen::Again(Box::new(r.clone()))),
            None => Err(EpisodeError::precondition(format!(
                "call_id {} was applied at step {step}; its result is no longer kept (only the last {KEPT} are)",
                crate::util::excerpt::quoted(call_id)
            ))),
        }
    }

    /// Records that `call` ran under `call_id` with `result`.
    pub fn record(&mut self, call_id: &str, call: &ToolCall, result: &ToolResult) {
        self.ids.insert(call_id.to_string(), (fingerprint(call), result.step.step));
        if self.results.len() == KEPT {
            self.results.pop_front();
        }
        self.results.push_back((call_id.to_string(), result.clone()));
    }
}
