//! `memgym serve`'s flags: the environment (episodes, limits, reward), the embedder, the LLM endpoint, the
//! banks and their indexes, and the server's listeners, keys and replicas.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

/// Which embedder, and what it needs.
#[derive(Debug, Clone, Args)]
pub struct EmbedArgs {
    /// Embedder: hash, potion-2m, fastembed or openai (see the book's "Embedders").
    #[arg(long, env = "MEMGYM_EMBEDDER", default_value = "hash")]
    pub embedder: String,
    /// potion-2m: model directory (default: data/models/potion-base-2M).
    #[arg(long, env = "MEMGYM_POTION_DIR")]
    pub potion_dir: Option<PathBuf>,
    /// fastembed: directory with model.onnx (scripts/install-onnx.sh prints it).
    #[arg(long, env = "MEMGYM_EMBED_MODEL_DIR")]
    pub embed_model_dir: Option<PathBuf>,
    /// fastembed: tokenizer directory (default: data/models/all-MiniLM-L6-v2-tokenizer).
    #[arg(long, env = "MEMGYM_TOKENIZER_DIR")]
    pub tokenizer_dir: Option<PathBuf>,
    /// fastembed: the ONNX Runtime library (libonnxruntime.so.*).
    #[arg(long, env = "ORT_DYLIB_PATH")]
    pub ort_dylib: Option<PathBuf>,
    /// fastembed: inference sessions (each takes one batch at a time).
    #[arg(long, env = "MEMGYM_EMBED_SESSIONS", default_value_t = 2)]
    pub embed_sessions: usize,
    /// openai: base URL of an OpenAI-compatible API, e.g. http://127.0.0.1:8080/v1.
    #[arg(long, env = "MEMGYM_OPENAI_BASE_URL")]
    pub openai_base_url: Option<String>,
    /// openai: embedding model name.
    #[arg(long, env = "MEMGYM_OPENAI_MODEL")]
    pub openai_model: Option<String>,
    /// openai: file holding the API key (default: the OPENAI_API_KEY environment variable).
    #[arg(long, env = "MEMGYM_OPENAI_API_KEY_FILE")]
    pub openai_api_key_file: Option<PathBuf>,
    /// Most texts per embedding batch (concurrent requests are batched together).
    #[arg(long, env = "MEMGYM_EMBED_BATCH", default_value_t = 32)]
    pub embed_batch: usize,
    /// Microseconds a partial batch waits for more requests (default: 1000 for fastembed and openai, 0 otherwise).
    #[arg(long, env = "MEMGYM_EMBED_WAIT_US")]
    pub embed_wait_us: Option<u64>,
    /// Entries of the LRU cache of embeddings by text (0 disables it).
    #[arg(long, env = "MEMGYM_EMBED_CACHE", default_value_t = 16_384)]
    pub embed_cache: usize,
    /// Concurrent embedding batches on the blocking pool (default: CPU count).
    #[arg(long, env = "MEMGYM_EMBED_THREADS")]
    pub embed_threads: Option<usize>,
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
    /// Search: dense (cosine), or hybrid (reciprocal-rank fusion of cosine and BM25; see the book's "Embedders").
    #[arg(long, env = "MEMGYM_SEARCH", default_value = "dense")]
    pub search: String,
    /// In auto mode, M₀ sizes up to this use the exact scan.
    #[arg(long, env = "MEMGYM_FULL_SCAN_THRESHOLD", default_value_t = crate::memory::IndexConfig::default().full_scan_threshold)]
    pub full_scan_threshold: usize,
    /// Open episodes at most (CreateEpisode beyond → RESOURCE_EXHAUSTED).
    #[arg(long, env = "MEMGYM_MAX_EPISODES", default_value_t = 16_384)]
    pub max_episodes: usize,
    /// Close episodes idle this many seconds.
    #[arg(long, env = "MEMGYM_IDLE_TTL_SECS", default_value_t = 600)]
    pub idle_ttl_secs: u64,
    /// Remember the ids of closed and reaped episodes this many seconds: calls on them are
    /// FAILED_PRECONDITION (ids are not reused) instead of NOT_FOUND or a fresh episode. 0 remembers none.
    #[arg(long, env = "MEMGYM_FORGET_CLOSED_AFTER_SECS", default_value_t = 3_600)]
    pub forget_closed_after_secs: u64,
    /// Remember at most this many such ids (oldest forgotten first; about 300 bytes each). 0 remembers none.
    #[arg(long, env = "MEMGYM_MAX_CLOSED_IDS", default_value_t = 100_000)]
    pub max_closed_ids: usize,
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
    /// Precomputed M₀ vectors (default: vectors-<embedder>.parquet in --data-dir or data/locomo, if present).
    #[arg(long, env = "MEMGYM_VECTORS")]
    pub vectors: Option<PathBuf>,
    /// Size budget N_max of MemUpdate's efficiency term; default |M₀| of the episode.
    #[arg(long, env = "MEMGYM_N_MAX")]
    pub n_max: Option<usize>,
    /// Gold answers: original (LoCoMo as published), corrected (the LoCoMo audit's answer and evidence where
    /// it has them) or exclude-flagged (the audit's score-corrupting questions removed).
    #[arg(long, env = "MEMGYM_GOLD", default_value = "original")]
    pub gold: String,
    /// What the evaluators read: budget (the retrieved memories within the content words of M₀'s top-k)
    /// or top-k (MemUpdate's: the top-k memories, whatever their length).
    #[arg(long, env = "MEMGYM_CONTEXT", default_value = "budget")]
    pub context: String,
    /// The reward: whole-memory (the target's p_new - p_old; for every other question of the conversation, plus
    /// a rise the episode's writing states, minus a fact it lost, minus half of a fact pushed out
    /// of its reading; minus content words added and removed, over the words of M0), collateral (plus the
    /// others' mean change instead), damage (minus their falls only), delta-growth (the single-question reward:
    /// p_new - p_old - growth of the memory's text) or memupdate ((p_new - p_old) x MemUpdate's memory
    /// efficiency).
    #[arg(long, env = "MEMGYM_REWARD_FORMULA", default_value = "whole-memory")]
    pub reward_formula: String,
    /// Embedder settings.
    #[command(flatten)]
    pub embed: EmbedArgs,
    /// The LLM endpoint and the evaluator.
    #[command(flatten)]
    pub llm: LlmArgs,
}

