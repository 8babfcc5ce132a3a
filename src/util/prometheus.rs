//! Prometheus metrics: every series memgym exports, written once here (name, help, labels, buckets), so
//! a trainer's operator can put memgym's latency, errors, open episodes and memory on a dashboard
//! (`serve --metrics-addr`, the book's "Operations").
//!
//! The layers record through the `metrics` facade with the functions below; without `--metrics-addr` no
//! recorder is installed and each call costs a load and a branch. [`install`] sets the
//! `metrics-exporter-prometheus` recorder once per process (a second server in the same process, as in
//! tests, shares it) and [`render`] writes the exposition text — memgym writes none by hand.
//!
//! **Labels stay bounded**: a face, an RPC or route known in advance (anything else is `other`), a status
//! code, a tool name from the six (else `other`), an outcome, an evaluator, an embedder or LLM kind, a bank
//! operation and a store. Never an episode id, a bank name, a question or a memory.

use std::sync::OnceLock;

use metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram, Unit};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Requests per face, RPC or route, and status code.
pub const REQUESTS: &str = "memgym_requests_total";
/// Request latency per face and RPC or route.
pub const REQUEST_SECONDS: &str = "memgym_request_duration_seconds";
/// Requests being served, per face.
pub const IN_FLIGHT: &str = "memgym_requests_in_flight";
/// Episodes open now.
pub const EPISODES_OPEN: &str = "memgym_episodes_open";
/// Episode events: created, forked, scored, closed, reaped, refused_at_cap.
pub const EPISODE_EVENTS: &str = "memgym_episode_events_total";
/// Tool calls per tool and outcome.
pub const TOOL_CALLS: &str = "memgym_tool_calls_total";
/// Tool latency per tool.
pub const TOOL_SECONDS: &str = "memgym_tool_duration_seconds";
/// Rewards per evaluator.
pub const REWARD: &str = "memgym_reward";
/// p_new per evaluator.
pub const P_NEW: &str = "memgym_p_new";
/// LLM endpoint requests by outcome (ok, error).
pub const LLM_REQUESTS: &str = "memgym_llm_requests_total";
/// LLM endpoint latency (retries included).
pub const LLM_SECONDS: &str = "memgym_llm_request_duration_seconds";
/// LLM answers served from the cache or from an identical request in flight.
pub const LLM_CACHE_HITS: &str = "memgym_llm_cache_hits_total";
/// Embedding calls by outcome.
pub const EMBED_CALLS: &str = "memgym_embed_calls_total";
/// Texts embedded (asked for, cache hits included).
pub const EMBED_TEXTS: &str = "memgym_embed_texts_total";
/// Embedding call latency.
pub const EMBED_SECONDS: &str = "memgym_embed_duration_seconds";
/// Texts answered from the embedding cache.
pub const EMBED_CACHE_HITS: &str = "memgym_embed_cache_hits_total";
/// Bank store operations by store (sqlite, postgres), operation and outcome.
pub const BANK_STORE_OPS: &str = "memgym_bank_store_operations_total";
/// Bank store latency by store and operation.
pub const BANK_STORE_SECONDS: &str = "memgym_bank_store_duration_seconds";
/// Resident set size of the process.
pub const RSS_BYTES: &str = "memgym_resident_memory_bytes";

/// Every series, for the book's list and the tests.
pub const SERIES: [&str; 19] = [
    REQUESTS,
    REQUEST_SECONDS,
    IN_FLIGHT,
    EPISODES_OPEN,
    EPISODE_EVENTS,
    TOOL_CALLS,
    TOOL_SECONDS,
    REWARD,
    P_NEW,
    LLM_REQUESTS,
    LLM_SECONDS,
    LLM_CACHE_HITS,
    EMBED_CALLS,
    EMBED_TEXTS,
    EMBED_SECONDS,
    EMBED_CACHE_HITS,
    BANK_STORE_OPS,
    BANK_STORE_SECONDS,
    RSS_BYTES,
];

/// Latency buckets, seconds: 50 µs to 60 s.
const SECONDS: [f64; 16] = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0, 15.0, 60.0];
/// Reward buckets: the reward's range, −1 to 1 (and beyond for growth), in steps that show a sign.
const REWARDS: [f64; 13] = [-1.0, -0.5, -0.25, -0.1, -0.01, -1e-9, 1e-9, 0.01, 0.1, 0.25, 0.5, 0.75, 1.0];
/// p buckets: 0 to 1.
const SHARES: [f64; 10] = [1e-9, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the Prometheus recorder (once per process) and describes every series; the handle renders.
pub fn install() -> Result<PrometheusHandle, String> {
    if let Some(h) = HANDLE.get() {
        return Ok(h.clone());
    }
    let builder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &SECONDS)
        .and_then(|b| b.set_buckets_for_metric(Matcher::Full(REWARD.into()), &REWARDS))
        .and_then(|b| b.set_buckets_for_metric(Matcher::Full(P_NEW.into()), &SHARES))
        .map_err(|e| format!("metrics buckets: {e}"))?;
    let recorder = builder.build_recorder();
    let handle = recorder.handle();
    // Another recorder may have been set first in this process (only in tests): keep the first handle.
    if metrics::set_global_recorder(recorder).is_err() {
        return HANDLE.get().cloned().ok_or_else(|| "another metrics recorder is installed".to_string());
    }
    describe();
    Ok(HANDLE.get_or_init(|| handle).clone())
}

