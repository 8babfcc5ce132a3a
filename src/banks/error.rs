//! The banks layer's one error type; `api::status` maps each variant to one gRPC code.

use crate::embed::EmbedError;
use crate::llm::LlmError;
use crate::util::excerpt::quoted;

use super::store::StoreError;

/// Errors of the banks layer. Every refused write changes nothing.
#[derive(Debug, thiserror::Error)]
pub enum BankError {
    /// A request field is malformed (for operations the field reads `operations[i].field`).
    #[error(transparent)]
    InvalidArgument(#[from] crate::util::invalid::Invalid),
    /// No bank has this name.
    #[error("bank {} not found", quoted(.name))]
    BankNotFound {
        /// The name.
        name: String,
    },
    /// The bank holds no experience with this id.
    #[error("{field}: experience {id} not found in bank {}", quoted(.bank))]
    ExperienceNotFound {
        /// The bank.
        bank: String,
        /// The field that named it (`id`, `ids`, `operations[2].delete_id`, …).
        field: String,
        /// The id as shown ("G12").
        id: String,
    },
    /// A bank with this name exists.
    #[error("bank {} already exists", quoted(.name))]
    AlreadyExists {
        /// The name.
        name: String,
    },
    /// The write named a version the bank is no longer (or not yet) at.
    #[error("bank {} is at version {current}, not the expected {expected}; nothing was written (read it again and retry)", quoted(.name))]
    VersionConflict {
        /// The bank.
        name: String,
        /// The version the write expected.
        expected: u64,
        /// The bank's version.
        current: u64,
    },
    /// The bank is of another kind than the call serves.
    #[error("bank {} is of kind {kind}; this call serves {wanted} banks", quoted(.name))]
    WrongKind {
        /// The bank.
        name: String,
        /// Its kind.
        kind: String,
        /// The kind the call serves.
        wanted: &'static str,
    },
    /// The bank's state forbids the call.
    #[error("{message}")]
    FailedPrecondition {
        /// Why.
        message: String,
    },
    /// A cap is reached.
    #[error("{message}")]
    ResourceExhausted {
        /// Which cap.
        message: String,
    },
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The embedder failed.
    #[error(transparent)]
    Embed(#[from] EmbedError),
    /// The LLM failed where no fallback applies.
    #[error(transparent)]
    Llm(#[from] LlmError),
}

impl BankError {
    /// An [`BankError::InvalidArgument`].
    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        BankError::InvalidArgument(crate::util::invalid::Invalid::new(field, message))
    }

    /// `s` in the text rule's stored form ([`crate::text::charset::admit`], multi-line, at most `max`
    /// characters; it may be empty), or its refusal of `field` as [`BankError::refused_text`] maps it.
    pub fn admit_text(field: &str, s: &str, max: usize) -> Result<String, Self> {
        crate::text::charset::admit(s, crate::text::charset::Shape::Text, max).map_err(|why| Self::refused_text(field, why))
    }

    /// The text rule's refusal of `field`: over its cap is RESOURCE_EXHAUSTED (the banks' code for every
    /// cap), any other refusal INVALID_ARGUMENT.
    pub fn refused_text(field: &str, why: crate::text::charset::Refusal) -> Self {
        use crate::text::charset::Refusal;
        match why {
            Refusal::TooLong { chars, max } => {
                BankError::ResourceExhausted { message: format!("{field} is {chars} characters, over the limit of {max}") }
            }
            other @ (Refusal::Char { .. } | Refusal::Empty) => BankError::invalid(field, other.to_string()),
        }
    }
}

impl From<super::agent::AgentError> for BankError {
    fn from(e: super::agent::AgentError) -> Self {
        match e {
            super::agent::AgentError::Invalid { field, message } => {
                BankError::InvalidArgument(crate::util::invalid::Invalid { field, message })
            }
        }
    }
}
