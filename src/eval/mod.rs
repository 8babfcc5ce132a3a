//! Offline evaluations that decide defaults by measurement rather than taste.
//!
//! [`retrieval`] runs every LoCoMo question against its conversation's M₀ with each retriever (dense
//! embedders, BM25, and their reciprocal-rank-fusion hybrid) and reports evidence recall@1/5/10, MRR and
//! embedding throughput per category — the table the README uses to pick the server's default embedder.

pub mod bm25;
pub mod retrieval;
