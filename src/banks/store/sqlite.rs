//! The embedded default: every bank in one SQLite file (`banks.db` under `--banks-dir`), in WAL mode (a
//! bulk commit through the rollback journal instead: [`BULK_ROWS`]) with `synchronous=FULL`, so a commit
//! is on disk before it returns and a crash keeps either all of a transaction or none of it. The server
//! holds the file exclusively: a second server on the same directory is refused at start with a message
//! pointing at PostgreSQL, because two processes caching the same banks would each miss the other's
//! writes. A file that is not a SQLite database, or fails `PRAGMA quick_check`, stops the server with an
//! error naming it; it is never reset.
//!
//! rusqlite is blocking: every call runs on tokio's blocking pool with the one connection.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};

use super::{BankMeta, BankStore, Commit, Committed, Experience, RowChange, Rows, StoreError, StoredExperience, UsageDelta};

/// The schema version this code writes.
const SCHEMA: i64 = 1;

const CREATE: &str = "
CREATE TABLE IF NOT EXISTS memgym_schema (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS banks (
    name TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    uid INTEGER NOT NULL,
    version INTEGER NOT NULL,
    next_id INTEGER NOT NULL,
    epoch INTEGER NOT NULL,
    max_size INTEGER NOT NULL,
    embedder_name TEXT NOT NULL,
    embedder_dim INTEGER NOT NULL,
    embedder_fingerprint TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS experiences (
    bank TEXT NOT NULL,
    id INTEGER NOT NULL,
    text TEXT NOT NULL,
    confidence REAL NOT NULL,
    domain TEXT NOT NULL,
    created_epoch INTEGER NOT NULL,
    usage_count INTEGER NOT NULL,
    last_used_epoch INTEGER,
    vector BLOB,
    changed INTEGER NOT NULL,
    deleted INTEGER NOT NULL,
    PRIMARY KEY (bank, id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS experiences_changed ON experiences (bank, changed);
CREATE TABLE IF NOT EXISTS documents (
    bank TEXT PRIMARY KEY,
    doc TEXT NOT NULL
) WITHOUT ROWID;
";

/// Banks in one SQLite file.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    path: PathBuf,
    conn: Arc<Mutex<Connection>>,
    /// Crash-test hook: abort the process after writing this many rows inside a commit's transaction
    /// (`MEMGYM_CRASH_AFTER_ROWS`, read at open; for the crash tests only).
    crash_after_rows: Option<usize>,
}

/// The crash-test hook's variable.
pub const CRASH_AFTER_ROWS_ENV: &str = "MEMGYM_CRASH_AFTER_ROWS";

impl SqliteStore {
    /// Opens (creating if needed) `dir/banks.db`, takes it exclusively and checks it. A first open that
    /// fails leaves nothing behind: the files (and the directory) this call created are removed again.
    pub fn open(dir: &Path) -> Result<SqliteStore, StoreError> {
        let path = dir.join("banks.db");
        let sidecars = ["banks.db", "banks.db-wal", "banks.db-shm", "banks.db-journal"].map(|f| dir.join(f));
        let existed = sidecars.clone().map(|p| p.exists());
        let dir_existed = dir.exists();
        let opened = Self::open_inner(dir, path);
        if opened.is_err() {
            for (p, had) in sidecars.iter().zip(existed) {
                if !had && p.is_file() {
                    let _ = std::fs::remove_file(p);
                }
            }
            if !dir_existed {
                // Only an empty directory is removed; anything else in it is not ours.
                let _ = std::fs::remove_dir(dir);
            }
        }
        opened
    }

    fn open_inner(dir: &Path, path: PathBuf) -> Result<SqliteStore, StoreError> {
        let unavailable = |message: String| StoreError::Unavailable { location: path.display().to_string(), message };
        std::fs::create_dir_all(dir).map_err(|e| unavailable(format!("creating {}: {e}", dir.display())))?;
        let conn = Connection::open(&path).map_err(|e| classify(&path, e))?;
        // The file has one owner: waiting for another server's lock would only delay the refusal.
        conn.busy_timeout(std::time::Duration::ZERO).map_err(|e| classify(&path, e))?;
        let crash_after_rows = std::env::var(CRASH_AFTER_ROWS_ENV).ok().and_then(|v| v.parse().ok());
        let store = SqliteStore { path: path.clone(), conn: Arc::new(Mutex::new(conn)), crash_after_rows };
        {
            let conn = store.conn.lock();
            // Not a database, or encrypted garbage: the first statement says so.
            let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0)).map_err(|e| classify(&path, e))?;
            if !mode.eq_ignore_ascii_case("wal") {
                return Err(unavailable(format!("cannot switch to WAL mode (got {mode})")));
            }
            conn.execute_batch("PRAGMA synchronous=FULL; PRAGMA locking_mode=EXCLUSIVE;").map_err(|e| classify(&path, e))?;
            // Take the exclusive lock now, so a second server fails at start and not at its first write.
            conn.execute_batch("BEGIN EXCLUSIVE; COMMIT;").map_err(|e| classify(&path, e))?;
            let check: String = conn.query_row("PRAGMA quick_check", [], |r| r.get(0)).map_err(|e| classify(&path, e))?;
            if check != "ok" {
                return Err(StoreError::Corrupt { location: path.display().to_string(), message: format!("quick_check: {check}") });
            }
            conn.execute_batch(CREATE).map_err(|e| classify(&path, e))?;
            let found: Option<i64> =
                conn.query_row("SELECT version FROM memgym_schema", [], |r| r.get(0)).optional().map_err(|e| classify(&path, e))?;
            match found {
                None => {
                    conn.execute("INSERT INTO memgym_schema (version) VALUES (?1)", [SCHEMA]).map_err(|e| classify(&path, e))?;
                }
                Some(SCHEMA) => {}
                Some(v) => {
                    return Err(StoreError::Corrupt {
                        location: path.display().to_string(),
                        message: format!("schema version {v}, this memgym reads {SCHEMA}"),
                    })
                }
            }
        }
        Ok(store)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where bank `name`'s saved index lives: `indexes/NAME.hnsw` beside the database (a bank name is
    /// a safe file name: letters, digits, `_`, `-` and `.`, not starting with `.`).
    pub fn index_file(&self, name: &str) -> PathBuf {
        index_file(&self.path, name)
    }

    /// Runs `f` with the connection on the blocking pool.
    async fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection, &Path) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let conn = Arc::clone(&self.conn);
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || f(&mut conn.lock(), &path))
            .await
            .map_err(|e| StoreError::Unavailable { location: self.path.display().to_string(), message: format!("worker failed: {e}") })?
    }
}

