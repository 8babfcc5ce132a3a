//! The application: what the `memgym` binary is made of above the wire edge. The flags (`cli`), their
//! validation into settings and the parts an environment is built from (`config`), the server that binds
//! every face (`server`), logging (`telemetry`) and the book's generated reference chapters (`reference_chapters`).
//! Nothing below imports it; `main.rs` dispatches to it and to the harness.

pub mod cli;
pub mod config;
pub mod reference_chapters;
pub mod server;
pub mod telemetry;
