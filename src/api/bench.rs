//! `memgym bench`: a load generator that drives the real gRPC API the way an RL trainer does.
//!
//! N concurrent episodes (GRPO groups of `group` episodes share a question) each run: CreateEpisode,
//! `calls` CallTool requests in a realistic mix (search 40%, sample 10%, manage create 15% / update
//! 10%, delete 10%, merge 10%, split 5%), ScoreEpisode, CloseEpisode. It reports episodes/s, tool
//! calls/s and latency percentiles per RPC. Without `--addr` it starts the server in-process on
//! `127.0.0.1:0` (client and server share the machine, as in a trainer node); with `--addr` it drives an
//! external server. Speed is reported here, never asserted in tests.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::json;
use tonic::transport::{Channel, Endpoint};
use tonic::Code;

use super::pb;
use super::pb::dataset_client::DatasetClient;
use super::pb::memory_env_client::MemoryEnvClient;
use crate::cli::BenchArgs;
use crate::{config, server};

/// Latency samples of one RPC kind.
#[derive(Debug, Default, Clone)]
struct Samples(Vec<f64>);

impl Samples {
    fn pct(&mut self, p: f64) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        self.0.sort_by(|a, b| a.total_cmp(b));
        let i = ((p / 100.0) * (self.0.len() - 1) as f64).round() as usize;
        self.0[i.min(self.0.len() - 1)]
    }
}

#[derive(Debug, Default)]
struct Tally {
    lat: BTreeMap<&'static str, Samples>,
    tool_all: Samples,
    refused: BTreeMap<String, u64>,
    failures: BTreeMap<String, u64>,
    rewards: Vec<f64>,
}

impl Tally {
    fn merge(&mut self, o: Tally) {
        for (k, v) in o.lat {
            self.lat.entry(k).or_default().0.extend(v.0);
        }
        self.tool_all.0.extend(o.tool_all.0);
        for (k, v) in o.refused {
            *self.refused.entry(k).or_default() += v;
        }
        for (k, v) in o.failures {
            *self.failures.entry(k).or_default() += v;
        }
        self.rewards.extend(o.rewards);
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Runs the benchmark and prints the report.
pub async fn run(a: BenchArgs) -> anyhow::Result<()> {
    let (addr, running) = match a.addr {
        Some(addr) => (addr, None),
        None => {
            let env = config::build_environment(&a.env)?;
            let r = server::spawn(env, "127.0.0.1:0".parse()?).await?;
            (r.addr, Some(r))
        }
    };
    // Large HTTP/2 windows on the client too: see `server::CONNECTION_WINDOW_BYTES`.
    let channel = Endpoint::from_shared(format!("http://{addr}"))?
        .tcp_nodelay(true)
        .initial_connection_window_size(server::CONNECTION_WINDOW_BYTES)
        .initial_stream_window_size(server::STREAM_WINDOW_BYTES)
        .connect()
        .await?;
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
    let mut pick = ChaCha8Rng::seed_from_u64(a.seed);
    let groups = a.episodes.div_ceil(a.group.max(1));
    let group_questions: Vec<pb::QuestionRecord> = (0..groups).map(|_| questions[pick.random_range(0..questions.len())].clone()).collect();

    let started = Instant::now();
    let mut tasks = Vec::with_capacity(a.episodes);
    for i in 0..a.episodes {
        let q = group_questions[i / a.group.max(1)].clone();
        let client = MemoryEnvClient::new(channel.clone());
        let seed = a.seed.wrapping_add(i as u64);
        let calls = a.calls;
        tasks.push(tokio::spawn(async move { episode(client, i, q, seed, calls).await }));
    }
    let mut tally = Tally::default();
    for t in tasks {
        tally.merge(t.await?);
    }
    let wall = started.elapsed().as_secs_f64();
    if let Some(r) = running {
        r.stop().await?;
    }
    report(&a, tally, wall);
    Ok(())
}

async fn episode(mut c: MemoryEnvClient<Channel>, i: usize, q: pb::QuestionRecord, seed: u64, calls: u32) -> Tally {
    let mut t = Tally::default();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let id = format!("bench-{i}-{seed}");
    let t0 = Instant::now();
    let created = c
        .create_episode(pb::CreateEpisodeRequest {
            episode_id: id.clone(),
            question_id: q.id.clone(),
            seed: Some(seed),
            max_steps: Some(calls.max(1)),
            ..Default::default()
        })
        .await;
    t.lat.entry("create").or_default().0.push(ms(t0.elapsed()));
    if let Err(s) = created {
        if std::env::var_os("MEMGYM_BENCH_DEBUG").is_some() {
            eprintln!("create failed: {s:?}");
        }
        *t.failures.entry(format!("create {:?}", s.code())).or_default() += 1;
        return t;
    }
    let words: Vec<String> =
        q.question.split_whitespace().map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()).to_string()).filter(|w| w.len() > 3).collect();
    let mut known: Vec<String> = Vec::new();
    for _ in 0..calls {
        let roll: u32 = rng.random_range(0..100);
        let need = |n: usize| known.len() >= n;
        let (tool, args) = match roll {
            0..=39 => ("search_memory", search_args(&mut rng, &words)),
            40..=49 => {
                ("sample_memory", json!({"k": rng.random_range(2..6), "strategy": pick3(&mut rng, ["random", "diverse", "recent"])}))
            }
            50..=64 => {
                ("manage_memory", json!({"operation": "create", "content": format!("{} remembers {}", q.conversation_id, words.join(" "))}))
            }
            65..=74 if need(1) => (
                "manage_memory",
                json!({"operation": "update", "memory_id": known[rng.random_range(0..known.len())], "content": format!("Updated note about {}", words.join(" "))}),
            ),
            75..=84 if need(1) => ("delete_memory", json!({"memory_id": known.swap_remove(rng.random_range(0..known.len()))})),
            85..=94 if need(2) => {
                let a = known.swap_remove(rng.random_range(0..known.len()));
                let b = known.swap_remove(rng.random_range(0..known.len()));
                ("merge_memory", json!({"memory_ids": [a, b], "strategy": pick3(&mut rng, ["summarize", "concatenate", "extract_common"])}))
            }
            95..=99 if need(1) => {
                let m = known.swap_remove(rng.random_range(0..known.len()));
                ("split_memory", json!({"memory_id": m, "split_criteria": pick3(&mut rng, ["temporal", "thematic", "speaker"])}))
            }
            _ => ("search_memory", search_args(&mut rng, &words)),
        };
        let t0 = Instant::now();
        let r = c
            .call_tool(pb::CallToolRequest { episode_id: id.clone(), tool_name: tool.to_string(), arguments_json: args.to_string() })
            .await;
        let dt = ms(t0.elapsed());
        t.lat.entry(tool).or_default().0.push(dt);
        t.tool_all.0.push(dt);
        match r {
            Ok(resp) => collect_ids(resp.into_inner(), &mut known),
            #[allow(clippy::wildcard_enum_match_arm)] // any other code is a failure, whatever tonic adds
            Err(s) => {
                let key = format!("{tool} {:?}", s.code());
                match s.code() {
                    Code::FailedPrecondition | Code::NotFound | Code::InvalidArgument => *t.refused.entry(key).or_default() += 1,
                    _ => *t.failures.entry(key).or_default() += 1,
                }
            }
        }
    }
    let t0 = Instant::now();
    match c.score_episode(pb::ScoreEpisodeRequest { episode_id: id.clone() }).await {
        Ok(r) => t.rewards.push(r.into_inner().reward),
        Err(s) => *t.failures.entry(format!("score {:?}", s.code())).or_default() += 1,
    }
    t.lat.entry("score").or_default().0.push(ms(t0.elapsed()));
    let t0 = Instant::now();
    if let Err(s) = c.close_episode(pb::CloseEpisodeRequest { episode_id: id }).await {
        *t.failures.entry(format!("close {:?}", s.code())).or_default() += 1;
    }
    t.lat.entry("close").or_default().0.push(ms(t0.elapsed()));
    t
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

fn collect_ids(r: pb::CallToolResponse, known: &mut Vec<String>) {
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
        Some(R::Merge(m)) => m.memory.into_iter().for_each(|m| add(m.id)),
        Some(R::Split(s)) => s.parts.into_iter().for_each(|m| add(m.id)),
        Some(R::Delete(_)) | None => {}
    }
}

