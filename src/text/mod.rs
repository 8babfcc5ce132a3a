//! The small English toolkit the rest of the crate reads text with: a leaf that imports nothing from
//! the crate, so memory (lexical search), reward (LoCoMo's metric) and tools (merge and split) can all
//! use it without depending on each other.
//!
//! Two families live here, kept apart on purpose:
//! - LoCoMo's metric, reproduced exactly: [`normalize`] (`normalize_answer`, the "normalise, split,
//!   stem" token list) and [`porter`] (NLTK's Porter stemmer, bit for bit). Their outputs must equal
//!   the published Python, so they are pinned by fixtures generated from it.
//! - Readable rules for editing memories: [`sentences()`](sentences::sentences), clause [`segments`](clauses::segments),
//!   [`content_words`] with its deliberately light stem, and time expressions ([`words`]). Deterministic,
//!   std only, microseconds per call.
//!
//! And two small rules about text from outside: [`charset`] (which characters memory may hold) and
//! [`reply`] (cleaning a model's free-text reply: fences, preambles, labels, quotes).

pub mod charset;
pub mod clauses;
pub mod normalize;
pub mod porter;
pub mod reply;
pub mod sentences;
pub mod words;

#[cfg(test)]
pub(crate) mod fixtures;

pub use clauses::segments;
pub use normalize::stemmed_tokens;
pub use sentences::sentences;
pub use words::{
    char_len, content_word_tokens, content_words, dedup_key, ensure_terminal, has_content_word, has_time_expression, is_stopword,
    light_stem, lower, time_expressions,
};
