//! Domain errors → `tonic::Status`, in one exhaustive match per error type (no wildcard arms), so a
//! new error variant cannot ship without a status code **and a reason**. Client errors are logged at
//! debug, server errors at error.
//!
//! Every refusal carries, in the status details (`grpc-status-details-bin`), a `google.rpc.ErrorInfo`:
//! a stable machine-readable `reason` (below), the domain [`DOMAIN`], and metadata `retryable` ("true"
//! when the same request sent again may succeed: the server was busy, down or slow, not the request
//! wrong) and `field` when one argument is at fault; and a `google.rpc.RetryInfo` with the delay to wait
//! when it is retryable. A client tells an overloaded replica from a bad id without parsing messages.
//! The JSON faces carry the same `reason` and `retryable` in their error bodies ([`error_json`]).

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{json, Value};
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

use crate::banks::store::StoreError;
use crate::banks::BankError;
use crate::embed::EmbedError;
use crate::episode::EpisodeError;
use crate::llm::LlmError;
use crate::tools::ToolError;
use crate::util::invalid::Invalid;

/// The `ErrorInfo.domain` of memgym's reasons.
pub const DOMAIN: &str = "memgym.v1";
/// How long a client should wait before sending a retryable request again.
pub const RETRY_DELAY: Duration = Duration::from_secs(1);

/// Whose a refusal is: the one rule every face uses to decide whether the policy sees it as its tool's
/// result (in band) or the client gets an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The policy's call was wrong (its arguments, a memory id, a tool's precondition, the episode's memory
    /// full): in band, for the policy to read and do better.
    Call,
    /// The episode takes no more calls (scored, or its step budget spent): in band, and the episode is over.
    EpisodeOver,
    /// The call ran out of time inside the server; the same call may succeed later.
    Timeout,
    /// The client's (the trainer's or the script's): an unknown or ended episode, an id in use, a bank
    /// refused, an API key. Never the policy's: an error to the client.
    Client,
    /// The server's: a cap, a dependency down or broken, a shutdown. An error to the client.
    Server,
}

impl Fault {
    /// Its name in the JSON faces' error bodies (`fault`).
    pub fn as_str(self) -> &'static str {
        match self {
            Fault::Call => "call",
            Fault::EpisodeOver => "episode_over",
            Fault::Timeout => "timeout",
            Fault::Client => "client",
            Fault::Server => "server",
        }
    }
}

/// Every reason, whether it is retryable, whose fault it is, and what it means (the book's "Errors and
/// limits" lists them).
pub const REASONS: &[(&str, bool, Fault, &str)] = &[
    ("INVALID_ARGUMENT", false, Fault::Call, "an argument is missing, malformed or out of range; `field` names it"),
    ("MEMORY_NOT_FOUND", false, Fault::Call, "a memory id names no live memory of the episode"),
    ("TOOL_PRECONDITION", false, Fault::Call, "the call is well formed but cannot be carried out on this memory"),
    ("EPISODE_MEMORY_FULL", false, Fault::Call, "the episode holds the most memories it may"),
    ("EPISODE_NOT_FOUND", false, Fault::Client, "no episode has this id (never opened, or forgotten)"),
    ("DATASET_NOT_FOUND", false, Fault::Client, "no such question or conversation"),
    ("EPISODE_EXISTS", false, Fault::Client, "an episode with this id exists with another definition"),
    ("EPISODE_PRECONDITION", false, Fault::EpisodeOver, "the episode is scored, or its step budget is spent"),
    ("EPISODE_ENDED", false, Fault::Client, "the episode was closed or reaped; ids are not reused"),
    ("EPISODE_CAP", true, Fault::Server, "the server holds its most open episodes; others will close"),
    ("WRONG_REPLICA", false, Fault::Client, "the episode id names another replica: the call was misrouted (see Operations → Replicas)"),
    (
        "DRAINING",
        true,
        Fault::Server,
        "the server is shutting down: it opens no new episodes and takes no bank calls; another replica will",
    ),
    ("EMBEDDER_UNAVAILABLE", true, Fault::Server, "the embedder failed or is down"),
    ("EMBEDDER_BROKEN", false, Fault::Server, "the embedder returned vectors of the wrong shape"),
    ("LLM_TIMEOUT", true, Fault::Timeout, "the LLM endpoint did not answer in time"),
    ("LLM_UNAVAILABLE", true, Fault::Server, "the LLM endpoint failed, is down, or gave an unusable reply"),
    ("LLM_NOT_CONFIGURED", false, Fault::Server, "the server has no usable LLM endpoint for this"),
    ("STORE_UNAVAILABLE", true, Fault::Server, "the banks' database failed or is down"),
    ("STORE_CORRUPT", false, Fault::Server, "the banks' database holds something it cannot read"),
    ("BANK_NOT_FOUND", false, Fault::Client, "no bank has this name"),
    ("EXPERIENCE_NOT_FOUND", false, Fault::Client, "no experience has this id in the bank"),
    ("BANK_EXISTS", false, Fault::Client, "a bank has this name"),
    ("BANK_VERSION_CONFLICT", false, Fault::Client, "the bank changed since the version given: read it again, then retry"),
    ("BANK_PRECONDITION", false, Fault::Client, "the bank cannot do this now, or is of another kind"),
    ("BANK_LIMIT", false, Fault::Client, "a bank's size or a request's size limit"),
    ("DEADLINE_EXCEEDED", true, Fault::Timeout, "the call's deadline passed inside the server"),
    ("API_KEY_MISSING", false, Fault::Client, "the server wants an API key and the request sent none"),
    ("API_KEY_INVALID", false, Fault::Client, "the API key is not one the server accepts"),
    ("READ_ONLY_KEY", false, Fault::Client, "a read-only API key on anything but a read"),
];

