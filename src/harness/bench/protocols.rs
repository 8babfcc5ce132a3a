//! `memgym bench protocols`: the same episodes over every protocol memgym speaks, in one run, on one
//! in-process server (`127.0.0.1:0` for gRPC, OpenEnv and MCP): gRPC `CallTool`, OpenEnv's WebSocket
//! (one connection per episode, as `GenericEnvClient` opens one per environment), and MCP through the
//! official Rust SDK's client (rmcp) on the stateless 2026-07-28 wire (`server/discover`, the Python
//! SDK's default) and on the 2025-11-25 session wire (`initialize`); then the trainer ecosystems' faces
//! ([`super::faces`]): MCP at each episode's own URL (verifiers), NeMo Gym's resources server and the Open
//! Reward Standard.
//!
//! Each protocol runs `--episodes` concurrent episodes. An episode opens (question `i` of the
//! non-adversarial questions), makes `--calls` tool calls in a fixed mix (search 60 %, sample 20 %,
//! manage create 20 %; identical across protocols), scores and closes. Reported per protocol: tool
//! calls/s over the whole run (open and score included in the wall time), tool-call latency p50/p99/max,
//! and calls/s as a ratio to gRPC's measured in the same run. Numbers are the machine's, never asserted.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures_util::{SinkExt, StreamExt};
use parking_lot::Mutex;
use rmcp::model::{CallToolRequestParams, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientServiceExt, RoleClient};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;
use tonic::transport::Channel;

use super::hist::Hist;
use crate::api::faces::mcp::McpOptions;
use crate::api::faces::nemo_gym::NemoGymOptions;
use crate::api::faces::openenv::OpenEnvOptions;
use crate::api::pb;
use crate::api::pb::memory_env_client::MemoryEnvClient;
use crate::app::cli::ProtocolBenchArgs;
use crate::app::{config, server};

/// The protocols measured, in report order.
const PROTOCOLS: [&str; 7] = ["grpc", "openenv-ws", "mcp-2026-07-28", "mcp-2025-11-25", "mcp-episode-url", "nemo-gym", "ors"];

/// One protocol's measurement.
#[derive(Debug)]
struct Row {
    protocol: &'static str,
    wall: f64,
    calls: u64,
    failures: u64,
    hist: Hist,
}

impl Row {
    fn calls_per_sec(&self) -> f64 {
        self.calls as f64 / self.wall.max(1e-9)
    }
}

/// The work of one episode: its question, its step budget (one more than its calls, so no call ends it)
/// and its tool calls.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    pub(super) question_id: String,
    pub(super) max_steps: u32,
    pub(super) calls: Vec<(&'static str, Value)>,
}

