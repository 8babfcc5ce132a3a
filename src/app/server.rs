//! Builds and runs the gRPC server: the memgym services (episodes, dataset, and the banks when the
//! server has them), standard health, reflection (v1 and v1alpha, so grpcurl 1.8 works), the idle
//! reaper, the banks' usage flusher, and graceful shutdown with a drain deadline; beside them, on their own
//! listeners, the JSON faces (OpenEnv, MCP and the Open Reward Standard over HTTP).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::server::NamedService;
use tonic::transport::server::TcpIncoming;
use tonic::transport::Server;
use tonic_health::server::HealthReporter;
use tonic_health::ServingStatus;

use crate::api::faces::gateway::Gateway;
use crate::api::faces::mcp::{self, McpOptions};
use crate::api::faces::nemo_gym::{self, NemoGymOptions};
use crate::api::faces::openenv::{self, OpenEnvOptions};
use crate::api::faces::ors::{self, OrsOptions};
use crate::api::layers::deadline::DeadlineLayer;
use crate::api::pb::agent_memory_server::AgentMemoryServer;
use crate::api::pb::banks_server::BanksServer;
use crate::api::pb::dataset_server::DatasetServer;
use crate::api::pb::learn_server::LearnServer;
use crate::api::pb::memory_env_server::MemoryEnvServer;
use crate::api::{AgentService, BanksService, DatasetService, LearnService, MemoryEnvService, FILE_DESCRIPTOR_SET};
use crate::banks::Banks;
use crate::episode::Environment;

pub mod health;
pub mod tls;
pub use tls::TlsFiles;

/// Largest request the server decodes: the one cap of every face ([`crate::api::MAX_MESSAGE_BYTES`]).
pub const MAX_MESSAGE_BYTES: usize = crate::api::MAX_MESSAGE_BYTES;

/// HTTP/2 connection window. RL trainers multiplex hundreds to thousands of episodes on one connection,
/// each sending small messages. h2 (0.4.20+) bounds the memory of buffered *small* DATA frames with a
/// budget of half the connection window (at least 25,600 bytes, i.e. ~100 frames) and closes the
/// connection with ENHANCE_YOUR_CALM "too_many_data_frames" when it runs out. With the 64 KiB default a
/// burst of ~1,000 concurrent calls on one connection tripped it (seen in `memgym bench`); 16 MiB gives
/// a budget of ~32k buffered small frames.
pub const CONNECTION_WINDOW_BYTES: u32 = 16 * 1024 * 1024;
/// HTTP/2 per-stream window.
pub const STREAM_WINDOW_BYTES: u32 = 1024 * 1024;
/// Calls one gRPC connection may have in flight at once (HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS`), unless
/// `--grpc-max-streams` says otherwise. A client with more waits for a stream before it sends: each call in
/// flight holds its request, its handler's state and its reply (about 15 KiB in `memgym bench`), so without a
/// bound 65,536 calls at once held 1.9 GiB, and what the open episodes allocated between those buffers kept
/// the server at 1,120 MiB after they were freed. The calls beyond the bound wait in the client instead of
/// in the server, at about the same rate (the Benchmarks chapter: 6–8 % fewer calls/s with 65,536 in flight).
pub const DEFAULT_MAX_STREAMS: u32 = 1024;

/// Serves `env` on `listener` until `shutdown` resolves, then drains in-flight calls for at most `drain`.
pub async fn serve(
    listener: TcpListener,
    env: Arc<Environment>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    drain: Duration,
) -> anyhow::Result<()> {
    serve_with(listener, env, None, shutdown, drain).await
}

/// [`serve`] with the banks service too, when `banks` is given.
pub async fn serve_with(
    listener: TcpListener,
    env: Arc<Environment>,
    banks: Option<Arc<Banks>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    drain: Duration,
) -> anyhow::Result<()> {
    serve_all(listener, env, banks, Faces::default(), shutdown, drain).await
}

/// A face's listener on `addr`; a failure names the flag that gave the address.
async fn listen(flag: &str, addr: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr).await.map_err(|e| anyhow::anyhow!("{flag}: cannot listen on {addr}: {e}"))
}

