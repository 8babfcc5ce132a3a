//! The flags of `memgym rollout`, `memgym learn` and `memgym replay`: the policy's endpoint, the runs, the
//! Training-Free GRPO epochs and the replay of a recorded run.

use std::path::PathBuf;

use clap::Args;

use super::serve::EnvArgs;
use crate::harness::rollout::policy::ToolChoice;

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
    /// The tool_choice sent with the tools; recorded in run.json. required needs --tool-format openai (hermes
    /// sends no tools parameter).
    #[arg(long, value_enum, default_value_t = ToolChoice::Auto)]
    pub tool_choice: ToolChoice,
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
    /// An experience bank on the --addr server whose library goes into the policy's system prompt, as the semantic-memory design
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
