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
//! index in use, and the embedder's own throughput at batch 32 measured in the same run. Servers:
//! in-process on `127.0.0.1:0` (default; RSS and CPU are the whole process, client included),
//! `--spawn-server` (a child `memgym serve`: RSS and CPU are the server's alone), or `--addr` (an
//! external server: no RSS/CPU). Speed is reported here, never asserted in tests.

mod hist;
mod probe;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use anyhow::Context;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::json;
use tokio::sync::{Barrier, Semaphore};
use tonic::transport::{Channel, Endpoint};
use tonic::Code;

use self::hist::Hist;
use self::probe::Probe;
use super::pb;
use super::pb::dataset_client::DatasetClient;
use super::pb::memory_env_client::MemoryEnvClient;
use crate::cli::BenchArgs;
use crate::embed::select::EmbedderKind;
use crate::embed::{EmbedService, EmbedStats};
use crate::episode::Environment;
use crate::{config, server};

/// Per-RPC latencies and outcomes of some episodes.
#[derive(Debug, Default)]
struct Tally {
    lat: BTreeMap<&'static str, Hist>,
    tool_all: Hist,
    refused: BTreeMap<String, u64>,
    failures: BTreeMap<String, u64>,
    reward_sum: f64,
    scored: u64,
    episodes: u64,
}

/// The server under load.
enum Target {
    InProcess { running: server::Running, env: Arc<Environment> },
    Spawned { child: Child, log: PathBuf },
    External,
}

impl Target {
    async fn start(a: &BenchArgs) -> anyhow::Result<(Target, SocketAddr)> {
        if let Some(addr) = a.addr {
            return Ok((Target::External, addr));
        }
        if a.spawn_server {
            let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
            let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
            let log = std::env::temp_dir().join(format!("memgym-bench-server-{}.log", std::process::id()));
            let child = std::process::Command::new(std::env::current_exe()?)
                .arg("serve")
                .arg("--addr")
                .arg(addr.to_string())
                .args(forwarded_serve_args(std::env::args_os()))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log)?)
                .spawn()
                .context("starting `memgym serve`")?;
            return Ok((Target::Spawned { child, log }, addr));
        }
        let env = config::build_environment(&a.env)?;
        let running = server::spawn(env.clone(), "127.0.0.1:0".parse()?).await?;
        let addr = running.addr;
        Ok((Target::InProcess { running, env }, addr))
    }

    fn probe(&self) -> Option<Probe> {
        match self {
            Target::InProcess { .. } => Some(Probe::this_process()),
            Target::Spawned { child, .. } => Some(Probe::pid(child.id())),
            Target::External => None,
        }
    }

    fn env(&self) -> Option<&Arc<Environment>> {
        match self {
            Target::InProcess { env, .. } => Some(env),
            Target::Spawned { .. } | Target::External => None,
        }
    }

    /// Fails with the server's log if a spawned server died.
    fn check_alive(&mut self) -> anyhow::Result<()> {
        if let Target::Spawned { child, log } = self {
            if let Some(status) = child.try_wait()? {
                let text = std::fs::read_to_string(&*log).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(20).collect::<Vec<_>>().into_iter().rev().collect();
                anyhow::bail!("`memgym serve` exited ({status}); its log ({}):\n{}", log.display(), tail.join("\n"));
            }
        }
        Ok(())
    }

    async fn stop(self) -> anyhow::Result<()> {
        match self {
            Target::InProcess { running, .. } => running.stop().await,
            Target::Spawned { mut child, log } => {
                child.kill()?;
                child.wait()?;
                let _ = std::fs::remove_file(log);
                Ok(())
            }
            Target::External => Ok(()),
        }
    }
}

/// The `memgym bench` arguments that are not environment flags, with whether each takes a value.
const BENCH_ONLY: [(&str, bool); 11] = [
    ("--connections", true),
    ("--episodes", true),
    ("--calls", true),
    ("--group", true),
    ("--seed", true),
    ("--addr", true),
    ("--in-flight", true),
    ("--duration", true),
    ("--embedder-baseline-secs", true),
    ("--json", false),
    ("--spawn-server", false),
];

