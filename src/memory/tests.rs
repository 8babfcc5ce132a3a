//! Index correctness: exact search against a naive reference, HNSW recall against exact, overlay
//! semantics (tombstones, updates, additions).

use std::sync::Arc;

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::util::vector::{dot, normalize};

fn record(i: u32, speaker: &str, session: u32) -> MemoryRecord {
    MemoryRecord {
        id: MemoryId(i),
        text: format!("memory number {i}"),
        memory_type: if i.is_multiple_of(3) { MemoryType::Semantic } else { MemoryType::Episodic },
        speaker: Some(speaker.to_string()),
        session: Some(session),
        session_date: None,
        evidence: vec![format!("D{session}:{i}")],
        source: "test".into(),
        created_step: 0,
        authored: false,
    }
}

/// `n` unit vectors around `clusters` centres (sentence embeddings cluster; uniform noise is HNSW's worst case).
fn clustered(n: usize, dim: usize, clusters: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let centres: Vec<Vec<f32>> = (0..clusters).map(|_| (0..dim).map(|_| rng.random_range(-1.0f32..1.0)).collect()).collect();
    (0..n)
        .map(|_| {
            let c = &centres[rng.random_range(0..clusters)];
            let mut v: Vec<f32> = c.iter().map(|x| x + rng.random_range(-0.6f32..0.6)).collect();
            normalize(&mut v);
            v
        })
        .collect()
}

fn base(vectors: &[Vec<f32>], mode: IndexMode) -> Arc<BaseMemory> {
    let dim = vectors[0].len();
    let records = (0..vectors.len() as u32).map(|i| record(i, if i % 2 == 0 { "Ann" } else { "Bob" }, i % 7)).collect();
    Arc::new(BaseMemory::build("t".into(), records, vectors.concat(), dim, IndexConfig { mode, ..IndexConfig::default() }))
}

/// Naive reference: score everything live, sort by (score desc, id asc).
fn naive(mem: &EpisodeMemory, q: &[f32], k: usize, f: &Filter) -> Vec<(MemoryId, f32)> {
    let mut all: Vec<(MemoryId, f32)> = mem.iter().filter(|(r, _)| f.matches(r)).map(|(r, v)| (r.id, dot(q, &v))).collect();
    all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    all.truncate(k);
    all
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn exact_matches_naive_reference(
        n in 1usize..120, seed in any::<u64>(), k in 1usize..20,
        deletes in prop::collection::vec(any::<prop::sample::Index>(), 0..30),
        adds in 0usize..10, speaker in prop::option::of(prop::bool::ANY), session in prop::option::of(0u32..7),
    ) {
        let vs = clustered(n + adds + 1, 16, 4, seed);
        let b = base(&vs[..n], IndexMode::Exact);
        let mut mem = EpisodeMemory::new(b);
        for d in &deletes {
            let id = MemoryId(d.index(n) as u32);
            mem.remove(id);
        }
        for a in 0..adds {
            let id = mem.allocate_id();
            mem.insert(record(id.0, "Ann", 3), &vs[n + a]);
        }
        let filter = Filter { memory_type: None, speaker: speaker.map(|s| if s { "ann".into() } else { "bob".into() }), session, source: None };
        let q = &vs[n + adds];
        let (got, path) = mem.search(q, k, &filter, None);
        prop_assert_eq!(path, SearchPath::Exact);
        let got: Vec<(MemoryId, f32)> = got.iter().map(|s| (s.record.id, s.score)).collect();
        prop_assert_eq!(got, naive(&mem, q, k, &filter));
    }
}

