//! Memory banks: named, persistent memory served beside the episodes, on the same engine.
//!
//! A bank of kind `experience` is a Training-Free GRPO experience library (the Training-Free GRPO design's
//! `ExperienceManager`) with the semantic memory of the semantic-memory design's `SemanticMemoryManager` over it. Its
//! rows live in a [`store::BankStore`] (SQLite by default, PostgreSQL for replicas); while served it is
//! also held in memory as a [`library::Library`], whose index is the episodes' memory engine.
//!
//! Every write runs the same steps under the bank's write lock: bring a shared bank up to date, check
//! `expected_version`, **plan** a [`library::Draft`] (every check; nothing changes), embed the texts it
//! writes, **commit** it to the store in one durable transaction that checks the version again (another
//! replica may have written), and only then **apply** it to the library. A refused or failed write
//! changes nothing, in memory or on disk.
//!
//! - [`experience`]: add, modify, delete, merge, apply_operations, format_for_prompt;
//! - [`semantic`]: retrieve, stats, set_epoch, compress, merge_similar;
//! - [`formats`]: import and export of the Training-Free GRPO design's file, upstream's per-step file and memgym's own.

pub mod agent;
pub mod compress;
mod error;
pub mod experience;
pub mod formats;
pub mod learn;
pub mod library;
mod open;
pub mod ops;
pub mod saved_index;
pub mod semantic;
pub mod store;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::RwLock;

pub use error::BankError;
pub use library::{show_id, Experience, IndexOrigin, Library};

use crate::embed::EmbedService;
use crate::llm::Llm;
use crate::memory::IndexConfig;
use crate::util::excerpt::quoted;
use library::Draft;
use store::{BankMeta, BankStore, Commit, Committed};

/// How many times a write without `expected_version` is planned again after losing a race with
/// another replica (with a random back-off between attempts).
pub const WRITE_ATTEMPTS: u32 = 32;

/// What a bank holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A Training-Free GRPO experience library with semantic retrieval (rows and an index).
    Experience,
    /// The agent-memory design's cross-episode agent memory (one document; [`agent`]).
    Agent,
}

impl Kind {
    /// The name stored with the bank.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Experience => KIND_EXPERIENCE,
            Kind::Agent => KIND_AGENT,
        }
    }
    /// The kind stored as `s`, if known.
    pub fn parse(s: &str) -> Option<Kind> {
        [Kind::Experience, Kind::Agent].into_iter().find(|k| k.as_str() == s)
    }
}

/// The stored name of [`Kind::Experience`].
pub const KIND_EXPERIENCE: &str = "experience";
/// The stored name of [`Kind::Agent`].
pub const KIND_AGENT: &str = "agent";

/// The semantic-memory design's `experience_max_size`.
pub const DEFAULT_MAX_SIZE: u32 = 100;

/// Caps. Exceeding one is ResourceExhausted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BankLimits {
    /// Characters per experience text.
    pub max_text_chars: usize,
    /// Operations per ApplyOperations batch.
    pub max_ops: usize,
    /// Experiences per bank.
    pub max_experiences: usize,
    /// Banks per server.
    pub max_banks: usize,
}

impl Default for BankLimits {
    fn default() -> Self {
        BankLimits { max_text_chars: 4_000, max_ops: 1_000, max_experiences: 1_000_000, max_banks: 10_000 }
    }
}

/// What to do with a bank whose vectors come from another embedder than the server's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnEmbedderChange {
    /// Refuse to serve it (FailedPrecondition naming both embedders).
    Refuse,
    /// Embed every text again with the server's embedder, as one write (the semantic-memory design regenerates the
    /// embeddings of old checkpoints the same way).
    Reembed,
}

impl std::str::FromStr for OnEmbedderChange {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "refuse" => Ok(OnEmbedderChange::Refuse),
            "reembed" | "re-embed" => Ok(OnEmbedderChange::Reembed),
            _ => Err(format!("expected refuse or reembed, got {}", quoted(s))),
        }
    }
}

