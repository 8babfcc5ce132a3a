//! The compression strategies' definitions checked on small libraries, exactly and against naive
//! recomputation, and the graph-based path of large libraries against the exact one.

use super::*;
use proptest::prelude::{any, prop, prop_assert, prop_assert_eq, proptest, ProptestConfig};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

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
            vector: Vector::Own(std::borrow::Cow::Borrowed(v)),
        })
        .collect()
}

fn run(spec: &[Spec], keep: usize, s: Strategy, epoch: u64) -> Vec<u64> {
    removals(&cands(spec), None, keep, s, epoch, &Params::default()).expect("valid input")
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
    let spec = vec![(1, 0.9, 0, None, v.clone()), (2, 0.6, 0, Some(9), v.clone()), (3, 0.5, 8, Some(2), v.clone()), (4, 0.3, 10, None, v)];
    assert_eq!(run(&spec, 2, Strategy::Temporal, 10), vec![1, 4]);
    assert_eq!(run(&spec, 2, Strategy::Importance, 10), vec![3, 4]);
    let flat = removals(&cands(&spec), None, 2, Strategy::Temporal, 10, &Params { decay: 0.0, ..Params::default() });
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
        let r = removals(&cands(&spec), None, 3, Strategy::Diversity, 9, &Params { seed, ..Params::default() });
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
    assert_eq!(similar_groups(&cands(&spec), None, 0.5), Ok(vec![]));
    assert_eq!(similar_groups(&cands(&spec[..2]), None, 0.0), Ok(vec![vec![1, 2]]));
    let zero: Vec<_> = (1..=3).map(|id| (id, 0.5, 0, None, Vec::new())).collect();
    assert_eq!(run(&zero, 1, Strategy::Hybrid, 0), vec![1, 2]);
}

#[test]
fn refusals_and_names() {
    let ok = vec![(1, 0.5, 0, None, vec![1.0, 0.0]), (2, 0.5, 0, None, vec![0.0, 1.0])];
    let p = |decay| Params { decay, ..Params::default() };
    for d in [-0.1, f64::NAN, f64::INFINITY] {
        assert!(matches!(removals(&cands(&ok), None, 1, Strategy::Temporal, 0, &p(d)), Err(CompressError::BadDecay(_))));
    }
    let mut bad = ok.clone();
    bad[1].1 = f64::NAN;
    assert!(matches!(removals(&cands(&bad), None, 1, Strategy::Hybrid, 0, &p(0.1)), Err(CompressError::BadConfidence { id: 2, .. })));
    let mut bad = ok.clone();
    bad[1].4 = vec![1.0];
    let e = removals(&cands(&bad), None, 1, Strategy::Importance, 0, &p(0.1));
    assert_eq!(e, Err(CompressError::DimensionMismatch { id: 2, expected: 2, got: 1 }));
    let mut bad = ok.clone();
    bad[0].4 = vec![f32::NAN, 0.0];
    assert_eq!(similar_groups(&cands(&bad), None, 0.9), Err(CompressError::NonFiniteVector { id: 1 }));
    let mut bad = ok.clone();
    bad[1].0 = 1;
    assert_eq!(similar_groups(&cands(&bad), None, 0.9), Err(CompressError::DuplicateId(1)));
    assert!(similar_groups(&cands(&ok), None, 1.5).unwrap_err().to_string().contains("threshold"));
    assert!(similar_groups(&cands(&ok), None, f32::NAN).is_err());
    for s in Strategy::ALL {
        assert_eq!(format!("  {} ", s.as_str().to_uppercase()).parse::<Strategy>(), Ok(s));
    }
    let e = "x".repeat(100).parse::<Strategy>().unwrap_err();
    assert!(e.contains(&"x".repeat(40)) && !e.contains(&"x".repeat(41)) && e.contains("diversity, importance, temporal, hybrid"), "{e}");
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

    /// Diversity's passes visit experiences in this order: every experience once, grouped by cluster in
    /// ascending cluster order, ascending within a cluster (so a pass's result cannot depend on it).
    #[test]
    fn by_cluster_groups_every_experience_once(assign in prop::collection::vec(0u32..12, 0..200)) {
        let order = scale::by_cluster(&assign, 12);
        let mut seen = order.clone();
        seen.sort_unstable();
        prop_assert_eq!(seen, (0..assign.len() as u32).collect::<Vec<_>>());
        for w in order.windows(2) {
            let (a, b) = (assign[w[0] as usize], assign[w[1] as usize]);
            prop_assert!(a < b || (a == b && w[0] < w[1]));
        }
    }

    #[test]
    fn removals_are_well_formed_and_order_independent(
        raw in raws(60), dim in 1usize..=8, keep_frac in 0.0f64..=1.0, s in 0usize..4, seed in any::<u64>(),
        epoch in 0u64..40, decay in 0.0f64..1.0, shuffle in any::<u64>(),
    ) {
        let spec = build(&raw, dim);
        let keep = ((spec.len() + 2) as f64 * keep_frac) as usize;
        let params = Params { decay, seed, ..Params::default() };
        let c = cands(&spec);
        let r = removals(&c, None, keep, Strategy::ALL[s], epoch, &params).expect("valid input");
        prop_assert_eq!(r.len(), spec.len().saturating_sub(keep));
        prop_assert!(r.windows(2).all(|w| w[0] < w[1]));
        prop_assert!(r.iter().all(|id| spec.iter().any(|x| x.0 == *id)));
        let mut shuffled = c.clone();
        shuffled.shuffle(&mut ChaCha8Rng::seed_from_u64(shuffle));
        prop_assert_eq!(&removals(&shuffled, None, keep, Strategy::ALL[s], epoch, &params).expect("valid"), &r);
        prop_assert_eq!(&removals(&c, None, keep, Strategy::ALL[s], epoch, &params).expect("valid"), &r);
    }

    #[test]
    fn hybrid_matches_naive_recomputation(raw in raws(30), dim in 1usize..=3, keep in 0usize..30, epoch in 0u64..40) {
        let spec = build(&raw, dim);
        let r = removals(&cands(&spec), None, keep, Strategy::Hybrid, epoch, &Params::default()).expect("valid input");
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
        let groups = similar_groups(&cands(&spec), None, threshold).expect("valid input");
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
                let r = removals(&c, None, keep, s, 60, &Params::default()).expect("valid");
                println!("n={n} keep={keep} {s}: {:.3}s ({} removed)", t.elapsed().as_secs_f64(), r.len());
            }
        }
        let t = std::time::Instant::now();
        let g = similar_groups(&c, None, 0.9).expect("valid");
        println!("n={n} similar_groups: {:.3}s ({} groups)", t.elapsed().as_secs_f64(), g.len());
    }
}

