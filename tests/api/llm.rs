//! The LLM evaluators and `--llm-edit` end to end: the real server on loopback, a real gRPC client, and a
//! real HTTP server on loopback speaking the OpenAI chat-completions API (`tests/support/fake_openai.rs`).

use std::time::Duration;

use memgym::api::pb;
use tonic::Code;

use crate::fake_openai::{last_user, Canned, FakeOpenAi};
use crate::helpers::{spawn_app, App};

const MODEL: &str = "test-llm";

/// A reader: answers "bees" when the QA prompt's context says so, else "Not mentioned in the
/// conversation"; the judge says CORRECT iff the answer is "bees".
fn reader(body: &serde_json::Value) -> Canned {
    let prompt = last_user(body);
    if prompt.contains("strict grader") {
        return Canned::answer(if prompt.contains("ANSWER: bees\n") { "CORRECT" } else { "WRONG" });
    }
    let context = prompt.split("\n\nBased on the above context").next().unwrap_or("");
    Canned::answer(if context.contains("bees") { "bees" } else { "Not mentioned in the conversation" })
}

async fn app_with(llm: &FakeOpenAi, flags: &[&str]) -> App {
    let mut argv = vec!["--llm-base-url", llm.url.as_str(), "--llm-model", MODEL];
    argv.extend_from_slice(flags);
    spawn_app(&argv).await
}

fn custom(id: &str, evaluator: pb::Evaluator) -> pb::CreateEpisodeRequest {
    let mem = |text: &str, d: &str| pb::NewMemory {
        text: text.into(),
        evidence: vec![d.into()],
        session_date: "8 May 2023".into(),
        ..Default::default()
    };
    pb::CreateEpisodeRequest {
        episode_id: id.into(),
        custom: Some(pb::CustomEpisode {
            memories: vec![mem("Ann keeps bees in her garden.", "D1:1"), mem("Ann's favourite colour is green.", "D1:2")],
            question: "What does Ann keep in her garden?".into(),
            answer: "bees".into(),
            evidence: vec!["D1:1".into()],
        }),
        evaluator: evaluator as i32,
        ..Default::default()
    }
}

async fn score(app: &mut App, id: &str) -> Result<pb::ScoreEpisodeResponse, tonic::Status> {
    app.env.score_episode(pb::ScoreEpisodeRequest { episode_id: id.into() }).await.map(tonic::Response::into_inner)
}

#[tokio::test]
async fn llm_f1_sends_locomo_prompts_and_scores_canned_answers() {
    let llm = FakeOpenAi::start(reader).await;
    let mut app = app_with(&llm, &["--evaluator", "llm-f1"]).await;
    app.env.create_episode(custom("f1", pb::Evaluator::Unspecified)).await.unwrap();
    app.tool("f1", "delete_memory", serde_json::json!({"memory_id": "m0000"})).await.unwrap();
    let r = score(&mut app, "f1").await.unwrap();
    assert_eq!((r.evaluator.as_str(), r.llm_model.as_str()), ("llm-f1", MODEL));
    assert_eq!((r.answer_old.as_str(), r.f1_old, r.p_old), ("bees", Some(1.0), 1.0));
    assert_eq!((r.answer_new.as_str(), r.f1_new, r.p_new), ("Not mentioned in the conversation", Some(0.0), 0.0));
    assert!(r.reward < 0.0 && r.judge_old.is_none());

    // The exact requests: model, one user message with LoCoMo's QA prompt, temperature 0, 32 tokens, seed.
    let seen = llm.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(
        seen[0],
        serde_json::json!({
            "model": MODEL,
            "messages": [{"role": "user", "content": format!(
                "8 May 2023: Ann keeps bees in her garden.\n8 May 2023: Ann's favourite colour is green.\n\n\
                 Based on the above context, write an answer in the form of a short phrase for the following question. \
                 Answer with exact words from the context whenever possible.\n\nQuestion: What does Ann keep in her garden? Short answer:"
            )}],
            "temperature": 0.0,
            "max_tokens": 32,
            "seed": 42
        })
    );
    assert_eq!(last_user(&seen[1]), "8 May 2023: Ann's favourite colour is green.\n\nBased on the above context, write an answer in the form of a short phrase for the following question. Answer with exact words from the context whenever possible.\n\nQuestion: What does Ann keep in her garden? Short answer:");
}