fn plans(questions: &[(String, String)], episodes: usize, calls: u32) -> Vec<Plan> {
    (0..episodes)
        .map(|i| {
            let (qid, text) = &questions[i % questions.len()];
            let calls: Vec<(&'static str, Value)> = (0..calls as usize)
                .map(|c| match (i + c) % 10 {
                    0..=5 => ("search_memory", json!({"query": text, "top_k": 5})),
                    6 | 7 => ("sample_memory", json!({"k": 5, "strategy": "random"})),
                    _ => ("manage_memory", json!({"operation": "create", "content": format!("Bench note {i}.{c}: {text}")})),
                })
                .collect();
            Plan { question_id: qid.clone(), max_steps: calls.len() as u32 + 1, calls }
        })
        .collect()
}

/// Runs the measurement and prints the table (and one JSON line with `--json`).
pub async fn run(a: ProtocolBenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(a.episodes > 0 && a.calls > 0 && a.mcp_clients > 0, "--episodes, --calls and --mcp-clients must be positive");
    if let Some(bad) = a.only.iter().find(|p| !PROTOCOLS.contains(&p.as_str())) {
        anyhow::bail!("--only: unknown protocol {bad:?} (expected {})", PROTOCOLS.join(", "));
    }
    let env = config::build_environment(&a.env)?;
    let questions: Vec<(String, String)> = env
        .dataset()
        .questions
        .iter()
        .filter(|q| q.category != crate::dataset::ADVERSARIAL_CATEGORY)
        .map(|q| (q.id.clone(), q.question.clone()))
        .collect();
    anyhow::ensure!(!questions.is_empty(), "the dataset has no questions");
    let mcp = McpOptions::new(vec!["127.0.0.1".into()]);
    let openenv = OpenEnvOptions::new(a.episodes, mcp.clone());
    let loopback: std::net::SocketAddr = "127.0.0.1:0".parse()?;
    let mut faces = server::Faces::bind(Some((loopback, openenv)), Some((loopback, mcp.clone()))).await?;
    faces.bind_nemo_gym(loopback, NemoGymOptions { allowed_hosts: mcp.allowed_hosts.clone() }).await?;
    faces.bind_ors(loopback, crate::api::faces::ors::OrsOptions::new(mcp.allowed_hosts.clone())).await?;
    let running = server::spawn_faces(env, None, loopback, faces).await?;
    let nemo_gym = running.nemo_gym_addr.context("nemo-gym face")?;
    let ors = running.ors_addr.context("ors face")?;
    let plans = Arc::new(plans(&questions, a.episodes, a.calls));
    let grpc = Channel::from_shared(format!("http://{}", running.addr))?.connect().await?;
    let ws = format!("ws://{}/ws", running.openenv_addr.context("openenv face")?);
    let mcp_url = format!("http://{}/mcp", running.mcp_addr.context("mcp face")?);

    let wanted = |p: &str| a.only.is_empty() || a.only.iter().any(|o| o == p);
    let mut rows = Vec::new();
    if wanted("grpc") {
        rows.push(measure("grpc", &plans, |i, p, h| grpc_episode(grpc.clone(), i, p, h)).await);
    }
    if wanted("openenv-ws") {
        rows.push(measure("openenv-ws", &plans, |i, p, h| openenv_episode(ws.clone(), i, p, h)).await);
    }
    for (protocol, mode) in [
        ("mcp-2026-07-28", ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] }),
        ("mcp-2025-11-25", ClientLifecycleMode::Initialize),
    ] {
        if !wanted(protocol) {
            continue;
        }
        let mut clients = Vec::new();
        for _ in 0..a.mcp_clients {
            let transport = StreamableHttpClientTransport::from_uri(mcp_url.as_str());
            clients
                .push(Arc::new(().serve_with_lifecycle(transport, mode.clone()).await.with_context(|| format!("{protocol}: connecting"))?));
        }
        let shared: Arc<[Arc<RunningService<RoleClient, ()>>]> = clients.clone().into();
        rows.push(measure(protocol, &plans, |i, p, h| mcp_episode(shared[i % shared.len()].clone(), i, p, h)).await);
        drop(shared);
        // End the sessions (DELETE) while the server still runs.
        for c in clients {
            if let Ok(c) = Arc::try_unwrap(c) {
                let _ = c.cancel().await;
            }
        }
    }
    if wanted("mcp-episode-url") {
        let mcp = format!("http://{}", running.mcp_addr.context("mcp face")?);
        rows.push(measure("mcp-episode-url", &plans, |i, p, h| super::faces::mcp_episode_url(grpc.clone(), mcp.clone(), i, p, h)).await);
    }
    if wanted("nemo-gym") {
        let http = reqwest::Client::builder().pool_max_idle_per_host(a.episodes).build()?;
        let base = format!("http://{nemo_gym}");
        rows.push(measure("nemo-gym", &plans, |_, p, h| super::faces::nemo_gym_episode(http.clone(), base.clone(), p, h)).await);
    }
    if wanted("ors") {
        let http = reqwest::Client::builder().pool_max_idle_per_host(a.episodes).build()?;
        let base = format!("http://{ors}");
        rows.push(measure("ors", &plans, |_, p, h| super::faces::ors_episode(http.clone(), base.clone(), p, h)).await);
    }
    running.stop().await?;
    report(&a, &mut rows);
    Ok(())
}