/// The environment flags of this `memgym bench` command line, to start `memgym serve` with the same
/// settings (clap has already validated them).
fn forwarded_serve_args(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let args: Vec<OsString> = args.into_iter().collect();
    let start = args.iter().position(|a| a == "bench").map_or(args.len(), |i| i + 1);
    let mut out = Vec::new();
    let mut i = start;
    while i < args.len() {
        let arg = args[i].to_string_lossy();
        let name = arg.split('=').next().unwrap_or_default();
        match BENCH_ONLY.iter().find(|(n, _)| *n == name) {
            Some((_, takes_value)) => i += if *takes_value && !arg.contains('=') { 2 } else { 1 },
            None => {
                out.push(args[i].clone());
                i += 1;
            }
        }
    }
    out
}

async fn connect(addr: SocketAddr, target: &mut Target) -> anyhow::Result<Channel> {
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        // Large HTTP/2 windows on the client too: see `server::CONNECTION_WINDOW_BYTES`.
        let attempt = Endpoint::from_shared(format!("http://{addr}"))?
            .tcp_nodelay(true)
            .initial_connection_window_size(server::CONNECTION_WINDOW_BYTES)
            .initial_stream_window_size(server::STREAM_WINDOW_BYTES)
            .connect()
            .await;
        match attempt {
            Ok(channel) => return Ok(channel),
            Err(e) if matches!(target, Target::Spawned { .. }) && Instant::now() < deadline => {
                target.check_alive()?;
                tracing::debug!(error = %e, "waiting for the spawned server");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(e).with_context(|| format!("connecting to {addr}")),
        }
    }
}

async fn load_questions(channel: &Channel) -> anyhow::Result<Vec<pb::QuestionRecord>> {
    let mut data = DatasetClient::new(channel.clone());
    let mut questions = Vec::new();
    let mut token = String::new();
    loop {
        let page = data
            .list_questions(pb::ListQuestionsRequest { page_size: 1000, page_token: token.clone(), ..Default::default() })
            .await?
            .into_inner();
        questions.extend(page.questions.into_iter().filter(|q| q.category != 5));
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    anyhow::ensure!(!questions.is_empty(), "the server has no questions");
    Ok(questions)
}

/// Samples RSS on a timer: the peak, and one reading per second.
struct RssSampler {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<(u64, Vec<(f64, u64)>)>,
}

impl RssSampler {
    fn start(probe: Probe) -> Self {
        let (stop, mut stopped) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let t0 = Instant::now();
            let (mut peak, mut timeline) = (0u64, Vec::new());
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            let mut next_second = 0.0;
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = &mut stopped => break,
                }
                let Some(rss) = probe.rss_bytes() else { break };
                peak = peak.max(rss);
                let t = t0.elapsed().as_secs_f64();
                if t >= next_second {
                    timeline.push((t, rss));
                    next_second += 1.0;
                }
            }
            (peak, timeline)
        });
        RssSampler { stop, task }
    }

    async fn finish(self) -> (u64, Vec<(f64, u64)>) {
        let _ = self.stop.send(());
        self.task.await.unwrap_or_default()
    }
}

/// What every episode task shares.
#[derive(Clone)]
struct Shared {
    /// One HTTP/2 connection per `--connections` (a trainer has one per worker process).
    channels: Arc<[Channel]>,
    gate: Option<Arc<Semaphore>>,
    calls: u32,
    /// Fixed runs: every episode waits here after its calls; the leader reads RSS with all open.
    barrier: Option<Arc<Barrier>>,
    open_rss: Arc<OnceLock<Option<u64>>>,
    probe: Option<Probe>,
    /// One tally for all episodes (a histogram set per task would cost ~300 KiB each).
    tally: Arc<parking_lot::Mutex<Tally>>,
}

impl Shared {
    fn latency(&self, rpc: &'static str, d: Duration, tool: bool) {
        let mut t = self.tally.lock();
        t.lat.entry(rpc).or_default().record(d);
        if tool {
            t.tool_all.record(d);
        }
    }

