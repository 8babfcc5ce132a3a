//! Compression of the experience library: which experiences to remove so that at most `max_size` remain.
//!
//! Training-Free GRPO's `SemanticMemoryManager` caps its experience library with `compress_memory(max_size, strategy)`.
//! This module is the decision half of that call: given the experiences (id, confidence, creation and last-use epochs,
//! unit embedding) it returns the ids to remove, ascending, and stores nothing. Every strategy is pure (no I/O, no clock)
//! and deterministic: the same experiences, parameters and seed give the same ids whatever the order of the input, because
//! the input is first sorted by id. Similarities are dot products of the unit embeddings (cosine); an all-zero embedding
//! (empty text) has similarity 0 with everything, never NaN.
//!
//! Definitions, with `age = current_epoch − max(created_epoch, last_used_epoch)` (saturating at 0; a never-used experience
//! counts from its creation) and the *importance order* = higher confidence first, then newer `created_epoch`, then higher id:
//!
//! - **importance**: keep the `max_size` first experiences in the importance order.
//! - **temporal**: score = `confidence · exp(−decay · age)`, `decay` = [`DEFAULT_DECAY`] = 0.1 per epoch unless set; keep the
//!   `max_size` highest scores, equal scores falling back to the importance order.
//! - **diversity**: spherical k-means with `k = max_size` (assign each experience to the centroid with the highest dot,
//!   lowest cluster index on ties; centroid = normalised mean of its members, an emptied cluster keeps its centroid),
//!   k-means++ initialisation (first centre uniform, then each next centre drawn with probability ∝ `(1 − max dot to the
//!   chosen centres)²`, clamped at 0) from a `ChaCha8Rng` seeded with `seed` = [`DEFAULT_SEED`] = 0 unless set, over the
//!   experiences in ascending id order; at most `kmeans_iterations` = [`DEFAULT_KMEANS_ITERATIONS`] = 50 Lloyd iterations,
//!   stopping early when no assignment changes. Each non-empty cluster keeps one representative: the member with the highest
//!   dot to its final centroid (then higher confidence, then lower id). Slots left by empty clusters go to the remaining
//!   experiences in the importance order.
//! - **hybrid**: score = `confidence · exp(−decay · age) · (1 − clamp(max dot with any other remaining experience, 0, 1))`
//!   (a lone experience has diversity 1). Experiences are removed one at a time, lowest score first (ties: lower
//!   confidence, then older `created_epoch`, then lower id), and after each removal the diversity of every experience whose
//!   nearest neighbour was the removed one is recomputed, so one member of a near-duplicate pair survives. Pairwise dots are
//!   computed once (upper triangle), keeping only each experience's 8 nearest others (O(n) memory); a row is rescanned
//!   only once all 8 are removed.
//!
//! [`similar_groups`] serves `merge_similar`: connected components of the graph joining two experiences whose dot is at
//! least a threshold.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::memory::vectors::VectorRows;
use crate::memory::Graph;
use crate::util::vector::dot;

mod scale;

/// Temporal decay rate per epoch of age: the weight of an experience `age` epochs old is `exp(−DEFAULT_DECAY · age)`.
pub const DEFAULT_DECAY: f64 = 0.1;

/// Maximum number of Lloyd iterations of the diversity strategy's k-means (it stops earlier once assignments are stable).
pub const DEFAULT_KMEANS_ITERATIONS: usize = 50;

/// Seed of the `ChaCha8Rng` driving the diversity strategy's k-means++ initialisation.
pub const DEFAULT_SEED: u64 = 0;

/// One experience as compression sees it.
#[derive(Debug, Clone)]
pub struct Candidate<'a> {
    /// The experience's number N (its name is "G{N}").
    pub id: u64,
    /// Confidence in [0, 1].
    pub confidence: f64,
    /// Epoch the experience was created in.
    pub created_epoch: u64,
    /// Epoch the experience was last used in, if ever.
    pub last_used_epoch: Option<u64>,
    /// Unit-length embedding, or all zeros for an empty text.
    pub vector: Vector<'a>,
}

