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

use crate::util::vector::dot;

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
    pub vector: std::borrow::Cow<'a, [f32]>,
}

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
}

impl Default for Params {
    fn default() -> Self {
        Params { decay: DEFAULT_DECAY, seed: DEFAULT_SEED, kmeans_iterations: DEFAULT_KMEANS_ITERATIONS }
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
    /// Two experiences share an id.
    #[error("id G{0} appears more than once")]
    DuplicateId(u64),
    /// The similarity threshold is NaN or outside [-1, 1].
    #[error("threshold must be a finite number in [-1, 1], got {0}")]
    BadThreshold(f32),
}

/// The ids to remove so that `keep` experiences remain, ascending. Empty when `candidates.len() <= keep`.
///
/// `current_epoch` is the library's epoch. Validates first (decay finite and >= 0, confidences finite, vectors finite and all
/// the same length, ids distinct); never panics on any input.
pub fn removals(
    candidates: &[Candidate<'_>],
    keep: usize,
    strategy: Strategy,
    current_epoch: u64,
    params: &Params,
) -> Result<Vec<u64>, CompressError> {
    if !(params.decay.is_finite() && params.decay >= 0.0) {
        return Err(CompressError::BadDecay(params.decay));
    }
    let lib = Library::new(candidates)?;
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
            Strategy::Diversity => lib.diversity(keep, params),
            Strategy::Hybrid => lib.hybrid(keep, current_epoch, params.decay),
        }
    };
    Ok(lib.items.iter().zip(&removed).filter(|(_, &r)| r).map(|(c, _)| c.id).collect())
}

/// Groups of near-duplicates for `merge_similar`: connected components of the graph whose edges join two experiences with
/// dot >= `threshold` (finite, in [-1, 1]). Only components of size >= 2 are returned; each group's ids ascending; groups
/// ordered by their smallest id. Validates the candidates as [`removals`] does.
pub fn similar_groups(candidates: &[Candidate<'_>], threshold: f32) -> Result<Vec<Vec<u64>>, CompressError> {
    if !(threshold.is_finite() && (-1.0..=1.0).contains(&threshold)) {
        return Err(CompressError::BadThreshold(threshold));
    }
    let lib = Library::new(candidates)?;
    let n = lib.items.len();
    // Union-find whose root is always the smallest index of its component.
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    for i in 0..n {
        for j in i + 1..n {
            if lib.dot(i, j) >= threshold {
                let (a, b) = (root(&mut parent, i), root(&mut parent, j));
                if a != b {
                    parent[a.max(b)] = a.min(b);
                }
            }
        }
    }
    let mut groups: Vec<Vec<u64>> = Vec::new();
    let mut slot = vec![usize::MAX; n];
    for i in 0..n {
        let r = root(&mut parent, i);
        if slot[r] == usize::MAX {
            slot[r] = groups.len();
            groups.push(Vec::new());
        }
        groups[slot[r]].push(lib.items[i].id);
    }
    groups.retain(|g| g.len() >= 2);
    Ok(groups)
}

/// The validated experiences in ascending id order, their vectors copied into one contiguous row-major buffer.
struct Library<'a> {
    items: Vec<Candidate<'a>>,
    rows: Vec<f32>,
    dim: usize,
}

