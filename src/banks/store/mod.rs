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

/// One row change since a version: an experience written, or the id of one deleted.
#[derive(Debug, Clone, PartialEq)]
pub enum RowChange {
    /// Written (created or replaced).
    Put(StoredExperience),
    /// Deleted.
    Deleted(u64),
}

/// The experiences written among `rows` (a live load holds no tombstones; this drops any).
pub fn puts(rows: Vec<RowChange>) -> Vec<StoredExperience> {
    rows.into_iter()
        .filter_map(|r| match r {
            RowChange::Put(e) => Some(e),
            RowChange::Deleted(_) => None,
        })
        .collect()
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
    async fn load(&self, name: &str) -> Result<Option<(BankMeta, Vec<StoredExperience>)>, StoreError>;

    /// The bank's counters and its document (`None` before the first write of one); `None` if there is
    /// no such bank. Both from one snapshot.
    async fn document(&self, name: &str) -> Result<Option<(BankMeta, Option<String>)>, StoreError>;

    /// The row changes after `since` (exclusive), with the counters; `None` if the bank is gone.
    async fn changes(&self, name: &str, since: u64) -> Result<Option<(BankMeta, Vec<RowChange>)>, StoreError>;

    /// Writes `commit` if the bank is at `expected` (its version before the write), in one durable
    /// transaction.
    async fn commit(&self, expected: u64, commit: &Commit) -> Result<Committed, StoreError>;

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