/// Where a candidate's embedding is.
#[derive(Debug, Clone)]
pub enum Vector<'a> {
    /// Its own values.
    Own(std::borrow::Cow<'a, [f32]>),
    /// Row `r` of the [`Space`]'s rows (a bank's M₀, read where it is: a million rows are not copied).
    Row(u32),
}

/// Rows several candidates' embeddings are in ([`Vector::Row`]), and the HNSW graph over them if one was
/// built: a bank's M₀. Over [`EXACT_LIMIT`] experiences, diversity, hybrid and [`similar_groups`] take
/// each experience's neighbours from the graph instead of comparing every pair ([`scale`]).
#[derive(Debug, Clone, Copy)]
pub struct Space<'a> {
    /// The rows, `dim` values each.
    pub rows: VectorRows<'a>,
    /// Values per row.
    pub dim: usize,
    /// The graph over the rows.
    pub graph: Option<&'a Graph>,
    /// Ask for huge pages under the large tables a selection over the graph reads at random (the bank's
    /// [`crate::memory::IndexConfig::huge_pages`]).
    pub huge_pages: bool,
}

/// Most experiences diversity, hybrid and [`similar_groups`] compare pair by pair (seconds: hybrid's
/// pairs are `n²/2` dot products). Over it, with a [`Space`] graph, they read neighbours from the graph.
pub const EXACT_LIMIT: usize = 10_000;

/// The four strategies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// One representative per k-means cluster of the embeddings.
    Diversity,
    /// The highest confidences.
    Importance,
    /// The highest confidences decayed by age.
    Temporal,
    /// Greedy removal by confidence × temporal weight × diversity.
    Hybrid,
}

impl Strategy {
    /// Every strategy, in documentation order.
    pub const ALL: [Strategy; 4] = [Strategy::Diversity, Strategy::Importance, Strategy::Temporal, Strategy::Hybrid];

    /// The strategy's name as accepted by [`str::parse`]: "diversity", "importance", "temporal" or "hybrid".
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Diversity => "diversity",
            Strategy::Importance => "importance",
            Strategy::Temporal => "temporal",
            Strategy::Hybrid => "hybrid",
        }
    }
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Strategy {
    type Err = String;

    /// Parses a strategy name, ignoring case and surrounding whitespace.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        Strategy::ALL.into_iter().find(|k| k.as_str().eq_ignore_ascii_case(t)).ok_or_else(|| {
            let shown: String = t.chars().take(40).collect();
            let more = if t.chars().nth(40).is_some() { "…" } else { "" };
            format!("unknown compression strategy \"{shown}{more}\": expected one of diversity, importance, temporal, hybrid")
        })
    }
}

/// Tunables.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// Temporal decay per epoch of age (finite, >= 0); see [`DEFAULT_DECAY`].
    pub decay: f64,
    /// Seed of the diversity strategy's k-means++ initialisation; see [`DEFAULT_SEED`].
    pub seed: u64,
    /// Maximum Lloyd iterations of the diversity strategy; see [`DEFAULT_KMEANS_ITERATIONS`].
    pub kmeans_iterations: usize,
    /// Over this many experiences, diversity and hybrid read neighbours from the [`Space`]'s graph; see
    /// [`EXACT_LIMIT`].
    pub exact_limit: usize,
}

impl Default for Params {
    fn default() -> Self {
        Params { decay: DEFAULT_DECAY, seed: DEFAULT_SEED, kmeans_iterations: DEFAULT_KMEANS_ITERATIONS, exact_limit: EXACT_LIMIT }
    }
}

