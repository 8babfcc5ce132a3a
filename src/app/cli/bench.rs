//! `memgym bench`'s flags: the load generator and its modes (episodes, rollouts, protocols, banks).

use std::net::SocketAddr;

use clap::{Args, Subcommand};

use super::serve::{BankIndexArgs, EnvArgs};

/// `memgym bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Concurrent episodes.
    #[arg(long, default_value_t = 1024)]
    pub episodes: usize,
    /// Tool calls per episode.
    #[arg(long, default_value_t = 30)]
    pub calls: u32,
    /// Episodes per GRPO group (they share a question).
    #[arg(long, default_value_t = 8)]
    pub group: usize,
    /// Seed of the tool-mix generator.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Print one JSON object as the last line.
    #[arg(long)]
    pub json: bool,
    /// Drive an already running server at this address instead of starting one in-process.
    #[arg(long, conflicts_with = "spawn_server")]
    pub addr: Option<SocketAddr>,
    /// With --addr (a proxy in front of replicas): also drive one replica directly at this address, in
    /// alternating rounds, and report both and their ratio (the book's "Operations → Replicas").
    #[arg(long, requires = "addr")]
    pub compare_addr: Option<SocketAddr>,
    /// Two-process mode: start `memgym serve` as a child process on a free loopback port (with this
    /// command's environment flags) and report the server's own RSS and CPU time.
    #[arg(long)]
    pub spawn_server: bool,
    /// At most this many RPCs in flight at once (a trainer's tool-call pool); default: every episode's
    /// next call is in flight, so latency includes queueing behind the other episodes.
    #[arg(long)]
    pub in_flight: Option<usize>,
    /// HTTP/2 connections the episodes are spread over (a trainer has one per worker process; one
    /// connection is one task on each side, which caps what two cores can do through it).
    #[arg(long, default_value_t = 4)]
    pub connections: usize,
    /// Sustained load: keep `--episodes` episodes running (each finished one is replaced by a new one)
    /// for this many seconds, sampling RSS every second.
    #[arg(long)]
    pub duration: Option<u64>,
    /// Before the run, measure the embedder alone (batches of 32, no cache) for this many seconds; 0 skips.
    #[arg(long, default_value_t = 2.0)]
    pub embedder_baseline_secs: f64,
    /// Before the run, measure the bare gRPC ceiling for this many seconds: standard health checks over
    /// the same connections and in-flight cap as the tool calls; 0 skips.
    #[arg(long, default_value_t = 2.0)]
    pub grpc_ceiling_secs: f64,
    /// Environment settings of the in-process server.
    #[command(flatten)]
    pub env: EnvArgs,
    /// Another measurement instead of the episode load.
    #[command(subcommand)]
    pub mode: Option<BenchMode>,
}

/// `memgym bench <mode>`.
#[derive(Debug, Subcommand)]
pub enum BenchMode {
    /// The memory banks: retrieval at 100, 10,000 and 100,000 experiences over gRPC, ApplyOperations on
    /// SQLite (and PostgreSQL), compression, and opening a large bank.
    Banks(BankBenchArgs),
    /// The same episodes over gRPC, OpenEnv's WebSocket, MCP (2026-07-28 and 2025-11-25, and at an
    /// episode's own URL), NeMo Gym and ORS, in one run: tool calls/s, their p50/p99, and each
    /// protocol's ratio to gRPC.
    Protocols(ProtocolBenchArgs),
    /// The `memgym rollout` harness against an instant policy endpoint: tool calls/s and CPU per call at
    /// 64 concurrent rollouts (the harness's own overhead).
    Rollout(RolloutBenchArgs),
}

/// `memgym bench rollout`.
#[derive(Debug, Args)]
pub struct RolloutBenchArgs {
    /// Rollouts to play.
    #[arg(long, default_value_t = 1024)]
    pub rollouts: usize,
    /// Rollouts in flight.
    #[arg(long, default_value_t = 64)]
    pub concurrency: usize,
    /// Rollouts per question.
    #[arg(long, default_value_t = 4)]
    pub group: u32,
    /// Print one JSON object as the last line.
    #[arg(long)]
    pub json: bool,
    /// Environment settings of the in-process environment (the embedder; hash by default).
    #[command(flatten)]
    pub env: EnvArgs,
}