    fn count(&self, refused: bool, key: String) {
        let mut t = self.tally.lock();
        *(if refused { &mut t.refused } else { &mut t.failures }).entry(key).or_default() += 1;
    }

    /// Runs one RPC under the in-flight cap and records its latency (the wait for a permit excluded: it
    /// stands for the trainer's queue, not the server).
    async fn timed<T>(&self, rpc: &'static str, tool: bool, call: impl std::future::Future<Output = T>) -> T {
        let _permit = match &self.gate {
            Some(g) => g.clone().acquire_owned().await.ok(),
            None => None,
        };
        let t0 = Instant::now();
        let r = call.await;
        self.latency(rpc, t0.elapsed(), tool);
        r
    }
}

/// Runs the benchmark and prints the report.
pub async fn run(a: BenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(a.episodes > 0, "--episodes must be positive");
    anyhow::ensure!(a.in_flight != Some(0), "--in-flight must be positive");
    anyhow::ensure!(a.embedder_baseline_secs.is_finite() && a.embedder_baseline_secs >= 0.0, "--embedder-baseline-secs must be ≥ 0");
    let (mut target, addr) = Target::start(&a).await?;
    let channel = connect(addr, &mut target).await?;
    let mut channels = vec![channel.clone()];
    for _ in 1..a.connections.max(1) {
        channels.push(connect(addr, &mut target).await?);
    }
    let questions = load_questions(&channel).await?;

    let baseline = match &target {
        Target::External => None,
        Target::InProcess { .. } | Target::Spawned { .. } if a.embedder_baseline_secs > 0.0 => {
            Some(embedder_alone(&a, target.env()).await.context("measuring the embedder alone")?)
        }
        Target::InProcess { .. } | Target::Spawned { .. } => None,
    };
    let embed_before = target.env().map(|e| e.embedder().stats());
    let probe = target.probe();
    let rss_start = probe.as_ref().and_then(Probe::rss_bytes);
    let cpu_start = probe.as_ref().and_then(Probe::cpu_secs);
    let client_cpu_start = Probe::this_process().cpu_secs();
    let sampler = probe.clone().map(RssSampler::start);

    let shared = Shared {
        channels: channels.into(),
        gate: a.in_flight.map(|n| Arc::new(Semaphore::new(n))),
        calls: a.calls,
        barrier: a.duration.is_none().then(|| Arc::new(Barrier::new(a.episodes))),
        open_rss: Arc::new(OnceLock::new()),
        probe: probe.clone(),
        tally: Arc::new(parking_lot::Mutex::new(Tally::default())),
    };
    let started = Instant::now();
    drive(&a, &questions, &shared).await?;
    let tally = std::mem::take(&mut *shared.tally.lock());
    let wall = started.elapsed().as_secs_f64();
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
        open: shared.open_rss.get().copied().flatten(),
        peak: [Some(peak), rss_start, shared.open_rss.get().copied().flatten(), rss_end].into_iter().flatten().max(),
        end: rss_end,
        timeline,
    };
    let embedding = embed_before.zip(embed_after).map(|(b, e)| EmbedDelta::between(&b, &e));
    report(&a, target_mode(&a), tally, wall, &rss, &cpu, baseline, embedding, first);
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

