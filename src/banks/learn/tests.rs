//! LearnFromGroup on a real SQLite bank with a scripted LLM: every stage, the skips and fallbacks, the
//! version check, and the limits.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::banks::experience::{NewFields, OpStatus};
use crate::banks::tests::banks_with_llm;
use crate::banks::Kind;
use crate::llm::fake::ScriptedChat;
use crate::llm::{ChatRequest, LlmError};

/// Which stage a request belongs to (by the prompt's wording).
fn stage(r: &ChatRequest) -> &'static str {
    let user = &r.messages[1].content;
    if user.contains("Summarise this attempt") {
        "summary"
    } else if user.contains("Compare the better attempts") {
        "extract"
    } else if user.contains("In at most five sentences") {
        "critique"
    } else if user.contains("Update the library with this lesson") {
        "update"
    } else if user.contains("Combine them into one final plan") {
        "consolidate"
    } else {
        "other"
    }
}

type Reply = Arc<dyn Fn(&ChatRequest) -> Result<String, LlmError> + Send + Sync>;

async fn setup(reply: Reply, delay: Duration) -> (tempfile::TempDir, Arc<Banks>, Arc<ScriptedChat>) {
    let dir = tempfile::tempdir().unwrap();
    let mut chat = ScriptedChat::new(move |r| reply(r));
    chat.delay = delay;
    let chat = Arc::new(chat);
    let llm = Arc::new(Llm::new(chat.clone(), 0));
    let b = Arc::new(banks_with_llm(dir.path(), Some(llm)));
    b.create("lib", Kind::Experience, None, false).await.unwrap();
    b.add("lib", "Verify solutions by substitution.", NewFields::default(), None).await.unwrap();
    (dir, b, chat)
}

fn traj(query: &str, reward: f64) -> Trajectory {
    Trajectory {
        query: query.into(),
        output: format!("an attempt scoring {reward}"),
        reward,
        groundtruth: Some("No real solutions".into()),
        summary: None,
    }
}

fn standard(r: &ChatRequest) -> Result<String, LlmError> {
    Ok(match stage(r) {
        "summary" => "1. Wrote the equation.\n2. Checked the discriminant.".into(),
        "extract" => "Here is what I found:\n```json\n[{\"option\": \"add\", \"experience\": \"Check the discriminant first.\"}, {\"option\": \"keep\"}]\n```".into(),
        "consolidate" => r#"[{"option":"add","experience":"Check the discriminant before solving a quadratic."},
                             {"option":"modify","modified_from":"G9","experience":"Nothing to modify."}]"#
            .into(),
        other => format!("unexpected stage {other}"),
    })
}

#[tokio::test]
async fn three_stages_summarise_extract_consolidate_and_apply() {
    let (_dir, b, chat) = setup(Arc::new(standard), Duration::ZERO).await;
    let groups =
        vec![vec![traj("Solve x^2+2x+5=0", 1.0), traj("Solve x^2+2x+5=0", 0.0)], vec![traj("Solve 2x=4", 1.0), traj("Solve 2x=4", 1.0)]];
    let r = b.learn_from_group("lib", groups, &LearnOptions::default()).await.unwrap();
    let g = &r.groups[0];
    assert_eq!(g.summaries, vec![Some("1. Wrote the equation.\n2. Checked the discriminant.".to_string()); 2]);
    assert_eq!((g.operations.len(), g.confidence, g.skipped.clone()), (1, Some(1.0), None));
    assert_eq!((r.groups[1].skipped.as_deref(), r.groups[1].summaries.clone()), (Some("no reward variation"), vec![None, None]));
    assert_eq!((r.plan.len(), r.fallback.clone(), r.applied, r.version), (2, None, true, 2));
    assert_eq!(r.results[0].status, OpStatus::Applied);
    assert_eq!((r.results[1].status, r.results[1].kind), (OpStatus::NotFound, "modify"), "reported, not fatal");
    let added = b.read("lib", |lib| lib.get(1).cloned()).await.unwrap().unwrap();
    assert_eq!((added.text.as_str(), added.confidence), ("Check the discriminant before solving a quadratic.", 1.0));
    // What the LLM was asked: two summaries (the varied group only), one extraction that saw the library, one consolidation.
    let seen = chat.seen.lock().clone();
    let stages: Vec<&str> = seen.iter().map(stage).collect();
    assert_eq!((stages.iter().filter(|s| **s == "summary").count(), stages.iter().filter(|s| **s == "extract").count()), (2, 1));
    assert_eq!(stages.last(), Some(&"consolidate"));
    let extract = seen.iter().find(|r| stage(r) == "extract").unwrap();
    assert!(extract.messages[1].content.contains("[G0]. Verify solutions by substitution."));
    assert!(seen.iter().all(|r| r.temperature == 0.0));
}