#[tokio::test]
async fn llm_judge_per_episode_reports_verdicts_beside_f1() {
    let llm = FakeOpenAi::start(reader).await;
    // The server default stays offline; the episode asks for the judge.
    let mut app = app_with(&llm, &[]).await;
    let created = app.env.create_episode(custom("j", pb::Evaluator::LlmJudge)).await.unwrap().into_inner();
    assert_eq!(created.state.unwrap().evaluator, pb::Evaluator::LlmJudge as i32);
    let r = score(&mut app, "j").await.unwrap();
    assert_eq!((r.evaluator.as_str(), r.judge_old, r.judge_new, r.f1_old), ("llm-judge", Some(1.0), Some(1.0), Some(1.0)));
    assert_eq!(r.reward, 0.0);
    // Answer + judge for M0; the unchanged final memory is answered from the cache.
    assert_eq!(llm.seen().len(), 2);
    // Another episode on the server default evaluator sends nothing.
    app.env.create_episode(custom("plain", pb::Evaluator::Unspecified)).await.unwrap();
    assert_eq!(score(&mut app, "plain").await.unwrap().evaluator, "answer-phrase");
    assert_eq!(llm.seen().len(), 2);
}

#[tokio::test]
async fn a_slow_endpoint_is_deadline_exceeded_and_changes_nothing() {
    let llm = FakeOpenAi::start(|_| Canned::answer("bees").after(Duration::from_secs(3))).await;
    let mut app = app_with(&llm, &["--evaluator", "llm-f1", "--llm-timeout-ms", "200", "--llm-max-retries", "1"]).await;
    app.env.create_episode(custom("slow", pb::Evaluator::Unspecified)).await.unwrap();
    let err = score(&mut app, "slow").await.unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded, "{err:?}");
    assert!(err.message().contains("timed out after 200ms") && err.message().contains("2 attempts"), "{}", err.message());
    // Not scored, not finalised: edits still work and a later score succeeds once the endpoint is back.
    let state = app.state("slow").await;
    assert!(!state.scored && !state.done);
    app.tool("slow", "delete_memory", serde_json::json!({"memory_id": "m0001"})).await.unwrap();
    llm.respond_with(reader);
    let r = score(&mut app, "slow").await.unwrap();
    assert_eq!((r.p_old, r.p_new), (1.0, 1.0));
}

#[tokio::test]
async fn rate_limits_are_retried_and_server_errors_give_a_clear_unavailable() {
    let llm = FakeOpenAi::start(reader).await;
    llm.push([Canned::error(429, "rate limited")]);
    let mut app = app_with(&llm, &["--evaluator", "llm-f1"]).await;
    app.env.create_episode(custom("rl", pb::Evaluator::Unspecified)).await.unwrap();
    assert_eq!(score(&mut app, "rl").await.unwrap().p_old, 1.0);
    assert_eq!(llm.seen().len(), 2, "one 429, then the answer (the unchanged memory is cached)");

    llm.respond_with(|_| Canned::error(500, "model crashed"));
    app.env.create_episode(custom("down", pb::Evaluator::Unspecified)).await.unwrap();
    app.tool("down", "delete_memory", serde_json::json!({"memory_id": "m0001"})).await.unwrap();
    // p_old of a custom episode is its own; every attempt fails.
    let before = llm.seen().len();
    let err = score(&mut app, "down").await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert!(
        err.message().contains("HTTP 500") && err.message().contains("model crashed") && err.message().contains("gave up after 4 attempts"),
        "{}",
        err.message()
    );
    assert_eq!(llm.seen().len() - before, 4);
    assert!(!app.state("down").await.scored);
}

