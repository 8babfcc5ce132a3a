//! The in-memory library: drafts, applying them, and the engine index staying right through compaction.

use super::*;
use crate::embed::{EmbedService, HashEmbedder};

fn meta(dim: u32) -> BankMeta {
    BankMeta {
        name: "t".into(),
        kind: "experience".into(),
        uid: 1,
        version: 0,
        next_id: 0,
        epoch: 0,
        max_size: 100,
        embedder_name: "hash".into(),
        embedder_dim: dim,
        embedder_fingerprint: "f".into(),
        created_at: "2026-01-01T00:00:00Z".into(),
    }
}

fn exp(id: u64, text: &str) -> Experience {
    Experience { id, text: text.into(), confidence: 0.5, domain: "general".into(), created_epoch: 0, usage_count: 0, last_used_epoch: None }
}

#[test]
fn a_draft_sees_its_own_changes_and_counts_what_it_leaves() {
    let embed = EmbedService::new(Arc::new(HashEmbedder::default()), 1);
    let dim = embed.dim();
    let mut lib = Library::build(meta(dim as u32), Rows::with_capacity(dim, 0), &IndexConfig::default());
    let mut d = Draft::of(&lib);
    let a = d.allocate();
    d.put(exp(a, "alpha"));
    let b = d.allocate();
    d.put(exp(b, "beta"));
    d.delete(a);
    assert_eq!((d.get(&lib, a), d.get(&lib, b).map(|e| e.text.as_str())), (None, Some("beta")));
    assert_eq!(d.len_after(&lib), 1);
    let vs = embed.embed_blocking(&["beta"]).unwrap();
    let m = BankMeta { version: 1, next_id: d.next_id, ..lib.meta().clone() };
    lib.apply(d, &vs, m);
    assert_eq!(lib.iter().map(|e| e.id).collect::<Vec<_>>(), vec![1]);
    assert_eq!(lib.meta().next_id, 2);
}

#[test]
fn compaction_keeps_every_search_result() {
    let embed = EmbedService::new(Arc::new(HashEmbedder::default()), 1);
    let dim = embed.dim();
    let mut lib = Library::build(meta(dim as u32), Rows::with_capacity(dim, 0), &IndexConfig::default());
    let texts: Vec<String> = (0..1_500).map(|i| format!("experience number {i} about topic {}", i % 37)).collect();
    let mut d = Draft::of(&lib);
    for t in &texts {
        let id = d.allocate();
        d.put(exp(id, t));
    }
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let vs = embed.embed_blocking(&refs).unwrap();
    let m = BankMeta { version: 1, next_id: d.next_id, ..lib.meta().clone() };
    // 1,500 additions cross the compaction threshold: the rebuild is claimed once.
    lib.apply(d, &vs, m);
    assert!(lib.claim_compaction());
    assert!(!lib.claim_compaction(), "claimed once");
    lib.compact();
    assert_eq!(lib.overlay(), 0, "compacted into the base");
    let q = embed.embed_blocking(&["topic 5"]).unwrap().remove(0);
    let (before, _) = lib.retrieve(&q, 10, None, None, false);
    let mut d = Draft::of(&lib);
    d.delete(5);
    lib.apply(d, &[], BankMeta { version: 2, ..lib.meta().clone() });
    lib.compact();
    let (after, _) = lib.retrieve(&q, 10, None, None, false);
    let want: Vec<u64> = before.iter().map(|h| h.exp.id).filter(|id| *id != 5).collect();
    assert_eq!(after.iter().map(|h| h.exp.id).take(want.len()).collect::<Vec<_>>(), want);
    assert_eq!(lib.vector(7).map(|v| v.len()), Some(dim));
}

/// Random unit rows (dimension 8) for experiences `ids`, text "e{id}" (or "e{id}'" when rewritten).
fn stored(ids: impl Iterator<Item = u64>, salt: u64) -> Vec<StoredExperience> {
    use rand::{Rng, SeedableRng};
    ids.map(|id| {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(id * 31 + salt);
        let mut v: Vec<f32> = (0..8).map(|_| rng.random_range(-1.0f32..1.0)).collect();
        crate::util::vector::normalize(&mut v);
        // As a store gives rows back: at half precision.
        crate::memory::half::round(&mut v);
        let text = if salt == 0 { format!("e{id}") } else { format!("e{id}'") };
        StoredExperience { exp: exp(id, &text), vector: v }
    })
    .collect()
}

/// `stored` as a store loads rows.
fn rows(stored: Vec<StoredExperience>) -> Rows {
    Rows::from_stored(8, stored)
}

