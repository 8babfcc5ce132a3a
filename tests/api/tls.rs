//! `serve --tls-cert --tls-key`: the real binary serves gRPC over TLS (rustls). A client that trusts the
//! certificate is served; a plain-text client, a client trusting another certificate, and an expired
//! certificate are not; a file that is not a PEM certificate (or key) is refused at start naming its flag.
//! The HTTP faces (OpenEnv, MCP, metrics) serve TLS with the same certificate, checked with a rustls client.

use std::path::Path;

use memgym::api::pb;
use memgym::api::pb::memory_env_client::MemoryEnvClient;
use tonic::transport::{Certificate, Channel, ClientTlsConfig};

use crate::binary::start_binary_logging;
use crate::rollout::{memgym, strings, text, KillOnDrop};

/// A self-signed certificate for localhost and 127.0.0.1, expired when `expired`: (cert PEM, key PEM).
fn certificate(expired: bool) -> (String, String) {
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    if expired {
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2021, 1, 1);
    }
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    (cert.pem(), key.serialize_pem())
}

fn write(dir: &Path, name: &str, pem: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, pem).unwrap();
    p.display().to_string()
}

async fn list_tools(addr: &str, trust: Option<&str>) -> Result<(), String> {
    let scheme = if trust.is_some() { "https" } else { "http" };
    let mut endpoint = Channel::from_shared(format!("{scheme}://{addr}")).unwrap();
    if let Some(ca) = trust {
        endpoint = endpoint.tls_config(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca)).domain_name("localhost")).unwrap();
    }
    let channel = endpoint.connect().await.map_err(|e| format!("connect: {e:?}"))?;
    MemoryEnvClient::new(channel).list_tools(pb::ListToolsRequest {}).await.map(drop).map_err(|s| format!("{s:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_serves_tls_to_clients_that_trust_its_certificate_only() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = certificate(false);
    let (cert_path, key_path) = (write(dir.path(), "cert.pem", &cert), write(dir.path(), "key.pem", &key));
    let (child, addrs) = start_binary_logging(&["--tls-cert", &cert_path, "--tls-key", &key_path], &[], 1);
    let _server = KillOnDrop(child);
    let addr = &addrs[0].1;
    list_tools(addr, Some(&cert)).await.unwrap();
    assert!(list_tools(addr, None).await.is_err(), "plain text is not served");
    let (other, _) = certificate(false);
    assert!(list_tools(addr, Some(&other)).await.is_err(), "a certificate the client does not trust");

    // An expired certificate is refused by the client.
    let (old_cert, old_key) = certificate(true);
    let flags = [write(dir.path(), "old.pem", &old_cert), write(dir.path(), "old-key.pem", &old_key)];
    let (child, addrs) = start_binary_logging(&["--tls-cert", &flags[0], "--tls-key", &flags[1]], &[], 1);
    let _expired = KillOnDrop(child);
    let err = list_tools(&addrs[0].1, Some(&old_cert)).await.unwrap_err();
    assert!(err.to_lowercase().contains("expired"), "{err}");

    // Garbage is refused at start, naming the flag.
    let garbage = write(dir.path(), "garbage.pem", "not a certificate");
    let o = memgym(strings(&["serve", "--addr", "127.0.0.1:0", "--no-banks", "--tls-cert", &garbage, "--tls-key", &key_path])).await;
    assert!(!o.status.success() && text(&o).contains("--tls-cert") && text(&o).contains("no PEM CERTIFICATE"), "{}", text(&o));
    let o = memgym(strings(&["serve", "--addr", "127.0.0.1:0", "--no-banks", "--tls-cert", &cert_path, "--tls-key", &garbage])).await;
    assert!(!o.status.success() && text(&o).contains("--tls-key") && text(&o).contains("no PEM PRIVATE KEY"), "{}", text(&o));
}

/// One HTTP/1.1 request over TLS (rustls, trusting `ca`) to `addr`; the response's status line, or why
/// there was none.
async fn https(addr: &str, ca: &str, request: &str) -> Result<String, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_rustls::rustls;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(rustls::pki_types::CertificateDer::from_pem_slice(ca.as_bytes()).unwrap()).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config)).connect(name, tcp).await.map_err(|e| e.to_string())?;
    tls.write_all(request.as_bytes()).await.map_err(|e| e.to_string())?;
    let mut reply = Vec::new();
    let _ = tls.read_to_end(&mut reply).await;
    let reply = String::from_utf8_lossy(&reply).to_string();
    reply.lines().next().map(str::to_string).ok_or_else(|| "no reply".to_string())
}

/// Finds the address a face logged (the line naming `what`).
fn face_addr<'a>(addrs: &'a [(String, String)], what: &str) -> &'a str {
    &addrs.iter().find(|(line, _)| line.contains(what)).unwrap_or_else(|| panic!("no {what} line in {addrs:?}")).1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_faces_serve_tls_with_the_same_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = certificate(false);
    let flags = [write(dir.path(), "cert.pem", &cert), write(dir.path(), "key.pem", &key)];
    let any = "127.0.0.1:0";
    let (child, addrs) = start_binary_logging(
        &["--tls-cert", &flags[0], "--tls-key", &flags[1], "--openenv-addr", any, "--mcp-addr", any, "--metrics-addr", any],
        &[],
        4,
    );
    let _server = KillOnDrop(child);
    let (openenv, mcp, metrics) =
        (face_addr(&addrs, "openenv listening"), face_addr(&addrs, "mcp listening"), face_addr(&addrs, "metrics listening"));
    let get = |path: &str| format!("GET {path} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n");
    assert_eq!(https(openenv, &cert, &get("/health")).await.unwrap(), "HTTP/1.1 200 OK");
    assert_eq!(https(metrics, &cert, &get("/metrics")).await.unwrap(), "HTTP/1.1 200 OK");
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;
    let post = format!(
        "POST /mcp HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    assert_eq!(https(mcp, &cert, &post).await.unwrap(), "HTTP/1.1 200 OK");

    // Plain text gets no HTTP reply, and a client that trusts another certificate does not connect.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut plain = tokio::net::TcpStream::connect(openenv).await.unwrap();
    plain.write_all(get("/health").as_bytes()).await.unwrap();
    let mut reply = Vec::new();
    let _ = plain.read_to_end(&mut reply).await;
    assert!(!String::from_utf8_lossy(&reply).contains("200 OK"), "plain text was served");
    let (other, _) = certificate(false);
    assert!(https(openenv, &other, &get("/health")).await.is_err(), "a certificate the client does not trust");
    // The face still serves after those failed handshakes.
    assert_eq!(https(openenv, &cert, &get("/health")).await.unwrap(), "HTTP/1.1 200 OK");

    // An expired certificate on the HTTP faces is refused by the client too.
    let (old_cert, old_key) = certificate(true);
    let old = [write(dir.path(), "old.pem", &old_cert), write(dir.path(), "old-key.pem", &old_key)];
    let (child, addrs) = start_binary_logging(&["--tls-cert", &old[0], "--tls-key", &old[1], "--openenv-addr", any], &[], 2);
    let _expired = KillOnDrop(child);
    let err = https(face_addr(&addrs, "openenv listening"), &old_cert, &get("/health")).await.unwrap_err();
    assert!(err.to_lowercase().contains("expired"), "{err}");
}
