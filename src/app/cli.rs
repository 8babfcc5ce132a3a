//! Command-line interface (clap derive). Every `serve` flag can also be set by a `MEMGYM_*` environment
//! variable. Raw flags here; validated settings in [`crate::app::config`].

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
#[allow(clippy::large_enum_variant)] // parsed once per process
pub enum Command {
    /// Run the gRPC server.
    Serve(ServeArgs),
    /// Convert LoCoMo to Parquet, or print dataset statistics.
    #[command(subcommand)]
    Dataset(DatasetCommand),
    /// Load-test a server: N concurrent episodes × a realistic tool mix, then score and close.
    Bench(BenchArgs),
    /// Offline evaluations: scripted agents as a reward sanity check (`eval --evaluator …`), or
    /// retrieval quality (`eval retrieval`).
    Eval(EvalArgs),
    /// Play episodes with an LLM policy behind any OpenAI-compatible endpoint: trajectories, a report of
    /// its reward, its format compliance and the GRPO signal of its groups (the book's "Rollouts").
    Rollout(RolloutArgs),
    /// Re-run a trajectories file's tool calls on fresh episodes: check every output byte for byte,
    /// re-score, or score the same final memories with another evaluator.
    Replay(ReplayArgs),
    /// Training-Free GRPO on memgym's own episodes: epochs of rollouts whose policy sees an experience
    /// bank's library, LearnFromGroup on each group, then an A/B on test questions of the final library
    /// against none and the first epoch's (the book's "Learning on episodes").
    Learn(LearnArgs),
    /// Ask a running server's gRPC health service whether it serves: prints the status, exits 0 only when
    /// SERVING (the container image's health check; a draining server is NOT_SERVING).
    Health(HealthArgs),
    /// Print a reference chapter of the book as Markdown, generated from this binary: the CLI (every
    /// command's help) or the gRPC API (the protos' comments).
    #[command(subcommand)]
    Reference(ReferenceCommand),
}

/// `memgym health`.
#[derive(Debug, Args)]
pub struct HealthArgs {
    /// The server's gRPC address.
    #[arg(long, env = "MEMGYM_HEALTH_ADDR", default_value = "127.0.0.1:50051")]
    pub addr: String,
    /// The service to ask about; empty: the whole server.
    #[arg(long, default_value = "")]
    pub service: String,
    /// Give up after this many milliseconds (connecting, then the answer).
    #[arg(long, default_value_t = 3000, value_parser = clap::value_parser!(u64).range(1..=600_000))]
    pub timeout_ms: u64,
    /// Connect with TLS, trusting this CA certificate (PEM).
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// The name the server's certificate must carry (with --tls-ca).
    #[arg(long, default_value = "localhost", requires = "tls_ca")]
    pub tls_domain: String,
}

/// `memgym reference`.
#[derive(Debug, Subcommand)]
pub enum ReferenceCommand {
    /// Every command and its flags, from clap's help.
    Cli,
    /// Every service, RPC, message, field and enum, from the protos' comments.
    Grpc,
}