/// The JSON faces served beside gRPC, each on its own listener: OpenEnv (HTTP and WebSocket, with MCP
/// behind its `/mcp`), standard MCP and the Open Reward Standard.
#[derive(Debug, Default)]
pub struct Faces {
    /// `--openenv-addr`.
    pub openenv: Option<(TcpListener, OpenEnvOptions)>,
    /// `--mcp-addr`.
    pub mcp: Option<(TcpListener, McpOptions)>,
    /// `--nemo-gym-addr`: NeMo Gym's resources-server protocol.
    pub nemo_gym: Option<(TcpListener, NemoGymOptions)>,
    /// `--ors-addr`: the Open Reward Standard (HTTP + SSE).
    pub ors: Option<(TcpListener, OrsOptions)>,
    /// `--metrics-addr`: Prometheus's `/metrics`, with the recorder that serves it.
    pub metrics: Option<(TcpListener, metrics_exporter_prometheus::PrometheusHandle)>,
    /// `--api-key-file`: the keys every face checks (gRPC and HTTP); none: open.
    pub keys: Option<Arc<crate::api::layers::auth::Keys>>,
    /// `--tls-cert`/`--tls-key`: every face serves TLS only.
    pub tls: Option<TlsFiles>,
    /// Whether a second SIGTERM/SIGINT during the drain stops the server at once (the binary; tests
    /// that shut down with their own future leave the process's signals alone).
    pub second_signal: bool,
    /// `--grpc-max-streams`: calls one gRPC connection may have in flight at once (none:
    /// [`DEFAULT_MAX_STREAMS`]).
    pub grpc_max_streams: Option<u32>,
}

impl Faces {
    /// Binds the listeners of the faces given (an address and its options each).
    pub async fn bind(openenv: Option<(SocketAddr, OpenEnvOptions)>, mcp: Option<(SocketAddr, McpOptions)>) -> anyhow::Result<Faces> {
        let mut faces = Faces::default();
        if let Some((addr, o)) = openenv {
            faces.openenv = Some((listen("--openenv-addr", addr).await?, o));
        }
        if let Some((addr, o)) = mcp {
            faces.mcp = Some((listen("--mcp-addr", addr).await?, o));
        }
        Ok(faces)
    }

    /// Adds `--nemo-gym-addr`: binds its listener; returns the address.
    pub async fn bind_nemo_gym(&mut self, addr: SocketAddr, options: NemoGymOptions) -> anyhow::Result<SocketAddr> {
        let listener = listen("--nemo-gym-addr", addr).await?;
        let bound = listener.local_addr()?;
        self.nemo_gym = Some((listener, options));
        Ok(bound)
    }

    /// Adds `--ors-addr`: binds the ORS listener; returns its address.
    pub async fn bind_ors(&mut self, addr: SocketAddr, options: OrsOptions) -> anyhow::Result<SocketAddr> {
        let listener = listen("--ors-addr", addr).await?;
        let bound = listener.local_addr()?;
        self.ors = Some((listener, options));
        Ok(bound)
    }

    /// Adds `--metrics-addr`: installs the metrics recorder and binds its listener; returns the address.
    pub async fn bind_metrics(&mut self, addr: SocketAddr) -> anyhow::Result<SocketAddr> {
        let handle = crate::util::prometheus::install().map_err(|e| anyhow::anyhow!("--metrics-addr: {e}"))?;
        let listener = listen("--metrics-addr", addr).await?;
        let bound = listener.local_addr()?;
        self.metrics = Some((listener, handle));
        Ok(bound)
    }

    /// Where the faces listen (the episode faces; `--metrics-addr` is returned by [`Faces::bind_metrics`]).
    pub fn addrs(&self) -> std::io::Result<FaceAddrs> {
        fn at<T>(face: &Option<(TcpListener, T)>) -> std::io::Result<Option<SocketAddr>> {
            face.as_ref().map(|(l, _)| l.local_addr()).transpose()
        }
        Ok(FaceAddrs { openenv: at(&self.openenv)?, mcp: at(&self.mcp)?, nemo_gym: at(&self.nemo_gym)?, ors: at(&self.ors)? })
    }