/// Settings of the banks.
#[derive(Debug, Clone, PartialEq)]
pub struct BanksConfig {
    /// Caps.
    pub limits: BankLimits,
    /// The engine's index settings.
    pub index: IndexConfig,
    /// Embedder mismatch policy.
    pub on_embedder_change: OnEmbedderChange,
    /// How often usage counts are written.
    pub usage_flush: Duration,
}

impl Default for BanksConfig {
    fn default() -> Self {
        BanksConfig {
            limits: BankLimits::default(),
            index: IndexConfig::default(),
            on_embedder_change: OnEmbedderChange::Refuse,
            usage_flush: Duration::from_secs(1),
        }
    }
}

/// A bank held in memory (`None` until first used, or after it was deleted).
type Handle = Arc<RwLock<Option<Library>>>;

/// Every bank this server serves.
#[derive(Debug)]
pub struct Banks {
    store: Arc<dyn BankStore>,
    embed: EmbedService,
    llm: Option<Arc<Llm>>,
    config: BanksConfig,
    open: parking_lot::Mutex<HashMap<String, Handle>>,
}

/// A bank name: 1..64 of letters, digits, `_`, `-`, `.`, not starting with `.`.
pub fn check_name(field: &str, name: &str) -> Result<(), BankError> {
    let ok = !name.is_empty()
        && name.chars().count() <= 64
        && !name.starts_with('.')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if ok {
        Ok(())
    } else {
        Err(BankError::invalid(
            field,
            format!("{} is not a bank name (1..64 of letters, digits, '_', '-', '.'; not starting with '.')", quoted(name)),
        ))
    }
}

fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let days = secs / 86_400;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3_600, rem % 3_600 / 60, rem % 60)
}

impl Banks {
    /// Serves the banks of `store` with the server's embedder (and LLM, for `merge_similar`).
    pub fn new(store: Arc<dyn BankStore>, embed: EmbedService, llm: Option<Arc<Llm>>, config: BanksConfig) -> Banks {
        Banks { store, embed, llm, config, open: parking_lot::Mutex::new(HashMap::new()) }
    }

    /// Where the banks live.
    pub fn location(&self) -> String {
        self.store.location()
    }

    /// The settings.
    pub fn config(&self) -> &BanksConfig {
        &self.config
    }

    /// The embedder.
    pub fn embedder(&self) -> &EmbedService {
        &self.embed
    }

    /// The LLM client, if the server has one.
    pub fn llm(&self) -> Option<&Arc<Llm>> {
        self.llm.as_ref()
    }

    /// The server's LLM for `what`, or FailedPrecondition saying how to configure one.
    pub fn require_llm(&self, what: &str) -> Result<Arc<Llm>, BankError> {
        self.llm().cloned().ok_or_else(|| BankError::FailedPrecondition {
            message: format!("{what} needs the server's LLM endpoint (start it with --llm-base-url and --llm-model)"),
        })
    }

    fn handle(&self, name: &str) -> Handle {
        Arc::clone(self.open.lock().entry(name.to_string()).or_default())
    }

    /// Creates a bank. With `if_not_exists` an existing bank of the same kind is returned as it is.
    pub async fn create(&self, name: &str, kind: Kind, max_size: Option<u32>, if_not_exists: bool) -> Result<BankMeta, BankError> {
        check_name("name", name)?;
        if max_size == Some(0) {
            return Err(BankError::invalid("max_size", "must be at least 1"));
        }
        let id = self.embed.identity();
        let meta = BankMeta {
            name: name.to_string(),
            kind: kind.as_str().to_string(),
            uid: rand::random::<u64>() >> 1,
            version: 0,
            next_id: 0,
            epoch: 0,
            max_size: max_size.unwrap_or(DEFAULT_MAX_SIZE),
            embedder_name: id.name.clone(),
            embedder_dim: id.dim as u32,
            embedder_fingerprint: id.fingerprint.clone(),
            created_at: now_rfc3339(),
        };
        if self.store.count().await? >= self.config.limits.max_banks && self.store.meta(name).await?.is_none() {
            return Err(BankError::ResourceExhausted {
                message: format!("the server holds its cap of {} banks", self.config.limits.max_banks),
            });
        }
        match self.store.create(&meta).await {
            Ok(()) => {
                // A stale handle of a bank deleted elsewhere must not survive the new bank.
                *self.handle(name).write().await = None;
                Ok(meta)
            }
            Err(store::StoreError::AlreadyExists(_)) if if_not_exists => {
                let found = self.store.meta(name).await?.ok_or_else(|| BankError::BankNotFound { name: name.to_string() })?;
                if found.kind != kind.as_str() {
                    return Err(BankError::FailedPrecondition {
                        message: format!("bank {} exists and is of kind {}, not {}", quoted(name), found.kind, kind.as_str()),
                    });
                }
                Ok(found)
            }
            Err(store::StoreError::AlreadyExists(n)) => Err(BankError::AlreadyExists { name: n }),
            Err(e) => Err(e.into()),
        }
    }