/// Runs the episodes: a fixed set (default) or a sustained stream (`--duration`).
async fn drive(a: &BenchArgs, questions: &[pb::QuestionRecord], shared: &Shared) -> anyhow::Result<()> {
    let group = a.group.max(1);
    let mut pick = ChaCha8Rng::seed_from_u64(a.seed);
    let groups = a.episodes.div_ceil(group);
    let group_questions: Vec<pb::QuestionRecord> = (0..groups).map(|_| questions[pick.random_range(0..questions.len())].clone()).collect();
    let deadline = a.duration.map(|d| Instant::now() + Duration::from_secs(d));
    let questions: Arc<[pb::QuestionRecord]> = questions.into();
    // The server remembers the ids of closed episodes and refuses to reuse them: ids carry this run's tag,
    // so a second bench against the same server opens new ones.
    let run = run_tag();
    let mut tasks = Vec::with_capacity(a.episodes);
    for slot in 0..a.episodes {
        let shared = shared.clone();
        let questions = questions.clone();
        let first_q = group_questions[slot / group].clone();
        let (seed, run) = (a.seed, run.clone());
        tasks.push(tokio::spawn(async move {
            let mut round = 0u64;
            loop {
                // Round 0 uses the group's question; later rounds (sustained mode) draw a new question
                // per group and round, so GRPO groups keep sharing one.
                let q = if round == 0 {
                    first_q.clone()
                } else {
                    let mut r = ChaCha8Rng::seed_from_u64(seed ^ ((slot / group) as u64).wrapping_mul(0x9E37_79B9) ^ round.rotate_left(32));
                    questions[r.random_range(0..questions.len())].clone()
                };
                let ep_seed = seed.wrapping_add(slot as u64).wrapping_add(round.wrapping_mul(1_000_003));
                let channel = shared.channels[slot % shared.channels.len()].clone();
                episode(&shared, channel, format!("bench-{run}-{slot}-{round}-{seed}"), q, ep_seed).await;
                round += 1;
                if deadline.is_none_or(|d| Instant::now() >= d) {
                    break;
                }
            }
        }));
    }
    for t in tasks {
        t.await?;
    }
    Ok(())
}

/// One episode: create, `calls` tool calls, (barrier), score, close.
async fn episode(s: &Shared, channel: Channel, id: String, q: pb::QuestionRecord, seed: u64) {
    let mut c = MemoryEnvClient::new(channel);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    s.tally.lock().episodes += 1;
    let request = pb::CreateEpisodeRequest {
        episode_id: id.clone(),
        question_id: q.id.clone(),
        seed: Some(seed),
        max_steps: Some(s.calls.max(1)),
        ..Default::default()
    };
    let created = s.timed("create", false, c.create_episode(request)).await;
    let ok = match created {
        Ok(_) => true,
        Err(st) => {
            if std::env::var_os("MEMGYM_BENCH_DEBUG").is_some() {
                eprintln!("create failed: {st:?}");
            }
            s.count(false, format!("create {:?}", st.code()));
            false
        }
    };
    if ok {
        tool_calls(s, &mut c, &id, &q, &mut rng).await;
    }
    if let Some(b) = &s.barrier {
        if b.wait().await.is_leader() {
            let _ = s.open_rss.set(s.probe.as_ref().and_then(Probe::rss_bytes));
        }
    }
    if !ok {
        return;
    }
    match s.timed("score", false, c.score_episode(pb::ScoreEpisodeRequest { episode_id: id.clone() })).await {
        Ok(r) => {
            let mut t = s.tally.lock();
            t.reward_sum += r.into_inner().reward;
            t.scored += 1;
        }
        Err(st) => s.count(false, format!("score {:?}", st.code())),
    }
    if let Err(st) = s.timed("close", false, c.close_episode(pb::CloseEpisodeRequest { episode_id: id })).await {
        s.count(false, format!("close {:?}", st.code()));
    }
}