/// The evaluator, and the OpenAI-compatible chat endpoint the LLM evaluators and `--llm-edit` use.
#[derive(Debug, Clone, Args)]
pub struct LlmArgs {
    /// Default evaluator: answer-phrase or answer-recall (offline), llm-f1 or llm-judge (need
    /// --llm-base-url and --llm-model). Episodes may choose another.
    #[arg(long, env = "MEMGYM_EVALUATOR", default_value = "answer-phrase")]
    pub evaluator: String,
    /// Base URL of an OpenAI-compatible chat API (vLLM, SGLang, llama.cpp, OpenAI), e.g. http://127.0.0.1:8000/v1.
    #[arg(long, env = "MEMGYM_LLM_BASE_URL")]
    pub llm_base_url: Option<String>,
    /// Chat model name.
    #[arg(long, env = "MEMGYM_LLM_MODEL")]
    pub llm_model: Option<String>,
    /// File holding the API key (default: the OPENAI_API_KEY environment variable; never logged).
    #[arg(long, env = "MEMGYM_LLM_API_KEY_FILE")]
    pub llm_api_key_file: Option<PathBuf>,
    /// Timeout of one request attempt, in milliseconds.
    #[arg(long, env = "MEMGYM_LLM_TIMEOUT_MS", default_value_t = 30_000)]
    pub llm_timeout_ms: u64,
    /// Retries after the first attempt, on 429, 5xx, timeouts and connection errors only.
    #[arg(long, env = "MEMGYM_LLM_MAX_RETRIES", default_value_t = 3)]
    pub llm_max_retries: u32,
    /// Requests in flight at once.
    #[arg(long, env = "MEMGYM_LLM_CONCURRENCY", default_value_t = 16)]
    pub llm_concurrency: usize,
    /// Seed sent with every request (for endpoints that support it); "none" leaves it out.
    #[arg(long, env = "MEMGYM_LLM_SEED", default_value = "42")]
    pub llm_seed: String,
    /// Answers kept in the in-memory cache (by model and prompt hash); 0 disables it.
    #[arg(long, env = "MEMGYM_LLM_CACHE", default_value_t = 16_384)]
    pub llm_cache: usize,
    /// merge_memory (summarize, extract_common) and split_memory ask the LLM for their text, falling back
    /// to the offline strategy when the reply is unusable.
    #[arg(long, env = "MEMGYM_LLM_EDIT")]
    pub llm_edit: bool,
    /// With an LLM evaluator, also score this many of the other questions whose reading an episode's edits
    /// changed (those it moved most) with the LLM: about one more LLM request each per scoring (two for
    /// llm-judge). 0, the default, scores every other question offline (answer-phrase).
    #[arg(long, env = "MEMGYM_OTHERS_LLM", default_value_t = 0)]
    pub others_llm: usize,
    /// Threads one scoring spreads the other questions of the conversation over; 0, the default, is one
    /// per core (at most four). With many episodes scored at once the cores are busy anyway: 1 saves the
    /// threads' start-up.
    #[arg(long, env = "MEMGYM_SCORE_THREADS", default_value_t = 0)]
    pub score_threads: usize,
}

