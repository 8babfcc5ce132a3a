//! Domain errors → `tonic::Status`, in one exhaustive match per error type (no wildcard arms), so a
//! new error variant cannot ship without a status code. Client errors are logged at debug, server
//! errors at error.

use tonic::{Code, Status};

use crate::banks::store::StoreError;
use crate::banks::BankError;
use crate::embed::EmbedError;
use crate::episode::EpisodeError;
use crate::llm::LlmError;
use crate::tools::ToolError;

impl From<ToolError> for Status {
    fn from(e: ToolError) -> Self {
        let code = match &e {
            ToolError::InvalidArgument { .. } => Code::InvalidArgument,
            ToolError::MemoryNotFound { .. } => Code::NotFound,
            ToolError::FailedPrecondition { .. } => Code::FailedPrecondition,
            ToolError::ResourceExhausted { .. } => Code::ResourceExhausted,
        };
        Status::new(code, e.to_string())
    }
}

impl From<EmbedError> for Status {
    fn from(e: EmbedError) -> Self {
        let code = match &e {
            EmbedError::Backend { .. } | EmbedError::Join(_) => Code::Unavailable,
            EmbedError::Dimension { .. } | EmbedError::Count { .. } | EmbedError::NonFinite { .. } => Code::Internal,
        };
        tracing::error!(error = %e, "embedder failure");
        Status::new(code, e.to_string())
    }
}

impl From<LlmError> for Status {
    fn from(e: LlmError) -> Self {
        let code = match &e {
            LlmError::Timeout { .. } => Code::DeadlineExceeded,
            LlmError::Unavailable { .. } | LlmError::BadReply { .. } => Code::Unavailable,
            LlmError::Config { .. } => Code::InvalidArgument,
        };
        tracing::warn!(error = %e, "LLM failure");
        Status::new(code, e.to_string())
    }
}

impl From<EpisodeError> for Status {
    fn from(e: EpisodeError) -> Self {
        let code = match e {
            EpisodeError::Tool(t) => return t.into(),
            EpisodeError::Embed(x) => return x.into(),
            EpisodeError::Llm(x) => return x.into(),
            EpisodeError::InvalidArgument { .. } => Code::InvalidArgument,
            EpisodeError::EpisodeNotFound { .. } | EpisodeError::DatasetNotFound { .. } => Code::NotFound,
            EpisodeError::AlreadyExists { .. } => Code::AlreadyExists,
            EpisodeError::FailedPrecondition { .. } | EpisodeError::EpisodeEnded { .. } => Code::FailedPrecondition,
            EpisodeError::ResourceExhausted { .. } => Code::ResourceExhausted,
        };
        Status::new(code, e.to_string())
    }
}

impl From<StoreError> for Status {
    fn from(e: StoreError) -> Self {
        let code = match &e {
            StoreError::Unavailable { .. } => Code::Unavailable,
            StoreError::Corrupt { .. } => Code::DataLoss,
            StoreError::AlreadyExists(_) => Code::AlreadyExists,
        };
        Status::new(code, e.to_string())
    }
}

impl From<BankError> for Status {
    fn from(e: BankError) -> Self {
        let code = match e {
            BankError::Store(x) => return x.into(),
            BankError::Embed(x) => return x.into(),
            BankError::Llm(x) => return x.into(),
            BankError::InvalidArgument { .. } => Code::InvalidArgument,
            BankError::BankNotFound { .. } | BankError::ExperienceNotFound { .. } => Code::NotFound,
            BankError::AlreadyExists { .. } => Code::AlreadyExists,
            BankError::VersionConflict { .. } => Code::Aborted,
            BankError::FailedPrecondition { .. } | BankError::WrongKind { .. } => Code::FailedPrecondition,
            BankError::ResourceExhausted { .. } => Code::ResourceExhausted,
        };
        Status::new(code, e.to_string())
    }
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
            (EpisodeError::InvalidArgument { field: "x".into(), message: "y".into() }, Code::InvalidArgument),
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
    }
}
