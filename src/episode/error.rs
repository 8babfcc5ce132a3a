//! The episode layer's one error type; `api::status` maps each variant to one gRPC code. Kept apart
//! from the lifecycle code so that `mod.rs` stays readable.

use crate::embed::EmbedError;
use crate::llm::LlmError;
use crate::tools::ToolError;

use super::ended::Tombstone;

use crate::util::excerpt::quoted;

/// Errors of the episode layer. `api::status` maps each variant to one gRPC code.
#[derive(Debug, thiserror::Error)]
pub enum EpisodeError {
    /// A request field is malformed.
    #[error(transparent)]
    InvalidArgument(#[from] crate::util::invalid::Invalid),
    /// No open episode has this id, and no remembered ended one.
    #[error("episode {} not found (never created, or it ended long enough ago to be forgotten)", quoted(.id))]
    EpisodeNotFound {
        /// The id.
        id: String,
    },
    /// The episode ended (closed or reaped) and its id is still remembered: ids are not reused.
    #[error("episode {} was {tombstone} ({ago_secs} s ago); episode ids are not reused: open a new id", quoted(.id))]
    EpisodeEnded {
        /// The id.
        id: String,
        /// How and when it ended.
        tombstone: Tombstone,
        /// Seconds since it ended.
        ago_secs: u64,
    },
    /// A dataset item does not exist.
    #[error("{what}_id {} not found", quoted(.id))]
    DatasetNotFound {
        /// "conversation" or "question".
        what: &'static str,
        /// The id.
        id: String,
    },
    /// The episode id is live with a different definition.
    #[error("{message}")]
    AlreadyExists {
        /// What differs.
        message: String,
    },
    /// The episode's state forbids the call.
    #[error("{message}")]
    FailedPrecondition {
        /// Why.
        message: String,
    },
    /// A server cap is reached.
    #[error("{message}")]
    ResourceExhausted {
        /// Which cap.
        message: String,
    },
    /// The id names another replica: the call was routed to the wrong server.
    #[error(
        "episode {} is not on this replica ({replica}): an id names its replica before its first '.' ({}); send each \
         call with the memgym-episode header so that the proxy routes it to that replica",
        quoted(.id), .named.as_deref().unwrap_or("none here")
    )]
    WrongReplica {
        /// The id.
        id: String,
        /// The replica it names, if any.
        named: Option<String>,
        /// This server's replica.
        replica: String,
    },
    /// The server is draining (shutting down): it opens no new episode.
    #[error("this server{} is draining: it opens no new episodes; retry, and the proxy sends the call to another replica",
        .replica.as_deref().map(|r| format!(" (replica {r})")).unwrap_or_default())]
    Draining {
        /// This server's replica, if named.
        replica: Option<String>,
    },
    /// The tool refused the call.
    #[error(transparent)]
    Tool(#[from] ToolError),
    /// The embedder failed.
    #[error(transparent)]
    Embed(#[from] EmbedError),
    /// The LLM endpoint failed while scoring.
    #[error(transparent)]
    Llm(#[from] LlmError),
}

impl EpisodeError {
    /// An invalid argument naming its field.
    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        EpisodeError::InvalidArgument(crate::util::invalid::Invalid::new(field, message))
    }
    pub(super) fn precondition(message: impl Into<String>) -> Self {
        EpisodeError::FailedPrecondition { message: message.into() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::episode::ended::Ending;

    #[test]
    fn messages_quote_at_most_a_prefix_of_the_id() {
        let long = "x".repeat(10_000);
        let m = EpisodeError::EpisodeNotFound { id: long }.to_string();
        assert!(m.len() < 200 && m.contains(&format!("\"{}\"...", "x".repeat(crate::util::excerpt::SHOWN_CHARS))), "{m}");
        let t = Tombstone { ending: Ending::Reaped { idle_secs: 600 }, scored: false, steps_used: 3, at_ms: 0 };
        let m = EpisodeError::EpisodeEnded { id: "ep-1".into(), tombstone: t, ago_secs: 42 }.to_string();
        assert_eq!(m, "episode \"ep-1\" was reaped after 600 s idle at step 3 (42 s ago); episode ids are not reused: open a new id");
    }
}
