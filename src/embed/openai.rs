//! [`OpenAiEmbedder`]: embeddings from any OpenAI-compatible `POST {base_url}/embeddings` endpoint
//! (OpenAI itself, text-embeddings-inference, vLLM, Ollama, llama.cpp, ...), through `async-openai`.
//!
//! # Threading
//! [`Embedder::embed_batch`] is synchronous and is called both from tokio's blocking pool (via
//! [`super::EmbedService`]) and from plain threads at startup. Blocking on a fresh runtime inside the
//! blocking pool panics ("Cannot start a runtime from within a runtime"), so the embedder owns a
//! **dedicated background thread** (`openai-embedder`) running a current-thread tokio runtime with the
//! HTTP client. `embed_batch` sends a job over a channel and blocks on a std channel for the reply; it
//! never touches the caller's runtime, so it works from any thread that may block. Concurrent callers
//! are served concurrently (each job is a task on that runtime). Dropping the embedder closes the job
//! channel; the thread then shuts its runtime down and exits, and `drop` joins it.
//!
//! # Requests
//! Texts are split into batches of [`OpenAiConfig::batch_size`], at most [`MAX_IN_FLIGHT`] batches
//! (4) of one call in flight at once. Results are placed by the `index` field of each response item (the
//! order of `data` is not trusted), every vector must have the embedder's dimension
//! ([`EmbedError::Dimension`]) and every text must get exactly one vector ([`EmbedError::Count`]).
//! Blank texts (empty or whitespace only) are not sent (OpenAI rejects empty input) and embed to the
//! zero vector, as with [`super::HashEmbedder`].
//!
//! # Errors and retries
//! HTTP 429, 5xx, timeouts ([`OpenAiConfig::timeout`] per attempt) and connection errors are retried
//! up to [`OpenAiConfig::max_retries`] times with exponential backoff (100 ms × 2^n, each wait capped
//! at 5 s); any other status fails at once with the server's message. Either way the failure is an
//! [`EmbedError::Backend`] naming the HTTP status (or the transport cause) and the attempt count.
//! The built-in retry layer of `async-openai` is replaced by a plain transport, so these are the only
//! retries, and error bodies in non-OpenAI shapes (TEI's `{"error": "..."}`) keep their status.
//!
//! # Identity
//! Name `openai:{model}`, the probed dimension, and fingerprint = FNV-1a (64-bit, hex) of
//! `"{base_url}|{model}|{dim}"`: the same server address and model give the same identity.
//!
//! The API key is sent as `Authorization: Bearer ...` only; it is never logged and the `Debug` output
//! of [`OpenAiConfig`] and [`OpenAiEmbedder`] redacts it. With no key no `Authorization` header is sent
//! (the `OPENAI_API_KEY` environment variable is deliberately not consulted).

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::{EmbedError, Embedder, EmbedderIdentity};
use crate::fnv::fnv1a;
use crate::openai_compat::{build_client, classify, normalize_base_url, with_retries, OpenAiClient};

/// Default number of texts per request.
const DEFAULT_BATCH_SIZE: usize = 64;
/// Default timeout of one HTTP attempt.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Default number of retries after the first attempt.
const DEFAULT_MAX_RETRIES: u32 = 3;
/// Most batches of one `embed_batch` call sent at the same time.
const MAX_IN_FLIGHT: usize = 4;
/// The text embedded by [`OpenAiEmbedder::connect`] to learn the dimension.
const PROBE_TEXT: &str = "dimension probe";

/// Settings of an [`OpenAiEmbedder`]. Build with [`OpenAiConfig::new`] and struct update syntax.
#[derive(Clone)]
pub struct OpenAiConfig {
    /// API base including the version prefix, e.g. `http://127.0.0.1:8080/v1` or
    /// `https://api.openai.com/v1`; requests go to `{base_url}/embeddings`.
    pub base_url: String,
    /// Model name sent with every request.
    pub model: String,
    /// Bearer token, if the server wants one. Never logged, redacted in `Debug`.
    pub api_key: Option<String>,
    /// Expected dimension: `connect` fails if the server's differs. `None` accepts what the probe returns.
    pub dim: Option<usize>,
    /// Texts per request (default 64).
    pub batch_size: usize,
    /// Timeout of one HTTP attempt, connect to last byte (default 30 s).
    pub timeout: Duration,
    /// Retries after the first attempt on 429, 5xx, timeouts and connection errors (default 3).
    pub max_retries: u32,
}

