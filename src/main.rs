//! The `memgym` binary: parses the command line and dispatches; see [`memgym::app::cli`].

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches};
use memgym::app::cli::{Cli, Command, DatasetCommand, EvalArgs, EvalCommand};
use memgym::app::{config, server, telemetry};
use memgym::dataset::{Dataset, Split};
use memgym::embed::select::EmbedderKind;
use memgym::harness::{bench, eval, learn, rollout};

/// jemalloc instead of glibc malloc: the gRPC path allocates many small, short-lived buffers per call,
/// and glibc spent a quarter of `memgym bench`'s CPU in malloc/free. jemalloc's background threads
/// return freed pages to the OS within about a second (`dirty_decay_ms`), so the server's RSS falls back
/// after episodes close even when it sits idle — mimalloc, tried first, was ~7% faster per call but kept
/// hundreds of MiB after 8,192 episodes closed (the book's "Performance").
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's settings, read at start-up (the `_rjem_` prefix is tikv-jemalloc-sys's symbol prefix).
#[allow(non_upper_case_globals)]
#[export_name = "_rjem_malloc_conf"]
pub static malloc_conf: &[u8] = b"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0\0";

fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // `memgym replay --evaluator X` re-scores with X only when X is given, not by the flag's default.
    let given = |flag: &str| {
        matches
            .subcommand_matches("replay")
            .and_then(|m| m.value_source(flag))
            .is_some_and(|s| matches!(s, ValueSource::CommandLine | ValueSource::EnvVariable))
    };
    let replay = ReplayFlags { evaluator: given("evaluator"), formula: given("reward_formula") };
    telemetry::init();
    match run(cli, replay) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Which of `memgym replay`'s environment flags were given (on the command line or by their variable), not
/// taken by default.
#[derive(Debug, Clone, Copy)]
struct ReplayFlags {
    /// `--evaluator X`: re-score with X too.
    evaluator: bool,
    /// `--reward-formula`: else the in-process environment takes the recording's.
    formula: bool,
}