/// The tool calls of one episode, in the realistic mix.
async fn tool_calls(s: &Shared, c: &mut MemoryEnvClient<Channel>, id: &str, q: &pb::QuestionRecord, rng: &mut ChaCha8Rng) {
    let words: Vec<String> =
        q.question.split_whitespace().map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()).to_string()).filter(|w| w.len() > 3).collect();
    // Ids the policy has seen, and the merged ones (multi-sentence, so they can be split).
    let mut known: Vec<String> = Vec::new();
    let mut merged: Vec<String> = Vec::new();
    for _ in 0..s.calls {
        let roll: u32 = rng.random_range(0..100);
        let need = |n: usize| known.len() >= n;
        let (tool, args) = match roll {
            0..=39 => ("search_memory", search_args(rng, &words)),
            40..=49 => ("sample_memory", json!({"k": rng.random_range(2..6), "strategy": pick3(rng, ["random", "diverse", "recent"])})),
            50..=64 => {
                ("manage_memory", json!({"operation": "create", "content": format!("{} remembers {}", q.conversation_id, words.join(" "))}))
            }
            65..=74 if need(1) => (
                "manage_memory",
                json!({"operation": "update", "memory_id": known[rng.random_range(0..known.len())], "content": format!("Updated note about {}", words.join(" "))}),
            ),
            75..=84 if need(1) => {
                let m = known.swap_remove(rng.random_range(0..known.len()));
                merged.retain(|x| *x != m);
                ("delete_memory", json!({"memory_id": m}))
            }
            85..=94 if need(2) => {
                let a = known.swap_remove(rng.random_range(0..known.len()));
                let b = known.swap_remove(rng.random_range(0..known.len()));
                merged.retain(|x| *x != a && *x != b);
                ("merge_memory", json!({"memory_ids": [a, b], "strategy": pick3(rng, ["summarize", "concatenate", "extract_common"])}))
            }
            95..=99 if !merged.is_empty() || need(1) => {
                let m = if merged.is_empty() { known.swap_remove(rng.random_range(0..known.len())) } else { merged.swap_remove(0) };
                known.retain(|k| *k != m);
                ("split_memory", json!({"memory_id": m, "split_criteria": pick3(rng, ["temporal", "thematic", "speaker"])}))
            }
            _ => ("search_memory", search_args(rng, &words)),
        };
        let request = pb::CallToolRequest { episode_id: id.to_string(), tool_name: tool.to_string(), arguments_json: args.to_string() };
        let r = s.timed(tool, true, c.call_tool(request)).await;
        match r {
            Ok(resp) => collect_ids(resp.into_inner(), &mut known, &mut merged),
            Err(st) => {
                let key = format!("{tool} {:?}", st.code());
                let refused = matches!(st.code(), Code::FailedPrecondition | Code::NotFound | Code::InvalidArgument);
                s.count(refused, key);
            }
        }
    }
}

fn pick3(rng: &mut ChaCha8Rng, options: [&'static str; 3]) -> &'static str {
    options[rng.random_range(0..3)]
}

fn search_args(rng: &mut ChaCha8Rng, words: &[String]) -> serde_json::Value {
    let n = words.len().max(1);
    let start = rng.random_range(0..n);
    let q: Vec<&str> = words.iter().cycle().skip(start).take(3.min(n)).map(String::as_str).collect();
    let q = if q.is_empty() { "what happened".to_string() } else { q.join(" ") };
    json!({"query": q, "top_k": rng.random_range(3..8)})
}

fn collect_ids(r: pb::CallToolResponse, known: &mut Vec<String>, merged: &mut Vec<String>) {
    use pb::call_tool_response::Result as R;
    let mut add = |id: String| {
        if !known.contains(&id) {
            known.push(id);
        }
    };
    match r.result {
        Some(R::Search(s)) => s.results.into_iter().filter_map(|h| h.memory).for_each(|m| add(m.id)),
        Some(R::Sample(s)) => s.memories.into_iter().for_each(|m| add(m.id)),
        Some(R::Manage(m)) => m.memory.into_iter().for_each(|m| add(m.id)),
        Some(R::Merge(m)) => m.memory.into_iter().for_each(|m| {
            merged.push(m.id.clone());
            add(m.id)
        }),
        Some(R::Split(s)) => s.parts.into_iter().for_each(|m| add(m.id)),
        Some(R::Delete(_)) | None => {}
    }
}

/// The embedder's own throughput: batches of 32 distinct LoCoMo observations through the raw model (no
/// cache, no batcher), one thread per embedding permit, for `--embedder-baseline-secs`.
async fn embedder_alone(a: &BenchArgs, env: Option<&Arc<Environment>>) -> anyhow::Result<Baseline> {
    const BATCH: usize = 32;
    let (service, texts): (EmbedService, Vec<String>) = match env {
        Some(env) => (env.embedder().clone(), observation_texts(env.dataset())),
        None => {
            let kind: EmbedderKind = a.env.embed.embedder.parse().map_err(anyhow::Error::msg).context("--embedder")?;
            let ds = config::load_dataset(a.env.data_dir.as_deref())?;
            (config::embed_service(kind, &a.env.embed)?, observation_texts(&ds))
        }
    };
    anyhow::ensure!(texts.len() >= BATCH, "the dataset has fewer than {BATCH} observations");
    let threads = a.env.embed.embed_threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get())).max(1);
    let texts = Arc::new(texts);
    let until = Instant::now() + Duration::from_secs_f64(a.embedder_baseline_secs);
    let started = Instant::now();
    let mut workers = Vec::new();
    for w in 0..threads {
        let (service, texts) = (service.clone(), texts.clone());
        workers.push(tokio::task::spawn_blocking(move || -> anyhow::Result<usize> {
            let mut done = 0;
            let mut at = w * BATCH;
            while Instant::now() < until {
                let batch: Vec<&str> = (0..BATCH).map(|j| texts[(at + j) % texts.len()].as_str()).collect();
                service.embed_blocking(&batch)?;
                done += BATCH;
                at += threads * BATCH;
            }
            Ok(done)
        }));
    }
    let mut embedded = 0;
    for w in workers {
        embedded += w.await??;
    }
    Ok(Baseline { name: service.identity().to_string(), per_s: embedded as f64 / started.elapsed().as_secs_f64(), threads })
}