impl OpenAiConfig {
    /// A config for `model` at `base_url` with no key, no expected dimension and the defaults.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        OpenAiConfig {
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            dim: None,
            batch_size: DEFAULT_BATCH_SIZE,
            timeout: DEFAULT_TIMEOUT,
            max_retries: DEFAULT_MAX_RETRIES,
        }
    }
}

impl std::fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("dim", &self.dim)
            .field("batch_size", &self.batch_size)
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .finish()
    }
}

type Reply = Result<Vec<Vec<f32>>, EmbedError>;

/// One `embed_batch` call handed to the worker thread.
struct Job {
    texts: Vec<String>,
    /// `None` only for the probe, which learns the dimension.
    dim: Option<usize>,
    reply: std::sync::mpsc::Sender<Reply>,
}

/// An [`Embedder`] backed by an OpenAI-compatible HTTP endpoint (see the module doc).
pub struct OpenAiEmbedder {
    identity: EmbedderIdentity,
    config: OpenAiConfig,
    jobs: Option<mpsc::UnboundedSender<Job>>,
    worker: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for OpenAiEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiEmbedder").field("identity", &self.identity).field("config", &self.config).finish()
    }
}

impl OpenAiEmbedder {
    /// Starts the worker thread and embeds `"dimension probe"` once to learn the dimension (checked against
    /// `cfg.dim` if set). Blocks for that request: call it at startup or from a blocking context.
    pub fn connect(mut cfg: OpenAiConfig) -> Result<Self, EmbedError> {
        let name = format!("openai:{}", cfg.model);
        let invalid = |message: String| EmbedError::Backend { embedder: name.clone(), message };
        cfg.base_url = normalize_base_url(&cfg.base_url).map_err(|e| invalid(format!("base_url {e}")))?;
        if cfg.model.trim().is_empty() {
            return Err(invalid("model must not be empty".into()));
        }
        if cfg.batch_size == 0 {
            return Err(invalid("batch_size must be at least 1".into()));
        }
        if cfg.timeout.is_zero() {
            return Err(invalid("timeout must be positive".into()));
        }
        if cfg.dim == Some(0) {
            return Err(invalid("dim must be at least 1".into()));
        }

        let (jobs, worker) = spawn_worker(&cfg, name.clone())?;
        // From here on, dropping `embedder` stops the worker.
        let mut embedder = OpenAiEmbedder {
            identity: EmbedderIdentity { name: name.clone(), dim: 0, fingerprint: String::new() },
            config: cfg,
            jobs: Some(jobs),
            worker: Some(worker),
        };
        let probe = embedder.submit(vec![PROBE_TEXT.to_string()], None)?;
        let got = probe.first().map_or(0, Vec::len);
        if got == 0 {
            return Err(invalid("the dimension probe returned an empty vector".into()));
        }
        if let Some(expected) = embedder.config.dim {
            if expected != got {
                return Err(EmbedError::Dimension { embedder: name, expected, got });
            }
        }
        let cfg = &embedder.config;
        let fingerprint = format!("{:016x}", fnv1a(format!("{}|{}|{}", cfg.base_url, cfg.model, got).as_bytes()));
        embedder.identity.dim = got;
        embedder.identity.fingerprint = fingerprint;
        tracing::info!(embedder = %embedder.identity, base_url = %embedder.config.base_url, "connected to embeddings endpoint");
        Ok(embedder)
    }

    /// The settings in use (`base_url` without a trailing slash).
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    fn submit(&self, texts: Vec<String>, dim: Option<usize>) -> Reply {
        let stopped = || EmbedError::Join(format!("{}: the embedding worker thread has stopped", self.identity.name));
        let (reply, rx) = std::sync::mpsc::channel();
        self.jobs.as_ref().ok_or_else(stopped)?.send(Job { texts, dim, reply }).map_err(|_| stopped())?;
        rx.recv().map_err(|_| stopped())?
    }
}

impl Embedder for OpenAiEmbedder {
    fn identity(&self) -> &EmbedderIdentity {
        &self.identity
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        self.submit(texts.iter().map(|t| (*t).to_string()).collect(), Some(self.identity.dim))
    }
}

