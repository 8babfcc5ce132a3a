//! `memgym learn`, the real binary against the real server on 127.0.0.1:0, with one fake OpenAI endpoint
//! as both the policy and the server's learner: a policy that writes the answer whenever a learned
//! experience tells it to gains significantly in the A/B; one that ignores its prompt shows no difference.
//! Every epoch's rollouts replay byte for byte, and a rerun of the same command sends nothing.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};

use crate::binary::start_binary;
use crate::fake_openai::{last_user, tool_calls_reply, Canned, FakeOpenAi};
use crate::rollout::{memgym, strings, text, KillOnDrop};

/// The experience the learner proposes, and the policy's cue.
const LESSON: &str = "Write the answer to the question into a new memory.";

/// The learner's replies (three-stage LearnFromGroup; summaries are given, so stage 1 is never asked).
fn learner(body: &Value) -> Canned {
    let prompt = last_user(body);
    let op = json!([{"option": "add", "experience": LESSON}]).to_string();
    if prompt.contains("Compare the better attempts") || prompt.contains("Combine them into one final plan") {
        Canned::answer(&op)
    } else {
        Canned::answer("?")
    }
}

/// The policy: on its first reply it writes the gold answer when `follows` and the lesson is in its system
/// prompt, or else when its sampling seed is odd; any other seed writes a note that answers nothing. Its
/// second reply stops. Its very first request fails (HTTP 503), so one rollout fails and is played again.
fn policy(golds: Arc<HashMap<String, String>>, follows: bool) -> impl Fn(&Value) -> Canned + Send + Sync + 'static {
    let first = AtomicBool::new(true);
    move |body| {
        if body["model"] != "policy" {
            return learner(body);
        }
        if first.swap(false, Ordering::SeqCst) {
            return Canned::error(503, "warming up");
        }
        let messages = body["messages"].as_array().unwrap();
        let system = messages[0]["content"].as_str().unwrap();
        let user = messages[1]["content"].as_str().unwrap();
        let q = user.strip_prefix("Target question: ").unwrap().split("\n\n").next().unwrap();
        let seed = body["seed"].as_u64().unwrap();
        if messages.iter().any(|m| m["role"] == "assistant") {
            return Canned::json(&tool_calls_reply(Some("Done."), &[]));
        }
        let told = follows && system.contains(LESSON);
        let content = if told || seed % 2 == 1 { format!("{q} {}", golds[q]) } else { format!("Seed {seed} looked around.") };
        Canned::json(&tool_calls_reply(None, &[("c", "manage_memory", &json!({"operation": "create", "content": content}).to_string())]))
    }
}

fn golds() -> Arc<HashMap<String, String>> {
    let ds = memgym::dataset::Dataset::load(None).unwrap();
    Arc::new(ds.questions.iter().filter_map(|q| q.answer.clone().map(|a| (q.question.clone(), a))).collect())
}

fn json_file(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))).unwrap()
}

