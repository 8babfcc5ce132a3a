//! Offline evaluations that decide defaults by measurement rather than taste, and check that the reward
//! means what it should.
//!
//! [`retrieval`] runs every LoCoMo question against its conversation's M₀ with each retriever (dense
//! embedders, BM25, and their reciprocal-rank-fusion hybrid) and reports evidence recall@1/5/10, MRR and
//! embedding throughput per category — the table the README uses to pick the server's default embedder.
//!
//! [`agents`] runs scripted agents (no-op, oracle, destroyer, random) over a split on the in-process
//! environment and reports, per agent and category, the mean reward under each evaluator, whether its
//! sign is the expected one, and how often two evaluators agree on it — a sanity check of the reward.

pub mod agents;
pub mod bm25;
pub mod retrieval;
