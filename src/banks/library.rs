//! One experience library held in memory: its counters, its experiences by id, and their vectors in the
//! memory engine the episodes use (an [`EpisodeMemory`] overlay on a [`BaseMemory`], so the exact scan,
//! HNSW above the threshold and the filters carry over). The database is the truth; a [`Library`] is
//! built from it on open and changed only after a commit succeeded.
//!
//! Writes follow the episode tools' protocol: a write is first **planned** against the library without
//! changing it ([`Draft`]: every check, and the final state of every id it touches), then the texts are
//! embedded and the plan committed to the store, and only then **applied** here, which cannot fail.
//!
//! Experience ids are the N of "G{N}"; the engine's own ids are internal. The domain rides in the engine
//! record's `source` field, so a domain filter is the engine's `Filter::source`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::memory::vectors::push_narrowed;
use crate::memory::{BaseMemory, EpisodeMemory, Filter, IndexConfig, MemoryId, MemoryRecord, MemoryType, SearchPath};

use super::compress::{Candidate, Vector};
use super::saved_index::{SavedIndex, Unusable};
pub use super::store::Experience;
use super::store::{BankMeta, RowChange, Rows, StoredExperience, UsageDelta};

/// The id as shown: "G12".
pub fn show_id(id: u64) -> String {
    format!("G{id}")
}

#[derive(Debug, Clone)]
struct Slot {
    exp: Experience,
    mem: MemoryId,
}

/// Usage counted since load, and the part not yet written to the store.
#[derive(Debug, Default)]
struct UsageBook {
    /// id → (count, last epoch), the totals.
    totals: HashMap<u64, (u64, Option<u64>)>,
    /// id → (count, last epoch) not yet flushed.
    pending: HashMap<u64, (u64, u64)>,
}

/// A planned write: the final state of every id it touches (`None`: deleted), in id order, and the
/// counters after it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Draft {
    /// Final state per touched id.
    pub finals: BTreeMap<u64, Option<Experience>>,
    /// Remove every experience first (an import that replaces the bank).
    pub clear: bool,
    /// The id counter after the write.
    pub next_id: u64,
    /// The epoch after the write.
    pub epoch: u64,
}

impl Draft {
    /// A draft that starts from `lib`'s counters and changes nothing yet.
    pub fn of(lib: &Library) -> Draft {
        Draft { finals: BTreeMap::new(), clear: false, next_id: lib.meta.next_id, epoch: lib.meta.epoch }
    }

    /// The experience with `id` as this draft leaves it.
    pub fn get<'a>(&'a self, lib: &'a Library, id: u64) -> Option<&'a Experience> {
        match self.finals.get(&id) {
            Some(state) => state.as_ref(),
            None if self.clear => None,
            None => lib.get(id),
        }
    }

    /// Puts an experience (new or replacing).
    pub fn put(&mut self, exp: Experience) {
        self.finals.insert(exp.id, Some(exp));
    }

    /// Deletes an id.
    pub fn delete(&mut self, id: u64) {
        self.finals.insert(id, None);
    }

    /// A fresh id.
    pub fn allocate(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Whether the draft changes anything.
    pub fn is_empty(&self, lib: &Library) -> bool {
        self.finals.is_empty() && !self.clear && self.next_id == lib.meta.next_id && self.epoch == lib.meta.epoch
    }

    /// The experiences this draft writes, in id order (these need vectors).
    pub fn puts(&self) -> impl Iterator<Item = &Experience> {
        self.finals.values().flatten()
    }

    /// The ids this draft deletes.
    pub fn deletes(&self) -> impl Iterator<Item = u64> + '_ {
        self.finals.iter().filter(|(_, s)| s.is_none()).map(|(id, _)| *id)
    }

    /// Live experiences after the draft (for the cap).
    pub fn len_after(&self, lib: &Library) -> usize {
        let mut n = if self.clear { 0 } else { lib.len() };
        for (id, state) in &self.finals {
            let before = !self.clear && lib.get(*id).is_some();
            match (before, state.is_some()) {
                (false, true) => n += 1,
                (true, false) => n -= 1,
                _ => {}
            }
        }
        n
    }
}

