//! Starts the server in-process on an ephemeral loopback port and hands out clients.

use clap::Parser;
use memgym::api::pb;
use memgym::api::pb::dataset_client::DatasetClient;
use memgym::api::pb::memory_env_client::MemoryEnvClient;
use memgym::app::cli::{Cli, Command};
use memgym::app::server::{self, Running};
use tonic::transport::Channel;

/// A running server and clients connected to it.
pub struct App {
    pub server: Running,
    pub env: MemoryEnvClient<Channel>,
    pub data: DatasetClient<Channel>,
    pub channel: Channel,
}

/// `memgym serve` with the default settings plus `flags` (as on the command line), parsed.
pub fn serve_args(flags: &[&str]) -> memgym::app::cli::ServeArgs {
    let mut argv = vec!["memgym", "serve"];
    argv.extend_from_slice(flags);
    let Command::Serve(args) = Cli::try_parse_from(argv).expect("flags parse").command else { unreachable!() };
    args
}

/// The JSON faces a test server binds, each on its own `127.0.0.1:0` listener with its options, and the
/// replica name it serves as (`serve --replica`), if any.
#[derive(Default)]
pub struct FaceOptions {
    pub openenv: Option<memgym::api::faces::openenv::OpenEnvOptions>,
    pub mcp: Option<memgym::api::faces::mcp::McpOptions>,
    pub nemo_gym: Option<memgym::api::faces::nemo_gym::NemoGymOptions>,
    pub ors: Option<memgym::api::faces::ors::OrsOptions>,
    pub replica: Option<String>,
}

/// A server with JSON faces: the server (its `*_addr` say where each face listens), its environment and a
/// gRPC client of the same server.
pub struct Served {
    pub server: Running,
    pub env: std::sync::Arc<memgym::episode::Environment>,
    pub grpc: MemoryEnvClient<Channel>,
}

/// Starts a server with `flags` and the faces `options` names: the one way every face's tests start one.
pub async fn spawn_faces(flags: &[&str], options: FaceOptions) -> Served {
    let args = serve_args(flags);
    let env = memgym::app::config::build_replica_environment(&args.env, options.replica).expect("environment builds");
    let loopback: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
    let mut faces = server::Faces::bind(options.openenv.map(|o| (loopback, o)), options.mcp.map(|o| (loopback, o))).await.expect("binds");
    if let Some(o) = options.nemo_gym {
        faces.bind_nemo_gym(loopback, o).await.expect("binds");
    }
    if let Some(o) = options.ors {
        faces.bind_ors(loopback, o).await.expect("binds");
    }
    let server = server::spawn_faces(env.clone(), None, loopback, faces).await.expect("server starts");
    let channel = Channel::from_shared(format!("http://{}", server.addr)).unwrap().connect().await.expect("connects");
    Served { server, env, grpc: MemoryEnvClient::new(channel) }
}

/// Starts a server with the default settings plus `flags` (as on the command line).
pub async fn spawn_app(flags: &[&str]) -> App {
    let args = serve_args(flags);
    let env = memgym::app::config::build_environment(&args.env).expect("environment builds");
    let server = server::spawn(env, "127.0.0.1:0".parse().unwrap()).await.expect("server starts");
    let channel = Channel::from_shared(format!("http://{}", server.addr)).unwrap().connect().await.expect("connects");
    App { env: MemoryEnvClient::new(channel.clone()), data: DatasetClient::new(channel.clone()), channel, server }
}

impl App {
    /// Opens a LoCoMo episode with a chosen id.
    pub async fn open(&mut self, id: &str, question_id: &str) -> pb::CreateEpisodeResponse {
        self.env
            .create_episode(pb::CreateEpisodeRequest {
                episode_id: id.into(),
                question_id: question_id.into(),
                seed: Some(3),
                ..Default::default()
            })
            .await
            .expect("create")
            .into_inner()
    }

    /// Calls a tool by name with JSON arguments.
    pub async fn tool(&mut self, id: &str, name: &str, args: serde_json::Value) -> Result<pb::CallToolResponse, tonic::Status> {
        self.env
            .call_tool(pb::CallToolRequest {
                episode_id: id.into(),
                tool_name: name.into(),
                arguments_json: args.to_string(),
                ..Default::default()
            })
            .await
            .map(tonic::Response::into_inner)
    }

    /// Every memory of an episode (all pages).
    pub async fn all_memories(&mut self, id: &str) -> Vec<pb::Memory> {
        let mut out = Vec::new();
        let mut token = String::new();
        loop {
            let page = self
                .env
                .list_memories(pb::ListMemoriesRequest { episode_id: id.into(), page_size: 100, page_token: token, memory_type: 0 })
                .await
                .expect("list")
                .into_inner();
            out.extend(page.memories);
            if page.next_page_token.is_empty() {
                return out;
            }
            token = page.next_page_token;
        }
    }

    /// The episode's state.
    pub async fn state(&mut self, id: &str) -> pb::EpisodeState {
        self.env
            .get_episode(pb::GetEpisodeRequest { episode_id: id.into(), include_trace: false })
            .await
            .expect("get")
            .into_inner()
            .state
            .expect("state")
    }
}

/// A server in-process with its banks in a temporary SQLite directory (kept while this lives).
pub struct Banked {
    pub _server: Running,
    pub channel: Channel,
    pub _dir: tempfile::TempDir,
}

/// Starts a server with banks in a temporary directory, plus `flags`.
pub async fn spawn_banked(flags: &[&str]) -> Banked {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let mut argv = vec!["--banks-dir", &d];
    argv.extend_from_slice(flags);
    let args = serve_args(&argv);
    let env = memgym::app::config::build_environment(&args.env).expect("environment builds");
    let banks = memgym::app::config::build_banks(&args.banks, &env).await.expect("banks open");
    let server = server::spawn_with(env, banks, "127.0.0.1:0".parse().unwrap()).await.expect("server starts");
    let channel = Channel::from_shared(format!("http://{}", server.addr)).unwrap().connect().await.expect("connects");
    Banked { _server: server, channel, _dir: dir }
}
