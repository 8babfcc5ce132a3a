//! memgym: a reinforcement-learning environment for memory editing, served over gRPC.
//!
//! An episode is one LoCoMo conversation's memory plus one target question. A policy edits the memory
//! with six tools (search, manage, delete, sample, merge, split); the server scores the episode with
//! `reward = (p_new − p_old) × memory_efficiency`.
//!
//! Layers, top to bottom: [`api`] (gRPC services, conversions, error → status) → [`episode`]
//! (lifecycle, registry, limits, reaper) → [`tools`] (one file per tool) → [`memory`] (records, shared
//! M₀, per-episode overlay, exact/HNSW index) → [`embed`]. Beside them: [`dataset`] (LoCoMo ↔ Parquet)
//! and [`reward`] (pure functions). Leaves: [`text`] (normalisation, stemming, sentences, clauses),
//! [`fnv`] (the one hash), [`json`] (order-preserving JSON), [`vector`] (dot products and top-k, bit-equal on every path). The harness sits beside the face (`main`, [`cli`], [`config`],
//! [`server`]), above [`api`], whose generated clients it uses: [`bench`] (the load generator) and
//! [`eval`] (offline evaluations).

pub mod api;
pub mod app;
pub mod banks;
pub mod dataset;
pub mod embed;
pub mod episode;
pub mod harness;
pub mod llm;
pub mod memory;
pub mod reward;
pub mod text;
pub mod tools;
pub mod util;

/// The one fake OpenAI server of the tests (`tests/support/`), shared with the integration tests.
#[cfg(test)]
#[path = "../tests/support/fake_openai.rs"]
mod fake_openai;
