//! Request metrics of the gRPC face ([`ObserveLayer`]) and of the HTTP faces ([`observe_http`]): counts
//! by status and latency per RPC or route, and the in-flight gauge ([`crate::util::prometheus`]).
//!
//! A gRPC method is labelled by its path only when it is one the server serves (memgym's RPCs from the
//! descriptor set, health, reflection); any other path is `other`, so a client cannot grow the label set.
//! The code (named as the JSON faces name it: `ok`, `not_found`) is the response's `grpc-status` header when the call failed before its body (how tonic answers
//! every unary error) and `ok` otherwise; latency runs until the response starts, which for a unary call is
//! when its handler returned.

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Instant;

use prost::Message;

use crate::api::layers::stack::{AroundLayer, Call, Hook};
use crate::util::prometheus;

/// Every gRPC path the server serves, as a `'static` label.
fn known_methods() -> &'static HashMap<String, &'static str> {
    static KNOWN: OnceLock<HashMap<String, &'static str>> = OnceLock::new();
    KNOWN.get_or_init(|| {
        let mut paths: Vec<String> = Vec::new();
        for set in [crate::api::FILE_DESCRIPTOR_SET, tonic_health::pb::FILE_DESCRIPTOR_SET] {
            let set = prost_types::FileDescriptorSet::decode(set).unwrap_or_default();
            for f in &set.file {
                for s in &f.service {
                    for m in &s.method {
                        paths.push(format!("/{}.{}/{}", f.package(), s.name(), m.name()));
                    }
                }
            }
        }
        for v in ["v1", "v1alpha"] {
            paths.push(format!("/grpc.reflection.{v}.ServerReflection/ServerReflectionInfo"));
        }
        // A bounded set, made once per process: leaked so the labels are `'static`.
        paths.into_iter().map(|p| (p.clone(), &*Box::leak(p.into_boxed_str()))).collect()
    })
}

/// The label of a gRPC path: itself when served, else `other`.
pub fn method_label(path: &str) -> &'static str {
    known_methods().get(path).copied().unwrap_or("other")
}

/// The label of a `grpc-status` header's number: the code's name as the JSON faces write it.
pub fn code_label(number: &str) -> &'static str {
    let code = number.trim().parse::<i32>().map_or(tonic::Code::Unknown, tonic::Code::from);
    crate::api::status::code_name(code)
}

/// Counts and times each gRPC request (the hook of [`ObserveLayer`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Observe;

/// Wraps every gRPC route in [`Observe`].
pub type ObserveLayer = AroundLayer<Observe>;

impl Hook for Observe {
    type Seen = (&'static str, Instant);

    fn see<B>(&self, req: &http::Request<B>) -> Self::Seen {
        (method_label(req.uri().path()), Instant::now())
    }

    fn around<E: Send + 'static>((method, started): Self::Seen, call: Call<E>) -> Call<E> {
        // Counted now, uncounted when the future ends or is dropped unpolled.
        let guard = InFlight::start("grpc");
        Box::pin(async move {
            let r = call.await;
            let code = match &r {
                Ok(resp) => resp.headers().get("grpc-status").and_then(|v| v.to_str().ok()).map_or("ok", code_label),
                Err(_) => "unknown",
            };
            prometheus::request("grpc", method, code, started.elapsed().as_secs_f64());
            drop(guard);
            r
        })
    }
}

/// A request in flight on a face: counted when started, uncounted when dropped (a call the client
/// abandons too).
struct InFlight(&'static str);

impl InFlight {
    fn start(face: &'static str) -> InFlight {
        prometheus::in_flight(face, 1.0);
        InFlight(face)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        prometheus::in_flight(self.0, -1.0);
    }
}

/// Axum middleware of an HTTP face: counts and times each request by its route (the router's matched
/// path; `other` when none matched) and HTTP status.
pub async fn observe_http(face: &'static str, req: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    let route: &'static str = match req.extensions().get::<axum::extract::MatchedPath>() {
        Some(p) => route_label(p.as_str()),
        None => "other",
    };
    let started = Instant::now();
    let _guard = InFlight::start(face);
    let resp = next.run(req).await;
    prometheus::request(face, route, status_label(resp.status().as_u16()), started.elapsed().as_secs_f64());
    resp
}

/// A route pattern as a `'static` label (routes are the faces' own, a bounded set).
fn route_label(route: &str) -> &'static str {
    static ROUTES: OnceLock<parking_lot::Mutex<HashMap<String, &'static str>>> = OnceLock::new();
    let mut map = ROUTES.get_or_init(Default::default).lock();
    if let Some(l) = map.get(route) {
        return l;
    }
    if map.len() >= 64 {
        return "other";
    }
    let label: &'static str = Box::leak(route.to_string().into_boxed_str());
    map.insert(route.to_string(), label);
    label
}

/// An HTTP status as a label.
fn status_label(status: u16) -> &'static str {
    match status {
        200 => "200",
        201 => "201",
        202 => "202",
        204 => "204",
        400 => "400",
        401 => "401",
        403 => "403",
        404 => "404",
        405 => "405",
        409 => "409",
        413 => "413",
        415 => "415",
        422 => "422",
        429 => "429",
        500 => "500",
        503 => "503",
        504 => "504",
        s if s < 300 => "2xx",
        s if s < 400 => "3xx",
        s if s < 500 => "4xx",
        _ => "5xx",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_served_methods_are_labels() {
        assert_eq!(method_label("/memgym.v1.MemoryEnv/CallTool"), "/memgym.v1.MemoryEnv/CallTool");
        assert_eq!(method_label("/grpc.health.v1.Health/Check"), "/grpc.health.v1.Health/Check");
        assert_eq!(method_label("/memgym.v1.MemoryEnv/Nope"), "other");
        assert_eq!(method_label("/x/y"), "other");
        assert!(known_methods().len() > 30, "{}", known_methods().len());
    }

    #[test]
    fn codes_are_named() {
        assert_eq!(code_label("0"), "ok");
        assert_eq!(code_label("3"), "invalid_argument");
        assert_eq!(code_label("14"), "unavailable");
        assert_eq!(code_label("junk"), "unknown");
        assert_eq!(status_label(200), "200");
        assert_eq!(status_label(418), "4xx");
    }
}
