//! The AgentMemory service (the agent-memory design) through a real gRPC client against the real binary: a session's
//! calls, 64 concurrent RecordEpisode calls, and SIGKILL while a consolidation waits on the LLM (a real
//! HTTP server on loopback speaking the OpenAI API).

use std::process::Command;
use std::time::Duration;

use memgym::api::pb;
use memgym::api::pb::agent_memory_client::AgentMemoryClient;
use memgym::api::pb::banks_client::BanksClient;
use tonic::transport::Channel;
use tonic::Code;

use crate::binary::start_binary;
use crate::fake_openai::{Canned, FakeOpenAi};

/// A server process that is killed when the test ends, passing or not.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn clients(flags: &[&str]) -> (Killed, BanksClient<Channel>, AgentMemoryClient<Channel>) {
    let (child, addr) = start_binary(flags);
    let channel = Channel::from_shared(format!("http://{addr}")).unwrap().connect().await.unwrap();
    (Killed(child), BanksClient::new(channel.clone()), AgentMemoryClient::new(channel))
}

fn episode(bank: &str, task: &str, score: f64, summary: &str) -> pb::RecordEpisodeRequest {
    pb::RecordEpisodeRequest {
        bank: bank.into(),
        task_id: Some(task.into()),
        score: Some(score),
        steps: Some(3),
        trajectory_summary: summary.into(),
        successes: vec![format!("did {summary}")],
        mistakes: vec![format!("missed {summary}")],
        ..Default::default()
    }
}

