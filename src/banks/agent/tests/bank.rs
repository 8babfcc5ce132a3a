//! Agent banks on a real SQLite store: durability, concurrency, kinds, consolidation, import and export.

use std::sync::Arc;

use crate::banks::agent::{AgentMemory, ConsolidateMode, Episode};
use crate::banks::store::sqlite::SqliteStore;
use crate::banks::store::{BankStore, Commit};
use crate::banks::{BankError, Banks, Kind};
use crate::llm::fake::ScriptedChat;
use crate::llm::Llm;

fn banks(dir: &std::path::Path, llm: Option<Arc<Llm>>) -> Banks {
    crate::banks::tests::banks_with_llm(dir, llm)
}

fn episode(task: &str, score: f64, summary: &str) -> Episode {
    Episode {
        task_id: Some(task.into()),
        score: Some(score),
        steps: Some(4),
        trajectory_summary: Some(summary.into()),
        mistakes: vec![format!("mistake in {summary}")],
        successes: vec![format!("success in {summary}")],
        ..Episode::default()
    }
}

#[tokio::test]
async fn recorded_episodes_are_durable_and_render_the_seed_context() {
    let dir = tempfile::tempdir().unwrap();
    let b = banks(dir.path(), None);
    b.create("agent", Kind::Agent, None, false).await.unwrap();
    assert_eq!(b.memory_context("agent", Some("t"), 5, 3).await.unwrap(), "", "nothing to say yet");
    let (o, meta) = b.record_episode("agent", &episode("t", 0.9, "solved it"), None).await.unwrap();
    assert_eq!((o.total_episodes, o.rules_added.clone(), meta.version), (1, vec!["[WORKS] success in solved it".to_string()], 1));
    b.record_episode("agent", &episode("t", 0.25, "failed it"), None).await.unwrap();
    drop(b);
    // A fresh server on the same file: everything acknowledged is there.
    let b = banks(dir.path(), None);
    let want = "## MEMORY FROM PAST EPISODES\n\
                \nRules for t:\n  - [WORKS] success in solved it\n  - [AVOID] mistake in failed it\n\
                \nMistakes to avoid:\n  - AVOID: mistake in solved it\n  - AVOID: mistake in failed it\n\
                \nRecent t episodes:\n  - Score 0.90 in 4 steps: solved it\n  - Score 0.25 in 4 steps: failed it\n\
                \nYour mean score on t: 0.57 (over 2 episodes)";
    assert_eq!(b.memory_context("agent", Some("t"), 5, 3).await.unwrap(), want);
    let (s, meta) = b.agent_summary("agent").await.unwrap();
    assert_eq!((s.total_episodes, meta.version, s.scores_by_task.get("t").copied()), (2, 2, Some(0.575)));
    // A refused episode changes nothing, not even the version.
    let bad = Episode { score: Some(f64::NAN), ..episode("t", 0.0, "x") };
    assert!(
        matches!(b.record_episode("agent", &bad, None).await, Err(BankError::InvalidArgument(crate::util::invalid::Invalid { field, .. })) if field == "score")
    );
    assert_eq!(b.agent_summary("agent").await.unwrap().1.version, 2);
    assert!(matches!(
        b.record_episode("agent", &episode("t", 1.0, "y"), Some(1)).await,
        Err(BankError::VersionConflict { current: 2, .. })
    ));
}

#[tokio::test]
async fn concurrent_records_all_land() {
    let dir = tempfile::tempdir().unwrap();
    let b = Arc::new(banks(dir.path(), None));
    b.create("agent", Kind::Agent, None, false).await.unwrap();
    let tasks: Vec<_> = (0..64)
        .map(|i| {
            let b = Arc::clone(&b);
            tokio::spawn(
                async move { b.record_episode("agent", &episode(&format!("task{}", i % 4), 0.5, &format!("run {i}")), None).await },
            )
        })
        .collect();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let mem = AgentMemory::import(&b.export_agent("agent").await.unwrap()).unwrap();
    assert_eq!((mem.total_episodes, mem.episode_log.len()), (64, 64));
    let mut runs: Vec<String> = mem.episode_log.iter().map(|e| e.summary.clone()).collect();
    runs.sort();
    runs.dedup();
    assert_eq!(runs.len(), 64, "every episode logged once");
    assert_eq!(mem.score_history.values().map(Vec::len).sum::<usize>(), 64);
}

