//! One episode's view of memory: the shared M₀ plus this episode's own changes.
//!
//! Creating it is O(1) in |M₀|: it holds an `Arc` to M₀, an (initially unallocated) tombstone bitset
//! over M₀ positions, and its own added records with their vectors in half precision ([`super::half`]:
//! the vectors were two thirds of an open episode's bytes). An update of an M₀ record
//! tombstones the original and adds the new version under the same id; a delete tombstones it (or drops
//! an added record). Searches scan M₀ (skipping tombstones) and the additions, and merge the results.

use std::borrow::Cow;
use std::sync::Arc;

use super::base::{BaseMemory, SearchPath, Tombstones};
use super::half::HalfVec;
use super::lexical::{bm25_scores, rank_by, rrf, Terms, RRF_K};
use super::record::{Filter, MemoryId, MemoryRecord};
use crate::util::vector::{Hit, TopK};

/// Tombstones over M₀ positions, allocated on the first delete.
#[derive(Debug, Clone, Default)]
struct Bitset {
    words: Vec<u64>,
    count: usize,
}

impl Bitset {
    fn set(&mut self, i: usize, n: usize) {
        if self.words.is_empty() {
            self.words = vec![0; n.div_ceil(64)];
        }
        let (w, b) = (i / 64, 1u64 << (i % 64));
        if self.words[w] & b == 0 {
            self.words[w] |= b;
            self.count += 1;
        }
    }
}

impl Tombstones for Bitset {
    #[inline]
    fn is_dead(&self, i: usize) -> bool {
        self.words.get(i / 64).is_some_and(|w| w & (1u64 << (i % 64)) != 0)
    }
    fn dead_count(&self) -> usize {
        self.count
    }
}

/// A search result: score and the record.
#[derive(Debug, Clone, Copy)]
pub struct Scored<'a> {
    /// Cosine similarity.
    pub score: f32,
    /// The record.
    pub record: &'a MemoryRecord,
}

/// One record the episode wrote, with its half-precision vector (see [`super::half`]), its lexical terms
/// (hybrid search only) and its listing position.
#[derive(Debug, Clone)]
struct Added {
    record: MemoryRecord,
    vector: HalfVec,
    terms: Option<Box<Terms>>,
    pos: u64,
}

/// An episode's memory: M₀ shared, changes owned.
#[derive(Debug, Clone)]
pub struct EpisodeMemory {
    base: Arc<BaseMemory>,
    dead: Bitset,
    added: Vec<Added>,
    next_id: u32,
    next_pos: u64,
    total_chars: usize,
}

impl EpisodeMemory {
    /// Heap bytes this episode's overlay holds beyond the shared M₀ (tombstones, added records with their
    /// vectors and terms): what a copy of it (ForkEpisode) allocates.
    pub fn overlay_bytes(&self) -> usize {
        let record = |r: &MemoryRecord| {
            r.text.capacity()
                + r.speaker.as_ref().map_or(0, String::capacity)
                + r.session_date.as_ref().map_or(0, String::capacity)
                + r.source.capacity()
                + r.evidence.iter().map(|e| e.capacity() + std::mem::size_of::<String>()).sum::<usize>()
        };
        self.dead.words.capacity() * 8
            + self.added.capacity() * std::mem::size_of::<Added>()
            + self
                .added
                .iter()
                .map(|a| {
                    record(&a.record)
                        + a.vector.heap_bytes()
                        + a.terms.as_ref().map_or(0, |t| std::mem::size_of::<Terms>() + t.heap_bytes())
                })
                .sum::<usize>()
    }

    /// A fresh view of `base` with no changes. O(1) in |M₀|.
    pub fn new(base: Arc<BaseMemory>) -> Self {
        let next_id = base.len() as u32;
        let total_chars = base.total_chars();
        EpisodeMemory { base, dead: Bitset::default(), added: Vec::new(), next_id, next_pos: next_id as u64, total_chars }
    }

