//! Memory: records, the shared read-only M₀ per conversation, each episode's overlay of changes, and
//! the exact/HNSW search behind them.

mod base;
mod beam;
mod episode;
mod graph;
pub mod half;
pub mod lexical;
mod record;
pub mod vectors;

pub use base::{BaseMemory, IndexConfig, IndexMode, NoTombstones, SearchPath, Tombstones};
pub use beam::{SearchBeam, MAX_BEAM};
pub use episode::{EpisodeMemory, Scored};
pub use graph::{Graph, Malformed};
pub use record::{BadMemoryId, Filter, MemoryId, MemoryRecord, MemoryType, EXAMPLE_ID, REWORDED};

#[cfg(test)]
pub(crate) mod tests;
