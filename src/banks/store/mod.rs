//! Where banks live: the [`BankStore`] trait and its two implementations, SQLite embedded in the
//! server ([`sqlite::SqliteStore`], the default: one file under `--banks-dir`) and PostgreSQL for
//! several replicas sharing banks. A store holds each bank's counters and its experiences with their
//! vectors; every commit is one transaction, durable before it returns, and checks the bank's version
//! inside the transaction, so a write raced by another writer (or replica) changes nothing.
//!
//! Deleted experiences stay as tombstone rows carrying the version that deleted them, so a replica can
//! catch up on the changes after the version it holds ([`BankStore::changes`]) instead of reloading.

pub mod observed;
pub mod postgres;
pub mod sqlite;
pub mod vector_bytes;

use std::sync::Arc;

use half::f16;

use crate::util::excerpt::quoted;

/// A bank's counters, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct BankMeta {
    /// The bank's name.
    pub name: String,
    /// "experience".
    pub kind: String,
    /// A random id given at creation: a bank deleted and created again under the same name differs.
    pub uid: u64,
    /// Incremented by every write.
    pub version: u64,
    /// The number of the next id.
    pub next_id: u64,
    /// The current epoch.
    pub epoch: u64,
    /// The size `Compress` keeps by default.
    pub max_size: u32,
    /// Embedder name, dimension and fingerprint of the stored vectors.
    pub embedder_name: String,
    /// Vector dimension.
    pub embedder_dim: u32,
    /// Embedder fingerprint.
    pub embedder_fingerprint: String,
    /// Creation time, RFC 3339 UTC.
    pub created_at: String,
}

/// One experience (usage included).
#[derive(Debug, Clone, PartialEq)]
pub struct Experience {
    /// The N of "G{N}".
    pub id: u64,
    /// The text.
    pub text: String,
    /// In [0, 1].
    pub confidence: f64,
    /// The domain.
    pub domain: String,
    /// Epoch of creation.
    pub created_epoch: u64,
    /// Counting retrievals.
    pub usage_count: u64,
    /// Epoch of the last counting retrieval.
    pub last_used_epoch: Option<u64>,
}

/// One experience with its vector, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredExperience {
    /// The experience.
    pub exp: Experience,
    /// Unit vector (or zeros), `embedder_dim` long.
    pub vector: Vec<f32>,
}

/// Experiences with their vectors in one row-major buffer of `f16`s, `dim` values each (zeros for an
/// experience stored without a vector, or with one of another dimension): how a bank's live rows are read
/// and how a rebuild takes them. Every vector memory holds is at half precision, so `f16` loses nothing, and
/// it is how the engine keeps a bank's vectors ([`crate::memory::vectors`]). One buffer rather than a
/// vector per row: at a million rows the per-row buffers were most of an open's allocations, and the buffer
/// becomes the engine's as it is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rows {
    dim: usize,
    exps: Vec<Experience>,
    vectors: Vec<f16>,
}

impl Rows {
    /// No rows yet, room for `capacity` (a hint: only the pages written are resident).
    pub fn with_capacity(dim: usize, capacity: usize) -> Rows {
        Rows { dim, exps: Vec::with_capacity(capacity), vectors: Vec::with_capacity(capacity * dim) }
    }

    /// Appends an experience and its vector (rounded to half precision; zeros when `vector` is not `dim`
    /// long).
    pub fn push(&mut self, exp: Experience, vector: &[f32]) {
        crate::memory::vectors::push_narrowed(&mut self.vectors, vector, self.dim);
        self.exps.push(exp);
    }

    /// Appends an experience and the vector a store keeps in `bytes` ([`vector_bytes`]), decoded straight
    /// into the buffer. The error says what the bytes are instead.
    pub fn push_bytes(&mut self, exp: Experience, bytes: &[u8]) -> Result<(), String> {
        let start = self.vectors.len();
        if vector_bytes::decode_half_into(bytes, &mut self.vectors)? != self.dim {
            self.vectors.truncate(start);
            self.vectors.extend(std::iter::repeat_n(f16::ZERO, self.dim));
        }
        self.exps.push(exp);
        Ok(())
    }

    /// The rows of `stored`, in its order.
    pub fn from_stored(dim: usize, stored: Vec<StoredExperience>) -> Rows {
        let mut rows = Rows::with_capacity(dim, stored.len());
        for s in stored {
            rows.push(s.exp, &s.vector);
        }
        rows
    }

