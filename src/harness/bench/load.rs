//! The load of `memgym bench`: episodes driven through the real gRPC API the way an RL trainer does.
//!
//! N concurrent episodes (GRPO groups share a question) each run CreateEpisode, `calls` CallTool
//! requests in a realistic mix, then — once every episode has made its calls — ScoreEpisode and
//! CloseEpisode; `--duration` keeps N episodes running instead. Every RPC passes the same in-flight cap
//! and is timed into one shared [`Tally`].

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::json;
use tokio::sync::{Barrier, Semaphore};
use tonic::transport::Channel;
use tonic::Code;

use super::hist::Hist;
use super::probe::Probe;
use super::run_tag;
use crate::api::pb::memory_env_client::MemoryEnvClient;
use crate::api::{on_episode, pb};
use crate::app::cli::BenchArgs;

/// Per-RPC latencies and outcomes of some episodes.
#[derive(Debug, Default)]
pub(super) struct Tally {
    pub(super) lat: BTreeMap<&'static str, Hist>,
    pub(super) tool_all: Hist,
    pub(super) refused: BTreeMap<String, u64>,
    pub(super) failures: BTreeMap<String, u64>,
    pub(super) reward_sum: f64,
    pub(super) scored: u64,
    pub(super) episodes: u64,
}

/// How long a fixed run's server sits idle, all episodes open, before its RSS is read again.
pub(super) const SETTLE: Duration = Duration::from_secs(3);

/// The server's RSS with every episode open after its calls.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct OpenRss {
    /// Read the moment the last episode's last call returned.
    pub(super) at_once: Option<u64>,
    /// Read after [`SETTLE`] idle: what the open episodes themselves hold.
    pub(super) settled: Option<u64>,
    /// How long the run sat idle for it (taken off the run's wall time).
    pub(super) idle: Duration,
}

/// What every episode task shares.
#[derive(Clone)]
pub(super) struct Shared {
    /// One HTTP/2 connection per `--connections` (a trainer has one per worker process).
    pub(super) channels: Arc<[Channel]>,
    pub(super) gate: Option<Arc<Semaphore>>,
    pub(super) calls: u32,
    /// Fixed runs: every episode waits here after its calls; the leader reads RSS with all open, at once
    /// and again after [`SETTLE`], while the others wait at the barrier a second time.
    pub(super) barrier: Option<Arc<Barrier>>,
    pub(super) open_rss: Arc<OnceLock<OpenRss>>,
    pub(super) probe: Option<Probe>,
    /// One tally for all episodes (a histogram set per task would cost ~300 KiB each).
    pub(super) tally: Arc<parking_lot::Mutex<Tally>>,
}

impl Shared {
    /// What the episodes of one run share: `channels`, the flags' in-flight cap and calls, a fresh tally, and
    /// for a fixed run (no `--duration`) the barrier they meet at before scoring.
    pub(super) fn new(a: &BenchArgs, channels: Vec<Channel>, probe: Option<Probe>) -> Shared {
        Shared {
            channels: channels.into(),
            gate: a.in_flight.map(|n| Arc::new(Semaphore::new(n))),
            calls: a.calls,
            barrier: a.duration.is_none().then(|| Arc::new(Barrier::new(a.episodes))),
            open_rss: Arc::new(OnceLock::new()),
            probe,
            tally: Arc::new(parking_lot::Mutex::new(Tally::default())),
        }
    }

    fn latency(&self, rpc: &'static str, d: Duration, tool: bool) {
        let mut t = self.tally.lock();
        t.lat.entry(rpc).or_default().record(d);
        if tool {
            t.tool_all.record(d);
        }
    }

    pub(super) fn count(&self, refused: bool, key: String) {
        let mut t = self.tally.lock();
        *(if refused { &mut t.refused } else { &mut t.failures }).entry(key).or_default() += 1;
    }

    /// Runs one RPC under the in-flight cap and records its latency (the wait for a permit excluded: it
    /// stands for the trainer's queue, not the server).
    pub(super) async fn timed<T>(&self, rpc: &'static str, tool: bool, call: impl std::future::Future<Output = T>) -> T {
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

/// Runs the episodes: a fixed set (default) or a sustained stream (`--duration`).
pub(super) async fn drive(a: &BenchArgs, questions: &[pb::QuestionRecord], shared: &Shared) -> anyhow::Result<()> {
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
    // The id the server gave (behind replicas: with the replica's name in front).
    let (ok, id) = match created {
        Ok(r) => (true, r.into_inner().episode_id),
        Err(st) => {
            if std::env::var_os("MEMGYM_BENCH_DEBUG").is_some() {
                eprintln!("create failed: {st:?}");
            }
            s.count(false, format!("create {:?}", st.code()));
            (false, id)
        }
    };
    if ok {
        tool_calls(s, &mut c, &id, &q, &mut rng).await;
    }
    if let Some(b) = &s.barrier {
        if b.wait().await.is_leader() {
            let at_once = s.probe.as_ref().and_then(Probe::rss_bytes);
            // The server is idle now: let its allocator return what the calls' buffers freed (jemalloc's
            // dirty pages decay within a second) before reading what the open episodes hold.
            let settled = match &s.probe {
                Some(p) => {
                    tokio::time::sleep(SETTLE).await;
                    p.rss_bytes()
                }
                None => None,
            };
            let _ = s.open_rss.set(OpenRss { at_once, settled, idle: if s.probe.is_some() { SETTLE } else { Duration::ZERO } });
        }
        b.wait().await;
    }
    if !ok {
        return;
    }
    match s.timed("score", false, c.score_episode(on_episode(&id, pb::ScoreEpisodeRequest { episode_id: id.clone() }))).await {
        Ok(r) => {
            let mut t = s.tally.lock();
            t.reward_sum += r.into_inner().reward;
            t.scored += 1;
        }
        Err(st) => s.count(false, format!("score {:?}", st.code())),
    }
    if let Err(st) = s.timed("close", false, c.close_episode(on_episode(&id, pb::CloseEpisodeRequest { episode_id: id.clone() }))).await {
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
        let request = pb::CallToolRequest {
            episode_id: id.to_string(),
            tool_name: tool.to_string(),
            arguments_json: args.to_string(),
            ..Default::default()
        };
        let r = s.timed(tool, true, c.call_tool(on_episode(id, request))).await;
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
