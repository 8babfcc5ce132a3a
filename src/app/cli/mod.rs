//! Command-line interface (clap derive). Every `serve` flag can also be set by a `MEMGYM_*` environment
//! variable. Raw flags here; validated settings in [`crate::app::config`]. The commands and the small ones'
//! flags are in this file; each large command group has its own: `serve` (and the environment flags every
//! command that builds an environment shares), `rollout` (rollout, learn, replay), `eval` and `bench`.

mod bench;
mod eval;
mod rollout;
mod serve;

pub use bench::{BankBenchArgs, BenchArgs, BenchMode, ProtocolBenchArgs, RolloutBenchArgs};
pub use eval::{AgentEvalArgs, EvalArgs, EvalCommand};
pub use rollout::{LearnArgs, PolicyArgs, ReplayArgs, RolloutArgs};
pub use serve::{BankIndexArgs, BanksArgs, EmbedArgs, EnvArgs, LlmArgs, ServeArgs};

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

/// `memgym eval FLAGS…`, parsed (for tests).
#[cfg(test)]
pub(crate) fn eval_args(flags: &[&str]) -> EvalArgs {
    let Command::Eval(a) = Cli::try_parse_from(["memgym", "eval"].iter().chain(flags)).unwrap().command else {
        panic!("`memgym eval` parses as Command::Eval")
    };
    a
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