fn run(cli: Cli, replay_flags: ReplayFlags) -> anyhow::Result<()> {
    match cli.command {
        Command::Health(a) => {
            let ca =
                a.tls_ca.as_ref().map(|p| std::fs::read(p).map_err(|e| anyhow::anyhow!("--tls-ca {}: {e}", p.display()))).transpose()?;
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            let timeout = Duration::from_millis(a.timeout_ms);
            let status =
                rt.block_on(server::health::check(&a.addr, &a.service, timeout, ca.as_deref().map(|c| (c, a.tls_domain.as_str()))))?;
            println!("{}", status.as_str_name());
            if status != tonic_health::pb::health_check_response::ServingStatus::Serving {
                anyhow::bail!("{} is {}", a.addr, status.as_str_name());
            }
            Ok(())
        }
        Command::Reference(what) => {
            let md = match what {
                memgym::app::cli::ReferenceCommand::Cli => memgym::app::reference_chapters::cli_markdown(),
                memgym::app::cli::ReferenceCommand::Grpc => memgym::app::reference_chapters::grpc_markdown(),
            };
            // A closed pipe (`| head`) ends the output quietly; any other write error is reported.
            use std::io::Write as _;
            match std::io::stdout().write_all(md.as_bytes()) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
                Ok(()) | Err(_) => Ok(()),
            }
        }
        Command::Rollout(a) => {
            let gold = memgym::dataset::GoldMode::parse(&a.env.gold).map_err(anyhow::Error::msg).context("--gold")?;
            let ds = Dataset::load_with_gold(a.env.data_dir.as_deref(), gold)?;
            let (mut plan, mut questions) = rollout::plan(&a, &ds)?;
            if a.report_only {
                (plan, questions) = rollout::recorded(plan, questions, &a.out, &ds)?;
            }
            let local = if a.addr.is_none() { Some(config::build_environment(&a.env)?) } else { None };
            let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            rt.block_on(async move {
                let env = rollout::env::Env::open(a.addr.as_deref(), local).await?;
                if let (Some(bank), Some(addr), false) = (&a.experience_bank, &a.addr, a.report_only) {
                    rollout::with_experiences(&mut plan, addr, bank).await?;
                }
                if !a.report_only {
                    rollout::play_all(&plan, &questions, &env, &a.out, a.policy.concurrency).await?;
                }
                let r = rollout::finish(&plan, &questions, &env, &a.out).await?;
                print!("{}", rollout::report::markdown(&r));
                println!("\nwrote {}", a.out.display());
                if r.failed > 0 && !a.report_only {
                    anyhow::bail!("{} of {} rollouts failed (see the report); rerun the same command to retry them", r.failed, r.rollouts);
                }
                Ok(())
            })
        }
        Command::Learn(a) => {
            let gold = memgym::dataset::GoldMode::parse(&a.gold).map_err(anyhow::Error::msg).context("--gold")?;
            let ds = Dataset::load_with_gold(a.data_dir.as_deref(), gold)?;
            let (train, test) = learn::questions(&a, &ds)?;
            let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            rt.block_on(async move {
                let summary = learn::run(&a, &train, &test).await?;
                print!("{}", learn::ab::learn_markdown(&summary));
                println!("\nwrote {}", a.out.display());
                let failed: usize = summary.epochs.iter().map(|e| e.rollouts.failed).sum::<usize>()
                    + summary.ab.as_ref().map_or(0, |ab| ab.arms.iter().map(|a| a.failed).sum());
                if failed > 0 {
                    anyhow::bail!("{failed} rollouts failed (see the reports); rerun the same command to retry them");
                }
                Ok(())
            })
        }
        Command::Replay(mut a) => {
            let other = if replay_flags.evaluator {
                Some(memgym::reward::Evaluator::parse(&a.env.llm.evaluator).map_err(anyhow::Error::msg).context("--evaluator")?)
            } else {
                None
            };
            let ts = rollout::record::read(&a.trajectories)?;
            let choice = rollout::replay::recorded_tool_choice(&a.trajectories)?;
            if a.concurrency == 0 {
                anyhow::bail!("--concurrency must be at least 1");
            }
            if !ts.iter().any(|t| t.status == rollout::record::Status::Scored) {
                anyhow::bail!("{} holds no scored rollout: nothing to replay", a.trajectories.display());
            }
            // The recording's reward formula, unless one is given: a run recorded under another default
            // replays as it was scored.
            if !replay_flags.formula {
                if let Some(recorded) = ts.iter().find_map(|t| t.score.as_ref()).map(|s| s.reward_formula.clone()) {
                    a.env.reward_formula = recorded;
                }
            }
            // The recording's reward formula, unless one is given: a run recorded under another default
            // replays as it was scored.
            if !replay_flags.formula {
                if let Some(recorded) = ts.iter().find_map(|t| t.score.as_ref()).map(|s| s.reward_formula.clone()) {
                    a.env.reward_formula = recorded;
                }
            }
            let local = if a.addr.is_none() { Some(config::build_environment(&a.env)?) } else { None };
            let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            rt.block_on(async move {
                let env = rollout::env::Env::open(a.addr.as_deref(), local).await?;
                use futures_util::stream::StreamExt;
                let scored: Vec<&rollout::record::Trajectory> = ts.iter().filter(|t| t.status == rollout::record::Status::Scored).collect();
                let rows: Vec<rollout::replay::Replayed> =
                    futures_util::stream::iter(scored.iter().map(|t| rollout::replay::replay(&env, t, other, choice)))
                        .buffered(a.concurrency.max(1))
                        .collect()
                        .await;
                let recorded = ts.iter().find_map(|t| t.score.as_ref().map(|s| s.evaluator.clone())).unwrap_or_default();
                if a.json {
                    for r in &rows {
                        println!("{}", serde_json::to_string(r)?);
                    }
                } else {
                    print!("{}", rollout::replay::summary(&rows, other, &recorded, choice));
                }
                let diverged = rows.iter().filter(|r| !r.divergences.is_empty()).count();
                if diverged > 0 {
                    anyhow::bail!("{diverged} of {} rollouts diverged from {}", rows.len(), a.trajectories.display());
                }
                Ok(())
            })
        }
        Command::Serve(a) => {
            let env = config::build_replica_environment(&a.env, a.replica.clone())?;
            let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            rt.block_on(async move {
                // Installed before the address is logged: a SIGTERM from then on is a graceful shutdown.
                let shutdown = server::shutdown_signal();
                let banks = config::build_banks(&a.banks, &env).await?;
                let listener =
                    tokio::net::TcpListener::bind(a.addr).await.map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", a.addr))?;
                tracing::info!(addr = %listener.local_addr()?, conversations = env.dataset().conversations.len(),
                    embedder = %env.embedder().identity(), banks = %banks.as_ref().map_or("off".to_string(), |b| b.location()), "memgym serving");
                let openenv = a.openenv_addr.map(|addr| (addr, memgym::api::faces::openenv::OpenEnvOptions::new(a.openenv_max_sessions as usize, a.mcp_options())));
                let mut faces = server::Faces::bind(openenv, a.mcp_addr.map(|addr| (addr, a.mcp_options()))).await?;
                if let (Some(cert), Some(key)) = (&a.tls_cert, &a.tls_key) {
                    faces.tls = Some(server::TlsFiles::load(cert, key)?);
                    tracing::info!("every face serves TLS only");
                }
                faces.second_signal = true;
                faces.grpc_max_streams = Some(a.grpc_max_streams);
                if let Some(path) = &a.api_key_file {
                    faces.keys = Some(memgym::api::layers::auth::Keys::load(path).map_err(anyhow::Error::msg)?);
                    tracing::info!("API keys required on every face");
                }
                if let Some(addr) = a.nemo_gym_addr {
                    let options = memgym::api::faces::nemo_gym::NemoGymOptions { allowed_hosts: a.mcp_options().allowed_hosts };
                    let addr = faces.bind_nemo_gym(addr, options).await?;
                    tracing::info!(%addr, "nemo-gym listening (resources server: /seed_session, /<tool>, /verify)");
                }
                if let Some(addr) = a.metrics_addr {
                    let addr = faces.bind_metrics(addr).await?;
                    tracing::info!(%addr, "metrics listening (path /metrics)");
                }
                if let Some(addr) = a.ors_addr {
                    let addr = faces.bind_ors(addr, a.ors_options()).await?;
                    tracing::info!(%addr, max_sessions = a.ors_max_sessions, "ors listening");
                }
                let server::FaceAddrs { openenv: openenv_addr, mcp: mcp_addr, .. } = faces.addrs()?;
                if let Some(addr) = openenv_addr {
                    tracing::info!(%addr, max_sessions = a.openenv_max_sessions, "openenv listening");
                }
                if let Some(addr) = mcp_addr {
                    tracing::info!(%addr, max_sessions = a.mcp_max_sessions, "mcp listening (path /mcp)");
                }
                server::serve_all(listener, env, banks, faces, shutdown, Duration::from_secs(a.drain_secs)).await
            })
        }
        Command::Dataset(DatasetCommand::Convert { locomo, out }) => {
            let ds = Dataset::from_locomo_json(&locomo)?;
            ds.write_parquet(&out)?;
            println!("{}", ds.stats());
            println!("wrote {}", out.display());
            Ok(())
        }
        Command::Dataset(DatasetCommand::Embed { data_dir, out, embed }) => {
            let path = config::embed_dataset(data_dir.as_deref(), &out, &embed)?;
            println!("wrote {}", path.display());
            Ok(())
        }
        Command::Eval(EvalArgs { command: None, agents }) => {
            // Flags are checked (LLM endpoint included) before M₀ is embedded.
            let (options, env_args) = eval::agents::prepare(&agents)?;
            let env = config::build_environment(&env_args)?;
            let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            let rows = rt.block_on(eval::agents::evaluate(&env, &options))?;
            let summary = eval::agents::summarize(&rows);
            if let Some(path) = &agents.episodes_out {
                let mut out = String::new();
                for r in &rows {
                    out.push_str(&serde_json::to_string(r)?);
                    out.push('\n');
                }
                std::fs::write(path, out).with_context(|| format!("cannot write {}", path.display()))?;
            }
            if agents.episodes {
                for r in &rows {
                    println!("{}", serde_json::to_string(r)?);
                }
            } else if agents.json {
                for r in &summary {
                    println!("{}", serde_json::to_string(r)?);
                }
            } else {
                print!("{}", eval::agents::table(&summary));
                println!("\n{}", eval::agents::gold_table(&rows).trim_end());
                if agents.noise_control {
                    let qs = eval::agents::select_questions(env.dataset(), &options);
                    for &e in &options.evaluators {
                        let noise = rt.block_on(eval::agents::noise::reader_noise(&env, e, &qs))?;
                        println!("\n{}", eval::agents::noise::noise_line(e, &noise));
                    }
                }
                print!("\n{}", eval::agents::goals_text(&rows, &summary));
            }
            Ok(())
        }
        Command::Eval(EvalArgs { command: Some(EvalCommand::Retrieval { with, split, json, embed }), .. }) => {
            let ds = Dataset::load(None)?;
            let split = split.map(|s| s.parse::<Split>()).transpose().map_err(|e| anyhow::anyhow!("--split: {e}"))?;
            let kinds: Vec<EmbedderKind> = if with.is_empty() {
                EmbedderKind::ALL.to_vec()
            } else {
                with.iter().map(|w| w.parse()).collect::<Result<_, String>>().map_err(anyhow::Error::msg)?
            };
            let mut services = Vec::new();
            for k in kinds {
                match config::embed_service(k, &embed) {
                    Ok(s) => services.push(s),
                    // Without an explicit list, embedders that are not set up here are skipped, and said so.
                    Err(e) if with.is_empty() => eprintln!("skipping {}: {e:#}", k.as_str()),
                    Err(e) => return Err(e),
                }
            }
            let rows = eval::retrieval::evaluate(&ds, split, &services)?;
            if json {
                for r in &rows {
                    println!("{}", serde_json::to_string(r)?);
                }
            } else {
                print!("{}", eval::retrieval::table(&rows));
            }
            Ok(())
        }
        Command::Dataset(DatasetCommand::Verl { split, out, include_adversarial, agent_name, data_dir, gold, system_prompt_file }) => {
            let system_prompt = match &system_prompt_file {
                Some(p) => memgym::dataset::verl::read_system_prompt(p).map_err(anyhow::Error::msg)?,
                None => memgym::dataset::verl::SYSTEM_PROMPT.to_string(),
            };
            let gold = memgym::dataset::GoldMode::parse(&gold).map_err(anyhow::Error::msg).context("--gold")?;
            let ds = Dataset::load_with_gold(data_dir.as_deref(), gold)?;
            let split = match split.as_str() {
                "all" => None,
                s => Some(s.parse::<Split>().map_err(|e| anyhow::anyhow!("--split: {e} (or all)"))?),
            };
            let opts = memgym::dataset::verl::VerlOptions { split, include_adversarial, agent_name, system_prompt };
            let n = memgym::dataset::verl::write(&ds, &opts, &memgym::tools::TOOL_NAMES, &out)?;
            println!("wrote {} ({n} rows)", out.display());
            Ok(())
        }
        Command::Dataset(DatasetCommand::Stats { data_dir, locomo }) => {
            let ds = match locomo {
                Some(p) => Dataset::from_locomo_json(&p)?,
                None => Dataset::load(data_dir.as_deref())?,
            };
            println!("{}", ds.stats());
            Ok(())
        }
        Command::Bench(mut a) => {
            let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            match a.mode.take() {
                Some(memgym::app::cli::BenchMode::Banks(b)) => rt.block_on(bench::banks::run(b)),
                Some(memgym::app::cli::BenchMode::Protocols(p)) => rt.block_on(bench::protocols::run(p)),
                Some(memgym::app::cli::BenchMode::Rollout(r)) => rt.block_on(bench::rollout::run(r)),
                None => rt.block_on(bench::run(a)),
            }
        }
    }
}