/// `memgym serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "MEMGYM_ADDR", default_value = "127.0.0.1:50051")]
    pub addr: SocketAddr,
    /// Seconds a drain may take after SIGTERM/Ctrl-C: the server opens no new episodes and takes no bank
    /// calls (a retryable DRAINING), serves the episodes it holds until each is scored or closed, then lets
    /// in-flight calls finish. A second signal stops it at once (in-flight calls still finish).
    #[arg(long, env = "MEMGYM_DRAIN_SECS", default_value_t = 10)]
    pub drain_secs: u64,
    /// Calls one gRPC connection may have in flight at once (HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS`): a
    /// client with more waits for a stream before it sends, so the server's memory for calls in flight is
    /// bounded by connections × this (each call holds its request, its handler's state and its reply).
    #[arg(long, env = "MEMGYM_GRPC_MAX_STREAMS", default_value_t = crate::app::server::DEFAULT_MAX_STREAMS, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub grpc_max_streams: u32,
    /// This server's name as one of several replicas behind a proxy (lowercase letters, digits, '-'):
    /// every episode id it gives out starts with `NAME.`, so the proxy routes each call to the replica
    /// that holds its episode (the book's "Operations → Replicas"). Off: a lone server.
    #[arg(long, env = "MEMGYM_REPLICA", value_name = "NAME", value_parser = replica_name)]
    pub replica: Option<String>,
    /// Also serve OpenEnv's HTTP + WebSocket protocol on this address (`/ws`, `/reset`, `/step`, `/state`,
    /// `/health`, `/metadata`, `/schema`, `/openapi.json`, `/mcp`). Off unless given.
    #[arg(long, env = "MEMGYM_OPENENV_ADDR")]
    pub openenv_addr: Option<SocketAddr>,
    /// Concurrent OpenEnv sessions (WebSocket connections plus `openenv/session/create` sessions); one more
    /// is told CAPACITY_REACHED. Episodes also count against --max-episodes.
    #[arg(long, env = "MEMGYM_OPENENV_MAX_SESSIONS", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub openenv_max_sessions: u32,
    /// TLS: the server's certificate chain (PEM). With --tls-key, every face (gRPC, OpenEnv, MCP, metrics)
    /// serves TLS only (rustls).
    #[arg(long, env = "MEMGYM_TLS_CERT", value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// TLS: the certificate's private key (PEM).
    #[arg(long, env = "MEMGYM_TLS_KEY", value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// API keys every face requires: one per line, `KEY` or `KEY read-only` (read again when the file
    /// changes). Off unless given: anyone who reaches a port may then do anything (the book's "Operations").
    #[arg(long, env = "MEMGYM_API_KEY_FILE", value_name = "FILE")]
    pub api_key_file: Option<PathBuf>,
    /// Serve Prometheus metrics (`GET /metrics`) on this address. Off unless given (the book's "Operations"
    /// lists every series).
    #[arg(long, env = "MEMGYM_METRICS_ADDR")]
    pub metrics_addr: Option<SocketAddr>,
    /// Also serve MCP (streamable HTTP, path `/mcp`) on this address. Off unless given. OpenEnv's
    /// `/mcp` serves the same tools.
    #[arg(long, env = "MEMGYM_MCP_ADDR")]
    pub mcp_addr: Option<SocketAddr>,
    /// Also serve NeMo Gym's resources-server protocol on this address (`/seed_session`, one route per
    /// tool, `/verify`, `/close_session`, `/aggregate_metrics`; the book's "NeMo Gym"). Off unless given.
    #[arg(long, env = "MEMGYM_NEMO_GYM_ADDR")]
    pub nemo_gym_addr: Option<SocketAddr>,
    /// `Host` header values the OpenEnv, MCP, NeMo Gym and ORS listeners accept (DNS-rebinding protection;
    /// OpenEnv and ORS also check a browser's `Origin`), comma-separated; a name without a port matches any port. `*` accepts
    /// any Host (behind a proxy or in a container).
    #[arg(long, alias = "mcp-allowed-hosts", env = "MEMGYM_HTTP_ALLOWED_HOSTS", default_value = "localhost,127.0.0.1,::1")]
    pub http_allowed_hosts: String,
    /// MCP sessions open at once (each `initialize` of the 2025-11-25 handshake opens one; the stateless
    /// 2026-07-28 wire opens none); one more `initialize` is answered 503. Sessions end on DELETE or after
    /// six minutes unused.
    #[arg(long, env = "MEMGYM_MCP_MAX_SESSIONS", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub mcp_max_sessions: u32,
    /// Also serve the Open Reward Standard (HTTP + SSE, the `openreward` SDK's protocol, which TRL's
    /// `trl.experimental.openreward` uses) on this address: environment `memgym`, splits train and test,
    /// one session per question, the six tools plus `submit`. Off unless given.
    #[arg(long, env = "MEMGYM_ORS_ADDR")]
    pub ors_addr: Option<SocketAddr>,
    /// ORS sessions held at once (given out by `/create_session`, with or without their episode); one more
    /// is answered 503. Sessions end on `/delete` or after --idle-ttl-secs unused.
    #[arg(long, env = "MEMGYM_ORS_MAX_SESSIONS", default_value_t = 4096, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub ors_max_sessions: u32,
    /// Environment settings.
    #[command(flatten)]
    pub env: EnvArgs,
    /// Banks settings.
    #[command(flatten)]
    pub banks: BanksArgs,
}

