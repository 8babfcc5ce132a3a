//! The Banks service through a real gRPC client: the server in-process on `127.0.0.1:0` with its banks
//! in a temporary SQLite file, and the real binary killed with SIGKILL in the middle of a batch.

use std::process::Command;
use std::time::Duration;

use memgym::api::pb;
use memgym::api::pb::banks_client::BanksClient;
use tonic::transport::Channel;
use tonic::Code;

use crate::binary::{start_binary, start_binary_env};
use crate::helpers::{spawn_banked, Banked};

/// A server process that is killed when the test ends, passing or not.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Banks {
    _app: Banked,
    banks: BanksClient<Channel>,
}

async fn spawn_banks(extra: &[&str]) -> Banks {
    let app = spawn_banked(extra).await;
    Banks { banks: BanksClient::new(app.channel.clone()), _app: app }
}

fn add(bank: &str, text: &str) -> pb::AddExperienceRequest {
    pb::AddExperienceRequest { bank: bank.into(), text: text.into(), ..Default::default() }
}

#[tokio::test]
async fn the_experience_library_over_grpc() {
    let mut app = spawn_banks(&[]).await;
    let b = &mut app.banks;
    let bank = b.create_bank(pb::CreateBankRequest { name: "math".into(), ..Default::default() }).await.unwrap().into_inner();
    assert_eq!((bank.version, bank.size, bank.max_size, bank.kind), (0, 0, 100, pb::BankKind::Experience as i32));
    assert_eq!(bank.embedder.unwrap().name, "hash-ngram-v1");
    let w = b.add_experience(add("math", "When solving equations, verify solutions by substitution.")).await.unwrap().into_inner();
    assert_eq!((w.id.as_str(), w.version), ("G0", 1));
    b.add_experience(pb::AddExperienceRequest {
        group_advantages: vec![1.1, -0.2, 0.3],
        domain: Some("math".into()),
        ..add("math", "For optimization, check boundary conditions first.")
    })
    .await
    .unwrap();
    let e = b.get_experience(pb::GetExperienceRequest { bank: "math".into(), id: "G1".into() }).await.unwrap().into_inner();
    assert_eq!((e.confidence, e.domain.as_str()), (1.0, "math"), "confidence = min(1, max − min)");
    let flat = b.add_experience(pb::AddExperienceRequest { group_advantages: vec![0.5, 0.5], ..add("math", "x") }).await.unwrap_err();
    assert_eq!(flat.code(), Code::FailedPrecondition, "{flat:?}");

    let ops = r#"[{"option": "add", "experience": "In probability, use conditional probability when events are dependent."},
                  {"operation": "UPDATE", "id": "G0", "content": "Verify solutions by substituting them back."},
                  {"option": "keep", "reason": "fine"}]"#;
    let r = b
        .apply_operations(pb::ApplyOperationsRequest {
            bank: "math".into(),
            operations_json: ops.into(),
            expected_version: Some(2),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((r.version, r.applied), (3, 2));
    assert_eq!(r.results[0].id, "G2");
    assert_eq!(r.results[2].status, pb::OperationStatus::Kept as i32);
    assert_eq!(r.results[2].ignored_keys, vec!["reason".to_string()]);

    let p = b.format_for_prompt(pb::FormatForPromptRequest { bank: "math".into(), ..Default::default() }).await.unwrap().into_inner();
    assert_eq!(
        p.text,
        "[G0]. Verify solutions by substituting them back.\n[G1]. For optimization, check boundary conditions first.\n\
         [G2]. In probability, use conditional probability when events are dependent."
    );
    let sys = b
        .format_for_prompt(pb::FormatForPromptRequest {
            bank: "math".into(),
            query: "verify solutions by substituting them".into(),
            top_k: 1,
            system: Some("You are a math tutor.".into()),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(sys.text, "You are a math tutor.\n\n# Learned Experiences\n[G0]. Verify solutions by substituting them back.");

    let hits = b
        .retrieve(pb::RetrieveRequest {
            bank: "math".into(),
            query: "verify the solution by substitution".into(),
            top_k: 2,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(hits.path, "exact");
    assert_eq!(hits.hits[0].id, "G0");
    assert!(hits.hits[0].similarity >= hits.hits[1].similarity);
    let stats = b.get_stats(pb::GetStatsRequest { bank: "math".into() }).await.unwrap().into_inner();
    assert_eq!((stats.total_experiences, stats.domains.get("math").copied(), stats.total_usage), (3, Some(1), 3));

    let page1 = b
        .list_experiences(pb::ListExperiencesRequest { bank: "math".into(), page_size: 2, ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((page1.experiences.len(), page1.total), (2, 3));
    let page2 = b
        .list_experiences(pb::ListExperiencesRequest {
            bank: "math".into(),
            page_size: 2,
            page_token: page1.next_page_token,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(page2.experiences.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), ["G2"]);
    assert!(page2.next_page_token.is_empty());

    let out =
        b.export_bank(pb::ExportBankRequest { bank: "math".into(), format: pb::BankFormat::SeedJson as i32 }).await.unwrap().into_inner();
    assert!(out.data.starts_with(r#"{"experiences": {"G0": "Verify"#), "{}", out.data);
    assert!(out.data.ends_with(r#""next_id": 3}"#), "{}", out.data);
    let list = b.list_banks(pb::ListBanksRequest {}).await.unwrap().into_inner();
    assert_eq!(list.banks.iter().map(|b| (b.name.as_str(), b.size)).collect::<Vec<_>>(), [("math", 3)]);
}

#[tokio::test]
async fn bank_errors_carry_the_right_codes_and_name_the_field() {
    let mut app = spawn_banks(&[]).await;
    let b = &mut app.banks;
    b.create_bank(pb::CreateBankRequest { name: "lib".into(), ..Default::default() }).await.unwrap();
    let code = |r: Result<tonic::Response<pb::WriteResponse>, tonic::Status>| r.unwrap_err();
    let e = b.create_bank(pb::CreateBankRequest { name: "lib".into(), ..Default::default() }).await.unwrap_err();
    assert_eq!(e.code(), Code::AlreadyExists);
    let e = b.create_bank(pb::CreateBankRequest { name: "no/slash".into(), ..Default::default() }).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("name"), "{}", e.message());
    let e = code(b.add_experience(add("missing", "x")).await);
    assert_eq!(e.code(), Code::NotFound);
    let e = code(
        b.modify_experience(pb::ModifyExperienceRequest { bank: "lib".into(), id: "G7".into(), text: "x".into(), ..Default::default() })
            .await,
    );
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.message().contains("G7"), "{}", e.message());
    let e = code(b.add_experience(pb::AddExperienceRequest { confidence: Some(1.5), ..add("lib", "x") }).await);
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("confidence"), "{}", e.message());
    let e = code(b.add_experience(add("lib", &"x".repeat(4_001))).await);
    assert_eq!(e.code(), Code::ResourceExhausted);
    b.add_experience(add("lib", "one")).await.unwrap();
    let e = code(b.add_experience(pb::AddExperienceRequest { expected_version: Some(0), ..add("lib", "two") }).await);
    assert_eq!(e.code(), Code::Aborted);
    let bad = r#"[{"option":"add","experience":"ok"},{"option":"merge","merged_from":["G0","G0"],"experience":"x"}]"#;
    let e = b
        .apply_operations(pb::ApplyOperationsRequest { bank: "lib".into(), operations_json: bad.into(), ..Default::default() })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("operations[1].merged_from"), "{}", e.message());
    let too_many = format!("[{}]", vec![r#"{"option":"keep"}"#; 1_001].join(","));
    let e = b
        .apply_operations(pb::ApplyOperationsRequest { bank: "lib".into(), operations_json: too_many, ..Default::default() })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted);
    let e = b.compress(pb::CompressRequest { bank: "lib".into(), strategy: "fastest".into(), ..Default::default() }).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("strategy"), "{}", e.message());
    let e = b.merge_similar(pb::MergeSimilarRequest { bank: "lib".into(), use_llm: true, ..Default::default() }).await.unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "no LLM endpoint: {}", e.message());
    let e =
        b.import_bank(pb::ImportBankRequest { bank: "lib2".into(), format: 0, data: "{}".into(), ..Default::default() }).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    let stats = b.get_stats(pb::GetStatsRequest { bank: "lib".into() }).await.unwrap().into_inner();
    assert_eq!((stats.total_experiences, stats.version), (1, 1), "no refused write changed anything");
}

/// Starts the binary on `dir` (with `vars`), creates bank "lib" and writes 20 acknowledged experiences.
async fn binary_with_20(dir: &str, vars: &[(&str, &str)]) -> (Killed, BanksClient<Channel>) {
    let (child, addr) = start_binary_env(&["--banks-dir", dir], vars);
    let child = Killed(child);
    let mut b = BanksClient::new(Channel::from_shared(format!("http://{addr}")).unwrap().connect().await.unwrap());
    b.create_bank(pb::CreateBankRequest { name: "lib".into(), ..Default::default() }).await.unwrap();
    for i in 0..20 {
        b.add_experience(add("lib", &format!("acknowledged experience {i}"))).await.unwrap();
    }
    (child, b)
}

/// Restarts the binary on `dir`.
async fn reopen(dir: &str) -> (Killed, BanksClient<Channel>) {
    let (child, addr) = start_binary(&["--banks-dir", dir]);
    (Killed(child), BanksClient::new(Channel::from_shared(format!("http://{addr}")).unwrap().connect().await.unwrap()))
}

/// An ApplyOperations batch of `n` adds.
fn batch_of(n: usize) -> pb::ApplyOperationsRequest {
    let ops: Vec<String> =
        (0..n).map(|i| format!(r#"{{"option":"add","experience":"batch experience {i} with some words to embed"}}"#)).collect();
    pb::ApplyOperationsRequest { bank: "lib".into(), operations_json: format!("[{}]", ops.join(",")), ..Default::default() }
}

/// The process dies in the middle of a commit's transaction (the store's crash hook aborts it after 500
/// rows of a batch): after a restart none of the batch is there, and every write acknowledged before it
/// is. Once through the write-ahead log (a batch one short of the bulk size) and once through the
/// rollback journal that a bulk commit uses (`sqlite::BULK_ROWS`), whose leftover journal the restart
/// rolls back.
#[tokio::test]
async fn a_crash_in_the_middle_of_a_commit_leaves_no_half_batch() {
    use memgym::banks::store::sqlite::{BULK_ROWS, CRASH_AFTER_ROWS_ENV};
    for size in [BULK_ROWS - 1, BULK_ROWS] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display().to_string();
        let (mut first, mut b) = binary_with_20(&d, &[(CRASH_AFTER_ROWS_ENV, "500")]).await;
        assert!(b.apply_operations(batch_of(size)).await.is_err(), "the server died before answering ({size} rows)");
        let status = first.0.wait().unwrap();
        assert!(!status.success(), "aborted: {status}");
        // Which path the batch took: only the bulk one leaves a rollback journal behind.
        assert_eq!(dir.path().join("banks.db-journal").exists(), size >= BULK_ROWS, "the journal after {size} rows");

        let (_child, mut b) = reopen(&d).await;
        let stats = b.get_stats(pb::GetStatsRequest { bank: "lib".into() }).await.unwrap().into_inner();
        assert_eq!(
            (stats.total_experiences, stats.version),
            (20, 20),
            "the half-written batch of {size} is gone, the acknowledged writes are there"
        );
        let w = b.add_experience(add("lib", "after the crash")).await.unwrap().into_inner();
        assert_eq!(w.id, "G20");
    }
}

/// SIGKILL while a large batch is being written: after a restart the batch is all there or not at
/// all, and every write acknowledged before it is there.
#[tokio::test]
async fn a_batch_interrupted_by_sigkill_is_all_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let (mut first, b) = binary_with_20(&d, &[]).await;
    let mut client = b.clone();
    let call = tokio::spawn(async move { client.apply_operations(batch_of(1_000)).await });
    // Kill while the batch is in flight (parsed, embedded or being committed).
    tokio::time::sleep(Duration::from_millis(30)).await;
    Command::new("kill").args(["-KILL", &first.0.id().to_string()]).status().unwrap();
    let _ = first.0.wait();
    let acked = call.await.unwrap().is_ok();

    let (_child, mut b) = reopen(&d).await;
    let stats = b.get_stats(pb::GetStatsRequest { bank: "lib".into() }).await.unwrap().into_inner();
    assert!(stats.total_experiences == 20 || stats.total_experiences == 1_020, "half a batch: {}", stats.total_experiences);
    if acked {
        assert_eq!(stats.total_experiences, 1_020, "an acknowledged batch was lost");
    }
    let first = b.get_experience(pb::GetExperienceRequest { bank: "lib".into(), id: "G19".into() }).await.unwrap().into_inner();
    assert_eq!(first.text, "acknowledged experience 19");
    // The counter continues after whatever is there.
    let w = b.add_experience(add("lib", "after the crash")).await.unwrap().into_inner();
    assert_eq!(w.id, format!("G{}", stats.total_experiences));
}

/// Refusals leave nothing behind over the wire: a refused ImportBank or ImportAgentMemory creates no bank,
/// and a refused write does not move the version. Errors name the field under `data`.
#[tokio::test]
async fn refused_imports_and_writes_leave_no_trace() {
    let mut app = spawn_banks(&[]).await;
    let b = &mut app.banks;
    let bad = [
        (pb::BankFormat::UpstreamJson, r#"{"G0": "a", "G0": "b"}"#, "appears twice"),
        (pb::BankFormat::UpstreamJson, r#"{"G0": "ok", "G1": "\u001b[2J"}"#, "data.G1: holds U+001B"),
        (pb::BankFormat::SeedJson, r#"{"experiences": {"G0": "x\u202ey"}}"#, "data.experiences.G0: holds U+202E"),
    ];
    for (format, data, want) in bad {
        let e = b
            .import_bank(pb::ImportBankRequest { bank: "new".into(), format: format as i32, data: data.into(), ..Default::default() })
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
        assert!(e.message().contains(want), "{want}: {}", e.message());
    }
    let mut agent = memgym::api::pb::agent_memory_client::AgentMemoryClient::new(app._app.channel.clone());
    let e = agent
        .import_agent_memory(pb::ImportAgentMemoryRequest {
            bank: "mem".into(),
            data: r#"{"episode_log": [{"score": "x"}]}"#.into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("data.episode_log[0].score"), "{}", e.message());
    let e = agent
        .import_agent_memory(pb::ImportAgentMemoryRequest {
            bank: "mem".into(),
            data: "{}".into(),
            expected_version: Some(7),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Aborted, "{e:?}");
    let listed = b.list_banks(pb::ListBanksRequest {}).await.unwrap().into_inner();
    assert!(listed.banks.is_empty(), "no bank left behind: {listed:?}");
    // RecordEpisode refuses control and bidi characters, naming the field, and records nothing.
    b.create_bank(pb::CreateBankRequest { name: "agent".into(), kind: pb::BankKind::Agent as i32, ..Default::default() }).await.unwrap();
    let e = agent
        .record_episode(pb::RecordEpisodeRequest {
            bank: "agent".into(),
            task_id: Some("qa".into()),
            mistakes: vec!["ok".into(), "\u{1b}]0;pwned\u{7}".into()],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("mistakes[1]: holds U+001B"), "{}", e.message());
    let bank = b.get_bank(pb::GetBankRequest { name: "agent".into() }).await.unwrap().into_inner();
    assert_eq!(bank.version, 0, "nothing recorded");
}

/// A library over one gRPC message (32 MiB) arrives by ImportBankStream in 4 MiB chunks and is the same
/// one write as ImportBank; a stream that breaks its rules writes nothing.
#[tokio::test]
async fn a_library_over_one_message_is_imported_by_stream() {
    let mut app = spawn_banks(&[]).await;
    let b = &mut app.banks;
    // 10,000 experiences of 3,500 characters: about 35 MB of JSON.
    let lib: serde_json::Map<String, serde_json::Value> =
        (0..10_000).map(|i| (format!("G{i}"), format!("Expérience {i}: {}", ["vérifier"; 388].join(" ")).into())).collect();
    let data = serde_json::to_vec(&lib).unwrap();
    assert!(data.len() > memgym::api::MAX_MESSAGE_BYTES, "{} bytes", data.len());
    let whole = pb::ImportBankRequest {
        bank: "big".into(),
        format: pb::BankFormat::UpstreamJson as i32,
        data: String::from_utf8(data.clone()).unwrap(),
        ..Default::default()
    };
    let over = b.import_bank(whole).await.unwrap_err();
    assert_eq!(over.code(), Code::OutOfRange, "one message is capped: {over:?}");

    let chunks = memgym::api::grpc::import_chunks("big", pb::BankFormat::UpstreamJson, &data, 4 << 20);
    assert!(chunks.len() >= 9);
    let r = b.import_bank_stream(futures_util::stream::iter(chunks)).await.unwrap().into_inner();
    assert_eq!((r.imported, r.version, r.next_id), (10_000, 1, 10_000));
    let e = b.get_experience(pb::GetExperienceRequest { bank: "big".into(), id: "G9999".into() }).await.unwrap().into_inner();
    assert_eq!(e.text, lib["G9999"].as_str().unwrap());

    // A later message naming another bank, or a different option, is refused and nothing is written.
    let head = |bank: &str| pb::ImportBankChunk {
        bank: bank.into(),
        format: pb::BankFormat::UpstreamJson as i32,
        data: b"{".to_vec(),
        ..Default::default()
    };
    let tail = pb::ImportBankChunk { bank: "other".into(), data: br#""G0": "x"}"#.to_vec(), ..Default::default() };
    let e = b.import_bank_stream(futures_util::stream::iter(vec![head("small"), tail])).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("bank"), "{e:?}");
    let replace = pb::ImportBankChunk { replace: true, data: br#""G0": "x"}"#.to_vec(), ..Default::default() };
    let e = b.import_bank_stream(futures_util::stream::iter(vec![head("small"), replace])).await.unwrap_err();
    assert!(e.code() == Code::InvalidArgument && e.message().contains("replace"), "{e:?}");
    let e = b.import_bank_stream(futures_util::stream::iter(Vec::<pb::ImportBankChunk>::new())).await.unwrap_err();
    assert!(e.code() == Code::InvalidArgument && e.message().contains("bank"), "{e:?}");
    let missing = b.get_bank(pb::GetBankRequest { name: "small".into() }).await.unwrap_err();
    assert_eq!(missing.code(), Code::NotFound);
    // And a valid small stream imports.
    let tail = pb::ImportBankChunk { data: br#""G0": "x"}"#.to_vec(), ..Default::default() };
    let r = b.import_bank_stream(futures_util::stream::iter(vec![head("small"), tail])).await.unwrap().into_inner();
    assert_eq!(r.imported, 1);
}
