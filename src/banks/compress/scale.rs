//! Diversity, hybrid and MergeSimilar's grouping over more than [`EXACT_LIMIT`] experiences, with neighbours
//! read from the bank's HNSW graph instead of every pair compared.
//!
//! Exactly, hybrid compares `n²/2` pairs and diversity runs k-means with `k = max_size` (`n · k` dot products
//! per pass): hours on a million experiences. Both only need each experience's *near* others, and a bank
//! already holds a graph that links every experience to its approximate nearest (layer 0 of its HNSW index).
//! So over [`EXACT_LIMIT`] experiences:
//!
//! - **neighbours** of an experience are its layer-0 graph neighbours that are still in the bank, and, through
//!   a neighbour that was deleted, that neighbour's own. An experience written since the graph was built (not
//!   in it) is searched for in the graph, and is added to the lists of what it found;
//! - **hybrid** is the same greedy removal, its nearest-neighbour lists taken from those neighbours (the
//!   [`LIST`] nearest); a list that runs out is refilled from the neighbours of its neighbours, and an
//!   experience none of whose neighbours or their neighbours remain counts as lone (diversity 1);
//! - **diversity** is the same spherical k-means with `k = max_size`, except that (a) the first centres are
//!   drawn in a seeded random order, each skipped while a graph neighbour is already a centre (spread out,
//!   as k-means++ makes them, without its `n · k` pass), the order then filling what is left, (b) the first
//!   assignment spreads from the centres along the graph in rounds ([`spread`]), (c) an experience is only
//!   compared with its own centroid and its neighbours' (the clusters it can move to), and (d) the iterations
//!   stop once at most [`SETTLED`] of the assignments change in one. The passes run on every core, visiting
//!   experiences cluster by cluster so that the centroids they read stay in cache. A pass skips an
//!   experience whose [`Bounds`] prove its cluster still wins (Hamerly's bounds, on dots: the dot with its
//!   own centroid, and the best with any other, from when it was last compared, each moved by how far the
//!   centroids moved since; a cluster a neighbour has just moved into is compared exactly); skipping
//!   changes no result, only the work;
//! - **MergeSimilar's groups** join two experiences whose dot reaches the threshold only when one is a
//!   neighbour of the other: near-duplicates are graph neighbours.
//!
//! Results are deterministic for a given graph, and the graph is the bank's saved index. What the
//! approximation costs against the exact definitions is measured in the Banks chapter.

use std::collections::HashMap;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::{beats, hybrid_score, Components, Library, Params, RemovalOrder, Scratch, Src, EXACT_LIMIT};
use crate::memory::vectors::VectorRows;
use crate::memory::Graph;
use crate::memory::Tombstones;
use crate::util::vector::dot;

/// An empty slot.
const NONE: u32 = u32::MAX;

/// Nearest neighbours hybrid remembers per experience.
const LIST: usize = 16;

/// Diversity's iterations stop once at most `n / SETTLED` assignments change in one.
const SETTLED: usize = 1_000;

/// Every item's neighbours (item indices), as one table.
pub(super) struct Neighbours {
    start: Vec<usize>,
    items: Vec<u32>,
}

/// Graph rows no item is on, as the graph search's tombstones.
struct Absent<'a> {
    item_of: &'a [u32],
    count: usize,
}

impl Tombstones for Absent<'_> {
    fn is_dead(&self, i: usize) -> bool {
        self.item_of.get(i).is_none_or(|&x| x == NONE)
    }
    fn dead_count(&self) -> usize {
        self.count
    }
}