impl ServeArgs {
    /// The MCP endpoints' settings.
    pub fn mcp_options(&self) -> crate::api::faces::mcp::McpOptions {
        let hosts: Vec<String> = self.http_allowed_hosts.split(',').map(|h| h.trim().to_string()).filter(|h| !h.is_empty()).collect();
        let allowed_hosts = if hosts.iter().any(|h| h == "*") { Vec::new() } else { hosts };
        crate::api::faces::mcp::McpOptions { allowed_hosts, max_sessions: self.mcp_max_sessions as usize }
    }

    /// The ORS endpoint's settings.
    pub fn ors_options(&self) -> crate::api::faces::ors::OrsOptions {
        crate::api::faces::ors::OrsOptions { allowed_hosts: self.mcp_options().allowed_hosts, max_sessions: self.ors_max_sessions as usize }
    }
}

/// Where the memory banks live.
#[derive(Debug, Args)]
pub struct BanksArgs {
    /// Directory of the embedded banks database (`banks.db`, SQLite, held by this server alone).
    /// Default: $XDG_DATA_HOME/memgym/banks, else ~/.local/share/memgym/banks.
    #[arg(long, env = "MEMGYM_BANKS_DIR", value_name = "DIR")]
    pub banks_dir: Option<PathBuf>,
    /// Serve the banks from PostgreSQL instead (`postgres://user:password@host:port/db`): several
    /// memgym replicas on one database share their banks.
    #[arg(long, env = "MEMGYM_BANKS_URL", value_name = "URL", conflicts_with = "banks_dir")]
    pub banks_url: Option<String>,
    /// Serve no banks (the Banks service is then not registered).
    #[arg(long, conflicts_with_all = ["banks_dir", "banks_url"])]
    pub no_banks: bool,
    /// A bank whose vectors come from another embedder than the server's: refuse to serve it, or
    /// reembed its texts (one write) and serve it.
    #[arg(long, env = "MEMGYM_BANKS_ON_EMBEDDER_CHANGE", default_value = "refuse", value_name = "refuse|reembed")]
    pub banks_on_embedder_change: String,
    /// The banks' index.
    #[command(flatten)]
    pub index: BankIndexArgs,
}