/// Whose fault `s` is: its reason's, or for a status without memgym's details (tonic's own) its code's.
pub fn fault_of(s: &Status) -> Fault {
    if let Some((reason, _)) = reason_of(s) {
        if let Some((_, _, fault, _)) = REASONS.iter().find(|(r, ..)| *r == reason) {
            return *fault;
        }
    }
    match s.code() {
        Code::InvalidArgument | Code::OutOfRange => Fault::Call,
        Code::DeadlineExceeded => Fault::Timeout,
        Code::NotFound | Code::AlreadyExists | Code::FailedPrecondition | Code::Unauthenticated | Code::PermissionDenied => Fault::Client,
        Code::Ok
        | Code::Cancelled
        | Code::Unknown
        | Code::ResourceExhausted
        | Code::Aborted
        | Code::Unimplemented
        | Code::Internal
        | Code::Unavailable
        | Code::DataLoss => Fault::Server,
    }
}

/// Whether `reason` is retryable (unknown reasons are not).
pub fn retryable(reason: &str) -> bool {
    REASONS.iter().any(|(r, yes, ..)| *r == reason && *yes)
}

/// A refusal with its code, reason (one of [`REASONS`]) and message, and the field at fault if any.
pub fn refusal(code: Code, reason: &'static str, message: String, field: Option<&str>) -> Status {
    let again = retryable(reason);
    let mut metadata = HashMap::from([("retryable".to_string(), again.to_string())]);
    if let Some(f) = field {
        metadata.insert("field".to_string(), f.to_string());
    }
    let mut details = ErrorDetails::with_error_info(reason, DOMAIN, metadata);
    if again {
        details.set_retry_info(Some(RETRY_DELAY));
    }
    Status::with_error_details(code, message, details)
}

/// INVALID_ARGUMENT for a message that starts with the field at fault (`"count: must be …"`).
pub fn invalid(message: String) -> Status {
    let field = field_of(&message).map(str::to_string);
    refusal(Code::InvalidArgument, "INVALID_ARGUMENT", message, field.as_deref())
}

/// The field a refusal's message starts with (`"field: …"`, the field one word), if it does.
pub fn field_of(message: &str) -> Option<&str> {
    message.split_once(':').map(|(f, _)| f.trim_matches('"')).filter(|f| !f.is_empty() && !f.contains(' '))
}

/// A status's reason and retryable flag, from its details; `None` for a status without memgym's
/// (tonic's own, such as UNIMPLEMENTED).
pub fn reason_of(s: &Status) -> Option<(String, bool)> {
    let details = s.get_error_details();
    let info = details.error_info()?;
    Some((info.reason.clone(), info.metadata.get("retryable").is_some_and(|v| v == "true")))
}