    /// The shared M₀.
    pub fn base(&self) -> &Arc<BaseMemory> {
        &self.base
    }
    /// Number of live memories.
    pub fn len(&self) -> usize {
        self.base.len() - self.dead.dead_count() + self.added.len()
    }
    /// True when no memory is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Sum of live memory lengths in characters.
    pub fn total_chars(&self) -> usize {
        self.total_chars
    }
    /// Vector dimension.
    pub fn dim(&self) -> usize {
        self.base.dim()
    }
    /// The id the next new memory will get (ids are never reused).
    pub fn peek_next_id(&self) -> MemoryId {
        MemoryId(self.next_id)
    }
    /// Number of records this episode added or rewrote.
    pub fn changed_count(&self) -> usize {
        self.added.len()
    }

    fn base_live(&self, i: usize) -> bool {
        i < self.base.len() && !self.dead.is_dead(i)
    }

    /// Whether `id` is an M₀ record this episode has neither deleted nor rewritten: it is still M₀'s
    /// version, with M₀'s vector.
    pub fn is_original(&self, id: MemoryId) -> bool {
        self.base_live(id.0 as usize)
    }

    /// M₀ records this episode deleted or rewrote, in M₀ order.
    pub fn removed_originals(&self) -> impl Iterator<Item = &MemoryRecord> + '_ {
        (0..self.base.len()).filter(|i| self.dead.is_dead(*i)).filter_map(|i| self.base.record(i))
    }

    /// How many M₀ records this episode deleted or rewrote.
    pub fn removed_count(&self) -> usize {
        self.dead.dead_count()
    }

    /// The records this episode wrote (created, rewritten, merged, split), with their unit vectors, in
    /// the order they were written.
    pub fn additions(&self) -> impl Iterator<Item = (&MemoryRecord, Vec<f32>)> + '_ {
        self.added.iter().map(|a| (&a.record, a.vector.to_f32()))
    }

    /// Whether the episode's memory is still M₀ itself (nothing deleted, rewritten or added).
    pub fn is_unchanged(&self) -> bool {
        self.added.is_empty() && self.dead.dead_count() == 0
    }

    /// The live record with this id.
    pub fn get(&self, id: MemoryId) -> Option<&MemoryRecord> {
        let i = id.0 as usize;
        if self.base_live(i) {
            return self.base.record(i);
        }
        self.added.iter().find(|a| a.record.id == id).map(|a| &a.record)
    }

    /// The unit vector of a live record.
    pub fn vector(&self, id: MemoryId) -> Option<Cow<'_, [f32]>> {
        let i = id.0 as usize;
        if self.base_live(i) {
            return Some(self.base.vector(i));
        }
        self.added.iter().find(|a| a.record.id == id).map(|a| Cow::Owned(a.vector.to_f32()))
    }

    /// Live records with their vectors: M₀ order first, then additions in the order they were made.
    pub fn iter(&self) -> impl Iterator<Item = (&MemoryRecord, Cow<'_, [f32]>)> + '_ {
        let base = (0..self.base.len()).filter(|i| !self.dead.is_dead(*i)).map(|i| (&self.base.records()[i], self.base.vector(i)));
        base.chain(self.added.iter().map(|a| (&a.record, Cow::Owned(a.vector.to_f32()))))
    }

    /// Live records in listing order with their listing positions: M₀ records at their index, then each
    /// record added or rewritten at the next position, in the order of the edits. Positions only grow and
    /// are never reused, so "the records after position p" is stable under edits: a delete never shifts
    /// another record, a new or updated record comes after every position handed out before it.
    pub fn listing(&self) -> impl Iterator<Item = (u64, &MemoryRecord)> + '_ {
        let base = (0..self.base.len()).filter(|i| !self.dead.is_dead(*i)).map(|i| (i as u64, &self.base.records()[i]));
        base.chain(self.added.iter().map(|a| (a.pos, &a.record)))
    }

    /// Hands out a fresh id.
    pub fn allocate_id(&mut self) -> MemoryId {
        let id = MemoryId(self.next_id);
        self.next_id += 1;
        id
    }

    /// Adds a record (its id must come from [`Self::allocate_id`]) with its unit vector, which it keeps in
    /// half precision.
    pub fn insert(&mut self, record: MemoryRecord, vector: &[f32]) {
        debug_assert_eq!(vector.len(), self.dim());
        self.total_chars += record.char_len();
        let terms = self.base.config().hybrid.then(|| Box::new(Terms::of(&record.text)));
        crate::util::grow::room(&mut self.added, 1);
        self.added.push(Added { record, vector: HalfVec::from_f32(vector), terms, pos: self.next_pos });
        self.next_pos += 1;
    }

    /// Removes a live record; returns it.
    pub fn remove(&mut self, id: MemoryId) -> Option<MemoryRecord> {
        let i = id.0 as usize;
        if self.base_live(i) {
            let n = self.base.len();
            self.dead.set(i, n);
            let r = self.base.records()[i].clone();
            self.total_chars -= r.char_len();
            return Some(r);
        }
        let p = self.added.iter().position(|a| a.record.id == id)?;
        let r = self.added.remove(p).record;
        self.total_chars -= r.char_len();
        Some(r)
    }

    /// Replaces a live record by a new version with the same id (update). Returns false if absent.
    pub fn replace(&mut self, record: MemoryRecord, vector: &[f32]) -> bool {
        let id = record.id;
        if self.remove(id).is_none() {
            return false;
        }
        self.insert(record, vector);
        true
    }

    /// The search tools and the reward use: dense ([`Self::search`]), or — when M₀ was built with
    /// `hybrid` — reciprocal-rank fusion (k = 60) of the exact dense ranking and BM25 over the live
    /// records matching `filter`; the order is by fused rank (ties by id), the scores shown are cosine
    /// similarities, and `threshold` applies to them.
    pub fn search_text(
        &self,
        query: &[f32],
        text: &str,
        k: usize,
        filter: &Filter,
        threshold: Option<f32>,
    ) -> (Vec<Scored<'_>>, SearchPath) {
        if !self.base.config().hybrid {
            return self.search(query, k, filter, threshold);
        }
        let mut live: Vec<(&MemoryRecord, f32, &Terms)> = Vec::with_capacity(self.len());
        for i in 0..self.base.len() {
            let (Some(r), Some(t)) = (self.base.record(i), self.base.terms(i)) else { continue };
            if !self.dead.is_dead(i) && (filter.is_empty() || filter.matches(r)) {
                live.push((r, self.base.dot(query, i), t));
            }
        }
        let mut buf = vec![0.0; self.dim()];
        for a in &self.added {
            let Some(t) = &a.terms else { continue };
            if filter.is_empty() || filter.matches(&a.record) {
                a.vector.decode_into(&mut buf);
                live.push((&a.record, crate::util::vector::dot(query, &buf), t));
            }
        }
        // Id order, so the shared rankings' ties-by-position are ties by id (an updated M₀ record sits
        // among the additions, out of id order).
        live.sort_by_key(|(r, _, _)| r.id);
        let dense: Vec<f32> = live.iter().map(|(_, s, _)| *s).collect();
        let terms: Vec<&Terms> = live.iter().map(|(_, _, t)| *t).collect();
        let by_dense = rank_by(&dense.iter().map(|s| f64::from(*s)).collect::<Vec<_>>());
        let by_lexical = rank_by(&bm25_scores(text, &terms));
        let out = rrf(&[&by_dense, &by_lexical], live.len(), RRF_K)
            .into_iter()
            .filter(|i| threshold.is_none_or(|t| dense[*i] >= t))
            .take(k)
            .map(|i| Scored { score: dense[i], record: live[i].0 })
            .collect();
        (out, SearchPath::Exact)
    }

    /// Top-`k` live records matching `filter` with score ≥ `threshold`, best first (ties by id).
    pub fn search(&self, query: &[f32], k: usize, filter: &Filter, threshold: Option<f32>) -> (Vec<Scored<'_>>, SearchPath) {
        let mut top = TopK::new(k);
        let path = self.base.search_into(query, filter, &self.dead, &mut top, k);
        let mut buf = if self.added.is_empty() { Vec::new() } else { vec![0.0; self.dim()] };
        for a in &self.added {
            if filter.is_empty() || filter.matches(&a.record) {
                a.vector.decode_into(&mut buf);
                top.push(Hit { score: crate::util::vector::dot(query, &buf), key: a.record.id.0 });
            }
        }
        let hits = top.into_sorted();
        let out = hits
            .into_iter()
            .filter(|h| threshold.is_none_or(|t| h.score >= t))
            .filter_map(|h| self.get(MemoryId(h.key)).map(|record| Scored { score: h.score, record }))
            .collect();
        (out, path)
    }
}
