//! The harness: code that drives the environment the way a client does, to measure it. The load generator
//! and its baselines (`bench`), the scripted agents, the adversarial suite and the retrieval evaluation
//! (`eval`), a real LLM in the policy's seat with its replay and forked groups (`rollout`), and `memgym learn`'s
//! Training-Free GRPO loop on it (`learn`). It sits beside the app, above the API; nothing below imports it.

pub mod bench;
pub mod eval;
pub mod learn;
pub mod rollout;