/// One retrieval hit.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// Cosine similarity.
    pub similarity: f32,
    /// The experience (usage as before this retrieval).
    pub exp: Experience,
}

/// How a library's index was made (for logs, tests and the benchmark).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexOrigin {
    /// Built from the rows (on open, or by a rebuild).
    Built,
    /// Opened without its graph (no usable saved index): the exact scan answers until the background
    /// build ends.
    Pending,
    /// Read from the saved index of `version`, then `changed` experiences written or deleted after it
    /// applied from the change log.
    Saved {
        /// The version the saved graph describes.
        version: u64,
        /// Experiences changed since.
        changed: usize,
    },
}

/// One bank's experiences in memory.
#[derive(Debug)]
pub struct Library {
    origin: IndexOrigin,
    meta: BankMeta,
    slots: BTreeMap<u64, Slot>,
    by_mem: HashMap<MemoryId, u64>,
    index: EpisodeMemory,
    config: IndexConfig,
    usage: Mutex<UsageBook>,
    /// A background rebuild of the index is under way (see `Banks::write`).
    compacting: std::sync::atomic::AtomicBool,
    /// Set when this library is dropped (its bank deleted, replaced or reloaded): a rebuild started from
    /// it stops between blocks of its graph's inserts instead of building, for minutes on every core, a
    /// graph nobody will use.
    abandoned: Arc<std::sync::atomic::AtomicBool>,
}

