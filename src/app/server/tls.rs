//! TLS for every face. `--tls-cert`/`--tls-key` are read and checked once, before anything listens; the
//! gRPC face gets them as tonic's identity, and the HTTP faces (OpenEnv with its WebSocket, MCP, and
//! `/metrics`) get a rustls acceptor on the same provider (aws-lc, which tonic's TLS already builds).
//!
//! The HTTP faces are served by `axum::serve` over a [`TlsListener`]: the listener accepts TCP, runs each
//! handshake in its own task (bounded by [`HANDSHAKE_TIMEOUT`]), and hands axum only the streams whose
//! handshake finished. One slow or silent client therefore never holds the accept loop, and a failed
//! handshake (plain text, a client that does not trust the certificate) is dropped and logged at debug.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// How long a client has to finish its TLS handshake before the connection is dropped.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Handshaken connections waiting for axum to take them.
const READY_QUEUE: usize = 256;

/// The server's TLS identity: the PEM files of `--tls-cert` and `--tls-key`, checked.
#[derive(Clone)]
pub struct TlsFiles {
    cert: Vec<u8>,
    key: Vec<u8>,
    acceptor: TlsAcceptor,
}

impl std::fmt::Debug for TlsFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsFiles").field("cert_bytes", &self.cert.len()).finish_non_exhaustive()
    }
}

impl TlsFiles {
    /// Reads both files and builds the rustls configuration from them, so that a file without a
    /// certificate, a key file without a key, or a key that does not match is refused at start, naming
    /// its flag.
    pub fn load(cert: &Path, key: &Path) -> anyhow::Result<TlsFiles> {
        let read = |flag: &str, p: &Path| std::fs::read(p).map_err(|e| anyhow::anyhow!("{flag} {}: {e}", p.display()));
        let (cert_pem, key_pem) = (read("--tls-cert", cert)?, read("--tls-key", key)?);
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
            .collect::<Result<_, _>>()
            .map_err(|e| anyhow::anyhow!("--tls-cert {}: {e}", cert.display()))?;
        if chain.is_empty() {
            anyhow::bail!("--tls-cert {}: no PEM CERTIFICATE in it", cert.display());
        }
        let private = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
            let why = if matches!(e, rustls::pki_types::pem::Error::NoItemsFound) {
                "no PEM PRIVATE KEY in it".to_string()
            } else {
                e.to_string()
            };
            anyhow::anyhow!("--tls-key {}: {why}", key.display())
        })?;
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| anyhow::anyhow!("TLS: {e}"))?
            .with_no_client_auth()
            .with_single_cert(chain, private)
            .map_err(|e| anyhow::anyhow!("--tls-cert/--tls-key: {e}"))?;
        // axum serves HTTP/1.1 (and WebSocket upgrades over it).
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsFiles { cert: cert_pem, key: key_pem, acceptor: TlsAcceptor::from(Arc::new(config)) })
    }

    /// The identity tonic serves gRPC with.
    pub fn identity(&self) -> tonic::transport::Identity {
        tonic::transport::Identity::from_pem(&self.cert, &self.key)
    }

    /// A listener for an HTTP face that serves TLS only.
    pub fn listen(&self, face: &'static str, listener: TcpListener) -> std::io::Result<TlsListener> {
        TlsListener::new(face, listener, self.acceptor.clone())
    }
}

/// A TCP listener that yields only connections whose TLS handshake finished (see the module doc).
pub struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
    accept_loop: JoinHandle<()>,
}

impl TlsListener {
    fn new(face: &'static str, listener: TcpListener, acceptor: TlsAcceptor) -> std::io::Result<TlsListener> {
        let local = listener.local_addr()?;
        let (tx, ready) = mpsc::channel(READY_QUEUE);
        let accept_loop = tokio::spawn(async move {
            loop {
                let (tcp, peer) = match listener.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        // Out of file descriptors and the like: back off rather than spin.
                        tracing::warn!(face, error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = tcp.set_nodelay(true);
                let (acceptor, handed) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => {
                            let _ = handed.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(face, %peer, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(face, %peer, "TLS handshake timed out"),
                    }
                });
                if tx.is_closed() {
                    return;
                }
            }
        });
        Ok(TlsListener { ready, local, accept_loop })
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.accept_loop.abort();
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(c) => c,
            // The accept loop ended (only when this listener is dropped): never yield again.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}
