//! [`OpenAiChat`] against a real HTTP server on loopback (`tests/support/fake_openai.rs`).

use std::time::{Duration, Instant};

use super::*;
use crate::llm::{ChatMessage, Llm};

use crate::fake_openai::{self, Canned, FakeOpenAi};

fn client(server: &FakeOpenAi, f: impl FnOnce(ChatConfig) -> ChatConfig) -> OpenAiChat {
    OpenAiChat::new(f(ChatConfig { timeout: Duration::from_secs(5), ..ChatConfig::new(server.url.clone(), "test-model") })).unwrap()
}

#[tokio::test]
async fn sends_the_exact_request_and_returns_the_content() {
    let server = FakeOpenAi::start(|_| Canned::answer("7 May 2023")).await;
    let chat = client(&server, |c| c);
    let request = ChatRequest {
        messages: vec![ChatMessage::system("be brief"), ChatMessage::user("When did Caroline go?")],
        max_tokens: 32,
        temperature: 0.0,
    };
    assert_eq!(chat.complete(&request).await.unwrap(), "7 May 2023");
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0],
        serde_json::json!({
            "model": "test-model",
            "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "When did Caroline go?"}],
            "temperature": 0.0,
            "max_tokens": 32,
            "seed": 42
        })
    );
    // No seed when asked not to send one.
    let chat = client(&server, |c| ChatConfig { seed: None, ..c });
    chat.complete(&ChatRequest::user("q", 8)).await.unwrap();
    assert!(server.seen()[1].get("seed").is_none());
}

#[tokio::test]
async fn rate_limits_and_server_errors_are_retried_then_succeed() {
    let server = FakeOpenAi::start(|_| Canned::answer("ok")).await;
    server.push([Canned::error(429, "slow down"), Canned::error(503, "warming up")]);
    let chat = client(&server, |c| c);
    assert_eq!(chat.complete(&ChatRequest::user("q", 8)).await.unwrap(), "ok");
    assert_eq!(server.seen().len(), 3);
}

#[tokio::test]
async fn server_errors_forever_give_a_clear_unavailable_error() {
    let server = FakeOpenAi::start(|_| Canned::error(500, "model crashed")).await;
    let chat = client(&server, |c| ChatConfig { max_retries: 2, ..c });
    let err = chat.complete(&ChatRequest::user("q", 8)).await.unwrap_err();
    let LlmError::Unavailable { message } = &err else { panic!("{err:?}") };
    assert!(message.contains("HTTP 500") && message.contains("model crashed") && message.contains("gave up after 3 attempts"), "{message}");
    assert!(message.contains(&format!("{}/chat/completions", server.url)), "{message}");
    assert_eq!(server.seen().len(), 3);
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    let server = FakeOpenAi::start(|_| Canned::error(404, "model 'x' does not exist")).await;
    let chat = client(&server, |c| c);
    let err = chat.complete(&ChatRequest::user("q", 8)).await.unwrap_err();
    assert!(
        matches!(&err, LlmError::Unavailable { message } if message.contains("HTTP 404") && message.contains("not retried")),
        "{err:?}"
    );
    assert_eq!(server.seen().len(), 1);
}

#[tokio::test]
async fn a_slow_server_times_out_with_a_timeout_error() {
    let server = FakeOpenAi::start(|_| Canned::answer("late").after(Duration::from_secs(5))).await;
    let chat = client(&server, |c| ChatConfig { timeout: Duration::from_millis(150), max_retries: 1, ..c });
    let start = Instant::now();
    let err = chat.complete(&ChatRequest::user("q", 8)).await.unwrap_err();
    assert!(
        matches!(&err, LlmError::Timeout { message } if message.contains("timed out after 150ms") && message.contains("2 attempts")),
        "{err:?}"
    );
    assert!(start.elapsed() < Duration::from_secs(3), "{:?}", start.elapsed());
    assert_eq!(server.seen().len(), 2);
}