    /// Gives back spare room when a capacity hint was well above the rows read.
    pub fn shrink(&mut self) {
        if self.exps.capacity() > self.exps.len() + self.exps.len() / 4 + 16 {
            self.exps.shrink_to_fit();
            self.vectors.shrink_to_fit();
        }
    }

    /// The vector dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// How many rows.
    pub fn len(&self) -> usize {
        self.exps.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.exps.is_empty()
    }

    /// The experiences, in order.
    pub fn exps(&self) -> &[Experience] {
        &self.exps
    }

    /// Row `i`'s vector.
    pub fn vector(&self, i: usize) -> &[f16] {
        &self.vectors[i * self.dim..(i + 1) * self.dim]
    }

    /// Row `i`'s vector as `f32`s.
    pub fn vector_f32(&self, i: usize) -> Vec<f32> {
        self.vector(i).iter().map(|x| x.to_f32()).collect()
    }

    /// Sorts the rows by experience id (a store reads them in id order; this is for other callers).
    pub fn sort_by_id(&mut self) {
        if self.exps.is_sorted_by_key(|e| e.id) {
            return;
        }
        let mut order: Vec<usize> = (0..self.len()).collect();
        order.sort_by_key(|&i| self.exps[i].id);
        let mut sorted = Rows::with_capacity(self.dim, self.len());
        for &i in &order {
            sorted.exps.push(self.exps[i].clone());
            sorted.vectors.extend_from_slice(self.vector(i));
        }
        *self = sorted;
    }

    /// The experiences and the buffer.
    pub fn into_parts(self) -> (Vec<Experience>, Vec<f16>) {
        (self.exps, self.vectors)
    }
}

/// One row change since a version: an experience written, or the id of one deleted.
#[derive(Debug, Clone, PartialEq)]
pub enum RowChange {
    /// Written (created or replaced).
    Put(StoredExperience),
    /// Deleted.
    Deleted(u64),
}

/// How many rows to reserve room for when loading the bank at `meta`: its next id bounds its live
/// experiences (capped: a bank past the cap grows its buffers as it is read).
fn capacity_hint(meta: &BankMeta) -> usize {
    const CAP: u64 = 2_000_000;
    meta.next_id.min(CAP) as usize
}

/// What one write changes, applied in one transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct Commit {
    /// Experiences created or replaced.
    pub put: Vec<StoredExperience>,
    /// Ids deleted.
    pub delete: Vec<u64>,
    /// Delete every experience first (an import that replaces the bank).
    pub clear: bool,
    /// The counters after the write (`version` is the new version).
    pub meta: BankMeta,
    /// The bank's document, replacing the stored one (agent banks keep their memory as one document).
    pub document: Option<String>,
}

/// A committed write's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Committed {
    /// Written; the bank is now at `meta.version`.
    Done,
    /// The bank was not at the expected version (or was deleted); nothing was written.
    Conflict {
        /// The version found, `None` if the bank is gone.
        current: Option<u64>,
    },
}

/// A usage increment waiting to be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsageDelta {
    /// The experience.
    pub id: u64,
    /// Counting retrievals since the last flush.
    pub count: u64,
    /// The latest epoch among them.
    pub last_used_epoch: u64,
}

/// Why the database failed. Never a silent reset: the message names the database.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StoreError {
    /// The database cannot be reached or written (I/O, locks, connection).
    #[error("banks database {location}: {message}")]
    Unavailable {
        /// File path or URL (without password).
        location: String,
        /// What failed.
        message: String,
    },
    /// The database is corrupt or holds values memgym did not write.
    #[error("banks database {location} is corrupt: {message}")]
    Corrupt {
        /// File path or URL (without password).
        location: String,
        /// What is wrong.
        message: String,
    },
    /// A bank with this name exists.
    #[error("bank {} already exists", quoted(.0))]
    AlreadyExists(String),
}

/// The storage of banks. Implementations are blocking-free for async callers: SQLite runs on the
/// blocking pool, PostgreSQL is async.
#[tonic::async_trait]
pub trait BankStore: Send + Sync + std::fmt::Debug {
    /// Where the banks live, for messages ("sqlite:/var/lib/memgym/banks.db").
    fn location(&self) -> String;

    /// Whether other servers may write the same banks (PostgreSQL): a bank held in memory is then
    /// brought up to date before each request.
    fn shared(&self) -> bool;

    /// Every bank's counters and number of experiences, by name (counted in the database: no bank is
    /// loaded to list it).
    async fn list(&self) -> Result<Vec<(BankMeta, usize)>, StoreError>;