impl Neighbours {
    /// The neighbours of every item of `lib` in `graph` (see the module doc).
    pub(super) fn build(lib: &Library<'_>, graph: &Graph) -> Neighbours {
        let n = lib.items.len();
        let mut item_of = vec![NONE; graph.len()];
        for (i, s) in lib.src.iter().enumerate() {
            if let Src::Row(r) = *s {
                if let Some(x) = item_of.get_mut(r as usize) {
                    *x = i as u32;
                }
            }
        }
        // Items off the graph find their neighbours by a search, and are added to the lists of what they found.
        let mut extra: HashMap<u32, Vec<u32>> = HashMap::new();
        let off: Vec<usize> = (0..n).filter(|&i| !matches!(lib.src[i], Src::Row(r) if (r as usize) < graph.len())).collect();
        if let Some(space) = lib.space {
            let absent = Absent { item_of: &item_of, count: item_of.iter().filter(|&&x| x == NONE).count() };
            let ef = graph.width().max(16);
            let mut row = vec![0.0f32; lib.dim];
            for &i in &off {
                lib.load(i, &mut row);
                let mut found: Vec<u32> =
                    graph.search(&row, space.rows, lib.dim, ef, &absent).iter().map(|h| item_of[h.key as usize]).collect();
                // Among themselves, the items off the graph are compared pair by pair while they are few.
                if off.len() <= EXACT_LIMIT {
                    let mut own: Vec<(f32, u32)> = off.iter().filter(|&&j| j != i).map(|&j| (lib.dot_with(&row, j), j as u32)).collect();
                    let nearer = |a: &(f32, u32), b: &(f32, u32)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
                    // The `width` nearest, without sorting the rest.
                    if own.len() > graph.width() {
                        own.select_nth_unstable_by(graph.width(), nearer);
                        own.truncate(graph.width());
                    }
                    found.extend(own.into_iter().map(|p| p.1));
                }
                for &j in &found {
                    extra.entry(j).or_default().push(i as u32);
                }
                extra.entry(i as u32).or_default().extend(found);
            }
        }
        let mut start = Vec::with_capacity(n + 1);
        let mut items = Vec::with_capacity(n * graph.width());
        let mut list: Vec<u32> = Vec::new();
        for i in 0..n {
            start.push(items.len());
            list.clear();
            if let Src::Row(r) = lib.src[i] {
                if (r as usize) < graph.len() {
                    for &nb in graph.layer0(r as usize) {
                        match item_of[nb as usize] {
                            NONE => list.extend(graph.layer0(nb as usize).iter().map(|&x| item_of[x as usize]).filter(|&x| x != NONE)),
                            x => list.push(x),
                        }
                    }
                }
            }
            if let Some(e) = extra.get(&(i as u32)) {
                list.extend_from_slice(e);
            }
            list.sort_unstable();
            list.dedup();
            items.extend(list.iter().copied().filter(|&x| x as usize != i));
        }
        start.push(items.len());
        if lib.space.is_some_and(|s| s.huge_pages) {
            crate::util::huge::back_with_huge_pages(&items);
        }
        Neighbours { start, items }
    }

    /// Item `i`'s neighbours.
    fn of(&self, i: usize) -> &[u32] {
        &self.items[self.start[i]..self.start[i + 1]]
    }
}

/// Runs `f` over `0..n` split into one contiguous range per core, and joins the parts' results in order.
fn par_map<T: Send>(n: usize, f: impl Fn(std::ops::Range<usize>) -> Vec<T> + Sync) -> Vec<T> {
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get()).clamp(1, 16);
    let chunk = n.div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let f = &f;
        let parts: Vec<_> = (0..n).step_by(chunk).map(|a| s.spawn(move || f(a..(a + chunk).min(n)))).collect();
        parts.into_iter().flat_map(|p| p.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
    })
}

/// MergeSimilar's edges: every pair of neighbours whose dot reaches `threshold`.
pub(super) fn join_similar(lib: &Library<'_>, near: &Neighbours, threshold: f32, sets: &mut Components) {
    let n = lib.items.len();
    let edges: Vec<(u32, u32)> = par_map(n, |range| {
        let mut row = vec![0.0f32; lib.dim];
        let mut out = Vec::new();
        for i in range {
            lib.load(i, &mut row);
            for &j in near.of(i).iter().filter(|&&j| j as usize > i) {
                if lib.dot_with(&row, j as usize) >= threshold {
                    out.push((i as u32, j));
                }
            }
        }
        out
    });
    for (i, j) in edges {
        sets.join(i as usize, j as usize);
    }
}

