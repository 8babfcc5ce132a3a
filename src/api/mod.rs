//! The wire edge. The only module that names generated protobuf types: services convert requests into
//! domain types ([`convert`]), call the [`crate::episode::Environment`], and map domain errors to
//! `tonic::Status` in one exhaustive place ([`status`]). The JSON faces — OpenEnv ([`openenv`]), MCP
//! ([`mcp`]), NeMo Gym's resources server ([`nemo_gym`]) and the Open Reward Standard ([`ors`]) — reach the same environment through [`gateway`], on the same conversions and errors.

pub mod calls;
pub mod faces;
pub mod grpc;
pub mod layers;
pub mod status;

pub use grpc::{AgentService, BanksService, DatasetService, LearnService, MemoryEnvService};

/// The one cap on a request, in bytes, on every face: a gRPC message (every service: a custom episode of
/// thousands of memories, an `ImportBank` of a 100,000-experience library, ~10 MB of JSON), an OpenEnv
/// HTTP body or WebSocket message, an MCP request body. Over it: gRPC `OUT_OF_RANGE` (tonic's decoder),
/// HTTP 413, or the WebSocket closed with 1009 (message too big).
pub const MAX_MESSAGE_BYTES: usize = 32 * 1024 * 1024;

/// A request on an episode, its id in the `memgym-episode` header: the header a proxy in front of
/// replicas routes by (the id names its replica, [`crate::episode::replica`]). Memgym's own gRPC clients
/// (the bench, the rollout harness) send every episode call this way.
pub fn on_episode<T>(episode_id: &str, message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Ok(v) = tonic::metadata::MetadataValue::try_from(episode_id) {
        request.metadata_mut().insert(crate::episode::replica::EPISODE_HEADER, v);
    }
    request
}

/// Generated protobuf and tonic code for `memgym.v1`.
#[allow(missing_docs, clippy::all)]
pub mod pb {
    tonic::include_proto!("memgym.v1");
}

/// Encoded descriptor set of `proto/memgym/v1`, served by reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/memgym_descriptor.bin"));

/// The parts of a refusal written in plain text (by axum, or by rmcp), for a face that answers every refusal
/// in its own JSON envelope (at the status the caller read first): its headers, and its text (`None` when
/// the body cannot be read within 4 KiB).
pub(crate) async fn plain_refusal(response: axum::response::Response) -> (http::HeaderMap, Option<String>) {
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 4096).await.ok().map(|b| String::from_utf8_lossy(&b).into_owned());
    (parts.headers, text)
}
