//! `memgym bench`: a load generator that drives the real gRPC API the way an RL trainer does.
//!
//! N concurrent episodes (GRPO groups of `group` episodes share a question) each run: CreateEpisode,
//! `calls` CallTool requests in a realistic mix (search 40%, sample 10%, manage create 15% / update
//! 10%, delete 10%, merge 10%, split 5%), then — once every episode has made its calls, as a verl step
//! scores after all rollouts — ScoreEpisode and CloseEpisode. `--duration` instead keeps N episodes
//! running for that long, replacing each finished one.
//!
//! It reports episodes/s, tool calls/s, latency percentiles per RPC, RSS at start / with all episodes
//! open / peak / end (and every second with `--duration`), CPU time per tool call, the embedder and
//! index in use, the embedder's own throughput at batch 32 measured in the same run, and the bare gRPC
//! ceiling (health checks over the same connections and in-flight cap, `ceiling.rs`) with tool calls/s
//! as a share of it and the CPU per call that is transport rather than memgym's own work. Servers:
//! in-process on `127.0.0.1:0` (default; RSS and CPU are the whole process, client included),
//! `--spawn-server` (a child `memgym serve`: RSS and CPU are the server's alone), or `--addr` (an
//! external server: no RSS/CPU). `--addr PROXY --compare-addr DIRECT` compares a proxy in front of
//! replicas with one replica reached directly (`compare.rs`). Speed is reported here, never asserted in
//! tests.

pub mod banks;
mod baseline;
mod ceiling;
mod compare;
mod faces;
mod hist;
mod load;
mod probe;
pub mod protocols;
mod report;
pub mod rollout;
mod target;

use std::time::{Duration, Instant};

use anyhow::Context;
use tonic::transport::Channel;

use self::load::Shared;
use self::probe::{Probe, RssSampler};
use self::report::{Cpu, EmbedDelta, Rss};
use self::target::Target;
use crate::api::pb;
use crate::api::pb::memory_env_client::MemoryEnvClient;
use crate::app::cli::BenchArgs;

/// Runs the benchmark and prints the report.
pub async fn run(a: BenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(a.episodes > 0, "--episodes must be positive");
    anyhow::ensure!(a.in_flight != Some(0), "--in-flight must be positive");
    anyhow::ensure!(a.embedder_baseline_secs.is_finite() && a.embedder_baseline_secs >= 0.0, "--embedder-baseline-secs must be ≥ 0");
    anyhow::ensure!(a.grpc_ceiling_secs.is_finite() && a.grpc_ceiling_secs >= 0.0, "--grpc-ceiling-secs must be ≥ 0");
    if let (Some(through), Some(direct)) = (a.addr, a.compare_addr) {
        anyhow::ensure!(a.duration.is_none(), "--compare-addr runs fixed rounds: drop --duration");
        return compare::run(&a, through, direct).await;
    }
    let (mut target, addr) = Target::start(&a).await?;
    let channels = target::connect_all(addr, &mut target, a.connections).await?;
    let channel = channels[0].clone();
    let questions = target::load_questions(&channel).await?;

    let baseline = match &target {
        Target::External => None,
        Target::InProcess { .. } | Target::Spawned { .. } if a.embedder_baseline_secs > 0.0 => {
            Some(baseline::embedder_alone(&a, target.env()).await.context("measuring the embedder alone")?)
        }
        Target::InProcess { .. } | Target::Spawned { .. } => None,
    };
    let probe = target.probe();
    let shared = Shared::new(&a, channels, probe.clone());
    let ceiling = if a.grpc_ceiling_secs > 0.0 {
        Some(ceiling::measure(&shared, a.episodes, a.grpc_ceiling_secs).await.context("measuring the gRPC ceiling")?)
    } else {
        None
    };
    let embed_before = target.env().map(|e| e.embedder().stats());
    let rss_start = probe.as_ref().and_then(Probe::rss_bytes);
    let cpu_start = probe.as_ref().and_then(Probe::cpu_secs);
    let client_cpu_start = Probe::this_process().cpu_secs();
    let sampler = probe.clone().map(RssSampler::start);

    let started = Instant::now();
    load::drive(&a, &questions, &shared).await?;
    let tally = std::mem::take(&mut *shared.tally.lock());
    let open = shared.open_rss.get().copied().unwrap_or_default();
    let wall = (started.elapsed() - open.idle).as_secs_f64();
    let cpu_end = probe.as_ref().and_then(Probe::cpu_secs);
    let client_cpu_end = Probe::this_process().cpu_secs();
    let (peak, timeline) = match sampler {
        Some(s) => s.finish().await,
        None => (0, Vec::new()),
    };
    // Give the allocator time to return freed pages (the server's jemalloc decays them over ~1 s).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rss_end = probe.as_ref().and_then(Probe::rss_bytes);
    let embed_after = target.env().map(|e| e.embedder().stats());
    let first = first_episode_state(&channel, &questions).await;
    target.check_alive()?;
    target.stop().await?;

    let cpu = Cpu {
        measured: cpu_start.zip(cpu_end).map(|(s, e)| e - s),
        client: client_cpu_start.zip(client_cpu_end).map(|(s, e)| e - s),
        spawned: a.spawn_server,
    };
    let rss = Rss {
        start: rss_start,
        open: open.settled,
        open_at_once: open.at_once,
        peak: [Some(peak), rss_start, open.at_once, open.settled, rss_end].into_iter().flatten().max(),
        end: rss_end,
        timeline,
    };
    let embedding = embed_before.zip(embed_after).map(|(b, e)| EmbedDelta::between(&b, &e));
    report::report(&a, target_mode(&a), tally, wall, &rss, &cpu, baseline, ceiling, embedding, first);
    Ok(())
}

/// The server mode: its JSON name and its description.
fn target_mode(a: &BenchArgs) -> (&'static str, &'static str) {
    if a.addr.is_some() {
        ("external", "external server (no RSS/CPU readings)")
    } else if a.spawn_server {
        ("two-process", "two processes over loopback (RSS/CPU: the server process alone)")
    } else {
        ("in-process", "in-process server over loopback (RSS/CPU: whole process, client included)")
    }
}

/// The embedder the server reports (ScoreEpisode names it) and |M₀| of a fresh episode, which is closed.
async fn first_episode_state(channel: &Channel, questions: &[pb::QuestionRecord]) -> Option<(String, u32)> {
    let mut c = MemoryEnvClient::new(channel.clone());
    let id = format!("bench-probe-{}", run_tag());
    let created = c
        .create_episode(pb::CreateEpisodeRequest { episode_id: id.clone(), question_id: questions[0].id.clone(), ..Default::default() })
        .await
        .ok()?
        .into_inner();
    let scored = c.score_episode(pb::ScoreEpisodeRequest { episode_id: id.clone() }).await;
    let _ = c.close_episode(pb::CloseEpisodeRequest { episode_id: id }).await;
    Some((scored.ok()?.into_inner().embedder, created.initial_memory_count))
}

/// A tag that differs between bench runs (process id and start time), for episode ids.
fn run_tag() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    format!("{}x{nanos:08x}", std::process::id())
}