/// Hybrid over the graph's neighbours (see the module doc): the removal flags.
pub(super) fn hybrid(lib: &Library<'_>, near: &Neighbours, keep: usize, base: &[f64]) -> Vec<bool> {
    let (n, started) = (lib.items.len(), std::time::Instant::now());
    // `list[i]`: i's nearest (dot descending, then lower index), removed ones dropped from the front lazily.
    let mut list: Vec<Vec<(u32, f32)>> = par_map(n, |range| {
        let (mut row, mut rows) = (vec![0.0f32; lib.dim], Vec::new());
        range
            .map(|i| {
                lib.touch(near.of(i), &mut rows);
                lib.load(i, &mut row);
                let mut l: Vec<(u32, f32)> = near.of(i).iter().map(|&j| (j, lib.dot_with(&row, j as usize))).collect();
                nearest_first(&mut l);
                l.shrink_to_fit();
                l
            })
            .collect()
    });
    // `holders[j]`: the experiences whose list holds j (maybe no longer: checked when used).
    let mut holders: Vec<Vec<u32>> = vec![Vec::new(); n];
    for (i, l) in list.iter().enumerate() {
        for &(j, _) in l {
            holders[j as usize].push(i as u32);
        }
    }
    tracing::debug!(n, secs = started.elapsed().as_secs_f64(), "hybrid over the graph: nearest lists");
    let mut score: Vec<f64> = (0..n).map(|i| hybrid_score(base[i], list[i].first().map(|p| p.1))).collect();
    let mut removed = vec![false; n];
    let mut order = RemovalOrder::new(lib, &score);
    let (mut seen, mut stamp) = (vec![0u32; n], 0u32);
    let (mut row, mut among, mut rows) = (vec![0.0f32; lib.dim], Vec::new(), Vec::new());
    for _ in keep..n {
        let Some(v) = order.pop(&removed, &score) else { break };
        removed[v] = true;
        for i in std::mem::take(&mut holders[v]) {
            let i = i as usize;
            if removed[i] || list[i].first().is_none_or(|&(j, _)| j as usize != v) {
                continue;
            }
            let gone = list[i].iter().take_while(|&&(j, _)| removed[j as usize]).count();
            list[i].drain(..gone);
            if list[i].is_empty() {
                // Refilled from the neighbours of its neighbours that remain.
                stamp += 1;
                seen[i] = stamp;
                among.clear();
                for &a in near.of(i) {
                    for &b in std::iter::once(&a).chain(near.of(a as usize)) {
                        if seen[b as usize] != stamp && !removed[b as usize] {
                            seen[b as usize] = stamp;
                            among.push(b);
                        }
                    }
                }
                lib.touch(&among, &mut rows);
                lib.load(i, &mut row);
                let mut l: Vec<(u32, f32)> = among.iter().map(|&b| (b, lib.dot_with(&row, b as usize))).collect();
                nearest_first(&mut l);
                for &(j, _) in &l {
                    holders[j as usize].push(i as u32);
                }
                list[i] = l;
            }
            score[i] = hybrid_score(base[i], list[i].first().map(|p| p.1));
            order.push(lib, i, score[i]);
        }
    }
    tracing::debug!(n, secs = started.elapsed().as_secs_f64(), "hybrid over the graph: removals chosen");
    removed
}

/// Sets the centroid of every `dirty` cluster with members to their normalised mean, on every core (as
/// [`Library::update_centroids`] does for all). Returns how far each centroid moved (`‖new − old‖`, rounded
/// up; 0 for one that did not change).
fn update_dirty(lib: &Library<'_>, cent: &mut [f32], assign: &[u32], dirty: &[bool]) -> Vec<f32> {
    let (k, dim) = (dirty.len(), lib.dim);
    let mut members: Vec<Vec<u32>> = vec![Vec::new(); k];
    for (i, &c) in assign.iter().enumerate() {
        if dirty[c as usize] {
            members[c as usize].push(i as u32);
        }
    }
    let todo: Vec<usize> = (0..k).filter(|&c| !members[c].is_empty()).collect();
    let fresh: Vec<Vec<f32>> = par_map(todo.len(), |range| {
        let mut scratch = Scratch::new(dim);
        range.map(|x| lib.mean_direction(&members[todo[x]], &mut scratch).to_vec()).collect()
    });
    let mut drift = vec![0.0f32; k];
    for (&c, v) in todo.iter().zip(&fresh) {
        let at = &mut cent[c * dim..(c + 1) * dim];
        if at != &v[..] {
            let d = at.iter().zip(v).map(|(&a, &b)| (f64::from(a) - f64::from(b)).powi(2)).sum::<f64>().sqrt();
            drift[c] = (d * (1.0 + 1e-6)) as f32;
            at.copy_from_slice(v);
        }
    }
    drift
}