/// `memgym bench protocols`.
#[derive(Debug, Args)]
pub struct ProtocolBenchArgs {
    /// Concurrent episodes per protocol.
    #[arg(long, default_value_t = 64)]
    pub episodes: usize,
    /// Tool calls per episode.
    #[arg(long, default_value_t = 20)]
    pub calls: u32,
    /// MCP client sessions the episodes share (a trainer has one per worker).
    #[arg(long, default_value_t = 4)]
    pub mcp_clients: usize,
    /// Measure only these (comma-separated: grpc, openenv-ws, mcp-2026-07-28, mcp-2025-11-25, mcp-episode-url,
    /// nemo-gym, ors); default all.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Print one JSON object as the last line.
    #[arg(long)]
    pub json: bool,
    /// Environment settings of the in-process server (the embedder; hash by default).
    #[command(flatten)]
    pub env: EnvArgs,
}

/// `memgym bench banks`.
#[derive(Debug, Args)]
pub struct BankBenchArgs {
    /// Bank sizes for the retrieval measurement.
    #[arg(long, value_delimiter = ',', default_value = "100,10000,100000")]
    pub sizes: Vec<usize>,
    /// Bank sizes for the compression measurement (each strategy as a dry run).
    #[arg(long, value_delimiter = ',', default_value = "1000,10000")]
    pub compress_sizes: Vec<usize>,
    /// The compression strategies measured (over 10,000 experiences, diversity and hybrid read the bank's
    /// graph: the bench waits for it after an import).
    #[arg(long, value_delimiter = ',', default_value = "diversity,importance,temporal,hybrid")]
    pub compress_strategies: Vec<crate::banks::compress::Strategy>,
    /// Seconds per measurement.
    #[arg(long, default_value_t = 5.0)]
    pub secs: f64,
    /// Concurrent retrieval callers of the throughput measurement (latency is measured with one).
    #[arg(long, default_value_t = 4)]
    pub clients: usize,
    /// Queries compared against the exact scan for recall@10 (where HNSW answers).
    #[arg(long, default_value_t = 200)]
    pub recall_queries: usize,
    /// The banks' index.
    #[command(flatten)]
    pub index: BankIndexArgs,
    /// Also measure ApplyOperations on this PostgreSQL database.
    #[arg(long, value_name = "URL")]
    pub postgres_url: Option<String>,
    /// The size of the bank the PostgreSQL replica opens (with `--postgres-url`); the largest of `--sizes` by
    /// default. Measures a replica's open at 1,000,000 without first building a SQLite bank of that size.
    #[arg(long, value_name = "N")]
    pub replica_size: Option<usize>,
    /// The banks' cap on experiences (the server's, 1,000,000). The replica's catch-up adds 100 experiences;
    /// a bank at the cap first loses as many, so the replica catches up on deletions too.
    #[arg(long, default_value_t = crate::banks::BankLimits::default().max_experiences, value_name = "N")]
    pub max_experiences: usize,
    /// Skip the second open of the largest bank (its saved index removed: the exact scan answers while
    /// the graph builds again, which takes most of an hour at 1,000,000 experiences).
    #[arg(long)]
    pub no_open_without_saved: bool,
    /// Also measure Retrieve on the largest bank at each of these HNSW search beams (a recall/latency
    /// curve): for each, a fresh server opens the bank on its saved index with that beam, and its p50/p99
    /// with one caller and its recall@10 are reported.
    #[arg(long, value_delimiter = ',', value_name = "EF,...",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=crate::memory::MAX_BEAM as u64))]
    pub ef_sweep: Vec<usize>,
    /// Print one JSON object as the last line.
    #[arg(long)]
    pub json: bool,
    /// Environment settings of the in-process server (the embedder; hash by default).
    #[command(flatten)]
    pub env: EnvArgs,
}