#[test]
fn hnsw_recall_matches_exact_at_our_sizes() {
    // |M₀| is 169–324 per LoCoMo conversation; test up to 3× that.
    for (n, seed) in [(200usize, 1u64), (324, 2), (1000, 3)] {
        let vs = clustered(n + 50, 64, 12, seed);
        let hnsw = EpisodeMemory::new(base(&vs[..n], IndexMode::Hnsw));
        let exact = EpisodeMemory::new(base(&vs[..n], IndexMode::Exact));
        let (mut found, mut wanted) = (0usize, 0usize);
        for q in &vs[n..] {
            let (h, path) = hnsw.search(q, 10, &Filter::default(), None);
            assert_eq!(path, SearchPath::Hnsw);
            let (e, _) = exact.search(q, 10, &Filter::default(), None);
            let truth: Vec<MemoryId> = e.iter().map(|s| s.record.id).collect();
            found += h.iter().filter(|s| truth.contains(&s.record.id)).count();
            wanted += truth.len();
        }
        let recall = found as f64 / wanted as f64;
        assert!(recall >= 0.99, "recall@10 {recall} at n={n}");
    }
}

#[test]
fn hnsw_skips_tombstones_and_rescoring_is_exact() {
    let vs = clustered(300, 32, 6, 9);
    let mut mem = EpisodeMemory::new(base(&vs[..250], IndexMode::Hnsw));
    let q = &vs[260];
    let (before, _) = mem.search(q, 5, &Filter::default(), None);
    let dead: Vec<MemoryId> = before.iter().take(3).map(|s| s.record.id).collect();
    for id in &dead {
        assert!(mem.remove(*id).is_some());
    }
    let (after, path) = mem.search(q, 5, &Filter::default(), None);
    assert_eq!(path, SearchPath::Hnsw);
    assert!(after.iter().all(|s| !dead.contains(&s.record.id)));
    for s in &after {
        assert_eq!(s.score, dot(q, &mem.vector(s.record.id).unwrap()));
    }
    // A metadata filter goes to the exact scan.
    let (_, path) = mem.search(q, 5, &Filter { session: Some(2), ..Filter::default() }, None);
    assert_eq!(path, SearchPath::Exact);
}

#[test]
fn auto_mode_uses_the_threshold() {
    let vs = clustered(40, 8, 2, 4);
    let small = BaseMemory::build(
        "s".into(),
        (0..40).map(|i| record(i, "A", 1)).collect(),
        vs.concat(),
        8,
        IndexConfig { full_scan_threshold: 40, ..IndexConfig::default() },
    );
    assert!(!small.has_graph());
    let big = BaseMemory::build(
        "b".into(),
        (0..40).map(|i| record(i, "A", 1)).collect(),
        vs.concat(),
        8,
        IndexConfig { full_scan_threshold: 39, ..IndexConfig::default() },
    );
    assert!(big.has_graph());
}

#[test]
fn overlay_update_delete_and_ids() {
    let vs = clustered(12, 8, 2, 5);
    let b = base(&vs[..10], IndexMode::Exact);
    let chars0 = b.total_chars();
    let mut mem = EpisodeMemory::new(b.clone());
    assert_eq!((mem.len(), mem.peek_next_id()), (10, MemoryId(10)));
    // Update an M₀ record: same id, new text, M₀ itself untouched.
    let mut r = mem.get(MemoryId(3)).unwrap().clone();
    r.text = "rewritten".into();
    assert!(mem.replace(r, &vs[10]));
    assert_eq!(mem.get(MemoryId(3)).unwrap().text, "rewritten");
    assert_eq!(b.record(3).unwrap().text, "memory number 3");
    assert_eq!(mem.len(), 10);
    // The overlay keeps the vector in half precision: the rounding M₀'s own vectors get.
    let mut want = vs[10].clone();
    crate::memory::half::round(&mut want);
    assert_eq!(mem.vector(MemoryId(3)).unwrap().as_ref(), &want[..]);
    // Delete, then ids keep growing: never reused.
    assert!(mem.remove(MemoryId(3)).is_some());
    assert!(mem.remove(MemoryId(3)).is_none());
    assert!(mem.get(MemoryId(3)).is_none());
    let id = mem.allocate_id();
    mem.insert(record(id.0, "Ann", 1), &vs[11]);
    assert_eq!(id, MemoryId(10));
    assert_eq!(mem.allocate_id(), MemoryId(11));
    assert_eq!(mem.len(), 10);
    let expected_chars = chars0 - "memory number 3".len() + "memory number 10".len();
    assert_eq!(mem.total_chars(), expected_chars);
    // A fresh episode on the same M₀ sees none of it.
    let other = EpisodeMemory::new(b);
    assert_eq!(other.get(MemoryId(3)).unwrap().text, "memory number 3");
    assert_eq!(other.len(), 10);
}

