//! `memgym health`: asks a running server's standard gRPC health service whether it serves, and exits 0
//! only if it does. It is the container image's HEALTHCHECK (the image has no other client) and a
//! readiness probe for scripts; a draining server answers NOT_SERVING, so it fails from the drain's start.

use std::time::Duration;

use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

/// The server's answer for `service` ("" is the whole server), within `timeout`. With `ca` (PEM), the
/// connection is TLS and trusts that CA for `domain`.
pub async fn check(addr: &str, service: &str, timeout: Duration, ca: Option<(&[u8], &str)>) -> anyhow::Result<ServingStatus> {
    let scheme = if ca.is_some() { "https" } else { "http" };
    let mut endpoint = Endpoint::from_shared(format!("{scheme}://{addr}"))
        .map_err(|e| anyhow::anyhow!("--addr {}: {e}", crate::util::excerpt::quoted(addr)))?
        .connect_timeout(timeout)
        .timeout(timeout);
    if let Some((pem, domain)) = ca {
        endpoint = endpoint.tls_config(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem)).domain_name(domain))?;
    }
    let channel = endpoint.connect().await.map_err(|e| anyhow::anyhow!("cannot connect to {addr}: {e}"))?;
    let mut request = tonic::Request::new(HealthCheckRequest { service: service.to_string() });
    if let Ok(key) = std::env::var("MEMGYM_API_KEY") {
        // Health is open on a server with API keys; a key does no harm and lets a proxy that checks keys pass.
        if let Ok(v) = format!("Bearer {key}").parse() {
            request.metadata_mut().insert("authorization", v);
        }
    }
    let answer =
        HealthClient::new(channel).check(request).await.map_err(|s| anyhow::anyhow!("health check: {}: {}", s.code(), s.message()))?;
    Ok(answer.into_inner().status())
}