    /// Starts the faces' HTTP servers; they stop accepting when `stop` fires.
    fn spawn(self, env: &Arc<Environment>, stop: &tokio::sync::watch::Receiver<bool>) -> Vec<JoinHandle<()>> {
        let gateway = Gateway::new(env.clone());
        let mut routers = Vec::new();
        if let Some((listener, options)) = self.openenv {
            routers.push(("openenv", listener, openenv::router(gateway.clone(), &options)));
        }
        if let Some((listener, options)) = self.mcp {
            routers.push(("mcp", listener, mcp::router(gateway.clone(), &options)));
        }
        if let Some((listener, options)) = self.nemo_gym {
            routers.push(("nemo_gym", listener, nemo_gym::router(gateway.clone(), &options)));
        }
        if let Some((listener, options)) = self.ors {
            routers.push(("ors", listener, ors::router(gateway.clone(), &options)));
        }
        // Request metrics of the JSON faces (recorded only when a recorder is installed).
        let mut routers: Vec<(&'static str, TcpListener, axum::Router)> = routers
            .into_iter()
            .map(|(face, l, r)| {
                let observed =
                    r.layer(axum::middleware::from_fn(move |req, next| crate::api::layers::observe::observe_http(face, req, next)));
                (face, l, observed)
            })
            .collect();
        if let Some((listener, handle)) = self.metrics {
            let env = env.clone();
            let metrics = axum::Router::new()
                .route(
                    "/metrics",
                    axum::routing::get(move || {
                        let handle = handle.clone();
                        async move {
                            (
                                [(http::header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
                                crate::util::prometheus::render(&handle),
                            )
                        }
                    }),
                )
                // What a proxy's health check asks: 503 from the moment a drain starts, so that no new
                // episode is sent here while the episodes held here are still served.
                .route(
                    "/ready",
                    axum::routing::get(move || {
                        let draining = env.replica().draining();
                        async move {
                            if draining {
                                (http::StatusCode::SERVICE_UNAVAILABLE, "draining\n")
                            } else {
                                (http::StatusCode::OK, "ready\n")
                            }
                        }
                    }),
                );
            routers.push(("metrics", listener, metrics));
        }
        if let Some(keys) = &self.keys {
            routers = routers
                .into_iter()
                .map(|(face, l, r)| {
                    let keys = keys.clone();
                    (
                        face,
                        l,
                        r.layer(axum::middleware::from_fn(move |req, next| crate::api::layers::auth::http_auth(keys.clone(), req, next))),
                    )
                })
                .collect();
        }
        let tls = self.tls;
        routers
            .into_iter()
            .map(|(face, listener, router)| {
                let mut stop = stop.clone();
                let tls = tls.clone();
                tokio::spawn(async move {
                    let stopped = async move {
                        let _ = stop.wait_for(|s| *s).await;
                    };
                    let served = match tls {
                        Some(tls) => match tls.listen(face, listener) {
                            Ok(l) => axum::serve(l, router).with_graceful_shutdown(stopped).await,
                            Err(e) => Err(e),
                        },
                        None => axum::serve(listener, router).with_graceful_shutdown(stopped).await,
                    };
                    if let Err(e) = served {
                        tracing::error!(face, error = %e, "HTTP face stopped");
                    }
                })
            })
            .collect()
    }
}

/// [`serve_with`] plus the JSON faces.
pub async fn serve_all(
    listener: TcpListener,
    env: Arc<Environment>,
    banks: Option<Arc<Banks>>,
    faces: Faces,
    shutdown: impl Future<Output = ()> + Send + 'static,
    drain: Duration,
) -> anyhow::Result<()> {
    let (faces_stop, faces_stopped) = tokio::sync::watch::channel(false);
    let (keys, tls, second_signal, grpc_max_streams) = (faces.keys.clone(), faces.tls.clone(), faces.second_signal, faces.grpc_max_streams);
    let faces = faces.spawn(&env, &faces_stopped);
    let out = serve_grpc(listener, env, banks, (keys, tls, second_signal, grpc_max_streams), shutdown, drain, &faces_stop).await;
    let _ = faces_stop.send(true);
    for f in faces {
        f.abort();
    }
    out
}

async fn serve_grpc(
    listener: TcpListener,
    env: Arc<Environment>,
    banks: Option<Arc<Banks>>,
    (keys, tls, second_signal, max_streams): (Option<Arc<crate::api::layers::auth::Keys>>, Option<TlsFiles>, bool, Option<u32>),
    shutdown: impl Future<Output = ()> + Send + 'static,
    drain: Duration,
    faces_stop: &tokio::sync::watch::Sender<bool>,
) -> anyhow::Result<()> {
    let (mut health_reporter, health_service) = tonic_health::server::health_reporter();
    health_reporter.set_serving::<MemoryEnvServer<MemoryEnvService>>().await;
    health_reporter.set_serving::<DatasetServer<DatasetService>>().await;
    let mut health_names = HEALTH_NAMES.to_vec();
    if banks.is_some() {
        health_reporter.set_serving::<BanksServer<BanksService>>().await;
        health_names.push(<BanksServer<BanksService> as NamedService>::NAME);
        health_reporter.set_serving::<AgentMemoryServer<AgentService>>().await;
        health_names.push(<AgentMemoryServer<AgentService> as NamedService>::NAME);
        health_reporter.set_serving::<LearnServer<LearnService>>().await;
        health_names.push(<LearnServer<LearnService> as NamedService>::NAME);
    }
    let reflection_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()?;

    let reaper = spawn_reaper(env.clone());
    let env_svc = MemoryEnvServer::new(MemoryEnvService::new(env.clone())).max_decoding_message_size(MAX_MESSAGE_BYTES);
    let data_svc = DatasetServer::new(DatasetService::new(env.clone())).max_decoding_message_size(MAX_MESSAGE_BYTES);
    let banks_svc = banks.clone().map(|b| BanksServer::new(BanksService::new(b)).max_decoding_message_size(MAX_MESSAGE_BYTES));
    let agent_svc = banks.clone().map(|b| AgentMemoryServer::new(AgentService::new(b)).max_decoding_message_size(MAX_MESSAGE_BYTES));
    let learn_svc = banks.clone().map(|b| LearnServer::new(LearnService::new(b)).max_decoding_message_size(MAX_MESSAGE_BYTES));
    let mut flusher = banks.as_ref().map(|b| b.spawn_usage_flusher());

    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let mut builder = Server::builder();
    if let Some(tls) = tls {
        builder = builder
            .tls_config(tonic::transport::ServerTlsConfig::new().identity(tls.identity()))
            .map_err(|e| anyhow::anyhow!("--tls-cert/--tls-key: {e}"))?;
    }
    let router = builder
        .tcp_nodelay(true)
        .max_concurrent_streams(Some(max_streams.unwrap_or(DEFAULT_MAX_STREAMS)))
        .initial_connection_window_size(Some(CONNECTION_WINDOW_BYTES))
        .initial_stream_window_size(Some(STREAM_WINDOW_BYTES))
        .trace_fn(|req| tracing::debug_span!("grpc", path = %req.uri().path()))
        .layer(crate::api::layers::observe::ObserveLayer::default())
        .layer(crate::api::layers::stack::AroundLayer(crate::api::layers::auth::Auth(keys)))
        .layer(crate::api::layers::stack::AroundLayer(crate::api::layers::drain::Drain::new(env.clone())))
        .layer(DeadlineLayer::default())
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(env_svc)
        .add_service(data_svc)
        .add_optional_service(banks_svc)
        .add_optional_service(agent_svc)
        .add_optional_service(learn_svc);
    // serve_with_incoming does not apply the builder's tcp_nodelay to accepted sockets: without it, small
    // unary replies wait for delayed ACKs (~40 ms per call, seen in `memgym bench`).
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    let mut server = tokio::spawn(router.serve_with_incoming_shutdown(incoming, async {
        let _ = stop_rx.await;
    }));

    tokio::select! {
        r = &mut server => { reaper.abort(); stop_banks(flusher.take(), banks.as_ref()).await; return Ok(r??); }
        () = shutdown => {}
    }
    // The drain: no new episodes or bank calls (a retryable DRAINING), health NOT_SERVING and /ready 503,
    // while the episodes held here are played to their score; then the listeners close and the calls in
    // flight finish. All within `drain`; a second signal skips to the end.
    let deadline = tokio::time::Instant::now() + drain;
    env.replica().start_drain();
    for name in &health_names {
        health_reporter.set_service_status(name, ServingStatus::NotServing).await;
    }
    tracing::info!(unscored = env.unscored_episodes(), ?drain, "draining: no new episodes, serving the open ones");
    let episodes_done = async {
        while env.unscored_episodes() > 0 {
            tokio::time::sleep(EPISODE_POLL).await;
        }
    };
    let forced = async {
        if second_signal {
            shutdown_signal().await
        } else {
            std::future::pending().await
        }
    };
    tokio::select! {
        () = episodes_done => tracing::info!("drain: every open episode scored or closed"),
        () = tokio::time::sleep_until(deadline) => tracing::warn!(unscored = env.unscored_episodes(), "drain deadline passed with episodes open"),
        () = forced => tracing::warn!(unscored = env.unscored_episodes(), "second signal: stopping now"),
    }
    tracing::info!("shutting down: closing the listeners, letting in-flight calls finish");
    let _ = faces_stop.send(true);
    let _ = stop_tx.send(());
    reaper.abort();
    let drained = async {
        // A health Watch is a stream that never ends by itself: it would hold its connection (and so the
        // drain) open until the deadline. Watchers have been sent NOT_SERVING; ending their streams now,
        // and again for any Watch that slipped in before the connection's GOAWAY, lets the drain finish as
        // soon as the unary calls do (grpc-health: on shutdown, everything NOT_SERVING, watches ended).
        let mut tick = tokio::time::interval(WATCH_SWEEP);
        loop {
            tokio::select! {
                r = &mut server => return r,
                _ = tick.tick() => end_health_watches(&mut health_reporter, &health_names).await,
            }
        }
    };
    let left = deadline.saturating_duration_since(tokio::time::Instant::now()).max(IN_FLIGHT_FLOOR);
    let out = match tokio::time::timeout(left, drained).await {
        Ok(r) => r.map_err(anyhow::Error::from).and_then(|r| r.map_err(anyhow::Error::from)),
        Err(_) => {
            tracing::warn!(?drain, "drain deadline passed with connections still open; stopping");
            server.abort();
            Ok(())
        }
    };
    stop_banks(flusher.take(), banks.as_ref()).await;
    out
}

/// Stops the usage flusher and writes the usage counted since its last flush.
async fn stop_banks(flusher: Option<JoinHandle<()>>, banks: Option<&Arc<Banks>>) {
    if let Some(f) = flusher {
        f.abort();
    }
    if let Some(b) = banks {
        b.flush_usage().await;
    }
}

/// Every name the health service reports: the whole server ("") and each memgym service (the banks
/// service is added when served).
const HEALTH_NAMES: [&str; 3] =
    ["", <MemoryEnvServer<MemoryEnvService> as NamedService>::NAME, <DatasetServer<DatasetService> as NamedService>::NAME];

/// How often the drain looks at the open episodes.
const EPISODE_POLL: Duration = Duration::from_millis(100);

/// The least time calls in flight get to finish, even when the episodes used up the drain.
const IN_FLIGHT_FLOOR: Duration = Duration::from_secs(1);

/// How often the drain ends health Watch streams opened since the last sweep.
const WATCH_SWEEP: Duration = Duration::from_millis(200);

/// Ends every open health Watch stream (dropping a status's sender ends its streams, after they have seen
/// the last status) and registers the names again as NOT_SERVING, so a late Check still answers
/// NOT_SERVING rather than NOT_FOUND.
async fn end_health_watches(reporter: &mut HealthReporter, names: &[&str]) {
    for name in names {
        reporter.clear_service_status(name).await;
        reporter.set_service_status(name, ServingStatus::NotServing).await;
    }
}

fn spawn_reaper(env: Arc<Environment>) -> JoinHandle<()> {
    let ttl = env.config().limits.idle_ttl;
    let every = (ttl / 4).clamp(Duration::from_millis(50), Duration::from_secs(30));
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let s = env.reap_idle();
            if s.reaped > 0 {
                tracing::info!(reaped = s.reaped, open = env.open_episodes(), remembered = s.remembered, "closed idle episodes");
            }
            if s.forgotten > 0 {
                tracing::debug!(forgotten = s.forgotten, remembered = s.remembered, "forgot the ids of long-ended episodes");
            }
        }
    })
}

