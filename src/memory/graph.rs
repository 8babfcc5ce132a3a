//! The HNSW graph M₀ is searched with: hnsw_rs builds it, this flat copy answers the searches.
//!
//! hnsw_rs is a good builder (parallel inserts, its heuristic neighbour selection) but a slow reader:
//! every node is its own `Arc` with a lock around its neighbour lists and its own copy of the vector,
//! and a search walks them through a hash set. Profiled at 100,000 experiences, ~80 % of a search was
//! the processor waiting on those pointer chases. So once a build ends, its neighbour lists are copied
//! into flat arrays (layer 0 as one `n × width` table of `u32`, the sparse upper layers per node) and
//! the hnsw_rs structure is dropped, with its second copy of every vector. A search then reads M₀'s own
//! contiguous rows and scores them with [`dot`], so every score it returns is bit-equal to the exact
//! scan's, and the `ef` best it found are all offered to the caller's top-k (not only the first k).
//!
//! The search is HNSW's layer-0 beam (Malkov & Yashunin, alg. 2): best-first, of width `ef`. It starts
//! from the few best of about a thousand entry nodes (the upper layers' nodes, a uniform sample), each
//! scored exactly, where HNSW descends greedily from one entry point through the upper layers: on
//! clustered data the descent can end in the wrong cluster, and the beam then returns none of the true
//! nearest. Dead (tombstoned) nodes are walked through but never returned. A node's fresh neighbours
//! are scored four rows at a time ([`VectorRows::dot_each`], the same bits). It is deterministic: ties
//! go to the lower id.

use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

use hnsw_rs::prelude::{Distance, Hnsw};

use super::base::Tombstones;
use super::vectors::{VectorRows, Vectors};
use crate::util::vector::{Hit, TopK};

mod codec;
pub use codec::Malformed;

/// An empty slot of a layer-0 row.
const NONE: u32 = u32::MAX;

/// The most entry nodes a search scores to choose where its beam starts.
const MAX_ENTRIES: usize = 1_024;

/// How many of the best-scoring entry nodes the layer-0 beam starts from.
const SEEDS: usize = 4;

/// A candidate or result: ordered by score, then by lower id (the better one is greater).
#[derive(Clone, Copy, PartialEq)]
struct Near(Hit);

impl Eq for Near {}
impl Ord for Near {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.score.total_cmp(&other.0.score).then(other.0.key.cmp(&self.0.key))
    }
}
impl PartialOrd for Near {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The visited marks of one thread's searches: a stamp per node, cleared by bumping the generation.
#[derive(Default)]
struct Visited {
    stamps: Vec<u32>,
    generation: u32,
}

impl Visited {
    /// Starts a search over `n` nodes.
    fn begin(&mut self, n: usize) {
        if self.stamps.len() < n {
            self.stamps.resize(n, 0);
        }
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.stamps.fill(0);
            self.generation = 1;
        }
    }
    /// Marks `i`; true if it was not marked yet in this search.
    #[inline]
    fn first_visit(&mut self, i: u32) -> bool {
        let s = &mut self.stamps[i as usize];
        let first = *s != self.generation;
        *s = self.generation;
        first
    }
}

thread_local! {
    static VISITED: RefCell<Visited> = RefCell::new(Visited::default());
}

/// An HNSW graph over the rows `0..n` of a row-major vector buffer.
pub struct Graph {
    /// Slots per node on layer 0.
    width: usize,
    /// Layer 0: node `i`'s neighbours in `layer0[i·width ..][..width]`, padded with [`NONE`].
    layer0: Vec<u32>,
    /// Layers 1 and up: `upper[i][l − 1]` are node `i`'s neighbours on layer `l` (empty for most nodes).
    upper: Vec<Box<[Box<[u32]>]>>,
    /// HNSW's own entry point, a node of the top layer (kept so the saved bytes stay HNSW's graph).
    entry: u32,
    /// The top layer.
    top: usize,
    /// The nodes a search scores first ([`pick_entries`]), in id order.
    entries: Vec<u32>,
    /// Their rows, copied into one contiguous buffer by [`Graph::attach_entry_rows`] (scored as a block
    /// instead of one scattered row each; the same bits).
    entry_rows: Option<Vectors>,
}

