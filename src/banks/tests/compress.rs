//! Compression and MergeSimilar select off the bank's lock: Retrieve answers while a large selection runs,
//! and a write made meanwhile sends the selection round again, so what is applied is the selection of the
//! bank it is applied to.

use super::*;

/// Bank "lib" (`max_size` 10) of 2,000 experiences on distinct topics, written in batches, and its version.
async fn bank_of_2000() -> (tempfile::TempDir, Arc<Banks>, u64) {
    let (dir, b) = fresh();
    b.create("lib", Kind::Experience, Some(10), false).await.unwrap();
    for from in (0..2_000).step_by(500) {
        let ops: Vec<String> = (from..from + 500)
            .map(|i| format!(r#"{{"option":"add","experience":"experience {i} about topic {} and step {}"}}"#, i % 53, i % 11))
            .collect();
        b.apply_operations("lib", &format!("[{}]", ops.join(",")), false, false, None).await.unwrap();
    }
    let version = b.read("lib", |l| l.meta().version).await.unwrap();
    (dir, Arc::new(b), version)
}

/// Retrieves on bank "lib" back to back until `task` ends: how many were answered while it still ran. After
/// the third, `late` (if any) is added to the bank, once.
async fn retrieves_while<T>(b: &Banks, task: &tokio::task::JoinHandle<T>, mut late: Option<&str>) -> usize {
    let q = Query { text: "experience about topic 7 and step 3", top_k: 5, min_similarity: None, domain: None, count: false };
    let mut answered_meanwhile = 0;
    while !task.is_finished() {
        assert_eq!(b.retrieve("lib", q.clone()).await.unwrap().0.len(), 5);
        answered_meanwhile += usize::from(!task.is_finished());
        if answered_meanwhile >= 3 {
            if let Some(text) = late.take() {
                b.add("lib", text, NewFields::default(), None).await.unwrap();
            }
        }
    }
    answered_meanwhile
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retrieve_answers_while_a_compression_selects_and_a_write_meanwhile_is_seen() {
    let (_dir, b, before) = bank_of_2000().await;
    // Hybrid's selection looks at every pair: seconds here, so the calls below overlap it.
    let task = {
        let b = Arc::clone(&b);
        tokio::spawn(async move { b.compress("lib", None, Strategy::Hybrid, Params::default(), false, None).await })
    };
    // A write while the selection runs: the selection made before it is not applied.
    let answered_meanwhile = retrieves_while(&b, &task, Some("a late experience on a topic of its own")).await;
    assert!(answered_meanwhile >= 3, "Retrieve answered {answered_meanwhile} times while the compression ran");
    let (removed, left, meta) = task.await.unwrap().unwrap();
    let len = b.read("lib", |l| l.len()).await.unwrap();
    assert_eq!((left, len), (10, 10), "the bank compressed to its max_size, the late write counted");
    assert_eq!(removed.len(), 2_001 - 10);
    assert_eq!(meta.version, before + 2, "the late write, then the removals selected after it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retrieve_answers_while_merge_similar_groups() {
    let (_dir, b, before) = bank_of_2000().await;
    // Every pair is compared: seconds here, so the Retrieves below overlap it.
    let task = {
        let b = Arc::clone(&b);
        tokio::spawn(async move { b.merge_similar("lib", 0.99, false, true, None).await })
    };
    let answered_meanwhile = retrieves_while(&b, &task, None).await;
    assert!(answered_meanwhile >= 3, "Retrieve answered {answered_meanwhile} times while the groups were found");
    let (groups, meta) = task.await.unwrap().unwrap();
    assert!(groups.iter().all(|g| g.sources.len() >= 2 && g.new_id.is_none()), "a dry run's groups, none written");
    assert_eq!((meta.version, b.read("lib", |l| l.len()).await.unwrap()), (before, 2_000), "a dry run changes nothing");
}