/// Sorts a neighbour list nearest first (ties: lower index) and keeps its [`LIST`] first.
fn nearest_first(l: &mut Vec<(u32, f32)>) {
    l.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    l.truncate(LIST);
}

/// What a Lloyd pass knows of an experience's dots with the centroids of its candidate clusters: at least
/// `lo` with its own cluster's, at most `hi` with any other's. Exact (but for [`ROUNDING`]) when it was
/// compared, loosened by how far the centroids moved in each pass since. While `lo > hi` its own cluster
/// still wins, and the pass skips its dot products.
#[derive(Debug, Clone, Copy)]
struct Bounds {
    lo: f32,
    hi: f32,
}

/// Widens a computed dot into a bound: covers the rounding of the dot stored and of the one a later pass
/// would compute (a dot of two 384-value unit vectors in `f32` errs by less than 3·10⁻⁵).
const ROUNDING: f32 = 1e-4;

/// Diversity over the graph's neighbours (see the module doc): the removal flags.
pub(super) fn diversity(lib: &Library<'_>, near: &Neighbours, keep: usize, params: &Params) -> Vec<bool> {
    diversity_with(lib, near, keep, params, true)
}

/// [`diversity`], its Lloyd passes skipping an experience whose [`Bounds`] show its cluster still wins
/// (`bounded`), or comparing every experience with every candidate in every pass: the same result.
pub(super) fn diversity_with(lib: &Library<'_>, near: &Neighbours, keep: usize, params: &Params, bounded: bool) -> Vec<bool> {
    let (n, dim) = (lib.items.len(), lib.dim);
    // The centres: a seeded order, skipping an experience while one of its neighbours is a centre, then filling.
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(&mut ChaCha8Rng::seed_from_u64(params.seed));
    let mut centre = vec![false; n];
    let mut centres: Vec<usize> = Vec::with_capacity(keep);
    for &i in &order {
        if centres.len() == keep {
            break;
        }
        if !near.of(i).iter().any(|&j| centre[j as usize]) {
            centre[i] = true;
            centres.push(i);
        }
    }
    for &i in &order {
        if centres.len() == keep {
            break;
        }
        if !centre[i] {
            centre[i] = true;
            centres.push(i);
        }
    }
    let k = centres.len();
    let mut cent = vec![0.0f32; k * dim];
    if lib.space.is_some_and(|s| s.huge_pages) {
        // Read at random by every pass (150 MB at 1,000,000 experiences keeping 100,000).
        crate::util::huge::back_with_huge_pages(&cent);
    }
    let mut assign = vec![NONE; n];
    for (c, &i) in centres.iter().enumerate() {
        lib.load(i, &mut cent[c * dim..(c + 1) * dim]);
        assign[i] = c as u32;
    }
    tracing::debug!(n, k, "diversity over the graph: centres drawn");
    spread(lib, near, &cent, &mut assign);
    let mut row = vec![0.0f32; dim];
    for (i, a) in assign.iter_mut().enumerate() {
        if *a == NONE {
            lib.load(i, &mut row);
            *a = lib.nearest(&cent, &row, 0..k) as u32;
        }
    }
    // A centroid that moved by `d` changes an experience's dot with it by at most `d · reach`.
    let longest = par_map(n, |range| {
        let mut row = vec![0.0f32; dim];
        let most = range.map(|i| {
            lib.load(i, &mut row);
            dot(&row, &row)
        });
        vec![most.fold(0.0f32, f32::max)]
    });
    let reach = longest.into_iter().fold(0.0f32, f32::max).sqrt() * (1.0 + 1e-6);
    // Lloyd iterations, each experience against its own centroid and its neighbours' (all from the last pass).
    // Only a cluster whose members changed gets a new centroid (the others' sums are the same sums).
    let mut dirty = vec![true; k];
    // `flipped[i]`: i changed cluster in the last pass (every experience counts as changed before the first).
    let mut flipped = vec![true; n];
    let mut bounds = vec![Bounds { lo: f32::NEG_INFINITY, hi: f32::INFINITY }; n];
    let started = std::time::Instant::now();
    for iteration in 0..params.kmeans_iterations {
        let drift = update_dirty(lib, &mut cent, &assign, &dirty);
        let updated = started.elapsed().as_secs_f64();
        let movers = drift.iter().filter(|&&d| d > 0.0).count();
        let (cent_now, assign_now, flipped_now, bounds_now) = (&cent, &assign, &flipped, &bounds);
        // Visited cluster by cluster, so the few centroids that neighbouring experiences compare with stay in
        // cache (each experience's result is from the last pass alone: the order changes no result).
        let visit = by_cluster(&assign, k);
        let compared = std::sync::atomic::AtomicUsize::new(0);
        let found: Vec<(u32, Bounds)> = par_map(n, |range| {
            let (mut row, mut among, mut count) = (vec![0.0f32; dim], Vec::new(), 0);
            let out = visit[range]
                .iter()
                .map(|&i| {
                    let i = i as usize;
                    let own = assign_now[i];
                    let nb = near.of(i);
                    if bounded {
                        // Its bounds hold for the candidates of its last pass; a cluster a neighbour moved into
                        // in that pass may be new, and is compared exactly.
                        let others =
                            nb.iter().map(|&j| assign_now[j as usize]).filter(|&c| c != own).fold(0.0f32, |m, c| m.max(drift[c as usize]));
                        let b = bounds_now[i];
                        let mut b = Bounds { lo: b.lo - drift[own as usize] * reach, hi: b.hi + others * reach };
                        if b.lo > b.hi {
                            among.clear();
                            among.extend(nb.iter().filter(|&&j| flipped_now[j as usize]).map(|&j| assign_now[j as usize]));
                            among.retain(|&c| c != own);
                            if !among.is_empty() {
                                b.hi = b.hi.max(best(lib, cent_now, i, &mut among, &mut row).1 + ROUNDING);
                            }
                            if b.lo > b.hi {
                                return (own, b);
                            }
                        }
                    }
                    among.clear();
                    among.push(own);
                    among.extend(nb.iter().map(|&j| assign_now[j as usize]));
                    count += 1;
                    compare(lib, cent_now, i, &mut among, &mut row)
                })
                .collect();
            compared.fetch_add(count, std::sync::atomic::Ordering::Relaxed);
            out
        });
        let mut next = vec![NONE; n];
        for (&i, &(c, b)) in visit.iter().zip(&found) {
            next[i as usize] = c;
            bounds[i as usize] = b;
        }
        dirty.fill(false);
        let mut changed = 0;
        for (i, (a, b)) in next.iter().zip(&assign).enumerate() {
            flipped[i] = a != b;
            if a != b {
                (dirty[*a as usize], dirty[*b as usize]) = (true, true);
                changed += 1;
            }
        }
        assign = next;
        tracing::debug!(
            iteration,
            changed,
            movers,
            compared = compared.into_inner(),
            updated,
            secs = started.elapsed().as_secs_f64(),
            "diversity over the graph: an iteration"
        );
        if changed <= n / SETTLED {
            break;
        }
    }
    update_dirty(lib, &mut cent, &assign, &dirty);
    lib.representatives(&cent, |i| assign[i] as usize, k, keep)
}

