//! Banks on a real PostgreSQL (Debian's package, started by `scripts/postgres.sh` on 127.0.0.1): two
//! memgym server processes on one database see each other's writes, concurrent writers never lose an
//! update, and `expected_version` conflicts are Aborted.
//!
//! `scripts/test` starts the database and sets `MEMGYM_TEST_POSTGRES_URL`; without it the first test
//! starts one itself (and it stops when the test binary exits).

use std::sync::OnceLock;

use memgym::api::pb;
use memgym::api::pb::agent_memory_client::AgentMemoryClient;
use memgym::api::pb::banks_client::BanksClient;
use tonic::transport::Channel;
use tonic::Code;

use crate::binary::start_binary;

fn postgres_url() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        if let Ok(url) = std::env::var("MEMGYM_TEST_POSTGRES_URL") {
            return url;
        }
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/postgres.sh");
        let out = std::process::Command::new(script)
            .args(["start", "--watch", &std::process::id().to_string()])
            .output()
            .expect("scripts/postgres.sh runs");
        assert!(out.status.success(), "starting PostgreSQL failed:\n{}", String::from_utf8_lossy(&out.stderr));
        let stdout = String::from_utf8_lossy(&out.stdout);
        stdout.lines().find_map(|l| l.strip_prefix("MEMGYM_TEST_POSTGRES_URL=")).expect("scripts/postgres.sh prints the URL").to_string()
    })
}

/// A server process killed when the test ends, with a Banks and an AgentMemory client.
struct Replica(std::process::Child, BanksClient<Channel>, AgentMemoryClient<Channel>);

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn replica() -> Replica {
    let (child, addr) = start_binary(&["--banks-url", postgres_url()]);
    let channel = Channel::from_shared(format!("http://{addr}")).unwrap().connect().await.unwrap();
    Replica(child, BanksClient::new(channel.clone()), AgentMemoryClient::new(channel))
}

fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    format!("{prefix}-{}-{nanos}", std::process::id())
}

fn add(bank: &str, text: &str) -> pb::AddExperienceRequest {
    pb::AddExperienceRequest { bank: bank.into(), text: text.into(), ..Default::default() }
}

