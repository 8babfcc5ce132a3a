//! The server under load and the connections to it, for `memgym bench`.
//!
//! The bench drives an in-process server on `127.0.0.1:0`, a `memgym serve` child it starts with this
//! command line's environment flags (so the child's RSS and CPU are the server's alone), or an external
//! server. This module starts and stops each, connects (waiting for a spawned child to listen), and
//! reads the questions the episodes draw from.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use tonic::transport::{Channel, Endpoint};

use super::probe::Probe;
use crate::api::pb;
use crate::api::pb::dataset_client::DatasetClient;
use crate::app::cli::BenchArgs;
use crate::app::{config, server};
use crate::episode::Environment;

/// The server under load.
pub(super) enum Target {
    InProcess { running: server::Running, env: Arc<Environment> },
    Spawned { child: Child, log: PathBuf },
    External,
}

impl Target {
    pub(super) async fn start(a: &BenchArgs) -> anyhow::Result<(Target, SocketAddr)> {
        if let Some(addr) = a.addr {
            return Ok((Target::External, addr));
        }
        if a.spawn_server {
            let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
            let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
            let log = std::env::temp_dir().join(format!("memgym-bench-server-{}.log", std::process::id()));
            let child = std::process::Command::new(std::env::current_exe()?)
                .arg("serve")
                .arg("--addr")
                .arg(addr.to_string())
                // The bench drives episodes; the in-process server it compares with has no banks either.
                .arg("--no-banks")
                .args(forwarded_serve_args(std::env::args_os()))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log)?)
                .spawn()
                .context("starting `memgym serve`")?;
            return Ok((Target::Spawned { child, log }, addr));
        }
        let env = config::build_environment(&a.env)?;
        let running = server::spawn(env.clone(), "127.0.0.1:0".parse()?).await?;
        let addr = running.addr;
        Ok((Target::InProcess { running, env }, addr))
    }

    pub(super) fn probe(&self) -> Option<Probe> {
        match self {
            Target::InProcess { .. } => Some(Probe::this_process()),
            Target::Spawned { child, .. } => Some(Probe::pid(child.id())),
            Target::External => None,
        }
    }

    pub(super) fn env(&self) -> Option<&Arc<Environment>> {
        match self {
            Target::InProcess { env, .. } => Some(env),
            Target::Spawned { .. } | Target::External => None,
        }
    }

    /// Fails with the server's log if a spawned server died.
    pub(super) fn check_alive(&mut self) -> anyhow::Result<()> {
        if let Target::Spawned { child, log } = self {
            if let Some(status) = child.try_wait()? {
                let text = std::fs::read_to_string(&*log).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(20).collect::<Vec<_>>().into_iter().rev().collect();
                anyhow::bail!("`memgym serve` exited ({status}); its log ({}):\n{}", log.display(), tail.join("\n"));
            }
        }
        Ok(())
    }

    pub(super) async fn stop(self) -> anyhow::Result<()> {
        match self {
            Target::InProcess { running, .. } => running.stop().await,
            Target::Spawned { mut child, log } => {
                child.kill()?;
                child.wait()?;
                let _ = std::fs::remove_file(log);
                Ok(())
            }
            Target::External => Ok(()),
        }
    }
}

/// The `memgym bench` arguments that are not environment flags, with whether each takes a value.
const BENCH_ONLY: [(&str, bool); 12] = [
    ("--connections", true),
    ("--episodes", true),
    ("--calls", true),
    ("--group", true),
    ("--seed", true),
    ("--addr", true),
    ("--in-flight", true),
    ("--duration", true),
    ("--embedder-baseline-secs", true),
    ("--grpc-ceiling-secs", true),
    ("--json", false),
    ("--spawn-server", false),
];

/// The environment flags of this `memgym bench` command line, to start `memgym serve` with the same
/// settings (clap has already validated them).
fn forwarded_serve_args(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let args: Vec<OsString> = args.into_iter().collect();
    let start = args.iter().position(|a| a == "bench").map_or(args.len(), |i| i + 1);
    let mut out = Vec::new();
    let mut i = start;
    while i < args.len() {
        let arg = args[i].to_string_lossy();
        let name = arg.split('=').next().unwrap_or_default();
        match BENCH_ONLY.iter().find(|(n, _)| *n == name) {
            Some((_, takes_value)) => i += if *takes_value && !arg.contains('=') { 2 } else { 1 },
            None => {
                out.push(args[i].clone());
                i += 1;
            }
        }
    }
    out
}

/// `--connections` channels to `addr` (at least one), the first waiting for a spawned server to listen.
pub(super) async fn connect_all(addr: SocketAddr, target: &mut Target, connections: usize) -> anyhow::Result<Vec<Channel>> {
    let mut channels = Vec::with_capacity(connections.max(1));
    for _ in 0..connections.max(1) {
        channels.push(connect(addr, target).await?);
    }
    Ok(channels)
}

pub(super) async fn connect(addr: SocketAddr, target: &mut Target) -> anyhow::Result<Channel> {
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        // Large HTTP/2 windows on the client too: see `server::CONNECTION_WINDOW_BYTES`.
        let attempt = Endpoint::from_shared(format!("http://{addr}"))?
            .tcp_nodelay(true)
            .initial_connection_window_size(server::CONNECTION_WINDOW_BYTES)
            .initial_stream_window_size(server::STREAM_WINDOW_BYTES)
            .connect()
            .await;
        match attempt {
            Ok(channel) => return Ok(channel),
            Err(e) if matches!(target, Target::Spawned { .. }) && Instant::now() < deadline => {
                target.check_alive()?;
                tracing::debug!(error = %e, "waiting for the spawned server");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(e).with_context(|| format!("connecting to {addr}")),
        }
    }
}

pub(super) async fn load_questions(channel: &Channel) -> anyhow::Result<Vec<pb::QuestionRecord>> {
    let mut data = DatasetClient::new(channel.clone());
    let mut questions = Vec::new();
    let mut token = String::new();
    loop {
        let page = data
            .list_questions(pb::ListQuestionsRequest { page_size: 1000, page_token: token.clone(), ..Default::default() })
            .await?
            .into_inner();
        questions.extend(page.questions.into_iter().filter(|q| q.category != 5));
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    anyhow::ensure!(!questions.is_empty(), "the server has no questions");
    Ok(questions)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn serve_gets_the_environment_flags_only() {
        let args = os(&[
            "memgym",
            "bench",
            "--episodes",
            "8",
            "--embedder",
            "potion",
            "--json",
            "--in-flight=32",
            "--spawn-server",
            "--index",
            "exact",
            "--duration",
            "5",
            "--full-scan-threshold=300",
        ]);
        assert_eq!(forwarded_serve_args(args), os(&["--embedder", "potion", "--index", "exact", "--full-scan-threshold=300"]));
        assert!(forwarded_serve_args(os(&["memgym", "bench"])).is_empty());
    }

    #[test]
    fn serve_does_not_get_the_grpc_ceiling_flag() {
        let args = os(&["memgym", "bench", "--grpc-ceiling-secs", "0.5", "--embedder", "potion", "--grpc-ceiling-secs=0"]);
        assert_eq!(forwarded_serve_args(args), os(&["--embedder", "potion"]));
    }
}
