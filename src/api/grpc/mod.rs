//! The gRPC face: the services (`MemoryEnv`, `Dataset`, `Banks`, `AgentMemory`, `Learn`), the only code
//! that sees generated protobuf types, their conversions to and from the domain (`convert`, `TryFrom` impls
//! that destructure every message) and page tokens (`page`).

mod agent_service;
mod banks_service;
pub mod convert;
mod dataset_service;
mod env_service;
mod import_stream;
mod learn_service;
pub mod page;

pub use agent_service::AgentService;
pub use banks_service::BanksService;
pub use dataset_service::DatasetService;
pub use env_service::MemoryEnvService;
pub use import_stream::import_chunks;
pub use learn_service::LearnService;