/// Commits of at least this many rows (an import, a large batch) are written through SQLite's rollback
/// journal instead of its write-ahead log. The log writes every page twice (into the log, then into the
/// file at the checkpoint), and a bulk commit's pages are nearly all new, which the rollback journal does
/// not copy at all. Importing 1,000,000 experiences on a quiet machine, the bench wrote 2.6 GB through the
/// log against 1.5 GB through the journal, in 14.1 against 10.7 s (medians of three; the Banks chapter,
/// run 13). Both are atomic and, with `synchronous=FULL`, durable when the commit returns; a crash in the
/// middle leaves a journal that the next open rolls back.
pub const BULK_ROWS: usize = 1_000;

/// Switches the connection's journal mode (`wal` or `delete`) between transactions, and checks it took.
fn journal_mode(conn: &Connection, path: &Path, mode: &str) -> Result<(), StoreError> {
    let got: String = conn.query_row(&format!("PRAGMA journal_mode={mode}"), [], |r| r.get(0)).map_err(|e| classify(path, e))?;
    if got.eq_ignore_ascii_case(mode) {
        Ok(())
    } else {
        Err(StoreError::Unavailable {
            location: path.display().to_string(),
            message: format!("cannot switch to journal mode {mode} (got {got})"),
        })
    }
}

#[allow(clippy::wildcard_enum_match_arm)] // rusqlite's error enum is open: every other error is I/O-like
/// A SQLite error as a store error: corruption is [`StoreError::Corrupt`], a lock held by another
/// process says so, the rest is unavailable.
fn classify(path: &Path, e: rusqlite::Error) -> StoreError {
    let location = path.display().to_string();
    match &e {
        rusqlite::Error::SqliteFailure(f, _)
            if matches!(f.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) =>
        {
            StoreError::Unavailable {
                location,
                message: "is in use by another memgym server (a SQLite banks file has one owner; serve several replicas from \
                          PostgreSQL with --banks-url postgres://…)"
                    .into(),
            }
        }
        rusqlite::Error::SqliteFailure(f, _)
            if matches!(f.code, rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase) =>
        {
            StoreError::Corrupt { location, message: e.to_string() }
        }
        _ => StoreError::Unavailable { location, message: e.to_string() },
    }
}

