//! The shared, read-only initial memory M₀ of a conversation, and the index planner.
//!
//! A conversation's M₀ (records, their unit vectors in one contiguous row-major buffer, and its HNSW
//! graph when the planner needs one) is built once at startup and shared through an `Arc` by every
//! episode on that conversation. Episodes never write to it: they keep their own changes in
//! [`super::EpisodeMemory`] and pass their tombstones in as a filter.
//!
//! Planner (qdrant's `full_scan_threshold` idea): at or below the threshold (episodes' default 20,000;
//! banks use the measured crossover, 2,000) the exact scan answers — exact, and for an episode's M₀ the
//! cheaper choice (see [`IndexConfig::full_scan_threshold`]). Above it, HNSW
//! (hnsw_rs builds the graph, [`super::graph::Graph`] searches its flat copy) answers unfiltered
//! searches, scoring with the same [`dot`] as the exact path. A search with a metadata filter uses the exact scan (filtered sets are
//! small, and HNSW with a restrictive filter loses recall), and so does any HNSW search that comes
//! back short.

use std::sync::atomic::{AtomicBool, Ordering};

use hnsw_rs::prelude::{Distance, Hnsw};

use super::beam::SearchBeam;
use super::graph::Graph;
use super::record::{Filter, MemoryRecord};
use super::vectors::{VectorRows, Vectors};
use crate::util::vector::{dot, Hit, TopK};

/// Which search path to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexMode {
    /// Exact scan at or below the full-scan threshold, HNSW above it.
    Auto,
    /// Always HNSW for unfiltered searches (the graph is built for every M₀).
    Hnsw,
    /// Always the exact scan (no graph is built).
    Exact,
}

impl std::str::FromStr for IndexMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(IndexMode::Auto),
            "hnsw" => Ok(IndexMode::Hnsw),
            "exact" => Ok(IndexMode::Exact),
            _ => Err(format!("unknown index mode {s:?} (expected auto, hnsw or exact)")),
        }
    }
}

/// Index settings.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexConfig {
    /// Path selection.
    pub mode: IndexMode,
    /// In `Auto` mode, M₀ sizes up to this use the exact scan. The measured crossover of one search is
    /// ≈ 2,400 (`cargo bench --bench search -- crossover`; 384-dim vectors, 2-core VM: the exact scan is
    /// ~3× faster than HNSW at 300, slower from ≈ 2.4k on, 2.2× slower at 10k), and banks, built once
    /// and searched many times, use 2,000 (`--banks-full-scan-threshold`). Episodes keep 20,000: a custom
    /// M₀ (at most 5,000 memories) is built for one episode, and building its graph takes seconds (a
    /// 10,000-experience bank's was ready 3.5–4.4 s after its import, on both cores) where a few
    /// searches save milliseconds; results also stay exact. LoCoMo M₀s (≤ 324) are far below either.
    pub full_scan_threshold: usize,
    /// HNSW neighbours per node.
    pub hnsw_m: usize,
    /// HNSW construction beam.
    pub hnsw_ef_construction: usize,
    /// HNSW search beam (raised to 2·k when k is larger): by default it grows with the graph
    /// ([`SearchBeam::Auto`]).
    pub hnsw_ef_search: SearchBeam,
    /// Hybrid search: fuse the dense ranking with BM25 by reciprocal rank (see `EpisodeMemory::search_text`).
    pub hybrid: bool,
    /// Build the HNSW graph on every core (about cores× faster, but the graph then depends on thread
    /// timing). Off for episodes, whose M₀ must be the same graph in every run; on for banks, which are
    /// rebuilt on open.
    pub parallel_build: bool,
    /// Ask the kernel for huge pages under a large M₀'s vector rows and its graph's layer 0
    /// ([`crate::util::huge`]): fewer TLB misses in a graph search's random reads.
    pub huge_pages: bool,
}

impl IndexConfig {
    /// Whether the planner searches `n` records with an HNSW graph (so one is built for them).
    pub fn wants_graph(&self, n: usize) -> bool {
        match self.mode {
            IndexMode::Exact => false,
            IndexMode::Hnsw => n > 0,
            IndexMode::Auto => n > self.full_scan_threshold,
        }
    }
}