/// The policy: its endpoint, how tools are given to it and how it samples (`rollout` and `learn`).
#[derive(Debug, Clone, Args)]
pub struct PolicyArgs {
    /// Base URL of the policy's OpenAI-compatible chat API (vLLM, SGLang, llama.cpp, scripts/llm-server.py), e.g. http://127.0.0.1:8080/v1.
    #[arg(long, env = "MEMGYM_POLICY_BASE_URL")]
    pub policy_base_url: String,
    /// The policy's model name.
    #[arg(long, env = "MEMGYM_POLICY_MODEL")]
    pub policy_model: String,
    /// File holding the policy endpoint's API key (default: the OPENAI_API_KEY environment variable; never logged or written).
    #[arg(long, env = "MEMGYM_POLICY_API_KEY_FILE")]
    pub policy_api_key_file: Option<PathBuf>,
    /// Timeout of one policy request attempt, in milliseconds.
    #[arg(long, env = "MEMGYM_POLICY_TIMEOUT_MS", default_value_t = 300_000)]
    pub policy_timeout_ms: u64,
    /// Retries of a policy request after the first attempt (429, 5xx, timeouts, connection errors), with backoff.
    #[arg(long, env = "MEMGYM_POLICY_MAX_RETRIES", default_value_t = 3)]
    pub policy_max_retries: u32,
    /// How tools are given: openai (the tools parameter and tool_calls) or hermes (a tools block in the system prompt, <tool_call> tags in the text).
    #[arg(long, default_value = "openai")]
    pub tool_format: String,
    /// Replies per rollout at most.
    #[arg(long, default_value_t = 4)]
    pub max_turns: u32,
    /// Tokens per reply.
    #[arg(long, default_value_t = 512)]
    pub max_tokens: u32,
    /// Sampling temperature.
    #[arg(long, default_value_t = 0.7)]
    pub temperature: f32,
    /// Nucleus sampling.
    #[arg(long, default_value_t = 1.0)]
    pub top_p: f32,
    /// Rollouts in flight (each has at most one policy request in flight).
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// The policy's system message from this file instead of the built-in one (as `memgym dataset verl
    /// --system-prompt-file` writes it into the verl rows).
    #[arg(long, value_name = "FILE")]
    pub system_prompt_file: Option<PathBuf>,
}

/// `memgym rollout`.
#[derive(Debug, Args)]
pub struct RolloutArgs {
    /// The policy.
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Output directory: trajectories.jsonl, rollouts.parquet, report.md, report.json. Rerunning the same command skips finished rollouts.
    #[arg(long)]
    pub out: PathBuf,
    /// Rollouts of each question (a GRPO group), each with its own sampling seed.
    #[arg(long, default_value_t = 4)]
    pub group: u32,
    /// Play against a running server over gRPC (host:port) instead of in-process.
    #[arg(long)]
    pub addr: Option<String>,
    /// Seed of the episodes and of the sampling seeds.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// These question ids (repeatable or comma-separated) instead of --split/--limit.
    #[arg(long = "questions", value_name = "ID", value_delimiter = ',')]
    pub questions: Vec<String>,
    /// Questions of this split: train, test or all.
    #[arg(long, default_value = "test")]
    pub split: String,
    /// At most this many questions, spread evenly over the split's categories (as memgym eval picks them).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Include category 5 (adversarial).
    #[arg(long)]
    pub include_adversarial: bool,
    /// Play nothing: write rollouts.parquet and the report from the trajectories already in --out (a run in
    /// progress, or one stopped early), under the settings and questions its run.json recorded.
    #[arg(long)]
    pub report_only: bool,
    /// An experience bank on the --addr server whose library goes into the policy's system prompt, as seed 000
    /// injects it: "{system}\n\n# Learned Experiences\n[G0]. …" (every experience in id order, read once when
    /// the run starts, without counting usage). run.json records the bank, its version and the text's hash.
    #[arg(long, value_name = "NAME", requires = "addr")]
    pub experience_bank: Option<String>,
    /// Also play a forked group of each question (LoGo-GRPO's local reroll): one prefix of K replies, then
    /// ForkEpisode into --fork-group copies of its memory, each finished with its own sampling seed. The
    /// forks go to forks.jsonl; the report compares their within-group reward spread with the fresh
    /// groups' on the same questions. 1 ≤ K < --max-turns.
    #[arg(long, value_name = "K")]
    pub fork_at: Option<u32>,
    /// Forks per question (default: --group).
    #[arg(long, value_name = "G", requires = "fork_at")]
    pub fork_group: Option<u32>,
    /// Environment settings for the in-process environment (and --evaluator, which every episode asks for).
    #[command(flatten)]
    pub env: EnvArgs,
}