fn to_i64(path: &Path, what: &str, v: u64) -> Result<i64, StoreError> {
    i64::try_from(v)
        .map_err(|_| StoreError::Unavailable { location: path.display().to_string(), message: format!("{what} {v} is too large to store") })
}

fn to_u64(path: &Path, what: &str, v: i64) -> Result<u64, StoreError> {
    u64::try_from(v).map_err(|_| StoreError::Corrupt { location: path.display().to_string(), message: format!("negative {what} {v}") })
}

fn vector_of(path: &Path, bytes: &[u8]) -> Result<Vec<f32>, StoreError> {
    super::vector_bytes::decode(bytes).map_err(|message| StoreError::Corrupt { location: path.display().to_string(), message })
}

const META_COLUMNS: &str =
    "name, kind, uid, version, next_id, epoch, max_size, embedder_name, embedder_dim, embedder_fingerprint, created_at";
/// The column after [`META_COLUMNS`] in a listing: the bank's number of experiences.
const META_COUNT: usize = 11;

fn read_meta(path: &Path, r: &rusqlite::Row<'_>) -> Result<BankMeta, StoreError> {
    let get_i = |i: usize| r.get::<_, i64>(i).map_err(|e| classify(path, e));
    let get_s = |i: usize| r.get::<_, String>(i).map_err(|e| classify(path, e));
    Ok(BankMeta {
        name: get_s(0)?,
        kind: get_s(1)?,
        uid: get_i(2)? as u64,
        version: to_u64(path, "version", get_i(3)?)?,
        next_id: to_u64(path, "next_id", get_i(4)?)?,
        epoch: to_u64(path, "epoch", get_i(5)?)?,
        max_size: u32::try_from(get_i(6)?)
            .map_err(|_| StoreError::Corrupt { location: path.display().to_string(), message: "max_size out of range".into() })?,
        embedder_name: get_s(7)?,
        embedder_dim: u32::try_from(get_i(8)?)
            .map_err(|_| StoreError::Corrupt { location: path.display().to_string(), message: "embedder_dim out of range".into() })?,
        embedder_fingerprint: get_s(9)?,
        created_at: get_s(10)?,
    })
}

fn meta_of(tx: &Connection, path: &Path, name: &str) -> Result<Option<BankMeta>, StoreError> {
    let mut stmt = tx.prepare_cached(&format!("SELECT {META_COLUMNS} FROM banks WHERE name = ?1")).map_err(|e| classify(path, e))?;
    let mut rows = stmt.query([name]).map_err(|e| classify(path, e))?;
    match rows.next().map_err(|e| classify(path, e))? {
        Some(r) => Ok(Some(read_meta(path, r)?)),
        None => Ok(None),
    }
}

const EXP_COLUMNS: &str = "id, text, confidence, domain, created_epoch, usage_count, last_used_epoch, vector, deleted";

fn read_row(path: &Path, r: &rusqlite::Row<'_>) -> Result<RowChange, StoreError> {
    let id = to_u64(path, "id", r.get(0).map_err(|e| classify(path, e))?)?;
    if r.get::<_, i64>(8).map_err(|e| classify(path, e))? != 0 {
        return Ok(RowChange::Deleted(id));
    }
    Ok(RowChange::Put(StoredExperience { exp: read_exp(path, r, id)?, vector: vector_of(path, vector_blob(path, r, id)?)? }))
}

/// A row's vector, borrowed from the row, not copied: it is decoded straight from SQLite's buffer.
fn vector_blob<'r>(path: &Path, r: &'r rusqlite::Row<'_>, id: u64) -> Result<&'r [u8], StoreError> {
    let vector = r.get_ref(7).map_err(|e| classify(path, e))?;
    let vector = vector
        .as_blob_or_null()
        .map_err(|e| StoreError::Corrupt { location: path.display().to_string(), message: format!("experience {id}'s vector: {e}") })?;
    Ok(vector.unwrap_or_default())
}