#[tokio::test]
async fn kinds_are_kept_apart_and_a_corrupt_document_is_never_reset() {
    let dir = tempfile::tempdir().unwrap();
    let b = banks(dir.path(), None);
    b.create("lib", Kind::Experience, None, false).await.unwrap();
    b.create("agent", Kind::Agent, None, false).await.unwrap();
    assert!(matches!(b.record_episode("lib", &Episode::default(), None).await, Err(BankError::WrongKind { .. })));
    assert!(matches!(b.format_all("agent").await, Err(BankError::WrongKind { .. })));
    assert!(matches!(b.create("agent", Kind::Experience, None, true).await, Err(BankError::FailedPrecondition { .. })));
    assert_eq!(b.create("agent", Kind::Agent, None, true).await.unwrap().kind, "agent");
    assert!(matches!(b.memory_context("nope", None, 5, 3).await, Err(BankError::BankNotFound { .. })));
    // Damage the stored document behind the server's back.
    let store = SqliteStore::open(dir.path());
    assert!(store.is_err(), "one owner per SQLite file");
    drop(b);
    let store = SqliteStore::open(dir.path()).unwrap();
    let meta = store.meta("agent").await.unwrap().unwrap();
    let garbage = Commit {
        put: Vec::new(),
        delete: Vec::new(),
        clear: false,
        meta: crate::banks::store::BankMeta { version: meta.version + 1, ..meta.clone() },
        document: Some("{\"episode_log\": 7}".into()),
    };
    store.commit(meta.version, std::sync::Arc::new(garbage)).await.unwrap();
    drop(store);
    let b = banks(dir.path(), None);
    let e = b.record_episode("agent", &Episode::default(), None).await.unwrap_err();
    assert!(e.to_string().contains("episode_log") && e.to_string().contains("banks.db"), "{e}");
    assert!(matches!(e, BankError::Store(crate::banks::store::StoreError::Corrupt { .. })), "{e:?}");
    drop(b);
    let store = SqliteStore::open(dir.path()).unwrap();
    assert_eq!(store.document("agent").await.unwrap().unwrap().1.as_deref(), Some("{\"episode_log\": 7}"), "left as it was");
}