impl Drop for OpenAiEmbedder {
    fn drop(&mut self) {
        // Closing the channel ends the worker's loop; no job can be in flight (they borrow `self`).
        drop(self.jobs.take());
        if let Some(worker) = self.worker.take() {
            if worker.join().is_err() {
                tracing::error!(embedder = %self.identity.name, "embedding worker thread panicked");
            }
        }
    }
}

/// Starts the worker thread; returns once its runtime and HTTP client exist.
fn spawn_worker(cfg: &OpenAiConfig, name: String) -> Result<(mpsc::UnboundedSender<Job>, std::thread::JoinHandle<()>), EmbedError> {
    let (jobs, mut rx) = mpsc::unbounded_channel::<Job>();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), String>>();
    let cfg = cfg.clone();
    let thread_name = name.clone();
    let worker = std::thread::Builder::new()
        .name("openai-embedder".into())
        .spawn(move || {
            let built = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start the worker runtime: {e}"))
                .and_then(|rt| {
                    let guard = rt.enter();
                    let requester = Requester::new(&cfg, thread_name)?;
                    drop(guard);
                    Ok((rt, requester))
                });
            let (rt, requester) = match built {
                Ok(ok) => ok,
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            let _ = ready_tx.send(Ok(()));
            let requester = Arc::new(requester);
            rt.block_on(async move {
                while let Some(job) = rx.recv().await {
                    let requester = Arc::clone(&requester);
                    tokio::spawn(async move {
                        let result = requester.embed_all(job.texts, job.dim).await;
                        // The caller may have given up (it cannot today); nothing to do then.
                        let _ = job.reply.send(result);
                    });
                }
            });
            // Dropping `rt` here cancels whatever is left (nothing: every job has replied).
        })
        .map_err(|e| EmbedError::Backend { embedder: name.clone(), message: format!("cannot spawn the worker thread: {e}") })?;
    match ready_rx.recv() {
        Ok(Ok(())) => Ok((jobs, worker)),
        Ok(Err(message)) => {
            let _ = worker.join();
            Err(EmbedError::Backend { embedder: name, message })
        }
        Err(_) => {
            let _ = worker.join();
            Err(EmbedError::Join(format!("{name}: the embedding worker thread died while starting")))
        }
    }
}

/// Request body (`{"model": .., "input": [..]}`).
#[derive(Serialize)]
struct EmbeddingRequest<'a> {
    model: &'a str,
    input: &'a [String],
}

/// The parts of the response we use; `object`, `model` and `usage` may be missing (some servers omit them).
#[derive(Deserialize)]
struct EmbeddingResponse {
    data: Vec<EmbeddingItem>,
}

#[derive(Deserialize)]
struct EmbeddingItem {
    index: usize,
    embedding: Vec<f32>,
}

/// Lives on the worker thread: the client and the retry policy.
struct Requester {
    client: OpenAiClient,
    name: String,
    url: String,
    model: String,
    batch_size: usize,
    timeout: Duration,
    max_retries: u32,
}

impl Requester {
    fn new(cfg: &OpenAiConfig, name: String) -> Result<Self, String> {
        Ok(Requester {
            client: build_client(&cfg.base_url, cfg.api_key.as_deref(), cfg.timeout)?,
            name,
            url: format!("{}/embeddings", cfg.base_url),
            model: cfg.model.clone(),
            batch_size: cfg.batch_size,
            timeout: cfg.timeout,
            max_retries: cfg.max_retries,
        })
    }

    /// Embeds `texts` (blank ones to zeros), batch by batch, at most [`MAX_IN_FLIGHT`] at once.
    async fn embed_all(self: Arc<Self>, texts: Vec<String>, dim: Option<usize>) -> Reply {
        let n = texts.len();
        let mut out: Vec<Option<Vec<f32>>> = vec![None; n];
        let mut positions = Vec::with_capacity(n);
        let mut inputs = Vec::with_capacity(n);
        for (i, text) in texts.into_iter().enumerate() {
            if text.trim().is_empty() {
                // The probe never has blank text, so `dim` is known here.
                out[i] = Some(vec![0.0; dim.unwrap_or(0)]);
            } else {
                positions.push(i);
                inputs.push(text);
            }
        }
        let mut batches = Vec::new();
        while !inputs.is_empty() {
            let rest = inputs.split_off(inputs.len().min(self.batch_size));
            let pos = positions.split_off(positions.len().min(self.batch_size));
            batches.push((std::mem::replace(&mut positions, pos), std::mem::replace(&mut inputs, rest)));
        }
        let mut batches = batches.into_iter();
        let mut running = JoinSet::new();
        loop {
            while running.len() < MAX_IN_FLIGHT {
                let Some((pos, batch)) = batches.next() else { break };
                let this = Arc::clone(&self);
                running.spawn(async move { (pos, this.embed_one_batch(batch, dim).await) });
            }
            let Some(done) = running.join_next().await else { break };
            // An early return drops `running`, which aborts the other batches.
            let (pos, vectors) = done.map_err(|e| EmbedError::Join(format!("{}: batch task failed: {e}", self.name)))?;
            for (p, v) in pos.into_iter().zip(vectors?) {
                out[p] = Some(v);
            }
        }
        out.into_iter().map(|v| v.ok_or_else(|| EmbedError::Join(format!("{}: a batch result went missing", self.name)))).collect()
    }