fn observation_texts(ds: &crate::dataset::Dataset) -> Vec<String> {
    ds.memories.iter().map(|m| m.text.clone()).collect()
}

/// The embedder alone, measured before the run.
#[derive(Debug)]
struct Baseline {
    name: String,
    per_s: f64,
    threads: usize,
}

/// Embedding work during the run (in-process only).
#[derive(Debug)]
struct EmbedDelta {
    embedded: u64,
    batches: u64,
    cache_hits: u64,
}

impl EmbedDelta {
    fn between(b: &EmbedStats, e: &EmbedStats) -> Self {
        EmbedDelta { embedded: e.embedded - b.embedded, batches: e.batches - b.batches, cache_hits: e.cache_hits - b.cache_hits }
    }
}

#[derive(Debug)]
struct Rss {
    start: Option<u64>,
    open: Option<u64>,
    peak: Option<u64>,
    end: Option<u64>,
    timeline: Vec<(f64, u64)>,
}

#[derive(Debug)]
struct Cpu {
    /// CPU seconds of the probed process (the server, or the whole in-process bench).
    measured: Option<f64>,
    /// CPU seconds of this (client) process.
    client: Option<f64>,
    spawned: bool,
}

fn mib(b: Option<u64>) -> Option<f64> {
    b.map(|b| b as f64 / (1024.0 * 1024.0))
}

fn fmt_mib(b: Option<u64>) -> String {
    mib(b).map_or_else(|| "n/a".into(), |m| format!("{m:.0} MiB"))
}

/// RSS drift of a sustained run: median of the last tenth of the timeline over the median of the second
/// tenth (the first tenth is warm-up). `None` for runs shorter than 20 samples.
fn drift(timeline: &[(f64, u64)]) -> Option<f64> {
    let n = timeline.len();
    if n < 20 {
        return None;
    }
    let median = |s: &[(f64, u64)]| {
        let mut v: Vec<u64> = s.iter().map(|x| x.1).collect();
        v.sort_unstable();
        v[v.len() / 2] as f64
    };
    let tenth = n / 10;
    Some(median(&timeline[n - tenth..]) / median(&timeline[tenth..2 * tenth]) - 1.0)
}

