//! `memgym.v1.MemoryEnv`: thin handlers — convert, validate, call the environment, convert back.
//! Each request runs in a tracing span carrying the episode id and tool name; memory contents are never
//! logged above debug.

use std::sync::Arc;

use tonic::{Request, Response, Status};
use tracing::Instrument;

use crate::api::calls;
use crate::api::grpc::convert::{self, episode_id, named, page_size, Typed};
use crate::api::grpc::page;
use crate::api::pb;
use crate::api::pb::memory_env_server::MemoryEnv;
use crate::api::status::logged;
use crate::episode::{CreateRequest, Environment};
use crate::tools::{llm_calls, RawDelete, RawManage, RawMerge, RawSample, RawSearch, RawSplit, ToolCall, ToolError, ToolLimits};
use crate::util::excerpt::name;
use pb::call_tool_response::Result as R;

/// The MemoryEnv service.
#[derive(Debug, Clone)]
pub struct MemoryEnvService {
    env: Arc<Environment>,
}

impl MemoryEnvService {
    /// Serves `env`.
    pub fn new(env: Arc<Environment>) -> Self {
        MemoryEnvService { env }
    }

    /// Converts a typed request, validates it and runs it.
    async fn typed<Q, Raw>(&self, req: Q, validate: impl FnOnce(Raw, &ToolLimits) -> Result<ToolCall, ToolError>) -> Result<R, Status>
    where
        Q: TryInto<Typed<Raw>, Error = Status>,
    {
        let Typed { episode_id: id, raw } = req.try_into()?;
        let call = raw.and_then(|raw| validate(raw, &self.env.config().limits.tools));
        Ok(calls::run(&self.env, &id, call, None).await?.result)
    }
}

/// The typed result a tool RPC expects, or Internal if the tool returned another kind (a bug).
fn expect<T>(r: R, pick: impl FnOnce(R) -> Option<T>) -> Result<Response<T>, Status> {
    pick(r).map(Response::new).ok_or_else(|| Status::internal("tool returned a different result kind"))
}
#[tonic::async_trait]
impl MemoryEnv for MemoryEnvService {
    async fn create_episode(&self, request: Request<pb::CreateEpisodeRequest>) -> Result<Response<pb::CreateEpisodeResponse>, Status> {
        let req = request.into_inner();
        let span = tracing::info_span!("create_episode", episode_id = %name(&req.episode_id), question_id = %name(&req.question_id));
        logged(
            async {
                let req = CreateRequest::try_from(req)?;
                let created = self.env.create_episode(req).await?;
                let s = created.state;
                Ok(Response::new(pb::CreateEpisodeResponse {
                    episode_id: s.episode_id.clone(),
                    question: s.question.clone(),
                    initial_memory_count: s.initial_memory_count as u32,
                    max_steps: s.max_steps,
                    created: created.created,
                    state: Some(s.into()),
                }))
            }
            .instrument(span)
            .await,
        )
    }

    async fn search(&self, request: Request<pb::SearchRequest>) -> Result<Response<pb::SearchResponse>, Status> {
        let req = request.into_inner();
        let span = tracing::info_span!("tool", episode_id = %name(&req.episode_id), tool = "search_memory");
        let out = self.typed(req, |raw: RawSearch, l| raw.validate(l).map(ToolCall::Search)).instrument(span).await;
        expect(logged(out)?, |r| if let R::Search(x) = r { Some(x) } else { None })
    }

    async fn manage(&self, request: Request<pb::ManageRequest>) -> Result<Response<pb::ManageResponse>, Status> {
        let req = request.into_inner();
        let span = tracing::info_span!("tool", episode_id = %name(&req.episode_id), tool = "manage_memory");
        let out = self.typed(req, |raw: RawManage, l| raw.validate(l).map(ToolCall::Manage)).instrument(span).await;
        expect(logged(out)?, |r| if let R::Manage(x) = r { Some(x) } else { None })
    }

    async fn delete(&self, request: Request<pb::DeleteRequest>) -> Result<Response<pb::DeleteResponse>, Status> {
        let req = request.into_inner();
        let span = tracing::info_span!("tool", episode_id = %name(&req.episode_id), tool = "delete_memory");
        let out = self.typed(req, |raw: RawDelete, l| raw.validate(l).map(ToolCall::Delete)).instrument(span).await;
        expect(logged(out)?, |r| if let R::Delete(x) = r { Some(x) } else { None })
    }

    async fn sample(&self, request: Request<pb::SampleRequest>) -> Result<Response<pb::SampleResponse>, Status> {
        let req = request.into_inner();
        let span = tracing::info_span!("tool", episode_id = %name(&req.episode_id), tool = "sample_memory");
        let out = self.typed(req, |raw: RawSample, _l| raw.validate().map(ToolCall::Sample)).instrument(span).await;
        expect(logged(out)?, |r| if let R::Sample(x) = r { Some(x) } else { None })
    }

    async fn merge(&self, request: Request<pb::MergeRequest>) -> Result<Response<pb::MergeResponse>, Status> {
        let req = request.into_inner();
        let span = tracing::info_span!("tool", episode_id = %name(&req.episode_id), tool = "merge_memory");
        let out = self.typed(req, |raw: RawMerge, l| raw.validate(l).map(ToolCall::Merge)).instrument(span).await;
        expect(logged(out)?, |r| if let R::Merge(x) = r { Some(x) } else { None })
    }