async fn create_agent(banks: &mut BanksClient<Channel>, name: &str) {
    let b = banks
        .create_bank(pb::CreateBankRequest { name: name.into(), kind: pb::BankKind::Agent.into(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((b.kind(), b.version, b.size), (pb::BankKind::Agent, 0, 0));
}

#[tokio::test]
async fn an_agent_memory_session_over_grpc() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let (_server, mut banks, mut agent) = clients(&["--banks-dir", &d]).await;
    create_agent(&mut banks, "agent").await;
    let card = pb::MistakeCardInput { mistake_type: "wrong_tool".into(), lesson: "Search before answering.".into(), ..Default::default() };
    let r = agent
        .record_episode(pb::RecordEpisodeRequest { mistake_cards: vec![card.clone()], ..episode("agent", "qa", 0.3, "a guess") })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((r.version, r.total_episodes, r.rules_added.clone()), (1, 1, vec!["[AVOID] missed a guess".to_string()]));
    assert!(r.cards[0].new && r.cards[0].kept);
    let r = agent
        .record_episode(pb::RecordEpisodeRequest { mistake_cards: vec![card], ..episode("agent", "qa", 0.9, "a search") })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((r.cards[0].new, r.cards[0].seen_count), (false, 2));
    let ctx = agent
        .build_memory_context(pb::BuildMemoryContextRequest { bank: "agent".into(), task_id: Some("qa".into()), ..Default::default() })
        .await
        .unwrap()
        .into_inner()
        .context;
    let want = "## MEMORY FROM PAST EPISODES\n\
                \nRules for qa:\n  - [AVOID] missed a guess\n  - [WORKS] did a search\n\
                \nMistakes to avoid:\n  - AVOID: missed a guess\n  - AVOID: missed a search\n\
                \nStructured mistake cards:\n  - [wrong_tool, seen 2x] Search before answering. Evidence: \n\
                \nRecent qa episodes:\n  - Score 0.30 in 3 steps: a guess\n  - Score 0.90 in 3 steps: a search\n\
                \nYour mean score on qa: 0.60 (over 2 episodes)";
    assert_eq!(ctx, want);
    let s = agent.get_agent_summary(pb::GetAgentSummaryRequest { bank: "agent".into() }).await.unwrap().into_inner();
    assert_eq!((s.total_episodes, s.mistake_cards_stored, s.scores_by_task.get("qa").copied(), s.version), (2, 1, Some(0.6), 2));

    // Export, import into another bank, and the two render the same context.
    let data = agent.export_agent_memory(pb::ExportAgentMemoryRequest { bank: "agent".into() }).await.unwrap().into_inner().data;
    assert!(data.contains("\"mistake_cards\"") && data.contains("\"score_history\""), "{data}");
    let i = agent
        .import_agent_memory(pb::ImportAgentMemoryRequest { bank: "copy".into(), data, ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(i.total_episodes, 2);
    let copy = agent
        .build_memory_context(pb::BuildMemoryContextRequest { bank: "copy".into(), task_id: Some("qa".into()), ..Default::default() })
        .await
        .unwrap()
        .into_inner()
        .context;
    assert_eq!(copy, want);

    // Errors: the field, the kind, the version, the bank.
    let e = agent
        .record_episode(pb::RecordEpisodeRequest { score: Some(f64::INFINITY), ..episode("agent", "qa", 0.0, "x") })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("score"), "{}", e.message());
    banks.create_bank(pb::CreateBankRequest { name: "lib".into(), ..Default::default() }).await.unwrap();
    let e = agent.record_episode(episode("lib", "qa", 0.5, "x")).await.unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{}", e.message());
    let e = banks.format_for_prompt(pb::FormatForPromptRequest { bank: "agent".into(), ..Default::default() }).await.unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{}", e.message());
    let e =
        agent.record_episode(pb::RecordEpisodeRequest { expected_version: Some(1), ..episode("agent", "qa", 0.5, "x") }).await.unwrap_err();
    assert_eq!(e.code(), Code::Aborted);
    let e = agent.get_agent_summary(pb::GetAgentSummaryRequest { bank: "nope".into() }).await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    let e = agent
        .maybe_consolidate(pb::MaybeConsolidateRequest {
            bank: "agent".into(),
            mode: pb::ConsolidationMode::Llm.into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "no LLM configured: {}", e.message());
    let listed = banks.list_banks(pb::ListBanksRequest {}).await.unwrap().into_inner().banks;
    let kinds: Vec<(String, pb::BankKind)> = listed.iter().map(|b| (b.name.clone(), b.kind())).collect();
    assert_eq!(
        kinds,
        [("agent".into(), pb::BankKind::Agent), ("copy".into(), pb::BankKind::Agent), ("lib".into(), pb::BankKind::Experience)]
    );
}

/// The seed's memory file loses updates when episodes finish at once; here all 64 land.
#[tokio::test]
async fn sixty_four_concurrent_record_episode_calls_log_sixty_four_episodes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let (_server, mut banks, agent) = clients(&["--banks-dir", &d]).await;
    create_agent(&mut banks, "agent").await;
    let calls: Vec<_> = (0..64)
        .map(|i| {
            let mut a = agent.clone();
            tokio::spawn(async move { a.record_episode(episode("agent", &format!("t{}", i % 8), 0.5, &format!("run {i}"))).await })
        })
        .collect();
    for c in calls {
        c.await.unwrap().unwrap();
    }
    let mut agent = agent;
    let s = agent.get_agent_summary(pb::GetAgentSummaryRequest { bank: "agent".into() }).await.unwrap().into_inner();
    assert_eq!((s.total_episodes, s.version, s.episodes_by_task.values().sum::<u32>()), (64, 64, 64));
}

/// SIGKILL while MaybeConsolidate waits on the LLM: after a restart every recorded episode is there and
/// the consolidation is still due; it then runs.
#[tokio::test]
async fn sigkill_during_consolidation_loses_nothing() {
    let llm = FakeOpenAi::start(|_| Canned::answer("[\"Plan first.\", \"Check the answer.\"]").after(Duration::from_millis(3_000))).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let flags = ["--banks-dir", d.as_str(), "--llm-base-url", llm.url.as_str(), "--llm-model", "m"];
    let (mut first, mut banks, mut agent) = clients(&flags).await;
    create_agent(&mut banks, "agent").await;
    for i in 0..20 {
        agent.record_episode(episode("agent", "t", 0.9, &format!("run {i}"))).await.unwrap();
    }
    let mut a = agent.clone();
    let call =
        tokio::spawn(async move { a.maybe_consolidate(pb::MaybeConsolidateRequest { bank: "agent".into(), ..Default::default() }).await });
    for _ in 0..100 {
        if !llm.requests().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(llm.requests().len(), 1, "the consolidation is waiting on the LLM");
    Command::new("kill").args(["-KILL", &first.0.id().to_string()]).status().unwrap();
    let _ = first.0.wait();
    assert!(call.await.unwrap().is_err(), "the call died with the server");

    let (_second, _banks, mut agent) = clients(&flags).await;
    let s = agent.get_agent_summary(pb::GetAgentSummaryRequest { bank: "agent".into() }).await.unwrap().into_inner();
    assert_eq!((s.total_episodes, s.global_rules, s.version), (20, 0, 20), "every acknowledged episode, no half consolidation");
    let c = agent.maybe_consolidate(pb::MaybeConsolidateRequest { bank: "agent".into(), ..Default::default() }).await.unwrap().into_inner();
    assert!(c.ran && c.mode == "llm" && c.last_consolidated_at == Some(20), "{c:?}");
    assert_eq!(c.rules_added, ["[CONSOLIDATED] Plan first.", "[CONSOLIDATED] Check the answer."]);
}