/// How a bank's experiences are indexed (the episodes' engine, tuned for retrieval latency).
#[derive(Debug, Args)]
pub struct BankIndexArgs {
    /// Banks up to this many experiences are searched by the exact scan, larger ones by HNSW (built on
    /// every core, rebuilt on open). On this project's machines the exact scan is faster than the HNSW
    /// search up to about 2,400 384-dimensional vectors (`cargo bench --bench search -- crossover`).
    #[arg(long, env = "MEMGYM_BANKS_FULL_SCAN_THRESHOLD", default_value_t = 2_000)]
    pub banks_full_scan_threshold: usize,
    /// HNSW search beam of the banks (raised to 2·top_k when larger): `auto` grows it with the bank's
    /// graph, 64 up to 200,000 experiences and 48 more for each fivefold growth past that (112 at
    /// 1,000,000, where 64 gives recall@10 of only about 0.93); or a fixed beam, 1 to 4,096.
    #[arg(long, env = "MEMGYM_BANKS_HNSW_EF_SEARCH", default_value = "auto", value_name = "auto|N")]
    pub banks_hnsw_ef_search: crate::memory::SearchBeam,
    /// HNSW construction beam of the banks: wider builds a better-connected graph (higher recall at the
    /// same search beam) in proportionally more time. A bank's graph is built once, after an import or a
    /// rebuild, and saved with it; an open reads it back.
    #[arg(long, env = "MEMGYM_BANKS_HNSW_EF_CONSTRUCTION", default_value_t = 200,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=4_096))]
    pub banks_hnsw_ef_construction: usize,
    /// Do not ask the kernel for huge pages under a large bank's vectors and graph (by default memgym asks,
    /// with `madvise`, for a bank over 16 MiB of vectors: its searches read them at random, and 2 MiB pages
    /// spare them most TLB misses). Nothing else changes.
    #[arg(long, env = "MEMGYM_BANKS_NO_HUGE_PAGES")]
    pub banks_no_huge_pages: bool,
}

/// `--replica`: the name rule of [`crate::episode::replica`].
fn replica_name(s: &str) -> Result<String, String> {
    crate::episode::replica::valid_replica_name(s).map(|()| s.to_string())
}