/// The lowercase gRPC code name a JSON face reports ("invalid_argument").
pub fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "ok",
        Code::Cancelled => "cancelled",
        Code::Unknown => "unknown",
        Code::InvalidArgument => "invalid_argument",
        Code::DeadlineExceeded => "deadline_exceeded",
        Code::NotFound => "not_found",
        Code::AlreadyExists => "already_exists",
        Code::PermissionDenied => "permission_denied",
        Code::ResourceExhausted => "resource_exhausted",
        Code::FailedPrecondition => "failed_precondition",
        Code::Aborted => "aborted",
        Code::OutOfRange => "out_of_range",
        Code::Unimplemented => "unimplemented",
        Code::Internal => "internal",
        Code::Unavailable => "unavailable",
        Code::DataLoss => "data_loss",
        Code::Unauthenticated => "unauthenticated",
    }
}

/// The JSON faces' error body for a status: `code` (the gRPC name), `message`, `reason` and `retryable`
/// (`null`/false without memgym's details), and `fault` ([`fault_of`]).
pub fn error_json(s: &Status) -> Value {
    let (reason, again) = reason_of(s).map_or((Value::Null, false), |(r, a)| (Value::String(r), a));
    json!({"code": code_name(s.code()), "message": s.message(), "reason": reason, "retryable": again,
        "fault": fault_of(s).as_str()})
}

/// Every layer's bad field ([`Invalid`]): INVALID_ARGUMENT, naming the field.
impl From<Invalid> for Status {
    fn from(e: Invalid) -> Self {
        refusal(Code::InvalidArgument, "INVALID_ARGUMENT", e.to_string(), Some(&e.field))
    }
}

impl From<ToolError> for Status {
    fn from(e: ToolError) -> Self {
        let (code, reason, field) = match &e {
            ToolError::InvalidArgument(x) => return x.clone().into(),
            ToolError::MemoryNotFound { field, .. } => (Code::NotFound, "MEMORY_NOT_FOUND", Some(field.clone())),
            ToolError::FailedPrecondition { .. } => (Code::FailedPrecondition, "TOOL_PRECONDITION", None),
            ToolError::ResourceExhausted { .. } => (Code::ResourceExhausted, "EPISODE_MEMORY_FULL", None),
        };
        refusal(code, reason, e.to_string(), field.as_deref())
    }
}

impl From<EmbedError> for Status {
    fn from(e: EmbedError) -> Self {
        let (code, reason) = match &e {
            EmbedError::Backend { .. } | EmbedError::Join(_) => (Code::Unavailable, "EMBEDDER_UNAVAILABLE"),
            EmbedError::Dimension { .. } | EmbedError::Count { .. } | EmbedError::NonFinite { .. } => (Code::Internal, "EMBEDDER_BROKEN"),
        };
        tracing::error!(error = %e, "embedder failure");
        refusal(code, reason, e.to_string(), None)
    }
}

impl From<LlmError> for Status {
    fn from(e: LlmError) -> Self {
        let (code, reason, field) = match &e {
            LlmError::Timeout { .. } => (Code::DeadlineExceeded, "LLM_TIMEOUT", None),
            LlmError::Unavailable { .. } | LlmError::BadReply { .. } => (Code::Unavailable, "LLM_UNAVAILABLE", None),
            LlmError::Config { field, .. } => (Code::InvalidArgument, "LLM_NOT_CONFIGURED", Some(*field)),
        };
        tracing::warn!(error = %e, "LLM failure");
        refusal(code, reason, e.to_string(), field)
    }
}

impl From<EpisodeError> for Status {
    fn from(e: EpisodeError) -> Self {
        let (code, reason) = match e {
            EpisodeError::Tool(t) => return t.into(),
            EpisodeError::Embed(x) => return x.into(),
            EpisodeError::Llm(x) => return x.into(),
            EpisodeError::InvalidArgument(x) => return x.into(),
            EpisodeError::EpisodeNotFound { .. } => (Code::NotFound, "EPISODE_NOT_FOUND"),
            EpisodeError::DatasetNotFound { .. } => (Code::NotFound, "DATASET_NOT_FOUND"),
            EpisodeError::AlreadyExists { .. } => (Code::AlreadyExists, "EPISODE_EXISTS"),
            EpisodeError::FailedPrecondition { .. } => (Code::FailedPrecondition, "EPISODE_PRECONDITION"),
            EpisodeError::EpisodeEnded { .. } => (Code::FailedPrecondition, "EPISODE_ENDED"),
            EpisodeError::ResourceExhausted { .. } => (Code::ResourceExhausted, "EPISODE_CAP"),
            EpisodeError::WrongReplica { .. } => (Code::FailedPrecondition, "WRONG_REPLICA"),
            EpisodeError::Draining { .. } => (Code::Unavailable, "DRAINING"),
        };
        refusal(code, reason, e.to_string(), None)
    }
}