/// The experience of a row of [`EXP_COLUMNS`].
fn read_exp(path: &Path, r: &rusqlite::Row<'_>, id: u64) -> Result<Experience, StoreError> {
    let err = |e| classify(path, e);
    let last: Option<i64> = r.get(6).map_err(err)?;
    Ok(Experience {
        id,
        text: r.get(1).map_err(err)?,
        confidence: r.get(2).map_err(err)?,
        domain: r.get(3).map_err(err)?,
        created_epoch: to_u64(path, "created_epoch", r.get(4).map_err(err)?)?,
        usage_count: to_u64(path, "usage_count", r.get(5).map_err(err)?)?,
        last_used_epoch: last.map(|v| to_u64(path, "last_used_epoch", v)).transpose()?,
    })
}

fn rows_since(tx: &Connection, path: &Path, name: &str, since: u64) -> Result<Vec<RowChange>, StoreError> {
    let sql = format!("SELECT {EXP_COLUMNS} FROM experiences WHERE bank = ?1 AND changed > ?2 ORDER BY id");
    let mut stmt = tx.prepare_cached(&sql).map_err(|e| classify(path, e))?;
    let mut rows = stmt.query(params![name, to_i64(path, "version", since)?]).map_err(|e| classify(path, e))?;
    let mut out = Vec::new();
    while let Some(r) = rows.next().map_err(|e| classify(path, e))? {
        out.push(read_row(path, r)?);
    }
    Ok(out)
}

/// The bank's live rows, by id, each vector decoded straight into one buffer (`meta.next_id` bounds how
/// many there are: the room reserved beyond the rows read is never touched, and is given back).
fn live_rows(tx: &Connection, path: &Path, meta: &BankMeta) -> Result<Rows, StoreError> {
    let sql = format!("SELECT {EXP_COLUMNS} FROM experiences WHERE bank = ?1 AND deleted = 0 ORDER BY id");
    let mut stmt = tx.prepare_cached(&sql).map_err(|e| classify(path, e))?;
    let mut rows = stmt.query(params![meta.name]).map_err(|e| classify(path, e))?;
    let mut out = Rows::with_capacity(meta.embedder_dim as usize, super::capacity_hint(meta));
    while let Some(r) = rows.next().map_err(|e| classify(path, e))? {
        let id = to_u64(path, "id", r.get(0).map_err(|e| classify(path, e))?)?;
        out.push_bytes(read_exp(path, r, id)?, vector_blob(path, r, id)?)
            .map_err(|message| StoreError::Corrupt { location: path.display().to_string(), message })?;
    }
    out.shrink();
    Ok(out)
}

fn write_commit(
    tx: &Transaction<'_>,
    path: &Path,
    expected: u64,
    c: &Commit,
    crash_after_rows: Option<usize>,
) -> Result<Committed, StoreError> {
    let err = |e| classify(path, e);
    let name = c.meta.name.as_str();
    let Some(current) = meta_of(tx, path, name)? else { return Ok(Committed::Conflict { current: None }) };
    if current.version != expected || current.uid != c.meta.uid {
        return Ok(Committed::Conflict { current: Some(current.version) });
    }
    let v = to_i64(path, "version", c.meta.version)?;
    if c.clear {
        tx.execute(
            "UPDATE experiences SET deleted = 1, text = '', vector = NULL, changed = ?2 WHERE bank = ?1 AND deleted = 0",
            params![name, v],
        )
        .map_err(err)?;
    }
    {
        let mut del = tx
            .prepare_cached("UPDATE experiences SET deleted = 1, text = '', vector = NULL, changed = ?3 WHERE bank = ?1 AND id = ?2")
            .map_err(err)?;
        for id in &c.delete {
            del.execute(params![name, to_i64(path, "id", *id)?, v]).map_err(err)?;
        }
        let mut put = tx
            .prepare_cached(
                "INSERT INTO experiences (bank, id, text, confidence, domain, created_epoch, usage_count, last_used_epoch, vector, changed, deleted)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 0)
                 ON CONFLICT (bank, id) DO UPDATE SET text = excluded.text, confidence = excluded.confidence, domain = excluded.domain,
                   created_epoch = excluded.created_epoch, usage_count = excluded.usage_count, last_used_epoch = excluded.last_used_epoch,
                   vector = excluded.vector, changed = excluded.changed, deleted = 0",
            )
            .map_err(err)?;
        for (n, StoredExperience { exp: e, vector }) in c.put.iter().enumerate() {
            if crash_after_rows == Some(n) {
                tracing::warn!("{CRASH_AFTER_ROWS_ENV}: aborting in the middle of a commit");
                std::process::abort();
            }
            put.execute(params![
                name,
                to_i64(path, "id", e.id)?,
                e.text,
                e.confidence,
                e.domain,
                to_i64(path, "created_epoch", e.created_epoch)?,
                to_i64(path, "usage_count", e.usage_count)?,
                e.last_used_epoch.map(|x| to_i64(path, "last_used_epoch", x)).transpose()?,
                super::vector_bytes::encode(vector),
                v,
            ])
            .map_err(err)?;
        }
    }
    if let Some(doc) = &c.document {
        tx.execute(
            "INSERT INTO documents (bank, doc) VALUES (?1, ?2) ON CONFLICT (bank) DO UPDATE SET doc = excluded.doc",
            params![name, doc],
        )
        .map_err(err)?;
    }
    let m = &c.meta;
    tx.execute(
        "UPDATE banks SET version = ?2, next_id = ?3, epoch = ?4, max_size = ?5, embedder_name = ?6, embedder_dim = ?7, embedder_fingerprint = ?8
         WHERE name = ?1",
        params![
            name,
            v,
            to_i64(path, "next_id", m.next_id)?,
            to_i64(path, "epoch", m.epoch)?,
            i64::from(m.max_size),
            m.embedder_name,
            i64::from(m.embedder_dim),
            m.embedder_fingerprint
        ],
    )
    .map_err(err)?;
    Ok(Committed::Done)
}