// The graph path (over the limit, with a space holding a graph).

/// Clustered unit vectors, rounded to half precision as a bank holds them (row-major).
fn clustered(n: usize, dim: usize, clusters: usize, spread: f32, seed: u64) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let centres: Vec<Vec<f32>> = (0..clusters.max(1)).map(|_| (0..dim).map(|_| rng.random_range(-1.0f32..1.0)).collect()).collect();
    let mut out = Vec::with_capacity(n * dim);
    for _ in 0..n {
        let c = &centres[rng.random_range(0..centres.len())];
        let v: Vec<f32> = c.iter().map(|x| x + if spread > 0.0 { rng.random_range(-spread..spread) } else { 0.0 }).collect();
        out.extend(unit(&v));
    }
    crate::memory::half::round(&mut out);
    out
}

/// M₀ over `rows` with a graph built on one thread (the same graph every run).
fn base_over(rows: &[f32], dim: usize) -> crate::memory::BaseMemory {
    use crate::memory::{IndexConfig, IndexMode, MemoryId, MemoryRecord, MemoryType};
    let records = (0..rows.len() / dim)
        .map(|i| MemoryRecord {
            id: MemoryId(i as u32),
            text: String::new(),
            memory_type: MemoryType::Procedural,
            speaker: None,
            session: None,
            session_date: None,
            evidence: Vec::new(),
            source: String::new(),
            created_step: 0,
            authored: false,
        })
        .collect();
    let config = IndexConfig { mode: IndexMode::Hnsw, parallel_build: false, ..IndexConfig::default() };
    let half = crate::memory::vectors::narrowed(rows);
    crate::memory::BaseMemory::build_half("test".into(), records, half, dim, config, None)
}

fn space_of(base: &crate::memory::BaseMemory) -> Space<'_> {
    Space { rows: base.rows(), dim: base.dim(), graph: base.graph(), huge_pages: true }
}