#[allow(clippy::too_many_arguments)]
fn report(
    a: &BenchArgs,
    mode: (&str, &str),
    t: Tally,
    wall: f64,
    rss: &Rss,
    cpu: &Cpu,
    baseline: Option<Baseline>,
    embedding: Option<EmbedDelta>,
    first: Option<(String, u32)>,
) {
    let tool_calls = t.tool_all.len();
    let eps = t.episodes as f64 / wall;
    let cps = tool_calls as f64 / wall;
    let in_flight = a.in_flight.map_or_else(|| format!("{} (every episode)", a.episodes), |n| n.to_string());
    let shape = match a.duration {
        Some(d) => format!("{} episodes kept running for {d} s", a.episodes),
        None => format!("{} episodes", a.episodes),
    };
    println!("memgym bench: {shape} x {} calls, groups of {}, RPCs in flight ≤ {in_flight}; {}", a.calls, a.group, mode.1);
    let index = if a.addr.is_some() {
        "set by the external server".to_string()
    } else {
        format!("--index {} (full-scan threshold {}), --search {}", a.env.index, a.env.full_scan_threshold, a.env.search)
    };
    match &first {
        Some((embedder, m0)) => println!("embedder {embedder}; {index}; first episode |M₀| = {m0}"),
        None => println!("embedder ?; {index}"),
    }
    println!("wall {wall:.3} s   episodes {}   episodes/s {eps:.1}   tool calls/s {cps:.0}", t.episodes);
    println!("{:<16} {:>9} {:>9} {:>9} {:>9} {:>9}", "rpc", "count", "p50 ms", "p90 ms", "p99 ms", "max ms");
    let mut rows: Vec<(&str, &Hist)> = t.lat.iter().map(|(k, v)| (*k, v)).collect();
    rows.push(("all tool calls", &t.tool_all));
    for (k, h) in &rows {
        println!(
            "{:<16} {:>9} {:>9.3} {:>9.3} {:>9.3} {:>9.3}",
            k,
            h.len(),
            h.pct_ms(50.0),
            h.pct_ms(90.0),
            h.pct_ms(99.0),
            h.pct_ms(100.0)
        );
    }
    println!(
        "RSS: start {}, all episodes open {}, peak {}, end {}",
        fmt_mib(rss.start),
        fmt_mib(rss.open),
        fmt_mib(rss.peak),
        fmt_mib(rss.end)
    );
    let d = drift(&rss.timeline);
    if a.duration.is_some() && !rss.timeline.is_empty() {
        let step = (rss.timeline.len() / 10).max(1);
        let points: Vec<String> =
            rss.timeline.iter().step_by(step).map(|(s, b)| format!("{s:.0}s {:.0}", *b as f64 / (1024.0 * 1024.0))).collect();
        println!("RSS over time (MiB): {}", points.join(", "));
        if let Some(d) = d {
            println!("RSS drift (last tenth vs second tenth): {:+.1}%", d * 100.0);
        }
    }
    let per_call_us = |s: Option<f64>| s.filter(|_| !t.tool_all.is_empty()).map(|s| s * 1e6 / tool_calls as f64);
    let cpu_per_call = per_call_us(cpu.measured);
    let client_per_call = per_call_us(cpu.client);
    match (cpu.spawned, cpu_per_call) {
        (true, Some(s)) => println!("CPU per tool call: server {s:.1} µs, client {:.1} µs", client_per_call.unwrap_or(f64::NAN)),
        (false, Some(s)) => println!("CPU per tool call (client + server, one process): {s:.1} µs"),
        (_, None) => println!("CPU per tool call: n/a"),
    }
    let ratio = baseline.as_ref().map(|b| cps / b.per_s);
    if let Some(b) = &baseline {
        println!(
            "embedder alone ({}, batch 32, {} threads, no cache): {:.0} texts/s; tool calls/s ÷ that = {:.2}",
            b.name,
            b.threads,
            b.per_s,
            ratio.unwrap_or(f64::NAN)
        );
    }
    let embedded_per_s = embedding.as_ref().map(|e| e.embedded as f64 / wall);
    if let Some(e) = &embedding {
        let mean_batch = if e.batches == 0 { 0.0 } else { e.embedded as f64 / e.batches as f64 };
        let busy =
            baseline.as_ref().map_or_else(String::new, |b| format!(" = {:.2} of the embedder alone", e.embedded as f64 / wall / b.per_s));
        println!(
            "embedding during the run: {} texts in {} batches (mean {mean_batch:.1}), {} cache hits; {:.0} texts/s{busy}",
            e.embedded,
            e.batches,
            e.cache_hits,
            e.embedded as f64 / wall
        );
    }
    let mean_reward = if t.scored == 0 { 0.0 } else { t.reward_sum / t.scored as f64 };
    println!("scored {} episodes, mean reward {mean_reward:.4}", t.scored);
    if !t.refused.is_empty() {
        println!("refused calls (expected: the random policy asks for impossible edits): {:?}", t.refused);
    }
    if !t.failures.is_empty() {
        println!("FAILURES: {:?}", t.failures);
    }
    if a.json {
        let lat: serde_json::Map<String, serde_json::Value> = rows
            .iter()
            .map(|(k, h)| {
                let v = json!({"count": h.len(), "p50_ms": h.pct_ms(50.0), "p90_ms": h.pct_ms(90.0), "p99_ms": h.pct_ms(99.0), "max_ms": h.pct_ms(100.0)});
                (k.to_string(), v)
            })
            .collect();
        let j = json!({
            "mode": mode.0,
            "episodes": a.episodes, "calls_per_episode": a.calls, "group": a.group, "in_flight": a.in_flight,
            "duration_s": a.duration, "wall_s": wall, "episodes_run": t.episodes,
            "episodes_per_s": eps, "tool_calls_per_s": cps,
            "tool_p50_ms": t.tool_all.pct_ms(50.0), "tool_p90_ms": t.tool_all.pct_ms(90.0),
            "tool_p99_ms": t.tool_all.pct_ms(99.0), "tool_max_ms": t.tool_all.pct_ms(100.0),
            "create_p99_ms": t.lat.get("create").map_or(0.0, |h| h.pct_ms(99.0)),
            "score_p99_ms": t.lat.get("score").map_or(0.0, |h| h.pct_ms(99.0)),
            "latency": lat,
            "rss_start_mib": mib(rss.start), "rss_open_mib": mib(rss.open), "rss_peak_mib": mib(rss.peak), "rss_end_mib": mib(rss.end),
            "rss_drift": d,
            "rss_timeline_mib": rss.timeline.iter().map(|(s, b)| json!([s, *b as f64 / (1024.0 * 1024.0)])).collect::<Vec<_>>(),
            "cpu_us_per_call": cpu_per_call, "client_cpu_us_per_call": if cpu.spawned { client_per_call } else { None },
            "embedder": first.as_ref().map(|f| f.0.clone()), "index": index,
            "embedder_alone_per_s": baseline.as_ref().map(|b| b.per_s), "calls_per_s_over_embedder_alone": ratio,
            "embedded_during_run": embedding.as_ref().map(|e| e.embedded), "embedded_per_s": embedded_per_s, "embed_batches": embedding.as_ref().map(|e| e.batches),
            "embed_cache_hits": embedding.as_ref().map(|e| e.cache_hits),
            "failures": t.failures.values().sum::<u64>(), "refused": t.refused.values().sum::<u64>(),
            "mean_reward": mean_reward,
        });
        println!("{j}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn serve_gets_the_environment_flags_only() {
        let args = os(&[
            "memgym",
            "bench",
            "--episodes",
            "8",
            "--embedder",
            "potion",
            "--json",
            "--in-flight=32",
            "--spawn-server",
            "--index",
            "exact",
            "--duration",
            "5",
            "--full-scan-threshold=300",
        ]);
        assert_eq!(forwarded_serve_args(args), os(&["--embedder", "potion", "--index", "exact", "--full-scan-threshold=300"]));
        assert!(forwarded_serve_args(os(&["memgym", "bench"])).is_empty());
    }

    #[test]
    fn drift_compares_the_end_with_the_warm_start() {
        let flat: Vec<(f64, u64)> = (0..40).map(|i| (i as f64, 100)).collect();
        assert_eq!(drift(&flat), Some(0.0));
        let growing: Vec<(f64, u64)> = (0..40).map(|i| (i as f64, 100 + i)).collect();
        assert!(drift(&growing).is_some_and(|d| d > 0.2));
        assert_eq!(drift(&flat[..10]), None);
    }
}
