//! `memgym rollout` and `memgym replay` in-process against the fake OpenAI endpoint, which plays a
//! scripted policy: every shape the parser accepts or refuses, malformed JSON, an unknown tool and an
//! invented id. Each trajectory is checked against what the fake received and sent.

use std::sync::Arc;

use clap::Parser;
use serde_json::{json, Value};

use super::*;
use crate::app::cli::{Cli, Command};
use crate::embed::{EmbedService, HashEmbedder};
use crate::episode::{EnvConfig, Environment, SystemClock};
use crate::fake_openai::{tool_calls_reply, Canned, FakeOpenAi};
use parse::Mode;
use record::{Outcome, Stop};

fn environment() -> Arc<Environment> {
    let dataset = Arc::new(crate::dataset::Dataset::load(None).unwrap());
    let embed = EmbedService::new(Arc::new(HashEmbedder::default()), 2);
    Arc::new(Environment::new(EnvConfig::default(), dataset, embed, Arc::new(SystemClock::default())).unwrap())
}

fn args(url: &str, out: &Path, extra: &[&str]) -> RolloutArgs {
    let out = out.display().to_string();
    let mut argv = vec!["memgym", "rollout", "--policy-base-url", url, "--policy-model", "fake", "--out", &out, "--concurrency", "1"];
    argv.extend_from_slice(extra);
    match Cli::try_parse_from(argv).unwrap().command {
        Command::Rollout(a) => a,
        Command::Serve(_)
        | Command::Dataset(_)
        | Command::Bench(_)
        | Command::Eval(_)
        | Command::Replay(_)
        | Command::Learn(_)
        | Command::Health(_)
        | Command::Reference(_) => {
            unreachable!()
        }
    }
}

/// Two test questions with a gold answer: a temporal one and a single-hop one.
fn two_questions(env: &Environment) -> Vec<(String, String, String)> {
    let ds = env.dataset();
    [2u8, 1]
        .iter()
        .map(|c| {
            let q = ds.questions.iter().find(|q| q.split == Split::Test && q.category == *c && q.answer.is_some()).unwrap();
            (q.id.clone(), q.question.clone(), q.answer.clone().unwrap())
        })
        .collect()
}

fn question_of(body: &Value) -> String {
    let user = body["messages"][1]["content"].as_str().unwrap();
    user.strip_prefix("Target question: ").unwrap().split("\n\n").next().unwrap().to_string()
}

