//! Where a rollout's episodes run: in-process, through the gRPC service's own handlers without the
//! transport (as `memgym eval` runs), or on a running server over gRPC (`--addr`). Both speak the
//! protobuf messages of `MemoryEnv`, so a tool's text, a refusal's message and a score are the same bytes
//! either way, and `memgym replay` can check a trajectory recorded one way against the other.
//!
//! A refusal the policy caused (INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION, OUT_OF_RANGE — the set
//! the verl adapter shows its model as text) is the tool's answer, `Error: …`; anything else (the server
//! is down, an evaluator's endpoint failed) fails the rollout.

use std::sync::Arc;

use serde_json::Value;
use tonic::transport::Channel;
use tonic::{Code, Request, Status};

use crate::api::pb;
use crate::api::pb::memory_env_client::MemoryEnvClient;
use crate::api::pb::memory_env_server::MemoryEnv;
use crate::api::MemoryEnvService;
use crate::episode::Environment;

/// The status codes that mean the call was wrong, not the environment.
pub const POLICY_ERRORS: [Code; 4] = [Code::InvalidArgument, Code::NotFound, Code::FailedPrecondition, Code::OutOfRange];

/// The environment of a rollout.
#[derive(Clone)]
pub enum Env {
    /// In this process.
    Local(Arc<MemoryEnvService>),
    /// A server over gRPC.
    Remote(MemoryEnvClient<Channel>),
}

/// What a tool call gave the policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolAnswer {
    /// Carried out; the tool's text.
    Done(String),
    /// Refused because of the call; `Error: …` with the environment's message.
    Refused(String),
}

impl ToolAnswer {
    /// The text the policy is shown.
    pub fn text(&self) -> &str {
        match self {
            ToolAnswer::Done(t) | ToolAnswer::Refused(t) => t,
        }
    }
}

/// A channel to the server at `addr` (`host:port` or a URL), for any of its services.
pub async fn channel(addr: &str) -> Result<Channel, String> {
    let url = if addr.contains("://") { addr.to_string() } else { format!("http://{addr}") };
    Channel::from_shared(url.clone())
        .map_err(|e| format!("--addr {}: {e}", crate::util::excerpt::quoted(addr)))?
        .connect()
        .await
        .map_err(|e| format!("cannot connect to {url}: {}", crate::util::openai_compat::error_chain(&e)))
}

impl Env {
    /// The in-process environment.
    pub fn local(env: Arc<Environment>) -> Env {
        Env::Local(Arc::new(MemoryEnvService::new(env)))
    }

    /// Connects to a server at `addr` (`host:port` or a URL).
    pub async fn connect(addr: &str) -> Result<Env, String> {
        Ok(Env::Remote(MemoryEnvClient::new(channel(addr).await?).max_decoding_message_size(64 << 20)))
    }

    /// A server at `addr`, or else `local` (built by the caller before its runtime: embedding M₀ blocks).
    pub async fn open(addr: Option<&str>, local: Option<Arc<Environment>>) -> anyhow::Result<Env> {
        match (addr, local) {
            (Some(addr), _) => Env::connect(addr).await.map_err(anyhow::Error::msg),
            (None, Some(env)) => Ok(Env::local(env)),
            (None, None) => anyhow::bail!("no --addr and no in-process environment"),
        }
    }

    /// Where it runs, for the report.
    pub fn describe(&self) -> &'static str {
        match self {
            Env::Local(_) => "in-process",
            Env::Remote(_) => "grpc",
        }
    }

    /// `ListTools`' schemas, in order.
    pub async fn tools(&self) -> Result<Vec<Value>, Status> {
        let r = match self {
            Env::Local(s) => s.list_tools(Request::new(pb::ListToolsRequest {})).await?.into_inner(),
            Env::Remote(c) => c.clone().list_tools(pb::ListToolsRequest {}).await?.into_inner(),
        };
        serde_json::from_str(&r.tools_json).map_err(|e| Status::internal(format!("ListTools.tools_json: {e}")))
    }

    /// `CreateEpisode`.
    pub async fn create(&self, req: pb::CreateEpisodeRequest) -> Result<pb::CreateEpisodeResponse, Status> {
        Ok(match self {
            Env::Local(s) => s.create_episode(Request::new(req)).await?.into_inner(),
            Env::Remote(c) => c.clone().create_episode(req).await?.into_inner(),
        })
    }

    /// `CallTool`: the policy's answer, or the failure that ends the rollout.
    pub async fn call(&self, episode_id: &str, tool: &str, arguments: &str) -> Result<ToolAnswer, Status> {
        let req = pb::CallToolRequest {
            episode_id: episode_id.to_string(),
            tool_name: tool.to_string(),
            arguments_json: arguments.to_string(),
            ..Default::default()
        };
        let r = match self {
            Env::Local(s) => s.call_tool(Request::new(req)).await.map(tonic::Response::into_inner),
            Env::Remote(c) => c.clone().call_tool(crate::api::on_episode(episode_id, req)).await.map(tonic::Response::into_inner),
        };
        match r {
            Ok(r) => Ok(ToolAnswer::Done(r.text)),
            // The episode itself gone (not found, reaped, closed: `episode "ID" …`) is the harness's
            // failure, never the policy's: it does not choose the episode.
            Err(s) if s.message().starts_with("episode \"") => Err(s),
            Err(s) if POLICY_ERRORS.contains(&s.code()) => Ok(ToolAnswer::Refused(format!("Error: {}", s.message()))),
            Err(s) => Err(s),
        }
    }

    /// `ScoreEpisode`.
    pub async fn score(&self, episode_id: &str) -> Result<pb::ScoreEpisodeResponse, Status> {
        let req = pb::ScoreEpisodeRequest { episode_id: episode_id.to_string() };
        Ok(match self {
            Env::Local(s) => s.score_episode(Request::new(req)).await?.into_inner(),
            Env::Remote(c) => c.clone().score_episode(crate::api::on_episode(episode_id, req)).await?.into_inner(),
        })
    }

    /// `ForkEpisode` of `episode_id` into forks with these ids (the parent's seed); the forks' ids as the
    /// server gave them (behind replicas, with the replica's name in front), in order.
    pub async fn fork(&self, episode_id: &str, ids: &[String]) -> Result<Vec<String>, Status> {
        let req = pb::ForkEpisodeRequest {
            episode_id: episode_id.to_string(),
            count: u32::try_from(ids.len()).unwrap_or(u32::MAX),
            fork_ids: ids.to_vec(),
            seeds: Vec::new(),
        };
        let forks = match self {
            Env::Local(s) => s.fork_episode(Request::new(req)).await?.into_inner().forks,
            Env::Remote(c) => c.clone().fork_episode(crate::api::on_episode(episode_id, req)).await?.into_inner().forks,
        };
        Ok(forks.into_iter().map(|f| f.episode_id).collect())
    }

    /// `CloseEpisode`; errors are ignored (the episode may already be gone).
    pub async fn close(&self, episode_id: &str) {
        let req = pb::CloseEpisodeRequest { episode_id: episode_id.to_string() };
        let _ = match self {
            Env::Local(s) => s.close_episode(Request::new(req)).await.map(drop),
            Env::Remote(c) => c.clone().close_episode(crate::api::on_episode(episode_id, req)).await.map(drop),
        };
    }
}