#[tonic::async_trait]
impl BankStore for SqliteStore {
    fn location(&self) -> String {
        format!("sqlite:{}", self.path.display())
    }

    fn shared(&self) -> bool {
        false
    }

    async fn list(&self) -> Result<Vec<(BankMeta, usize)>, StoreError> {
        self.with(|conn, path| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {META_COLUMNS}, (SELECT COUNT(*) FROM experiences e WHERE e.bank = banks.name AND e.deleted = 0) \
                     FROM banks ORDER BY name"
                ))
                .map_err(|e| classify(path, e))?;
            let mut rows = stmt.query([]).map_err(|e| classify(path, e))?;
            let mut out = Vec::new();
            while let Some(r) = rows.next().map_err(|e| classify(path, e))? {
                let meta = read_meta(path, r)?;
                let size: i64 = r.get(META_COUNT).map_err(|e| classify(path, e))?;
                out.push((meta, usize::try_from(size).unwrap_or(0)));
            }
            Ok(out)
        })
        .await
    }

    async fn count(&self) -> Result<usize, StoreError> {
        self.with(|conn, path| {
            let n: i64 = conn.query_row("SELECT COUNT(*) FROM banks", [], |r| r.get(0)).map_err(|e| classify(path, e))?;
            Ok(usize::try_from(n).unwrap_or(0))
        })
        .await
    }

    async fn meta(&self, name: &str) -> Result<Option<BankMeta>, StoreError> {
        let name = name.to_string();
        self.with(move |conn, path| meta_of(conn, path, &name)).await
    }

    async fn create(&self, meta: &BankMeta) -> Result<(), StoreError> {
        let m = meta.clone();
        self.with(move |conn, path| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|e| classify(path, e))?;
            if meta_of(&tx, path, &m.name)?.is_some() {
                return Err(StoreError::AlreadyExists(m.name.clone()));
            }
            // A bank of this name deleted earlier left tombstones: drop them with it.
            tx.execute("DELETE FROM experiences WHERE bank = ?1", [&m.name]).map_err(|e| classify(path, e))?;
            tx.execute("DELETE FROM documents WHERE bank = ?1", [&m.name]).map_err(|e| classify(path, e))?;
            let _ = std::fs::remove_file(index_file(path, &m.name));
            tx.execute(
                &format!("INSERT INTO banks ({META_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"),
                params![
                    m.name,
                    m.kind,
                    m.uid as i64,
                    to_i64(path, "version", m.version)?,
                    to_i64(path, "next_id", m.next_id)?,
                    to_i64(path, "epoch", m.epoch)?,
                    i64::from(m.max_size),
                    m.embedder_name,
                    i64::from(m.embedder_dim),
                    m.embedder_fingerprint,
                    m.created_at
                ],
            )
            .map_err(|e| classify(path, e))?;
            tx.commit().map_err(|e| classify(path, e))
        })
        .await
    }

    async fn delete(&self, name: &str, expected: Option<u64>) -> Result<Committed, StoreError> {
        let name = name.to_string();
        self.with(move |conn, path| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|e| classify(path, e))?;
            let Some(current) = meta_of(&tx, path, &name)? else { return Ok(Committed::Conflict { current: None }) };
            if expected.is_some_and(|v| v != current.version) {
                return Ok(Committed::Conflict { current: Some(current.version) });
            }
            tx.execute("DELETE FROM experiences WHERE bank = ?1", [&name]).map_err(|e| classify(path, e))?;
            tx.execute("DELETE FROM documents WHERE bank = ?1", [&name]).map_err(|e| classify(path, e))?;
            tx.execute("DELETE FROM banks WHERE name = ?1", [&name]).map_err(|e| classify(path, e))?;
            tx.commit().map_err(|e| classify(path, e))?;
            // Its saved index is of a bank that is gone (and a bank made again under the name has
            // another uid, so the bytes would be refused anyway): remove it, if it can be.
            let _ = std::fs::remove_file(index_file(path, &name));
            Ok(Committed::Done)
        })
        .await
    }

    async fn load(&self, name: &str) -> Result<Option<(BankMeta, Rows)>, StoreError> {
        let name = name.to_string();
        self.with(move |conn, path| {
            let tx = conn.transaction().map_err(|e| classify(path, e))?;
            let Some(meta) = meta_of(&tx, path, &name)? else { return Ok(None) };
            let rows = live_rows(&tx, path, &meta)?;
            Ok(Some((meta, rows)))
        })
        .await
    }

    async fn document(&self, name: &str) -> Result<Option<(BankMeta, Option<String>)>, StoreError> {
        let name = name.to_string();
        self.with(move |conn, path| {
            let tx = conn.transaction().map_err(|e| classify(path, e))?;
            let Some(meta) = meta_of(&tx, path, &name)? else { return Ok(None) };
            let doc: Option<String> = tx
                .query_row("SELECT doc FROM documents WHERE bank = ?1", [&name], |r| r.get(0))
                .optional()
                .map_err(|e| classify(path, e))?;
            Ok(Some((meta, doc)))
        })
        .await
    }

    async fn changes(&self, name: &str, since: u64) -> Result<Option<(BankMeta, Vec<RowChange>)>, StoreError> {
        let name = name.to_string();
        self.with(move |conn, path| {
            let tx = conn.transaction().map_err(|e| classify(path, e))?;
            let Some(meta) = meta_of(&tx, path, &name)? else { return Ok(None) };
            let rows = rows_since(&tx, path, &name, since)?;
            Ok(Some((meta, rows)))
        })
        .await
    }

    async fn commit(&self, expected: u64, c: Arc<Commit>) -> Result<Committed, StoreError> {
        let crash = self.crash_after_rows;
        let bulk = c.put.len() + c.delete.len() >= BULK_ROWS;
        self.with(move |conn, path| {
            // A file that will not leave the log takes the commit through it: slower, as safe.
            let bulk = bulk
                && journal_mode(conn, path, "delete")
                    .inspect_err(|e| tracing::warn!(error = %e, "a bulk commit stays on the write-ahead log"))
                    .is_ok();
            let out = (|| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|e| classify(path, e))?;
                let out = write_commit(&tx, path, expected, &c, crash)?;
                if out == Committed::Done {
                    tx.commit().map_err(|e| classify(path, e))?;
                }
                Ok(out)
            })();
            if bulk {
                // The commit's outcome stands either way: a connection left on the rollback journal is as
                // durable, only slower for small commits, and the next bulk commit or open tries again.
                if let Err(e) = journal_mode(conn, path, "wal") {
                    tracing::warn!(error = %e, "the banks file stayed on its rollback journal after a bulk commit");
                }
            }
            out
        })
        .await
    }

    async fn add_usage(&self, name: &str, deltas: &[UsageDelta]) -> Result<(), StoreError> {
        let name = name.to_string();
        let deltas = deltas.to_vec();
        self.with(move |conn, path| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|e| classify(path, e))?;
            {
                let mut stmt = tx
                    .prepare_cached(
                        "UPDATE experiences SET usage_count = usage_count + ?3,
                           last_used_epoch = MAX(COALESCE(last_used_epoch, ?4), ?4)
                         WHERE bank = ?1 AND id = ?2 AND deleted = 0",
                    )
                    .map_err(|e| classify(path, e))?;
                for d in &deltas {
                    stmt.execute(params![
                        name,
                        to_i64(path, "id", d.id)?,
                        to_i64(path, "usage", d.count)?,
                        to_i64(path, "last_used_epoch", d.last_used_epoch)?
                    ])
                    .map_err(|e| classify(path, e))?;
                }
            }
            tx.commit().map_err(|e| classify(path, e))
        })
        .await
    }

    async fn index(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let file = self.index_file(name);
        let location = file.display().to_string();
        tokio::task::spawn_blocking(move || match std::fs::read(&file) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StoreError::Unavailable { location, message: format!("reading the saved index: {e}") }),
        })
        .await
        .map_err(|e| StoreError::Unavailable { location: self.path.display().to_string(), message: format!("worker failed: {e}") })?
    }

    async fn put_index(&self, name: &str, _version: u64, bytes: Vec<u8>) -> Result<(), StoreError> {
        let file = self.index_file(name);
        let location = file.display().to_string();
        tokio::task::spawn_blocking(move || {
            std::fs::create_dir_all(file.parent().unwrap_or(Path::new(".")))
                .map_err(|e| (file.clone(), e))
                .and_then(|()| crate::util::atomic_file::write(&file, &bytes))
        })
        .await
        .map_err(|e| StoreError::Unavailable { location: location.clone(), message: format!("worker failed: {e}") })?
        .map_err(|(at, e)| StoreError::Unavailable { location, message: format!("saving the index ({}): {e}", at.display()) })
    }
}