#[tokio::test]
async fn consolidation_by_heuristic_and_by_llm_and_a_useless_reply_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let chat = Arc::new(ScriptedChat::new(|_| Ok("Here you go:\n[\"Check units.\", \"Re-read the question.\", 5]".into())));
    let b = banks(dir.path(), Some(Arc::new(Llm::new(chat.clone(), 0))));
    b.create("agent", Kind::Agent, None, false).await.unwrap();
    for i in 0..19 {
        b.record_episode("agent", &episode("t", if i % 2 == 0 { 0.9 } else { 0.1 }, &format!("run {i}")), None).await.unwrap();
    }
    let (c, _) = b.consolidate("agent", ConsolidateMode::Heuristic, false, None).await.unwrap();
    assert!(!c.ran && c.mode.is_empty(), "19 episodes: not due");
    b.record_episode("agent", &episode("t", 0.9, "run 19"), None).await.unwrap();
    let (c, _) = b.consolidate("agent", ConsolidateMode::Heuristic, false, None).await.unwrap();
    assert!(c.ran && c.mode == "heuristic" && c.last_consolidated_at == Some(20));
    assert_eq!(c.rules_added.len(), 11, "ten even runs and run 19 scored 0.90");
    assert_eq!(c.rules_added[0], "[HIGH SCORE 0.90] run 0");
    assert!(!b.consolidate("agent", ConsolidateMode::Auto, false, None).await.unwrap().0.ran, "just consolidated");
    // AUTO with an LLM configured asks it.
    let (c, _) = b.consolidate("agent", ConsolidateMode::Auto, true, None).await.unwrap();
    assert_eq!(
        (c.ran, c.mode, c.rules_added.clone()),
        (true, "llm", vec!["[CONSOLIDATED] Check units.".into(), "[CONSOLIDATED] Re-read the question.".into()])
    );
    let request = chat.seen.lock()[0].clone();
    assert_eq!((request.max_tokens, request.temperature), (300, 0.0));
    assert!(request.messages[0].content.contains("score=0.90"), "{}", request.messages[0].content);
    // A reply without an array: reported, nothing changed, the counter not advanced.
    for _ in 0..20 {
        b.record_episode("agent", &episode("t", 0.5, "more"), None).await.unwrap();
    }
    chat.queue.lock().push_back(Ok("I cannot help with that.".into()));
    let version = b.agent_summary("agent").await.unwrap().1.version;
    let (c, meta) = b.consolidate("agent", ConsolidateMode::Llm, false, None).await.unwrap();
    assert!(!c.ran && c.mode == "llm" && c.error.contains("no rules"), "{c:?}");
    assert_eq!((meta.version, c.last_consolidated_at), (version, Some(20)));
    // Without an LLM, LLM mode is refused.
    let plain = tempfile::tempdir().unwrap();
    let b = banks(plain.path(), None);
    b.create("agent", Kind::Agent, None, false).await.unwrap();
    assert!(matches!(b.consolidate("agent", ConsolidateMode::Llm, true, None).await, Err(BankError::FailedPrecondition { .. })));
}

#[tokio::test]
async fn import_and_export_seed_documents() {
    let dir = tempfile::tempdir().unwrap();
    let b = banks(dir.path(), None);
    // An older document: no mistake_cards, a string last_consolidated_at, missing keys.
    let old = r#"{"version": 1, "total_episodes": 2, "last_consolidated_at": "2025-01-01T00:00:00",
                  "task_rules": {"t": ["[WORKS] plan first"]},
                  "episode_log": [{"timestamp": "2025-01-01T00:00:00+00:00", "task_id": "t", "score": 0.9, "steps": 3, "summary": "ok"}],
                  "score_history": {"t": [0.9, 0.2]}, "mistakes": ["rushed"]}"#;
    let (meta, total) = b.import_agent("imported", old, false, None).await.unwrap();
    assert_eq!((meta.version, total), (1, 2));
    let mem = AgentMemory::import(&b.export_agent("imported").await.unwrap()).unwrap();
    assert_eq!((mem.total_episodes, mem.last_consolidated_at, mem.mistake_cards.len()), (2, None, 0));
    assert!(b.memory_context("imported", Some("t"), 5, 3).await.unwrap().contains("Your mean score on t: 0.55 (over 2 episodes)"));
    // A bank with a memory is replaced only on request; a bad document names the field and changes nothing.
    assert!(matches!(b.import_agent("imported", "{}", false, None).await, Err(BankError::FailedPrecondition { .. })));
    let e = b.import_agent("imported", r#"{"score_history": {"t": ["high"]}}"#, true, None).await.unwrap_err();
    assert!(
        matches!(&e, BankError::InvalidArgument(crate::util::invalid::Invalid { field, .. }) if field == "data.score_history.t[0]"),
        "{e}"
    );
    assert_eq!(b.agent_summary("imported").await.unwrap().0.total_episodes, 2);
    b.import_agent("imported", "{}", true, None).await.unwrap();
    assert_eq!(b.agent_summary("imported").await.unwrap().0.total_episodes, 0);
}