/// A bank's candidates over `rows`: row `i` is experience `G(i·2+1)` unless `deleted`; every `own`-th one
/// was rewritten since the graph was built (it carries its own vector, its row is no one's).
fn bank_candidates(rows: &[f32], dim: usize, deleted: usize, own: usize, seed: u64) -> Vec<Candidate<'_>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..rows.len() / dim)
        .filter(|i| deleted == 0 || i % deleted != deleted - 1)
        .map(|i| Candidate {
            id: i as u64 * 2 + 1,
            confidence: rng.random_range(0.0..=1.0),
            created_epoch: rng.random_range(0..20),
            last_used_epoch: None,
            vector: if own > 0 && i % own == 0 {
                Vector::Own(std::borrow::Cow::Borrowed(&rows[i * dim..(i + 1) * dim]))
            } else {
                Vector::Row(i as u32)
            },
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Over the limit, diversity and hybrid read the graph: the removals are as many as asked, distinct
    /// input ids, and the same whatever the input order; MergeSimilar's groups only join pairs at or above
    /// the threshold, so each one lies inside a group of the exact grouping.
    #[test]
    fn the_graph_path_is_well_formed_and_order_independent(
        n in 40usize..220, clusters in 1usize..12, keep_frac in 0.0f64..=1.0, s in 0usize..2, seed in any::<u64>(),
        deleted in prop::sample::select(vec![0usize, 3, 7]), own in prop::sample::select(vec![0usize, 5, 40]),
        threshold in 0.5f32..=1.0, shuffle in any::<u64>(),
    ) {
        let dim = 8;
        let rows = clustered(n, dim, clusters, 0.3, seed);
        let base = base_over(&rows, dim);
        let c = bank_candidates(&rows, dim, deleted, own, seed);
        let keep = ((c.len() + 2) as f64 * keep_frac) as usize;
        let strategy = [Strategy::Diversity, Strategy::Hybrid][s];
        let params = Params { seed, ..Params::default() };
        let r = removals(&c, Some(space_of(&base)), keep, strategy, 20, &Params { exact_limit: 0, ..params }).expect("valid input");
        prop_assert_eq!(r.len(), c.len().saturating_sub(keep));
        prop_assert!(r.windows(2).all(|w| w[0] < w[1]));
        prop_assert!(r.iter().all(|id| c.iter().any(|x| x.id == *id)));
        let mut shuffled = c.clone();
        shuffled.shuffle(&mut ChaCha8Rng::seed_from_u64(shuffle));
        prop_assert_eq!(&removals(&shuffled, Some(space_of(&base)), keep, strategy, 20, &Params { exact_limit: 0, ..params }).expect("valid"), &r);

        let near = similar_groups_over(&c, Some(space_of(&base)), threshold, 0).expect("valid");
        let exact = similar_groups_over(&c, Some(space_of(&base)), threshold, usize::MAX).expect("valid");
        for g in &near {
            prop_assert!(g.len() >= 2 && g.windows(2).all(|w| w[0] < w[1]));
            prop_assert!(exact.iter().any(|e| g.iter().all(|id| e.contains(id))), "group {:?} is not inside an exact group", g);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Diversity's Lloyd passes skip an experience only while its bounds prove its cluster still wins: the
    /// same removals as comparing every experience with every candidate in every pass, with vectors kept
    /// in the bank's rows (half precision) and the library's own, of any length.
    #[test]
    fn diversitys_bounds_skip_only_what_a_full_pass_would_keep(
        n in 40usize..260, clusters in 1usize..16, spread in prop::sample::select(vec![0.03f32, 0.05, 0.1, 0.2, 0.4]), keep_frac in 0.02f64..0.5, seed in any::<u64>(),
        own in prop::sample::select(vec![0usize, 4, 30]), deleted in prop::sample::select(vec![0usize, 5]),
        scale in prop::sample::select(vec![1.0f32, 0.5, 1.7]),
    ) {
        let dim = 12;
        let mut rows = clustered(n, dim, clusters, spread, seed);
        let base = base_over(&rows, dim);
        // The library's own vectors may be longer or shorter than the bank's unit rows.
        rows.iter_mut().for_each(|x| *x *= scale);
        let c = bank_candidates(&rows, dim, deleted, own, seed);
        let lib = Library::new(&c, Some(space_of(&base)), 0).expect("valid");
        let near = lib.neighbours(String::new).expect("a graph").expect("over the limit");
        let keep = ((c.len() as f64 * keep_frac) as usize).max(1);
        let params = Params { seed, kmeans_iterations: 30, ..Params::default() };
        prop_assert_eq!(
            scale::diversity_with(&lib, &near, keep, &params, true),
            scale::diversity_with(&lib, &near, keep, &params, false)
        );
    }
}

#[test]
fn the_graph_path_removes_one_of_each_duplicate_like_the_exact_path() {
    // 300 distinct experiences, then a copy of every tenth: hybrid's first 30 removals are one of each pair
    // (diversity ≈ 0: a half-precision unit vector's dot with itself is within 1e-3 of 1), whichever path
    // finds the pairs; confidences in [0.5, 1] keep the others' scores far above.
    let dim = 16;
    let mut rows = clustered(300, dim, 300, 0.5, 5);
    let copies: Vec<f32> = (0..30).flat_map(|i| rows[i * 10 * dim..(i * 10 + 1) * dim].to_vec()).collect();
    rows.extend(copies);
    let base = base_over(&rows, dim);
    let mut c = bank_candidates(&rows, dim, 0, 0, 9);
    for x in &mut c {
        x.confidence = 0.5 + x.confidence / 2.0;
    }
    let space = Some(space_of(&base));
    let graph = removals(&c, space, 300, Strategy::Hybrid, 0, &Params { exact_limit: 0, ..Params::default() }).expect("valid");
    let exact = removals(&c, space, 300, Strategy::Hybrid, 0, &Params { exact_limit: usize::MAX, ..Params::default() }).expect("valid");
    assert_eq!(graph, exact);
    let twin = |id: u64| if id > 600 { (id - 601) / 2 * 20 + 1 } else { id };
    let mut pairs: Vec<u64> = graph.iter().map(|&id| twin(id)).collect();
    pairs.sort_unstable();
    pairs.dedup();
    assert_eq!(pairs, (0..30).map(|i| i * 20 + 1).collect::<Vec<_>>(), "one removal per pair");
    // MergeSimilar finds every pair through the graph too.
    let groups = similar_groups_over(&c, space, 0.999, 0).expect("valid");
    assert_eq!(groups, similar_groups_over(&c, space, 0.999, usize::MAX).expect("valid"));
    assert_eq!(groups.len(), 30);
}

/// Mean over every experience of its best dot with a kept one: how well the kept ones cover the rest.
fn coverage(rows: &[f32], dim: usize, c: &[Candidate<'_>], removed: &[u64]) -> f64 {
    let kept: Vec<usize> = c.iter().filter(|x| removed.binary_search(&x.id).is_err()).map(|x| (x.id as usize - 1) / 2).collect();
    let row = |i: usize| &rows[i * dim..(i + 1) * dim];
    let all = (0..rows.len() / dim).map(|i| kept.iter().map(|&k| dot(row(i), row(k))).fold(f32::MIN, f32::max) as f64);
    all.sum::<f64>() / (rows.len() / dim) as f64
}

#[test]
fn the_graph_paths_diversity_covers_the_library_like_the_exact_path() {
    let (dim, n, keep) = (16, 3_000, 300);
    let rows = clustered(n, dim, 150, 0.4, 3);
    let base = base_over(&rows, dim);
    let c = bank_candidates(&rows, dim, 0, 0, 4);
    let space = Some(space_of(&base));
    let run =
        |s: Strategy, limit: usize| removals(&c, space, keep, s, 0, &Params { exact_limit: limit, ..Params::default() }).expect("valid");
    let graph = coverage(&rows, dim, &c, &run(Strategy::Diversity, 0));
    let exact = coverage(&rows, dim, &c, &run(Strategy::Diversity, usize::MAX));
    let blind = coverage(&rows, dim, &c, &run(Strategy::Importance, 0));
    println!("coverage: graph {graph:.4}, exact {exact:.4}, importance {blind:.4}");
    assert!(graph > blind, "graph {graph} importance {blind}");
    assert!(graph >= exact - 0.01, "graph {graph} exact {exact}");
}

/// Kept ids of a removal list.
fn kept_ids(c: &[Candidate<'_>], removed: &[u64]) -> std::collections::HashSet<u64> {
    c.iter().map(|x| x.id).filter(|id| removed.binary_search(id).is_err()).collect()
}

/// Mean over the kept experiences of their best dot with another kept one: how redundant they are.
fn redundancy(rows: &[f32], dim: usize, kept: &std::collections::HashSet<u64>) -> f64 {
    let rows_of: Vec<usize> = kept.iter().map(|&id| (id as usize - 1) / 2).collect();
    let row = |i: usize| &rows[i * dim..(i + 1) * dim];
    let best = |&i: &usize| rows_of.iter().filter(|&&j| j != i).map(|&j| dot(row(i), row(j))).fold(f32::MIN, f32::max) as f64;
    rows_of.iter().map(best).sum::<f64>() / rows_of.len() as f64
}

#[test]
#[ignore = "timing and agreement; run with --release --ignored --nocapture"]
fn graph_path_against_exact() {
    let (dim, n) = (384, 20_000);
    let rows = clustered(n, dim, n / 20, 0.5, 11);
    let t = std::time::Instant::now();
    let base = {
        use crate::memory::{IndexConfig, IndexMode};
        let first = base_over(&rows[..dim], dim).records()[0].clone();
        let records: Vec<_> =
            (0..n).map(|i| crate::memory::MemoryRecord { id: crate::memory::MemoryId(i as u32), ..first.clone() }).collect();
        let config = IndexConfig { mode: IndexMode::Hnsw, parallel_build: true, ..IndexConfig::default() };
        crate::memory::BaseMemory::build_half("t".into(), records, crate::memory::vectors::narrowed(&rows), dim, config, None)
    };
    println!("n={n}: graph built in {:.1} s", t.elapsed().as_secs_f64());
    let c = bank_candidates(&rows, dim, 0, 0, 12);
    let space = Some(space_of(&base));
    let keep = n / 10;
    let timed = |s: Strategy, seed: u64, limit: usize| {
        let t = std::time::Instant::now();
        let r = removals(&c, space, keep, s, 10, &Params { seed, exact_limit: limit, ..Params::default() }).expect("valid");
        (r, t.elapsed().as_secs_f64())
    };
    let (blind, _) = timed(Strategy::Importance, 0, 0);
    println!(
        "importance (blind to the vectors): coverage {:.4}, redundancy {:.4}",
        coverage(&rows, dim, &c, &blind),
        redundancy(&rows, dim, &kept_ids(&c, &blind))
    );
    for s in [Strategy::Diversity, Strategy::Hybrid] {
        let ((graph, tg), (exact, te)) = (timed(s, 0, 0), timed(s, 0, usize::MAX));
        let (a, b) = (kept_ids(&c, &graph), kept_ids(&c, &exact));
        println!(
            "{s} keep {keep}: graph {tg:.2} s, exact {te:.2} s; kept by both {:.3}; coverage graph {:.4} exact {:.4}; redundancy graph {:.4} exact {:.4}",
            a.intersection(&b).count() as f64 / keep as f64,
            coverage(&rows, dim, &c, &graph),
            coverage(&rows, dim, &c, &exact),
            redundancy(&rows, dim, &a),
            redundancy(&rows, dim, &b)
        );
        if s == Strategy::Diversity {
            let (other, _) = timed(s, 1, usize::MAX);
            println!(
                "  exact with seed 1 and with seed 0: kept by both {:.3}",
                kept_ids(&c, &other).intersection(&b).count() as f64 / keep as f64
            );
        }
    }
    for threshold in [0.8, 0.85] {
        let t = std::time::Instant::now();
        let g = similar_groups_over(&c, space, threshold, 0).expect("valid");
        let tg = t.elapsed().as_secs_f64();
        let e = similar_groups_over(&c, space, threshold, usize::MAX).expect("valid");
        let members = |g: &[Vec<u64>]| g.iter().map(Vec::len).sum::<usize>();
        println!(
            "MergeSimilar {threshold}: graph {tg:.2} s, {} groups of {} experiences; exact {} groups of {}",
            g.len(),
            members(&g),
            e.len(),
            members(&e)
        );
    }
}

#[test]
fn over_the_limit_without_a_graph_is_refused_not_compared_pair_by_pair() {
    let dim = 8;
    let rows = clustered(30, dim, 3, 0.3, 1);
    let c = bank_candidates(&rows, dim, 0, 0, 2);
    let no_graph = Some(Space { rows: VectorRows::Full(&rows), dim, graph: None, huge_pages: false });
    let over = Params { exact_limit: 20, ..Params::default() };
    for (s, refused) in [(Strategy::Diversity, true), (Strategy::Hybrid, true), (Strategy::Importance, false), (Strategy::Temporal, false)]
    {
        let r = removals(&c, no_graph, 10, s, 0, &over);
        assert_eq!(matches!(r, Err(CompressError::NoGraph { n: 30, .. })), refused, "{s}: {r:?}");
        if let Err(e) = r {
            assert!(e.to_string().starts_with(&format!("{s} compression over 30 experiences")), "{e}");
        }
        // At or under the limit, the exact path answers.
        assert_eq!(removals(&c, no_graph, 10, s, 0, &Params::default()).map(|r| r.len()), Ok(20));
    }
    let e = similar_groups_over(&c, no_graph, 0.9, 20).unwrap_err();
    assert!(matches!(e, CompressError::NoGraph { .. }) && e.to_string().starts_with("MergeSimilar over 30"), "{e}");
}
