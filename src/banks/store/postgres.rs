//! Banks in PostgreSQL, for several memgym replicas sharing them (`--banks-url postgres://…`).
//!
//! The same two tables as the SQLite store (`memgym_banks`, `memgym_experiences`, with the version that
//! last changed each row and tombstones for deletions). A commit is one transaction that locks the
//! bank's row (`SELECT … FOR UPDATE`), checks its version and uid, writes every row in one statement
//! (`UNNEST` of arrays), and bumps the version: two replicas racing for the same version serialise on
//! the row lock and the second sees the first's version and changes nothing. PostgreSQL's defaults
//! (`fsync`, `synchronous_commit = on`) make the commit durable before it returns. Replicas catch up by
//! reading the rows changed after the version they hold ([`BankStore::changes`]), in one snapshot.
//!
//! The schema is created at connect under an advisory lock, so replicas starting together do not race.

use std::sync::Arc;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::types::ToSql;
use tokio_postgres::{IsolationLevel, NoTls, Row};

use super::{BankMeta, BankStore, Commit, Committed, Experience, RowChange, Rows, StoreError, StoredExperience, UsageDelta};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS memgym_banks (
    name TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    uid BIGINT NOT NULL,
    version BIGINT NOT NULL,
    next_id BIGINT NOT NULL,
    epoch BIGINT NOT NULL,
    max_size INTEGER NOT NULL,
    embedder_name TEXT NOT NULL,
    embedder_dim INTEGER NOT NULL,
    embedder_fingerprint TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS memgym_experiences (
    bank TEXT NOT NULL,
    id BIGINT NOT NULL,
    text TEXT NOT NULL,
    confidence DOUBLE PRECISION NOT NULL,
    domain TEXT NOT NULL,
    created_epoch BIGINT NOT NULL,
    usage_count BIGINT NOT NULL,
    last_used_epoch BIGINT,
    vector BYTEA,
    changed BIGINT NOT NULL,
    deleted BOOLEAN NOT NULL,
    PRIMARY KEY (bank, id)
);
CREATE INDEX IF NOT EXISTS memgym_experiences_changed ON memgym_experiences (bank, changed);
CREATE TABLE IF NOT EXISTS memgym_documents (
    bank TEXT PRIMARY KEY,
    doc TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS memgym_indexes (
    bank TEXT PRIMARY KEY,
    version BIGINT NOT NULL,
    data BYTEA NOT NULL
);
";

/// An arbitrary key for the advisory lock that serialises schema creation.
const SCHEMA_LOCK: i64 = 0x6d65_6d67_796d_0001;

const META_COLUMNS: &str =
    "name, kind, uid, version, next_id, epoch, max_size, embedder_name, embedder_dim, embedder_fingerprint, created_at";
/// The column after [`META_COLUMNS`] in a listing: the bank's number of experiences.
const META_COUNT: usize = 11;

const EXP_COLUMNS: &str = "id, text, confidence, domain, created_epoch, usage_count, last_used_epoch, vector, deleted";

/// Banks in a PostgreSQL database.
#[derive(Clone)]
pub struct PostgresStore {
    pool: Pool,
    location: String,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore").field("location", &self.location).finish()
    }
}

/// The URL with any password replaced, for messages and logs.
pub fn redacted(url: &str) -> String {
    if !url.contains("://") {
        // key=value form: hide the value of `password`.
        return url
            .split_whitespace()
            .map(|kv| if kv.starts_with("password=") { "password=***" } else { kv })
            .collect::<Vec<_>>()
            .join(" ");
    }
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let userinfo = &url[s + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..s + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

fn unavailable(location: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable { location: location.to_string(), message: e.to_string() }
}

fn to_i64(location: &str, what: &str, v: u64) -> Result<i64, StoreError> {
    i64::try_from(v).map_err(|_| unavailable(location, format!("{what} {v} is too large to store")))
}

fn to_u64(location: &str, what: &str, v: i64) -> Result<u64, StoreError> {
    u64::try_from(v).map_err(|_| StoreError::Corrupt { location: location.to_string(), message: format!("negative {what} {v}") })
}

impl PostgresStore {
    /// Connects to `url` (`postgres://user:password@host:port/db` or a key=value string) and creates
    /// the schema if needed.
    pub async fn connect(url: &str) -> Result<PostgresStore, StoreError> {
        let location = redacted(url);
        let config: tokio_postgres::Config = url.parse().map_err(|e| unavailable(&location, format!("not a PostgreSQL URL: {e}")))?;
        let manager = Manager::from_config(config, NoTls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
        let pool = Pool::builder(manager).max_size(16).build().map_err(|e| unavailable(&location, e))?;
        let store = PostgresStore { pool, location };
        let mut client = store.client().await?;
        let tx = client.transaction().await.map_err(|e| store.err(e))?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK]).await.map_err(|e| store.err(e))?;
        tx.batch_execute(SCHEMA).await.map_err(|e| store.err(e))?;
        tx.commit().await.map_err(|e| store.err(e))?;
        Ok(store)
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool.get().await.map_err(|e| unavailable(&self.location, format!("connecting: {e}")))
    }

    fn err(&self, e: tokio_postgres::Error) -> StoreError {
        match e.code() {
            Some(c) if *c == tokio_postgres::error::SqlState::DATA_CORRUPTED || *c == tokio_postgres::error::SqlState::INDEX_CORRUPTED => {
                StoreError::Corrupt { location: self.location.clone(), message: e.to_string() }
            }
            _ => unavailable(&self.location, e),
        }
    }

    fn meta_of(&self, r: &Row) -> Result<BankMeta, StoreError> {
        let corrupt = |what: &str| StoreError::Corrupt { location: self.location.clone(), message: format!("{what} out of range") };
        Ok(BankMeta {
            name: r.get(0),
            kind: r.get(1),
            uid: r.get::<_, i64>(2) as u64,
            version: to_u64(&self.location, "version", r.get(3))?,
            next_id: to_u64(&self.location, "next_id", r.get(4))?,
            epoch: to_u64(&self.location, "epoch", r.get(5))?,
            max_size: u32::try_from(r.get::<_, i32>(6)).map_err(|_| corrupt("max_size"))?,
            embedder_name: r.get(7),
            embedder_dim: u32::try_from(r.get::<_, i32>(8)).map_err(|_| corrupt("embedder_dim"))?,
            embedder_fingerprint: r.get(9),
            created_at: r.get(10),
        })
    }

    fn row_of(&self, r: &Row) -> Result<RowChange, StoreError> {
        let id = to_u64(&self.location, "id", r.get(0))?;
        if r.get::<_, bool>(8) {
            return Ok(RowChange::Deleted(id));
        }
        let bytes: Option<&[u8]> = r.get(7);
        let vector = super::vector_bytes::decode(bytes.unwrap_or_default())
            .map_err(|message| StoreError::Corrupt { location: self.location.clone(), message })?;
        Ok(RowChange::Put(StoredExperience { exp: self.exp_of(r, id)?, vector }))
    }

    /// The experience of a row of [`EXP_COLUMNS`].
    fn exp_of(&self, r: &Row, id: u64) -> Result<Experience, StoreError> {
        let last: Option<i64> = r.get(6);
        Ok(Experience {
            id,
            text: r.get(1),
            confidence: r.get(2),
            domain: r.get(3),
            created_epoch: to_u64(&self.location, "created_epoch", r.get(4))?,
            usage_count: to_u64(&self.location, "usage_count", r.get(5))?,
            last_used_epoch: last.map(|v| to_u64(&self.location, "last_used_epoch", v)).transpose()?,
        })
    }

    /// A read-only transaction that sees one snapshot.
    async fn snapshot<'a>(&self, client: &'a mut deadpool_postgres::Object) -> Result<deadpool_postgres::Transaction<'a>, StoreError> {
        client.build_transaction().isolation_level(IsolationLevel::RepeatableRead).read_only(true).start().await.map_err(|e| self.err(e))
    }

    /// The bank's counters, in `tx`.
    async fn meta_in(&self, tx: &deadpool_postgres::Transaction<'_>, name: &str) -> Result<Option<BankMeta>, StoreError> {
        let row =
            tx.query_opt(&format!("SELECT {META_COLUMNS} FROM memgym_banks WHERE name = $1"), &[&name]).await.map_err(|e| self.err(e))?;
        row.map(|r| self.meta_of(&r)).transpose()
    }

    /// The bank's counters and its rows changed after `since`, in one snapshot.
    async fn read(&self, name: &str, since: u64) -> Result<Option<(BankMeta, Vec<RowChange>)>, StoreError> {
        let mut client = self.client().await?;
        let tx = self.snapshot(&mut client).await?;
        let Some(meta) = self.meta_in(&tx, name).await? else { return Ok(None) };
        let v = to_i64(&self.location, "version", since)?;
        let rows = tx
            .query(&format!("SELECT {EXP_COLUMNS} FROM memgym_experiences WHERE bank = $1 AND changed > $2 ORDER BY id"), &[&name, &v])
            .await
            .map_err(|e| self.err(e))?;
        tx.commit().await.map_err(|e| self.err(e))?;
        let rows = rows.iter().map(|r| self.row_of(r)).collect::<Result<Vec<_>, _>>()?;
        Ok(Some((meta, rows)))
    }

    /// The bank's counters and its live rows, by id, in one snapshot: streamed, each vector decoded straight
    /// into one buffer as its row arrives (not every row held first).
    async fn live(&self, name: &str) -> Result<Option<(BankMeta, Rows)>, StoreError> {
        use futures_util::stream::StreamExt;
        let mut client = self.client().await?;
        let tx = self.snapshot(&mut client).await?;
        let Some(meta) = self.meta_in(&tx, name).await? else { return Ok(None) };
        let sql = format!("SELECT {EXP_COLUMNS} FROM memgym_experiences WHERE bank = $1 AND NOT deleted ORDER BY id");
        let params: [&(dyn ToSql + Sync); 1] = [&name];
        let stream = tx.query_raw(sql.as_str(), params).await.map_err(|e| self.err(e))?;
        let mut stream = std::pin::pin!(stream);
        let mut out = Rows::with_capacity(meta.embedder_dim as usize, super::capacity_hint(&meta));
        while let Some(r) = stream.next().await {
            let r = r.map_err(|e| self.err(e))?;
            let id = to_u64(&self.location, "id", r.get(0))?;
            let bytes: Option<&[u8]> = r.get(7);
            out.push_bytes(self.exp_of(&r, id)?, bytes.unwrap_or_default())
                .map_err(|message| StoreError::Corrupt { location: self.location.clone(), message })?;
        }
        tx.commit().await.map_err(|e| self.err(e))?;
        out.shrink();
        Ok(Some((meta, out)))
    }
}

