//! The banks on a real SQLite file in a temporary directory, with the hash embedder: the seeds'
//! semantics, versions, persistence across a reopen, and the refusals.

use std::sync::Arc;

use super::compress::{Params, Strategy};
use super::experience::NewFields;
use super::formats::Format;
use super::semantic::Query;
use super::store::sqlite::SqliteStore;
use super::*;
use crate::embed::{EmbedService, HashEmbedder};

fn banks_in(dir: &std::path::Path, embed: EmbedService, config: BanksConfig) -> Banks {
    Banks::new(Arc::new(SqliteStore::open(dir).expect("the store opens")), embed, None, config)
}

fn hash() -> EmbedService {
    EmbedService::new(Arc::new(HashEmbedder::default()), 2)
}

/// Banks in a SQLite file under `dir`, the hash embedder, `llm` and the default settings (for the
/// tests of `agent/` and `learn/` too).
pub(super) fn banks_with_llm(dir: &std::path::Path, llm: Option<Arc<crate::llm::Llm>>) -> Banks {
    Banks::new(Arc::new(SqliteStore::open(dir).expect("the store opens")), hash(), llm, BanksConfig::default())
}

fn fresh() -> (tempfile::TempDir, Banks) {
    let dir = tempfile::tempdir().unwrap();
    let banks = banks_in(dir.path(), hash(), BanksConfig::default());
    (dir, banks)
}

fn add(text: &str) -> (String, NewFields) {
    (text.to_string(), NewFields::default())
}

async fn texts(b: &Banks, bank: &str) -> Vec<(u64, String)> {
    b.read(bank, |lib| lib.iter().map(|e| (e.id, e.text.clone())).collect()).await.unwrap()
}

#[tokio::test]
async fn ids_count_up_from_g0_and_are_never_reused_even_after_a_reopen() {
    let (dir, b) = fresh();
    b.create("lib", Kind::Experience, None, false).await.unwrap();
    for (i, t) in ["verify by substitution", "check boundary conditions", "use conditional probability"].iter().enumerate() {
        let (t, f) = add(t);
        let (e, meta) = b.add("lib", &t, f, None).await.unwrap();
        assert_eq!((e.id, meta.version), (i as u64, i as u64 + 1));
    }
    b.delete_experience("lib", "G2", None).await.unwrap();
    drop(b);
    let b = banks_in(dir.path(), hash(), BanksConfig::default());
    let (e, meta) = b.add("lib", "a fourth", NewFields::default(), None).await.unwrap();
    assert_eq!(show_id(e.id), "G3", "G2 was deleted but its id is not issued again");
    assert_eq!(meta.version, 5);
    assert_eq!(b.format_all("lib").await.unwrap().0, "[G0]. verify by substitution\n[G1]. check boundary conditions\n[G3]. a fourth");
    // A fresh server lists the sizes from the database (the deleted G2 not counted) without loading a bank.
    drop(b);
    let b = banks_in(dir.path(), hash(), BanksConfig::default());
    b.create("empty", Kind::Experience, None, false).await.unwrap();
    let list: Vec<(String, usize)> = b.list().await.unwrap().into_iter().map(|(m, n)| (m.name, n)).collect();
    assert_eq!(list, [("empty".to_string(), 0), ("lib".to_string(), 3)]);
    assert!(b.handle("lib").read().await.is_none(), "listing loaded no bank");
}

