//! [`OpenAiEmbedder`] against a real HTTP server on loopback (`tests/support/fake_openai.rs`).

use std::time::Instant;

use serde_json::Value;

use super::*;
use crate::embed::EmbedService;

use crate::fake_openai::{embeddings, fake_vector, inputs, Canned, FakeOpenAi};

fn config(server: &FakeOpenAi) -> OpenAiConfig {
    OpenAiConfig { timeout: Duration::from_secs(5), ..OpenAiConfig::new(server.url.clone(), "test-model") }
}

/// The texts of every request the server saw, in arrival order.
fn sent(server: &FakeOpenAi) -> Vec<Vec<String>> {
    server.seen().iter().map(inputs).collect()
}

/// Embeddings replies of `dim` changed by `edit` before they are sent.
fn edited(server: &FakeOpenAi, dim: usize, edit: impl Fn(&mut Vec<Value>) + Send + Sync + 'static) {
    server.respond_to_embeddings(move |b| {
        let mut reply = embeddings(b, dim);
        edit(reply["data"].as_array_mut().unwrap());
        Canned::json(&reply)
    });
}

fn texts(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("memory number {i}")).collect()
}

fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn backend_message(r: Result<impl std::fmt::Debug, EmbedError>) -> String {
    match r {
        Err(EmbedError::Backend { message, .. }) => message,
        other => panic!("expected a backend error, got {other:?}"),
    }
}

#[test]
fn connect_probes_and_sets_identity() {
    let server = FakeOpenAi::start_blocking(16);
    let e = OpenAiEmbedder::connect(OpenAiConfig { base_url: format!("{}/", server.url), ..config(&server) }).unwrap();
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(inputs(&seen[0]), vec![PROBE_TEXT.to_string()]);
    assert_eq!(seen[0]["model"], "test-model");
    let id = e.identity();
    assert_eq!(id.name, "openai:test-model");
    assert_eq!(id.dim, 16);
    assert_eq!(id.fingerprint, format!("{:016x}", fnv1a(format!("{}|test-model|16", server.url).as_bytes())));
    assert_eq!(e.config().base_url, server.url, "trailing slash trimmed");
    let other = OpenAiEmbedder::connect(OpenAiConfig { model: "other".into(), ..config(&server) }).unwrap();
    assert_ne!(other.identity().fingerprint, id.fingerprint);
    assert_eq!(e.embed_batch(&[]).unwrap(), Vec::<Vec<f32>>::new());
    assert_eq!(server.seen().len(), 2, "an empty batch sends nothing");
}

#[test]
fn batches_of_batch_size_in_input_order_despite_shuffled_data() {
    let server = FakeOpenAi::start_blocking(16);
    let e = OpenAiEmbedder::connect(OpenAiConfig { dim: Some(16), ..config(&server) }).unwrap();
    server.clear();
    edited(&server, 16, |data| data.reverse());
    let texts = texts(150);
    let vectors = e.embed_batch(&refs(&texts)).unwrap();
    assert_eq!(vectors.len(), 150);
    for (t, v) in texts.iter().zip(&vectors) {
        assert_eq!(v, &fake_vector(t, 16), "vector of {t:?}");
    }
    let mut seen = sent(&server);
    assert_eq!(seen.len(), 3, "150 texts / 64 = 3 requests");
    // Up to MAX_IN_FLIGHT batches run at once, so the arrival order is free.
    seen.sort_by_key(|s| texts.iter().position(|t| *t == s[0]).unwrap());
    assert_eq!(seen.iter().map(Vec::len).collect::<Vec<_>>(), vec![64, 64, 22]);
    assert_eq!(seen.concat(), texts);
}

#[test]
fn blank_texts_are_not_sent_and_embed_to_zeros() {
    let server = FakeOpenAi::start_blocking(8);
    let e = OpenAiEmbedder::connect(OpenAiConfig { batch_size: 2, ..config(&server) }).unwrap();
    server.clear();
    let v = e.embed_batch(&["alpha", "", "beta", "  ", "gamma"]).unwrap();
    assert_eq!(v[0], fake_vector("alpha", 8));
    assert_eq!(v[1], vec![0.0; 8]);
    assert_eq!(v[2], fake_vector("beta", 8));
    assert_eq!(v[3], vec![0.0; 8]);
    assert_eq!(v[4], fake_vector("gamma", 8));
    let mut sent = sent(&server);
    sent.sort();
    assert_eq!(sent, vec![vec!["alpha".to_string(), "beta".into()], vec!["gamma".into()]]);
    assert!(e.embed_batch(&[""]).unwrap()[0].iter().all(|x| *x == 0.0));
}