/// Item `i` against the centroids of the clusters `among` (maybe repeated; `row` is scratch): the nearest
/// (highest dot, the lowest index on ties) and its [`Bounds`].
fn compare(lib: &Library<'_>, cent: &[f32], i: usize, among: &mut Vec<u32>, row: &mut [f32]) -> (u32, Bounds) {
    let (c, top, second) = best(lib, cent, i, among, row);
    (c, Bounds { lo: top - ROUNDING, hi: second + ROUNDING })
}

/// The nearest of the clusters `among` (not empty) to item `i`, with its dot and the next highest dot
/// (−∞ with one cluster). The centroids are read ahead ([`VectorRows::touch`]), so their cache misses overlap.
///
/// The rule is [`beats`], as [`Library::nearest`]'s, in a loop of its own: the two sharing one `nearest_two`
/// (commit e3c9df9) doubled diversity's time on 200,000 experiences (10.3–10.9 s against 4.6–5.7 s alone,
/// `bench banks`, 2026-11-29); sharing only the rule did not (4.55 s).
fn best(lib: &Library<'_>, cent: &[f32], i: usize, among: &mut Vec<u32>, row: &mut [f32]) -> (u32, f32, f32) {
    let dim = lib.dim;
    among.sort_unstable();
    among.dedup();
    VectorRows::Full(cent).touch(among, dim);
    lib.load(i, row);
    let (mut best, mut top, mut second) = (usize::MAX, f32::NEG_INFINITY, f32::NEG_INFINITY);
    for &c in among.iter() {
        let c = c as usize;
        let d = dot(row, &cent[c * dim..][..dim]);
        if beats(d, c, best, top) {
            second = second.max(top);
            (best, top) = (c, d);
        } else {
            second = second.max(d);
        }
    }
    (best as u32, top, second)
}

