//! The bare gRPC ceiling, for `memgym bench --grpc-ceiling-secs`: before the load, the standard health
//! `Check` (a trivial unary RPC the server answers from a map) is driven through the same connections,
//! by as many tasks as there are episodes, under the same in-flight cap and the same timing code as the
//! tool calls.
//!
//! Per-call CPU and calls/s vary about 2× between machine types, so raw numbers do not compare across
//! machines; tool calls/s as a share of this ceiling does. CPU per health check is what the transport
//! (HTTP/2, protobuf, tonic, the client) costs per call; CPU per tool call minus it is memgym's own work.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

use super::hist::Hist;
use super::load::{Shared, Tally};
use super::probe::Probe;

/// The ceiling measured before the load.
#[derive(Debug)]
pub(super) struct Ceiling {
    /// Health checks answered SERVING.
    pub(super) checks: u64,
    /// Health checks that failed or did not answer SERVING, by kind.
    pub(super) failures: BTreeMap<String, u64>,
    pub(super) wall: f64,
    pub(super) lat: Hist,
    /// CPU seconds of the probed process (the server, or the whole in-process bench).
    pub(super) cpu: Option<f64>,
    /// CPU seconds of this (client) process.
    pub(super) client_cpu: Option<f64>,
}

impl Ceiling {
    /// Health checks per second.
    pub(super) fn per_s(&self) -> f64 {
        self.checks as f64 / self.wall
    }

    /// CPU µs per health check: of the probed process, and of the client.
    pub(super) fn cpu_us_per_check(&self) -> (Option<f64>, Option<f64>) {
        let per = |s: Option<f64>| s.filter(|_| self.checks > 0).map(|s| s * 1e6 / self.checks as f64);
        (per(self.cpu), per(self.client_cpu))
    }
}

/// Drives health checks for `secs` seconds: `workers` tasks (one per episode slot, on the slot's
/// connection) each call back to back through `shared`'s in-flight cap.
pub(super) async fn measure(shared: &Shared, workers: usize, secs: f64) -> anyhow::Result<Ceiling> {
    // Its own tally, recorded the way tool calls are (the per-RPC and the all-calls histogram).
    let shared = Shared { tally: Arc::new(parking_lot::Mutex::new(Tally::default())), ..shared.clone() };
    let probe = shared.probe.clone();
    let cpu_start = probe.as_ref().and_then(Probe::cpu_secs);
    let client_cpu_start = Probe::this_process().cpu_secs();
    let started = Instant::now();
    let until = started + Duration::from_secs_f64(secs);
    let mut tasks = Vec::with_capacity(workers);
    for slot in 0..workers {
        let shared = shared.clone();
        tasks.push(tokio::spawn(async move {
            let mut c = HealthClient::new(shared.channels[slot % shared.channels.len()].clone());
            let mut ok = 0u64;
            while Instant::now() < until {
                match shared.timed("health", true, c.check(HealthCheckRequest { service: String::new() })).await {
                    Ok(r) if r.get_ref().status == ServingStatus::Serving as i32 => ok += 1,
                    Ok(_) => shared.count(false, "health NOT_SERVING".to_string()),
                    Err(st) => shared.count(false, format!("health {:?}", st.code())),
                }
            }
            ok
        }));
    }
    let mut checks = 0;
    for t in tasks {
        checks += t.await?;
    }
    let wall = started.elapsed().as_secs_f64();
    let cpu_end = probe.as_ref().and_then(Probe::cpu_secs);
    let client_cpu_end = Probe::this_process().cpu_secs();
    let tally = std::mem::take(&mut *shared.tally.lock());
    Ok(Ceiling {
        checks,
        failures: tally.failures,
        wall,
        lat: tally.tool_all,
        cpu: cpu_start.zip(cpu_end).map(|(s, e)| e - s),
        client_cpu: client_cpu_start.zip(client_cpu_end).map(|(s, e)| e - s),
    })
}
