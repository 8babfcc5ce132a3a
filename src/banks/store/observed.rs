//! A [`BankStore`] that times and counts every operation of the store it wraps ([`crate::util::prometheus`]), so an
//! operator sees the banks' database latency and errors (SQLite or PostgreSQL) beside the requests. It
//! changes nothing else: every call goes to the inner store as it came.

use std::sync::Arc;
use std::time::Instant;

use super::{BankMeta, BankStore, Commit, Committed, RowChange, Rows, StoreError, UsageDelta};

/// The wrapper; `kind` is the store's label (`sqlite`, `postgres`).
#[derive(Debug)]
pub struct Observed {
    inner: Arc<dyn BankStore>,
    kind: &'static str,
}

impl Observed {
    /// Wraps `inner`, labelled by its location's scheme.
    pub fn wrap(inner: Arc<dyn BankStore>) -> Arc<dyn BankStore> {
        let kind = if inner.location().starts_with("postgres") { "postgres" } else { "sqlite" };
        Arc::new(Observed { inner, kind })
    }

    async fn timed<T>(&self, op: &'static str, f: impl std::future::Future<Output = Result<T, StoreError>>) -> Result<T, StoreError> {
        let started = Instant::now();
        let r = f.await;
        crate::util::prometheus::bank_store(self.kind, op, r.is_ok(), started.elapsed().as_secs_f64());
        r
    }
}

#[tonic::async_trait]
impl BankStore for Observed {
    fn location(&self) -> String {
        self.inner.location()
    }

    fn shared(&self) -> bool {
        self.inner.shared()
    }

    async fn list(&self) -> Result<Vec<(BankMeta, usize)>, StoreError> {
        self.timed("list", self.inner.list()).await
    }

    async fn count(&self) -> Result<usize, StoreError> {
        self.timed("count", self.inner.count()).await
    }

    async fn meta(&self, name: &str) -> Result<Option<BankMeta>, StoreError> {
        self.timed("meta", self.inner.meta(name)).await
    }

    async fn create(&self, meta: &BankMeta) -> Result<(), StoreError> {
        self.timed("create", self.inner.create(meta)).await
    }

    async fn delete(&self, name: &str, expected: Option<u64>) -> Result<Committed, StoreError> {
        self.timed("delete", self.inner.delete(name, expected)).await
    }

    async fn load(&self, name: &str) -> Result<Option<(BankMeta, Rows)>, StoreError> {
        self.timed("load", self.inner.load(name)).await
    }

    async fn document(&self, name: &str) -> Result<Option<(BankMeta, Option<String>)>, StoreError> {
        self.timed("document", self.inner.document(name)).await
    }

    async fn changes(&self, name: &str, since: u64) -> Result<Option<(BankMeta, Vec<RowChange>)>, StoreError> {
        self.timed("changes", self.inner.changes(name, since)).await
    }

    async fn commit(&self, expected: u64, commit: Arc<Commit>) -> Result<Committed, StoreError> {
        self.timed("commit", self.inner.commit(expected, commit)).await
    }

    async fn add_usage(&self, name: &str, deltas: &[UsageDelta]) -> Result<(), StoreError> {
        self.timed("add_usage", self.inner.add_usage(name, deltas)).await
    }

    async fn index(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.timed("index", self.inner.index(name)).await
    }

    async fn put_index(&self, name: &str, version: u64, bytes: Vec<u8>) -> Result<(), StoreError> {
        self.timed("put_index", self.inner.put_index(name, version, bytes)).await
    }
}