impl Default for IndexConfig {
    fn default() -> Self {
        IndexConfig {
            mode: IndexMode::Auto,
            full_scan_threshold: 20_000,
            hnsw_m: 16,
            hnsw_ef_construction: 200,
            hnsw_ef_search: SearchBeam::Auto,
            hybrid: false,
            parallel_build: false,
            huge_pages: true,
        }
    }
}

/// Which path answered a search (reported for tests and benchmarks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchPath {
    /// Exact scan.
    Exact,
    /// The HNSW graph's search (scores bit-equal to the exact scan's).
    Hnsw,
}

/// HNSW's distance: `1 − cosine` of unit vectors, `max(0, 1 − dot)`, through the exact scan's own
/// [`dot`] kernel. (hnsw_rs's `DistCosine` recomputes both norms in scalar `f64` on every call: about
/// 6× slower per distance, and distances are nearly all of a search's and a build's time. A zero
/// vector — an empty text — is at distance 1 from everything, not 0 as with `DistCosine`.)
#[derive(Debug, Clone, Copy, Default)]
pub struct UnitDot;

impl Distance<f32> for UnitDot {
    fn eval(&self, a: &[f32], b: &[f32]) -> f32 {
        (1.0 - dot(a, b)).max(0.0)
    }
}

/// A tombstone set over M₀ positions.
pub trait Tombstones {
    /// Whether position `i` of M₀ is deleted or superseded in this episode.
    fn is_dead(&self, i: usize) -> bool;
    /// How many positions are dead.
    fn dead_count(&self) -> usize;
}

/// No tombstones (M₀ itself).
pub struct NoTombstones;
impl Tombstones for NoTombstones {
    fn is_dead(&self, _: usize) -> bool {
        false
    }
    fn dead_count(&self) -> usize {
        0
    }
}

/// The read-only initial memory of one conversation (or of one custom episode).
pub struct BaseMemory {
    key: String,
    records: Vec<MemoryRecord>,
    vectors: Vectors,
    dim: usize,
    total_chars: usize,
    speakers: Vec<String>,
    graph: Option<Graph>,
    terms: Vec<super::lexical::Terms>,
    config: IndexConfig,
}

impl std::fmt::Debug for BaseMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BaseMemory")
            .field("key", &self.key)
            .field("len", &self.records.len())
            .field("dim", &self.dim)
            .field("graph", &self.graph)
            .finish()
    }
}

impl BaseMemory {
    /// Builds M₀ from records whose ids are `0..n` in order and their unit vectors (row-major, `n × dim`),
    /// rounded to half precision ([`super::half`]) and kept as `f32` (an episode's M₀: see
    /// [`super::vectors`]). Builds the HNSW graph once if the planner will use it. Panics only on a caller
    /// bug (mismatched lengths or ids), never on data.
    pub fn build(key: String, records: Vec<MemoryRecord>, mut vectors: Vec<f32>, dim: usize, config: IndexConfig) -> Self {
        assert_eq!(vectors.len(), records.len() * dim, "vector buffer does not match the records");
        // Every vector memory holds is at half precision (see `super::half`), M₀'s too.
        super::half::round_parallel(&mut vectors, std::thread::available_parallelism().map_or(1, |n| n.get()));
        // Nothing abandons an episode's M₀: `NEVER` is never set, so the build always ends.
        let graph = config
            .wants_graph(records.len())
            .then(|| build_graph(&config, VectorRows::Full(&vectors), dim, &NEVER).ok().flatten())
            .flatten();
        Self::assemble(key, records, Vectors::Full(vectors), dim, config, graph)
    }

    /// M₀ over records and their vectors kept as `f16` (a bank's: half the memory, see
    /// [`super::vectors`]), with `graph` when one was built earlier over the same rows (a bank's saved
    /// index, [`Graph::decode`]d with `records.len()` nodes); without one, the graph is built if the
    /// planner will use it. Panics only on a caller bug (mismatched lengths or ids).
    pub fn build_half(
        key: String,
        records: Vec<MemoryRecord>,
        vectors: Vec<half::f16>,
        dim: usize,
        config: IndexConfig,
        graph: Option<Graph>,
    ) -> Self {
        assert_eq!(vectors.len(), records.len() * dim, "vector buffer does not match the records");
        // `NEVER` is never set, so the build always ends.
        let graph = Self::graph_of(&config, graph, &vectors, dim, &NEVER).ok().flatten();
        Self::assemble(key, records, Vectors::Half(vectors), dim, config, graph)
    }