#[tokio::test]
async fn failures_skip_groups_or_fall_back_and_say_so() {
    let reply: Reply = Arc::new(|r: &ChatRequest| {
        let user = &r.messages[1].content;
        match stage(r) {
            "extract" if user.contains("broken") => Err(LlmError::BadReply { message: "no JSON".into() }),
            "extract" => Ok(r#"[{"option":"add","experience":"One."},{"option":"add","experience":"Two."},{"option":"add","experience":"Three."},{"option":"add"},{"option":"add","experience":"Four."}]"#.into()),
            "consolidate" => Ok("I would rather not.".into()),
            _ => standard(r),
        }
    });
    let (_dir, b, _) = setup(reply, Duration::ZERO).await;
    let groups = vec![vec![traj("broken task", 1.0), traj("broken task", 0.0)], vec![traj("fine task", 0.0), traj("fine task", 0.5)]];
    let r = b.learn_from_group("lib", groups, &LearnOptions::default()).await.unwrap();
    assert!(r.groups[0].skipped.as_deref().unwrap().starts_with("stage 2 (group operations) failed"), "{:?}", r.groups[0].skipped);
    let g = &r.groups[1];
    assert_eq!((g.operations.len(), g.confidence), (3, Some(0.5)), "max_operations 3");
    assert_eq!(g.rejected.len(), 2, "{:?}", g.rejected);
    assert!(g.rejected.iter().any(|m| m.starts_with("operations[3]")), "the malformed op named by index: {:?}", g.rejected);
    assert!(r.fallback.as_deref().unwrap().contains("unconsolidated"), "{:?}", r.fallback);
    assert_eq!((r.plan.len(), r.applied), (3, true));
    let confidences = b.read("lib", |lib| lib.iter().map(|e| e.confidence).collect::<Vec<_>>()).await.unwrap();
    assert_eq!(confidences, vec![0.5, 0.5, 0.5, 0.5], "the default 0.5, then three at the group's spread");
}

#[tokio::test]
async fn dry_runs_change_nothing_and_a_concurrent_write_aborts_the_plan() {
    let (_dir, b, _) = setup(Arc::new(standard), Duration::from_millis(300)).await;
    let groups = vec![vec![traj("q", 1.0), traj("q", 0.0)]];
    let dry = b.learn_from_group("lib", groups.clone(), &LearnOptions { dry_run: true, ..LearnOptions::default() }).await.unwrap();
    assert_eq!((dry.applied, dry.plan.len(), dry.version), (false, 2, 1));
    assert_eq!(b.read("lib", |lib| lib.len()).await.unwrap(), 1);
    let e = b
        .learn_from_group("lib", groups.clone(), &LearnOptions { expected_version: Some(0), ..LearnOptions::default() })
        .await
        .unwrap_err();
    assert!(matches!(e, BankError::VersionConflict { current: 1, .. }), "{e}");
    // A write lands while the LLM thinks: the plan is refused, not written over it.
    let call = {
        let b = Arc::clone(&b);
        tokio::spawn(async move { b.learn_from_group("lib", groups, &LearnOptions::default()).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    b.add("lib", "Written meanwhile.", NewFields::default(), None).await.unwrap();
    let e = call.await.unwrap().unwrap_err();
    assert!(matches!(e, BankError::VersionConflict { expected: 1, current: 2, .. }), "{e}");
    assert_eq!(b.read("lib", |lib| lib.len()).await.unwrap(), 2);
}

#[tokio::test]
async fn four_stages_critique_then_update_in_upstreams_vocabulary() {
    let reply: Reply = Arc::new(|r: &ChatRequest| {
        Ok(match stage(r) {
            "critique" => "The better attempt checked the discriminant.".into(),
            "update" => {
                r#"[{"operation":"ADD","content":"Check the discriminant."},{"operation":"DELETE","id":"G0","content":null}]"#.into()
            }
            "consolidate" => r#"[{"operation":"ADD","content":"Check the discriminant."},{"operation":"DELETE","id":"G0"}]"#.into(),
            _ => standard(r)?,
        })
    });
    let (_dir, b, chat) = setup(reply, Duration::ZERO).await;
    let groups = vec![vec![Trajectory { summary: Some("1. given".into()), ..traj("q", 1.0) }, traj("q", 0.0)]];
    let r = b.learn_from_group("lib", groups, &LearnOptions { mode: Mode::FourStage, ..LearnOptions::default() }).await.unwrap();
    assert_eq!(r.groups[0].critique.as_deref(), Some("The better attempt checked the discriminant."));
    assert_eq!(r.groups[0].summaries[0].as_deref(), Some("1. given"), "a given summary is kept");
    assert_eq!(r.groups[0].operations.len(), 2);
    let texts = b.read("lib", |lib| lib.iter().map(|e| e.text.clone()).collect::<Vec<_>>()).await.unwrap();
    assert_eq!(texts, ["Check the discriminant."], "the DELETE without content deleted (upstream dropped it)");
    let stages: Vec<&str> = chat.seen.lock().iter().map(stage).collect();
    assert_eq!(stages, ["summary", "critique", "update", "consolidate"]);
}

#[tokio::test]
async fn variation_rules_validation_and_no_llm() {
    let g = |rs: &[f64]| rs.iter().map(|r| traj("q", *r)).collect::<Vec<_>>();
    assert_eq!(variation(&g(&[0.5, 0.5]), Variation::Spread), None);
    assert_eq!(variation(&g(&[0.5, 0.5]), Variation::MeanBetween), Some(0.0));
    assert_eq!(variation(&g(&[1.0, 1.0]), Variation::MeanBetween), None);
    assert_eq!(variation(&g(&[0.0, 0.25, 1.0]), Variation::Spread), Some(1.0));
    assert_eq!(variation(&g(&[0.0, 0.25]), Variation::MeanBetween), Some(0.25));
    let o = LearnOptions::default();
    let field = |e: BankError| {
        let BankError::InvalidArgument(crate::util::invalid::Invalid { field, .. }) = e else { panic!("{e}") };
        field
    };
    assert_eq!(field(validate(&[], &o).unwrap_err()), "groups");
    assert_eq!(field(validate(&[g(&[0.0, 1.5])], &o).unwrap_err()), "groups[0].trajectories[1].reward");
    assert_eq!(field(validate(&[g(&[f64::NAN])], &o).unwrap_err()), "groups[0].trajectories[0].reward");
    assert_eq!(field(validate(&[vec![]], &o).unwrap_err()), "groups[0].trajectories");
    assert_eq!(field(validate(&[g(&[1.0])], &LearnOptions { max_operations: 0, ..o.clone() }).unwrap_err()), "max_operations");
    let big = vec![traj("q", 0.0); MAX_GROUP_SIZE + 1];
    assert!(matches!(validate(&[big], &o), Err(BankError::ResourceExhausted { .. })));
    let dir = tempfile::tempdir().unwrap();
    let b = banks_with_llm(dir.path(), None);
    b.create("lib", Kind::Experience, None, false).await.unwrap();
    assert!(matches!(b.learn_from_group("lib", vec![g(&[0.0, 1.0])], &o).await, Err(BankError::FailedPrecondition { .. })));
}

#[test]
fn operation_replies_are_read_where_they_can_be_and_reported_where_they_cannot() {
    let limits = OpLimits::default();
    let read = |reply: &str| read_operations(reply, 3, &limits);
    // Prose around a fenced array, an unknown option, a keep, and an op past the cap.
    let (ops, rejected) = read(
        "Sure! Based on the attempts:\n```json\n[{\"option\":\"add\",\"experience\":\"A.\"},{\"option\":\"rewrite\",\"experience\":\"B.\"},\
         {\"option\":\"keep\"},{\"option\":\"add\",\"experience\":\"C.\"},{\"option\":\"add\",\"experience\":\"D.\"},{\"option\":\"add\",\"experience\":\"E.\"}]\n```\nHope this helps.",
    )
    .unwrap();
    assert_eq!(ops.iter().map(Op::kind).collect::<Vec<_>>(), ["add", "add", "add"]);
    assert_eq!(rejected.len(), 2, "{rejected:?}");
    assert!(rejected[0].starts_with("operations[1]") && rejected[0].contains("rewrite"), "{rejected:?}");
    assert!(rejected[1].contains("beyond the 3"), "{rejected:?}");
    // An object wrapping the operations, upstream's vocabulary, trailing prose without a fence.
    let (ops, rejected) = read(r#"{"operations": [{"operation": "UPDATE", "id": "g2", "content": "Better."}]} -- done"#).unwrap();
    assert_eq!((ops, rejected.len()), (vec![Op::Modify { id: 2, text: "Better.".into(), confidence: None, domain: None }], 0));
    // A reply cut by its token limit keeps its complete leading operations and says so.
    let (ops, rejected) = read(r#"[{"option":"add","experience":"Kept."},{"option":"add","experience":"Lo"#).unwrap();
    assert_eq!(ops, vec![Op::Add { text: "Kept.".into(), confidence: None, domain: None }]);
    assert!(rejected.len() == 1 && rejected[0].contains("cut off after 1 complete"), "{rejected:?}");
    assert!(read(r#"[{"option":"add","experi"#).unwrap_err().contains("cut off after 0"));
    // Nothing that parses, and an empty array.
    assert!(read("I have no suggestions.").is_err());
    assert_eq!(read("[]").unwrap(), (vec![], vec![]));
}
