//! The JSON faces beside gRPC, each on its own listener: the gateway they share (open, call, score and
//! close from JSON, on the gRPC conversions), the HTTP status table (`http_status`), MCP (with its session
//! cap), NeMo Gym's resources server, OpenEnv (HTTP and WebSocket) and the Open Reward Standard.

pub mod gateway;
pub mod http_status;
pub mod mcp;
mod mcp_sessions;
pub mod nemo_gym;
pub mod openenv;
pub mod ors;
pub mod sessions;