    /// [`BaseMemory::build_half`], stopped between blocks of the graph's inserts once `abandoned` is set
    /// (a background rebuild whose bank was deleted or replaced): `None` then.
    pub fn build_half_unless(
        key: String,
        records: Vec<MemoryRecord>,
        vectors: Vec<half::f16>,
        dim: usize,
        config: IndexConfig,
        abandoned: &AtomicBool,
    ) -> Option<Self> {
        assert_eq!(vectors.len(), records.len() * dim, "vector buffer does not match the records");
        let graph = Self::graph_of(&config, None, &vectors, dim, abandoned).ok()?;
        Some(Self::assemble(key, records, Vectors::Half(vectors), dim, config, graph))
    }

    /// `graph` if given, else the graph `config` wants over `vectors` (built), else none.
    fn graph_of(
        config: &IndexConfig,
        graph: Option<Graph>,
        vectors: &[half::f16],
        dim: usize,
        abandoned: &AtomicBool,
    ) -> Result<Option<Graph>, Abandoned> {
        match graph {
            Some(g) => Ok(Some(g)),
            None if config.wants_graph(vectors.len() / dim.max(1)) => build_graph(config, VectorRows::Half(vectors), dim, abandoned),
            None => Ok(None),
        }
    }

    fn assemble(
        key: String,
        records: Vec<MemoryRecord>,
        vectors: Vectors,
        dim: usize,
        config: IndexConfig,
        mut graph: Option<Graph>,
    ) -> Self {
        debug_assert!(records.iter().enumerate().all(|(i, r)| r.id.0 as usize == i));
        if config.huge_pages {
            // A large M₀'s rows and its graph's layer 0 are read at random by its searches (768 and 128 MB at
            // a 1,000,000-row bank).
            let rows = vectors.back_with_huge_pages();
            let layer0 = graph.as_ref().map(Graph::back_with_huge_pages);
            tracing::debug!(?rows, ?layer0, n = records.len(), "M₀ pages");
        }
        if let Some(g) = &mut graph {
            g.attach_entry_rows(vectors.view(), dim);
        }
        let total_chars = records.iter().map(MemoryRecord::char_len).sum();
        let mut speakers: Vec<String> = Vec::new();
        for r in &records {
            if let Some(s) = &r.speaker {
                if !speakers.contains(s) {
                    speakers.push(s.clone());
                }
            }
        }
        let terms = if config.hybrid { records.iter().map(|r| super::lexical::Terms::of(&r.text)).collect() } else { Vec::new() };
        BaseMemory { key, records, vectors, dim, total_chars, speakers, graph, terms, config }
    }