    /// One request with retries; returns the vectors in input order, checked.
    async fn embed_one_batch(&self, batch: Vec<String>, dim: Option<usize>) -> Reply {
        let request = EmbeddingRequest { model: &self.model, input: &batch };
        let response = with_retries(&self.name, &self.url, self.timeout, self.max_retries, |attempt| {
            tracing::debug!(embedder = %self.name, texts = batch.len(), attempt, "embedding request");
            let embeddings = self.client.embeddings();
            let request = &request;
            async move { embeddings.create_byot::<_, EmbeddingResponse>(request).await.map_err(|e| classify(e, &self.url, self.timeout)) }
        })
        .await
        .map_err(|e| self.backend(e.message))?;
        self.check(response, batch.len(), dim)
    }

    /// Orders the response by `index` and checks counts and dimensions.
    fn check(&self, response: EmbeddingResponse, expected: usize, dim: Option<usize>) -> Reply {
        if response.data.len() != expected {
            return Err(EmbedError::Count { embedder: self.name.clone(), expected, got: response.data.len() });
        }
        let mut ordered: Vec<Option<Vec<f32>>> = vec![None; expected];
        for item in response.data {
            let slot = ordered
                .get_mut(item.index)
                .ok_or_else(|| self.backend(format!("response index {} is out of range for {expected} inputs", item.index)))?;
            if slot.is_some() {
                return Err(self.backend(format!("response index {} appears twice", item.index)));
            }
            let want = dim.unwrap_or(item.embedding.len());
            if item.embedding.len() != want {
                return Err(EmbedError::Dimension { embedder: self.name.clone(), expected: want, got: item.embedding.len() });
            }
            *slot = Some(item.embedding);
        }
        // `expected` distinct in-range indices fill every slot.
        Ok(ordered.into_iter().flatten().collect())
    }