fn turn_of(body: &Value) -> usize {
    body["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "assistant").count()
}

/// The scripted policy (`openai`): turn 1 calls four tools (a search, malformed JSON, an unknown tool,
/// an invented id), turn 2 writes the oracle's memory as bare JSON in its text, turn 3 stops.
fn openai_policy(golds: Vec<(String, String, String)>) -> impl Fn(&Value) -> Canned + Send + Sync + 'static {
    move |body| {
        let q = question_of(body);
        let gold = golds.iter().find(|g| g.1 == q).map(|g| g.2.clone()).unwrap_or_default();
        let reply = match turn_of(body) {
            0 => tool_calls_reply(
                Some("Let me look."),
                &[
                    ("c1", "search_memory", &json!({"query": q, "top_k": 3}).to_string()),
                    ("c2", "delete_memory", "{\"memory_id\": "),
                    ("c3", "fly_away", "{}"),
                    ("c4", "delete_memory", "{\"memory_id\": \"m9999\"}"),
                ],
            ),
            1 => {
                let call = json!({"name": "manage_memory", "arguments": {"operation": "create", "content": format!("{q} {gold}")}});
                tool_calls_reply(Some(&format!("I will add the answer: {call}")), &[])
            }
            _ => tool_calls_reply(Some("The memory is ready."), &[]),
        };
        Canned::json(&reply)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripted_policy_plays_and_each_trajectory_is_what_the_endpoint_saw_and_sent() {
    let env = environment();
    let qs = two_questions(&env);
    let fake = FakeOpenAi::start(openai_policy(qs.clone())).await;
    let dir = tempfile::tempdir().unwrap();
    let ids = format!("{},{}", qs[0].0, qs[1].0);
    let a = args(&fake.url, dir.path(), &["--questions", &ids, "--group", "2", "--max-turns", "4", "--seed", "7"]);
    let (plan, questions) = super::plan(&a, env.dataset()).unwrap();
    let e = Env::local(env.clone());
    let r = run(&plan, &questions, &e, dir.path(), 1).await.unwrap();

    assert_eq!((r.rollouts, r.scored, r.failed), (4, 4, 0));
    let ts = record::read(&dir.path().join("trajectories.jsonl")).unwrap();
    assert_eq!(ts.len(), 4);
    let seen = fake.seen();
    assert_eq!(seen.len(), 12, "three turns per rollout");
    let tools = e.tools().await.unwrap();
    let mut i = 0;
    for t in &ts {
        assert_eq!(t.stop, Some(Stop::NoCall));
        assert_eq!(t.turns.len(), 3);
        assert_eq!(t.job.episode_seed, episode_seed(7, &t.job.question_id), "one episode seed per group");
        for (k, turn) in t.turns.iter().enumerate() {
            // What the endpoint received is the recorded prefix of messages with the run's settings.
            assert_eq!(
                seen[i],
                plan.policy.body(&t.messages[..turn.sent], Some(&tools), t.job.sampling_seed + k as u64),
                "{} turn {k}",
                t.key
            );
            assert_eq!(turn.seed, super::turn_seed(t.job.sampling_seed, k as u32));
            // What it sent is recorded as received.
            assert_eq!(turn.reply, openai_policy(qs.clone())(&seen[i]).body.parse::<Value>().unwrap());
            i += 1;
        }
        let modes: Vec<(Mode, Outcome)> = t.calls().map(|c| (c.call.mode, c.outcome)).collect();
        assert_eq!(
            modes,
            [
                (Mode::Strict, Outcome::Done),
                (Mode::Invalid, Outcome::Unread),
                (Mode::Strict, Outcome::Refused),
                (Mode::Strict, Outcome::Refused),
                (Mode::Lenient, Outcome::Done),
            ]
        );
        let results: Vec<&str> = t.calls().map(|c| c.result.as_str()).collect();
        assert!(results[0].starts_with("[m"), "a search answers with ids: {}", results[0]);
        assert!(results[1].starts_with("Error: function.arguments is not a JSON object"), "{}", results[1]);
        assert!(results[2].starts_with("Error: ") && results[2].contains("unknown tool"), "{}", results[2]);
        assert!(results[3].starts_with("Error: ") && results[3].contains("m9999"), "{}", results[3]);
        // Every tool_call id is answered by a tool message; the text call's result is a tool_response.
        let roles: Vec<&str> = t.messages.iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "tool", "tool", "tool", "tool", "assistant", "user", "assistant"]);
        let answered: Vec<&str> = t.messages[3..7].iter().map(|m| m["tool_call_id"].as_str().unwrap()).collect();
        assert_eq!(answered, ["c1", "c2", "c3", "c4"]);
        assert!(t.messages[8]["content"].as_str().unwrap().starts_with("<tool_response>\ncreated [m"), "{}", t.messages[8]);
        let s = t.score.as_ref().unwrap();
        assert_eq!(s.evaluator, "answer-phrase");
        assert_eq!(
            (s.steps_used, s.final_memory_count),
            (2, s.initial_memory_count + 1),
            "the search and the create; refusals cost nothing"
        );
        assert_eq!(t.tokens.prompt, 300);
    }
    // The two samples of a group differ only in their sampling seeds.
    assert_ne!(ts[0].job.sampling_seed, ts[1].job.sampling_seed);
    assert_eq!(r.modes["strict"].calls, 12);
    assert_eq!(r.modes["lenient"].done, 4);
    assert_eq!(r.modes["invalid"].unread, 4);
    assert_eq!(r.tools["other"].refused, 4, "fly_away");
    // Format failures: the unreadable delete, the unknown tool, the create read from the text (carried out
    // all the same); choices: the search carried out, the delete of an id that does not exist, the stop.
    assert_eq!((r.searches.done, r.searches.empty), (4, 0), "every search found memories");
    assert!(report::markdown(&r).contains("searches carried out: 4 · of them matched nothing: 0"));
    let f = &r.format_or_choice;
    assert_eq!((f.calls, f.format_total(), f.format_failures_done), (20, 12, 4), "{f:?}");
    assert_eq!((f.format_failures["invalid"], f.format_failures["unknown_tool"], f.format_failures["lenient"]), (4, 4, 4));
    assert_eq!((f.valid, f.valid_done, f.valid_refused, f.stops_without_call), (8, 4, 4, 4));
    assert!(f.valid_refusals[0].0.contains("m#"), "{:?}", f.valid_refusals);
    assert_eq!(r.grpo.groups, 2);
    assert_eq!(r.grpo.all_equal, 1.0, "identical samples: no GRPO signal");
    let all = &r.categories[0];
    assert_eq!(all.no_op, Some(0.0), "{all:?}");
    // The policy wrote exactly the oracle's memory: it earns exactly what the scripted oracle earns.
    for row in &r.categories {
        assert!((row.policy.mean - row.oracle.unwrap()).abs() < 1e-12, "{row:?}");
        assert!(row.policy.lo <= row.policy.mean && row.policy.mean <= row.policy.hi, "{row:?}");
    }
    for f in ["rollouts.parquet", "report.md", "report.json", "run.json"] {
        assert!(dir.path().join(f).exists(), "{f}");
    }

    // Replay: every output byte-identical and every reward bit-identical; another evaluator side by side.
    for t in &ts {
        let rp = replay::replay(&e, t, Some(Evaluator::AnswerRecall), policy::ToolChoice::Auto).await;
        assert!(rp.divergences.is_empty(), "{rp:?}");
        assert_eq!(rp.calls, 4, "the unread call is not sent");
        assert_eq!(rp.replayed, Some(t.reward().unwrap()));
        assert!(rp.rescored.is_some());
    }
    // A tampered trajectory diverges, naming the call.
    let mut bad = ts[0].clone();
    bad.turns[0].calls[0].result.push('!');
    let rp = replay::replay(&e, &bad, None, policy::ToolChoice::Auto).await;
    assert!(rp.divergences.iter().any(|d| d.contains("call 1 (search_memory): output differs")), "{rp:?}");
    // A recorded call the parser would now read otherwise (here: recorded as lenient) is named by turn.
    let mut drifted = ts[0].clone();
    drifted.turns[0].calls[0].call.mode = Mode::Lenient;
    let rp = replay::replay(&e, &drifted, None, policy::ToolChoice::Auto).await;
    assert!(rp.divergences.iter().any(|d| d.starts_with("turn 1: the reply reads as [strict search_memory")), "{rp:?}");

    // Resume: the same command sends nothing; other settings are refused by name.
    fake.clear();
    let r2 = run(&plan, &questions, &e, dir.path(), 1).await.unwrap();
    assert!(fake.seen().is_empty(), "finished rollouts are skipped");
    assert_eq!(r2.categories, r.categories);
    let hotter =
        args(&fake.url, dir.path(), &["--questions", &ids, "--group", "2", "--max-turns", "4", "--seed", "7", "--temperature", "1.0"]);
    let (p3, q3) = super::plan(&hotter, env.dataset()).unwrap();
    let err = run(&p3, &q3, &e, dir.path(), 1).await.unwrap_err().to_string();
    assert!(err.contains("temperature"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hermes_calls_are_read_from_text_and_answered_in_tool_responses() {
    let env = environment();
    let qs = two_questions(&env);
    let fake = FakeOpenAi::start(|body| {
        let text = match turn_of(body) {
            0 => "<tool_call>\n{\"name\": \"search_memory\", \"arguments\": {\"query\": \"Caroline\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"sample_memory\", \"parameters\": {\"k\": 2}}\n</tool_call>".to_string(),
            _ => "Done.".to_string(),
        };
        Canned::answer(&text)
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let a = args(&fake.url, dir.path(), &["--questions", &qs[0].0, "--group", "1", "--tool-format", "hermes"]);
    let (plan, questions) = super::plan(&a, env.dataset()).unwrap();
    let e = Env::local(env.clone());
    let r = run(&plan, &questions, &e, dir.path(), 1).await.unwrap();
    assert_eq!(r.scored, 1);
    let t = &record::read(&dir.path().join("trajectories.jsonl")).unwrap()[0];
    let seen = fake.seen();
    assert!(seen[0].get("tools").is_none(), "hermes sends no tools parameter");
    let system = seen[0]["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("<tools>") && system.contains("\"name\": \"split_memory\""), "the tools block is in the system message");
    let modes: Vec<Mode> = t.calls().map(|c| c.call.mode).collect();
    assert_eq!(modes, [Mode::Strict, Mode::Lenient]);
    assert!(t.calls().all(|c| c.outcome == Outcome::Done));
    let answer = seen[1]["messages"][3].clone();
    assert_eq!(answer["role"], "user");
    assert_eq!(answer["content"].as_str().unwrap().matches("<tool_response>").count(), 2);
    assert_eq!(t.score.as_ref().unwrap().reward, 0.0, "reading memory changes nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_that_fails_fails_the_rollout_and_never_scores_it() {
    let env = environment();
    let qs = two_questions(&env);
    let fake = FakeOpenAi::start(|_| Canned::error(503, "overloaded")).await;
    let dir = tempfile::tempdir().unwrap();
    let a = args(&fake.url, dir.path(), &["--questions", &qs[0].0, "--group", "2", "--policy-max-retries", "1"]);
    let (plan, questions) = super::plan(&a, env.dataset()).unwrap();
    let e = Env::local(env.clone());
    let r = run(&plan, &questions, &e, dir.path(), 2).await.unwrap();
    assert_eq!((r.scored, r.failed), (0, 2));
    assert_eq!(fake.seen().len(), 4, "each retried once");
    assert!(r.failures[0].contains("HTTP 503") && r.failures[0].contains("gave up after 2 attempts"), "{:?}", r.failures);
    assert_eq!(r.categories[0].policy.n, 0, "a failed rollout is not a reward of 0");
    // A rerun retries the failed ones; once the endpoint answers, they are scored.
    fake.respond_with(|_| Canned::answer("Nothing to do."));
    let r = run(&plan, &questions, &e, dir.path(), 2).await.unwrap();
    assert_eq!((r.scored, r.failed), (2, 0));
    assert_eq!(record::read(&dir.path().join("trajectories.jsonl")).unwrap().len(), 2, "the last line of a key wins");
}

#[test]
fn the_policy_config_redacts_its_key() {
    let config = policy::PolicyConfig {
        base_url: "http://127.0.0.1:1/v1".into(),
        model: "m".into(),
        api_key: Some(crate::util::openai_compat::ApiKey::new("sk-live-4242")),
        timeout: std::time::Duration::from_secs(1),
        max_retries: 0,
        temperature: 1.0,
        top_p: 1.0,
        max_tokens: 8,
        tool_choice: policy::ToolChoice::Auto,
    };
    let shown = format!("{:?}", policy::Policy::new(config).unwrap());
    assert!(!shown.contains("sk-live") && shown.contains("<redacted>"), "{shown}");
}

#[test]
fn flags_are_checked_before_any_work() {
    let env = environment();
    let dir = tempfile::tempdir().unwrap();
    let url = "http://127.0.0.1:9/v1";
    for (extra, expected) in [
        (&["--tool-format", "xml"][..], "--tool-format"),
        (&["--group", "0"][..], "--group"),
        (&["--temperature", "3"][..], "--temperature"),
        (&["--questions", "nope"][..], "no question"),
        (&["--split", "dev"][..], "--split"),
        (&["--evaluator", "vibes"][..], "--evaluator"),
        (&["--fork-at", "0"][..], "--fork-at must be at least 1 and below --max-turns (4)"),
        (&["--fork-at", "4"][..], "--fork-at"),
        (&["--fork-at", "1", "--fork-group", "1"][..], "--fork-group must be 2 to 256"),
        (&["--tool-choice", "required", "--tool-format", "hermes"][..], "--tool-choice required needs --tool-format openai"),
    ] {
        let err = super::plan(&args(url, dir.path(), extra), env.dataset()).err().map(|e| format!("{e:#}")).unwrap_or_default();
        assert!(err.contains(expected), "{extra:?}: {err}");
    }
    let err = super::plan(&args("ftp://x", dir.path(), &[]), env.dataset()).err().map(|e| format!("{e:#}")).unwrap();
    assert!(err.contains("--policy-base-url"), "{err}");
}

#[test]
fn seeds_differ_per_sample_and_stay_below_2_pow_31() {
    let s: Vec<u64> = (0..4).map(|i| sampling_seed(0, "conv-26:q1", i)).collect();
    assert!(s.iter().all(|x| *x < 1 << 31));
    assert_eq!(s.iter().collect::<std::collections::HashSet<_>>().len(), 4);
    assert_eq!(episode_seed(0, "conv-26:q1"), episode_seed(0, "conv-26:q1"));
    assert_ne!(episode_seed(0, "conv-26:q1"), episode_seed(1, "conv-26:q1"));
}

/// One rule builds both: with `--system-prompt-file`, the policy's opening messages are the verl row's
/// `prompt` written with the same file, and a resumed run with another prompt is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_system_prompt_file_reaches_the_policy_and_the_verl_rows_alike() {
    use arrow_array::cast::AsArray;
    let env = environment();
    let qs = two_questions(&env);
    let fake = FakeOpenAi::start(|_| Canned::answer("Nothing to change.")).await;
    let dir = tempfile::tempdir().unwrap();
    let prompt_path = dir.path().join("system.txt");
    std::fs::write(&prompt_path, "Edit the memory. Search before you change anything.\n").unwrap();
    let p = prompt_path.display().to_string();
    let out = dir.path().join("run");
    let a = args(&fake.url, &out, &["--questions", &qs[0].0, "--group", "1", "--system-prompt-file", &p]);
    let (plan, questions) = super::plan(&a, env.dataset()).unwrap();
    run(&plan, &questions, &Env::local(env.clone()), &out, 1).await.unwrap();
    let sent = &fake.seen()[0]["messages"];
    assert_eq!(sent[0]["content"], "Edit the memory. Search before you change anything.", "one trailing newline dropped");

    let opts = crate::dataset::verl::VerlOptions {
        system_prompt: crate::dataset::verl::read_system_prompt(&prompt_path).unwrap(),
        ..crate::dataset::verl::VerlOptions::new(Some(Split::Test))
    };
    let q = env.dataset().questions.iter().find(|q| q.id == qs[0].0).unwrap();
    let b = crate::dataset::verl::batch(&[q], &opts.agent_name, &opts.system_prompt, &crate::tools::TOOL_NAMES).unwrap();
    let row = b.column(0).as_list::<i32>().value(0);
    let row = row.as_struct();
    for i in 0..2 {
        assert_eq!(row.column(0).as_string::<i32>().value(i), sent[i]["role"].as_str().unwrap());
        assert_eq!(row.column(1).as_string::<i32>().value(i), sent[i]["content"].as_str().unwrap());
    }

    std::fs::write(&prompt_path, "Another prompt.").unwrap();
    let (p2, q2) =
        super::plan(&args(&fake.url, &out, &["--questions", &qs[0].0, "--group", "1", "--system-prompt-file", &p]), env.dataset()).unwrap();
    let err = run(&p2, &q2, &Env::local(env.clone()), &out, 1).await.unwrap_err().to_string();
    assert!(err.contains("system_prompt"), "{err}");
    std::fs::write(&prompt_path, " \n").unwrap();
    let err = super::plan(&a, env.dataset()).err().map(|e| format!("{e:#}")).unwrap();
    assert!(err.contains("--system-prompt-file") && err.contains("empty"), "{err}");

    // The default prompt is recorded with its hash: a run begun under another default is not resumed.
    let out = dir.path().join("default");
    let (plan, questions) = super::plan(&args(&fake.url, &out, &["--questions", &qs[0].0, "--group", "1"]), env.dataset()).unwrap();
    let text = crate::dataset::verl::SYSTEM_PROMPT;
    assert_eq!(plan.settings.system_prompt, format!("default (fnv1a {:016x})", fnv1a(text.as_bytes())));
    run(&plan, &questions, &Env::local(env.clone()), &out, 1).await.unwrap();
    let run_json = out.join("run.json");
    let older = std::fs::read_to_string(&run_json).unwrap().replace(&plan.settings.system_prompt, "default (fnv1a 0000000000000000)");
    std::fs::write(&run_json, older).unwrap();
    let err = run(&plan, &questions, &Env::local(env.clone()), &out, 1).await.unwrap_err().to_string();
    assert!(err.contains("system_prompt"), "{err}");
    // --report-only reports that run as recorded, whatever the flags say now.
    let (recorded, rq) = super::recorded(plan, Vec::new(), &out, env.dataset()).unwrap();
    let r = finish(&recorded, &rq, &Env::local(env.clone()), &out).await.unwrap();
    assert_eq!((r.scored, r.run.system_prompt.as_str()), (1, "default (fnv1a 0000000000000000)"));
}

/// A conversation that outgrows the model's context ends the episode, which is scored as it stands; a 400 on
/// the first turn (the opening does not fit) is a failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_context_ends_the_episode_and_it_is_scored() {
    let env = environment();
    let qs = two_questions(&env);
    let fake = FakeOpenAi::start(|body| match turn_of(body) {
        0 => Canned::json(&tool_calls_reply(None, &[("a", "search_memory", r#"{"query": "Caroline"}"#)])),
        _ => Canned::error(400, "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens."),
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let a = args(&fake.url, dir.path(), &["--questions", &qs[0].0, "--group", "1"]);
    let (plan, questions) = super::plan(&a, env.dataset()).unwrap();
    let r = run(&plan, &questions, &Env::local(env.clone()), dir.path(), 1).await.unwrap();
    assert_eq!((r.scored, r.failed), (1, 0));
    let t = &record::read(&dir.path().join("trajectories.jsonl")).unwrap()[0];
    assert_eq!((t.stop, t.turns.len()), (Some(Stop::Context), 1));
    assert_eq!(r.stops["context"], 1);
    assert_eq!(fake.seen().len(), 2, "a 400 is not retried");

    fake.respond_with(|_| Canned::error(400, "the prompt is 5000 tokens; this server's context is 4096 (--ctx)"));
    let other = tempfile::tempdir().unwrap();
    let a = args(&fake.url, other.path(), &["--questions", &qs[0].0, "--group", "1"]);
    let (plan, questions) = super::plan(&a, env.dataset()).unwrap();
    let r = run(&plan, &questions, &Env::local(env.clone()), other.path(), 1).await.unwrap();
    assert_eq!((r.scored, r.failed), (0, 1), "the opening itself does not fit: nothing was played");
}

/// A reply whose `tool_calls` hold junk (a string entry, arguments that are not JSON) neither crashes the
/// run nor poisons the next request: the echoed assistant message carries an id and `"{}"` for them, and
/// every id is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn junk_tool_calls_are_answered_and_echoed_in_a_form_strict_servers_accept() {
    let env = environment();
    let qs = two_questions(&env);
    let fake = FakeOpenAi::start(|body| match turn_of(body) {
        0 => {
            Canned::json(&json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
            "tool_calls": ["oops", {"id": "x1", "type": "function", "function": {"name": "search_memory", "arguments": "{bad"}}]}}]}))
        }
        _ => Canned::answer("Done."),
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let a = args(&fake.url, dir.path(), &["--questions", &qs[0].0, "--group", "1"]);
    let (plan, questions) = super::plan(&a, env.dataset()).unwrap();
    let r = run(&plan, &questions, &Env::local(env.clone()), dir.path(), 1).await.unwrap();
    assert_eq!(r.scored, 1);
    let second = &fake.seen()[1]["messages"];
    let echoed = second[2]["tool_calls"].as_array().unwrap();
    assert_eq!(echoed[0]["id"], "call_0_0");
    assert_eq!(echoed[1]["function"]["arguments"], "{}", "not the malformed text");
    let answered: Vec<&str> = second.as_array().unwrap()[3..5].iter().map(|m| m["tool_call_id"].as_str().unwrap()).collect();
    assert_eq!(answered, ["call_0_0", "x1"]);
    let t = &record::read(&dir.path().join("trajectories.jsonl")).unwrap()[0];
    assert!(t.calls().all(|c| c.call.mode == Mode::Invalid && c.outcome == Outcome::Unread));
    assert_eq!(t.turns[0].reply["choices"][0]["message"]["tool_calls"][0], "oops", "the reply is recorded as received");
}

/// A first attempt that scored nothing (a wrong endpoint) may be rerun with corrected settings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_may_change_while_nothing_is_scored() {
    let env = environment();
    let qs = two_questions(&env);
    let dir = tempfile::tempdir().unwrap();
    let dead = args("http://127.0.0.1:9/v1", dir.path(), &["--questions", &qs[0].0, "--group", "1", "--policy-max-retries", "0"]);
    let (plan, questions) = super::plan(&dead, env.dataset()).unwrap();
    let r = run(&plan, &questions, &Env::local(env.clone()), dir.path(), 1).await.unwrap();
    assert_eq!(r.failed, 1);
    let fake = FakeOpenAi::start(|_| Canned::answer("Done.")).await;
    let (plan, questions) = super::plan(&args(&fake.url, dir.path(), &["--questions", &qs[0].0, "--group", "1"]), env.dataset()).unwrap();
    let r = run(&plan, &questions, &Env::local(env.clone()), dir.path(), 1).await.unwrap();
    assert_eq!((r.scored, r.failed), (1, 0));
    assert!(std::fs::read_to_string(dir.path().join("run.json")).unwrap().contains(&fake.url));
    assert!(dir.path().join("baselines.jsonl").exists(), "the scripted agents' rewards are kept");
    // The same model at another address resumes the run (nothing is left to play here).
    let moved = FakeOpenAi::start(|_| Canned::answer("Done.")).await;
    let (plan, questions) = super::plan(&args(&moved.url, dir.path(), &["--questions", &qs[0].0, "--group", "1"]), env.dataset()).unwrap();
    let r = run(&plan, &questions, &Env::local(env.clone()), dir.path(), 1).await.unwrap();
    assert_eq!(r.scored, 1);
    assert!(moved.seen().is_empty());
}

/// A refusal that names the episode (its spent step budget) replays without a false divergence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_budget_replays_byte_for_byte() {
    let env = environment();
    let qs = two_questions(&env);
    let fake = FakeOpenAi::start(|_| {
        let calls: Vec<(String, &str, String)> =
            (0..16).map(|i| (format!("c{i}"), "search_memory", json!({"query": format!("q{i}")}).to_string())).collect();
        let refs: Vec<(&str, &str, &str)> = calls.iter().map(|(a, b, c)| (a.as_str(), *b, c.as_str())).collect();
        Canned::json(&tool_calls_reply(None, &refs))
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let a = args(&fake.url, dir.path(), &["--questions", &qs[0].0, "--group", "1", "--max-turns", "2"]);
    let (plan, questions) = super::plan(&a, env.dataset()).unwrap();
    run(&plan, &questions, &Env::local(env.clone()), dir.path(), 1).await.unwrap();
    let t = &record::read(&dir.path().join("trajectories.jsonl")).unwrap()[0];
    let spent: Vec<&str> = t.calls().filter(|c| c.outcome == Outcome::Refused).map(|c| c.result.as_str()).collect();
    assert_eq!(spent.len(), 2, "30 steps of 32 calls");
    assert!(spent[0].contains(&t.job.episode_id) && spent[0].contains("budget"), "{}", spent[0]);
    let rp = replay::replay(&Env::local(env.clone()), t, None, policy::ToolChoice::Auto).await;
    assert!(rp.divergences.is_empty(), "{rp:?}");
}

/// A refusal recorded in an older wording (the "not a memory id" refusal's example id, which was an id every
/// conversation has) replays as the same refusal: counted apart, never a divergence; any other difference
/// still is one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_in_an_older_wording_replays_as_the_same_refusal() {
    let env = environment();
    let qs = two_questions(&env);
    let fake = FakeOpenAi::start(|_| Canned::json(&tool_calls_reply(None, &[("c0", "delete_memory", r#"{"memory_id": "49"}"#)]))).await;
    let dir = tempfile::tempdir().unwrap();
    let a = args(&fake.url, dir.path(), &["--questions", &qs[0].0, "--group", "1", "--max-turns", "1"]);
    let (plan, questions) = super::plan(&a, env.dataset()).unwrap();
    run(&plan, &questions, &Env::local(env.clone()), dir.path(), 1).await.unwrap();
    let t = &record::read(&dir.path().join("trajectories.jsonl")).unwrap()[0];
    let (then, now) = crate::memory::REWORDED[0];
    let refusal = t.calls().find(|c| c.outcome == Outcome::Refused).expect("the bad id is refused");
    assert!(refusal.result.contains(now) && refusal.result.contains(crate::memory::EXAMPLE_ID), "{}", refusal.result);
    let rp = replay::replay(&Env::local(env.clone()), t, None, policy::ToolChoice::Auto).await;
    assert_eq!((rp.divergences.len(), rp.reworded), (0, 0), "{rp:?}");
    // The same refusal as an older recording holds it.
    let mut old = t.clone();
    for c in old.turns.iter_mut().flat_map(|turn| turn.calls.iter_mut()) {
        c.result = c.result.replace(now, then);
    }
    let rp = replay::replay(&Env::local(env.clone()), &old, None, policy::ToolChoice::Auto).await;
    assert_eq!((rp.divergences.len(), rp.reworded), (0, 1), "{rp:?}");
    // Another wording is still a divergence.
    let mut other = t.clone();
    for c in other.turns.iter_mut().flat_map(|turn| turn.calls.iter_mut()) {
        c.result = c.result.replace(now, "(expected an id)");
    }
    let rp = replay::replay(&Env::local(env.clone()), &other, None, policy::ToolChoice::Auto).await;
    assert!(rp.divergences.iter().any(|d| d.contains("output differs")), "{rp:?}");
}

/// `--fork-at 1 --fork-group 3`: one prefix per question, three forks that share it and then differ by their
/// own seeds; each fork edits its own copy, is scored against the same p_old as the fresh group, replays on
/// one fresh episode byte for byte, and the report compares the spreads. The second question's prefix
/// stops at once (a reply with no call), so its forks share nothing and each samples its first reply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forked_groups_share_a_prefix_then_edit_their_own_copies() {
    let env = environment();
    let qs = two_questions(&env);
    let (stopper, stopper_text) = (qs[1].0.clone(), qs[1].1.clone());
    let stop_seed = fork::prefix_seed(7, &stopper);
    let golds = qs.clone();
    let fake = FakeOpenAi::start(move |body| {
        let q = question_of(body);
        let seed = body["seed"].as_u64().unwrap();
        let gold = golds.iter().find(|g| g.1 == q).map(|g| g.2.clone()).unwrap_or_default();
        let reply = match turn_of(body) {
            0 if q == stopper_text && seed == stop_seed => tool_calls_reply(Some("Nothing to do."), &[]),
            0 => tool_calls_reply(None, &[("s", "search_memory", &json!({"query": q}).to_string())]),
            // Odd seeds write the answer, even ones a note that answers nothing: the forks' rewards differ.
            1 => {
                let content = if seed % 2 == 1 { format!("{q} {gold}") } else { format!("Seed {seed} was here.") };
                tool_calls_reply(None, &[("c", "manage_memory", &json!({"operation": "create", "content": content}).to_string())])
            }
            _ => tool_calls_reply(Some("Done."), &[]),
        };
        Canned::json(&reply)
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let ids = format!("{},{}", qs[0].0, qs[1].0);
    let flags = ["--questions", &ids, "--group", "3", "--max-turns", "3", "--seed", "7", "--fork-at", "1", "--fork-group", "3"];
    let a = args(&fake.url, dir.path(), &flags);
    let (plan, questions) = super::plan(&a, env.dataset()).unwrap();
    let e = Env::local(env.clone());
    let r = run(&plan, &questions, &e, dir.path(), 2).await.unwrap();
    assert_eq!((r.rollouts, r.scored), (6, 6), "the fresh groups alone in trajectories.jsonl");
    let fresh = record::read(&dir.path().join("trajectories.jsonl")).unwrap();
    let forks = record::read(&dir.path().join(fork::FILE)).unwrap();
    assert_eq!(forks.len(), 6);
    for q in &questions {
        let mine: Vec<&Trajectory> = forks.iter().filter(|t| t.job.question_id == q.id).collect();
        assert_eq!(mine.iter().map(|t| t.key.clone()).collect::<Vec<_>>(), (0..3).map(|i| fork::key(&q.id, i)).collect::<Vec<_>>());
        let of = mine[0].job.fork.clone().unwrap();
        let shared = if q.id == stopper { 0 } else { 1 };
        assert_eq!((of.requested_at, of.at, of.prefix_seed), (1, shared, fork::prefix_seed(7, &q.id)), "{}", q.id);
        let p_old = fresh.iter().find(|t| t.job.question_id == q.id).unwrap().score.as_ref().unwrap().p_old;
        for (i, t) in mine.iter().enumerate() {
            let s = t.score.as_ref().unwrap();
            assert_eq!(t.job.fork.as_ref().unwrap(), &of, "one prefix per group");
            assert_eq!(t.job.sampling_seed, fork::fork_seed(7, &q.id, i as u32));
            assert_eq!(t.job.episode_seed, episode_seed(7, &q.id), "the fresh group's episode");
            assert_eq!(s.p_old.to_bits(), p_old.to_bits(), "scored against the same p_old");
            // Each fork's own create only: its siblings' edits are not in its memory.
            assert_eq!(s.final_memory_count, s.initial_memory_count + 1, "{}", t.key);
            if shared == 1 {
                assert_eq!(t.turns[0].seed, super::turn_seed(of.prefix_seed, 0), "the shared reply");
                assert_eq!(t.turns[0].reply, mine[0].turns[0].reply);
                assert_eq!(t.messages[..t.turns[1].sent], mine[0].messages[..mine[0].turns[1].sent]);
            }
            assert_eq!(t.turns[shared as usize].seed, super::turn_seed(t.job.sampling_seed, shared), "its own from the branch");
            let rp = replay::replay(&e, t, None, policy::ToolChoice::Auto).await;
            assert!(rp.divergences.is_empty(), "{rp:?}");
            assert_eq!(rp.replayed, t.reward());
        }
    }
    let c = r.forks.as_ref().expect("the comparison");
    assert_eq!((c.questions, c.fork_at, c.prefix_stopped_early), (2, 1, 1));
    assert_eq!((c.fresh.group, c.forked.group), (3, 3));
    assert!(report::markdown(&r).contains("## Forked against fresh groups"));
    let seen = fake.seen().len();
    assert_eq!(seen, 6 * 3 + 2 + 3 * 2 + 3 * 3, "fresh 6×3 · prefixes 1 + 1 (the stopper's, unshared) · forks 3×2 + 3×3");

    // Resume: nothing to play; other fork settings are refused once forks are scored.
    fake.clear();
    run(&plan, &questions, &e, dir.path(), 2).await.unwrap();
    assert!(fake.seen().is_empty());
    let mut other = flags.to_vec();
    *other.last_mut().unwrap() = "2"; // --fork-group 2
    let (p2, q2) = super::plan(&args(&fake.url, dir.path(), &other), env.dataset()).unwrap();
    let err = run(&p2, &q2, &e, dir.path(), 2).await.unwrap_err().to_string();
    assert!(err.contains("group"), "{err}");
}

/// `--tool-choice required`: sent with the tools, recorded in run.json and the report, kept on resume (the
/// other choice is refused); a run.json written before the setting reads as `auto`. Replay reads the choice
/// from run.json and names a recorded reply without a call as a divergence: here the endpoint honours the
/// constraint on turn 1 and answers in text on turn 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_choice_required_is_sent_recorded_and_checked_by_replay() {
    let env = environment();
    let qs = two_questions(&env);
    let fake = FakeOpenAi::start(|body| match turn_of(body) {
        0 => Canned::json(&tool_calls_reply(None, &[("a", "search_memory", r#"{"query": "Caroline"}"#)])),
        _ => Canned::answer("Done."),
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let flags = ["--questions", &qs[0].0, "--group", "1", "--max-turns", "2", "--tool-choice", "required"];
    let (plan, questions) = super::plan(&args(&fake.url, dir.path(), &flags), env.dataset()).unwrap();
    let e = Env::local(env.clone());
    let r = run(&plan, &questions, &e, dir.path(), 1).await.unwrap();
    let seen = fake.seen();
    assert!(seen.iter().all(|b| b["tool_choice"] == "required" && b["tools"].is_array()), "{:?}", seen[0]["tool_choice"]);
    assert_eq!(r.run.tool_choice, policy::ToolChoice::Required);
    assert!(report::markdown(&r).contains("tool choice `required`"));
    let traj_path = dir.path().join("trajectories.jsonl");
    let run_json: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("run.json")).unwrap()).unwrap();
    assert_eq!(run_json["tool_choice"], "required");
    assert_eq!(replay::recorded_tool_choice(&traj_path).unwrap(), policy::ToolChoice::Required);

    // The reply of turn 2 has no call: under `required` the endpoint did not honour the constraint.
    let t = &record::read(&traj_path).unwrap()[0];
    assert_eq!(t.stop, Some(Stop::NoCall));
    let rp = replay::replay(&e, t, None, policy::ToolChoice::Required).await;
    assert_eq!(rp.divergences, ["turn 2: the reply has no tool call under tool_choice required (the endpoint did not honour it)"]);
    assert!(replay::summary(&[rp], None, "answer-phrase", policy::ToolChoice::Required).contains("every reply checked for a tool call"));
    assert!(replay::replay(&e, t, None, policy::ToolChoice::Auto).await.divergences.is_empty(), "under auto a stop is the policy's");
    // A reply cut by max_tokens under `required` honoured the constraint: the budget ran out mid-call.
    let mut cut = t.clone();
    cut.turns[1].reply["choices"][0]["finish_reason"] = json!("length");
    cut.turns[1].finish_reason = Some("length".into());
    assert!(replay::replay(&e, &cut, None, policy::ToolChoice::Required).await.divergences.is_empty());

    // A rerun with the other choice is refused, naming it.
    let auto = ["--questions", &qs[0].0, "--group", "1", "--max-turns", "2"];
    let (p2, q2) = super::plan(&args(&fake.url, dir.path(), &auto), env.dataset()).unwrap();
    let err = run(&p2, &q2, &e, dir.path(), 1).await.unwrap_err().to_string();
    assert!(err.contains("tool_choice"), "{err}");
    // A run.json written before the setting: auto, and the same run resumes and reports.
    let mut older = run_json.clone();
    older.as_object_mut().unwrap().remove("tool_choice");
    std::fs::write(dir.path().join("run.json"), older.to_string()).unwrap();
    assert_eq!(replay::recorded_tool_choice(&traj_path).unwrap(), policy::ToolChoice::Auto);
    fake.clear();
    let r = run(&p2, &q2, &e, dir.path(), 1).await.unwrap();
    assert_eq!((r.scored, r.run.tool_choice), (1, policy::ToolChoice::Auto));
    assert!(fake.seen().is_empty(), "resumed: nothing left to play");
    // No run.json at all: auto.
    let alone = dir.path().join("alone");
    std::fs::create_dir_all(&alone).unwrap();
    assert_eq!(replay::recorded_tool_choice(&alone.join("trajectories.jsonl")).unwrap(), policy::ToolChoice::Auto);
}