impl Drop for Library {
    fn drop(&mut self) {
        self.abandoned.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The stand-in a tombstoned node of a saved index is recorded with.
const EMPTY_EXPERIENCE: Experience = Experience {
    id: 0,
    text: String::new(),
    confidence: 0.0,
    domain: String::new(),
    created_epoch: 0,
    usage_count: 0,
    last_used_epoch: None,
};

fn record(mem: MemoryId, exp: &Experience) -> MemoryRecord {
    MemoryRecord {
        id: mem,
        text: exp.text.clone(),
        memory_type: MemoryType::Procedural,
        speaker: None,
        session: None,
        session_date: None,
        evidence: Vec::new(),
        source: exp.domain.clone(),
        created_step: 0,
        authored: false,
    }
}

impl Library {
    /// Builds the library from stored rows (index build included: run it off the async workers).
    pub fn build(meta: BankMeta, rows: Rows, config: &IndexConfig) -> Library {
        let Ok(lib) = Self::assemble(meta, rows, config, IndexOrigin::Built, |key, records, vectors, dim| {
            Ok::<_, std::convert::Infallible>(BaseMemory::build_half(key, records, vectors, dim, config.clone(), None))
        });
        lib
    }

    /// [`Library::build`] for a background rebuild: `None` once `abandoned` is set (see
    /// [`Library::abandoned`]), checked between blocks of the graph's inserts.
    pub fn build_unless(meta: BankMeta, rows: Rows, config: &IndexConfig, abandoned: &std::sync::atomic::AtomicBool) -> Option<Library> {
        Self::assemble(meta, rows, config, IndexOrigin::Built, |key, records, vectors, dim| {
            BaseMemory::build_half_unless(key, records, vectors, dim, config.clone(), abandoned).ok_or(())
        })
        .ok()
    }

    /// The flag set when this library is dropped (a rebuild started from it then stops).
    pub fn abandoned(&self) -> Arc<std::sync::atomic::AtomicBool> {
        Arc::clone(&self.abandoned)
    }

    /// The library without its graph: searched by the exact scan (correct, slower at scale) until a
    /// rebuild ([`Library::claim_rebuild`]) builds the graph `config` wants. Fast: how a bank with no
    /// usable saved index opens without waiting for the build.
    pub fn build_pending(meta: BankMeta, rows: Rows, config: &IndexConfig) -> Library {
        let exact = IndexConfig { mode: crate::memory::IndexMode::Exact, ..config.clone() };
        let Ok(lib) = Self::assemble(meta, rows, config, IndexOrigin::Pending, |key, records, vectors, dim| {
            Ok::<_, std::convert::Infallible>(BaseMemory::build_half(key, records, vectors, dim, exact, None))
        });
        lib
    }

    /// The library of `rows`, its engine's base made by `base` from the key, records, vectors and dimension.
    fn assemble<E>(
        meta: BankMeta,
        rows: Rows,
        config: &IndexConfig,
        origin: IndexOrigin,
        base: impl FnOnce(String, Vec<crate::memory::MemoryRecord>, Vec<half::f16>, usize) -> Result<BaseMemory, E>,
    ) -> Result<Library, E> {
        // The rows' buffer becomes the engine's as it is (each row's vector at `dim` values, or zeros).
        let dim = rows.dim();
        let (exps, vectors) = rows.into_parts();
        let mut slots = BTreeMap::new();
        let mut records = Vec::with_capacity(exps.len());
        let mut totals = HashMap::with_capacity(exps.len());
        for (i, exp) in exps.into_iter().enumerate() {
            let mem = MemoryId(i as u32);
            records.push(record(mem, &exp));
            totals.insert(exp.id, (exp.usage_count, exp.last_used_epoch));
            slots.insert(exp.id, Slot { exp, mem });
        }
        let by_mem = slots.values().map(|s| (s.mem, s.exp.id)).collect();
        let base = base(format!("bank:{}", meta.name), records, vectors, dim)?;
        Ok(Library {
            origin,
            meta,
            slots,
            by_mem,
            index: EpisodeMemory::new(Arc::new(base)),
            config: config.clone(),
            usage: Mutex::new(UsageBook { totals, pending: HashMap::new() }),
            compacting: std::sync::atomic::AtomicBool::new(false),
            abandoned: Arc::default(),
        })
    }

    /// Opens the library on a saved index ([`super::saved_index`]) instead of building one: `rows` are
    /// the bank's live rows at `meta`, `changed` every experience id written or deleted after the saved
    /// version (a superset is fine). Nodes of changed experiences are tombstones; the changed rows go
    /// to the overlay. Refuses ([`Unusable::Disagrees`]) when the nodes and the rows differ in a way the
    /// change log does not explain, and gives the rows back to be built from. CPU-heavy: run it off the
    /// async workers.
    pub fn open_saved(
        meta: BankMeta,
        mut rows: Rows,
        saved: SavedIndex,
        changed: &std::collections::HashSet<u64>,
        config: &IndexConfig,
    ) -> Result<Library, (Unusable, Rows)> {
        rows.sort_by_id();
        let (dim, saved_version) = (rows.dim(), saved.version);
        // Each node's row (`None`: a tombstone), and each row's node.
        let mut row_of: Vec<Option<usize>> = Vec::with_capacity(saved.ids.len());
        let mut node_of: Vec<Option<MemoryId>> = vec![None; rows.len()];
        for (i, &id) in saved.ids.iter().enumerate() {
            let at = rows.exps().binary_search_by_key(&id, |e| e.id).ok();
            match at {
                Some(at) if !changed.contains(&id) => {
                    if node_of[at].replace(MemoryId(i as u32)).is_some() {
                        let why = Unusable::Disagrees(format!("experience {} is two nodes", show_id(id)));
                        return Err((why, rows));
                    }
                    row_of.push(Some(at));
                }
                None if !changed.contains(&id) => {
                    let why = Unusable::Disagrees(format!("experience {} is gone without a change after the saved version", show_id(id)));
                    return Err((why, rows));
                }
                // Changed since: a tombstone the searches walk through but never return.
                _ => row_of.push(None),
            }
        }
        if let Some(e) = rows.exps().iter().zip(&node_of).find_map(|(e, node)| (node.is_none() && !changed.contains(&e.id)).then_some(e)) {
            let why = Unusable::Disagrees(format!("experience {} has no node and no change after the saved version", show_id(e.id)));
            return Err((why, rows));
        }
        let records: Vec<MemoryRecord> = row_of
            .iter()
            .enumerate()
            .map(|(i, at)| record(MemoryId(i as u32), at.map_or(&EMPTY_EXPERIENCE, |at| &rows.exps()[at])))
            .collect();
        // The rows without a node (changed since) go to the overlay, with a copy of their vectors.
        let pending_vectors: Vec<Vec<f32>> =
            node_of.iter().enumerate().filter(|(_, node)| node.is_none()).map(|(at, _)| rows.vector_f32(at)).collect();
        // The usual open (the index saved at the bank's version, over the rows in id order) gives the rows'
        // buffer to the engine as it is; otherwise each node's vector is copied from its row.
        let in_order = row_of.len() == rows.len() && row_of.iter().enumerate().all(|(i, at)| *at == Some(i));
        let vectors = if in_order {
            None
        } else {
            let mut v = Vec::with_capacity(row_of.len() * dim);
            for at in &row_of {
                match at {
                    Some(at) => v.extend_from_slice(rows.vector(*at)),
                    None => v.extend(std::iter::repeat_n(half::f16::ZERO, dim)),
                }
            }
            Some(v)
        };
        let (exps, buffer) = rows.into_parts();
        let vectors = vectors.unwrap_or(buffer);
        let base = BaseMemory::build_half(format!("bank:{}", meta.name), records, vectors, dim, config.clone(), Some(saved.graph));
        let mut index = EpisodeMemory::new(Arc::new(base));
        for (i, at) in row_of.iter().enumerate() {
            if at.is_none() {
                index.remove(MemoryId(i as u32));
            }
        }
        let mut totals = HashMap::with_capacity(exps.len());
        let mut slots = BTreeMap::new();
        let mut by_mem = HashMap::with_capacity(exps.len());
        let mut pending = Vec::new();
        let mut pending_vectors = pending_vectors.into_iter();
        for (exp, node) in exps.into_iter().zip(node_of) {
            totals.insert(exp.id, (exp.usage_count, exp.last_used_epoch));
            match node {
                Some(mem) => {
                    by_mem.insert(mem, exp.id);
                    slots.insert(exp.id, Slot { exp, mem });
                }
                None => pending.push((exp, pending_vectors.next().unwrap_or_default())),
            }
        }
        let mut lib = Library {
            origin: IndexOrigin::Saved { version: saved_version, changed: changed.len() },
            meta,
            slots,
            by_mem,
            index,
            config: config.clone(),
            usage: Mutex::new(UsageBook { totals, pending: HashMap::new() }),
            compacting: std::sync::atomic::AtomicBool::new(false),
            abandoned: Arc::default(),
        };
        for (exp, vector) in pending {
            lib.insert(exp, &vector);
        }
        Ok(lib)
    }

    /// The bytes of this library's index to save ([`super::saved_index::encode`]), when the index is
    /// one graph over every experience (just built: no overlay, no tombstone); `None` otherwise.
    pub fn saved_index(&self) -> Option<Vec<u8>> {
        let base = self.index.base();
        let graph = base.graph()?;
        if self.index.changed_count() != 0 || base.len() != self.slots.len() {
            return None;
        }
        let ids: Option<Vec<u64>> = (0..base.len()).map(|i| self.by_mem.get(&MemoryId(i as u32)).copied()).collect();
        Some(super::saved_index::encode(&self.meta, &ids?, graph))
    }

    /// How this library's index was made.
    pub fn origin(&self) -> IndexOrigin {
        self.origin
    }

    /// The counters.
    pub fn meta(&self) -> &BankMeta {
        &self.meta
    }

    /// Live experiences.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when the library is empty.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The experience with `id`, usage as loaded or last written (see [`Library::with_usage`]).
    pub fn get(&self, id: u64) -> Option<&Experience> {
        self.slots.get(&id).map(|s| &s.exp)
    }

    /// A copy of `exp` with its current usage.
    pub fn with_usage(&self, exp: &Experience) -> Experience {
        let (usage_count, last_used_epoch) = self.usage(exp);
        Experience { usage_count, last_used_epoch, ..exp.clone() }
    }

    /// `exp`'s current usage count and last used epoch (what [`Library::with_usage`] fills in), without
    /// a copy of the experience.
    pub fn usage(&self, exp: &Experience) -> (u64, Option<u64>) {
        self.usage.lock().totals.get(&exp.id).copied().unwrap_or((exp.usage_count, exp.last_used_epoch))
    }

    /// Every experience in id order (usage not refreshed; see [`Library::with_usage`]).
    pub fn iter(&self) -> impl Iterator<Item = &Experience> + '_ {
        self.slots.values().map(|s| &s.exp)
    }

    /// The stored vector of `id`.
    pub fn vector(&self, id: u64) -> Option<std::borrow::Cow<'_, [f32]>> {
        self.slots.get(&id).and_then(|s| self.index.vector(s.mem))
    }

