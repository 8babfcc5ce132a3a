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
//! The search is HNSW's (Malkov & Yashunin, alg. 2 and 5): greedy descent through the upper layers,
//! then a best-first beam of width `ef` on layer 0. Dead (tombstoned) nodes are walked through but never
//! returned. It is deterministic: ties go to the lower id.

use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

use hnsw_rs::prelude::{Distance, Hnsw};

use super::base::Tombstones;
use super::vectors::VectorRows;
use crate::util::vector::Hit;

mod codec;
pub use codec::Malformed;

/// An empty slot of a layer-0 row.
const NONE: u32 = u32::MAX;

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
    /// Where every search starts: a node of the top layer.
    entry: u32,
    /// The top layer.
    top: usize,
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
        Some(Graph { width, layer0, upper, entry, top })
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
    pub fn search(&self, query: &[f32], vectors: VectorRows<'_>, dim: usize, ef: usize, dead: &dyn Tombstones) -> Vec<Hit> {
        let n = self.upper.len();
        if ef == 0 || n == 0 {
            return Vec::new();
        }
        let score = |i: u32| Near(Hit { score: vectors.dot(query, i as usize, dim), key: i });
        // Greedy descent: on each upper layer, move to a better neighbour while there is one.
        let mut at = score(self.entry);
        for layer in (1..=self.top).rev() {
            loop {
                let best = self.neighbours(at.0.key, layer).iter().map(|&nb| score(nb)).max();
                match best {
                    Some(b) if b > at => at = b,
                    _ => break,
                }
            }
        }
        VISITED.with(|v| {
            let mut visited = v.borrow_mut();
            visited.begin(n);
            visited.first_visit(at.0.key);
            // `todo` pops the best candidate; `found` keeps the `ef` best live nodes, worst on top.
            let mut todo = BinaryHeap::with_capacity(4 * ef);
            let mut found: BinaryHeap<std::cmp::Reverse<Near>> = BinaryHeap::with_capacity(ef + 1);
            todo.push(at);
            if !dead.is_dead(at.0.key as usize) {
                found.push(std::cmp::Reverse(at));
            }
            let mut fresh: Vec<u32> = Vec::with_capacity(self.width);
            while let Some(c) = todo.pop() {
                if found.len() >= ef && found.peek().is_some_and(|w| c < w.0) {
                    break;
                }
                fresh.clear();
                fresh.extend(self.neighbours(c.0.key, 0).iter().copied().filter(|&nb| visited.first_visit(nb)));
                vectors.touch(&fresh, dim);
                for &nb in &fresh {
                    let s = score(nb);
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