#[test]
fn dimension_mismatches_are_clear_errors() {
    let server = FakeOpenAi::start_blocking(8);
    match OpenAiEmbedder::connect(OpenAiConfig { dim: Some(16), ..config(&server) }) {
        Err(e @ EmbedError::Dimension { expected: 16, got: 8, .. }) => {
            assert_eq!(e.to_string(), "embedder openai:test-model returned 8 dimensions, expected 16");
        }
        other => panic!("expected a dimension error, got {other:?}"),
    }
    let e = OpenAiEmbedder::connect(OpenAiConfig { dim: Some(8), ..config(&server) }).unwrap();
    // One vector of a batch comes back shorter.
    edited(&server, 8, |data| data[1]["embedding"] = serde_json::json!(fake_vector("b", 7)));
    assert!(matches!(e.embed_batch(&["a", "b", "c"]), Err(EmbedError::Dimension { expected: 8, got: 7, .. })));
    // A whole batch in another dimension (the server's model changed).
    edited(&server, 12, |_| {});
    assert!(matches!(e.embed_batch(&["a"]), Err(EmbedError::Dimension { expected: 8, got: 12, .. })));
}

#[test]
fn missing_or_bad_items_are_errors() {
    let server = FakeOpenAi::start_blocking(4);
    let e = OpenAiEmbedder::connect(config(&server)).unwrap();
    edited(&server, 4, |data| drop(data.pop()));
    assert!(matches!(e.embed_batch(&["a", "b"]), Err(EmbedError::Count { expected: 2, got: 1, .. })));
    edited(&server, 4, |_| {});
    let dup = r#"{"object":"list","model":"m","data":[{"object":"embedding","index":0,"embedding":[1,2,3,4]},{"object":"embedding","index":0,"embedding":[1,2,3,4]}]}"#;
    server.push([Canned::raw(dup)]);
    assert!(backend_message(e.embed_batch(&["a", "b"])).contains("appears twice"));
    server.push([Canned::raw("not json")]);
    let msg = backend_message(e.embed_batch(&["a"]));
    assert!(msg.contains("invalid response") && msg.contains("not json"), "{msg}");
    // No `usage`/`object`/`model`: still accepted.
    let bare = r#"{"data":[{"index":0,"embedding":[0.5,0.5,0.5,0.5]}]}"#;
    server.push([Canned::raw(bare)]);
    assert_eq!(e.embed_batch(&["a"]).unwrap(), vec![vec![0.5; 4]]);
}