    /// How many banks there are.
    async fn count(&self) -> Result<usize, StoreError>;

    /// One bank's counters; `None` if there is no such bank.
    async fn meta(&self, name: &str) -> Result<Option<BankMeta>, StoreError>;

    /// Creates a bank; [`StoreError::AlreadyExists`] if the name is taken.
    async fn create(&self, meta: &BankMeta) -> Result<(), StoreError>;

    /// Deletes a bank and its rows if it is at `expected` (at any version when `None`);
    /// [`Committed::Conflict`] with `current: None` when there is no such bank.
    async fn delete(&self, name: &str, expected: Option<u64>) -> Result<Committed, StoreError>;

    /// The bank's live experiences, by id, with its counters.
    async fn load(&self, name: &str) -> Result<Option<(BankMeta, Rows)>, StoreError>;

    /// The bank's counters and its document (`None` before the first write of one); `None` if there is
    /// no such bank. Both from one snapshot.
    async fn document(&self, name: &str) -> Result<Option<(BankMeta, Option<String>)>, StoreError>;

    /// The row changes after `since` (exclusive), with the counters; `None` if the bank is gone.
    async fn changes(&self, name: &str, since: u64) -> Result<Option<(BankMeta, Vec<RowChange>)>, StoreError>;

    /// Writes `commit` if the bank is at `expected` (its version before the write), in one durable
    /// transaction. Shared, not borrowed: a store that writes on another thread keeps it without a copy (a
    /// 1,000,000-experience import is a gigabyte), and the caller gets it back once the call returns.
    async fn commit(&self, expected: u64, commit: Arc<Commit>) -> Result<Committed, StoreError>;

    /// Adds usage increments (not a version change).
    async fn add_usage(&self, name: &str, deltas: &[UsageDelta]) -> Result<(), StoreError>;

    /// The bank's saved index ([`crate::banks::saved_index`]), as last written; `None` if there is none.
    /// The bytes are checked by their reader, so a store may return stale or damaged ones.
    async fn index(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError>;

    /// Saves the bank's index of `version`, replacing an older one; written after the rows it
    /// describes committed, and atomically (a reader sees the old bytes or the new, never a mix). A
    /// store shared by replicas keeps the newest version when two race.
    async fn put_index(&self, name: &str, version: u64, bytes: Vec<u8>) -> Result<(), StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn exp(id: u64) -> Experience {
        Experience {
            id,
            text: format!("e{id}"),
            confidence: 0.5,
            domain: "d".into(),
            created_epoch: 0,
            usage_count: 0,
            last_used_epoch: None,
        }
    }

    proptest! {
        /// Rows read from a store's bytes hold each row's vector at its place (zeros for one missing or of
        /// another dimension, never a shifted buffer), equal to the rows built from decoded vectors, and
        /// sorting by id moves each vector with its experience.
        #[test]
        fn rows_keep_each_vector_with_its_experience(
            vs in proptest::collection::vec((any::<u64>(), proptest::collection::vec(-1.0f32..1.0, 0..6)), 0..30),
        ) {
            let dim = 4;
            let mut from_bytes = Rows::with_capacity(dim, 1_000);
            let mut stored = Vec::new();
            for (i, (id, v)) in vs.iter().enumerate() {
                let e = Experience { id: *id, ..exp(i as u64) };
                from_bytes.push_bytes(e.clone(), &vector_bytes::encode(v)).unwrap();
                stored.push(StoredExperience { exp: e, vector: vector_bytes::decode(&vector_bytes::encode(v)).unwrap() });
            }
            from_bytes.shrink();
            let rows = Rows::from_stored(dim, stored.clone());
            prop_assert_eq!(&from_bytes, &rows);
            for (i, s) in stored.iter().enumerate() {
                let want = if s.vector.len() == dim { s.vector.clone() } else { vec![0.0; dim] };
                prop_assert_eq!(rows.vector_f32(i), want);
            }
            let mut sorted = rows.clone();
            sorted.sort_by_id();
            prop_assert!(sorted.exps().is_sorted_by_key(|e| e.id));
            for (i, e) in sorted.exps().iter().enumerate() {
                let at = rows.exps().iter().position(|x| x == e).unwrap();
                prop_assert_eq!(sorted.vector(i), rows.vector(at));
            }
            prop_assert!(from_bytes.push_bytes(exp(9), &[1, 2, 3]).unwrap_err().contains("3 bytes"));
            prop_assert_eq!(from_bytes.len(), vs.len());
        }
    }
}