impl<'a> Library<'a> {
    fn new(candidates: &[Candidate<'a>]) -> Result<Self, CompressError> {
        let mut items = candidates.to_vec();
        items.sort_by_key(|c| c.id);
        if let Some(w) = items.windows(2).find(|w| w[0].id == w[1].id) {
            return Err(CompressError::DuplicateId(w[0].id));
        }
        let dim = items.first().map_or(0, |c| c.vector.len());
        let mut rows = Vec::with_capacity(items.len() * dim);
        for c in &items {
            if !c.confidence.is_finite() {
                return Err(CompressError::BadConfidence { id: c.id, value: c.confidence });
            }
            if c.vector.len() != dim {
                return Err(CompressError::DimensionMismatch { id: c.id, expected: dim, got: c.vector.len() });
            }
            if !c.vector.iter().all(|x| x.is_finite()) {
                return Err(CompressError::NonFiniteVector { id: c.id });
            }
            rows.extend_from_slice(&c.vector);
        }
        Ok(Library { items, rows, dim })
    }

    fn row(&self, i: usize) -> &[f32] {
        &self.rows[i * self.dim..(i + 1) * self.dim]
    }

    fn dot(&self, i: usize, j: usize) -> f32 {
        dot(self.row(i), self.row(j))
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

    /// Spherical k-means with `k = keep` (1 <= keep < n), one representative per non-empty cluster, importance-order fill.
    fn diversity(&self, keep: usize, params: &Params) -> Vec<bool> {
        let (n, dim, k) = (self.items.len(), self.dim, keep);
        let mut rng = ChaCha8Rng::seed_from_u64(params.seed);
        // k-means++, which also yields the first assignment: `best[i]` = max dot of i with the chosen centres (the first
        // centre attaining it in `assign[i]`); a candidate's weight is `(1 − best)²`, clamped at 0.
        let first = rng.random_range(0..n as u64) as usize;
        let mut chosen = vec![false; n];
        chosen[first] = true;
        let mut centres = vec![first];
        let mut best: Vec<f32> = (0..n).map(|i| self.dot(i, first)).collect();
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
            for i in 0..n {
                let d = self.dot(i, pick);
                if d > best[i] {
                    (best[i], assign[i]) = (d, centres.len());
                }
            }
            centres.push(pick);
        }
        let k = centres.len();
        let mut cent: Vec<f32> = centres.iter().flat_map(|&c| self.row(c).iter().copied()).collect();
        // The centroid among `among` with the highest dot to i, the lowest index on ties.
        let nearest = |cent: &[f32], i: usize, among: &mut dyn Iterator<Item = usize>| -> usize {
            let mut best = (usize::MAX, f32::NEG_INFINITY);
            for c in among {
                let d = dot(self.row(i), &cent[c * dim..(c + 1) * dim]);
                if best.0 == usize::MAX || d > best.1 || (d == best.1 && c < best.0) {
                    best = (c, d);
                }
            }
            best.0
        };
        let update = |cent: &mut Vec<f32>, assign: &[usize]| {
            let mut sum = vec![0.0f64; k * dim];
            let mut count = vec![0usize; k];
            for (i, &c) in assign.iter().enumerate() {
                count[c] += 1;
                for (s, &x) in sum[c * dim..(c + 1) * dim].iter_mut().zip(self.row(i)) {
                    *s += f64::from(x);
                }
            }
            for c in (0..k).filter(|&c| count[c] > 0) {
                let s = &sum[c * dim..(c + 1) * dim];
                let norm = s.iter().map(|x| x * x).sum::<f64>().sqrt();
                let scale = if norm > 0.0 && norm.is_finite() { 1.0 / norm } else { 0.0 };
                for (o, &x) in cent[c * dim..(c + 1) * dim].iter_mut().zip(s) {
                    *o = (x * scale) as f32;
                }
            }
        };
        // Lloyd iterations. A point whose centroid did not move can only switch to a centroid that moved (the others'
        // dots are unchanged and lost to its own before), so it is scored against those alone: same result as a full scan.
        for _ in 0..params.kmeans_iterations {
            let old = cent.clone();
            update(&mut cent, &assign);
            let moved: Vec<bool> = (0..k).map(|c| old[c * dim..(c + 1) * dim] != cent[c * dim..(c + 1) * dim]).collect();
            let movers: Vec<usize> = (0..k).filter(|&c| moved[c]).collect();
            let mut changed = false;
            for (i, a) in assign.iter_mut().enumerate() {
                let c = if moved[*a] {
                    nearest(&cent, i, &mut (0..k))
                } else {
                    nearest(&cent, i, &mut std::iter::once(*a).chain(movers.iter().copied()))
                };
                changed |= c != *a;
                *a = c;
            }
            if !changed {
                break;
            }
        }
        update(&mut cent, &assign);
        // Representatives: highest dot to the centroid, then higher confidence, then lower id.
        let mut rep: Vec<Option<(usize, f32)>> = vec![None; k];
        for (i, &c) in assign.iter().enumerate() {
            let d = dot(self.row(i), &cent[c * dim..(c + 1) * dim]);
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

    /// Greedy removal by `confidence · temporal weight · diversity`.
    ///
    /// `near[i]` holds up to [`NEIGHBOURS`] of i's nearest others (dot descending) as of its last scan; every other
    /// experience not listed has a dot no higher than the listed ones, so the first listed one still remaining is i's
    /// nearest remaining neighbour. Removed entries are dropped from the front lazily; a row is rescanned only when its list
    /// runs out.
    fn hybrid(&self, keep: usize, current_epoch: u64, decay: f64) -> Vec<bool> {
        let n = self.items.len();
        let w = self.temporal_weights(current_epoch, decay);
        let base: Vec<f64> = (0..n).map(|i| self.items[i].confidence * w[i]).collect();
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
        for i in 0..n {
            for j in i + 1..n {
                let d = self.dot(i, j);
                offer(&mut near[i], &mut floor[i], j, d);
                offer(&mut near[j], &mut floor[j], i, d);
            }
        }
        let score_of =
            |i: usize, list: &[(usize, f32)]| base[i] * (1.0 - list.first().map_or(0.0, |&(_, d)| f64::from(d).clamp(0.0, 1.0))) + 0.0;
        let mut score: Vec<f64> = (0..n).map(|i| score_of(i, &near[i])).collect();
        let mut removed = vec![false; n];
        // Min-heap of (score, confidence, created, index); an entry is stale once its index is removed or rescored.
        let entry = |i: usize, score: f64| Reverse((total_key(score), total_key(self.items[i].confidence), self.items[i].created_epoch, i));
        let mut heap: BinaryHeap<_> = (0..n).map(|i| entry(i, score[i])).collect();
        for _ in keep..n {
            let mut victim = None;
            while let Some(Reverse((s, _, _, i))) = heap.pop() {
                if !removed[i] && s == total_key(score[i]) {
                    victim = Some(i);
                    break;
                }
            }
            let Some(v) = victim else { break };
            removed[v] = true;
            for i in 0..n {
                if removed[i] || near[i].first().is_none_or(|&(j, _)| j != v) {
                    continue;
                }
                let gone = near[i].iter().take_while(|&&(j, _)| removed[j]).count();
                near[i].drain(..gone);
                if near[i].is_empty() {
                    floor[i] = f32::NAN;
                    for j in (0..n).filter(|&j| j != i && !removed[j]) {
                        let d = self.dot(i, j);
                        offer(&mut near[i], &mut floor[i], j, d);
                    }
                }
                score[i] = score_of(i, &near[i]);
                heap.push(entry(i, score[i]));
            }
        }
        removed
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
mod tests {
    use super::*;
    use proptest::prelude::{any, prop, prop_assert, prop_assert_eq, proptest, ProptestConfig};
    use rand::seq::SliceRandom;
    use rand::Rng;

    /// (id, confidence, created, last used, vector).
    type Spec = (u64, f64, u64, Option<u64>, Vec<f32>);

    fn unit(v: &[f32]) -> Vec<f32> {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| if n > 0.0 { x / n } else { 0.0 }).collect()
    }

    fn cands(spec: &[Spec]) -> Vec<Candidate<'_>> {
        spec.iter()
            .map(|(id, c, e, u, v)| Candidate {
                id: *id,
                confidence: *c,
                created_epoch: *e,
                last_used_epoch: *u,
                vector: std::borrow::Cow::Borrowed(v),
            })
            .collect()
    }

    fn run(spec: &[Spec], keep: usize, s: Strategy, epoch: u64) -> Vec<u64> {
        removals(&cands(spec), keep, s, epoch, &Params::default()).expect("valid input")
    }

    #[test]
    fn importance_and_temporal() {
        let v = vec![1.0, 0.0];
        let spec: Vec<_> = [(1, 0.9, 1), (2, 0.5, 3), (3, 0.5, 5), (4, 0.5, 5), (5, 0.2, 9)]
            .into_iter()
            .map(|(id, c, e)| (id, c, e, None, v.clone()))
            .collect();
        assert_eq!(run(&spec, 3, Strategy::Importance, 9), vec![2, 5]);
        assert_eq!(run(&spec, 2, Strategy::Importance, 9), vec![2, 3, 5]);
        // Temporal: an old confident experience loses to recent ones.
        // At epoch 10: G1 0.9·e^-1 = 0.331, G2 0.6·e^-0.1 = 0.543, G3 (use before creation counts from creation) 0.5·e^-0.2
        // = 0.409, G4 0.3.
        let spec =
            vec![(1, 0.9, 0, None, v.clone()), (2, 0.6, 0, Some(9), v.clone()), (3, 0.5, 8, Some(2), v.clone()), (4, 0.3, 10, None, v)];
        assert_eq!(run(&spec, 2, Strategy::Temporal, 10), vec![1, 4]);
        assert_eq!(run(&spec, 2, Strategy::Importance, 10), vec![3, 4]);
        let flat = removals(&cands(&spec), 2, Strategy::Temporal, 10, &Params { decay: 0.0, ..Params::default() });
        assert_eq!(flat, Ok(vec![3, 4]));
    }

    #[test]
    fn diversity_one_per_cluster_then_importance_fill() {
        // Three symmetric clusters around the axes: each centroid is its axis, so the on-axis member is the representative.
        let mut spec = Vec::new();
        for (axis, ids) in [[1, 2, 3], [4, 5, 6], [7, 8, 9]].into_iter().enumerate() {
            let (p, q) = (axis, (axis + 1) % 3);
            for (id, off) in ids.into_iter().zip([0.0, 0.1, -0.1]) {
                let mut v = vec![0.0; 3];
                v[p] = 1.0;
                v[q] = off;
                spec.push((id, 0.1 * id as f64 % 0.7, id, None, unit(&v)));
            }
        }
        for seed in 0..20 {
            let r = removals(&cands(&spec), 3, Strategy::Diversity, 9, &Params { seed, ..Params::default() });
            assert_eq!(r, Ok(vec![2, 3, 5, 6, 8, 9]), "seed {seed}");
        }
        // Identical vectors form a single cluster; its representative and the fill follow confidence.
        let v = unit(&[1.0, 2.0]);
        let spec: Vec<_> = [(1, 0.3), (2, 0.9), (3, 0.1), (4, 0.6)].into_iter().map(|(id, c)| (id, c, 0, None, v.clone())).collect();
        assert_eq!(run(&spec, 2, Strategy::Diversity, 0), vec![1, 3]);
    }

    #[test]
    fn hybrid_removes_one_of_a_duplicate_pair() {
        let spec = vec![
            (1, 0.9, 0, None, vec![1.0, 0.0, 0.0]),
            (2, 0.8, 0, None, vec![1.0, 0.0, 0.0]),
            (3, 0.5, 0, None, vec![0.0, 1.0, 0.0]),
            (4, 0.4, 0, None, vec![0.0, 0.0, 1.0]),
        ];
        assert_eq!(run(&spec, 3, Strategy::Hybrid, 0), vec![2]);
        // Once G2 is gone G1 is unique again (score 0.9), so G4 (0.4) goes next.
        assert_eq!(run(&spec, 2, Strategy::Hybrid, 0), vec![2, 4]);
        // Age matters: G3 unused for 20 epochs scores 0.5·e^-2 = 0.068 < G4's 0.4.
        let mut aged = spec.clone();
        aged[3].2 = 20;
        assert_eq!(run(&aged, 2, Strategy::Hybrid, 20), vec![2, 3]);
    }

    #[test]
    fn trivial_sizes() {
        let spec: Vec<_> = (1..=4).map(|id| (id, 0.5, 0, None, unit(&[id as f32, 1.0]))).collect();
        for s in Strategy::ALL {
            assert_eq!(run(&spec, 4, s, 0), Vec::<u64>::new());
            assert_eq!(run(&spec, 9, s, 0), Vec::<u64>::new());
            assert_eq!(run(&spec, 0, s, 0), vec![1, 2, 3, 4]);
            assert_eq!(run(&[], 0, s, 0), Vec::<u64>::new());
            assert_eq!(run(&[], 3, s, 0), Vec::<u64>::new());
        }
    }

    #[test]
    fn zero_vectors_are_harmless() {
        let mut spec: Vec<_> = (1..=6).map(|id| (id, 0.1 * id as f64, id, None, vec![0.0; 4])).collect();
        spec.push((7, 0.5, 0, None, unit(&[1.0, 1.0, 0.0, 0.0])));
        for s in Strategy::ALL {
            for keep in 0..=7 {
                assert_eq!(run(&spec, keep, s, 10).len(), 7 - keep, "{s} keep {keep}");
            }
        }
        assert_eq!(similar_groups(&cands(&spec), 0.5), Ok(vec![]));
        assert_eq!(similar_groups(&cands(&spec[..2]), 0.0), Ok(vec![vec![1, 2]]));
        let zero: Vec<_> = (1..=3).map(|id| (id, 0.5, 0, None, Vec::new())).collect();
        assert_eq!(run(&zero, 1, Strategy::Hybrid, 0), vec![1, 2]);
    }

    #[test]
    fn refusals_and_names() {
        let ok = vec![(1, 0.5, 0, None, vec![1.0, 0.0]), (2, 0.5, 0, None, vec![0.0, 1.0])];
        let p = |decay| Params { decay, ..Params::default() };
        for d in [-0.1, f64::NAN, f64::INFINITY] {
            assert!(matches!(removals(&cands(&ok), 1, Strategy::Temporal, 0, &p(d)), Err(CompressError::BadDecay(_))));
        }
        let mut bad = ok.clone();
        bad[1].1 = f64::NAN;
        assert!(matches!(removals(&cands(&bad), 1, Strategy::Hybrid, 0, &p(0.1)), Err(CompressError::BadConfidence { id: 2, .. })));
        let mut bad = ok.clone();
        bad[1].4 = vec![1.0];
        let e = removals(&cands(&bad), 1, Strategy::Importance, 0, &p(0.1));
        assert_eq!(e, Err(CompressError::DimensionMismatch { id: 2, expected: 2, got: 1 }));
        let mut bad = ok.clone();
        bad[0].4 = vec![f32::NAN, 0.0];
        assert_eq!(similar_groups(&cands(&bad), 0.9), Err(CompressError::NonFiniteVector { id: 1 }));
        let mut bad = ok.clone();
        bad[1].0 = 1;
        assert_eq!(similar_groups(&cands(&bad), 0.9), Err(CompressError::DuplicateId(1)));
        assert!(similar_groups(&cands(&ok), 1.5).unwrap_err().to_string().contains("threshold"));
        assert!(similar_groups(&cands(&ok), f32::NAN).is_err());
        for s in Strategy::ALL {
            assert_eq!(format!("  {} ", s.as_str().to_uppercase()).parse::<Strategy>(), Ok(s));
        }
        let e = "x".repeat(100).parse::<Strategy>().unwrap_err();
        assert!(
            e.contains(&"x".repeat(40)) && !e.contains(&"x".repeat(41)) && e.contains("diversity, importance, temporal, hybrid"),
            "{e}"
        );
    }

    /// (confidence, created, last used, raw vector, kind: 0 zero, 1 copy of the previous, else normalised raw).
    type Raw = (f64, u64, Option<u64>, Vec<f32>, u8);

    fn build(raw: &[Raw], dim: usize) -> Vec<Spec> {
        let mut out: Vec<Spec> = Vec::new();
        for (i, (c, e, u, v, kind)) in raw.iter().enumerate() {
            let v = match (kind, out.last()) {
                (0, _) => vec![0.0; dim],
                (1, Some(prev)) => prev.4.clone(),
                _ => unit(&v[..dim]),
            };
            out.push((i as u64 * 3 + 1, *c, *e, *u, v));
        }
        out
    }

    fn raws(max: usize) -> impl proptest::strategy::Strategy<Value = Vec<Raw>> {
        let raw = (0.0f64..=1.0, 0u64..20, prop::option::of(0u64..30), prop::collection::vec(-1.0f32..1.0, 8), 0u8..5);
        prop::collection::vec(raw, 0..=max)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn removals_are_well_formed_and_order_independent(
            raw in raws(60), dim in 1usize..=8, keep_frac in 0.0f64..=1.0, s in 0usize..4, seed in any::<u64>(),
            epoch in 0u64..40, decay in 0.0f64..1.0, shuffle in any::<u64>(),
        ) {
            let spec = build(&raw, dim);
            let keep = ((spec.len() + 2) as f64 * keep_frac) as usize;
            let params = Params { decay, seed, kmeans_iterations: DEFAULT_KMEANS_ITERATIONS };
            let c = cands(&spec);
            let r = removals(&c, keep, Strategy::ALL[s], epoch, &params).expect("valid input");
            prop_assert_eq!(r.len(), spec.len().saturating_sub(keep));
            prop_assert!(r.windows(2).all(|w| w[0] < w[1]));
            prop_assert!(r.iter().all(|id| spec.iter().any(|x| x.0 == *id)));
            let mut shuffled = c.clone();
            shuffled.shuffle(&mut ChaCha8Rng::seed_from_u64(shuffle));
            prop_assert_eq!(&removals(&shuffled, keep, Strategy::ALL[s], epoch, &params).expect("valid"), &r);
            prop_assert_eq!(&removals(&c, keep, Strategy::ALL[s], epoch, &params).expect("valid"), &r);
        }

        #[test]
        fn hybrid_matches_naive_recomputation(raw in raws(30), dim in 1usize..=3, keep in 0usize..30, epoch in 0u64..40) {
            let spec = build(&raw, dim);
            let r = removals(&cands(&spec), keep, Strategy::Hybrid, epoch, &Params::default()).expect("valid input");
            // Reference: recompute every remaining experience's score from scratch before each removal.
            let n = spec.len();
            let age = |x: &Spec| epoch.saturating_sub(x.3.unwrap_or(x.2).max(x.2)) as f64;
            let mut alive: Vec<usize> = (0..n).collect();
            let mut gone = Vec::new();
            while alive.len() > keep {
                let score = |i: usize| {
                    let dots = alive.iter().filter(|&&j| j != i).map(|&j| dot(&spec[i].4, &spec[j].4));
                    let near = dots.fold(None, |m: Option<f32>, d| Some(m.map_or(d, |m| m.max(d))));
                    let diversity = 1.0 - near.map_or(0.0, |d| f64::from(d).clamp(0.0, 1.0));
                    spec[i].1 * (-DEFAULT_DECAY * age(&spec[i])).exp() * diversity + 0.0
                };
                let key = |i: usize| (score(i), spec[i].1, spec[i].2, spec[i].0);
                let v = alive.iter().copied().min_by(|&a, &b| {
                    let (x, y) = (key(a), key(b));
                    x.0.total_cmp(&y.0).then(x.1.total_cmp(&y.1)).then(x.2.cmp(&y.2)).then(x.3.cmp(&y.3))
                });
                let Some(v) = v else { break };
                alive.retain(|&i| i != v);
                gone.push(spec[v].0);
            }
            gone.sort_unstable();
            prop_assert_eq!(r, gone);
        }

        #[test]
        fn similar_groups_are_the_components(raw in raws(40), dim in 1usize..=8, threshold in -1.0f32..=1.0) {
            let spec = build(&raw, dim);
            let groups = similar_groups(&cands(&spec), threshold).expect("valid input");
            let group_of = |i: usize| groups.iter().position(|g| g.contains(&spec[i].0));
            let edge = |i: usize, j: usize| dot(&spec[i].4, &spec[j].4) >= threshold;
            let mut seen = std::collections::HashSet::new();
            for g in &groups {
                prop_assert!(g.len() >= 2 && g.windows(2).all(|w| w[0] < w[1]));
                prop_assert!(g.iter().all(|id| seen.insert(*id)), "groups overlap");
                // Connected: a search from the first member over edges inside the group reaches every member.
                let idx: Vec<usize> = g.iter().filter_map(|id| spec.iter().position(|x| x.0 == *id)).collect();
                let mut reached = vec![idx[0]];
                while let Some(b) = idx.iter().copied().find(|&b| !reached.contains(&b) && reached.iter().any(|&a| edge(a, b))) {
                    reached.push(b);
                }
                prop_assert_eq!(reached.len(), idx.len());
            }
            prop_assert!(groups.windows(2).all(|w| w[0][0] < w[1][0]));
            for i in 0..spec.len() {
                for j in i + 1..spec.len() {
                    if edge(i, j) {
                        prop_assert!(group_of(i).is_some() && group_of(i) == group_of(j), "edge {} {} split", i, j);
                    }
                }
            }
        }
    }

    #[test]
    #[ignore = "timing; run with --release --ignored --nocapture"]
    fn timing() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for n in [1_000usize, 10_000] {
            let dim = 256;
            let vecs: Vec<Vec<f32>> = (0..n).map(|_| unit(&(0..dim).map(|_| rng.random_range(-1.0f32..1.0)).collect::<Vec<_>>())).collect();
            let spec: Vec<_> = vecs.into_iter().enumerate().map(|(i, v)| (i as u64, rng.random::<f64>(), i as u64 % 50, None, v)).collect();
            let c = cands(&spec);
            for keep in [n / 10, n / 2] {
                for s in Strategy::ALL {
                    let t = std::time::Instant::now();
                    let r = removals(&c, keep, s, 60, &Params::default()).expect("valid");
                    println!("n={n} keep={keep} {s}: {:.3}s ({} removed)", t.elapsed().as_secs_f64(), r.len());
                }
            }
            let t = std::time::Instant::now();
            let g = similar_groups(&c, 0.9).expect("valid");
            println!("n={n} similar_groups: {:.3}s ({} groups)", t.elapsed().as_secs_f64(), g.len());
        }
    }
}