#[test]
fn server_errors_are_retried_then_succeed() {
    let server = FakeOpenAi::start_blocking(4);
    let e = OpenAiEmbedder::connect(config(&server)).unwrap();
    server.clear();
    server.push([Canned::raw("boom").status(500), Canned::raw(r#"{"error":"overloaded"}"#).status(503)]);
    let v = e.embed_batch(&["x"]).unwrap();
    assert_eq!(v, vec![fake_vector("x", 4)]);
    assert_eq!(server.seen().len(), 3);
}

#[test]
fn server_errors_forever_give_up_with_status_and_attempts() {
    let server = FakeOpenAi::start_blocking(4);
    let e = OpenAiEmbedder::connect(config(&server)).unwrap();
    server.clear();
    server.respond_to_embeddings(|_| Canned::raw("the GPU caught fire").status(500));
    let start = Instant::now();
    let msg = backend_message(e.embed_batch(&["x"]));
    let took = start.elapsed();
    assert!(msg.contains("500 Internal Server Error"), "{msg}");
    assert!(msg.contains("the GPU caught fire"), "{msg}");
    assert!(msg.contains("gave up after 4 attempts"), "{msg}");
    assert_eq!(server.seen().len(), 4, "1 try + 3 retries");
    // Backoff 100 + 200 + 400 ms.
    assert!(took >= Duration::from_millis(650) && took < Duration::from_secs(5), "{took:?}");
}

#[test]
fn rate_limits_are_retried_but_client_errors_are_not() {
    let server = FakeOpenAi::start_blocking(4);
    let e = OpenAiEmbedder::connect(config(&server)).unwrap();
    server.clear();
    // TEI's error shape.
    server.push([Canned::raw(r#"{"error":"Model is overloaded","error_type":"overloaded"}"#).status(429)]);
    assert_eq!(e.embed_batch(&["x"]).unwrap(), vec![fake_vector("x", 4)]);
    assert_eq!(server.seen().len(), 2);

    server.clear();
    let openai_shape = r#"{"error":{"message":"This model's maximum context length is 8192 tokens","type":"invalid_request_error","param":null,"code":null}}"#;
    server.push([Canned::raw(openai_shape).status(400)]);
    let msg = backend_message(e.embed_batch(&["x"]));
    assert!(msg.contains("400 Bad Request") && msg.contains("maximum context length is 8192"), "{msg}");
    assert!(msg.contains("not retried"), "{msg}");
    assert_eq!(server.seen().len(), 1);

    // Always-429 gives up like a 5xx.
    server.clear();
    server.respond_to_embeddings(|_| Canned::raw(r#"{"error":"slow down"}"#).status(429));
    let msg = backend_message(e.embed_batch(&["x"]));
    assert!(msg.contains("429") && msg.contains("slow down") && msg.contains("4 attempts"), "{msg}");
}

#[test]
fn slow_server_times_out_instead_of_hanging() {
    let server = FakeOpenAi::start_blocking(4);
    let e = OpenAiEmbedder::connect(OpenAiConfig { timeout: Duration::from_millis(200), max_retries: 1, ..config(&server) }).unwrap();
    server.clear();
    server.respond_to_embeddings(|b| Canned::json(&embeddings(b, 4)).after(Duration::from_secs(3)));
    let start = Instant::now();
    let msg = backend_message(e.embed_batch(&["x"]));
    let took = start.elapsed();
    assert!(msg.contains("timed out after 200ms") && msg.contains("2 attempts"), "{msg}");
    assert_eq!(server.seen().len(), 2, "timeouts are retried");
    assert!(took < Duration::from_millis(2500), "{took:?}");
    // Fast again: the same embedder recovers.
    server.respond_to_embeddings(|b| Canned::json(&embeddings(b, 4)));
    assert_eq!(e.embed_batch(&["y"]).unwrap(), vec![fake_vector("y", 4)]);
}

#[test]
fn unreachable_server_fails_connect_with_the_cause() {
    // A port that was just free: connection refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let start = Instant::now();
    let cfg = OpenAiConfig { max_retries: 2, ..OpenAiConfig::new(format!("http://127.0.0.1:{port}/v1"), "m") };
    let msg = backend_message(OpenAiEmbedder::connect(cfg));
    assert!(msg.contains("failed") && msg.contains("3 attempts"), "{msg}");
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn https_goes_through_tls() {
    // A plain-text peer on an https URL: the TLS handshake must be attempted (and fail), which
    // shows a TLS backend is compiled in.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let peer = std::thread::spawn(move || {
        use std::io::Write;
        let (mut stream, _) = listener.accept().unwrap();
        let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n");
    });
    let cfg =
        OpenAiConfig { max_retries: 0, timeout: Duration::from_secs(5), ..OpenAiConfig::new(format!("https://127.0.0.1:{port}/v1"), "m") };
    let msg = backend_message(OpenAiEmbedder::connect(cfg));
    assert!(msg.contains("https://127.0.0.1") && !msg.contains("timed out") && !msg.contains("scheme"), "{msg}");
    peer.join().unwrap();
}

#[test]
fn bad_configs_are_rejected_before_any_request() {
    let server = FakeOpenAi::start_blocking(4);
    for cfg in [
        OpenAiConfig { batch_size: 0, ..config(&server) },
        OpenAiConfig { base_url: "127.0.0.1:1/v1".into(), ..config(&server) },
        OpenAiConfig { model: " ".into(), ..config(&server) },
        OpenAiConfig { timeout: Duration::ZERO, ..config(&server) },
    ] {
        assert!(matches!(OpenAiEmbedder::connect(cfg), Err(EmbedError::Backend { .. })));
    }
    assert!(server.seen().is_empty());
    // A wrong path prefix: the server's 404 is reported, not retried.
    let msg =
        backend_message(OpenAiEmbedder::connect(OpenAiConfig { base_url: server.url.trim_end_matches("/v1").into(), ..config(&server) }));
    assert!(msg.contains("404") && msg.contains("/embeddings"), "{msg}");
}

#[test]
fn api_key_is_sent_as_bearer_and_never_printed() {
    let secret = "sk-test-0123456789-very-secret";
    let server = FakeOpenAi::start_blocking(4);
    let cfg = OpenAiConfig { api_key: Some(ApiKey::new(secret)), ..config(&server) };
    assert!(!format!("{cfg:?}").contains(secret));
    assert!(!format!("{cfg:#?}").contains(secret));
    assert!(format!("{cfg:?}").contains("<redacted>"));
    let e = OpenAiEmbedder::connect(cfg).unwrap();
    e.embed_batch(&["x"]).unwrap();
    assert!(!format!("{e:?}").contains(secret));
    assert!(!format!("{e:#?}").contains(secret));
    for authorization in server.authorizations() {
        assert_eq!(authorization.as_deref(), Some(format!("Bearer {secret}").as_str()));
    }
    // Without a key no Authorization header at all.
    server.clear();
    let e = OpenAiEmbedder::connect(config(&server)).unwrap();
    e.embed_batch(&["x"]).unwrap();
    assert!(server.authorizations().iter().all(Option::is_none), "{:?}", server.authorizations());
    // Nor in error messages.
    server.respond_to_embeddings(|_| Canned::raw(r#"{"error":{"message":"Incorrect API key provided"}}"#).status(401));
    let bad = OpenAiEmbedder::connect(OpenAiConfig { api_key: Some(ApiKey::new(secret)), ..config(&server) });
    let msg = backend_message(bad);
    assert!(msg.contains("401") && !msg.contains(secret), "{msg}");
}

#[test]
fn works_from_plain_threads_concurrently() {
    let server = FakeOpenAi::start_blocking(8);
    let e = Arc::new(OpenAiEmbedder::connect(OpenAiConfig { batch_size: 5, ..config(&server) }).unwrap());
    let handles: Vec<_> = (0..4)
        .map(|k| {
            let e = Arc::clone(&e);
            std::thread::spawn(move || {
                let texts: Vec<String> = (0..23).map(|i| format!("thread {k} text {i}")).collect();
                let v = e.embed_batch(&refs(&texts)).unwrap();
                texts.iter().zip(v).all(|(t, v)| v == fake_vector(t, 8))
            })
        })
        .collect();
    for h in handles {
        assert!(h.join().unwrap());
    }
}

#[test]
fn works_inside_spawn_blocking_and_through_embed_service() {
    let server = FakeOpenAi::start_blocking(8);
    let e = Arc::new(OpenAiEmbedder::connect(config(&server)).unwrap());
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let e2 = Arc::clone(&e);
    let v = rt.block_on(async move { tokio::task::spawn_blocking(move || e2.embed_batch(&["inside"])).await.unwrap() });
    assert_eq!(v.unwrap(), vec![fake_vector("inside", 8)]);
    let service = EmbedService::new(e, 2);
    let v = rt.block_on(service.embed(vec!["one".into(), "two".into()])).unwrap();
    let n: f32 = v[0].iter().map(|x| x * x).sum();
    assert!((n - 1.0).abs() < 1e-5, "EmbedService normalises");
    // The embedder (inside the service) is dropped on a runtime worker thread without trouble.
    rt.block_on(async move { drop(service) });
}

#[tokio::test(flavor = "current_thread")]
async fn connect_and_drop_work_from_async_code_on_a_single_thread_runtime() {
    // The worker owns its runtime, so even a caller blocking a single-threaded runtime cannot
    // starve the request (the test server runs on its own runtime too).
    let server = FakeOpenAi::start_blocking(4);
    let e = OpenAiEmbedder::connect(config(&server)).unwrap();
    let v = tokio::task::spawn_blocking(move || e.embed_batch(&["x"])).await.unwrap().unwrap();
    assert_eq!(v, vec![fake_vector("x", 4)]);
}

#[test]
fn drop_stops_the_worker_promptly() {
    let server = FakeOpenAi::start_blocking(4);
    let e = OpenAiEmbedder::connect(config(&server)).unwrap();
    e.embed_batch(&["x"]).unwrap();
    let start = Instant::now();
    drop(e);
    assert!(start.elapsed() < Duration::from_secs(1));
}