/// Why parameters are refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CompressError {
    /// `decay` is negative, NaN or infinite.
    #[error("decay must be a finite number >= 0, got {0}")]
    BadDecay(f64),
    /// An experience's `confidence` is NaN or infinite.
    #[error("confidence of G{id} must be a finite number, got {value}")]
    BadConfidence {
        /// The experience.
        id: u64,
        /// Its confidence.
        value: f64,
    },
    /// An experience's `vector` has another length than the others.
    #[error("vector of G{id} has {got} dimensions, expected {expected} like the others")]
    DimensionMismatch {
        /// The experience.
        id: u64,
        /// Length of the smallest id's vector.
        expected: usize,
        /// Its length.
        got: usize,
    },
    /// An experience's `vector` holds a NaN or infinite value.
    #[error("vector of G{id} must hold only finite numbers")]
    NonFiniteVector {
        /// The experience.
        id: u64,
    },
    /// An experience's vector is a row that is not in the [`Space`] (or there is none).
    #[error("vector of G{id} is not among the bank's rows")]
    NoRow {
        /// The experience.
        id: u64,
    },
    /// Over the exact path's limit, the neighbours come from the [`Space`]'s graph, and there is none.
    #[error(
        "{what} over {n} experiences reads neighbours from the bank's HNSW index, which is not built yet (it is built in \
         the background after an import or an open without a saved index, and never in exact index mode): retry once it \
         is ready; importance and temporal need no index"
    )]
    NoGraph {
        /// The selection ("hybrid compression", "MergeSimilar").
        what: String,
        /// How many experiences.
        n: usize,
    },
    /// Two experiences share an id.
    #[error("id G{0} appears more than once")]
    DuplicateId(u64),
    /// The similarity threshold is NaN or outside [-1, 1].
    #[error("threshold must be a finite number in [-1, 1], got {0}")]
    BadThreshold(f32),
}