    /// The experiences as compression reads them ([`Candidate`]), and the M₀ their rows are in: an
    /// experience still as M₀ holds it points at its row (a million vectors are not copied), one written
    /// since the index was built carries its own vector.
    pub fn selection(&self) -> (Vec<Candidate<'static>>, Arc<BaseMemory>) {
        let mut written: HashMap<MemoryId, Vec<f32>> = self.index.additions().map(|(r, v)| (r.id, v)).collect();
        let candidates = self
            .slots
            .values()
            .filter_map(|s| {
                let vector = if self.index.is_original(s.mem) {
                    Vector::Row(s.mem.0)
                } else {
                    Vector::Own(std::borrow::Cow::Owned(written.remove(&s.mem)?))
                };
                Some(Candidate {
                    id: s.exp.id,
                    confidence: s.exp.confidence,
                    created_epoch: s.exp.created_epoch,
                    last_used_epoch: self.usage(&s.exp).1,
                    vector,
                })
            })
            .collect();
        (candidates, self.index.base().clone())
    }

    /// Top-`k` experiences by cosine similarity to `query` (a unit vector), at or above `min`, in
    /// `domain` if given; best first, ties by id. Counts usage at `epoch` when `count`.
    pub fn retrieve(&self, query: &[f32], k: usize, min: Option<f32>, domain: Option<&str>, count: bool) -> (Vec<Hit>, SearchPath) {
        let filter = Filter { source: domain.map(str::to_string), ..Filter::default() };
        let (scored, path) = self.index.search(query, k, &filter, min);
        let mut hits: Vec<Hit> = scored
            .iter()
            .filter_map(|s| {
                let slot = self.by_mem.get(&s.record.id).and_then(|id| self.slots.get(id))?;
                Some(Hit { similarity: s.score, exp: self.with_usage(&slot.exp) })
            })
            .collect();
        // The engine breaks ties by its own id; the library's order is by experience id.
        hits.sort_by(|a, b| b.similarity.total_cmp(&a.similarity).then(a.exp.id.cmp(&b.exp.id)));
        if count && !hits.is_empty() {
            let epoch = self.meta.epoch;
            let mut book = self.usage.lock();
            for h in &hits {
                let t = book.totals.entry(h.exp.id).or_insert((0, None));
                t.0 += 1;
                t.1 = Some(t.1.map_or(epoch, |e| e.max(epoch)));
                let p = book.pending.entry(h.exp.id).or_insert((0, epoch));
                p.0 += 1;
                p.1 = p.1.max(epoch);
            }
        }
        (hits, path)
    }