#[tokio::test]
async fn two_replicas_on_one_postgres_share_banks_without_losing_writes() {
    let (mut a, mut b) = tokio::join!(replica(), replica());
    let bank = unique("shared");
    a.1.create_bank(pb::CreateBankRequest { name: bank.clone(), ..Default::default() }).await.unwrap();
    let w = a.1.add_experience(add(&bank, "verify solutions by substitution")).await.unwrap().into_inner();
    assert_eq!((w.id.as_str(), w.version), ("G0", 1));

    // A read on B after a write on A reflects it, and the other way round.
    let e = b.1.get_experience(pb::GetExperienceRequest { bank: bank.clone(), id: "G0".into() }).await.unwrap().into_inner();
    assert_eq!(e.text, "verify solutions by substitution");
    let w = b.1.add_experience(add(&bank, "check boundary conditions first")).await.unwrap().into_inner();
    assert_eq!((w.id.as_str(), w.version), ("G1", 2), "B continues A's counter");
    let hits =
        a.1.retrieve(pb::RetrieveRequest {
            bank: bank.clone(),
            query: "check boundary conditions".into(),
            top_k: 1,
            read_only: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(hits.hits[0].id, "G1");

    // Optimistic concurrency: both hold version 2; the second writer is Aborted and changes nothing.
    let modify = |text: &str| pb::ModifyExperienceRequest {
        bank: bank.clone(),
        id: "G0".into(),
        text: text.into(),
        expected_version: Some(2),
        ..Default::default()
    };
    a.1.modify_experience(modify("from A")).await.unwrap();
    let e = b.1.modify_experience(modify("from B")).await.unwrap_err();
    assert_eq!(e.code(), Code::Aborted, "{e:?}");
    let e = b.1.get_experience(pb::GetExperienceRequest { bank: bank.clone(), id: "G0".into() }).await.unwrap().into_inner();
    assert_eq!(e.text, "from A");

    // Unconditional writes from both replicas at once: every one lands, each with its own id.
    let mut tasks = Vec::new();
    for (who, client) in [("a", a.1.clone()), ("b", b.1.clone())] {
        for i in 0..25 {
            let mut c = client.clone();
            let req = add(&bank, &format!("experience {i} written through replica {who}"));
            tasks.push(tokio::spawn(async move { c.add_experience(req).await.map(|r| r.into_inner().id) }));
        }
    }
    let mut ids = Vec::new();
    for t in tasks {
        ids.push(t.await.unwrap().expect("an unconditional write lands"));
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 50, "fifty distinct ids");
    for r in [&mut a, &mut b] {
        let s = r.1.get_stats(pb::GetStatsRequest { bank: bank.clone() }).await.unwrap().into_inner();
        assert_eq!((s.total_experiences, s.version), (52, 53), "both replicas see every write");
    }
    let batch = r#"[{"option":"merge","merged_from":["G0","G1"],"experience":"verify, then check the boundary"}]"#;
    let r =
        b.1.apply_operations(pb::ApplyOperationsRequest { bank: bank.clone(), operations_json: batch.into(), ..Default::default() })
            .await
            .unwrap();
    let merged_id = r.into_inner().results[0].id.clone();
    let page =
        a.1.list_experiences(pb::ListExperiencesRequest { bank: bank.clone(), page_size: 1_000, ..Default::default() })
            .await
            .unwrap()
            .into_inner();
    assert_eq!(page.total, 51);
    assert!(page.experiences.iter().any(|e| e.id == merged_id) && !page.experiences.iter().any(|e| e.id == "G0"));
    // Listing counts live rows in the database (the merged-away sources are tombstones), on either replica.
    for r in [&mut a, &mut b] {
        let list = r.1.list_banks(pb::ListBanksRequest {}).await.unwrap().into_inner();
        let size = list.banks.iter().find(|x| x.name == bank).map(|x| x.size);
        assert_eq!(size, Some(51), "ListBanks sees the merge");
    }

    // A deleted bank is gone for both.
    b.1.delete_bank(pb::DeleteBankRequest { name: bank.clone(), expected_version: None }).await.unwrap();
    let e = a.1.get_bank(pb::GetBankRequest { name: bank.clone() }).await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
}

#[tokio::test]
async fn a_postgres_bank_survives_its_servers_and_keeps_usage() {
    let bank = unique("durable");
    {
        let mut a = replica().await;
        a.1.create_bank(pb::CreateBankRequest { name: bank.clone(), ..Default::default() }).await.unwrap();
        a.1.add_experience(add(&bank, "read the question twice")).await.unwrap();
        a.1.retrieve(pb::RetrieveRequest { bank: bank.clone(), query: "read the question".into(), ..Default::default() }).await.unwrap();
        // SIGTERM: the server flushes usage on its way out.
        std::process::Command::new("kill").args(["-TERM", &a.0.id().to_string()]).status().unwrap();
        let _ = a.0.wait();
    }
    let mut b = replica().await;
    let e = b.1.get_experience(pb::GetExperienceRequest { bank: bank.clone(), id: "G0".into() }).await.unwrap().into_inner();
    assert_eq!((e.text.as_str(), e.usage_count), ("read the question twice", 1));
    let out =
        b.1.export_bank(pb::ExportBankRequest { bank: bank.clone(), format: pb::BankFormat::SeedJson as i32 }).await.unwrap().into_inner();
    assert_eq!(out.data, r#"{"experiences": {"G0": "read the question twice"}, "next_id": 1}"#);
}

/// The agent-memory design's agent memory shared by two replicas: episodes recorded through both at once all land, and
/// each replica's context reflects the other's writes.
#[tokio::test]
async fn two_replicas_record_into_one_agent_memory_without_losing_episodes() {
    let bank = unique("agent");
    let (a, b) = (replica().await, replica().await);
    let mut banks = a.1.clone();
    banks.create_bank(pb::CreateBankRequest { name: bank.clone(), kind: pb::BankKind::Agent.into(), ..Default::default() }).await.unwrap();
    let mut calls = Vec::new();
    for (who, client) in [("a", a.2.clone()), ("b", b.2.clone())] {
        for i in 0..20 {
            let mut c = client.clone();
            let req = pb::RecordEpisodeRequest {
                bank: bank.clone(),
                task_id: Some("t".into()),
                score: Some(0.9),
                trajectory_summary: format!("run {i} through {who}"),
                successes: vec![format!("success {i} through {who}")],
                ..Default::default()
            };
            calls.push(tokio::spawn(async move { c.record_episode(req).await }));
        }
    }
    for c in calls {
        c.await.unwrap().expect("an unconditional record lands");
    }
    for mut r in [a.2.clone(), b.2.clone()] {
        let s = r.get_agent_summary(pb::GetAgentSummaryRequest { bank: bank.clone() }).await.unwrap().into_inner();
        assert_eq!((s.total_episodes, s.version, s.task_rules.get("t").copied()), (40, 40, Some(10)), "both replicas see every episode");
    }
    let mut ctx = b.2.clone();
    let text = ctx
        .build_memory_context(pb::BuildMemoryContextRequest { bank: bank.clone(), task_id: Some("t".into()), ..Default::default() })
        .await
        .unwrap()
        .into_inner()
        .context;
    assert!(text.ends_with("Your mean score on t: 0.90 (over 40 episodes)"), "{text}");
}

/// Issue 42: a replica does not build a shared bank's index from scratch. The first replica to open the
/// bank builds the graph and saves it in the database (`memgym_indexes`); a replica opening it later
/// reads that graph and catches up from the change log on what was written since, and keeps catching
/// up on the other replicas' writes. In process (three `Banks` on three connections) so that how each
/// one opened is visible.
#[tokio::test]
async fn a_replica_opens_a_shared_bank_on_the_index_another_replica_saved() {
    use memgym::banks::formats::Format;
    use memgym::banks::semantic::Query;
    use memgym::banks::store::{postgres::PostgresStore, BankStore};
    use memgym::banks::{Banks, BanksConfig, IndexOrigin};
    use memgym::embed::{EmbedService, HashEmbedder};
    use memgym::memory::{IndexConfig, IndexMode};
    use std::sync::Arc;

    let config = BanksConfig {
        index: IndexConfig { mode: IndexMode::Hnsw, parallel_build: true, ..IndexConfig::default() },
        ..BanksConfig::default()
    };
    let embed = EmbedService::new(Arc::new(HashEmbedder::default()), 2);
    let store = || async { Arc::new(PostgresStore::connect(postgres_url()).await.expect("PostgreSQL")) };
    let replica = |s: Arc<PostgresStore>| Banks::new(s, embed.clone(), None, config.clone());
    let text = |i: u64| format!("shared experience {i}: check case {} before case {}", i % 13, i * 5 % 29);
    let bank = unique("indexed");
    let file: serde_json::Map<String, serde_json::Value> = (0..400).map(|i| (format!("G{i}"), text(i).into())).collect();

    let a = replica(store().await);
    a.import(&bank, Format::Upstream, &serde_json::Value::Object(file).to_string(), false, None).await.unwrap();
    // B opens the bank first: it answers by the exact scan while it builds the graph in the background,
    // then saves it beside the rows.
    let b_store = store().await;
    let b = replica(Arc::clone(&b_store));
    assert_eq!(b.read(&bank, |l| l.origin()).await.unwrap(), IndexOrigin::Pending);
    let meta = b.read(&bank, |l| l.meta().clone()).await.unwrap();
    let mut saved = None;
    for _ in 0..600 {
        if let Some(bytes) = b_store.index(&bank).await.unwrap() {
            saved = Some(memgym::banks::saved_index::decode(&bytes, &meta).expect("the saved index decodes").version);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(saved, Some(meta.version), "B saved the index it built");
    // A writes after the save; C, a new replica, opens on B's graph plus the change log.
    a.add(&bank, "a rule written after the index was saved", Default::default(), None).await.unwrap();
    a.delete_experience(&bank, "G7", None).await.unwrap();
    let c = replica(store().await);
    assert_eq!(c.read(&bank, |l| l.origin()).await.unwrap(), IndexOrigin::Saved { version: meta.version, changed: 2 });
    // C answers with the current rows, and keeps up with A's next write.
    let q = |t: &'static str| Query { text: t, top_k: 3, min_similarity: None, domain: None, count: false };
    let hits = c.retrieve(&bank, q("a rule written after the index was saved")).await.unwrap().0;
    assert_eq!(hits[0].exp.text, "a rule written after the index was saved");
    a.modify(&bank, "G8", "G8 rewritten by replica A", None, None, None).await.unwrap();
    let hits = c.retrieve(&bank, q("G8 rewritten by replica A")).await.unwrap().0;
    assert_eq!((hits[0].exp.id, hits[0].exp.text.as_str()), (8, "G8 rewritten by replica A"));
    for i in (0..400).filter(|i| *i != 7 && *i != 8).step_by(37) {
        let t = text(i);
        let hits = c.retrieve(&bank, Query { text: &t, top_k: 3, min_similarity: None, domain: None, count: false }).await.unwrap().0;
        assert_eq!(hits[0].exp.id, i, "G{i} is its own text's first answer on C");
        assert!(hits.iter().all(|h| h.exp.id != 7), "the deleted G7 never answers");
    }
}

/// `memgym bench banks --postgres-url`: a replica that starts after the writer saved a bank's index opens
/// the bank on that index (no rebuild), answers its first Retrieve as the writer does, and its next
/// Retrieve sees the writer's change (the bench refuses to report otherwise). `--replica-size` sizes the
/// shared bank apart from the SQLite table's `--sizes` (a 1,000,000 replica without a SQLite bank that big).
#[test]
fn the_banks_bench_opens_a_shared_bank_on_a_replica() {
    let url = postgres_url();
    // At a cap of 3,050, the 100 adds of the catch-up are preceded by 50 deletions.
    let flags = ["--sizes", "100", "--replica-size", "3000", "--max-experiences", "3050", "--no-open-without-saved", "--postgres-url", url];
    let (table, j) = crate::bench::bench_output(&[crate::bench::SMALL_BANKS, &flags].concat());
    assert!(table.contains("PostgreSQL replica"), "{table}");
    assert_eq!(j["retrieve"][0]["size"], 100, "the SQLite table keeps its own sizes");
    let r = &j["replica_open"];
    assert_eq!((r["size"].as_u64(), r["deleted"].as_u64(), r["added"].as_u64()), (Some(3000), Some(50), Some(100)), "{r}");
    assert!(r["origin"].as_str().is_some_and(|o| o.starts_with("Saved")), "the replica opened on the saved index: {r}");
    for key in ["import_s", "index_saved_s", "replica_open_s", "catch_up_s"] {
        assert!(r[key].as_f64().is_some_and(|s| s.is_finite() && s >= 0.0), "{key}: {r}");
    }
}