    fn backend(&self, message: String) -> EmbedError {
        EmbedError::Backend { embedder: self.name.clone(), message }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::time::Instant;

    use parking_lot::Mutex;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;
    use crate::embed::EmbedService;

    /// A canned reply: status and raw body.
    #[derive(Clone)]
    struct Canned(u16, &'static str);

    /// What the fake server does; tests change it between calls.
    #[derive(Default)]
    struct Script {
        /// Replies used one per request (any request, the probe included) before the default.
        queue: VecDeque<Canned>,
        /// When the queue is empty: this reply, or else a 200 with vectors.
        fallback: Option<Canned>,
        /// Dimension of the vectors.
        dim: usize,
        /// Dimension of the item at this index of each request instead of `dim`.
        odd_dim: Option<(usize, usize)>,
        /// Return `data` reversed.
        shuffle: bool,
        /// Leave out the last item of `data`.
        drop_last: bool,
        /// Sleep before answering.
        delay: Duration,
    }

    /// One request as the server saw it.
    #[derive(Clone, Debug)]
    struct Seen {
        inputs: Vec<String>,
        model: String,
        authorization: Option<String>,
    }

    struct TestServer {
        url: String,
        script: Arc<Mutex<Script>>,
        seen: Arc<Mutex<Vec<Seen>>>,
        rt: Option<tokio::runtime::Runtime>,
    }

    impl Drop for TestServer {
        fn drop(&mut self) {
            if let Some(rt) = self.rt.take() {
                rt.shutdown_background();
            }
        }
    }

    impl TestServer {
        /// A server on 127.0.0.1 answering `dim`-dimensional vectors.
        fn start(dim: usize) -> TestServer {
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
            // A std listener, so this works from inside another runtime too.
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.set_nonblocking(true).unwrap();
            let url = format!("http://{}/v1", listener.local_addr().unwrap());
            let script = Arc::new(Mutex::new(Script { dim, ..Script::default() }));
            let seen = Arc::new(Mutex::new(Vec::new()));
            let (s, r) = (Arc::clone(&script), Arc::clone(&seen));
            rt.spawn(async move {
                let listener = TcpListener::from_std(listener).unwrap();
                while let Ok((stream, _)) = listener.accept().await {
                    tokio::spawn(serve_connection(stream, Arc::clone(&s), Arc::clone(&r)));
                }
            });
            TestServer { url, script, seen, rt: Some(rt) }
        }

        fn config(&self) -> OpenAiConfig {
            OpenAiConfig { timeout: Duration::from_secs(5), ..OpenAiConfig::new(self.url.clone(), "test-model") }
        }

        fn seen(&self) -> Vec<Seen> {
            self.seen.lock().clone()
        }

        /// Forgets the requests seen so far (the probe).
        fn clear(&self) {
            self.seen.lock().clear();
        }
    }

    /// Serves HTTP/1.1 requests on one keep-alive connection.
    async fn serve_connection(mut stream: TcpStream, script: Arc<Mutex<Script>>, seen: Arc<Mutex<Vec<Seen>>>) {
        let mut buf = Vec::new();
        loop {
            let head_end = loop {
                if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    break p + 4;
                }
                match stream.read_buf(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
            };
            let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
            let mut lines = head.split("\r\n");
            let request_line = lines.next().unwrap_or_default().to_string();
            let mut content_length = 0;
            let mut authorization = None;
            for line in lines {
                if let Some((k, v)) = line.split_once(':') {
                    match k.trim().to_ascii_lowercase().as_str() {
                        "content-length" => content_length = v.trim().parse().unwrap(),
                        "authorization" => authorization = Some(v.trim().to_string()),
                        _ => {}
                    }
                }
            }
            while buf.len() < head_end + content_length {
                match stream.read_buf(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
            }
            let body: Vec<u8> = buf.drain(..head_end + content_length).skip(head_end).collect();
            let (status, reply) = if request_line.starts_with("POST /v1/embeddings ") {
                answer(&body, authorization, &script, &seen).await
            } else {
                (404, r#"{"error":{"message":"no such route"}}"#.to_string())
            };
            let response = format!(
                "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{reply}",
                reason(status),
                reply.len()
            );
            if stream.write_all(response.as_bytes()).await.is_err() {
                return;
            }
        }
    }

    async fn answer(body: &[u8], authorization: Option<String>, script: &Mutex<Script>, seen: &Mutex<Vec<Seen>>) -> (u16, String) {
        let request: serde_json::Value = serde_json::from_slice(body).unwrap();
        let inputs: Vec<String> = match request["input"].as_str() {
            Some(s) => vec![s.to_string()],
            None => request["input"].as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect(),
        };
        let model = request["model"].as_str().unwrap().to_string();
        seen.lock().push(Seen { inputs: inputs.clone(), model: model.clone(), authorization });
        let (canned, delay, dim, odd_dim, shuffle, drop_last) = {
            let mut s = script.lock();
            let canned = s.queue.pop_front().or_else(|| s.fallback.clone());
            (canned, s.delay, s.dim, s.odd_dim, s.shuffle, s.drop_last)
        };
        tokio::time::sleep(delay).await;
        if let Some(Canned(status, body)) = canned {
            return (status, body.to_string());
        }
        let mut data: Vec<serde_json::Value> = inputs
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let d = match odd_dim {
                    Some((at, d)) if at == i => d,
                    _ => dim,
                };
                serde_json::json!({"object": "embedding", "index": i, "embedding": fake_vector(t, d)})
            })
            .collect();
        if shuffle {
            data.reverse();
        }
        if drop_last {
            data.pop();
        }
        let tokens = inputs.iter().map(|t| t.split_whitespace().count()).sum::<usize>();
        let reply = serde_json::json!({
            "object": "list", "data": data, "model": model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}
        });
        (200, reply.to_string())
    }

    fn reason(status: u16) -> &'static str {
        match status {
            200 => "OK",
            400 => "Bad Request",
            404 => "Not Found",
            413 => "Payload Too Large",
            429 => "Too Many Requests",
            500 => "Internal Server Error",
            503 => "Service Unavailable",
            _ => "Whatever",
        }
    }