    /// Takes the usage not yet written to the store.
    pub fn take_usage(&self) -> Vec<UsageDelta> {
        let mut book = self.usage.lock();
        let mut out: Vec<UsageDelta> =
            book.pending.drain().map(|(id, (count, last_used_epoch))| UsageDelta { id, count, last_used_epoch }).collect();
        out.sort_by_key(|d| d.id);
        out
    }

    /// Puts usage back after a failed flush, so it is written with the next one.
    pub fn return_usage(&self, deltas: &[UsageDelta]) {
        let mut book = self.usage.lock();
        for d in deltas {
            let p = book.pending.entry(d.id).or_insert((0, d.last_used_epoch));
            p.0 += d.count;
            p.1 = p.1.max(d.last_used_epoch);
        }
    }

    /// The stored rows of a draft's puts with their vectors (one per put, in [`Draft::puts`] order).
    /// An experience that keeps its id keeps its usage; the usage it carries excludes the increments not
    /// yet flushed, which the flusher adds.
    pub fn stored(&self, draft: &Draft, vectors: Vec<Vec<f32>>) -> Vec<StoredExperience> {
        let book = self.usage.lock();
        draft
            .puts()
            .zip(vectors)
            .map(|(e, v)| {
                let mut exp = e.clone();
                if let Some((count, last)) = book.totals.get(&exp.id) {
                    let pending = book.pending.get(&exp.id).map_or(0, |p| p.0);
                    exp.usage_count = count.saturating_sub(pending);
                    exp.last_used_epoch = *last;
                }
                // As a store gives it back: at half precision ([`crate::memory::half`]).
                let mut vector = v;
                crate::memory::half::round(&mut vector);
                StoredExperience { exp, vector }
            })
            .collect()
    }