/// The ids to remove so that `keep` experiences remain, ascending. Empty when `candidates.len() <= keep`.
///
/// `current_epoch` is the library's epoch; `space` holds the rows [`Vector::Row`]s point into. Validates first
/// (decay finite and >= 0, confidences finite, vectors finite and all the same length, rows present, ids
/// distinct); never panics on any input.
pub fn removals(
    candidates: &[Candidate<'_>],
    space: Option<Space<'_>>,
    keep: usize,
    strategy: Strategy,
    current_epoch: u64,
    params: &Params,
) -> Result<Vec<u64>, CompressError> {
    if !(params.decay.is_finite() && params.decay >= 0.0) {
        return Err(CompressError::BadDecay(params.decay));
    }
    let lib = Library::new(candidates, space, params.exact_limit)?;
    let n = lib.items.len();
    if n <= keep {
        return Ok(Vec::new());
    }
    let removed: Vec<bool> = if keep == 0 {
        vec![true; n]
    } else {
        match strategy {
            Strategy::Importance => lib.drop_tail(keep, |a, b| lib.importance_cmp(a, b)),
            Strategy::Temporal => {
                let w = lib.temporal_weights(current_epoch, params.decay);
                let score: Vec<f64> = (0..n).map(|i| lib.items[i].confidence * w[i] + 0.0).collect();
                lib.drop_tail(keep, |a, b| score[b].total_cmp(&score[a]).then_with(|| lib.importance_cmp(a, b)))
            }
            Strategy::Diversity => match lib.neighbours(|| format!("{strategy} compression"))? {
                Some(near) => scale::diversity(&lib, &near, keep, params),
                None => lib.diversity(keep, params),
            },
            Strategy::Hybrid => {
                let w = lib.temporal_weights(current_epoch, params.decay);
                let base: Vec<f64> = (0..n).map(|i| lib.items[i].confidence * w[i]).collect();
                match lib.neighbours(|| format!("{strategy} compression"))? {
                    Some(near) => scale::hybrid(&lib, &near, keep, &base),
                    None => lib.hybrid(keep, &base),
                }
            }
        }
    };
    Ok(lib.items.iter().zip(&removed).filter(|(_, &r)| r).map(|(c, _)| c.id).collect())
}

/// Groups of near-duplicates for `merge_similar`: connected components of the graph whose edges join two experiences with
/// dot >= `threshold` (finite, in [-1, 1]). Only components of size >= 2 are returned; each group's ids ascending; groups
/// ordered by their smallest id. Validates the candidates as [`removals`] does. Over [`EXACT_LIMIT`] experiences with
/// a [`Space`] graph, only pairs of graph neighbours are compared ([`scale`]).
pub fn similar_groups(candidates: &[Candidate<'_>], space: Option<Space<'_>>, threshold: f32) -> Result<Vec<Vec<u64>>, CompressError> {
    similar_groups_over(candidates, space, threshold, EXACT_LIMIT)
}

/// [`similar_groups`], reading the graph over `limit` experiences.
fn similar_groups_over(
    candidates: &[Candidate<'_>],
    space: Option<Space<'_>>,
    threshold: f32,
    limit: usize,
) -> Result<Vec<Vec<u64>>, CompressError> {
    if !(threshold.is_finite() && (-1.0..=1.0).contains(&threshold)) {
        return Err(CompressError::BadThreshold(threshold));
    }
    let lib = Library::new(candidates, space, limit)?;
    let n = lib.items.len();
    let mut sets = Components::new(n);
    match lib.neighbours(|| "MergeSimilar".to_string())? {
        Some(near) => scale::join_similar(&lib, &near, threshold, &mut sets),
        None => {
            let mut row = vec![0.0; lib.dim];
            for i in 0..n {
                lib.load(i, &mut row);
                for j in i + 1..n {
                    if lib.dot_with(&row, j) >= threshold {
                        sets.join(i, j);
                    }
                }
            }
        }
    }
    let mut groups: Vec<Vec<u64>> = Vec::new();
    let mut slot = vec![usize::MAX; n];
    for i in 0..n {
        let r = sets.root(i);
        if slot[r] == usize::MAX {
            slot[r] = groups.len();
            groups.push(Vec::new());
        }
        groups[slot[r]].push(lib.items[i].id);
    }
    groups.retain(|g| g.len() >= 2);
    Ok(groups)
}

/// Union-find whose root is always the smallest index of its component.
struct Components {
    parent: Vec<usize>,
}

impl Components {
    fn new(n: usize) -> Self {
        Components { parent: (0..n).collect() }
    }

    fn root(&mut self, mut i: usize) -> usize {
        while self.parent[i] != i {
            self.parent[i] = self.parent[self.parent[i]];
            i = self.parent[i];
        }
        i
    }

    fn join(&mut self, i: usize, j: usize) {
        let (a, b) = (self.root(i), self.root(j));
        if a != b {
            self.parent[a.max(b)] = a.min(b);
        }
    }
}

/// Where an item's vector is: a row of the space, or at an offset of the library's own buffer.
#[derive(Debug, Clone, Copy)]
enum Src {
    Row(u32),
    Own(usize),
}

/// The validated experiences in ascending id order; their own vectors copied into one row-major buffer,
/// the others read from the space's rows.
struct Library<'a> {
    items: Vec<Candidate<'a>>,
    src: Vec<Src>,
    own: Vec<f32>,
    space: Option<Space<'a>>,
    dim: usize,
    /// Over this many experiences, neighbours come from the space's graph.
    limit: usize,
}

/// The nearest-centroid rule, written once: a dot `d` at cluster `c` beats the best so far (`top` at cluster
/// `best`, `usize::MAX` before any) when it is higher, or equal at a lower index.
#[inline(always)]
pub(super) fn beats(d: f32, c: usize, best: usize, top: f32) -> bool {
    best == usize::MAX || d > top || (d == top && c < best)
}

impl<'a> Library<'a> {
    fn new(candidates: &[Candidate<'a>], space: Option<Space<'a>>, limit: usize) -> Result<Self, CompressError> {
        let mut items = candidates.to_vec();
        items.sort_by_key(|c| c.id);
        if let Some(w) = items.windows(2).find(|w| w[0].id == w[1].id) {
            return Err(CompressError::DuplicateId(w[0].id));
        }
        let dim = match space {
            Some(s) => s.dim,
            None => items.iter().find_map(|c| if let Vector::Own(v) = &c.vector { Some(v.len()) } else { None }).unwrap_or(0),
        };
        let rows = space.map_or(0, |s| s.rows.len().checked_div(s.dim).unwrap_or(0));
        let mut src = Vec::with_capacity(items.len());
        let mut own = Vec::new();
        for c in &items {
            if !c.confidence.is_finite() {
                return Err(CompressError::BadConfidence { id: c.id, value: c.confidence });
            }
            match &c.vector {
                Vector::Own(v) => {
                    if v.len() != dim {
                        return Err(CompressError::DimensionMismatch { id: c.id, expected: dim, got: v.len() });
                    }
                    if !v.iter().all(|x| x.is_finite()) {
                        return Err(CompressError::NonFiniteVector { id: c.id });
                    }
                    src.push(Src::Own(own.len()));
                    own.extend_from_slice(v);
                }
                // A bank's rows were checked finite when they were written.
                Vector::Row(r) if (*r as usize) < rows => src.push(Src::Row(*r)),
                Vector::Row(_) => return Err(CompressError::NoRow { id: c.id }),
            }
        }
        Ok(Library { items, src, own, space, dim, limit })
    }

    /// Item `i`'s vector, into `out` (`dim` long).
    fn load(&self, i: usize, out: &mut [f32]) {
        match (self.src[i], self.space) {
            (Src::Own(at), _) => out.copy_from_slice(&self.own[at..at + self.dim]),
            (Src::Row(r), Some(s)) => s.rows.copy_row(r as usize, self.dim, out),
            (Src::Row(_), None) => out.fill(0.0),
        }
    }

    /// Reads ahead the bank rows of items `js` ([`VectorRows::touch`]), so that the cache misses of the dot
    /// products that follow overlap; `rows` is scratch.
    fn touch(&self, js: &[u32], rows: &mut Vec<u32>) {
        if let Some(s) = self.space {
            rows.clear();
            rows.extend(js.iter().filter_map(|&j| match self.src[j as usize] {
                Src::Row(r) => Some(r),
                Src::Own(_) => None,
            }));
            s.rows.touch(rows, self.dim);
        }
    }

    /// [`dot`] of `q` with item `j`'s vector (bit-equal however it is kept).
    fn dot_with(&self, q: &[f32], j: usize) -> f32 {
        match (self.src[j], self.space) {
            (Src::Own(at), _) => dot(q, &self.own[at..at + self.dim]),
            (Src::Row(r), Some(s)) => s.rows.dot(q, r as usize, self.dim),
            (Src::Row(_), None) => 0.0,
        }
    }

    /// Each item's graph neighbours when the library is over its limit ([`EXACT_LIMIT`]); `None` at or under
    /// it (the exact path). Over it without a graph, [`CompressError::NoGraph`] naming `what` selects.
    fn neighbours(&self, what: impl FnOnce() -> String) -> Result<Option<scale::Neighbours>, CompressError> {
        let n = self.items.len();
        if n <= self.limit {
            return Ok(None);
        }
        let Some(graph) = self.space.and_then(|s| s.graph) else {
            return Err(CompressError::NoGraph { what: what(), n });
        };
        let t = std::time::Instant::now();
        let near = scale::Neighbours::build(self, graph);
        tracing::debug!(secs = t.elapsed().as_secs_f64(), "neighbours read from the graph");
        Ok(Some(near))
    }

    /// The importance order: `Less` when `a` is kept before `b` (higher confidence, newer, higher id).
    fn importance_cmp(&self, a: usize, b: usize) -> Ordering {
        let (x, y) = (&self.items[a], &self.items[b]);
        (y.confidence + 0.0).total_cmp(&(x.confidence + 0.0)).then(y.created_epoch.cmp(&x.created_epoch)).then(y.id.cmp(&x.id))
    }

    /// `exp(−decay · age)` per experience.
    fn temporal_weights(&self, current_epoch: u64, decay: f64) -> Vec<f64> {
        let age = |c: &Candidate<'_>| current_epoch.saturating_sub(c.last_used_epoch.unwrap_or(c.created_epoch).max(c.created_epoch));
        self.items.iter().map(|c| (-decay * age(c) as f64).exp()).collect()
    }

    /// Removal flags of everything after the first `keep` in the order `cmp` (a total order: ids break every tie).
    fn drop_tail(&self, keep: usize, cmp: impl Fn(usize, usize) -> Ordering) -> Vec<bool> {
        let mut order: Vec<usize> = (0..self.items.len()).collect();
        order.sort_by(|&a, &b| cmp(a, b));
        let mut removed = vec![false; order.len()];
        for &i in order.iter().skip(keep) {
            removed[i] = true;
        }
        removed
    }

    /// The centroid among `among` with the highest dot to `row`, the lowest index on ties.
    fn nearest(&self, cent: &[f32], row: &[f32], among: impl Iterator<Item = usize>) -> usize {
        let dim = self.dim;
        let mut best = (usize::MAX, f32::NEG_INFINITY);
        for c in among {
            let d = dot(row, &cent[c * dim..(c + 1) * dim]);
            if beats(d, c, best.0, best.1) {
                best = (c, d);
            }
        }
        best.0
    }

    /// Sets each non-empty cluster's centroid to the normalised mean of its members (`assign[i]` is i's cluster);
    /// an emptied cluster keeps its centroid. Returns which centroids changed.
    fn update_centroids(&self, cent: &mut [f32], assign: impl Fn(usize) -> usize, k: usize) -> Vec<bool> {
        let dim = self.dim;
        let mut members: Vec<Vec<u32>> = vec![Vec::new(); k];
        for i in 0..self.items.len() {
            members[assign(i)].push(i as u32);
        }
        let mut moved = vec![false; k];
        let mut scratch = Scratch::new(dim);
        for (c, m) in members.iter().enumerate().filter(|(_, m)| !m.is_empty()) {
            let next = self.mean_direction(m, &mut scratch);
            let at = &mut cent[c * dim..(c + 1) * dim];
            if at != next {
                at.copy_from_slice(next);
                moved[c] = true;
            }
        }
        moved
    }

    /// The normalised mean of the `members`' vectors (summed in `f64`, in the order given), in `scratch`.
    fn mean_direction<'s>(&self, members: &[u32], scratch: &'s mut Scratch) -> &'s [f32] {
        let Scratch { sum, row, next } = scratch;
        sum.fill(0.0);
        for &i in members {
            self.load(i as usize, row);
            for (s, &x) in sum.iter_mut().zip(row.iter()) {
                *s += f64::from(x);
            }
        }
        let norm = sum.iter().map(|x| x * x).sum::<f64>().sqrt();
        let scale = if norm > 0.0 && norm.is_finite() { 1.0 / norm } else { 0.0 };
        for (o, &x) in next.iter_mut().zip(sum.iter()) {
            *o = (x * scale) as f32;
        }
        next
    }

    /// One representative per non-empty cluster (highest dot to its centroid, then higher confidence, then lower id),
    /// the slots of empty clusters filled in the importance order: the removal flags.
    fn representatives(&self, cent: &[f32], assign: impl Fn(usize) -> usize, k: usize, keep: usize) -> Vec<bool> {
        let (n, dim) = (self.items.len(), self.dim);
        let mut rep: Vec<Option<(usize, f32)>> = vec![None; k];
        let mut row = vec![0.0; dim];
        for i in 0..n {
            let c = assign(i);
            self.load(i, &mut row);
            let d = dot(&row, &cent[c * dim..(c + 1) * dim]);
            let better = match rep[c] {
                None => true,
                Some((j, e)) => d > e || (d == e && self.items[i].confidence > self.items[j].confidence),
            };
            if better {
                rep[c] = Some((i, d));
            }
        }
        let mut kept = vec![false; n];
        for &(i, _) in rep.iter().flatten() {
            kept[i] = true;
        }
        let mut rest: Vec<usize> = (0..n).filter(|&i| !kept[i]).collect();
        rest.sort_by(|&a, &b| self.importance_cmp(a, b));
        let slots = keep.saturating_sub(n - rest.len());
        for &i in rest.iter().take(slots) {
            kept[i] = true;
        }
        kept.into_iter().map(|k| !k).collect()
    }
    /// Spherical k-means with `k = keep` (1 <= keep < n), one representative per non-empty cluster, importance-order fill.
    fn diversity(&self, keep: usize, params: &Params) -> Vec<bool> {
        let (n, dim, k) = (self.items.len(), self.dim, keep);
        let mut rng = ChaCha8Rng::seed_from_u64(params.seed);
        let mut row = vec![0.0f32; dim];
        // k-means++, which also yields the first assignment: `best[i]` = max dot of i with the chosen centres (the first
        // centre attaining it in `assign[i]`); a candidate's weight is `(1 − best)²`, clamped at 0.
        let first = rng.random_range(0..n as u64) as usize;
        let mut chosen = vec![false; n];
        chosen[first] = true;
        let mut centres = vec![first];
        self.load(first, &mut row);
        let mut best: Vec<f32> = (0..n).map(|i| self.dot_with(&row, i)).collect();
        let mut assign = vec![0usize; n];
        while centres.len() < k {
            let weight = |i: usize| if chosen[i] { 0.0 } else { (1.0 - f64::from(best[i])).max(0.0).powi(2) };
            let total: f64 = (0..n).map(weight).sum();
            let pick = if total > 0.0 && total.is_finite() {
                let (r, mut acc) = (rng.random::<f64>() * total, 0.0);
                let mut positive = (0..n).filter(|&i| weight(i) > 0.0);
                positive
                    .find(|&i| {
                        acc += weight(i);
                        acc > r
                    })
                    .or_else(|| (0..n).rev().find(|&i| weight(i) > 0.0))
            } else {
                let free = n - centres.len();
                let nth = rng.random_range(0..free as u64) as usize;
                (0..n).filter(|&i| !chosen[i]).nth(nth)
            };
            let Some(pick) = pick else { break };
            chosen[pick] = true;
            self.load(pick, &mut row);
            for i in 0..n {
                let d = self.dot_with(&row, i);
                if d > best[i] {
                    (best[i], assign[i]) = (d, centres.len());
                }
            }
            centres.push(pick);
        }
        let k = centres.len();
        let mut cent = vec![0.0f32; k * dim];
        for (c, &i) in centres.iter().enumerate() {
            self.load(i, &mut cent[c * dim..(c + 1) * dim]);
        }
        // Lloyd iterations. A point whose centroid did not move can only switch to a centroid that moved (the others'
        // dots are unchanged and lost to its own before), so it is scored against those alone: same result as a full scan.
        for _ in 0..params.kmeans_iterations {
            let moved = self.update_centroids(&mut cent, |i| assign[i], k);
            let movers: Vec<usize> = (0..k).filter(|&c| moved[c]).collect();
            let mut changed = false;
            for (i, a) in assign.iter_mut().enumerate() {
                self.load(i, &mut row);
                let c = if moved[*a] {
                    self.nearest(&cent, &row, 0..k)
                } else {
                    self.nearest(&cent, &row, std::iter::once(*a).chain(movers.iter().copied()))
                };
                changed |= c != *a;
                *a = c;
            }
            if !changed {
                break;
            }
        }
        self.update_centroids(&mut cent, |i| assign[i], k);
        self.representatives(&cent, |i| assign[i], k, keep)
    }

    /// Greedy removal by `base · diversity` (`base` = confidence × temporal weight per experience).
    ///
    /// `near[i]` holds up to [`NEIGHBOURS`] of i's nearest others (dot descending) as of its last scan; every other
    /// experience not listed has a dot no higher than the listed ones, so the first listed one still remaining is i's
    /// nearest remaining neighbour. Removed entries are dropped from the front lazily; a row is rescanned only when its list
    /// runs out.
    fn hybrid(&self, keep: usize, base: &[f64]) -> Vec<bool> {
        let n = self.items.len();
        // `floor[i]` is the last dot of a full `near[i]` (NaN while it is not full, so that no offer is refused), kept in
        // its own dense array so that the scan refuses most offers without touching the lists.
        fn offer(list: &mut Vec<(usize, f32)>, floor: &mut f32, j: usize, d: f32) {
            if d <= *floor {
                return;
            }
            let at = list.partition_point(|&(_, e)| e >= d);
            list.insert(at, (j, d));
            list.truncate(NEIGHBOURS);
            if let (NEIGHBOURS, Some(&(_, e))) = (list.len(), list.last()) {
                *floor = e;
            }
        }
        let mut near: Vec<Vec<(usize, f32)>> = vec![Vec::with_capacity(NEIGHBOURS + 1); n];
        let mut floor = vec![f32::NAN; n];
        let mut row = vec![0.0f32; self.dim];
        for i in 0..n {
            self.load(i, &mut row);
            for j in i + 1..n {
                let d = self.dot_with(&row, j);
                offer(&mut near[i], &mut floor[i], j, d);
                offer(&mut near[j], &mut floor[j], i, d);
            }
        }
        let mut score: Vec<f64> = (0..n).map(|i| hybrid_score(base[i], near[i].first().map(|p| p.1))).collect();
        let mut removed = vec![false; n];
        let mut heap = RemovalOrder::new(self, &score);
        for _ in keep..n {
            let Some(v) = heap.pop(&removed, &score) else { break };
            removed[v] = true;
            for i in 0..n {
                if removed[i] || near[i].first().is_none_or(|&(j, _)| j != v) {
                    continue;
                }
                let gone = near[i].iter().take_while(|&&(j, _)| removed[j]).count();
                near[i].drain(..gone);
                if near[i].is_empty() {
                    floor[i] = f32::NAN;
                    self.load(i, &mut row);
                    for j in (0..n).filter(|&j| j != i && !removed[j]) {
                        let d = self.dot_with(&row, j);
                        offer(&mut near[i], &mut floor[i], j, d);
                    }
                }
                score[i] = hybrid_score(base[i], near[i].first().map(|p| p.1));
                heap.push(self, i, score[i]);
            }
        }
        removed
    }
}

/// The buffers of [`Library::mean_direction`].
struct Scratch {
    sum: Vec<f64>,
    row: Vec<f32>,
    next: Vec<f32>,
}

impl Scratch {
    fn new(dim: usize) -> Self {
        Scratch { sum: vec![0.0; dim], row: vec![0.0; dim], next: vec![0.0; dim] }
    }
}

/// Hybrid's score of an experience: `base · (1 − clamp(dot to its nearest remaining other, 0, 1))` (a lone one: `base`).
fn hybrid_score(base: f64, nearest: Option<f32>) -> f64 {
    base * (1.0 - nearest.map_or(0.0, |d| f64::from(d).clamp(0.0, 1.0))) + 0.0
}

/// Hybrid's removal order: a min-heap of (score, confidence, created, index); an entry is stale once its index is removed
/// or rescored.
struct RemovalOrder {
    heap: BinaryHeap<Reverse<(i64, i64, u64, usize)>>,
}

impl RemovalOrder {
    fn new(lib: &Library<'_>, score: &[f64]) -> Self {
        RemovalOrder { heap: (0..score.len()).map(|i| Self::entry(lib, i, score[i])).collect() }
    }

    fn entry(lib: &Library<'_>, i: usize, score: f64) -> Reverse<(i64, i64, u64, usize)> {
        Reverse((total_key(score), total_key(lib.items[i].confidence), lib.items[i].created_epoch, i))
    }

    fn push(&mut self, lib: &Library<'_>, i: usize, score: f64) {
        self.heap.push(Self::entry(lib, i, score));
    }

    /// The next experience to remove: the lowest current score among those not removed.
    fn pop(&mut self, removed: &[bool], score: &[f64]) -> Option<usize> {
        while let Some(Reverse((s, _, _, i))) = self.heap.pop() {
            if !removed[i] && s == total_key(score[i]) {
                return Some(i);
            }
        }
        None
    }
}

/// An integer key ordered as [`f64::total_cmp`] orders its argument (after `+ 0.0` folds −0 into +0).
fn total_key(x: f64) -> i64 {
    let b = (x + 0.0).to_bits() as i64;
    b ^ ((((b >> 63) as u64) >> 1) as i64)
}

/// Nearest neighbours the hybrid strategy remembers per experience between rescans.
const NEIGHBOURS: usize = 8;

#[cfg(test)]
mod tests;