impl From<StoreError> for Status {
    fn from(e: StoreError) -> Self {
        let (code, reason) = match &e {
            StoreError::Unavailable { .. } => (Code::Unavailable, "STORE_UNAVAILABLE"),
            StoreError::Corrupt { .. } => (Code::DataLoss, "STORE_CORRUPT"),
            StoreError::AlreadyExists(_) => (Code::AlreadyExists, "BANK_EXISTS"),
        };
        refusal(code, reason, e.to_string(), None)
    }
}

impl From<BankError> for Status {
    fn from(e: BankError) -> Self {
        let (code, reason) = match e {
            BankError::Store(x) => return x.into(),
            BankError::Embed(x) => return x.into(),
            BankError::Llm(x) => return x.into(),
            BankError::InvalidArgument(x) => return x.into(),
            BankError::BankNotFound { .. } => (Code::NotFound, "BANK_NOT_FOUND"),
            BankError::ExperienceNotFound { .. } => (Code::NotFound, "EXPERIENCE_NOT_FOUND"),
            BankError::AlreadyExists { .. } => (Code::AlreadyExists, "BANK_EXISTS"),
            BankError::VersionConflict { .. } => (Code::Aborted, "BANK_VERSION_CONFLICT"),
            BankError::FailedPrecondition { .. } | BankError::WrongKind { .. } => (Code::FailedPrecondition, "BANK_PRECONDITION"),
            BankError::ResourceExhausted { .. } => (Code::ResourceExhausted, "BANK_LIMIT"),
        };
        refusal(code, reason, e.to_string(), None)
    }
}

/// `r`, its error logged by [`log_status`]: every handler's and face's result passes through here once.
pub fn logged<T>(r: Result<T, Status>) -> Result<T, Status> {
    if let Err(s) = &r {
        log_status(s);
    }
    r
}