/// Bank `name`'s saved index beside the database `db`.
fn index_file(db: &Path, name: &str) -> PathBuf {
    db.with_file_name("indexes").join(format!("{name}.hnsw"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(version: u64, next_id: u64) -> BankMeta {
        BankMeta {
            name: "lib".into(),
            kind: "experience".into(),
            uid: 7,
            version,
            next_id,
            epoch: 0,
            max_size: 0,
            embedder_name: "test".into(),
            embedder_dim: 2,
            embedder_fingerprint: "f".into(),
            created_at: "2026-11-29T00:00:00Z".into(),
        }
    }

    fn rows(ids: std::ops::Range<u64>) -> Vec<StoredExperience> {
        ids.map(|id| StoredExperience {
            exp: Experience {
                id,
                text: format!("experience {id}"),
                confidence: 0.5,
                domain: "d".into(),
                created_epoch: 0,
                usage_count: 0,
                last_used_epoch: None,
            },
            vector: vec![0.6, 0.8],
        })
        .collect()
    }

    fn mode(store: &SqliteStore) -> String {
        store.conn.lock().query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap()
    }

    /// A bulk commit goes through the rollback journal and a small one through the log; either way the
    /// connection is back on the log afterwards, and every row is there, also after a reopen.
    #[tokio::test]
    async fn a_bulk_commit_bypasses_the_log_and_the_file_returns_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).unwrap();
        store.create(&meta(0, 0)).await.unwrap();
        let n = BULK_ROWS as u64;
        for (expected, put) in [(0, rows(0..n)), (1, rows(n..n + 3)), (2, rows(n + 3..2 * n + 3))] {
            let next = put.last().unwrap().exp.id + 1;
            let commit = Commit { put, delete: Vec::new(), clear: false, meta: meta(expected + 1, next), document: None };
            assert_eq!(store.commit(expected, Arc::new(commit)).await.unwrap(), Committed::Done);
            assert_eq!(mode(&store), "wal", "after commit {expected}");
        }
        let stale = Commit { put: rows(0..n), delete: Vec::new(), clear: false, meta: meta(1, n), document: None };
        assert_eq!(store.commit(0, Arc::new(stale)).await.unwrap(), Committed::Conflict { current: Some(3) });
        assert_eq!(mode(&store), "wal", "after a refused bulk commit");
        drop(store);
        let store = SqliteStore::open(dir.path()).unwrap();
        let (m, rows) = store.load("lib").await.unwrap().unwrap();
        assert_eq!((m.version, rows.len()), (3, 2 * BULK_ROWS + 3));
    }
}