    /// Applies a committed draft (one unit vector per put, in [`Draft::puts`] order) and the counters
    /// the store now holds. Cannot fail.
    pub fn apply(&mut self, draft: Draft, vectors: &[Vec<f32>], meta: BankMeta) {
        if draft.clear {
            let ids: Vec<u64> = self.slots.keys().copied().collect();
            for id in ids {
                self.remove(id);
            }
        }
        let mut vectors = vectors.iter();
        for (id, state) in draft.finals {
            let kept = self.usage.lock().totals.get(&id).copied();
            self.remove(id);
            if let Some(exp) = state {
                let v = vectors.next().map(Vec::as_slice).unwrap_or(&[]);
                self.insert(exp, v);
                if let Some(k) = kept {
                    self.usage.lock().totals.insert(id, k);
                }
            }
        }
        self.meta = meta;
    }

    /// Applies row changes read from a shared store (another replica's writes) and its counters.
    pub fn catch_up(&mut self, meta: BankMeta, rows: Vec<RowChange>) {
        for row in rows {
            match row {
                RowChange::Put(StoredExperience { exp, vector }) => {
                    let id = exp.id;
                    self.remove(id);
                    let pending = self.usage.lock().pending.get(&id).map_or(0, |p| p.0);
                    let (count, last) = (exp.usage_count + pending, exp.last_used_epoch);
                    self.insert(exp, &vector);
                    self.usage.lock().totals.insert(id, (count, last));
                }
                RowChange::Deleted(id) => {
                    self.remove(id);
                }
            }
        }
        self.meta = meta;
    }

    fn remove(&mut self, id: u64) {
        if let Some(slot) = self.slots.remove(&id) {
            self.index.remove(slot.mem);
            self.by_mem.remove(&slot.mem);
            self.usage.lock().totals.remove(&id);
        }
    }

    fn insert(&mut self, exp: Experience, vector: &[f32]) {
        let mem = self.index.allocate_id();
        let zeros;
        let v = if vector.len() == self.index.dim() {
            vector
        } else {
            zeros = vec![0.0; self.index.dim()];
            &zeros
        };
        self.index.insert(record(mem, &exp), v);
        self.by_mem.insert(mem, exp.id);
        self.usage.lock().totals.entry(exp.id).or_insert((exp.usage_count, exp.last_used_epoch));
        self.slots.insert(exp.id, Slot { exp, mem });
    }