/// conv's M₀ as a base (hybrid or dense), its questions and the hash embedder (also the fixture of
/// `eval::bm25`'s test that the served fusion is the evaluated one).
pub(crate) fn locomo_base(conv: &str, hybrid: bool) -> (Arc<BaseMemory>, Vec<crate::dataset::Question>, crate::embed::EmbedService) {
    let ds = crate::dataset::Dataset::load(None).unwrap();
    let embed = crate::embed::EmbedService::new(Arc::new(crate::embed::HashEmbedder::default()), 1);
    let records = crate::episode::initial_records(ds.memories_of(conv));
    let cfg = IndexConfig { hybrid, ..IndexConfig::default() };
    let base = crate::episode::build_base(&embed, conv.into(), records, &cfg).unwrap();
    let qs = ds.questions.iter().filter(|q| q.conversation_id == conv).cloned().collect();
    (Arc::new(base), qs, embed)
}

#[test]
fn hybrid_search_follows_edits_filters_and_thresholds() {
    let (base, _, embed) = locomo_base("conv-30", true);
    let mut mem = EpisodeMemory::new(base);
    let q = "zanzibar kite festival";
    let qv = embed.embed_blocking(&[q]).unwrap().remove(0);
    let (top, _) = mem.search_text(&qv, q, 3, &Filter::default(), None);
    let victim = top[0].record.id;
    mem.remove(victim);
    let id = mem.allocate_id();
    let text = "Gina flew a kite at the Zanzibar kite festival.";
    let v = embed.embed_blocking(&[text]).unwrap().remove(0);
    mem.insert(MemoryRecord { id, text: text.into(), ..record(id.0, "Gina", 999) }, &v);
    let (after, _) = mem.search_text(&qv, q, 3, &Filter::default(), None);
    assert_eq!(after[0].record.id, id, "the added memory matches both ways");
    assert!(after.iter().all(|s| s.record.id != victim));
    let (only, _) = mem.search_text(&qv, q, 10, &Filter { session: Some(999), ..Filter::default() }, None);
    assert_eq!(only.iter().map(|s| s.record.id).collect::<Vec<_>>(), vec![id]);
    let (high, _) = mem.search_text(&qv, q, 10, &Filter::default(), Some(0.99));
    assert!(high.is_empty());
}

/// A bank's background build stops before its graph once abandoned, and builds it otherwise.
#[test]
fn an_abandoned_build_stops_before_its_graph() {
    let dim = 16;
    let vs = clustered(600, dim, 6, 11);
    let records: Vec<MemoryRecord> = (0..vs.len() as u32).map(|i| record(i, "a", 1)).collect();
    let half = crate::memory::vectors::narrowed(&vs.concat());
    let config = IndexConfig { mode: IndexMode::Hnsw, ..IndexConfig::default() };
    let stop = std::sync::atomic::AtomicBool::new(true);
    assert!(BaseMemory::build_half_unless("t".into(), records.clone(), half.clone(), dim, config.clone(), &stop).is_none());
    stop.store(false, std::sync::atomic::Ordering::SeqCst);
    let built = BaseMemory::build_half_unless("t".into(), records, half, dim, config, &stop).expect("not abandoned");
    assert!(built.has_graph() && built.len() == 600);
}