/// `memgym learn`.
#[derive(Debug, Args)]
pub struct LearnArgs {
    /// The policy.
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// The memgym server (host:port) whose episodes are played and whose experience bank learns (its
    /// --llm-base-url endpoint is the learner).
    #[arg(long)]
    pub addr: String,
    /// The experience bank that learns (created empty when missing). Its library at the start is what the
    /// first epoch's policy sees.
    #[arg(long, value_name = "NAME")]
    pub bank: String,
    /// Output directory: epoch-N/ (each epoch's rollouts, learning steps and library), ab/ (each arm's
    /// rollouts), learn.json and report.md. Rerunning the same command resumes.
    #[arg(long)]
    pub out: PathBuf,
    /// Epochs over the train questions.
    #[arg(long, default_value_t = 2)]
    pub epochs: u32,
    /// Train questions, spread evenly over the categories (as memgym eval picks them).
    #[arg(long, default_value_t = 40)]
    pub train_limit: usize,
    /// Test questions of the A/B (0: no A/B).
    #[arg(long, default_value_t = 100)]
    pub test_limit: usize,
    /// Rollouts per train question (the group LearnFromGroup compares).
    #[arg(long, default_value_t = 4)]
    pub group: u32,
    /// Rollouts per test question in each arm of the A/B.
    #[arg(long, default_value_t = 1)]
    pub ab_group: u32,
    /// Groups per LearnFromGroup call (one learning step, consolidated once).
    #[arg(long, default_value_t = 8)]
    pub learn_batch: usize,
    /// Operations the learner may propose per group.
    #[arg(long, default_value_t = 3)]
    pub max_operations: u32,
    /// Seed of the episodes and sampling seeds (epoch N plays with seed + N; the A/B's arms all with seed).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Include category 5 (adversarial).
    #[arg(long)]
    pub include_adversarial: bool,
    /// Directory with conversations/memories/questions.parquet; default: the copy embedded in the binary
    /// (the server's: questions are picked here, played there).
    #[arg(long, env = "MEMGYM_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Gold answers, as the server was started with: original, corrected or exclude-flagged. They decide which
    /// questions are picked and the ground truth the learner is shown.
    #[arg(long, env = "MEMGYM_GOLD", default_value = "original")]
    pub gold: String,
    /// Evaluator every episode asks for: answer-phrase, answer-recall, llm-f1 or llm-judge.
    #[arg(long, env = "MEMGYM_EVALUATOR", default_value = "answer-phrase")]
    pub evaluator: String,
}

/// `memgym replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// A trajectories.jsonl written by memgym rollout.
    pub trajectories: PathBuf,
    /// Replay against a running server over gRPC (host:port) instead of in-process.
    #[arg(long)]
    pub addr: Option<String>,
    /// Episodes replayed at once.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Print one JSON object per rollout instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// Environment settings for the in-process environment. `--evaluator X` given on the command line (or
    /// by MEMGYM_EVALUATOR) also scores the same final memories with X, side by side, listing every sign flip.
    /// Without --reward-formula, the in-process environment scores with the recording's formula.
    #[command(flatten)]
    pub env: EnvArgs,
}

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

/// `memgym eval [--evaluator NAME …]` runs the scripted agents; `memgym eval retrieval …` the retrieval
/// evaluation. Agent flags and a subcommand do not mix.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct EvalArgs {
    /// Another evaluation instead of the scripted agents.
    #[command(subcommand)]
    pub command: Option<EvalCommand>,
    /// The scripted agents' flags (used when no subcommand is given).
    #[command(flatten)]
    pub agents: AgentEvalArgs,
}