#[tokio::test]
async fn modify_delete_and_merge_follow_seed_001() {
    let (_dir, b) = fresh();
    b.create("lib", Kind::Experience, None, false).await.unwrap();
    for t in ["alpha rule", "beta rule", "gamma rule"] {
        b.add("lib", t, NewFields { confidence: Some(0.3), domain: Some("math".into()), epoch: None }, None).await.unwrap();
    }
    let (e, _) = b.modify("lib", "g1", "beta rule, revised", None, None, None).await.unwrap();
    assert_eq!((e.id, e.text.as_str(), e.confidence, e.domain.as_str()), (1, "beta rule, revised", 0.3, "math"));
    assert!(matches!(b.modify("lib", "G9", "x", None, None, None).await, Err(BankError::ExperienceNotFound { .. })));
    assert!(matches!(b.delete_experience("lib", "G9", None).await, Err(BankError::ExperienceNotFound { .. })));
    let (m, meta) = b.merge("lib", &["G0".into(), "G2".into()], "alpha and gamma", None, None, None).await.unwrap();
    assert_eq!((m.id, m.confidence, m.domain.as_str()), (3, 0.3, "math"));
    assert_eq!(texts(&b, "lib").await, vec![(1, "beta rule, revised".into()), (3, "alpha and gamma".into())]);
    assert_eq!(meta.version, 5);
    // Refusals change nothing and do not bump the version.
    let e = b.merge("lib", &["G1".into()], "one", None, None, None).await.unwrap_err();
    assert!(e.to_string().contains("ids"), "{e}");
    let e = b.merge("lib", &["G1".into(), "G1".into()], "twice", None, None, None).await.unwrap_err();
    assert!(e.to_string().contains("ids[1]"), "{e}");
    let e = b.merge("lib", &["G1".into(), "G0".into()], "gone", None, None, None).await.unwrap_err();
    assert!(matches!(&e, BankError::ExperienceNotFound { field, .. } if field == "ids[1]"), "{e}");
    assert_eq!(b.read("lib", |l| l.meta().version).await.unwrap(), 5);
}

#[tokio::test]
async fn expected_version_guards_every_write() {
    let (_dir, b) = fresh();
    b.create("lib", Kind::Experience, None, false).await.unwrap();
    b.add("lib", "one", NewFields::default(), Some(0)).await.unwrap();
    let e = b.add("lib", "two", NewFields::default(), Some(0)).await.unwrap_err();
    assert!(matches!(e, BankError::VersionConflict { expected: 0, current: 1, .. }), "{e}");
    assert_eq!(texts(&b, "lib").await.len(), 1, "a conflicting write changes nothing");
    b.add("lib", "two", NewFields::default(), Some(1)).await.unwrap();
    assert!(matches!(b.delete("lib", Some(0)).await, Err(BankError::VersionConflict { .. })));
    b.delete("lib", Some(2)).await.unwrap();
    assert!(matches!(b.read("lib", |l| l.len()).await, Err(BankError::BankNotFound { .. })));
}

#[tokio::test]
async fn apply_operations_reads_both_vocabularies_atomically() {
    let (_dir, b) = fresh();
    b.create("lib", Kind::Experience, None, false).await.unwrap();
    for t in ["e0", "e1", "e2", "e3", "e4", "e5"] {
        b.add("lib", t, NewFields::default(), None).await.unwrap();
    }
    let seed = r#"[{"option": "add", "experience": "When solving, verify."},
                   {"option": "modify", "experience": "Updated.", "modified_from": "G1"},
                   {"option": "delete", "delete_id": "G5"},
                   {"option": "merge", "experience": "Merged.", "merged_from": ["G2", "G3"]},
                   {"option": "keep"}]"#;
    let (outs, meta) = b.apply_operations("lib", seed, false, false, None).await.unwrap();
    assert_eq!(meta.version, 7, "one batch is one write");
    let kinds: Vec<(&str, experience::OpStatus)> = outs.iter().map(|o| (o.kind, o.status)).collect();
    use experience::OpStatus::{Applied, Kept, NotFound};
    assert_eq!(kinds, [("add", Applied), ("modify", Applied), ("delete", Applied), ("merge", Applied), ("keep", Kept)]);
    assert_eq!(outs[0].id, Some(6));
    assert_eq!((outs[3].id, outs[3].removed.clone()), (Some(7), vec![2, 3]));
    assert_eq!(
        texts(&b, "lib").await,
        vec![(0, "e0".into()), (1, "Updated.".into()), (4, "e4".into()), (6, "When solving, verify.".into()), (7, "Merged.".into())]
    );

    // Upstream's vocabulary, with a DELETE that has no content (upstream dropped those).
    let upstream = r#"```json