#[tokio::test]
async fn malformed_replies_are_bad_reply_errors_and_not_retried() {
    let server = FakeOpenAi::start(|_| Canned::answer("unused")).await;
    server.push([
        Canned::raw("this is not json"),
        Canned::raw(r#"{"choices": []}"#),
        Canned::raw(r#"{"choices": [{"message": {"role": "assistant", "content": null}}]}"#),
    ]);
    let chat = client(&server, |c| c);
    for want in ["invalid response", "no choices", "no message content"] {
        let err = chat.complete(&ChatRequest::user("q", 8)).await.unwrap_err();
        assert!(matches!(&err, LlmError::BadReply { message } if message.contains(want)), "{want}: {err:?}");
    }
    assert_eq!(server.seen().len(), 3);
}

#[tokio::test]
async fn concurrency_is_bounded_by_the_semaphore() {
    let server = FakeOpenAi::start(|_| Canned::answer("ok").after(Duration::from_millis(100))).await;
    let chat = Arc::new(client(&server, |c| ChatConfig { concurrency: 2, ..c }));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..6 {
        let chat = chat.clone();
        tasks.push(tokio::spawn(async move { chat.complete(&ChatRequest::user(format!("q{i}"), 8)).await }));
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    // Six 100 ms requests two at a time take at least three rounds.
    assert!(start.elapsed() >= Duration::from_millis(290), "{:?}", start.elapsed());
}

#[tokio::test]
async fn the_key_is_sent_as_bearer_and_never_printed() {
    let server = FakeOpenAi::start(|_| Canned::answer("ok")).await;
    let chat = client(&server, |c| ChatConfig { api_key: Some(ApiKey::new("sk-secret-123")), ..c });
    assert!(!format!("{chat:?}").contains("sk-secret-123"));
    assert!(format!("{chat:?}").contains("<redacted>"));
    chat.complete(&ChatRequest::user("q", 8)).await.unwrap();
    let without = client(&server, |c| c);
    without.complete(&ChatRequest::user("q", 8)).await.unwrap();
    assert_eq!(server.authorizations(), [Some("Bearer sk-secret-123".to_string()), None]);
}

#[tokio::test]
async fn bad_settings_are_refused_before_any_request() {
    let cases = [
        (ChatConfig::new("localhost:8000", "m"), "llm_base_url"),
        (ChatConfig::new("http://127.0.0.1:1/v1", " "), "llm_model"),
        (ChatConfig { timeout: Duration::ZERO, ..ChatConfig::new("http://127.0.0.1:1/v1", "m") }, "llm_timeout"),
        (ChatConfig { concurrency: 0, ..ChatConfig::new("http://127.0.0.1:1/v1", "m") }, "llm_concurrency"),
    ];
    for (config, field) in cases {
        let err = OpenAiChat::new(config).unwrap_err();
        assert!(matches!(err, LlmError::Config { field: f, .. } if f == field), "{field}: {err:?}");
    }
}

#[tokio::test]
async fn an_unreachable_endpoint_is_unavailable_with_the_cause() {
    // A port nobody listens on: bind, note it, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let chat = OpenAiChat::new(ChatConfig { max_retries: 1, ..ChatConfig::new(format!("http://127.0.0.1:{port}/v1"), "m") }).unwrap();
    let err = chat.complete(&ChatRequest::user("q", 8)).await.unwrap_err();
    assert!(matches!(&err, LlmError::Unavailable { message } if message.to_lowercase().contains("connect")), "{err:?}");
}

#[tokio::test]
async fn the_cache_in_front_sends_one_request_per_distinct_prompt() {
    let server = FakeOpenAi::start(|b| Canned::answer(&format!("re: {}", fake_openai::last_user(b)))).await;
    let llm = Llm::new(Arc::new(client(&server, |c| c)), 64);
    for _ in 0..3 {
        assert_eq!(llm.ask(&ChatRequest::user("a", 8)).await.unwrap(), "re: a");
        assert_eq!(llm.ask(&ChatRequest::user("b", 8)).await.unwrap(), "re: b");
    }
    assert_eq!(server.prompts(), ["a", "b"]);
}