/// Logs a refused request by status class (client errors at debug, server errors at error).
#[allow(clippy::wildcard_enum_match_arm)] // every other code, present or future, is a client error
pub fn log_status(s: &Status) {
    match s.code() {
        Code::Internal | Code::Unknown | Code::DataLoss | Code::Unavailable | Code::Unimplemented => {
            tracing::error!(code = ?s.code(), message = s.message(), "request failed")
        }
        _ => tracing::debug!(code = ?s.code(), message = s.message(), "request refused"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::episode::{Ending, Tombstone};
    use crate::memory::MemoryId;

    #[test]
    fn codes() {
        let cases: Vec<(EpisodeError, Code)> = vec![
            (EpisodeError::invalid("x", "y"), Code::InvalidArgument),
            (EpisodeError::EpisodeNotFound { id: "e".into() }, Code::NotFound),
            (EpisodeError::DatasetNotFound { what: "question", id: "q".into() }, Code::NotFound),
            (EpisodeError::AlreadyExists { message: "m".into() }, Code::AlreadyExists),
            (EpisodeError::FailedPrecondition { message: "m".into() }, Code::FailedPrecondition),
            (
                EpisodeError::EpisodeEnded {
                    id: "e".into(),
                    tombstone: Tombstone { ending: Ending::Closed, scored: true, steps_used: 5, at_ms: 0 },
                    ago_secs: 1,
                },
                Code::FailedPrecondition,
            ),
            (EpisodeError::ResourceExhausted { message: "m".into() }, Code::ResourceExhausted),
            (ToolError::MemoryNotFound { field: "memory_id".into(), id: MemoryId(3) }.into(), Code::NotFound),
            (ToolError::invalid("top_k", "bad").into(), Code::InvalidArgument),
            (EmbedError::Backend { embedder: "e".into(), message: "down".into() }.into(), Code::Unavailable),
            (LlmError::Timeout { message: "slow".into() }.into(), Code::DeadlineExceeded),
            (LlmError::Unavailable { message: "HTTP 500".into() }.into(), Code::Unavailable),
            (LlmError::BadReply { message: "not json".into() }.into(), Code::Unavailable),
            (LlmError::Config { field: "llm_model", message: "empty".into() }.into(), Code::InvalidArgument),
        ];
        for (e, code) in cases {
            assert_eq!(Status::from(e).code(), code);
        }
        let s = Status::from(ToolError::invalid("top_k", "must be between 1 and 50, got 0"));
        assert_eq!(s.message(), "invalid argument top_k: must be between 1 and 50, got 0");
        assert_eq!(reason_of(&s), Some(("INVALID_ARGUMENT".into(), false)));
        let details = s.get_error_details();
        assert_eq!(details.error_info().unwrap().metadata["field"], "top_k");
        assert_eq!(details.error_info().unwrap().domain, DOMAIN);
        assert!(details.retry_info().is_none());
        let cap = Status::from(EpisodeError::ResourceExhausted { message: "16384 episodes are open".into() });
        assert_eq!(reason_of(&cap), Some(("EPISODE_CAP".into(), true)));
        assert_eq!(cap.get_error_details().retry_info().unwrap().retry_delay, Some(RETRY_DELAY));
        let down = Status::from(EpisodeError::Llm(LlmError::Unavailable { message: "HTTP 500".into() }));
        assert_eq!((down.code(), reason_of(&down)), (Code::Unavailable, Some(("LLM_UNAVAILABLE".into(), true))));
        assert_eq!(
            error_json(&down),
            json!({"code": "unavailable", "message": down.message(), "reason": "LLM_UNAVAILABLE", "retryable": true, "fault": "server"})
        );
        assert_eq!(error_json(&Status::unimplemented("x"))["reason"], Value::Null);
    }

    #[test]
    fn whose_fault_a_refusal_is_follows_its_reason() {
        let call = |e: ToolError| fault_of(&Status::from(e));
        assert_eq!(call(ToolError::FailedPrecondition { message: "one clause".into() }), Fault::Call);
        assert_eq!(call(ToolError::ResourceExhausted { message: "full".into() }), Fault::Call);
        assert_eq!(fault_of(&invalid("top_k: must be 1 to 50".into())), Fault::Call);
        let episode = |e: EpisodeError| fault_of(&Status::from(e));
        assert_eq!(episode(EpisodeError::ResourceExhausted { message: "cap".into() }), Fault::Server);
        assert_eq!(episode(EpisodeError::Llm(LlmError::Unavailable { message: "down".into() })), Fault::Server);
        // Without memgym's details, the code decides.
        assert_eq!(fault_of(&Status::invalid_argument("x")), Fault::Call);
        assert_eq!(fault_of(&Status::not_found("x")), Fault::Client);
        assert_eq!(fault_of(&Status::deadline_exceeded("x")), Fault::Timeout);
        assert_eq!(fault_of(&Status::unimplemented("x")), Fault::Server);
        assert_eq!(error_json(&Status::not_found("x"))["fault"], "client");
    }

    #[test]
    fn every_reason_is_listed_once_in_the_shape_error_info_wants() {
        let mut seen = std::collections::HashSet::new();
        for (r, _, _, what) in REASONS {
            assert!(seen.insert(*r), "{r} twice");
            assert!(r.len() <= 63 && r.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'), "{r}");
            assert!(!what.is_empty());
        }
        // The book lists every reason with its retry flag.
        let book = include_str!("../../docs/book/src/errors-and-limits.md");
        for (r, again, fault, _) in REASONS {
            let row = format!("| `{r}` | {} | {} |", if *again { "yes" } else { "no" }, fault.as_str());
            assert!(book.contains(&row), "docs/book/src/errors-and-limits.md lacks the row {row}");
        }
        assert_eq!(field_of("count: must be a number"), Some("count"));
        assert_eq!(field_of("\"x\": unknown argument"), Some("x"));
        assert_eq!(field_of("no question to pick: give question_id"), None);
    }
}
