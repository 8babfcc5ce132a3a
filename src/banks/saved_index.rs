//! A bank's HNSW index saved beside its rows, so that opening a bank reads its graph instead of
//! building it (minutes at 100,000 experiences, where reading takes well under a second).
//!
//! The saved bytes describe the rows of one version of the bank: its `uid` (a bank deleted and made
//! again under the same name differs), the `version` the graph was built at, the vector dimension, the
//! experience id of every graph node in node order, and the graph ([`Graph::encode`]), closed by a
//! 64-bit FNV-1a checksum of everything before it. The database stays the truth:
//! - bytes that are cut, damaged, from another bank or from another dimension are refused whole
//!   ([`decode`]), and the bank is built from its rows;
//! - bytes from an older version (the rows were committed, then the server stopped before it saved the
//!   index again, or another replica wrote since) are brought up to date from the store's change log:
//!   every node whose experience changed after that version is a tombstone, and the changed rows go to
//!   the library's overlay ([`super::library::Library::open_saved`]). A row the change log does not
//!   explain refuses the saved index.
//!
//! So a saved index is never served wrong, and the store may write it whenever it likes: after the
//! bank's rows commit, never instead of them.

use crate::memory::{Graph, Malformed};
use crate::util::fnv::fnv1a;

use super::store::BankMeta;

/// The first bytes of a saved index (format 1).
const MAGIC: &[u8; 8] = b"MGBIDX01";

/// A decoded saved index.
#[derive(Debug)]
pub struct SavedIndex {
    /// The bank's uid when saved.
    pub uid: u64,
    /// The bank version the graph describes.
    pub version: u64,
    /// Vector dimension.
    pub dim: u32,
    /// The experience id of every graph node, in node order.
    pub ids: Vec<u64>,
    /// The graph over those nodes.
    pub graph: Graph,
}

/// Why saved bytes are not used. Each one means: build the index from the rows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unusable {
    /// The bytes are cut or damaged (the checksum or a length disagrees).
    #[error("the saved index is damaged: {0}")]
    Damaged(String),
    /// The bytes are whole but describe another bank, dimension or a version the bank has not reached.
    #[error("the saved index is of another bank state: {0}")]
    Other(String),
    /// The change log does not explain the difference between the saved nodes and the rows.
    #[error("the saved index disagrees with the rows: {0}")]
    Disagrees(String),
}

impl From<Malformed> for Unusable {
    fn from(m: Malformed) -> Self {
        Unusable::Damaged(m.to_string())
    }
}

/// The bytes of a saved index: `meta`'s uid, version and dimension, the node ids and the graph.
pub fn encode(meta: &BankMeta, ids: &[u64], graph: &Graph) -> Vec<u8> {
    let mut out = Vec::with_capacity(48 + ids.len() * (8 + 4 * 40));
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&meta.uid.to_le_bytes());
    out.extend_from_slice(&meta.version.to_le_bytes());
    out.extend_from_slice(&meta.embedder_dim.to_le_bytes());
    out.extend_from_slice(&(ids.len() as u64).to_le_bytes());
    for id in ids {
        out.extend_from_slice(&id.to_le_bytes());
    }
    graph.encode(&mut out);
    let sum = fnv1a(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(b)
}

/// Decodes saved bytes, checking the checksum first, then that they are of `meta`'s bank (uid and
/// dimension) at a version it has reached.
pub fn decode(bytes: &[u8], meta: &BankMeta) -> Result<SavedIndex, Unusable> {
    const HEAD: usize = 8 + 8 + 8 + 4 + 8;
    if bytes.len() < HEAD + 8 || &bytes[..8] != MAGIC {
        return Err(Unusable::Damaged("not a saved index of this format".into()));
    }
    let (body, sum) = bytes.split_at(bytes.len() - 8);
    if fnv1a(body) != u64_at(sum, 0) {
        return Err(Unusable::Damaged("checksum mismatch".into()));
    }
    let uid = u64_at(body, 8);
    let version = u64_at(body, 16);
    let dim = u32::from_le_bytes([body[24], body[25], body[26], body[27]]);
    let n = u64_at(body, 28);
    if uid != meta.uid {
        return Err(Unusable::Other(format!("saved for bank uid {uid}, the bank's is {}", meta.uid)));
    }
    if dim != meta.embedder_dim {
        return Err(Unusable::Other(format!("saved at dimension {dim}, the bank's is {}", meta.embedder_dim)));
    }
    if version > meta.version {
        return Err(Unusable::Other(format!("saved at version {version}, the bank is at {}", meta.version)));
    }
    let n = usize::try_from(n).ok().filter(|n| n.checked_mul(8).is_some_and(|b| b <= body.len() - HEAD));
    let n = n.ok_or_else(|| Unusable::Damaged("node count larger than the bytes".into()))?;
    let ids: Vec<u64> = body[HEAD..HEAD + 8 * n].chunks_exact(8).map(|c| u64_at(c, 0)).collect();
    let (graph, rest) = Graph::decode(&body[HEAD + 8 * n..], n)?;
    if !rest.is_empty() {
        return Err(Unusable::Damaged(format!("{} bytes after the graph", rest.len())));
    }
    Ok(SavedIndex { uid, version, dim, ids, graph })
}