[{"operation": "UPDATE", "id": "G0", "content": "e0 v2"}, {"operation": "DELETE", "id": "G4", "content": null}, {"operation": "NONE"}]
```"#;
    b.apply_operations("lib", upstream, false, false, None).await.unwrap();
    assert_eq!(texts(&b, "lib").await[0], (0, "e0 v2".into()));
    assert!(b.read("lib", |l| l.get(4).is_none()).await.unwrap());

    // Atomic: one op naming a missing id refuses the batch, naming index and field.
    let before = texts(&b, "lib").await;
    let bad = r#"[{"option": "add", "experience": "new"}, {"option": "delete", "delete_id": "G99"}]"#;
    let e = b.apply_operations("lib", bad, false, false, None).await.unwrap_err();
    assert!(matches!(&e, BankError::ExperienceNotFound { field, .. } if field == "operations[1].delete_id"), "{e}");
    let malformed = r#"[{"option": "add", "experience": "new"}, {"option": "merge", "merged_from": ["G1"], "experience": "x"}]"#;
    let e = b.apply_operations("lib", malformed, false, false, None).await.unwrap_err();
    assert!(e.to_string().contains("operations[1]"), "{e}");
    assert_eq!(texts(&b, "lib").await, before, "a refused batch changes nothing");

    // Partial: the usable ops apply, the others report.
    let (outs, _) = b.apply_operations("lib", bad, true, false, None).await.unwrap();
    assert_eq!(outs.iter().map(|o| o.status).collect::<Vec<_>>(), [Applied, NotFound]);
    assert!(outs[1].message.contains("operations[1].delete_id"), "{}", outs[1].message);

    // A dry run reports and writes nothing.
    let version = b.read("lib", |l| l.meta().version).await.unwrap();
    let (outs, meta) = b.apply_operations("lib", r#"[{"option":"add","experience":"dry"}]"#, false, true, None).await.unwrap();
    assert_eq!((outs[0].status, meta.version), (Applied, version));
    assert!(!texts(&b, "lib").await.iter().any(|(_, t)| t == "dry"));

    // A batch cut off mid-array applies nothing (not its first operation alone).
    let now = texts(&b, "lib").await;
    let cut = r#"[{"option": "add", "experience": "first"}, {"option": "add", "experience": "sec"#;
    let e = b.apply_operations("lib", cut, true, false, None).await.unwrap_err();
    assert!(matches!(&e, BankError::InvalidArgument(_)) && e.to_string().contains("cut off after 1"), "{e}");
    assert_eq!(texts(&b, "lib").await, now, "nothing of a cut batch is applied, even with partial");

    // Garbage from an LLM is a clear error, never a crash.
    let e = b.apply_operations("lib", "I think we should keep everything as is.", false, false, None).await.unwrap_err();
    assert!(e.to_string().contains("operations_json"), "{e}");
}

#[tokio::test]
async fn retrieval_ranks_by_similarity_counts_usage_and_filters_domains() {
    let (dir, b) = fresh();
    b.create("lib", Kind::Experience, None, false).await.unwrap();
    let math = NewFields { domain: Some("math".into()), confidence: Some(0.9), epoch: None };
    b.add("lib", "When solving equations, verify solutions by substitution.", math.clone(), None).await.unwrap();
    b.add("lib", "For optimization problems, check boundary conditions first.", math, None).await.unwrap();
    b.add(
        "lib",
        "When a web page fails to load, retry the search with other keywords.",
        NewFields { domain: Some("web".into()), ..NewFields::default() },
        None,
    )
    .await
    .unwrap();
    b.set_epoch("lib", 3, None).await.unwrap();
    let q = Query { text: "how do I verify the solutions of equations", top_k: 2, min_similarity: None, domain: None, count: true };
    let (hits, _) = b.retrieve("lib", q.clone()).await.unwrap();
    assert_eq!(hits[0].exp.id, 0, "{hits:?}");
    assert!(hits[0].similarity >= hits[1].similarity);
    let (web, _) = b.retrieve("lib", Query { domain: Some("web"), ..q.clone() }).await.unwrap();
    assert_eq!(web.iter().map(|h| h.exp.id).collect::<Vec<_>>(), vec![2]);
    b.retrieve("lib", Query { count: false, ..q.clone() }).await.unwrap();
    let used = b.read("lib", |l| l.with_usage(l.get(0).unwrap())).await.unwrap();
    assert_eq!((used.usage_count, used.last_used_epoch), (1, Some(3)), "read_only does not count");
    let stats = b.stats("lib").await.unwrap();
    assert_eq!((stats.total, stats.domains.get("math").copied(), stats.total_usage), (3, Some(2), 3));
    assert!((stats.avg_confidence - (0.9 + 0.9 + 0.5) / 3.0).abs() < 1e-12);
    // Usage reaches the database with the flush, and survives a reopen.
    b.flush_usage().await;
    drop(b);
    let b = banks_in(dir.path(), hash(), BanksConfig::default());
    let e = b.read("lib", |l| l.with_usage(l.get(0).unwrap())).await.unwrap();
    assert_eq!((e.usage_count, e.last_used_epoch), (1, Some(3)));
    // A modify keeps the usage.
    b.retrieve("lib", q).await.unwrap();
    let (e, _) = b.modify("lib", "G0", "Verify solutions by substituting them back.", None, None, None).await.unwrap();
    assert_eq!(b.read("lib", |l| l.with_usage(&e).usage_count).await.unwrap(), 2);
    b.flush_usage().await;
    drop(b);
    let b = banks_in(dir.path(), hash(), BanksConfig::default());
    assert_eq!(b.read("lib", |l| l.with_usage(l.get(0).unwrap()).usage_count).await.unwrap(), 2, "counted once, not twice");
    // The empty library and an empty query.
    b.create("empty", Kind::Experience, None, false).await.unwrap();
    assert!(b.retrieve("empty", Query { text: "", top_k: 5, min_similarity: None, domain: None, count: true }).await.unwrap().0.is_empty());
    assert_eq!(b.format_all("empty").await.unwrap().0, "");
}

#[tokio::test]
async fn compress_and_merge_similar_shrink_the_library() {
    let (_dir, b) = fresh();
    b.create("lib", Kind::Experience, Some(3), false).await.unwrap();
    for (t, c) in [
        ("verify by substitution", 0.9),
        ("verify by substitution", 0.2),
        ("check the boundary", 0.5),
        ("draw a diagram", 0.1),
        ("read twice", 0.7),
    ] {
        b.add("lib", t, NewFields { confidence: Some(c), ..NewFields::default() }, None).await.unwrap();
    }
    let (removed, left, meta) = b.compress("lib", None, Strategy::Importance, Params::default(), true, None).await.unwrap();
    assert_eq!((removed.clone(), left), (vec![1, 3], 3), "a dry run lists the two lowest and what would be left");
    let (again, left, after) = b.compress("lib", None, Strategy::Importance, Params::default(), false, Some(meta.version)).await.unwrap();
    assert_eq!((again, left, after.version), (removed, 3, meta.version + 1));
    // merge_similar: the exact duplicates merge.
    b.add("lib", "verify by substitution", NewFields::default(), None).await.unwrap();
    let (groups, _) = b.merge_similar("lib", 0.99, false, false, None).await.unwrap();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].sources, vec![0, 5]);
    assert_eq!(groups[0].new_id, Some(6));
    assert!(b.read("lib", |l| l.get(6).map(|e| e.confidence)).await.unwrap() == Some(0.9));
}

#[tokio::test]
async fn import_and_export_move_libraries_in_and_out() {
    let (_dir, b) = fresh();
    let seed = r#"{"experiences": {"G0": "first", "G2": "third", "G10": "eleventh"}, "next_id": 42}"#;
    let (n, meta) = b.import("lib", Format::Seed, seed, false, None).await.unwrap();
    assert_eq!((n, meta.next_id), (3, 42));
    let (e, _) = b.add("lib", "next", NewFields::default(), None).await.unwrap();
    assert_eq!(e.id, 42);
    let (out, _) = b.export("lib", Format::Seed).await.unwrap();
    assert_eq!(out, r#"{"experiences": {"G0": "first", "G2": "third", "G10": "eleventh", "G42": "next"}, "next_id": 43}"#);
    let (up, _) = b.export("lib", Format::Upstream).await.unwrap();
    assert_eq!(up, r#"{"G0": "first", "G2": "third", "G10": "eleventh", "G42": "next"}"#);
    // Into a non-empty bank only with replace; the counter never goes back.
    assert!(matches!(b.import("lib", Format::Upstream, r#"{"G0": "x"}"#, false, None).await, Err(BankError::FailedPrecondition { .. })));
    let (n, meta) = b.import("lib", Format::Upstream, r#"{"G0": "x", "G1": "y"}"#, true, None).await.unwrap();
    assert_eq!((n, meta.next_id), (2, 43));
    assert_eq!(texts(&b, "lib").await, vec![(0, "x".into()), (1, "y".into())]);
    // memgym's own format round-trips every field.
    let (own, _) = b.export("lib", Format::Memgym).await.unwrap();
    b.import("copy", Format::Memgym, &own, false, None).await.unwrap();
    assert_eq!(b.export("copy", Format::Memgym).await.unwrap().0.replace("\"copy\"", "\"lib\""), own);
    // Bad files name what is wrong.
    for (bad, want) in [("[1]", "object"), (r#"{"G0": 5}"#, "string"), (r#"{"X1": "a"}"#, "X1"), (r#"{"G1": "a", "G1": "b"}"#, "twice")] {
        let e = b.import("other", Format::Upstream, bad, true, None).await.unwrap_err();
        assert!(e.to_string().contains(want), "{bad}: {e}");
    }
}

#[tokio::test]
async fn a_bank_from_another_embedder_is_refused_or_reembedded() {
    let dir = tempfile::tempdir().unwrap();
    let b = banks_in(dir.path(), hash(), BanksConfig::default());
    b.create("lib", Kind::Experience, None, false).await.unwrap();
    b.add("lib", "verify by substitution", NewFields::default(), None).await.unwrap();
    drop(b);
    let other = EmbedService::new(Arc::new(HashEmbedder::new(64)), 2);
    let b = banks_in(dir.path(), other.clone(), BanksConfig::default());
    let e = b.read("lib", |l| l.len()).await.unwrap_err();
    assert!(matches!(e, BankError::FailedPrecondition { .. }) && e.to_string().contains("reembed"), "{e}");
    drop(b);
    let b = banks_in(dir.path(), other, BanksConfig { on_embedder_change: OnEmbedderChange::Reembed, ..BanksConfig::default() });
    let (hits, _) = b
        .retrieve("lib", Query { text: "verify by substitution", top_k: 1, min_similarity: None, domain: None, count: false })
        .await
        .unwrap();
    assert_eq!(hits[0].exp.id, 0);
    assert!(hits[0].similarity > 0.99);
    assert_eq!(b.read("lib", |l| (l.meta().embedder_dim, l.meta().version)).await.unwrap(), (64, 2));
}

#[tokio::test]
async fn bad_names_caps_and_missing_banks_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let limits = BankLimits { max_text_chars: 20, max_experiences: 2, ..BankLimits::default() };
    let b = banks_in(dir.path(), hash(), BanksConfig { limits, ..BanksConfig::default() });
    for bad in ["", ".hidden", "a b", "x/y", &"n".repeat(65)] {
        assert!(matches!(b.create(bad, Kind::Experience, None, false).await, Err(BankError::InvalidArgument(_))), "{bad:?}");
    }
    b.create("lib", Kind::Experience, None, false).await.unwrap();
    assert!(matches!(b.create("lib", Kind::Experience, None, false).await, Err(BankError::AlreadyExists { .. })));
    assert_eq!(b.create("lib", Kind::Experience, None, true).await.unwrap().name, "lib");
    assert!(matches!(b.add("nope", "x", NewFields::default(), None).await, Err(BankError::BankNotFound { .. })));
    assert!(matches!(b.add("lib", "   ", NewFields::default(), None).await, Err(BankError::InvalidArgument(_))));
    assert!(matches!(b.add("lib", &"x".repeat(21), NewFields::default(), None).await, Err(BankError::ResourceExhausted { .. })));
    let bad_conf = NewFields { confidence: Some(f64::NAN), ..NewFields::default() };
    assert!(matches!(b.add("lib", "x", bad_conf, None).await, Err(BankError::InvalidArgument(_))));
    b.add("lib", "one", NewFields::default(), None).await.unwrap();
    b.add("lib", "two", NewFields::default(), None).await.unwrap();
    assert!(matches!(b.add("lib", "three", NewFields::default(), None).await, Err(BankError::ResourceExhausted { .. })));
    // At the cap a merge (which shrinks) still works.
    b.merge("lib", &["G0".into(), "G1".into()], "one and two", None, None, None).await.unwrap();
}

#[test]
fn the_store_refuses_a_second_owner_and_a_corrupt_file() {
    let dir = tempfile::tempdir().unwrap();
    let first = SqliteStore::open(dir.path()).unwrap();
    let e = SqliteStore::open(dir.path()).unwrap_err();
    assert!(e.to_string().contains("another memgym server") && e.to_string().contains("banks.db"), "{e}");
    drop(first);
    SqliteStore::open(dir.path()).expect("free again once the first owner is gone");
    let bad = tempfile::tempdir().unwrap();
    std::fs::write(bad.path().join("banks.db"), b"this is not a database, it is a text file of some length".repeat(100)).unwrap();
    let e = SqliteStore::open(bad.path()).unwrap_err();
    assert!(matches!(e, store::StoreError::Corrupt { .. }) && e.to_string().contains("banks.db"), "{e}");
    assert!(std::fs::read(bad.path().join("banks.db")).unwrap().starts_with(b"this is not"), "never reset");
}

#[test]
fn group_confidence_is_the_clamped_spread() {
    use experience::group_confidence;
    assert_eq!(group_confidence(&[0.5, -0.5, 0.1]).unwrap(), Some(1.0));
    assert_eq!(group_confidence(&[1.2, -1.2]).unwrap(), Some(1.0), "clamped to 1");
    assert!((group_confidence(&[0.2, 0.5]).unwrap().unwrap() - 0.3).abs() < 1e-12);
    assert_eq!(group_confidence(&[0.7, 0.7, 0.7]).unwrap(), None, "no variation: skipped");
    assert!(group_confidence(&[]).is_err());
    assert!(group_confidence(&[0.1, f64::NAN]).unwrap_err().to_string().contains("group_advantages[1]"));
}

#[tokio::test]
async fn merge_similar_with_the_llm_uses_its_text_or_falls_back_and_says_why() {
    use crate::llm::fake::ScriptedChat;
    use crate::llm::Llm;
    let dir = tempfile::tempdir().unwrap();
    let chat = Arc::new(ScriptedChat::new(|_| Ok("Verify every solution by substituting it back into the equation.".into())));
    let llm = Arc::new(Llm::new(chat.clone(), 0));
    let b = banks_with_llm(dir.path(), Some(llm));
    b.create("lib", Kind::Experience, None, false).await.unwrap();
    for t in ["verify the solution by substitution", "verify the solution by substitution", "draw a diagram first"] {
        b.add("lib", t, NewFields::default(), None).await.unwrap();
    }
    let (groups, meta) = b.merge_similar("lib", 0.99, true, false, None).await.unwrap();
    assert_eq!(chat.seen.lock().len(), 1, "one request per group");
    assert_eq!((groups.len(), groups[0].sources.clone(), groups[0].note.clone()), (1, vec![0, 1], None));
    assert_eq!(
        b.read("lib", |l| l.get(3).map(|e| e.text.clone())).await.unwrap().as_deref(),
        Some("Verify every solution by substituting it back into the equation.")
    );
    assert_eq!(meta.version, 4);

    // An unusable reply (a refusal) falls back to the offline text, with a note.
    chat.queue.lock().push_back(Ok("I'm sorry, I cannot help with that.".into()));
    b.add("lib", "draw a diagram first", NewFields::default(), None).await.unwrap();
    let (groups, _) = b.merge_similar("lib", 0.99, true, false, None).await.unwrap();
    let note = groups[0].note.clone().unwrap_or_default();
    assert!(note.contains("unusable") && note.contains("offline"), "{note}");
    assert_eq!(groups[0].text, "draw a diagram first.", "merge_memory's summarize of the two");
    // A stale expected_version is refused before the LLM is asked.
    let asked = chat.seen.lock().len();
    assert!(matches!(b.merge_similar("lib", 0.99, true, false, Some(1)).await, Err(BankError::VersionConflict { .. })));
    assert_eq!(chat.seen.lock().len(), asked);
}

/// Writes that grow a bank past the rebuild threshold rebuild its index (HNSW here) in the background:
/// the writes made meanwhile are kept, and searches give the same experiences as the exact scan.
#[tokio::test]
async fn the_index_is_rebuilt_in_the_background_without_losing_writes() {
    let dir = tempfile::tempdir().unwrap();
    let index = crate::memory::IndexConfig { full_scan_threshold: 500, parallel_build: true, ..crate::memory::IndexConfig::default() };
    let b = banks_in(dir.path(), hash(), BanksConfig { index, ..BanksConfig::default() });
    b.create("lib", Kind::Experience, None, false).await.unwrap();
    let batch = |from: usize, n: usize| {
        let ops: Vec<String> = (from..from + n)
            .map(|i| format!(r#"{{"option":"add","experience":"experience {i} about topic {} and step {}"}}"#, i % 41, i % 7))
            .collect();
        format!("[{}]", ops.join(","))
    };
    for k in 0..16 {
        b.apply_operations("lib", &batch(k * 100, 100), false, false, None).await.unwrap();
    }
    // Writes while the rebuild may be running.
    b.apply_operations("lib", &batch(1_600, 100), false, false, None).await.unwrap();
    b.delete_experience("lib", "G5", None).await.unwrap();
    let mut waited = 0;
    // Before the rebuild the overlay holds all 1,700 additions; after it, only those made meanwhile.
    while b.read("lib", |l| l.overlay()).await.unwrap() >= 1_000 {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        waited += 1;
        assert!(waited < 600, "the rebuild did not finish in 30 s");
    }
    let (len, has5, has1699) = b.read("lib", |l| (l.len(), l.get(5).is_some(), l.get(1_699).is_some())).await.unwrap();
    assert_eq!((len, has5, has1699), (1_699, false, true), "every write kept through the rebuild");
    let q = Query { text: "experience about topic 12 and step 3", top_k: 10, min_similarity: None, domain: None, count: false };
    let (hits, path) = b.retrieve("lib", q.clone()).await.unwrap();
    assert_eq!(path, crate::memory::SearchPath::Hnsw);
    let v = b.embedder().embed(vec![q.text.to_string()]).await.unwrap().remove(0);
    let exact: Vec<u64> = b
        .read("lib", |l| {
            let mut all: Vec<(f32, u64)> = l.iter().map(|e| (crate::util::vector::dot(&v, &l.vector(e.id).unwrap()), e.id)).collect();
            all.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            all.iter().take(10).map(|x| x.1).collect()
        })
        .await
        .unwrap();
    let found: Vec<u64> = hits.iter().map(|h| h.exp.id).collect();
    let overlap = exact.iter().filter(|id| found.contains(id)).count();
    assert!(overlap >= 9, "recall@10 {overlap}/10: {found:?} vs {exact:?}");
}

mod compress;
mod hardening;
mod saved_index;