#[tokio::test]
async fn malformed_replies_are_unavailable_not_a_zero_reward() {
    let llm = FakeOpenAi::start(|_| Canned::raw("<html>502 Bad Gateway</html>")).await;
    let mut app = app_with(&llm, &["--evaluator", "llm-judge"]).await;
    app.env.create_episode(custom("bad", pb::Evaluator::Unspecified)).await.unwrap();
    let err = score(&mut app, "bad").await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert!(err.message().contains("unusable") && err.message().contains("invalid response"), "{}", err.message());
    // A judge that answers neither CORRECT nor WRONG is no verdict either.
    llm.respond_with(|b| Canned::answer(if last_user(b).contains("strict grader") { "It depends." } else { "bees" }));
    let err = score(&mut app, "bad").await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert!(err.message().contains("neither CORRECT nor WRONG"), "{}", err.message());
}

#[tokio::test]
async fn p_old_is_requested_once_per_question_across_a_grpo_group() {
    let llm = FakeOpenAi::start(|_| Canned::answer("something").after(Duration::from_millis(50))).await;
    // No answer cache: only the p_old cache can spare requests.
    let app = app_with(&llm, &["--evaluator", "llm-f1", "--llm-cache", "0"]).await;
    let mut tasks = Vec::new();
    for i in 0..8 {
        let mut env = app.env.clone();
        tasks.push(tokio::spawn(async move {
            let id = format!("g{i}");
            env.create_episode(pb::CreateEpisodeRequest { episode_id: id.clone(), question_id: "conv-26:q0".into(), ..Default::default() })
                .await
                .unwrap();
            env.score_episode(pb::ScoreEpisodeRequest { episode_id: id }).await.unwrap().into_inner()
        }));
    }
    let mut p_olds = Vec::new();
    for t in tasks {
        p_olds.push(t.await.unwrap().p_old);
    }
    assert!(p_olds.windows(2).all(|w| w[0] == w[1]));
    // 1 for p_old + 1 per episode for p_new.
    assert_eq!(llm.seen().len(), 9);
}

#[tokio::test]
async fn llm_evaluators_without_an_endpoint_are_refused_clearly() {
    let mut app = spawn_app(&[]).await;
    let err = app.env.create_episode(custom("x", pb::Evaluator::LlmF1)).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(err.message().contains("--llm-base-url"), "{}", err.message());
    let err =
        app.env.create_episode(pb::CreateEpisodeRequest { evaluator: 9, ..custom("y", pb::Evaluator::Unspecified) }).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("evaluator"), "{}", err.message());
}

#[tokio::test]
async fn llm_edit_writes_merge_text_through_call_tool() {
    let llm = FakeOpenAi::start(|_| Canned::answer("Ann keeps bees and loves green.")).await;
    let mut app = app_with(&llm, &["--llm-edit"]).await;
    app.env.create_episode(custom("ed", pb::Evaluator::Unspecified)).await.unwrap();
    let r = app.tool("ed", "merge_memory", serde_json::json!({"memory_ids": ["m0000", "m0001"], "strategy": "summarize"})).await.unwrap();
    assert!(
        r.text.contains("Ann keeps bees and loves green.") && r.text.contains(&format!("text written by the LLM ({MODEL})")),
        "{}",
        r.text
    );
    let mems = app.all_memories("ed").await;
    assert_eq!(mems.len(), 1);
    assert_eq!(
        (mems[0].text.as_str(), mems[0].evidence.clone()),
        ("Ann keeps bees and loves green.", vec!["D1:1".to_string(), "D1:2".to_string()])
    );
    assert!(last_user(&llm.seen()[0]).contains("1. Ann keeps bees in her garden.\n2. Ann's favourite colour is green."));
}

/// A gRPC client over a bare HTTP/2 connection that sends `grpc-timeout` and leaves the deadline to the
/// server, so the status seen is the server's. (tonic's own client enforces the header itself and answers
/// CANCELLED "Timeout expired" when it fires, which would hide the server's answer.)
#[derive(Clone)]
struct BareH2(hyper::client::conn::http2::SendRequest<tonic::body::Body>);