/// Runs every plan concurrently through `episode` and times the whole.
async fn measure<F, Fut>(protocol: &'static str, plans: &Arc<Vec<Plan>>, episode: F) -> Row
where
    F: Fn(usize, Plan, Arc<Mutex<Hist>>) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<u64>> + Send + 'static,
{
    let hist = Arc::new(Mutex::new(Hist::default()));
    let started = Instant::now();
    let tasks: Vec<_> = plans.iter().enumerate().map(|(i, p)| tokio::spawn(episode(i, p.clone(), hist.clone()))).collect();
    let (mut calls, mut failures) = (0, 0);
    for t in tasks {
        match t.await {
            Ok(Ok(n)) => calls += n,
            Ok(Err(e)) => {
                failures += 1;
                tracing::warn!(protocol, error = %format!("{e:#}"), "bench episode failed");
            }
            Err(e) => {
                failures += 1;
                tracing::warn!(protocol, error = %e, "bench episode panicked");
            }
        }
    }
    let wall = started.elapsed().as_secs_f64();
    let hist = std::mem::take(&mut *hist.lock());
    Row { protocol, wall, calls, failures, hist }
}

pub(super) fn record(hist: &Mutex<Hist>, d: Duration) {
    hist.lock().record(d);
}

async fn grpc_episode(channel: Channel, i: usize, plan: Plan, hist: Arc<Mutex<Hist>>) -> anyhow::Result<u64> {
    let mut c = MemoryEnvClient::new(channel);
    let id = format!("bench-grpc-{i}-{}", super::run_tag());
    c.create_episode(pb::CreateEpisodeRequest {
        episode_id: id.clone(),
        question_id: plan.question_id,
        max_steps: Some(plan.max_steps),
        ..Default::default()
    })
    .await?;
    for (tool, args) in &plan.calls {
        let t = Instant::now();
        c.call_tool(pb::CallToolRequest {
            episode_id: id.clone(),
            tool_name: tool.to_string(),
            arguments_json: args.to_string(),
            ..Default::default()
        })
        .await?;
        record(&hist, t.elapsed());
    }
    c.score_episode(pb::ScoreEpisodeRequest { episode_id: id.clone() }).await?;
    c.close_episode(pb::CloseEpisodeRequest { episode_id: id }).await?;
    Ok(plan.calls.len() as u64)
}

async fn openenv_episode(url: String, _i: usize, plan: Plan, hist: Arc<Mutex<Hist>>) -> anyhow::Result<u64> {
    let config =
        tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default().read_buffer_size(crate::api::faces::openenv::WS_READ_BUFFER);
    let (mut ws, _) = tokio_tungstenite::connect_async_with_config(url.as_str(), Some(config), false).await?;
    let mut ask = async |v: Value| -> anyhow::Result<Value> {
        ws.send(Message::Text(v.to_string().into())).await?;
        loop {
            match ws.next().await.context("connection closed")?? {
                Message::Text(t) => {
                    let r: Value = serde_json::from_str(&t)?;
                    anyhow::ensure!(r["type"] != "error", "server error: {}", r["data"]);
                    return Ok(r);
                }
                Message::Binary(_) | Message::Ping(_) | Message::Pong(_) | Message::Close(_) | Message::Frame(_) => continue,
            }
        }
    };
    ask(json!({"type": "reset", "data": {"question_id": plan.question_id, "max_steps": plan.max_steps}})).await?;
    for (tool, args) in &plan.calls {
        let t = Instant::now();
        let r = ask(json!({"type": "step", "data": {"type": "call_tool", "tool_name": tool, "arguments": args}})).await?;
        record(&hist, t.elapsed());
        anyhow::ensure!(r["data"]["observation"]["error"].is_null(), "{tool}: {}", r["data"]["observation"]["error"]);
    }
    ask(json!({"type": "step", "data": {"type": "score"}})).await?;
    ws.send(Message::Text(json!({"type": "close"}).to_string().into())).await?;
    Ok(plan.calls.len() as u64)
}

async fn mcp_episode(client: Arc<RunningService<RoleClient, ()>>, i: usize, plan: Plan, hist: Arc<Mutex<Hist>>) -> anyhow::Result<u64> {
    let peer = client.peer();
    let call = async |name: &'static str, args: Value| -> anyhow::Result<Value> {
        let Value::Object(args) = args else { anyhow::bail!("arguments must be an object") };
        let r = peer.call_tool(CallToolRequestParams::new(name).with_arguments(args)).await?;
        anyhow::ensure!(r.is_error != Some(true), "{name}: {:?}", r.content);
        Ok(r.structured_content.unwrap_or(Value::Null))
    };
    let id = format!("bench-mcp-{i}-{}", super::run_tag());
    call("create_episode", json!({"question_id": plan.question_id, "episode_id": id, "max_steps": plan.max_steps})).await?;
    for (tool, args) in &plan.calls {
        let mut args = args.clone();
        args["episode_id"] = Value::from(id.clone());
        let t = Instant::now();
        call(tool, args).await?;
        record(&hist, t.elapsed());
    }
    call("score_episode", json!({"episode_id": id})).await?;
    call("close_episode", json!({"episode_id": id})).await?;
    Ok(plan.calls.len() as u64)
}

fn report(a: &ProtocolBenchArgs, rows: &mut [Row]) {
    let grpc = rows.iter().find(|r| r.protocol == "grpc").map(Row::calls_per_sec).unwrap_or(f64::NAN);
    println!("memgym bench protocols: {} concurrent episodes x {} tool calls per protocol, one in-process server", a.episodes, a.calls);
    println!(
        "{:<16} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "protocol", "calls", "wall s", "calls/s", "vs gRPC", "p50 ms", "p99 ms", "max ms"
    );
    let mut out = Vec::new();
    for r in rows.iter() {
        let cps = r.calls_per_sec();
        let (p50, p99, max) = (r.hist.pct_ms(50.0), r.hist.pct_ms(99.0), r.hist.pct_ms(100.0));
        println!(
            "{:<16} {:>10} {:>9.2} {:>9.0} {:>9.2} {:>9.2} {:>9.2} {:>9.2}{}",
            r.protocol,
            r.calls,
            r.wall,
            cps,
            cps / grpc,
            p50,
            p99,
            max,
            if r.failures > 0 { format!("  ({} episodes failed)", r.failures) } else { String::new() }
        );
        out.push(
            json!({"protocol": r.protocol, "tool_calls": r.calls, "wall_secs": r.wall, "calls_per_sec": cps, "ratio_to_grpc": cps / grpc,
            "p50_ms": p50, "p99_ms": p99, "max_ms": max, "failed_episodes": r.failures}),
        );
    }
    if a.json {
        println!("{}", json!({"bench": "protocols", "episodes": a.episodes, "calls": a.calls, "rows": out}));
    }
}
