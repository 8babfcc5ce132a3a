//! The Learn service through a real gRPC client: the server in-process on loopback with its banks in a
//! temporary SQLite directory, and a real HTTP server on loopback speaking the OpenAI chat API as the LLM.

use memgym::api::pb;
use memgym::api::pb::banks_client::BanksClient;
use memgym::api::pb::learn_client::LearnClient;
use tonic::transport::Channel;
use tonic::Code;

use crate::fake_openai::{last_user, Canned, FakeOpenAi};
use crate::helpers::{spawn_banked, Banked};

/// The LLM: numbered steps, one operation per group, and a consolidation that keeps what it gets
/// unless the library says "refuse".
fn teacher(body: &serde_json::Value) -> Canned {
    let prompt = last_user(body);
    if prompt.contains("Summarise this attempt") {
        Canned::answer("1. Read the task.\n2. Checked the discriminant.")
    } else if prompt.contains("Compare the better attempts") {
        Canned::answer("```json\n[{\"option\": \"add\", \"experience\": \"Check the discriminant first.\"}]\n```")
    } else if prompt.contains("Combine them into one final plan") && prompt.contains("refuse") {
        Canned::answer("No.")
    } else if prompt.contains("Combine them into one final plan") {
        Canned::answer(r#"[{"option": "add", "experience": "Check the discriminant before solving."}]"#)
    } else {
        Canned::answer("?")
    }
}

async fn learn_app(llm: &FakeOpenAi) -> (Banked, BanksClient<Channel>, LearnClient<Channel>) {
    let app = spawn_banked(&["--llm-base-url", llm.url.as_str(), "--llm-model", "teacher"]).await;
    let (b, l) = (BanksClient::new(app.channel.clone()), LearnClient::new(app.channel.clone()));
    (app, b, l)
}

fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).expect("JSON")
}

fn traj(reward: f64) -> pb::Trajectory {
    pb::Trajectory {
        query: "Solve x^2+2x+5=0".into(),
        output: format!("attempt scoring {reward}"),
        reward,
        groundtruth: Some("none".into()),
        summary: None,
    }
}