/// The entry nodes: every node of layer 1 and up (a uniform sample of the graph, about one node in
/// `M`), thinned evenly to at most [`MAX_ENTRIES`], and HNSW's entry point.
fn pick_entries(upper: &[Box<[Box<[u32]>]>], entry: u32) -> Vec<u32> {
    let tall: Vec<u32> = upper.iter().enumerate().filter(|(_, l)| !l.is_empty()).map(|(i, _)| i as u32).collect();
    let step = tall.len().div_ceil(MAX_ENTRIES).max(1);
    let mut entries: Vec<u32> = tall.into_iter().step_by(step).collect();
    if let Err(at) = entries.binary_search(&entry) {
        entries.insert(at, entry);
    }
    entries
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph").field("nodes", &self.upper.len()).field("width", &self.width).field("top", &self.top).finish()
    }
}

impl Graph {
    /// Copies the neighbour lists of a graph hnsw_rs built over the rows `0..n` (inserted with their row
    /// number as id). Returns `None` for an empty graph.
    pub fn from_hnsw<D: Distance<f32> + Send + Sync>(h: &Hnsw<'_, f32, D>, n: usize) -> Option<Self> {
        let mut lists: Vec<Vec<Vec<u32>>> = vec![Vec::new(); n];
        let mut entry: Option<(usize, u32)> = None;
        for point in h.get_point_indexation() {
            let id = point.get_origin_id();
            if id >= n {
                continue;
            }
            let level = usize::from(point.get_point_id().0);
            let ids: Vec<Vec<u32>> = point
                .get_neighborhood_id()
                .into_iter()
                .take(level + 1)
                .map(|layer| layer.iter().map(|nb| nb.d_id).filter(|&d| d < n).map(|d| d as u32).collect())
                .collect();
            lists[id] = ids;
            // The highest node, the lowest id among equals: the same entry whatever the iteration order.
            if entry.is_none_or(|(l, e)| level > l || (level == l && (id as u32) < e)) {
                entry = Some((level, id as u32));
            }
        }
        let (top, entry) = entry?;
        let width = lists.iter().map(|l| l.first().map_or(0, Vec::len)).max().unwrap_or(0).max(1);
        let mut layer0 = vec![NONE; n * width];
        let mut upper = Vec::with_capacity(n);
        for (i, mut l) in lists.into_iter().enumerate() {
            if !l.is_empty() {
                let row = l.remove(0);
                layer0[i * width..i * width + row.len()].copy_from_slice(&row);
            }
            upper.push(l.into_iter().map(Vec::into_boxed_slice).collect::<Box<[_]>>());
        }
        Some(Graph::assemble(width, layer0, upper, entry, top))
    }

    /// The graph of these lists, with its entry nodes picked.
    fn assemble(width: usize, layer0: Vec<u32>, upper: Vec<Box<[Box<[u32]>]>>, entry: u32, top: usize) -> Self {
        let entries = pick_entries(&upper, entry);
        Graph { width, layer0, upper, entry, top, entries, entry_rows: None }
    }

    /// Copies the entry nodes' rows out of `vectors` (the rows the graph was built over) into one block,
    /// which every search then scores instead of the scattered rows: the same scores, read contiguously.
    pub fn attach_entry_rows(&mut self, vectors: VectorRows<'_>, dim: usize) {
        self.entry_rows = Some(match vectors {
            VectorRows::Full(v) => Vectors::Full(self.entries.iter().flat_map(|&i| &v[i as usize * dim..][..dim]).copied().collect()),
            VectorRows::Half(v) => Vectors::Half(self.entries.iter().flat_map(|&i| &v[i as usize * dim..][..dim]).copied().collect()),
        });
    }

