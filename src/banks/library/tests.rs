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
    let mut lib = Library::build(meta(dim as u32), Vec::new(), &IndexConfig::default());
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
    let mut lib = Library::build(meta(dim as u32), Vec::new(), &IndexConfig::default());
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
    assert_eq!(lib.vector(7).map(<[f32]>::len), Some(dim));
}