fn report(a: &BenchArgs, mut t: Tally, wall: f64) {
    let tool_calls = t.tool_all.0.len();
    let eps = a.episodes as f64 / wall;
    let cps = tool_calls as f64 / wall;
    println!(
        "memgym bench: {} episodes x {} calls, groups of {}, {}",
        a.episodes,
        a.calls,
        a.group,
        if a.addr.is_some() { "external server" } else { "in-process server over loopback" }
    );
    println!("wall {wall:.3} s   episodes/s {eps:.1}   tool calls/s {cps:.0}");
    println!("{:<16} {:>8} {:>9} {:>9} {:>9} {:>9}", "rpc", "count", "p50 ms", "p90 ms", "p99 ms", "max ms");
    let mut rows: Vec<(&str, Samples)> = t.lat.iter().map(|(k, v)| (*k, v.clone())).collect();
    rows.push(("all tool calls", t.tool_all.clone()));
    for (k, mut s) in rows {
        println!("{:<16} {:>8} {:>9.3} {:>9.3} {:>9.3} {:>9.3}", k, s.0.len(), s.pct(50.0), s.pct(90.0), s.pct(99.0), s.pct(100.0));
    }
    let mean_reward = if t.rewards.is_empty() { 0.0 } else { t.rewards.iter().sum::<f64>() / t.rewards.len() as f64 };
    println!("scored {} episodes, mean reward {mean_reward:.4}", t.rewards.len());
    if !t.refused.is_empty() {
        println!("refused calls (expected: the random policy asks for impossible edits): {:?}", t.refused);
    }
    if !t.failures.is_empty() {
        println!("FAILURES: {:?}", t.failures);
    }
    if a.json {
        let mut create = t.lat.get("create").cloned().unwrap_or_default();
        let mut score = t.lat.get("score").cloned().unwrap_or_default();
        let j = json!({
            "episodes": a.episodes, "calls_per_episode": a.calls, "wall_s": wall,
            "episodes_per_s": eps, "tool_calls_per_s": cps,
            "tool_p50_ms": t.tool_all.pct(50.0), "tool_p90_ms": t.tool_all.pct(90.0),
            "tool_p99_ms": t.tool_all.pct(99.0), "tool_max_ms": t.tool_all.pct(100.0),
            "create_p99_ms": create.pct(99.0), "score_p99_ms": score.pct(99.0),
            "failures": t.failures.values().sum::<u64>(), "refused": t.refused.values().sum::<u64>(),
            "mean_reward": mean_reward,
        });
        println!("{j}");
    }
}
