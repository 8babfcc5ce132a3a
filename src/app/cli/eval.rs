//! `memgym eval`'s flags: the scripted agents and their evaluators, and the retrieval evaluation.

use clap::{Args, Subcommand};

use super::serve::{EmbedArgs, EnvArgs};

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