fn describe() {
    describe_counter!(REQUESTS, "Requests by face (grpc, openenv, mcp), RPC or route, and status code.");
    describe_histogram!(REQUEST_SECONDS, Unit::Seconds, "Request latency by face and RPC or route, until the response starts.");
    describe_gauge!(IN_FLIGHT, "Requests being served, by face.");
    describe_gauge!(EPISODES_OPEN, "Episodes open now.");
    describe_counter!(EPISODE_EVENTS, "Episode events: created, forked, scored, closed, reaped, refused_at_cap.");
    describe_counter!(TOOL_CALLS, "Tool calls by tool and outcome (done, refused).");
    describe_histogram!(TOOL_SECONDS, Unit::Seconds, "Tool latency by tool, inside the episode.");
    describe_histogram!(REWARD, "Rewards of scored episodes, by evaluator.");
    describe_histogram!(P_NEW, "p_new of scored episodes, by evaluator.");
    describe_counter!(LLM_REQUESTS, "Requests to the LLM endpoint (evaluators, LearnFromGroup, --llm-edit) by outcome: ok or error.");
    describe_histogram!(LLM_SECONDS, Unit::Seconds, "LLM endpoint latency per request, retries included.");
    describe_counter!(LLM_CACHE_HITS, "LLM answers served from the cache or shared with an identical request in flight.");
    describe_counter!(EMBED_CALLS, "Embedding calls by outcome: ok or error.");
    describe_counter!(EMBED_TEXTS, "Texts asked to be embedded (cache hits included).");
    describe_histogram!(EMBED_SECONDS, Unit::Seconds, "Embedding call latency.");
    describe_counter!(EMBED_CACHE_HITS, "Texts answered from the embedding cache.");
    describe_counter!(BANK_STORE_OPS, "Bank store operations by store (sqlite, postgres), operation and outcome: ok or error.");
    describe_histogram!(
        BANK_STORE_SECONDS,
        Unit::Seconds,
        "Bank store latency by store and operation (a commit is one durable transaction)."
    );
    describe_gauge!(RSS_BYTES, Unit::Bytes, "Resident set size of the process, read at each scrape.");
}

/// The exposition text, with the resident set size read now.
pub fn render(handle: &PrometheusHandle) -> String {
    if let Some(rss) = rss_bytes() {
        gauge!(RSS_BYTES).set(rss as f64);
    }
    handle.render()
}

/// This process's resident set size (Linux `/proc/self/statm`), when readable.
pub fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// One request answered.
pub fn request(face: &'static str, method: &'static str, code: &'static str, seconds: f64) {
    counter!(REQUESTS, "face" => face, "method" => method, "code" => code).increment(1);
    histogram!(REQUEST_SECONDS, "face" => face, "method" => method).record(seconds);
}

/// A request started (+1) or ended (−1).
pub fn in_flight(face: &'static str, delta: f64) {
    gauge!(IN_FLIGHT, "face" => face).increment(delta);
}

/// What happened to an episode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EpisodeEvent {
    /// CreateEpisode opened it.
    Created,
    /// ForkEpisode opened it.
    Forked,
    /// ScoreEpisode scored it.
    Scored,
    /// CloseEpisode closed it.
    Closed,
    /// Idle past the TTL.
    Reaped,
    /// Refused: the cap of open episodes.
    RefusedAtCap,
}

impl EpisodeEvent {
    fn label(self) -> &'static str {
        match self {
            EpisodeEvent::Created => "created",
            EpisodeEvent::Forked => "forked",
            EpisodeEvent::Scored => "scored",
            EpisodeEvent::Closed => "closed",
            EpisodeEvent::Reaped => "reaped",
            EpisodeEvent::RefusedAtCap => "refused_at_cap",
        }
    }
}

/// `n` episodes had `event`.
pub fn episodes(event: EpisodeEvent, n: u64) {
    counter!(EPISODE_EVENTS, "event" => event.label()).increment(n);
}

/// Episodes open now.
pub fn episodes_open(n: usize) {
    gauge!(EPISODES_OPEN).set(n as f64);
}

/// One tool call on a live episode: its tool, whether it was carried out, its latency.
pub fn tool_call(tool: &'static str, done: bool, seconds: f64) {
    counter!(TOOL_CALLS, "tool" => tool, "outcome" => if done { "done" } else { "refused" }).increment(1);
    histogram!(TOOL_SECONDS, "tool" => tool).record(seconds);
}

/// One scored episode.
pub fn scored(evaluator: &'static str, reward: f64, p_new: f64) {
    if reward.is_finite() {
        histogram!(REWARD, "evaluator" => evaluator).record(reward);
    }
    if p_new.is_finite() {
        histogram!(P_NEW, "evaluator" => evaluator).record(p_new);
    }
}

fn outcome(ok: bool) -> &'static str {
    if ok {
        "ok"
    } else {
        "error"
    }
}

/// One request to the LLM endpoint.
pub fn llm_request(ok: bool, seconds: f64) {
    counter!(LLM_REQUESTS, "outcome" => outcome(ok)).increment(1);
    histogram!(LLM_SECONDS).record(seconds);
}

/// An LLM answer from the cache.
pub fn llm_cache_hit() {
    counter!(LLM_CACHE_HITS).increment(1);
}

/// One embedding call of `texts` texts.
pub fn embed_call(texts: usize, ok: bool, seconds: f64) {
    counter!(EMBED_CALLS, "outcome" => outcome(ok)).increment(1);
    counter!(EMBED_TEXTS).increment(texts as u64);
    histogram!(EMBED_SECONDS).record(seconds);
}

/// A text answered from the embedding cache.
pub fn embed_cache_hit() {
    counter!(EMBED_CACHE_HITS).increment(1);
}

/// One bank store operation.
pub fn bank_store(store: &'static str, op: &'static str, ok: bool, seconds: f64) {
    counter!(BANK_STORE_OPS, "store" => store, "op" => op, "outcome" => outcome(ok)).increment(1);
    histogram!(BANK_STORE_SECONDS, "store" => store, "op" => op).record(seconds);
}
