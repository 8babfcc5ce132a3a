//! `serve --tls-cert --tls-key`: the real binary serves gRPC over TLS (rustls). A client that trusts the
//! certificate is served; a plain-text client, a client trusting another certificate, and an expired
//! certificate are not; a file that is not a PEM certificate is refused at start naming its flag.

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

    // Garbage is refused at start, naming the flag; TLS with an HTTP face is refused rather than served in clear.
    let garbage = write(dir.path(), "garbage.pem", "not a certificate");
    let o = memgym(strings(&["serve", "--addr", "127.0.0.1:0", "--no-banks", "--tls-cert", &garbage, "--tls-key", &key_path])).await;
    assert!(!o.status.success() && text(&o).contains("--tls-cert") && text(&o).contains("no PEM CERTIFICATE"), "{}", text(&o));
    let o = memgym(strings(&[
        "serve",
        "--addr",
        "127.0.0.1:0",
        "--no-banks",
        "--tls-cert",
        &cert_path,
        "--tls-key",
        &key_path,
        "--mcp-addr",
        "127.0.0.1:0",
    ]))
    .await;
    assert!(!o.status.success() && text(&o).contains("TLS covers the gRPC face only"), "{}", text(&o));
}