    /// One bank's counters and number of experiences (0 for an agent bank).
    pub async fn describe(&self, name: &str) -> Result<(BankMeta, usize), BankError> {
        check_name("name", name)?;
        let meta = self.store.meta(name).await?.ok_or_else(|| BankError::BankNotFound { name: name.to_string() })?;
        if meta.kind != KIND_EXPERIENCE {
            return Ok((meta, 0));
        }
        self.read(name, |lib| (lib.meta().clone(), lib.len())).await
    }

    /// Every bank's counters and number of experiences, from the store (so replicas agree, and no bank
    /// is loaded to be listed).
    pub async fn list(&self) -> Result<Vec<(BankMeta, usize)>, BankError> {
        Ok(self.store.list().await?)
    }

    /// Deletes a bank.
    pub async fn delete(&self, name: &str, expected: Option<u64>) -> Result<(), BankError> {
        check_name("name", name)?;
        let handle = self.handle(name);
        let mut guard = handle.write().await;
        match self.store.delete(name, expected).await? {
            Committed::Done => {
                *guard = None;
                Ok(())
            }
            Committed::Conflict { current: None } => {
                *guard = None;
                Err(BankError::BankNotFound { name: name.to_string() })
            }
            Committed::Conflict { current: Some(current) } => {
                Err(BankError::VersionConflict { name: name.to_string(), expected: expected.unwrap_or(current), current })
            }
        }
    }

    /// Loads the bank into `slot` if it is not held, or brings a shared bank up to date.
    async fn ensure(&self, name: &str, slot: &mut Option<Library>) -> Result<(), BankError> {
        if let Some(lib) = slot.as_mut() {
            if !self.store.shared() {
                return Ok(());
            }
            let Some(meta) = self.store.meta(name).await? else {
                *slot = None;
                return Err(BankError::BankNotFound { name: name.to_string() });
            };
            if meta.uid == lib.meta().uid && meta.version == lib.meta().version {
                return Ok(());
            }
            if meta.uid == lib.meta().uid {
                if let Some((meta, rows)) = self.store.changes(name, lib.meta().version).await? {
                    lib.catch_up(meta, rows);
                    if lib.claim_compaction() {
                        self.spawn_compaction(name, self.handle(name));
                    }
                    return Ok(());
                }
            }
            *slot = None;
        }
        let loading = std::time::Instant::now();
        // The saved index's bytes are fetched while the rows are read (at 1,000,000 experiences on PostgreSQL,
        // 3.5 s of rows and 0.6 s of index bytes one after the other): only fetched here, checked against
        // the rows' metadata in `open_library`.
        let wants_index = self.config.index.mode != crate::memory::IndexMode::Exact;
        let (loaded, index) = tokio::join!(self.store.load(name), async {
            if wants_index {
                Some(self.store.index(name).await)
            } else {
                None
            }
        });
        let Some((meta, rows)) = loaded? else { return Err(BankError::BankNotFound { name: name.to_string() }) };
        tracing::info!(bank = name, rows = rows.len(), secs = loading.elapsed().as_secs_f64(), "bank rows read");
        if meta.kind != KIND_EXPERIENCE {
            return Err(BankError::WrongKind { name: name.to_string(), kind: meta.kind, wanted: KIND_EXPERIENCE });
        }
        let lib = self.open_library(name, meta, rows, index).await?;
        if lib.origin() == IndexOrigin::Pending && lib.claim_rebuild() {
            // Starts once this call lets go of the bank's lock; reads scan exactly until it swaps in.
            self.spawn_compaction(name, self.handle(name));
        }
        *slot = Some(lib);
        self.check_embedder(name, slot).await
    }

