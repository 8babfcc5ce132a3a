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
use crate::util::fnv::fnv1a;
use crate::util::openai_compat::{build_client, classify, normalize_base_url, with_retries, ApiKey, OpenAiClient};

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
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// API base including the version prefix, e.g. `http://127.0.0.1:8080/v1` or
    /// `https://api.openai.com/v1`; requests go to `{base_url}/embeddings`.
    pub base_url: String,
    /// Model name sent with every request.
    pub model: String,
    /// Bearer token, if the server wants one. Never logged, redacted in `Debug`.
    pub api_key: Option<ApiKey>,
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
            client: build_client(&cfg.base_url, cfg.api_key.as_ref(), cfg.timeout)?,
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
mod tests;
