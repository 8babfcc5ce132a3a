//! The one shape of "a request field is wrong": every layer's error enum (tools, episodes, banks) wraps it
//! as its `InvalidArgument` variant, so the message ("invalid argument {field}: {message}"), the field the
//! JSON faces report and the one mapping to INVALID_ARGUMENT are written once.

/// A request field and what is wrong with it. The message quotes at most a short prefix of the bad value
/// ([`crate::util::excerpt::quoted`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid argument {field}: {message}")]
pub struct Invalid {
    /// The field's path as the client sent it (`top_k`, `operations[2].content`, `data.score_history.t[0]`).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl Invalid {
    /// `field` is wrong because of `message`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Invalid { field: field.into(), message: message.into() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_the_field_first() {
        assert_eq!(Invalid::new("top_k", "must be at least 1").to_string(), "invalid argument top_k: must be at least 1");
    }
}