    /// Asks for huge pages under layer 0, which every search step reads at random ([`crate::util::huge`]).
    pub fn back_with_huge_pages(&self) -> crate::util::huge::Backing {
        crate::util::huge::back_with_huge_pages(&self.layer0)
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.upper.len()
    }

    /// True when the graph has no node.
    pub fn is_empty(&self) -> bool {
        self.upper.is_empty()
    }

    /// Slots per node on layer 0: the most neighbours a node has there.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Node `i`'s neighbours on layer 0 (its approximate nearest, as HNSW's heuristic chose them): what
    /// a bank's large-scale compression reads instead of comparing every pair.
    pub fn layer0(&self, i: usize) -> &[u32] {
        self.neighbours(i as u32, 0)
    }

    /// Neighbours of `i` on `layer`.
    fn neighbours(&self, i: u32, layer: usize) -> &[u32] {
        if layer == 0 {
            let row = &self.layer0[i as usize * self.width..][..self.width];
            let len = row.iter().position(|&x| x == NONE).unwrap_or(self.width);
            &row[..len]
        } else {
            self.upper[i as usize].get(layer - 1).map_or(&[], |l| l)
        }
    }

    /// The `ef` best live nodes the search finds for `query`, best first, scored with [`dot`] against
    /// the rows of `vectors` (`dim` values each, the rows the graph was built over; `f32` or `f16`, the
    /// same scores).
    ///
    /// Where it starts: the [`SEEDS`] best of the entry nodes, scored exactly, instead of HNSW's greedy
    /// descent from its one entry point. On clustered data the descent can settle in the wrong cluster,
    /// and a beam started there returns none of the true nearest (measured on the banks bench's library:
    /// 8 of 200 queries at 200,000 with `ef` 64 found 0 of their 10); a thousand scored entries cost
    /// less than the descent's scattered reads once they are one block.
    pub fn search(&self, query: &[f32], vectors: VectorRows<'_>, dim: usize, ef: usize, dead: &dyn Tombstones) -> Vec<Hit> {
        let n = self.upper.len();
        if ef == 0 || n == 0 {
            return Vec::new();
        }
        let starts = self.seeds(query, vectors, dim);
        VISITED.with(|v| {
            let mut visited = v.borrow_mut();
            visited.begin(n);
            // `todo` pops the best candidate; `found` keeps the `ef` best live nodes, worst on top.
            let mut todo = BinaryHeap::with_capacity(4 * ef);
            let mut found: BinaryHeap<std::cmp::Reverse<Near>> = BinaryHeap::with_capacity(ef + 1);
            for at in starts {
                if visited.first_visit(at.0.key) {
                    todo.push(at);
                    if !dead.is_dead(at.0.key as usize) {
                        found.push(std::cmp::Reverse(at));
                        if found.len() > ef {
                            found.pop();
                        }
                    }
                }
            }
            let mut fresh: Vec<u32> = Vec::with_capacity(self.width);
            let mut scores: Vec<f32> = Vec::with_capacity(self.width);
            while let Some(c) = todo.pop() {
                if found.len() >= ef && found.peek().is_some_and(|w| c < w.0) {
                    break;
                }
                fresh.clear();
                fresh.extend(self.neighbours(c.0.key, 0).iter().copied().filter(|&nb| visited.first_visit(nb)));
                vectors.touch(&fresh, dim);
                scores.resize(fresh.len(), 0.0);
                vectors.dot_each(query, &fresh, dim, &mut scores);
                for (&nb, &score) in fresh.iter().zip(&scores) {
                    let s = Near(Hit { score, key: nb });
                    if found.len() < ef || found.peek().is_some_and(|w| s > w.0) {
                        todo.push(s);
                        if !dead.is_dead(nb as usize) {
                            found.push(std::cmp::Reverse(s));
                            if found.len() > ef {
                                found.pop();
                            }
                        }
                    }
                }
            }
            let mut out: Vec<Hit> = found.into_iter().map(|r| r.0 .0).collect();
            out.sort_by_key(|h| std::cmp::Reverse(Near(*h)));
            out
        })
    }