/// Item indices grouped by `assign` (cluster 0's first), ascending within a cluster.
pub(super) fn by_cluster(assign: &[u32], k: usize) -> Vec<u32> {
    let mut start = vec![0usize; k + 1];
    for &c in assign {
        start[c as usize + 1] += 1;
    }
    for c in 0..k {
        start[c + 1] += start[c];
    }
    let mut out = vec![0u32; assign.len()];
    for (i, &c) in assign.iter().enumerate() {
        out[start[c as usize]] = i as u32;
        start[c as usize] += 1;
    }
    out
}

/// Diversity's first assignment: spreads from the centres along the graph, in rounds. In each round every
/// unassigned experience with an assigned neighbour joins the best centroid among its assigned neighbours'
/// clusters (as assigned at the round's start, so a round's results do not depend on the order it runs in).
/// A round runs on every core, its experiences ordered by their first candidate cluster so that neighbouring
/// ones read the same centroids. Experiences cut off from every centre stay [`NONE`].
fn spread(lib: &Library<'_>, near: &Neighbours, cent: &[f32], assign: &mut [u32]) {
    let n = assign.len();
    let mut round = 0;
    loop {
        let now: &[u32] = assign;
        // (first candidate cluster, experience) for every experience this round assigns.
        let mut todo: Vec<(u32, u32)> = par_map(n, |range| {
            range
                .filter(|&i| now[i] == NONE)
                .filter_map(|i| near.of(i).iter().map(|&j| now[j as usize]).filter(|&c| c != NONE).min().map(|c| (c, i as u32)))
                .collect()
        });
        if todo.is_empty() {
            break;
        }
        todo.sort_unstable();
        let chosen: Vec<u32> = par_map(todo.len(), |range| {
            let mut row = vec![0.0f32; lib.dim];
            let mut among: Vec<u32> = Vec::new();
            todo[range]
                .iter()
                .map(|&(_, i)| {
                    among.clear();
                    among.extend(near.of(i as usize).iter().map(|&j| now[j as usize]).filter(|&c| c != NONE));
                    compare(lib, cent, i as usize, &mut among, &mut row).0
                })
                .collect()
        });
        for (&(_, i), &c) in todo.iter().zip(&chosen) {
            assign[i as usize] = c;
        }
        tracing::debug!(round, assigned = todo.len(), "diversity over the graph: a spreading round");
        round += 1;
    }
}
