//! `memgym bench protocols`' rows for the faces trainer ecosystems reach memgym through besides gRPC,
//! OpenEnv's WebSocket and MCP's shared endpoint: NeMo Gym's resources server (`nemo-gym`: `/seed_session`,
//! a POST per tool with the session cookie, `/verify`, over one pooled HTTP/1.1 client as NeMo Gym's
//! `ServerClient` keeps one), and verifiers' per-episode MCP URL (`mcp-episode-url`: the episode opened over
//! gRPC, as `memgym_verifiers` opens it, then one MCP client per episode at `/mcp/episodes/{id}` on the
//! stateless 2026-07-28 wire, since verifiers hands each rollout its own bare URL), and the Open Reward
//! Standard (`ors`: a session, `/create` with the task spec, each tool a `POST /call` answered as an SSE
//! stream read to its end, then `submit` and `/delete`, as the openreward SDK does). The plans and timing are
//! the other rows' ([`super::protocols`]): only the tool calls are timed, opening and scoring count in the
//! wall time.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use parking_lot::Mutex;
use rmcp::model::{CallToolRequestParams, ProtocolVersion};
use rmcp::service::ClientLifecycleMode;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ClientServiceExt;
use serde_json::{json, Value};
use tonic::transport::Channel;

use super::hist::Hist;
use super::protocols::{record, Plan};
use crate::api::faces::nemo_gym::COOKIE;
use crate::api::pb;
use crate::api::pb::memory_env_client::MemoryEnvClient;

/// POSTs `body` as JSON (with the session's header when given); the answer, or an error naming the route
/// and the status.
async fn post(
    http: &reqwest::Client,
    url: &str,
    header: Option<(http::HeaderName, String)>,
    body: &Value,
) -> anyhow::Result<reqwest::Response> {
    let mut r = http.post(url).header(http::header::CONTENT_TYPE, "application/json").body(body.to_string());
    if let Some((name, value)) = header {
        r = r.header(name, value);
    }
    let r = r.send().await.with_context(|| format!("POST {url}"))?;
    let status = r.status();
    if !status.is_success() {
        let text = r.text().await.unwrap_or_default();
        anyhow::bail!("POST {url}: {status}: {}", crate::util::excerpt::cut(&text));
    }
    Ok(r)
}

/// One episode over NeMo Gym's resources-server face at `base` (`http://host:port`).
pub(super) async fn nemo_gym_episode(http: reqwest::Client, base: String, plan: Plan, hist: Arc<Mutex<Hist>>) -> anyhow::Result<u64> {
    let seed = json!({"question_id": plan.question_id, "max_steps": plan.max_steps});
    let seeded = post(&http, &format!("{base}/seed_session"), None, &seed).await?;
    let cookie = seeded
        .headers()
        .get_all(http::header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| v.split(';').next()?.strip_prefix(COOKIE)?.strip_prefix('=').map(str::to_string))
        .context("/seed_session set no session cookie")?;
    let cookie = || Some((http::header::COOKIE, format!("{COOKIE}={cookie}")));
    for (tool, args) in &plan.calls {
        let t = Instant::now();
        post(&http, &format!("{base}/{tool}"), cookie(), args).await?.bytes().await?;
        record(&hist, t.elapsed());
    }
    let verify = json!({"responses_create_params": {"input": "bench"}, "response": {"output": []}});
    post(&http, &format!("{base}/verify"), cookie(), &verify).await?.bytes().await?;
    Ok(plan.calls.len() as u64)
}

/// One episode through its own MCP URL on the MCP face at `mcp` (`http://host:port`), opened and scored
/// over gRPC.
pub(super) async fn mcp_episode_url(grpc: Channel, mcp: String, i: usize, plan: Plan, hist: Arc<Mutex<Hist>>) -> anyhow::Result<u64> {
    let mut c = MemoryEnvClient::new(grpc);
    let id = format!("bench-mcp-url-{i}-{}", super::run_tag());
    let open = pb::CreateEpisodeRequest {
        episode_id: id.clone(),
        question_id: plan.question_id,
        max_steps: Some(plan.max_steps),
        ..Default::default()
    };
    c.create_episode(open).await?;
    let transport = StreamableHttpClientTransport::from_uri(format!("{mcp}/mcp/episodes/{id}"));
    let mode = ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] };
    let client = ().serve_with_lifecycle(transport, mode).await.context("connecting to the episode's MCP URL")?;
    for (tool, args) in &plan.calls {
        let Value::Object(args) = args.clone() else { anyhow::bail!("arguments must be an object") };
        let t = Instant::now();
        let r = client.peer().call_tool(CallToolRequestParams::new(*tool).with_arguments(args)).await?;
        record(&hist, t.elapsed());
        anyhow::ensure!(r.is_error != Some(true), "{tool}: {:?}", r.content);
    }
    let _ = client.cancel().await;
    c.score_episode(pb::ScoreEpisodeRequest { episode_id: id.clone() }).await?;
    c.close_episode(pb::CloseEpisodeRequest { episode_id: id }).await?;
    Ok(plan.calls.len() as u64)
}

/// One episode over the Open Reward Standard face at `base` (`http://host:port`).
pub(super) async fn ors_episode(http: reqwest::Client, base: String, plan: Plan, hist: Arc<Mutex<Hist>>) -> anyhow::Result<u64> {
    let created: Value = post(&http, &format!("{base}/create_session"), None, &json!({})).await?.json().await?;
    let sid = created["sid"].as_str().context("/create_session gave no sid")?.to_string();
    let session = || Some((http::HeaderName::from_static("x-session-id"), sid.clone()));
    let spec = json!({"task_spec": {"question_id": plan.question_id, "max_steps": plan.max_steps}});
    post(&http, &format!("{base}/create"), session(), &spec).await?.bytes().await?;
    let call = async |name: &str, input: &Value| -> anyhow::Result<String> {
        let body = json!({"name": name, "input": input});
        let text = post(&http, &format!("{base}/call"), session(), &body).await?.text().await?;
        anyhow::ensure!(text.contains("event: end") && text.contains(r#""ok":true"#), "{name}: {}", crate::util::excerpt::cut(&text));
        Ok(text)
    };
    for (tool, args) in &plan.calls {
        let t = Instant::now();
        call(tool, args).await?;
        record(&hist, t.elapsed());
    }
    let submitted = call("submit", &json!({})).await?;
    anyhow::ensure!(submitted.contains(r#""finished":true"#), "submit did not finish: {}", crate::util::excerpt::cut(&submitted));
    post(&http, &format!("{base}/delete"), session(), &json!({})).await?.bytes().await?;
    Ok(plan.calls.len() as u64)
}