    /// Refuses or re-embeds a bank whose vectors come from another embedder.
    async fn check_embedder(&self, name: &str, slot: &mut Option<Library>) -> Result<(), BankError> {
        let Some(lib) = slot.as_mut() else { return Ok(()) };
        let id = self.embed.identity();
        let m = lib.meta();
        if m.embedder_name == id.name && m.embedder_dim as usize == id.dim && m.embedder_fingerprint == id.fingerprint {
            return Ok(());
        }
        let stored = format!("{} (dim {}, fingerprint {})", m.embedder_name, m.embedder_dim, m.embedder_fingerprint);
        match self.config.on_embedder_change {
            OnEmbedderChange::Refuse => {
                *slot = None;
                Err(BankError::FailedPrecondition {
                    message: format!(
                        "bank {} was embedded with {stored}, the server embeds with {id}; start the server with \
                         --banks-on-embedder-change reembed to embed it again",
                        quoted(name)
                    ),
                })
            }
            OnEmbedderChange::Reembed => {
                tracing::info!(bank = name, from = %stored, to = %id, "re-embedding a bank for the server's embedder");
                let mut draft = Draft::of(lib);
                for e in lib.iter() {
                    draft.put(e.clone());
                }
                let version = lib.meta().version;
                let mut meta = lib.meta().clone();
                meta.embedder_name = id.name.clone();
                meta.embedder_dim = id.dim as u32;
                meta.embedder_fingerprint = id.fingerprint.clone();
                // The library's index has the old dimension: rebuild it from the committed rows.
                let vectors = self.vectors(&draft).await?;
                let commit = Arc::new(Commit {
                    put: lib.stored(&draft, vectors),
                    delete: Vec::new(),
                    clear: false,
                    meta: Self::next_meta(&meta, &draft),
                    document: None,
                });
                let commit = self.commit_or_conflict(name, version, commit).await?;
                let rows = store::Rows::from_stored(commit.meta.embedder_dim as usize, commit.put);
                let config = self.config.index.clone();
                let meta = commit.meta;
                *slot = Some(
                    tokio::task::spawn_blocking(move || Library::build(meta, rows, &config))
                        .await
                        .map_err(|e| BankError::FailedPrecondition { message: format!("rebuilding bank {} failed: {e}", quoted(name)) })?,
                );
                Ok(())
            }
        }
    }

    /// Runs `f` on the bank, up to date, under its read lock.
    pub async fn read<T>(&self, name: &str, f: impl FnOnce(&Library) -> T) -> Result<T, BankError> {
        check_name("bank", name)?;
        let handle = self.handle(name);
        {
            let guard = handle.read().await;
            if let Some(lib) = guard.as_ref() {
                if !self.store.shared() {
                    return Ok(f(lib));
                }
            }
        }
        let mut guard = handle.write().await;
        self.ensure(name, &mut guard).await?;
        let guard = guard.downgrade();
        match guard.as_ref() {
            Some(lib) => Ok(f(lib)),
            None => Err(BankError::BankNotFound { name: name.to_string() }),
        }
    }

