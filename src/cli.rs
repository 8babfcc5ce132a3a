//! Command-line interface (clap derive). Every `serve` flag can also be set by a `MEMGYM_*` environment
//! variable. Raw flags here; validated settings in [`crate::config`].

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// memgym: a gRPC reinforcement-learning environment for memory editing on LoCoMo.
#[derive(Debug, Parser)]
#[command(name = "memgym", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the gRPC server.
    Serve(ServeArgs),
    /// Convert LoCoMo to Parquet, or print dataset statistics.
    #[command(subcommand)]
    Dataset(DatasetCommand),
    /// Load-test a server: N concurrent episodes × a realistic tool mix, then score and close.
    Bench(BenchArgs),
}

/// Environment settings shared by `serve` and the in-process `bench`.
#[derive(Debug, Clone, Args)]
pub struct EnvArgs {
    /// Directory with conversations/memories/questions.parquet; default: the copy embedded in the binary.
    #[arg(long, env = "MEMGYM_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Index path: auto (exact scan up to --full-scan-threshold vectors, HNSW above), hnsw, or exact.
    #[arg(long, env = "MEMGYM_INDEX", default_value = "auto")]
    pub index: String,
    /// In auto mode, M₀ sizes up to this use the exact scan.
    #[arg(long, env = "MEMGYM_FULL_SCAN_THRESHOLD", default_value_t = 10_000)]
    pub full_scan_threshold: usize,
    /// Open episodes at most (CreateEpisode beyond → RESOURCE_EXHAUSTED).
    #[arg(long, env = "MEMGYM_MAX_EPISODES", default_value_t = 16_384)]
    pub max_episodes: usize,
    /// Close episodes idle this many seconds.
    #[arg(long, env = "MEMGYM_IDLE_TTL_SECS", default_value_t = 600)]
    pub idle_ttl_secs: u64,
    /// Default step budget of an episode.
    #[arg(long, env = "MEMGYM_DEFAULT_MAX_STEPS", default_value_t = 30)]
    pub default_max_steps: u32,
    /// Largest step budget a request may set.
    #[arg(long, env = "MEMGYM_MAX_STEPS_CAP", default_value_t = 1000)]
    pub max_steps_cap: u32,
    /// Most memories one episode may hold.
    #[arg(long, env = "MEMGYM_MAX_MEMORIES", default_value_t = 5000)]
    pub max_memories: usize,
    /// Longest memory text, query or part, in characters.
    #[arg(long, env = "MEMGYM_MAX_TEXT_CHARS", default_value_t = 2000)]
    pub max_text_chars: usize,
    /// Most ids one delete may name.
    #[arg(long, env = "MEMGYM_MAX_IDS_PER_CALL", default_value_t = 50)]
    pub max_ids_per_call: usize,
    /// Memories retrieved per evaluation of p(M, q).
    #[arg(long, env = "MEMGYM_TOP_K", default_value_t = 5)]
    pub top_k: usize,
    /// Size budget N_max of the efficiency term; default |M₀| of the episode.
    #[arg(long, env = "MEMGYM_N_MAX")]
    pub n_max: Option<usize>,
    /// Concurrent embedding batches on the blocking pool (default: CPU count).
    #[arg(long, env = "MEMGYM_EMBED_THREADS")]
    pub embed_threads: Option<usize>,
}

/// `memgym serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "MEMGYM_ADDR", default_value = "127.0.0.1:50051")]
    pub addr: SocketAddr,
    /// Seconds to let in-flight calls finish after SIGTERM/Ctrl-C.
    #[arg(long, env = "MEMGYM_DRAIN_SECS", default_value_t = 10)]
    pub drain_secs: u64,
    /// Environment settings.
    #[command(flatten)]
    pub env: EnvArgs,
}

/// `memgym dataset ...`.
#[derive(Debug, Subcommand)]
pub enum DatasetCommand {
    /// Convert locomo10.json to conversations/memories/questions.parquet.
    Convert {
        /// The LoCoMo JSON file.
        #[arg(long)]
        locomo: PathBuf,
        /// Output directory.
        #[arg(long)]
        out: PathBuf,
    },
    /// Print counts per conversation, split and category.
    Stats {
        /// Parquet directory; default: the embedded copy.
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Read a LoCoMo JSON file instead.
        #[arg(long, conflicts_with = "data_dir")]
        locomo: Option<PathBuf>,
    },
}

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
    #[arg(long)]
    pub addr: Option<SocketAddr>,
    /// Environment settings of the in-process server.
    #[command(flatten)]
    pub env: EnvArgs,
}