/// `memgym eval --evaluator …`: the scripted agents (no-op, oracle, destroyer, random) over a split; see
/// [`crate::harness::eval::agents`]. The environment is built from the same flags as `serve`'s; its default
/// evaluator flag is renamed `--default-evaluator` (hidden) because here `--evaluator` lists the
/// evaluators to compare.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("evaluator", |a| a.long("default-evaluator").hide(true)))]
pub struct AgentEvalArgs {
    /// Evaluator scoring every episode: answer-phrase, answer-recall, llm-f1 or llm-judge (repeatable or
    /// comma-separated; the first is the reference for sign agreement).
    #[arg(id = "evaluators", long = "evaluator", value_name = "NAME", value_delimiter = ',', default_value = "answer-phrase")]
    pub evaluators: Vec<String>,
    /// Agents to run: no-op, oracle, destroyer, random (repeatable or comma-separated); default all.
    #[arg(long = "agent", value_name = "NAME", value_delimiter = ',')]
    pub agents: Vec<String>,
    /// Questions of this split: train, test or all.
    #[arg(long, default_value = "test")]
    pub split: String,
    /// At most this many questions, spread evenly over the split (every k-th); default all.
    #[arg(long)]
    pub limit: Option<usize>,
    /// Edits of the random agent per episode.
    #[arg(long, default_value_t = 5)]
    pub random_steps: usize,
    /// Seed of the episodes and of the random agent.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Include category 5 (adversarial).
    #[arg(long)]
    pub include_adversarial: bool,
    /// Print one JSON object per table row instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Print one JSON object per episode row (agent × question, every evaluator's p_old, p_new and
    /// reward) instead of the table.
    #[arg(long, conflicts_with = "json")]
    pub episodes: bool,
    /// Also measure the reader's noise floor: every question's M₀ top-k scored in rank order and reversed,
    /// by every evaluator given (one more LLM request per question for an LLM evaluator), printed after
    /// the table.
    #[arg(long)]
    pub noise_control: bool,
    /// Also write the episode rows (as `--episodes` prints them) to this file, beside the table or
    /// `--json`: one run with an LLM evaluator gives both.
    #[arg(long, value_name = "FILE")]
    pub episodes_out: Option<std::path::PathBuf>,
    /// Environment settings, as for `serve`.
    #[command(flatten)]
    pub env: EnvArgs,
}

/// `memgym eval <subcommand>`.
#[derive(Debug, Subcommand)]
pub enum EvalCommand {
    /// Evidence recall@1/5/10, MRR and embedding throughput per retriever and category on LoCoMo.
    Retrieval {
        /// Embedders to evaluate (repeatable); default: every one that is available here.
        #[arg(long = "with")]
        with: Vec<String>,
        /// Only this split (train or test); default: all questions.
        #[arg(long)]
        split: Option<String>,
        /// Print JSON rows instead of the table.
        #[arg(long)]
        json: bool,
        /// Embedder options.
        #[command(flatten)]
        embed: EmbedArgs,
    },
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
    /// half of a rise the episode's writing states, minus a fact it lost in full, minus half of a fact pushed out
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
    pub fn mcp_options(&self) -> crate::api::mcp::McpOptions {
        let hosts: Vec<String> = self.http_allowed_hosts.split(',').map(|h| h.trim().to_string()).filter(|h| !h.is_empty()).collect();
        let allowed_hosts = if hosts.iter().any(|h| h == "*") { Vec::new() } else { hosts };
        crate::api::mcp::McpOptions { allowed_hosts, max_sessions: self.mcp_max_sessions as usize }
    }