#[tonic::async_trait]
impl BankStore for PostgresStore {
    fn location(&self) -> String {
        self.location.clone()
    }

    fn shared(&self) -> bool {
        true
    }

    async fn list(&self) -> Result<Vec<(BankMeta, usize)>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                &format!(
                    "SELECT {META_COLUMNS}, (SELECT COUNT(*) FROM memgym_experiences e WHERE e.bank = memgym_banks.name AND NOT e.deleted) \
                     FROM memgym_banks ORDER BY name"
                ),
                &[],
            )
            .await
            .map_err(|e| self.err(e))?;
        rows.iter().map(|r| Ok((self.meta_of(r)?, usize::try_from(r.get::<_, i64>(META_COUNT)).unwrap_or(0)))).collect()
    }

    async fn count(&self) -> Result<usize, StoreError> {
        let client = self.client().await?;
        let row = client.query_one("SELECT COUNT(*) FROM memgym_banks", &[]).await.map_err(|e| self.err(e))?;
        Ok(usize::try_from(row.get::<_, i64>(0)).unwrap_or(0))
    }

    async fn meta(&self, name: &str) -> Result<Option<BankMeta>, StoreError> {
        let client = self.client().await?;
        let stmt =
            client.prepare_cached(&format!("SELECT {META_COLUMNS} FROM memgym_banks WHERE name = $1")).await.map_err(|e| self.err(e))?;
        let row = client.query_opt(&stmt, &[&name]).await.map_err(|e| self.err(e))?;
        row.map(|r| self.meta_of(&r)).transpose()
    }

    async fn create(&self, m: &BankMeta) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(|e| self.err(e))?;
        // Tombstones of a deleted bank of this name go first; the insert then claims the name.
        let exists = tx.query_opt("SELECT 1 FROM memgym_banks WHERE name = $1 FOR UPDATE", &[&m.name]).await.map_err(|e| self.err(e))?;
        if exists.is_some() {
            return Err(StoreError::AlreadyExists(m.name.clone()));
        }
        tx.execute("DELETE FROM memgym_experiences WHERE bank = $1", &[&m.name]).await.map_err(|e| self.err(e))?;
        tx.execute("DELETE FROM memgym_documents WHERE bank = $1", &[&m.name]).await.map_err(|e| self.err(e))?;
        tx.execute("DELETE FROM memgym_indexes WHERE bank = $1", &[&m.name]).await.map_err(|e| self.err(e))?;
        let inserted = tx
            .execute(
                &format!(
                    "INSERT INTO memgym_banks ({META_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (name) DO NOTHING"
                ),
                &[
                    &m.name,
                    &m.kind,
                    &(m.uid as i64),
                    &to_i64(&self.location, "version", m.version)?,
                    &to_i64(&self.location, "next_id", m.next_id)?,
                    &to_i64(&self.location, "epoch", m.epoch)?,
                    &(m.max_size as i32),
                    &m.embedder_name,
                    &(m.embedder_dim as i32),
                    &m.embedder_fingerprint,
                    &m.created_at,
                ],
            )
            .await
            .map_err(|e| self.err(e))?;
        if inserted == 0 {
            return Err(StoreError::AlreadyExists(m.name.clone()));
        }
        tx.commit().await.map_err(|e| self.err(e))
    }

    async fn delete(&self, name: &str, expected: Option<u64>) -> Result<Committed, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(|e| self.err(e))?;
        let Some(row) =
            tx.query_opt("SELECT version FROM memgym_banks WHERE name = $1 FOR UPDATE", &[&name]).await.map_err(|e| self.err(e))?
        else {
            return Ok(Committed::Conflict { current: None });
        };
        let current = to_u64(&self.location, "version", row.get(0))?;
        if expected.is_some_and(|v| v != current) {
            return Ok(Committed::Conflict { current: Some(current) });
        }
        tx.execute("DELETE FROM memgym_experiences WHERE bank = $1", &[&name]).await.map_err(|e| self.err(e))?;
        tx.execute("DELETE FROM memgym_documents WHERE bank = $1", &[&name]).await.map_err(|e| self.err(e))?;
        tx.execute("DELETE FROM memgym_indexes WHERE bank = $1", &[&name]).await.map_err(|e| self.err(e))?;
        tx.execute("DELETE FROM memgym_banks WHERE name = $1", &[&name]).await.map_err(|e| self.err(e))?;
        tx.commit().await.map_err(|e| self.err(e))?;
        Ok(Committed::Done)
    }

    async fn load(&self, name: &str) -> Result<Option<(BankMeta, Rows)>, StoreError> {
        self.live(name).await
    }

    async fn changes(&self, name: &str, since: u64) -> Result<Option<(BankMeta, Vec<RowChange>)>, StoreError> {
        self.read(name, since).await
    }

    async fn commit(&self, expected: u64, c: Arc<Commit>) -> Result<Committed, StoreError> {
        let c = c.as_ref();
        let loc = self.location.as_str();
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(|e| self.err(e))?;
        let name = c.meta.name.as_str();
        let Some(row) =
            tx.query_opt("SELECT version, uid FROM memgym_banks WHERE name = $1 FOR UPDATE", &[&name]).await.map_err(|e| self.err(e))?
        else {
            return Ok(Committed::Conflict { current: None });
        };
        let current = to_u64(loc, "version", row.get(0))?;
        if current != expected || row.get::<_, i64>(1) as u64 != c.meta.uid {
            return Ok(Committed::Conflict { current: Some(current) });
        }
        let v = to_i64(loc, "version", c.meta.version)?;
        if c.clear {
            tx.execute(
                "UPDATE memgym_experiences SET deleted = TRUE, text = '', vector = NULL, changed = $2 WHERE bank = $1 AND NOT deleted",
                &[&name, &v],
            )
            .await
            .map_err(|e| self.err(e))?;
        }
        if !c.delete.is_empty() {
            let ids = c.delete.iter().map(|id| to_i64(loc, "id", *id)).collect::<Result<Vec<i64>, _>>()?;
            tx.execute(
                "UPDATE memgym_experiences SET deleted = TRUE, text = '', vector = NULL, changed = $3 WHERE bank = $1 AND id = ANY($2)",
                &[&name, &ids, &v],
            )
            .await
            .map_err(|e| self.err(e))?;
        }
        if !c.put.is_empty() {
            let mut ids = Vec::with_capacity(c.put.len());
            let mut texts = Vec::with_capacity(c.put.len());
            let mut confidences = Vec::with_capacity(c.put.len());
            let mut domains = Vec::with_capacity(c.put.len());
            let mut created = Vec::with_capacity(c.put.len());
            let mut usage = Vec::with_capacity(c.put.len());
            let mut last = Vec::with_capacity(c.put.len());
            let mut vectors = Vec::with_capacity(c.put.len());
            for StoredExperience { exp: e, vector } in &c.put {
                ids.push(to_i64(loc, "id", e.id)?);
                texts.push(e.text.as_str());
                confidences.push(e.confidence);
                domains.push(e.domain.as_str());
                created.push(to_i64(loc, "created_epoch", e.created_epoch)?);
                usage.push(to_i64(loc, "usage_count", e.usage_count)?);
                last.push(e.last_used_epoch.map(|x| to_i64(loc, "last_used_epoch", x)).transpose()?);
                vectors.push(super::vector_bytes::encode(vector));
            }
            let params: [&(dyn ToSql + Sync); 10] = [&name, &ids, &texts, &confidences, &domains, &created, &usage, &last, &vectors, &v];
            tx.execute(
                "INSERT INTO memgym_experiences (bank, id, text, confidence, domain, created_epoch, usage_count, last_used_epoch, vector, changed, deleted)
                 SELECT $1, u.id, u.text, u.confidence, u.domain, u.created_epoch, u.usage_count, u.last_used_epoch, u.vector, $10, FALSE
                 FROM UNNEST($2::BIGINT[], $3::TEXT[], $4::DOUBLE PRECISION[], $5::TEXT[], $6::BIGINT[], $7::BIGINT[], $8::BIGINT[], $9::BYTEA[])
                   AS u(id, text, confidence, domain, created_epoch, usage_count, last_used_epoch, vector)
                 ON CONFLICT (bank, id) DO UPDATE SET text = EXCLUDED.text, confidence = EXCLUDED.confidence, domain = EXCLUDED.domain,
                   created_epoch = EXCLUDED.created_epoch, usage_count = EXCLUDED.usage_count, last_used_epoch = EXCLUDED.last_used_epoch,
                   vector = EXCLUDED.vector, changed = EXCLUDED.changed, deleted = FALSE",
                &params,
            )
            .await
            .map_err(|e| self.err(e))?;
        }
        if let Some(doc) = &c.document {
            tx.execute(
                "INSERT INTO memgym_documents (bank, doc) VALUES ($1, $2) ON CONFLICT (bank) DO UPDATE SET doc = EXCLUDED.doc",
                &[&name, doc],
            )
            .await
            .map_err(|e| self.err(e))?;
        }
        let m = &c.meta;
        tx.execute(
            "UPDATE memgym_banks SET version = $2, next_id = $3, epoch = $4, max_size = $5, embedder_name = $6, embedder_dim = $7,
               embedder_fingerprint = $8 WHERE name = $1",
            &[
                &name,
                &v,
                &to_i64(loc, "next_id", m.next_id)?,
                &to_i64(loc, "epoch", m.epoch)?,
                &(m.max_size as i32),
                &m.embedder_name,
                &(m.embedder_dim as i32),
                &m.embedder_fingerprint,
            ],
        )
        .await
        .map_err(|e| self.err(e))?;
        tx.commit().await.map_err(|e| self.err(e))?;
        Ok(Committed::Done)
    }

    async fn document(&self, name: &str) -> Result<Option<(BankMeta, Option<String>)>, StoreError> {
        let mut client = self.client().await?;
        let tx = self.snapshot(&mut client).await?;
        let Some(meta) = self.meta_in(&tx, name).await? else { return Ok(None) };
        let doc = tx.query_opt("SELECT doc FROM memgym_documents WHERE bank = $1", &[&name]).await.map_err(|e| self.err(e))?;
        tx.commit().await.map_err(|e| self.err(e))?;
        Ok(Some((meta, doc.map(|r| r.get(0)))))
    }

    async fn add_usage(&self, name: &str, deltas: &[UsageDelta]) -> Result<(), StoreError> {
        let loc = self.location.as_str();
        let ids = deltas.iter().map(|d| to_i64(loc, "id", d.id)).collect::<Result<Vec<i64>, _>>()?;
        let counts = deltas.iter().map(|d| to_i64(loc, "usage", d.count)).collect::<Result<Vec<i64>, _>>()?;
        let epochs = deltas.iter().map(|d| to_i64(loc, "last_used_epoch", d.last_used_epoch)).collect::<Result<Vec<i64>, _>>()?;
        let client = self.client().await?;
        client
            .execute(
                "UPDATE memgym_experiences e SET usage_count = e.usage_count + d.c,
                   last_used_epoch = GREATEST(COALESCE(e.last_used_epoch, d.l), d.l)
                 FROM UNNEST($2::BIGINT[], $3::BIGINT[], $4::BIGINT[]) AS d(id, c, l)
                 WHERE e.bank = $1 AND e.id = d.id AND NOT e.deleted",
                &[&name, &ids, &counts, &epochs],
            )
            .await
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    async fn index(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let client = self.client().await?;
        let row = client.query_opt("SELECT data FROM memgym_indexes WHERE bank = $1", &[&name]).await.map_err(|e| self.err(e))?;
        Ok(row.map(|r| r.get::<_, Vec<u8>>(0)))
    }

    async fn put_index(&self, name: &str, version: u64, bytes: Vec<u8>) -> Result<(), StoreError> {
        let version = to_i64(&self.location, "version", version)?;
        let client = self.client().await?;
        // Replicas race to save: the newest version stays.
        client
            .execute(
                "INSERT INTO memgym_indexes (bank, version, data) VALUES ($1, $2, $3)
                 ON CONFLICT (bank) DO UPDATE SET version = excluded.version, data = excluded.data
                 WHERE memgym_indexes.version <= excluded.version",
                &[&name, &version, &bytes],
            )
            .await
            .map_err(|e| self.err(e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::redacted;

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(redacted("postgres://memgym:s3cret@db:5432/banks"), "postgres://memgym:***@db:5432/banks");
        assert_eq!(redacted("postgres://memgym@127.0.0.1:5433/banks"), "postgres://memgym@127.0.0.1:5433/banks");
        assert_eq!(redacted("host=/tmp user=x"), "host=/tmp user=x");
        assert_eq!(redacted("host=db user=x password=s3cret"), "host=db user=x password=***");
    }
}