async fn learn(follows: bool, epochs: &str) -> (tempfile::TempDir, Value, FakeOpenAi, Vec<String>) {
    let fake = FakeOpenAi::start(policy(golds(), follows)).await;
    let (server, addr) = start_binary(&["--llm-base-url", &fake.url, "--llm-model", "teacher"]);
    let server = KillOnDrop(server);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("learn").display().to_string();
    let mut args = strings(&["learn", "--addr", &addr, "--bank", "lessons", "--out", &out, "--policy-base-url", &fake.url]);
    args.extend(strings(&["--policy-model", "policy", "--epochs", epochs, "--train-limit", "6", "--group", "4", "--test-limit", "16"]));
    args.extend(strings(&["--ab-group", "2", "--learn-batch", "4", "--max-turns", "2", "--seed", "3", "--concurrency", "4"]));
    args.extend(strings(&["--policy-max-retries", "0"]));
    let o = memgym(args.clone()).await;
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("1 rollouts failed; playing them again (pass 2 of 3)"), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("# memgym learn report"), "{}", text(&o));
    let summary = json_file(&dir.path().join("learn/summary.json"));
    // Resumed: everything is on disk, the endpoint hears nothing.
    fake.clear();
    let o = memgym(args).await;
    assert!(o.status.success(), "{}", text(&o));
    assert!(fake.seen().is_empty(), "a rerun plays and learns nothing again");
    drop(server);
    (dir, summary, fake, vec![addr])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_that_follows_the_learned_experience_gains_significantly() {
    let (dir, s, _fake, _) = learn(true, "1").await;
    let out = dir.path().join("learn");
    // The epoch: 6 groups of 4, learned in 2 steps; the lesson is in the library, exported.
    let e = &s["epochs"][0];
    assert_eq!(e["rollouts"]["scored"], 24);
    assert_eq!(e["steps"].as_array().unwrap().len(), 2);
    assert!(e["steps"].as_array().unwrap().iter().any(|x| x["applied"] == true), "{e}");
    assert!(e["library"].as_str().unwrap().contains(LESSON));
    let exported = json_file(&out.join("epoch-0/library.json"));
    assert!(exported.to_string().contains(LESSON));
    assert_eq!(std::fs::read_to_string(out.join("epoch-0/library-before.txt")).unwrap(), "", "the bank started empty");
    for line in std::fs::read_to_string(out.join("epoch-0/learned.jsonl")).unwrap().lines() {
        let step: Value = serde_json::from_str(line).unwrap();
        for r in step["rewards"].as_array().unwrap().iter().flat_map(|g| g.as_array().unwrap()) {
            let r = r.as_f64().unwrap();
            assert!((0.0..=1.0).contains(&r), "normalised: {r}");
        }
    }
    // The A/B: two arms (one epoch), the same questions and seeds; final − none is significantly positive.
    let ab = &s["ab"];
    let names: Vec<&str> = ab["arms"].as_array().unwrap().iter().map(|a| a["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["none", "final"]);
    let c = &ab["contrasts"][0];
    assert_eq!((c["a"].as_str(), c["b"].as_str()), (Some("final"), Some("none")));
    assert_eq!(c["significant"], true, "{c}");
    assert!(c["all"]["lo"].as_f64().unwrap() > 0.0, "{c}");
    assert!(ab["arms"][1]["experiences"].as_u64().unwrap() >= 1);
    let none = json_file(&out.join("ab/none/run.json"));
    let fin = json_file(&out.join("ab/final/run.json"));
    assert_eq!(none["questions"], fin["questions"]);
    assert_eq!(none["seed"], fin["seed"]);
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("**final − none**") && report.contains(LESSON), "{report}");
    assert!(report.contains("compute over every recorded rollout and learning step"), "{report}");
    assert!(e["rollout_seconds"].as_f64().unwrap() > 0.0 && ab["arms"][0]["rollout_seconds"].as_f64().unwrap() > 0.0);
    // Every epoch's trajectories replay byte for byte (in-process).
    let traj = out.join("epoch-0/trajectories.jsonl").display().to_string();
    let o = memgym(strings(&["replay", &traj])).await;
    assert!(o.status.success() && String::from_utf8_lossy(&o.stdout).contains("24 reproduced byte for byte, 0 diverged"), "{}", text(&o));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_that_ignores_its_prompt_shows_no_difference() {
    let (_dir, s, _fake, _) = learn(false, "2").await;
    assert_eq!(s["epochs"].as_array().unwrap().len(), 2);
    let ab = &s["ab"];
    let names: Vec<&str> = ab["arms"].as_array().unwrap().iter().map(|a| a["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["none", "epoch-0", "final"]);
    assert_eq!(ab["contrasts"].as_array().unwrap().len(), 3);
    for c in ab["contrasts"].as_array().unwrap() {
        assert_eq!(c["significant"], false, "{c}");
        assert_eq!(c["all"]["mean"].as_f64(), Some(0.0), "same seeds, same replies: {c}");
    }
}

/// A policy endpoint that never answers: every pass fails, and the command stops before learning, saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollouts_that_keep_failing_stop_the_loop_before_learning() {
    let fake = FakeOpenAi::start(|body| if body["model"] == "policy" { Canned::error(503, "down") } else { learner(body) }).await;
    let (server, addr) = start_binary(&["--llm-base-url", &fake.url, "--llm-model", "teacher"]);
    let _server = KillOnDrop(server);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("learn");
    let out_s = out.display().to_string();
    let mut args = strings(&["learn", "--addr", &addr, "--bank", "lessons", "--out", &out_s, "--policy-base-url", &fake.url]);
    args.extend(strings(&["--policy-model", "policy", "--epochs", "1", "--train-limit", "1", "--group", "2", "--test-limit", "0"]));
    args.extend(strings(&["--policy-max-retries", "0"]));
    let o = memgym(args).await;
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("2 of 2 rollouts") && text(&o).contains("still fail after 3 passes") && text(&o).contains("HTTP 503"),
        "{}",
        text(&o)
    );
    assert_eq!(fake.seen().iter().filter(|b| b["model"] == "policy").count(), 6, "2 rollouts × 3 passes");
    assert!(!out.join("epoch-0/learned.jsonl").exists(), "nothing learned from incomplete groups");
    assert!(out.join("epoch-0/report.md").exists(), "the report says what failed");
}