impl tower_service::Service<http::Request<tonic::body::Body>> for BareH2 {
    type Response = http::Response<hyper::body::Incoming>;
    type Error = hyper::Error;
    type Future = std::pin::Pin<Box<dyn std::future::Future<Output = Result<Self::Response, hyper::Error>> + Send>>;
    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), hyper::Error>> {
        self.0.poll_ready(cx)
    }
    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        Box::pin(self.0.send_request(req))
    }
}

async fn bare_client(addr: std::net::SocketAddr) -> memgym::api::pb::memory_env_client::MemoryEnvClient<BareH2> {
    let io = hyper_util::rt::TokioIo::new(tokio::net::TcpStream::connect(addr).await.unwrap());
    let (send, conn) = hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io).await.unwrap();
    tokio::spawn(conn);
    let origin: http::Uri = format!("http://{addr}").parse().unwrap();
    memgym::api::pb::memory_env_client::MemoryEnvClient::with_origin(BareH2(send), origin)
}

/// A deadline that passes while the server is still working (here: waiting for a slow LLM) is
/// DEADLINE_EXCEEDED. tonic's server-side timeout layer answers CANCELLED "Timeout expired": before
/// `api::deadline` every one of these calls came back CANCELLED.
#[tokio::test]
async fn a_deadline_passing_inside_the_server_is_deadline_exceeded_never_cancelled() {
    let llm = FakeOpenAi::start(|_| Canned::answer("bees").after(Duration::from_secs(5))).await;
    let mut app = app_with(&llm, &["--evaluator", "llm-f1"]).await;
    app.env.create_episode(custom("late", pb::Evaluator::Unspecified)).await.unwrap();
    let mut bare = bare_client(app.server.addr).await;
    let start = std::time::Instant::now();
    for ms in (1..=40).chain([60, 80, 100]) {
        let mut req = tonic::Request::new(pb::ScoreEpisodeRequest { episode_id: "late".into() });
        req.metadata_mut().insert("grpc-timeout", format!("{ms}m").parse().unwrap());
        let e = bare.score_episode(req).await.expect_err("the LLM is slower than the deadline");
        assert_eq!(e.code(), Code::DeadlineExceeded, "timeout {ms} ms: {e:?}");
    }
    assert!(start.elapsed() < Duration::from_secs(20));
    // The abandoned calls did not score the episode: it still takes edits.
    app.tool("late", "delete_memory", serde_json::json!({"memory_id": "m0001"})).await.unwrap();
}

/// Text the LLM writes under `--llm-edit` loses control characters and bidi overrides (they are the
/// model's doing, not the client's: stripped, never a refused call).
#[tokio::test]
async fn llm_edit_text_is_stripped_of_control_and_bidi_characters() {
    let llm = FakeOpenAi::start(|_| Canned::answer("Ann keeps \u{1b}[31mbees\u{0} and loves \u{202e}green.")).await;
    let mut app = app_with(&llm, &["--llm-edit"]).await;
    app.env.create_episode(custom("strip", pb::Evaluator::Unspecified)).await.unwrap();
    app.tool("strip", "merge_memory", serde_json::json!({"memory_ids": ["m0000", "m0001"], "strategy": "summarize"})).await.unwrap();
    assert_eq!(app.all_memories("strip").await[0].text, "Ann keeps [31mbees and loves green.");
    llm.respond_with(|_| Canned::answer("[\"Ann keeps \\u0000bees.\\u001b[0m\", \"Ann \u{2066}loves green.\u{9b}\"]"));
    let content = "Ann keeps bees in her garden, and she loves the colour green.";
    app.tool("strip", "manage_memory", serde_json::json!({"operation": "create", "content": content})).await.unwrap();
    let r = app.tool("strip", "split_memory", serde_json::json!({"memory_id": "m0003", "split_criteria": "thematic"})).await.unwrap();
    let texts: Vec<String> = app.all_memories("strip").await.into_iter().skip(1).map(|m| m.text).collect();
    assert_eq!(texts, ["Ann keeps bees.[0m", "Ann loves green."], "{}", r.text);
}