    /// Whether the index should be rebuilt: the overlay holds more than a quarter of the experiences (at
    /// least 1,024), so searches would scan it exactly beside the base's exact scan or HNSW. Claims the
    /// rebuild (true once until [`Library::adopt`] replaces this library).
    pub fn claim_compaction(&self) -> bool {
        let overlay = self.index.changed_count();
        if overlay <= 1_024 || overlay * 4 <= self.slots.len() {
            return false;
        }
        self.claim_rebuild()
    }

    /// Experiences held in the index's overlay rather than its base (0 right after a rebuild).
    pub fn overlay(&self) -> usize {
        self.index.changed_count()
    }

    /// True while a rebuild of this library's index is claimed (building in the background).
    pub fn rebuilding(&self) -> bool {
        self.compacting.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Claims a rebuild whatever the overlay (a [`IndexOrigin::Pending`] library's first build): true
    /// once until [`Library::adopt`] replaces this library or the claim is released.
    pub fn claim_rebuild(&self) -> bool {
        !self.compacting.swap(true, std::sync::atomic::Ordering::SeqCst)
    }

    /// Gives up a claimed rebuild (it failed), so a later write may claim it again.
    pub fn release_compaction(&self) {
        self.compacting.store(false, std::sync::atomic::Ordering::SeqCst);
    }

    /// The counters and every experience with its vector, usage as stored (the rows a rebuild starts
    /// from).
    pub fn snapshot(&self) -> (BankMeta, Rows) {
        let book = self.usage.lock();
        let vectors = self.vectors_by_mem();
        let mut rows = Rows::with_capacity(self.index.dim(), self.slots.len());
        for slot in self.slots.values() {
            let mut exp = slot.exp.clone();
            if let Some((count, last)) = book.totals.get(&exp.id) {
                exp.usage_count = count.saturating_sub(book.pending.get(&exp.id).map_or(0, |p| p.0));
                exp.last_used_epoch = *last;
            }
            rows.push(exp, vectors.get(&slot.mem).map_or(&[][..], |v| v));
        }
        (self.meta.clone(), rows)
    }

    /// Every live record's vector by engine id, in one pass over the index (a lookup per id would scan
    /// the overlay each time: quadratic after a million-row import).
    fn vectors_by_mem(&self) -> HashMap<MemoryId, std::borrow::Cow<'_, [f32]>> {
        self.index.iter().map(|(r, v)| (r.id, v)).collect()
    }

    /// Takes over `old`'s usage accounting (a rebuilt library replacing `old`, both at the same version).
    pub fn adopt(&mut self, old: &Library) {
        let mut from = old.usage.lock();
        let mut to = self.usage.lock();
        to.totals = std::mem::take(&mut from.totals);
        to.pending = std::mem::take(&mut from.pending);
    }

    /// Rebuilds the engine's base from the live experiences, in place (blocking: HNSW above the
    /// threshold; the server rebuilds in the background instead, see `Banks::write`).
    pub fn compact(&mut self) {
        let dim = self.index.dim();
        let vectors_of = self.vectors_by_mem();
        let mut records = Vec::with_capacity(self.slots.len());
        let mut vectors = Vec::with_capacity(self.slots.len() * dim);
        for (i, slot) in self.slots.values().enumerate() {
            records.push(record(MemoryId(i as u32), &slot.exp));
            push_narrowed(&mut vectors, vectors_of.get(&slot.mem).map_or(&[][..], |v| v), dim);
        }
        let base = BaseMemory::build_half(format!("bank:{}", self.meta.name), records, vectors, dim, self.config.clone(), None);
        self.index = EpisodeMemory::new(Arc::new(base));
        self.origin = IndexOrigin::Built;
        for (i, slot) in self.slots.values_mut().enumerate() {
            slot.mem = MemoryId(i as u32);
        }
        self.by_mem = self.slots.values().map(|s| (s.mem, s.exp.id)).collect();
    }
}

#[cfg(test)]
mod tests;