    /// Deterministic vector of a text.
    fn fake_vector(text: &str, dim: usize) -> Vec<f32> {
        (0..dim).map(|j| (fnv1a(format!("{j}:{text}").as_bytes()) % 2001) as f32 / 1000.0 - 1.0).collect()
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
        let server = TestServer::start(16);
        let e = OpenAiEmbedder::connect(OpenAiConfig { base_url: format!("{}/", server.url), ..server.config() }).unwrap();
        let seen = server.seen();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].inputs, vec![PROBE_TEXT.to_string()]);
        assert_eq!(seen[0].model, "test-model");
        let id = e.identity();
        assert_eq!(id.name, "openai:test-model");
        assert_eq!(id.dim, 16);
        assert_eq!(id.fingerprint, format!("{:016x}", fnv1a(format!("{}|test-model|16", server.url).as_bytes())));
        assert_eq!(e.config().base_url, server.url, "trailing slash trimmed");
        let other = OpenAiEmbedder::connect(OpenAiConfig { model: "other".into(), ..server.config() }).unwrap();
        assert_ne!(other.identity().fingerprint, id.fingerprint);
        assert_eq!(e.embed_batch(&[]).unwrap(), Vec::<Vec<f32>>::new());
        assert_eq!(server.seen().len(), 2, "an empty batch sends nothing");
    }

    #[test]
    fn batches_of_batch_size_in_input_order_despite_shuffled_data() {
        let server = TestServer::start(16);
        let e = OpenAiEmbedder::connect(OpenAiConfig { dim: Some(16), ..server.config() }).unwrap();
        server.clear();
        server.script.lock().shuffle = true;
        let texts = texts(150);
        let vectors = e.embed_batch(&refs(&texts)).unwrap();
        assert_eq!(vectors.len(), 150);
        for (t, v) in texts.iter().zip(&vectors) {
            assert_eq!(v, &fake_vector(t, 16), "vector of {t:?}");
        }
        let mut seen = server.seen();
        assert_eq!(seen.len(), 3, "150 texts / 64 = 3 requests");
        // Up to MAX_IN_FLIGHT batches run at once, so the arrival order is free.
        seen.sort_by_key(|s| texts.iter().position(|t| *t == s.inputs[0]).unwrap());
        assert_eq!(seen.iter().map(|s| s.inputs.len()).collect::<Vec<_>>(), vec![64, 64, 22]);
        assert_eq!(seen.iter().flat_map(|s| s.inputs.clone()).collect::<Vec<_>>(), texts);
    }

    #[test]
    fn blank_texts_are_not_sent_and_embed_to_zeros() {
        let server = TestServer::start(8);
        let e = OpenAiEmbedder::connect(OpenAiConfig { batch_size: 2, ..server.config() }).unwrap();
        server.clear();
        let v = e.embed_batch(&["alpha", "", "beta", "  ", "gamma"]).unwrap();
        assert_eq!(v[0], fake_vector("alpha", 8));
        assert_eq!(v[1], vec![0.0; 8]);
        assert_eq!(v[2], fake_vector("beta", 8));
        assert_eq!(v[3], vec![0.0; 8]);
        assert_eq!(v[4], fake_vector("gamma", 8));
        let mut sent: Vec<Vec<String>> = server.seen().into_iter().map(|s| s.inputs).collect();
        sent.sort();
        assert_eq!(sent, vec![vec!["alpha".to_string(), "beta".into()], vec!["gamma".into()]]);
        assert!(e.embed_batch(&[""]).unwrap()[0].iter().all(|x| *x == 0.0));
    }

    #[test]
    fn dimension_mismatches_are_clear_errors() {
        let server = TestServer::start(8);
        match OpenAiEmbedder::connect(OpenAiConfig { dim: Some(16), ..server.config() }) {
            Err(e @ EmbedError::Dimension { expected: 16, got: 8, .. }) => {
                assert_eq!(e.to_string(), "embedder openai:test-model returned 8 dimensions, expected 16");
            }
            other => panic!("expected a dimension error, got {other:?}"),
        }
        let e = OpenAiEmbedder::connect(OpenAiConfig { dim: Some(8), ..server.config() }).unwrap();
        // One vector of a batch comes back shorter.
        server.script.lock().odd_dim = Some((1, 7));
        assert!(matches!(e.embed_batch(&["a", "b", "c"]), Err(EmbedError::Dimension { expected: 8, got: 7, .. })));
        // A whole batch in another dimension (the server's model changed).
        server.script.lock().odd_dim = None;
        server.script.lock().dim = 12;
        assert!(matches!(e.embed_batch(&["a"]), Err(EmbedError::Dimension { expected: 8, got: 12, .. })));
    }

    #[test]
    fn missing_or_bad_items_are_errors() {
        let server = TestServer::start(4);
        let e = OpenAiEmbedder::connect(server.config()).unwrap();
        server.script.lock().drop_last = true;
        assert!(matches!(e.embed_batch(&["a", "b"]), Err(EmbedError::Count { expected: 2, got: 1, .. })));
        server.script.lock().drop_last = false;
        let dup = r#"{"object":"list","model":"m","data":[{"object":"embedding","index":0,"embedding":[1,2,3,4]},{"object":"embedding","index":0,"embedding":[1,2,3,4]}]}"#;
        server.script.lock().queue.push_back(Canned(200, dup));
        assert!(backend_message(e.embed_batch(&["a", "b"])).contains("appears twice"));
        server.script.lock().queue.push_back(Canned(200, "not json"));
        let msg = backend_message(e.embed_batch(&["a"]));
        assert!(msg.contains("invalid response") && msg.contains("not json"), "{msg}");
        // No `usage`/`object`/`model`: still accepted.
        let bare = r#"{"data":[{"index":0,"embedding":[0.5,0.5,0.5,0.5]}]}"#;
        server.script.lock().queue.push_back(Canned(200, bare));
        assert_eq!(e.embed_batch(&["a"]).unwrap(), vec![vec![0.5; 4]]);
    }

    #[test]
    fn server_errors_are_retried_then_succeed() {
        let server = TestServer::start(4);
        let e = OpenAiEmbedder::connect(server.config()).unwrap();
        server.clear();
        server.script.lock().queue.extend([Canned(500, "boom"), Canned(503, r#"{"error":"overloaded"}"#)]);
        let v = e.embed_batch(&["x"]).unwrap();
        assert_eq!(v, vec![fake_vector("x", 4)]);
        assert_eq!(server.seen().len(), 3);
    }

    #[test]
    fn server_errors_forever_give_up_with_status_and_attempts() {
        let server = TestServer::start(4);
        let e = OpenAiEmbedder::connect(server.config()).unwrap();
        server.clear();
        server.script.lock().fallback = Some(Canned(500, "the GPU caught fire"));
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
        let server = TestServer::start(4);
        let e = OpenAiEmbedder::connect(server.config()).unwrap();
        server.clear();
        // TEI's error shape.
        server.script.lock().queue.push_back(Canned(429, r#"{"error":"Model is overloaded","error_type":"overloaded"}"#));
        assert_eq!(e.embed_batch(&["x"]).unwrap(), vec![fake_vector("x", 4)]);
        assert_eq!(server.seen().len(), 2);

        server.clear();
        let openai_shape = r#"{"error":{"message":"This model's maximum context length is 8192 tokens","type":"invalid_request_error","param":null,"code":null}}"#;
        server.script.lock().queue.push_back(Canned(400, openai_shape));
        let msg = backend_message(e.embed_batch(&["x"]));
        assert!(msg.contains("400 Bad Request") && msg.contains("maximum context length is 8192"), "{msg}");
        assert!(msg.contains("not retried"), "{msg}");
        assert_eq!(server.seen().len(), 1);

        // Always-429 gives up like a 5xx.
        server.clear();
        server.script.lock().fallback = Some(Canned(429, r#"{"error":"slow down"}"#));
        let msg = backend_message(e.embed_batch(&["x"]));
        assert!(msg.contains("429") && msg.contains("slow down") && msg.contains("4 attempts"), "{msg}");
    }

    #[test]
    fn slow_server_times_out_instead_of_hanging() {
        let server = TestServer::start(4);
        let e = OpenAiEmbedder::connect(OpenAiConfig { timeout: Duration::from_millis(200), max_retries: 1, ..server.config() }).unwrap();
        server.clear();
        server.script.lock().delay = Duration::from_secs(3);
        let start = Instant::now();
        let msg = backend_message(e.embed_batch(&["x"]));
        let took = start.elapsed();
        assert!(msg.contains("timed out after 200ms") && msg.contains("2 attempts"), "{msg}");
        assert_eq!(server.seen().len(), 2, "timeouts are retried");
        assert!(took < Duration::from_millis(2500), "{took:?}");
        // Fast again: the same embedder recovers.
        server.script.lock().delay = Duration::ZERO;
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
        let cfg = OpenAiConfig {
            max_retries: 0,
            timeout: Duration::from_secs(5),
            ..OpenAiConfig::new(format!("https://127.0.0.1:{port}/v1"), "m")
        };
        let msg = backend_message(OpenAiEmbedder::connect(cfg));
        assert!(msg.contains("https://127.0.0.1") && !msg.contains("timed out") && !msg.contains("scheme"), "{msg}");
        peer.join().unwrap();
    }

    #[test]
    fn bad_configs_are_rejected_before_any_request() {
        let server = TestServer::start(4);
        for cfg in [
            OpenAiConfig { batch_size: 0, ..server.config() },
            OpenAiConfig { base_url: "127.0.0.1:1/v1".into(), ..server.config() },
            OpenAiConfig { model: " ".into(), ..server.config() },
            OpenAiConfig { timeout: Duration::ZERO, ..server.config() },
        ] {
            assert!(matches!(OpenAiEmbedder::connect(cfg), Err(EmbedError::Backend { .. })));
        }
        assert!(server.seen().is_empty());
        // A wrong path prefix: the server's 404 is reported, not retried.
        let msg = backend_message(OpenAiEmbedder::connect(OpenAiConfig {
            base_url: server.url.trim_end_matches("/v1").into(),
            ..server.config()
        }));
        assert!(msg.contains("404") && msg.contains("/embeddings"), "{msg}");
    }

    #[test]
    fn api_key_is_sent_as_bearer_and_never_printed() {
        let secret = "sk-test-0123456789-very-secret";
        let server = TestServer::start(4);
        let cfg = OpenAiConfig { api_key: Some(secret.into()), ..server.config() };
        assert!(!format!("{cfg:?}").contains(secret));
        assert!(!format!("{cfg:#?}").contains(secret));
        assert!(format!("{cfg:?}").contains("<redacted>"));
        let e = OpenAiEmbedder::connect(cfg).unwrap();
        e.embed_batch(&["x"]).unwrap();
        assert!(!format!("{e:?}").contains(secret));
        assert!(!format!("{e:#?}").contains(secret));
        for seen in server.seen() {
            assert_eq!(seen.authorization.as_deref(), Some(format!("Bearer {secret}").as_str()));
        }
        // Without a key no Authorization header at all.
        server.clear();
        let e = OpenAiEmbedder::connect(server.config()).unwrap();
        e.embed_batch(&["x"]).unwrap();
        assert!(server.seen().iter().all(|s| s.authorization.is_none()), "{:?}", server.seen());
        // Nor in error messages.
        server.script.lock().fallback = Some(Canned(401, r#"{"error":{"message":"Incorrect API key provided"}}"#));
        let bad = OpenAiEmbedder::connect(OpenAiConfig { api_key: Some(secret.into()), ..server.config() });
        let msg = backend_message(bad);
        assert!(msg.contains("401") && !msg.contains(secret), "{msg}");
    }

    #[test]
    fn works_from_plain_threads_concurrently() {
        let server = TestServer::start(8);
        let e = Arc::new(OpenAiEmbedder::connect(OpenAiConfig { batch_size: 5, ..server.config() }).unwrap());
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
        let server = TestServer::start(8);
        let e = Arc::new(OpenAiEmbedder::connect(server.config()).unwrap());
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
        let server = TestServer::start(4);
        let e = OpenAiEmbedder::connect(server.config()).unwrap();
        let v = tokio::task::spawn_blocking(move || e.embed_batch(&["x"])).await.unwrap().unwrap();
        assert_eq!(v, vec![fake_vector("x", 4)]);
    }

    #[test]
    fn drop_stops_the_worker_promptly() {
        let server = TestServer::start(4);
        let e = OpenAiEmbedder::connect(server.config()).unwrap();
        e.embed_batch(&["x"]).unwrap();
        let start = Instant::now();
        drop(e);
        assert!(start.elapsed() < Duration::from_secs(1));
    }
}