    /// The [`SEEDS`] best entry nodes for `query`, best first (ties to the lower id).
    fn seeds(&self, query: &[f32], vectors: VectorRows<'_>, dim: usize) -> Vec<Near> {
        let mut best = TopK::new(SEEDS);
        match &self.entry_rows {
            Some(rows) if rows.view().len() == self.entries.len() * dim => {
                rows.view().for_each_score(query, dim, |j, score| best.push(Hit { score, key: self.entries[j] }));
            }
            _ => {
                let mut scores = vec![0.0; self.entries.len()];
                vectors.dot_each(query, &self.entries, dim, &mut scores);
                for (&key, score) in self.entries.iter().zip(scores) {
                    best.push(Hit { score, key });
                }
            }
        }
        best.into_sorted().into_iter().map(Near).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::base::{NoTombstones, UnitDot};
    use crate::util::vector::dot;
    use crate::util::vector::normalize;
    use proptest::prelude::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use std::collections::HashSet;

    /// `n` unit vectors (row-major) around `clusters` centres.
    pub(crate) fn rows(n: usize, dim: usize, clusters: usize, seed: u64) -> Vec<f32> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let centres: Vec<Vec<f32>> = (0..clusters).map(|_| (0..dim).map(|_| rng.random_range(-1.0f32..1.0)).collect()).collect();
        let mut out = Vec::with_capacity(n * dim);
        for _ in 0..n {
            let c = &centres[rng.random_range(0..clusters)];
            let mut v: Vec<f32> = c.iter().map(|x| x + rng.random_range(-0.6f32..0.6)).collect();
            normalize(&mut v);
            out.extend(v);
        }
        out
    }

    pub(crate) fn build(vectors: &[f32], dim: usize, parallel: bool) -> (Hnsw<'static, f32, UnitDot>, Graph) {
        let n = vectors.len() / dim;
        let h = Hnsw::<f32, UnitDot>::new(16, n, 16, 100, UnitDot);
        let data: Vec<(&[f32], usize)> = vectors.chunks_exact(dim).enumerate().map(|(i, r)| (r, i)).collect();
        if parallel {
            h.parallel_insert_slice(&data);
        } else {
            for d in data {
                h.insert_slice(d);
            }
        }
        let g = Graph::from_hnsw(&h, n).expect("a non-empty graph");
        (h, g)
    }

    struct Dead(HashSet<usize>);
    impl Tombstones for Dead {
        fn is_dead(&self, i: usize) -> bool {
            self.0.contains(&i)
        }
        fn dead_count(&self) -> usize {
            self.0.len()
        }
    }

    #[test]
    fn the_copy_has_hnsw_rs_neighbour_lists() {
        let (dim, n) = (16, 600);
        let v = rows(n, dim, 5, 1);
        let (h, g) = build(&v, dim, true);
        let mut top = 0;
        for p in h.get_point_indexation() {
            let id = p.get_origin_id() as u32;
            let level = usize::from(p.get_point_id().0);
            top = top.max(level);
            for (layer, list) in p.get_neighborhood_id().iter().enumerate().take(level + 1) {
                let want: Vec<u32> = list.iter().map(|nb| nb.d_id as u32).collect();
                assert_eq!(g.neighbours(id, layer), want.as_slice(), "node {id} layer {layer}");
            }
        }
        assert_eq!(g.top, top);
        assert_eq!(g.upper[g.entry as usize].len(), top, "the entry is on the top layer");
    }

    #[test]
    fn recall_against_the_exact_scan_and_deterministic() {
        let (dim, n) = (48, 5_000);
        let v = rows(n + 100, dim, 40, 2);
        let (_, g) = build(&v[..n * dim], dim, true);
        let (mut found, mut wanted) = (0, 0);
        for q in v[n * dim..].chunks_exact(dim) {
            let got = g.search(q, VectorRows::Full(&v[..n * dim]), dim, 64, &NoTombstones);
            assert_eq!(got, g.search(q, VectorRows::Full(&v[..n * dim]), dim, 64, &NoTombstones), "the same search, the same answer");
            let mut exact: Vec<(f32, u32)> = v[..n * dim].chunks_exact(dim).enumerate().map(|(i, r)| (dot(q, r), i as u32)).collect();
            exact.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            let truth: HashSet<u32> = exact[..10].iter().map(|e| e.1).collect();
            found += got.iter().take(10).filter(|h| truth.contains(&h.key)).count();
            wanted += 10;
        }
        let recall = found as f64 / wanted as f64;
        assert!(recall >= 0.95, "recall@10 {recall}");
    }