    async fn split(&self, request: Request<pb::SplitRequest>) -> Result<Response<pb::SplitResponse>, Status> {
        let req = request.into_inner();
        let span = tracing::info_span!("tool", episode_id = %name(&req.episode_id), tool = "split_memory");
        let out = self.typed(req, |raw: RawSplit, l| raw.validate(l).map(ToolCall::Split)).instrument(span).await;
        expect(logged(out)?, |r| if let R::Split(x) = r { Some(x) } else { None })
    }

    async fn call_tool(&self, request: Request<pb::CallToolRequest>) -> Result<Response<pb::CallToolResponse>, Status> {
        let pb::CallToolRequest { episode_id: id, tool_name, arguments_json, call_id } = request.into_inner();
        let span = tracing::info_span!("tool", episode_id = %name(&id), tool = %name(&tool_name));
        logged(
            async {
                let id = episode_id(id)?;
                let call = llm_calls::parse_call(&tool_name, &arguments_json, &self.env.config().limits.tools);
                let call_id = (!call_id.is_empty()).then_some(call_id.as_str());
                let r = calls::run(&self.env, &id, call, call_id).await?;
                Ok(Response::new(pb::CallToolResponse { text: r.text, result: Some(r.result), metrics: named(&r.metrics) }))
            }
            .instrument(span)
            .await,
        )
    }

    async fn list_tools(&self, _request: Request<pb::ListToolsRequest>) -> Result<Response<pb::ListToolsResponse>, Status> {
        let schemas = llm_calls::tool_schemas(&self.env.config().limits.tools);
        let tools = schemas
            .iter()
            .map(|s| pb::ToolSchema {
                name: s["function"]["name"].as_str().unwrap_or_default().to_string(),
                description: s["function"]["description"].as_str().unwrap_or_default().to_string(),
                schema_json: s.to_string(),
            })
            .collect();
        Ok(Response::new(pb::ListToolsResponse { tools, tools_json: serde_json::Value::Array(schemas).to_string() }))
    }

    async fn get_episode(&self, request: Request<pb::GetEpisodeRequest>) -> Result<Response<pb::GetEpisodeResponse>, Status> {
        let pb::GetEpisodeRequest { episode_id: id, include_trace } = request.into_inner();
        logged(
            async {
                let (state, trace) = self.env.get_episode(&episode_id(id)?, include_trace).await?;
                Ok(Response::new(pb::GetEpisodeResponse { state: Some(state.into()), trace: trace.into_iter().map(Into::into).collect() }))
            }
            .await,
        )
    }

    async fn list_memories(&self, request: Request<pb::ListMemoriesRequest>) -> Result<Response<pb::ListMemoriesResponse>, Status> {
        let pb::ListMemoriesRequest { episode_id: id, page_size: size, page_token, memory_type } = request.into_inner();
        logged(
            async {
                let id = episode_id(id)?;
                let size = page_size(size, 50, 500)?;
                let key = page::listing_key(page::Rpc::Memories, &[&id, &memory_type.to_string()]);
                let after = page::decode(page::Rpc::Memories, key, &page_token)?;
                let memory_type = convert::memory_type_in("memory_type", memory_type)?;
                let page = self.env.list_memories(&id, after, size, memory_type).await?;
                Ok(Response::new(pb::ListMemoriesResponse {
                    memories: page.memories.iter().map(pb::Memory::from).collect(),
                    next_page_token: page.next_after.map(|p| page::encode(page::Rpc::Memories, key, p)).unwrap_or_default(),
                    total: page.total as u32,
                }))
            }
            .await,
        )
    }

    async fn score_episode(&self, request: Request<pb::ScoreEpisodeRequest>) -> Result<Response<pb::ScoreEpisodeResponse>, Status> {
        let pb::ScoreEpisodeRequest { episode_id: id } = request.into_inner();
        let span = tracing::info_span!("score_episode", episode_id = %name(&id));
        logged(
            async {
                let id = episode_id(id)?;
                Ok(Response::new(calls::score(&self.env, &id).await?))
            }
            .instrument(span)
            .await,
        )
    }

    async fn fork_episode(&self, request: Request<pb::ForkEpisodeRequest>) -> Result<Response<pb::ForkEpisodeResponse>, Status> {
        let req = crate::episode::ForkRequest::try_from(request.into_inner())?;
        let span = tracing::info_span!("fork_episode", episode = %name(&req.episode_id), count = req.count);
        logged(
            async {
                let forks = self.env.fork_episode(req).await?;
                Ok(Response::new(pb::ForkEpisodeResponse { forks: forks.into_iter().map(Into::into).collect() }))
            }
            .instrument(span)
            .await,
        )
    }

    async fn close_episode(&self, request: Request<pb::CloseEpisodeRequest>) -> Result<Response<pb::CloseEpisodeResponse>, Status> {
        let pb::CloseEpisodeRequest { episode_id: id } = request.into_inner();
        logged(
            async {
                // None: already closed or reaped (a retried close), and the id is still remembered.
                let state = self.env.close_episode(&episode_id(id)?).await?;
                Ok(Response::new(pb::CloseEpisodeResponse { state: state.map(Into::into) }))
            }
            .await,
        )
    }
}