    /// Plans a write with `plan` (which may refuse it), embeds, commits and applies it, under the
    /// bank's write lock. Returns the plan's output and the bank's counters after the write.
    ///
    /// On a shared store another replica may commit between this server's catch-up and its commit; the
    /// commit then changes nothing. A write that named `expected_version` fails (Aborted); one that did
    /// not is planned again on the caught-up bank after a random back-off, up to [`WRITE_ATTEMPTS`]
    /// times, so unconditional writes from several replicas all land.
    pub async fn write<T>(
        &self,
        name: &str,
        expected: Option<u64>,
        mut plan: impl FnMut(&Library, &mut Draft) -> Result<T, BankError>,
    ) -> Result<(T, BankMeta), BankError> {
        check_name("bank", name)?;
        let handle = self.handle(name);
        let mut guard = handle.write().await;
        let mut attempt = 0;
        loop {
            attempt += 1;
            self.ensure(name, &mut guard).await?;
            let Some(lib) = guard.as_mut() else { return Err(BankError::BankNotFound { name: name.to_string() }) };
            let version = lib.meta().version;
            if let Some(e) = expected {
                if e != version {
                    return Err(BankError::VersionConflict { name: name.to_string(), expected: e, current: version });
                }
            }
            let mut draft = Draft::of(lib);
            let out = plan(lib, &mut draft)?;
            if draft.is_empty(lib) {
                return Ok((out, lib.meta().clone()));
            }
            let after = draft.len_after(lib);
            if after > self.config.limits.max_experiences && after > lib.len() {
                return Err(BankError::ResourceExhausted {
                    message: format!(
                        "bank {} would hold {after} experiences, over the cap of {}",
                        quoted(name),
                        self.config.limits.max_experiences
                    ),
                });
            }
            // Nothing has changed yet: if this await is abandoned, the bank is as it was.
            let started = std::time::Instant::now();
            let vectors = self.vectors(&draft).await?;
            let embedded = started.elapsed().as_secs_f64();
            let commit = Arc::new(Commit {
                put: lib.stored(&draft, vectors),
                delete: draft.deletes().collect(),
                clear: draft.clear,
                meta: Self::next_meta(lib.meta(), &draft),
                document: None,
            });
            let before_commit = started.elapsed().as_secs_f64();
            match self.commit_or_conflict(name, version, commit).await {
                Ok(Commit { put, meta, .. }) => {
                    let committed = started.elapsed().as_secs_f64();
                    let vectors: Vec<Vec<f32>> = put.into_iter().map(|s| s.vector).collect();
                    lib.apply(draft, &vectors, meta.clone());
                    tracing::debug!(
                        bank = name,
                        puts = vectors.len(),
                        embedded,
                        before_commit,
                        committed,
                        applied = started.elapsed().as_secs_f64(),
                        "a write's phases (seconds since it was planned)"
                    );
                    if lib.claim_compaction() {
                        self.spawn_compaction(name, Arc::clone(&handle));
                    }
                    return Ok((out, meta));
                }
                Err(BankError::VersionConflict { .. }) if expected.is_none() && attempt < WRITE_ATTEMPTS => {
                    tracing::debug!(bank = name, attempt, "another replica wrote first; planning again");
                    Self::back_off(attempt).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Waits a random while after the `attempt`-th lost race (up to 2^attempt ms, at most 100 ms), so
    /// that replicas racing for one bank interleave instead of colliding again.
    async fn back_off(attempt: u32) {
        let ceiling = 1u64 << attempt.min(7);
        let wait = rand::random::<u64>() % ceiling.min(100);
        tokio::time::sleep(Duration::from_millis(wait)).await;
    }

    /// Rebuilds a bank's index in the background: the rows are copied under the read lock, the new base
    /// (HNSW above the threshold) is built on the blocking pool while reads and writes go on, and the
    /// library is swapped under the write lock after catching up on the writes made meanwhile (read
    /// back from the store, which keeps every change with its version). Nothing is lost if the rebuild
    /// fails: the old library stays and a later write claims the rebuild again.
    fn spawn_compaction(&self, name: &str, handle: Handle) {
        let store = Arc::clone(&self.store);
        let index = self.config.index.clone();
        let name = name.to_string();
        tokio::spawn(async move {
            let snapshot = handle.read().await.as_ref().map(|lib| (lib.snapshot(), lib.abandoned()));
            let Some(((meta, rows), abandoned)) = snapshot else { return };
            let (version, uid) = (meta.version, meta.uid);
            let started = std::time::Instant::now();
            let built = tokio::task::spawn_blocking(move || {
                // Stops early once the library it started from is dropped (the bank deleted or replaced).
                let lib = Library::build_unless(meta, rows, &index, &abandoned)?;
                let bytes = lib.saved_index();
                Some((lib, bytes))
            })
            .await;
            let built = match built {
                Ok(None) => {
                    tracing::info!(bank = %name, secs = started.elapsed().as_secs_f64(), "index rebuild abandoned: the bank was deleted or replaced");
                    return;
                }
                Ok(Some((lib, bytes))) => {
                    if let Some(bytes) = bytes {
                        open::save_in_background(Arc::clone(&store), &name, version, bytes);
                    }
                    Ok(lib)
                }
                Err(e) => Err(e),
            };
            let mut guard = handle.write().await;
            let Some(lib) = guard.as_mut() else { return };
            let Ok(mut fresh) = built else {
                tracing::warn!(bank = %name, "rebuilding the index failed; keeping the overlay");
                lib.release_compaction();
                return;
            };
            if lib.meta().uid != uid {
                return;
            }
            if lib.meta().version != version {
                match store.changes(&name, version).await {
                    Ok(Some((meta, rows))) if meta.version == lib.meta().version => fresh.catch_up(meta, rows),
                    Ok(_) | Err(_) => {
                        tracing::warn!(bank = %name, "could not catch the rebuilt index up; keeping the overlay");
                        lib.release_compaction();
                        return;
                    }
                }
            }
            fresh.adopt(lib);
            tracing::debug!(bank = %name, experiences = fresh.len(), secs = started.elapsed().as_secs_f64(), "index rebuilt");
            *lib = fresh;
        });
    }

    /// The counters after `draft`: the next version, id counter and epoch.
    fn next_meta(meta: &BankMeta, draft: &Draft) -> BankMeta {
        BankMeta { version: meta.version + 1, next_id: draft.next_id, epoch: draft.epoch, ..meta.clone() }
    }

    async fn vectors(&self, draft: &Draft) -> Result<Vec<Vec<f32>>, BankError> {
        let texts: Vec<String> = draft.puts().map(|e| e.text.clone()).collect();
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self.embed.embed_bulk(texts).await?)
    }

    /// Commits `commit` at `version`, and gives it back (without a copy once the store has let go of it).
    async fn commit_or_conflict(&self, name: &str, version: u64, commit: Arc<Commit>) -> Result<Commit, BankError> {
        match self.store.commit(version, Arc::clone(&commit)).await? {
            Committed::Done => Ok(Arc::try_unwrap(commit).unwrap_or_else(|shared| (*shared).clone())),
            Committed::Conflict { current: None } => Err(BankError::BankNotFound { name: name.to_string() }),
            Committed::Conflict { current: Some(current) } => {
                Err(BankError::VersionConflict { name: name.to_string(), expected: version, current })
            }
        }
    }

    /// Writes the usage counted since the last flush, for every bank held.
    pub async fn flush_usage(&self) {
        let handles: Vec<(String, Handle)> = self.open.lock().iter().map(|(k, v)| (k.clone(), Arc::clone(v))).collect();
        for (name, handle) in handles {
            let guard = handle.read().await;
            let Some(lib) = guard.as_ref() else { continue };
            let deltas = lib.take_usage();
            if deltas.is_empty() {
                continue;
            }
            if let Err(e) = self.store.add_usage(&name, &deltas).await {
                tracing::warn!(bank = %name, error = %e, "writing usage counts failed; retrying with the next flush");
                lib.return_usage(&deltas);
            }
        }
    }

    /// Flushes usage every `usage_flush` until the returned task is aborted (the server flushes once
    /// more at shutdown).
    pub fn spawn_usage_flusher(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let banks = Arc::clone(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(banks.config.usage_flush);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                banks.flush_usage().await;
            }
        })
    }
}

#[cfg(test)]
mod tests;
