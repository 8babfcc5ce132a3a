//! Integration tests: the real server on 127.0.0.1:0, driven by a real gRPC client.

mod agent;
mod auth;
mod bad_input;
mod banks;
mod banks_pg;
mod bench;
mod binary;
mod dataset;
mod drain;
mod ended;
mod episodes;
mod fork;
mod helpers;
mod leak;
mod learn;
mod learn_loop;
mod llm;
mod mcp;
mod mcp_episode;
mod memory_text;
mod metrics;
mod nemo_gym;
mod openenv;
mod ors;
mod paging;
mod reasons;
mod replicas;
mod rollout;
mod streams;
mod tls;

#[path = "../support/fake_openai.rs"]
mod fake_openai;