/// Resolves on SIGTERM or Ctrl-C (SIGINT). The handlers are installed when this is called, not when the
/// future is first polled: a signal that arrives after the server logged its address, but before the
/// serving task polled this, still shuts down gracefully instead of killing the process (seen under load).
/// Call it inside the runtime.
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let term = signal(SignalKind::terminate());
        let int = signal(SignalKind::interrupt());
        async move {
            match (term, int) {
                (Ok(mut term), Ok(mut int)) => {
                    tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
                }
                (term, int) => {
                    let e = term.err().or(int.err()).map(|e| e.to_string()).unwrap_or_default();
                    tracing::warn!(error = %e, "cannot listen for SIGTERM/SIGINT");
                    std::future::pending::<()>().await
                }
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Where each episode face listens, when served.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaceAddrs {
    /// `--openenv-addr`.
    pub openenv: Option<SocketAddr>,
    /// `--mcp-addr`.
    pub mcp: Option<SocketAddr>,
    /// `--nemo-gym-addr`.
    pub nemo_gym: Option<SocketAddr>,
    /// `--ors-addr`.
    pub ors: Option<SocketAddr>,
}

/// A server running in the background (tests and the in-process benchmark).
#[derive(Debug)]
pub struct Running {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Where the OpenEnv face listens, when served.
    pub openenv_addr: Option<SocketAddr>,
    /// Where the MCP face listens, when served.
    pub mcp_addr: Option<SocketAddr>,
    /// Where the NeMo Gym face listens, when served.
    pub nemo_gym_addr: Option<SocketAddr>,
    /// Where the ORS face listens, when served.
    pub ors_addr: Option<SocketAddr>,
    stop: Option<oneshot::Sender<()>>,
    handle: JoinHandle<anyhow::Result<()>>,
}

impl Running {
    /// Stops the server and waits for it.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        (&mut self.handle).await?
    }
}

/// Starts `env` on `127.0.0.1:0` (or `addr`) in the background.
pub async fn spawn(env: Arc<Environment>, addr: SocketAddr) -> anyhow::Result<Running> {
    spawn_with(env, None, addr).await
}

/// [`spawn`] with the banks service too.
pub async fn spawn_with(env: Arc<Environment>, banks: Option<Arc<Banks>>, addr: SocketAddr) -> anyhow::Result<Running> {
    spawn_all(env, banks, addr, None, None).await
}

/// [`spawn_with`] plus the JSON faces, each on its own `127.0.0.1:0` listener.
pub async fn spawn_all(
    env: Arc<Environment>,
    banks: Option<Arc<Banks>>,
    addr: SocketAddr,
    openenv: Option<OpenEnvOptions>,
    mcp: Option<McpOptions>,
) -> anyhow::Result<Running> {
    let loopback: SocketAddr = "127.0.0.1:0".parse()?;
    let faces = Faces::bind(openenv.map(|o| (loopback, o)), mcp.map(|o| (loopback, o))).await?;
    spawn_faces(env, banks, addr, faces).await
}

/// [`spawn_with`] plus the faces already bound in `faces` (those [`Faces::bind`] takes, and any other a
/// `Faces::bind_*` added).
pub async fn spawn_faces(env: Arc<Environment>, banks: Option<Arc<Banks>>, addr: SocketAddr, faces: Faces) -> anyhow::Result<Running> {
    let listener = TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let FaceAddrs { openenv: openenv_addr, mcp: mcp_addr, nemo_gym: nemo_gym_addr, ors: ors_addr } = faces.addrs()?;
    let (tx, rx) = oneshot::channel::<()>();
    let handle = tokio::spawn(serve_all(
        listener,
        env,
        banks,
        faces,
        async {
            let _ = rx.await;
        },
        Duration::from_secs(5),
    ));
    Ok(Running { addr, openenv_addr, mcp_addr, nemo_gym_addr, ors_addr, stop: Some(tx), handle })
}
