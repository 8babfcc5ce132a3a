//! Opening a bank into memory, and saving its index: a bank opens on its saved index
//! ([`super::saved_index`]) when the store has a usable one, brought up to date from the change log,
//! and is opened from its rows otherwise (on the exact scan while its graph builds in the background).
//! Every graph this server builds for a bank, in a background rebuild, is saved for the next open.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use super::library::Library;
use super::saved_index::{self, Unusable};
use super::store::{BankMeta, BankStore, RowChange, Rows};
use super::{BankError, Banks};
use crate::memory::IndexConfig;
use crate::util::excerpt::quoted;

/// A saved index as the store gave it: its bytes, none, or the store's error.
pub(super) type Fetched = Result<Option<Vec<u8>>, super::store::StoreError>;

/// Why a bank was not opened on its saved index.
enum NotSaved {
    /// Build it from these rows (there is no usable saved index, and why when it was refused).
    Build(Option<Unusable>, Rows),
    /// The open failed outright.
    Failed(String),
}

impl Banks {
    /// The library of bank `name` from its rows at `meta`: on the saved index when it is usable, else
    /// from the rows (off the async workers): a bank that needs a graph is then
    /// [`super::IndexOrigin::Pending`], and the caller starts its build in the background (which saves it).
    /// A bank small enough for the exact scan has no graph to save.
    /// `index`: the store's saved index as fetched beside the rows (None: not fetched, as in the exact mode).
    pub(super) async fn open_library(&self, name: &str, meta: BankMeta, rows: Rows, index: Option<Fetched>) -> Result<Library, BankError> {
        let started = Instant::now();
        let config = self.config.index.clone();
        let rows = match self.open_saved(name, &meta, rows, index, &config).await {
            Ok(lib) => {
                tracing::info!(
                    bank = name,
                    experiences = lib.len(),
                    overlay = lib.overlay(),
                    secs = started.elapsed().as_secs_f64(),
                    "bank opened on its saved index"
                );
                return Ok(lib);
            }
            Err(NotSaved::Build(why, rows)) => {
                if let Some(why) = why {
                    tracing::warn!(bank = name, reason = %why, "building the bank's index from its rows");
                }
                rows
            }
            Err(NotSaved::Failed(e)) => {
                return Err(BankError::FailedPrecondition {
                    message: format!("opening bank {} on its saved index failed: {e}", quoted(name)),
                })
            }
        };

        // A bank that needs a graph opens on the exact scan at once, and the caller starts the build in
        // the background ([`super::IndexOrigin::Pending`]), which saves it; a small one has no graph.
        let pending = config.wants_graph(rows.len());
        let lib = tokio::task::spawn_blocking(move || {
            if pending {
                Library::build_pending(meta, rows, &config)
            } else {
                Library::build(meta, rows, &config)
            }
        })
        .await
        .map_err(|e| BankError::FailedPrecondition { message: format!("building the index of bank {} failed: {e}", quoted(name)) })?;
        tracing::info!(bank = name, experiences = lib.len(), pending, secs = started.elapsed().as_secs_f64(), "bank opened from its rows");
        Ok(lib)
    }

    /// The library on the store's saved index, or why not with the rows given back.
    async fn open_saved(
        &self,
        name: &str,
        meta: &BankMeta,
        rows: Rows,
        index: Option<Fetched>,
        config: &IndexConfig,
    ) -> Result<Library, NotSaved> {
        // Not fetched: the exact mode has no graph (the caller decides, once).
        let Some(index) = index else {
            return Err(NotSaved::Build(None, rows));
        };
        let bytes = match index {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Err(NotSaved::Build(None, rows)),
            Err(e) => {
                tracing::warn!(bank = name, error = %e, "reading the saved index failed");
                return Err(NotSaved::Build(None, rows));
            }
        };
        let m = meta.clone();
        let started = Instant::now();
        let decoded = tokio::task::spawn_blocking(move || saved_index::decode(&bytes, &m)).await;
        tracing::info!(bank = name, secs = started.elapsed().as_secs_f64(), "saved index read and checked");
        let saved = match decoded {
            Ok(Ok(saved)) => saved,
            Ok(Err(why)) => return Err(NotSaved::Build(Some(why), rows)),
            Err(e) => return Err(NotSaved::Build(Some(Unusable::Damaged(format!("decoding failed: {e}"))), rows)),
        };
        // Every experience written or deleted after the saved version (reading later than `rows` may
        // add newer ones: a superset is fine).
        let mut changed = HashSet::new();
        if saved.version < meta.version {
            match self.store.changes(name, saved.version).await {
                Ok(Some((_, log))) => changed.extend(log.iter().map(|c| match c {
                    RowChange::Put(s) => s.exp.id,
                    RowChange::Deleted(id) => *id,
                })),
                Ok(None) => return Err(NotSaved::Build(None, rows)),
                Err(e) => return Err(NotSaved::Build(Some(Unusable::Disagrees(format!("reading the change log failed: {e}"))), rows)),
            }
        }
        let (m, c) = (meta.clone(), config.clone());
        // A panic here took the rows with it: the open fails (and is retried), never an empty bank.
        match tokio::task::spawn_blocking(move || Library::open_saved(m, rows, saved, &changed, &c)).await {
            Ok(opened) => opened.map_err(|(why, rows)| NotSaved::Build(Some(why), rows)),
            Err(e) => Err(NotSaved::Failed(e.to_string())),
        }
    }
}

/// Saves a bank's index in the background (a failure is logged: the next open builds the index again).
pub(super) fn save_in_background(store: Arc<dyn BankStore>, name: &str, version: u64, bytes: Vec<u8>) {
    let name = name.to_string();
    tokio::spawn(async move {
        let len = bytes.len();
        match store.put_index(&name, version, bytes).await {
            Ok(()) => tracing::debug!(bank = %name, version, bytes = len, "bank index saved"),
            Err(e) => tracing::warn!(bank = %name, error = %e, "saving the bank's index failed; the next open builds it"),
        }
    });
}
