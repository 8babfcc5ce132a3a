//! The `memgym` binary: parses the command line and dispatches; see [`memgym::cli`].

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use memgym::cli::{Cli, Command, DatasetCommand};
use memgym::dataset::Dataset;
use memgym::{api, config, server, telemetry};

fn main() -> ExitCode {
    let cli = Cli::parse();
    telemetry::init();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve(a) => {
            let env = config::build_environment(&a.env)?;
            let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            rt.block_on(async move {
                let listener =
                    tokio::net::TcpListener::bind(a.addr).await.map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", a.addr))?;
                tracing::info!(addr = %listener.local_addr()?, conversations = env.dataset().conversations.len(),
                    embedder = %env.embedder().identity(), "memgym serving");
                server::serve(listener, env, server::shutdown_signal(), Duration::from_secs(a.drain_secs)).await
            })
        }
        Command::Dataset(DatasetCommand::Convert { locomo, out }) => {
            let ds = Dataset::from_locomo_json(&locomo)?;
            ds.write_parquet(&out)?;
            println!("{}", ds.stats());
            println!("wrote {}", out.display());
            Ok(())
        }
        Command::Dataset(DatasetCommand::Stats { data_dir, locomo }) => {
            let ds = match locomo {
                Some(p) => Dataset::from_locomo_json(&p)?,
                None => config::load_dataset(data_dir.as_deref())?,
            };
            println!("{}", ds.stats());
            Ok(())
        }
        Command::Bench(a) => {
            let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            rt.block_on(api::bench::run(a))
        }
    }
}