#[tokio::test]
async fn learn_from_group_over_grpc_applies_the_consolidated_plan() {
    let llm = FakeOpenAi::start(teacher).await;
    let (_app, mut banks, mut learn) = learn_app(&llm).await;
    banks.create_bank(pb::CreateBankRequest { name: "lib".into(), ..Default::default() }).await.unwrap();
    let groups =
        vec![pb::TrajectoryGroup { trajectories: vec![traj(1.0), traj(0.0)] }, pb::TrajectoryGroup { trajectories: vec![traj(1.0)] }];
    let r = learn
        .learn_from_group(pb::LearnFromGroupRequest { bank: "lib".into(), groups: groups.clone(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.groups[0].summaries, vec!["1. Read the task.\n2. Checked the discriminant."; 2]);
    assert_eq!((r.groups[0].confidence, r.groups[0].skipped.as_str()), (Some(1.0), ""));
    assert_eq!(json(&r.groups[0].operations_json), json(r#"[{"option":"add","experience":"Check the discriminant first."}]"#));
    assert_eq!(r.groups[1].skipped, "no reward variation");
    assert_eq!(json(&r.plan_json), json(r#"[{"option":"add","experience":"Check the discriminant before solving."}]"#));
    assert_eq!((r.applied, r.version, r.results[0].id.as_str(), r.fallback.as_str()), (true, 1, "G0", ""));
    let e = banks.get_experience(pb::GetExperienceRequest { bank: "lib".into(), id: "G0".into() }).await.unwrap().into_inner();
    assert_eq!((e.text.as_str(), e.confidence), ("Check the discriminant before solving.", 1.0));

    // Stale version, bad input, unknown bank.
    let stale = pb::LearnFromGroupRequest { bank: "lib".into(), groups: groups.clone(), expected_version: Some(0), ..Default::default() };
    assert_eq!(learn.learn_from_group(stale).await.unwrap_err().code(), Code::Aborted);
    let mut bad = groups.clone();
    bad[0].trajectories[1].reward = 2.0;
    let e = learn.learn_from_group(pb::LearnFromGroupRequest { bank: "lib".into(), groups: bad, ..Default::default() }).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("groups[0].trajectories[1].reward"), "{}", e.message());
    let e = learn.learn_from_group(pb::LearnFromGroupRequest { bank: "nope".into(), groups, ..Default::default() }).await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
}

#[tokio::test]
async fn the_stage_rpcs_run_one_stage_each() {
    let llm = FakeOpenAi::start(teacher).await;
    let (_app, _banks, mut learn) = learn_app(&llm).await;
    let s = learn
        .summarize_trajectory(pb::SummarizeTrajectoryRequest { trajectory: Some(traj(1.0)), use_groundtruth: Some(false) })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(s.summary, "1. Read the task.\n2. Checked the discriminant.");
    assert!(!last_user(&llm.requests().last().unwrap().body).contains("Correct answer"), "use_groundtruth false");
    let e = learn
        .summarize_trajectory(pb::SummarizeTrajectoryRequest { trajectory: Some(traj(-1.0)), ..Default::default() })
        .await
        .unwrap_err();
    assert!(e.code() == Code::InvalidArgument && e.message().contains("trajectory.reward"), "{}", e.message());

    let flat = learn
        .extract_group_operations(pb::ExtractGroupOperationsRequest { trajectories: vec![traj(0.0), traj(0.0)], ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((flat.operations_json.as_str(), flat.skipped.as_str(), flat.confidence), ("[]", "no reward variation", None));
    let asked = llm.requests().len();
    let ops = learn
        .extract_group_operations(pb::ExtractGroupOperationsRequest {
            trajectories: vec![traj(0.0), traj(1.0)],
            experiences: "[G0]. Verify by substitution.".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(llm.requests().len(), asked + 1);
    assert!(last_user(&llm.requests().last().unwrap().body).contains("[G0]. Verify by substitution."));
    assert_eq!(
        (json(&ops.operations_json), ops.confidence),
        (json(r#"[{"option":"add","experience":"Check the discriminant first."}]"#), Some(1.0))
    );

    let plan = learn
        .consolidate_operations(pb::ConsolidateOperationsRequest {
            group_operations_json: vec![ops.operations_json.clone()],
            experiences: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (json(&plan.operations_json), plan.fallback.as_str()),
        (json(r#"[{"option":"add","experience":"Check the discriminant before solving."}]"#), "")
    );
    let fallback = learn
        .consolidate_operations(pb::ConsolidateOperationsRequest {
            group_operations_json: vec![ops.operations_json.clone(), r#"[{"operation":"DELETE","id":"G0"}]"#.into()],
            experiences: "[G0]. refuse".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(fallback.fallback.contains("flattened"), "{}", fallback.fallback);
    assert_eq!(
        json(&fallback.operations_json),
        json(r#"[{"option":"add","experience":"Check the discriminant first."},{"option":"delete","delete_id":"G0"}]"#)
    );
    let e = learn
        .consolidate_operations(pb::ConsolidateOperationsRequest {
            group_operations_json: vec!["[]".into(), "not json".into()],
            experiences: String::new(),
        })
        .await
        .unwrap_err();
    assert!(e.code() == Code::InvalidArgument && e.message().contains("group_operations_json[1]"), "{}", e.message());
}

#[tokio::test]
async fn without_an_llm_learning_is_failed_precondition() {
    let app = spawn_banked(&[]).await;
    let mut learn = LearnClient::new(app.channel.clone());
    let e = learn
        .extract_group_operations(pb::ExtractGroupOperationsRequest { trajectories: vec![traj(0.0), traj(1.0)], ..Default::default() })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert!(e.message().contains("--llm-base-url"), "{}", e.message());
}