    /// Key of this M₀ (the conversation id, or a custom episode's id).
    pub fn key(&self) -> &str {
        &self.key
    }
    /// Number of records.
    pub fn len(&self) -> usize {
        self.records.len()
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
    /// Vector dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }
    /// Sum of record lengths in characters.
    pub fn total_chars(&self) -> usize {
        self.total_chars
    }
    /// Speakers in order of first appearance.
    pub fn speakers(&self) -> &[String] {
        &self.speakers
    }
    /// Record at position `i` (== its id number).
    pub fn record(&self, i: usize) -> Option<&MemoryRecord> {
        self.records.get(i)
    }
    /// All records.
    pub fn records(&self) -> &[MemoryRecord] {
        &self.records
    }
    /// Unit vector of position `i` (borrowed when M₀ keeps `f32`, widened when it keeps `f16`).
    pub fn vector(&self, i: usize) -> std::borrow::Cow<'_, [f32]> {
        self.vectors.view().row(i, self.dim)
    }
    /// Every position's vector: the row-major buffer, `f32` or `f16`.
    pub fn rows(&self) -> VectorRows<'_> {
        self.vectors.view()
    }
    /// [`dot`] of `query` with position `i`'s vector (bit-equal however M₀ keeps it).
    pub fn dot(&self, query: &[f32], i: usize) -> f32 {
        self.vectors.view().dot(query, i, self.dim)
    }
    /// Lexical terms of position `i` (hybrid mode only).
    pub fn terms(&self, i: usize) -> Option<&super::lexical::Terms> {
        self.terms.get(i)
    }

    /// Whether an HNSW graph was built.
    pub fn has_graph(&self) -> bool {
        self.graph.is_some()
    }
    /// The HNSW graph, if one was built (to be saved with a bank).
    pub fn graph(&self) -> Option<&Graph> {
        self.graph.as_ref()
    }
    /// The index settings this M₀ was built with.
    pub fn config(&self) -> &IndexConfig {
        &self.config
    }

    /// Offers the live records matching `filter` to `out`; returns the path used.
    pub fn search_into(&self, query: &[f32], filter: &Filter, dead: &dyn Tombstones, out: &mut TopK, k: usize) -> SearchPath {
        if let (Some(g), true) = (&self.graph, filter.is_empty()) {
            let live = self.records.len() - dead.dead_count();
            let want = k.min(live);
            if want == 0 {
                return SearchPath::Hnsw;
            }
            let ef = self.config.hnsw_ef_search.for_nodes(g.len()).max(2 * k);
            let found = g.search(query, self.vectors.view(), self.dim, ef, dead);
            if found.len() >= want {
                for h in found {
                    out.push(h);
                }
                return SearchPath::Hnsw;
            }
        }
        self.exact_into(query, filter, dead, out);
        SearchPath::Exact
    }

    /// The exact scan. Unfiltered, it scores M₀ in blocks of rows (several rows at a time, bit-equal to
    /// [`dot`]) and offers the live ones; filtered, it scores only the matching rows.
    pub fn exact_into(&self, query: &[f32], filter: &Filter, dead: &dyn Tombstones, out: &mut TopK) {
        let rows = self.vectors.view();
        if !filter.is_empty() {
            for (i, r) in self.records.iter().enumerate() {
                if !dead.is_dead(i) && filter.matches(r) {
                    out.push(Hit { score: rows.dot(query, i, self.dim), key: i as u32 });
                }
            }
            return;
        }
        let any_dead = dead.dead_count() > 0;
        rows.for_each_score(query, self.dim, |i, score| {
            if !(any_dead && dead.is_dead(i)) {
                out.push(Hit { score, key: i as u32 });
            }
        });
    }
}

/// Never set: what a build nobody abandons checks.
static NEVER: AtomicBool = AtomicBool::new(false);

/// A graph build stopped because `abandoned` was set (a background rebuild whose bank is gone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Abandoned;

/// The HNSW graph over `rows` (`dim` values each): hnsw_rs builds it from the rows widened to `f32` a
/// block at a time (it keeps its own copy of each row until the flat copy is taken), and the flat copy
/// answers searches. `None` when there are no rows. Between blocks it stops once `abandoned` is set: a
/// 1,000,000-row build takes most of an hour on two cores, which a deleted bank should not keep.
fn build_graph(config: &IndexConfig, rows: VectorRows<'_>, dim: usize, abandoned: &AtomicBool) -> Result<Option<Graph>, Abandoned> {
    let n = rows.len() / dim.max(1);
    let layers = 16.min(((n.max(2) as f64).ln().ceil() as usize).max(1));
    let h = Hnsw::<f32, UnitDot>::new(config.hnsw_m, n, layers, config.hnsw_ef_construction, UnitDot);
    /// Rows widened per block of inserts.
    const BLOCK: usize = 16_384;
    let mut wide = Vec::new();
    for first in (0..n).step_by(BLOCK) {
        if abandoned.load(Ordering::Relaxed) {
            return Err(Abandoned);
        }
        let last = (first + BLOCK).min(n);
        let block: &[f32] = match rows {
            VectorRows::Full(v) => &v[first * dim..last * dim],
            VectorRows::Half(v) => {
                let part = &v[first * dim..last * dim];
                wide.resize(part.len(), 0.0);
                half::slice::HalfFloatSliceExt::convert_to_f32_slice(part, &mut wide[..]);
                &wide
            }
        };
        let block_rows = block.chunks_exact(dim).enumerate().map(|(j, row)| (row, first + j));
        if config.parallel_build {
            h.parallel_insert_slice(&block_rows.collect::<Vec<_>>());
        } else {
            // Sequential inserts: hnsw_rs seeds its level generator with a constant, so a sequential
            // build is deterministic (parallel inserts would depend on thread timing).
            for r in block_rows {
                h.insert_slice(r);
            }
        }
    }
    // The flat copy answers searches; hnsw_rs's structure (and its copy of the vectors) goes.
    Ok(Graph::from_hnsw(&h, n))
}