    #[test]
    fn the_entry_rows_block_scores_as_the_scattered_rows() {
        let (dim, n) = (24, 3_000);
        let v = rows(n + 30, dim, 20, 4);
        let (_, mut g) = build(&v[..n * dim], dim, false);
        let half = crate::memory::vectors::narrowed(&v[..n * dim]);
        let queries: Vec<&[f32]> = v[n * dim..].chunks_exact(dim).collect();
        let before: Vec<Vec<Hit>> = queries.iter().map(|q| g.search(q, VectorRows::Half(&half), dim, 16, &NoTombstones)).collect();
        assert!(g.entries.len() > 1, "a graph of {n} has entry nodes above layer 0");
        g.attach_entry_rows(VectorRows::Half(&half), dim);
        for (q, want) in queries.iter().zip(&before) {
            assert_eq!(&g.search(q, VectorRows::Half(&half), dim, 16, &NoTombstones), want);
        }
    }

    #[test]
    fn the_entries_are_a_thinned_sample_with_the_entry_point() {
        let upper: Vec<Box<[Box<[u32]>]>> = (0..50_000u32)
            .map(|i| if i % 7 == 0 { vec![vec![0u32].into_boxed_slice()].into_boxed_slice() } else { Box::default() })
            .collect();
        let entries = pick_entries(&upper, 3);
        assert!(entries.len() <= MAX_ENTRIES + 1 && entries.len() > MAX_ENTRIES / 2, "{} entries", entries.len());
        assert!(entries.windows(2).all(|w| w[0] < w[1]), "in id order, each once");
        assert!(entries.contains(&3), "HNSW's entry point is one");
        assert_eq!(pick_entries(&vec![Box::default(); 5], 2), vec![2], "a one-layer graph starts at its entry point");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// Whatever the graph, the tombstones and `ef`: live nodes only, each once, best first, at most
        /// `ef`, scored with `dot`.
        #[test]
        fn answers_keep_their_invariants(
            n in 1usize..150, seed in any::<u64>(), ef in 0usize..40, parallel in any::<bool>(),
            dead in prop::collection::hash_set(0usize..150, 0..60), zero in prop::option::of(0usize..150),
        ) {
            let dim = 8;
            let mut v = rows(n + 1, dim, 3, seed);
            crate::memory::half::round(&mut v);
            if let Some(z) = zero.filter(|z| *z < n) {
                v[z * dim..(z + 1) * dim].fill(0.0);
            }
            let (base, q) = v.split_at(n * dim);
            let (_, g) = build(base, dim, parallel);
            let dead = Dead(dead.into_iter().filter(|d| *d < n).collect());
            let got = g.search(q, VectorRows::Full(base), dim, ef, &dead);
            // The same rows kept as `f16`: the same answer, score for score.
            let half = crate::memory::vectors::narrowed(base);
            prop_assert_eq!(&g.search(q, VectorRows::Half(&half), dim, ef, &dead), &got);
            prop_assert!(got.len() <= ef);
            let ids: HashSet<u32> = got.iter().map(|h| h.key).collect();
            prop_assert_eq!(ids.len(), got.len());
            for h in &got {
                prop_assert!(!dead.is_dead(h.key as usize));
                prop_assert_eq!(h.score, dot(q, &base[h.key as usize * dim..][..dim]));
            }
            prop_assert!(got.windows(2).all(|w| Near(w[0]) > Near(w[1])));
            if dead.dead_count() == 0 && ef > 0 {
                prop_assert!(!got.is_empty());
            }
        }
    }
}