fn graph_config() -> IndexConfig {
    IndexConfig { mode: crate::memory::IndexMode::Hnsw, ..IndexConfig::default() }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

    /// A library opened on a saved index of an older version, with the changes since (deletes,
    /// rewrites with new vectors, additions), holds exactly the current rows, answers only with them
    /// (never a deleted or stale experience), and finds every live row by its own vector.
    #[test]
    fn a_saved_index_caught_up_from_the_change_log_holds_exactly_the_current_rows(
        n in 1u64..80, deleted in proptest::collection::hash_set(0u64..80, 0..20),
        rewritten in proptest::collection::hash_set(0u64..80, 0..20), added in 0u64..30,
    ) {
        let old = Library::build(BankMeta { version: 3, ..meta(8) }, rows(stored(0..n, 0)), &graph_config());
        let bytes = old.saved_index().expect("a built graph is saved");
        let now = BankMeta { version: 9, next_id: n + added, ..meta(8) };
        let saved = crate::banks::saved_index::decode(&bytes, &now).expect("decodes");
        let deleted: std::collections::HashSet<u64> = deleted.into_iter().filter(|d| *d < n).collect();
        let rewritten: std::collections::HashSet<u64> = rewritten.into_iter().filter(|r| *r < n && !deleted.contains(r)).collect();
        let mut stored_rows: Vec<StoredExperience> = stored((0..n).filter(|i| !deleted.contains(i) && !rewritten.contains(i)), 0);
        stored_rows.extend(stored(rewritten.iter().copied(), 1));
        stored_rows.extend(stored(n..n + added, 0));
        let changed: std::collections::HashSet<u64> = deleted.iter().chain(&rewritten).copied().chain(n..n + added).collect();
        let lib = Library::open_saved(now, rows(stored_rows.clone()), saved, &changed, &graph_config()).map_err(|(e, _)| e).expect("opens");
        proptest::prop_assert_eq!(lib.origin(), IndexOrigin::Saved { version: 3, changed: changed.len() });
        let mut want: Vec<(u64, String)> = stored_rows.iter().map(|r| (r.exp.id, r.exp.text.clone())).collect();
        want.sort();
        proptest::prop_assert_eq!(lib.iter().map(|e| (e.id, e.text.clone())).collect::<Vec<_>>(), want);
        for r in &stored_rows {
            // Each row keeps its own vector, whether the rows' buffer became the engine's (nothing changed
            // since the saved version) or each node's row was copied.
            proptest::prop_assert_eq!(lib.vector(r.exp.id).map(|v| v.to_vec()), Some(r.vector.clone()));
            let (hits, _) = lib.retrieve(&r.vector, 3, None, None, false);
            proptest::prop_assert!(hits.iter().all(|h| lib.get(h.exp.id) == Some(&h.exp)), "only current rows");
            proptest::prop_assert!(hits.iter().any(|h| h.exp.id == r.exp.id), "{} found by its own vector", r.exp.id);
        }
    }
}

#[test]
fn a_saved_index_the_change_log_does_not_explain_is_refused() {
    let old = Library::build(BankMeta { version: 2, ..meta(8) }, rows(stored(0..40, 0)), &graph_config());
    let bytes = old.saved_index().expect("saved");
    let now = BankMeta { version: 5, ..meta(8) };
    let decode = || crate::banks::saved_index::decode(&bytes, &now).expect("decodes");
    // G7 is gone, and no change says so.
    let kept = rows(stored((0..40).filter(|i| *i != 7), 0));
    let refused = Library::open_saved(now.clone(), kept.clone(), decode(), &Default::default(), &graph_config());
    let (why, back) = refused.expect_err("refused");
    assert!(why.to_string().contains("G7 is gone"), "{why}");
    assert_eq!(back.len(), 39, "the rows come back to be built from");
    // G40 appeared, and no change says so.
    let refused = Library::open_saved(now.clone(), rows(stored(0..41, 0)), decode(), &Default::default(), &graph_config());
    assert!(refused.expect_err("refused").0.to_string().contains("G40 has no node"));
    // With the change, both open.
    let changed = [7u64].into_iter().collect();
    assert_eq!(Library::open_saved(now.clone(), kept, decode(), &changed, &graph_config()).map_err(|e| e.0).unwrap().len(), 39);
    // Saved bytes of another bank, another dimension or a later version are refused whole.
    for (other, want) in [
        (BankMeta { uid: 2, ..now.clone() }, "uid"),
        (BankMeta { embedder_dim: 16, ..now.clone() }, "dimension"),
        (BankMeta { version: 1, ..now.clone() }, "version 2, the bank is at 1"),
    ] {
        let e = crate::banks::saved_index::decode(&bytes, &other).expect_err("refused");
        assert!(e.to_string().contains(want), "{want}: {e}");
    }
    // Every one-byte change is caught by the checksum.
    for at in [0, 9, 20, 40, bytes.len() / 2, bytes.len() - 1] {
        let mut bad = bytes.clone();
        bad[at] ^= 0x10;
        assert!(matches!(crate::banks::saved_index::decode(&bad, &now), Err(Unusable::Damaged(_))), "byte {at}");
    }
    assert!(matches!(crate::banks::saved_index::decode(&bytes[..bytes.len() / 2], &now), Err(Unusable::Damaged(_))));
}

/// A background rebuild stops once the library it started from is dropped (its bank deleted or replaced):
/// dropping a library sets the flag its rebuilds hold, and a build that sees the flag set gives up before
/// its graph instead of building it. With the flag clear, the same rows build the same library.
#[test]
fn a_rebuild_whose_library_is_dropped_is_abandoned() {
    let lib = Library::build(meta(8), rows(stored(0..300, 0)), &graph_config());
    let abandoned = lib.abandoned();
    assert!(!abandoned.load(std::sync::atomic::Ordering::SeqCst), "a held library's rebuilds go on");
    let (m, r) = lib.snapshot();
    drop(lib);
    assert!(abandoned.load(std::sync::atomic::Ordering::SeqCst), "dropping the library abandons its rebuilds");
    assert!(Library::build_unless(m.clone(), r.clone(), &graph_config(), &abandoned).is_none(), "an abandoned build stops");
    let built =
        Library::build_unless(m, r, &graph_config(), &std::sync::atomic::AtomicBool::new(false)).expect("a build nobody abandons ends");
    assert_eq!(built.len(), 300);
    assert!(built.saved_index().is_some(), "with its graph");
}