    /// The ORS endpoint's settings.
    pub fn ors_options(&self) -> crate::api::ors::OrsOptions {
        crate::api::ors::OrsOptions { allowed_hosts: self.mcp_options().allowed_hosts, max_sessions: self.ors_max_sessions as usize }
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
    /// HNSW search beam of the banks (raised to 2·top_k when larger).
    #[arg(long, env = "MEMGYM_BANKS_HNSW_EF_SEARCH", default_value_t = 64)]
    pub banks_hnsw_ef_search: usize,
}

/// `memgym dataset ...`.
#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once per process
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
    /// Embed M₀ once and store the vectors as vectors-<embedder>.parquet, keyed by the embedder's identity.
    Embed {
        /// Parquet directory to read (default: the embedded copy).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Output directory.
        #[arg(long, default_value = "data/locomo")]
        out: PathBuf,
        /// Embedder options.
        #[command(flatten)]
        embed: EmbedArgs,
    },
    /// Write verl's RL dataset (one row per question: prompt, data_source, agent_name, reward_model,
    /// extra_info with tools_kwargs) for examples/verl.
    Verl {
        /// train, test or all.
        #[arg(long, default_value = "train")]
        split: String,
        /// Output Parquet file.
        #[arg(long)]
        out: PathBuf,
        /// Include category-5 (adversarial) questions (their rows' create_kwargs say include_adversarial: true).
        #[arg(long)]
        include_adversarial: bool,
        /// Gold answers: exclude-flagged (default: a training set without the LoCoMo audit's
        /// score-corrupting questions), corrected or original. A server that serves these rows should run
        /// with the same --gold (corrected: so that it scores the corrected answers).
        #[arg(long, default_value = "exclude-flagged")]
        gold: String,
        /// The rows' agent_name: the verl agent loop that runs them (memgym_agent: the memgym_verl loop,
        /// registered through verl's agent_loop_config_path; tool_agent: verl's own ToolAgentLoop).
        #[arg(long, value_name = "NAME", default_value = crate::dataset::verl::DEFAULT_AGENT_NAME, value_parser = agent_name)]
        agent_name: String,
        /// Parquet directory to read (default: the embedded copy).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// The rows' system message from this file instead of the built-in one (give memgym rollout the same
        /// file to measure the prompt the trainer will show).
        #[arg(long, value_name = "FILE")]
        system_prompt_file: Option<PathBuf>,
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

/// An agent_name: non-empty, no whitespace (verl looks it up in its agent loop registry).
fn agent_name(s: &str) -> Result<String, String> {
    if s.is_empty() || s.chars().any(char::is_whitespace) {
        return Err(format!("must be a non-empty name without spaces, got {:?}", s.chars().take(40).collect::<String>()));
    }
    Ok(s.to_string())
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
    /// Print one JSON object as the last line.
    #[arg(long)]
    pub json: bool,
    /// Environment settings of the in-process server (the embedder; hash by default).
    #[command(flatten)]
    pub env: EnvArgs,
}

/// `memgym eval FLAGS…`, parsed (for tests).
#[cfg(test)]
pub(crate) fn eval_args(flags: &[&str]) -> EvalArgs {
    let Command::Eval(a) = Cli::try_parse_from(["memgym", "eval"].iter().chain(flags)).unwrap().command else {
        panic!("`memgym eval` parses as Command::Eval")
    };
    a
}

/// `--replica`: the name rule of [`crate::episode::replica`].
fn replica_name(s: &str) -> Result<String, String> {
    crate::episode::replica::valid_replica_name(s).map(|()| s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verl_args(flags: &[&str]) -> (String, bool) {
        let argv = ["memgym", "dataset", "verl", "--out", "x.parquet"].iter().chain(flags);
        let Command::Dataset(DatasetCommand::Verl { agent_name, include_adversarial, .. }) = Cli::try_parse_from(argv).unwrap().command
        else {
            panic!("`memgym dataset verl` parses as DatasetCommand::Verl")
        };
        (agent_name, include_adversarial)
    }

    #[test]
    fn dataset_verl_writes_memgym_agent_unless_agent_name_says_otherwise() {
        assert_eq!(verl_args(&[]), ("memgym_agent".to_string(), false));
        assert_eq!(verl_args(&["--agent-name", "tool_agent", "--include-adversarial"]), ("tool_agent".to_string(), true));
        for bad in ["", "tool agent"] {
            let argv = ["memgym", "dataset", "verl", "--out", "x.parquet", "--agent-name", bad];
            assert!(Cli::try_parse_from(argv).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn http_allowed_hosts_are_a_list_and_a_star_allows_any_host() {
        let hosts = |flags: &[&str]| {
            let Command::Serve(a) = Cli::try_parse_from(["memgym", "serve"].iter().chain(flags)).unwrap().command else {
                panic!("`memgym serve` parses as Command::Serve")
            };
            a.mcp_options().allowed_hosts
        };
        assert_eq!(hosts(&[]), ["localhost", "127.0.0.1", "::1"]);
        assert_eq!(hosts(&["--http-allowed-hosts", " a.example , b:80 ,"]), ["a.example", "b:80"]);
        assert_eq!(hosts(&["--mcp-allowed-hosts", "c"]), ["c"], "the earlier name still works");
        assert!(hosts(&["--http-allowed-hosts", "a,*"]).is_empty(), "empty: any Host");
    }

    #[test]
    fn serve_remembers_closed_ids_for_an_hour_and_at_most_100k() {
        let serve = |flags: &[&str]| {
            let Command::Serve(a) = Cli::try_parse_from(["memgym", "serve"].iter().chain(flags)).unwrap().command else {
                panic!("`memgym serve` parses as Command::Serve")
            };
            (a.env.forget_closed_after_secs, a.env.max_closed_ids)
        };
        assert_eq!(serve(&[]), (3_600, 100_000));
        assert_eq!(serve(&["--forget-closed-after-secs", "60", "--max-closed-ids", "0"]), (60, 0));
    }

    #[test]
    fn eval_parses_agent_flags_and_the_retrieval_subcommand() {
        let a = eval_args(&[]);
        assert!(a.command.is_none());
        assert_eq!(a.agents.evaluators, ["answer-phrase"]);
        assert_eq!((a.agents.split.as_str(), a.agents.limit, a.agents.random_steps, a.agents.seed), ("test", None, 5, 0));
        assert!(!a.agents.include_adversarial && !a.agents.json && !a.agents.episodes && a.agents.agents.is_empty());
        assert!(eval_args(&["--episodes"]).agents.episodes);
        assert!(Cli::try_parse_from(["memgym", "eval", "--episodes", "--json"]).is_err());

        let a = eval_args(&[
            "--evaluator",
            "answer-recall,llm-f1",
            "--evaluator",
            "llm-judge",
            "--split",
            "all",
            "--limit",
            "40",
            "--random-steps",
            "3",
            "--seed",
            "7",
            "--include-adversarial",
            "--json",
            "--agent",
            "oracle,random",
            "--llm-base-url",
            "http://127.0.0.1:8000/v1",
            "--llm-model",
            "m",
            "--embedder",
            "hash",
        ]);
        assert!(a.command.is_none());
        let g = &a.agents;
        assert_eq!(g.evaluators, ["answer-recall", "llm-f1", "llm-judge"]);
        assert_eq!(g.agents, ["oracle", "random"]);
        assert_eq!((g.split.as_str(), g.limit, g.random_steps, g.seed, g.include_adversarial, g.json), ("all", Some(40), 3, 7, true, true));
        assert_eq!((g.env.llm.llm_base_url.as_deref(), g.env.llm.llm_model.as_deref()), (Some("http://127.0.0.1:8000/v1"), Some("m")));
        assert_eq!(g.env.embed.embedder, "hash");
        // serve's default-evaluator flag is still there, under another name.
        assert_eq!(eval_args(&["--default-evaluator", "llm-f1"]).agents.env.llm.evaluator, "llm-f1");

        let a = eval_args(&["retrieval", "--with", "hash", "--split", "test", "--json"]);
        match a.command {
            Some(EvalCommand::Retrieval { with, split, json, .. }) => {
                assert_eq!((with, split, json), (vec!["hash".to_string()], Some("test".to_string()), true));
            }
            None => panic!("retrieval not parsed"),
        }
        // Agent flags and a subcommand do not mix.
        assert!(Cli::try_parse_from(["memgym", "eval", "--limit", "3", "retrieval"]).is_err());
    }
}
