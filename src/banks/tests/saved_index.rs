//! A bank's saved index on a real SQLite file (issue 42): a bank opens on it instead of building, rows
//! committed after it was saved (the server stopped before saving again) are caught up from the change
//! log, and a damaged, cut, foreign or missing file is refused and the index built again in the
//! background (the exact scan answering meanwhile), never served wrong.

use super::*;
use crate::banks::library::IndexOrigin;
use crate::memory::{IndexConfig, IndexMode};

/// The graph for every bank, whatever its size (the tests stay small).
fn graph() -> BanksConfig {
    BanksConfig { index: IndexConfig { mode: IndexMode::Hnsw, parallel_build: true, ..IndexConfig::default() }, ..BanksConfig::default() }
}

fn text(i: u64) -> String {
    format!("experience {i}: when the topic is {} check the case of {} first", i % 17, i * 7 % 23)
}

/// A bank of `n` experiences (G0..), imported in one write.
async fn filled(dir: &std::path::Path, bank: &str, n: u64) {
    let b = reopen(dir).await;
    let file: serde_json::Map<String, serde_json::Value> = (0..n).map(|i| (format!("G{i}"), text(i).into())).collect();
    b.import(bank, Format::Upstream, &serde_json::Value::Object(file).to_string(), false, None).await.unwrap();
}

/// Banks on `dir` once the previous server's background saves let go of its database file.
async fn reopen(dir: &std::path::Path) -> Banks {
    for _ in 0..200 {
        match SqliteStore::open(dir) {
            Ok(store) => return Banks::new(Arc::new(store), hash(), None, graph()),
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
        }
    }
    panic!("the banks database stayed in use");
}

fn index_file(dir: &std::path::Path, bank: &str) -> std::path::PathBuf {
    dir.join("indexes").join(format!("{bank}.hnsw"))
}

/// Waits until the bank's saved index decodes at the bank's version (it is saved in the background).
async fn saved(b: &Banks, dir: &std::path::Path, bank: &str) -> Vec<u8> {
    let meta = b.read(bank, |l| l.meta().clone()).await.unwrap();
    for _ in 0..600 {
        if let Ok(bytes) = std::fs::read(index_file(dir, bank)) {
            if crate::banks::saved_index::decode(&bytes, &meta).is_ok_and(|s| s.version == meta.version) {
                return bytes;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("bank {bank}'s index was not saved at version {}", meta.version);
}

async fn origin(b: &Banks, bank: &str) -> IndexOrigin {
    b.read(bank, |l| l.origin()).await.unwrap()
}

/// Every live experience is the first answer to its own text, and no answer is a deleted or stale one.
async fn answers_right(b: &Banks, bank: &str) {
    let live: Vec<Experience> = b.read(bank, |l| l.iter().cloned().collect()).await.unwrap();
    for e in &live {
        let q = Query { text: &e.text, top_k: 5, min_similarity: None, domain: None, count: false };
        let (hits, _) = b.retrieve(bank, q).await.unwrap();
        assert_eq!(hits.first().map(|h| h.exp.id), Some(e.id), "{} is its own text's first answer", show_id(e.id));
        for h in &hits {
            assert!(live.iter().any(|l| l.id == h.exp.id && l.text == h.exp.text), "{} is current", show_id(h.exp.id));
        }
    }
}

#[tokio::test]
async fn a_bank_opens_on_its_saved_index_and_catches_up_on_the_rows_committed_after_it() {
    let dir = tempfile::tempdir().unwrap();
    filled(dir.path(), "lib", 300).await;
    // The first open has no saved index: it answers at once by the exact scan, builds the graph in the
    // background, swaps it in and saves it.
    let b = reopen(dir.path()).await;
    assert_eq!(origin(&b, "lib").await, IndexOrigin::Pending);
    answers_right(&b, "lib").await;
    saved(&b, dir.path(), "lib").await;
    for _ in 0..600 {
        if origin(&b, "lib").await == IndexOrigin::Built {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(origin(&b, "lib").await, IndexOrigin::Built, "the graph built in the background is swapped in");
    answers_right(&b, "lib").await;
    drop(b);
    let b = reopen(dir.path()).await;
    assert_eq!(origin(&b, "lib").await, IndexOrigin::Saved { version: 1, changed: 0 });
    answers_right(&b, "lib").await;
    // Rows committed after the save, then the server stops before it saves again (as a crash between
    // the rows' commit and the index write would leave them).
    for i in 300..310 {
        b.add("lib", &text(i), NewFields::default(), None).await.unwrap();
    }
    b.modify("lib", "G3", "a rewritten third experience about boundary values", None, None, None).await.unwrap();
    b.delete_experience("lib", "G5", None).await.unwrap();
    b.delete_experience("lib", "G6", None).await.unwrap();
    drop(b);
    let b = reopen(dir.path()).await;
    assert_eq!(origin(&b, "lib").await, IndexOrigin::Saved { version: 1, changed: 13 });
    assert_eq!(b.read("lib", |l| l.len()).await.unwrap(), 308);
    answers_right(&b, "lib").await;
    let q = Query { text: &text(5), top_k: 300, min_similarity: None, domain: None, count: false };
    assert!(b.retrieve("lib", q).await.unwrap().0.iter().all(|h| h.exp.id != 5 && h.exp.id != 6), "deleted experiences never come back");
}

#[tokio::test]
async fn a_damaged_cut_or_foreign_saved_index_is_refused_and_built_again() {
    let dir = tempfile::tempdir().unwrap();
    filled(dir.path(), "lib", 200).await;
    filled(dir.path(), "other", 200).await;
    let b = reopen(dir.path()).await;
    b.read("other", |_| ()).await.unwrap();
    let other = saved(&b, dir.path(), "other").await;
    b.read("lib", |_| ()).await.unwrap();
    let good = saved(&b, dir.path(), "lib").await;
    drop(b);
    let mut flipped = good.clone();
    flipped[good.len() / 2] ^= 0x01;
    for (what, bytes) in [
        ("one flipped bit", flipped),
        ("cut in half", good[..good.len() / 2].to_vec()),
        ("empty", Vec::new()),
        ("not an index", b"memgym".repeat(100)),
        ("another bank's (same rows, another uid)", other),
    ] {
        std::fs::write(index_file(dir.path(), "lib"), &bytes).unwrap();
        let b = reopen(dir.path()).await;
        assert_eq!(origin(&b, "lib").await, IndexOrigin::Pending, "{what}");
        answers_right(&b, "lib").await;
        // And the index built again is saved over the bad bytes.
        saved(&b, dir.path(), "lib").await;
    }
    // A bank deleted takes its saved index with it.
    let b = reopen(dir.path()).await;
    b.delete("lib", None).await.unwrap();
    assert!(!index_file(dir.path(), "lib").exists());
}
