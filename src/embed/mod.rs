//! Embeddings: the [`Embedder`] trait (batch-first, synchronous, CPU-bound) and [`EmbedService`], which
//! batches concurrent requests dynamically, caches repeated texts, and runs the embedder on the blocking
//! pool behind a semaphore so embedding never stalls the async workers.
//!
//! Every embedder has an [`EmbedderIdentity`] (name, dimension, hash of its parameters or model files),
//! recorded in reward breakdowns. The default until real models land is [`HashEmbedder`], a
//! deterministic offline n-gram feature hasher.

mod fastembed;
mod hash;
mod openai;
mod potion;
pub mod select;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub use fastembed::FastEmbedder;
pub use hash::HashEmbedder;
pub use openai::{OpenAiConfig, OpenAiEmbedder};
pub use potion::PotionEmbedder;
use tokio::sync::Semaphore;

use crate::util::vector::normalize;

/// Failures of an embedder.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EmbedError {
    /// The model returned a vector of the wrong size.
    #[error("embedder {embedder} returned {got} dimensions, expected {expected}")]
    Dimension {
        /// Embedder name.
        embedder: String,
        /// Expected dimension.
        expected: usize,
        /// Returned dimension.
        got: usize,
    },
    /// The model returned a wrong number of vectors.
    #[error("embedder {embedder} returned {got} vectors for {expected} texts")]
    Count {
        /// Embedder name.
        embedder: String,
        /// Texts sent.
        expected: usize,
        /// Vectors returned.
        got: usize,
    },
    /// The model returned NaN or infinite values.
    #[error("embedder {embedder} returned a non-finite value")]
    NonFinite {
        /// Embedder name.
        embedder: String,
    },
    /// The model failed.
    #[error("embedder {embedder} failed: {message}")]
    Backend {
        /// Embedder name.
        embedder: String,
        /// What went wrong.
        message: String,
    },
    /// The blocking task could not run (runtime shutting down).
    #[error("embedding task failed: {0}")]
    Join(String),
}

/// Who made a vector: stored beside vectors and in reward breakdowns.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EmbedderIdentity {
    /// Name ("hash-ngram-v1").
    pub name: String,
    /// Output dimension.
    pub dim: usize,
    /// Hash of the parameters or model files (hex).
    pub fingerprint: String,
}

impl std::fmt::Display for EmbedderIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.name, self.dim, self.fingerprint)
    }
}

/// A text embedder. Implementations are synchronous and may be CPU-heavy: call them through
/// [`EmbedService`], not from async code.
pub trait Embedder: Send + Sync + 'static {
    /// Identity of this embedder.
    fn identity(&self) -> &EmbedderIdentity;
    /// Embeds a batch; one vector of `identity().dim` per text, in order.
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
    /// True when a request's texts cost a few microseconds to embed — about what decoding the request
    /// costs. [`EmbedService`] then embeds them on the calling task: the cache's lock and the batcher's
    /// two thread hops would cost more than the work (measured with `memgym bench`, README
    /// "Performance"). Model embedders keep the default, `false`.
    fn is_cheap(&self) -> bool {
        false
    }
}

/// How [`EmbedService`] groups concurrent requests into batches.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchConfig {
    /// Most texts in one batch (requests are never split, so one large request may exceed it).
    pub max_batch: usize,
    /// How long a batch that is not full may wait for more requests. Zero: take only what is already
    /// queued — under load batches still form, because requests queue while the permits are busy.
    pub max_wait: std::time::Duration,
    /// Batches embedding at once (on the blocking pool).
    pub permits: usize,
    /// Entries of the LRU cache of embeddings by text (0 disables it).
    pub cache_entries: usize,
}

impl Default for BatchConfig {
    fn default() -> Self {
        BatchConfig { max_batch: 32, max_wait: std::time::Duration::ZERO, permits: 2, cache_entries: 16_384 }
    }
}

/// Counters of an [`EmbedService`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EmbedStats {
    /// Texts answered from the cache.
    pub cache_hits: u64,
    /// Texts sent to the embedder.
    pub embedded: u64,
    /// Batches run by the batcher.
    pub batches: u64,
}

struct Job {
    texts: Vec<String>,
    reply: tokio::sync::oneshot::Sender<Result<Vec<Vec<f32>>, EmbedError>>,
}

struct Inner {
    embedder: Arc<dyn Embedder>,
    config: BatchConfig,
    permits: Arc<Semaphore>,
    queue: std::sync::OnceLock<tokio::sync::mpsc::Sender<Job>>,
    cache: Option<parking_lot::Mutex<lru::LruCache<String, Arc<Vec<f32>>>>>,
    hits: AtomicU64,
    embedded: Arc<AtomicU64>,
    batches: Arc<AtomicU64>,
}

/// Runs an [`Embedder`] off the async workers with **dynamic batching**: concurrent requests (from many
/// episodes) are queued, grouped into batches of up to `max_batch` texts, and embedded on the blocking
/// pool, at most `permits` batches at a time — a transformer embeds 32 texts far faster than 32 × 1. An
/// LRU cache answers repeated texts (a GRPO group repeats the same queries). Vectors are checked (count,
/// dimension, finite) and normalised.
#[derive(Clone)]
pub struct EmbedService {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for EmbedService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbedService").field("embedder", self.inner.embedder.identity()).field("config", &self.inner.config).finish()
    }
}

impl EmbedService {
    /// Wraps an embedder with default batching and `permits` concurrent batches (use the core count).
    pub fn new(embedder: Arc<dyn Embedder>, permits: usize) -> Self {
        Self::with_config(embedder, BatchConfig { permits, ..BatchConfig::default() })
    }

    /// Wraps an embedder with explicit batching settings.
    pub fn with_config(embedder: Arc<dyn Embedder>, config: BatchConfig) -> Self {
        let cache = std::num::NonZeroUsize::new(config.cache_entries).map(|n| parking_lot::Mutex::new(lru::LruCache::new(n)));
        EmbedService {
            inner: Arc::new(Inner {
                embedder,
                permits: Arc::new(Semaphore::new(config.permits.max(1))),
                config,
                queue: std::sync::OnceLock::new(),
                cache,
                hits: AtomicU64::new(0),
                embedded: Arc::new(AtomicU64::new(0)),
                batches: Arc::new(AtomicU64::new(0)),
            }),
        }
    }

    /// The embedder's identity.
    pub fn identity(&self) -> &EmbedderIdentity {
        self.inner.embedder.identity()
    }

    /// Vector dimension.
    pub fn dim(&self) -> usize {
        self.inner.embedder.identity().dim
    }

    /// Counters.
    pub fn stats(&self) -> EmbedStats {
        EmbedStats {
            cache_hits: self.inner.hits.load(Ordering::Relaxed),
            embedded: self.inner.embedded.load(Ordering::Relaxed),
            batches: self.inner.batches.load(Ordering::Relaxed),
        }
    }

    /// Embeds synchronously on the calling thread (startup, offline tools). No cache, no batching.
    pub fn embed_blocking(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.inner.embedded.fetch_add(texts.len() as u64, Ordering::Relaxed);
        run_batch(self.inner.embedder.as_ref(), texts)
    }

    /// Embeds through the cache and the batcher — or, for a cheap embedder and a request no larger than
    /// a batch, right here (see [`Embedder::is_cheap`]).
    pub async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, EmbedError> {
        let (n, started) = (texts.len(), std::time::Instant::now());
        let r = self.embed_unobserved(texts).await;
        crate::util::prometheus::embed_call(n, r.is_ok(), started.elapsed().as_secs_f64());
        r
    }

    /// Embeds a bank write's texts (an import can hold a million): in batches, `permits` at a time on the
    /// blocking pool, so that every core embeds, and in order. Not through the cache: a written text is
    /// seldom asked for again, and a million of them would evict the queries that are. A cheap embedder
    /// takes [`BULK_CHEAP_BATCH`] texts a batch, a model `max_batch`.
    pub async fn embed_bulk(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, EmbedError> {
        use futures_util::{StreamExt, TryStreamExt};
        let (n, started) = (texts.len(), std::time::Instant::now());
        let size = if self.inner.embedder.is_cheap() { BULK_CHEAP_BATCH } else { self.inner.config.max_batch.max(1) };
        let texts = Arc::new(texts);
        let batches = n.div_ceil(size);
        let one = |b: usize| {
            let (texts, embedder, permits) = (Arc::clone(&texts), Arc::clone(&self.inner.embedder), Arc::clone(&self.inner.permits));
            async move {
                let permit = permits.acquire_owned().await.map_err(|_| EmbedError::Join("the embedding permits were closed".into()))?;
                tokio::task::spawn_blocking(move || {
                    let _permit = permit;
                    let refs: Vec<&str> = texts[b * size..n.min((b + 1) * size)].iter().map(String::as_str).collect();
                    run_batch(embedder.as_ref(), &refs)
                })
                .await
                .map_err(|e| {
                    EmbedError::Join(e.try_into_panic().map_or("the embedding task was cancelled".into(), |p| panic_message(&*p)))
                })?
            }
        };
        let parts: Result<Vec<Vec<Vec<f32>>>, EmbedError> =
            futures_util::stream::iter(0..batches).map(one).buffered(self.inner.config.permits.max(1)).try_collect().await;
        self.inner.embedded.fetch_add(n as u64, Ordering::Relaxed);
        self.inner.batches.fetch_add(batches as u64, Ordering::Relaxed);
        crate::util::prometheus::embed_call(n, parts.is_ok(), started.elapsed().as_secs_f64());
        Ok(parts?.into_iter().flatten().collect())
    }

    async fn embed_unobserved(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        if self.inner.embedder.is_cheap() && texts.len() <= self.inner.config.max_batch {
            self.inner.batches.fetch_add(1, Ordering::Relaxed);
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            return self.embed_blocking(&refs);
        }
        let mut out: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
        let mut missing: Vec<String> = Vec::new();
        let mut missing_at: Vec<usize> = Vec::new();
        match &self.inner.cache {
            Some(cache) => {
                let mut c = cache.lock();
                for (i, t) in texts.into_iter().enumerate() {
                    match c.get(&t) {
                        Some(v) => {
                            out[i] = Some(v.as_ref().clone());
                            crate::util::prometheus::embed_cache_hit();
                        }
                        None => {
                            missing.push(t);
                            missing_at.push(i);
                        }
                    }
                }
            }
            None => {
                missing_at = (0..texts.len()).collect();
                missing = texts;
            }
        }
        self.inner.hits.fetch_add((out.len() - missing.len()) as u64, Ordering::Relaxed);
        if !missing.is_empty() {
            let keys = self.inner.cache.as_ref().map(|_| missing.clone());
            let vectors = self.submit(missing).await?;
            if let (Some(cache), Some(keys)) = (&self.inner.cache, keys) {
                let mut c = cache.lock();
                for (k, v) in keys.into_iter().zip(&vectors) {
                    c.put(k, Arc::new(v.clone()));
                }
            }
            for (i, v) in missing_at.into_iter().zip(vectors) {
                out[i] = Some(v);
            }
        }
        Ok(out.into_iter().map(Option::unwrap_or_default).collect())
    }

    async fn submit(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, EmbedError> {
        let queue = self.inner.queue.get_or_init(|| {
            let (tx, rx) = tokio::sync::mpsc::channel(8192);
            let batcher = Batcher {
                embedder: self.inner.embedder.clone(),
                config: self.inner.config.clone(),
                permits: self.inner.permits.clone(),
                embedded: self.inner.embedded.clone(),
                batches: self.inner.batches.clone(),
            };
            tokio::spawn(batcher.run(rx));
            tx
        });
        let (reply, answer) = tokio::sync::oneshot::channel();
        queue.send(Job { texts, reply }).await.map_err(|_| EmbedError::Join("the embedding batcher stopped".into()))?;
        answer.await.map_err(|_| EmbedError::Join("the embedding batch was dropped".into()))?
    }
}

/// The task that groups queued jobs into batches.
struct Batcher {
    embedder: Arc<dyn Embedder>,
    config: BatchConfig,
    permits: Arc<Semaphore>,
    embedded: Arc<AtomicU64>,
    batches: Arc<AtomicU64>,
}

impl Batcher {
    async fn run(self, mut rx: tokio::sync::mpsc::Receiver<Job>) {
        while let Some(first) = rx.recv().await {
            // Wait for capacity first: requests keep queueing meanwhile and join this batch.
            let Ok(permit) = self.permits.clone().acquire_owned().await else { return };
            let mut n = first.texts.len();
            let mut jobs = vec![first];
            while n < self.config.max_batch {
                match rx.try_recv() {
                    Ok(j) => {
                        n += j.texts.len();
                        jobs.push(j);
                    }
                    Err(_) => break,
                }
            }
            if n < self.config.max_batch && !self.config.max_wait.is_zero() {
                let deadline = tokio::time::Instant::now() + self.config.max_wait;
                while n < self.config.max_batch {
                    match tokio::time::timeout_at(deadline, rx.recv()).await {
                        Ok(Some(j)) => {
                            n += j.texts.len();
                            jobs.push(j);
                        }
                        Ok(None) | Err(_) => break,
                    }
                }
            }
            let embedder = self.embedder.clone();
            self.embedded.fetch_add(n as u64, Ordering::Relaxed);
            self.batches.fetch_add(1, Ordering::Relaxed);
            tokio::task::spawn_blocking(move || {
                let _permit = permit;
                let texts: Vec<&str> = jobs.iter().flat_map(|j| j.texts.iter().map(String::as_str)).collect();
                match run_batch(embedder.as_ref(), &texts) {
                    Ok(mut all) => {
                        for j in jobs.into_iter().rev() {
                            let mine = all.split_off(all.len() - j.texts.len());
                            let _ = j.reply.send(Ok(mine));
                        }
                    }
                    Err(e) => {
                        for j in jobs {
                            let _ = j.reply.send(Err(e.clone()));
                        }
                    }
                }
            });
        }
    }
}

fn run_batch(embedder: &dyn Embedder, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
    let vs = embedder.embed_batch(texts)?;
    check_and_normalize(embedder.identity(), texts.len(), vs)
}

fn check_and_normalize(id: &EmbedderIdentity, n: usize, mut vs: Vec<Vec<f32>>) -> Result<Vec<Vec<f32>>, EmbedError> {
    if vs.len() != n {
        return Err(EmbedError::Count { embedder: id.name.clone(), expected: n, got: vs.len() });
    }
    for v in &mut vs {
        if v.len() != id.dim {
            return Err(EmbedError::Dimension { embedder: id.name.clone(), expected: id.dim, got: v.len() });
        }
        if !v.iter().all(|x| x.is_finite()) {
            return Err(EmbedError::NonFinite { embedder: id.name.clone() });
        }
        normalize(v);
    }
    Ok(vs)
}

/// Texts per batch of [`EmbedService::embed_bulk`] with a cheap embedder: big enough that a batch's
/// hand-off costs nothing beside it, small enough that the cores share the work evenly.
const BULK_CHEAP_BATCH: usize = 4_096;

/// The message of a panic caught from an embedding backend (a `&str` or `String` payload).
fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Broken(EmbedderIdentity, usize);
    impl Embedder for Broken {
        fn identity(&self) -> &EmbedderIdentity {
            &self.0
        }
        fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            Ok(texts.iter().map(|_| vec![f32::NAN; self.1]).collect())
        }
    }

    #[tokio::test]
    async fn service_rejects_bad_vectors() {
        let id = EmbedderIdentity { name: "broken".into(), dim: 4, fingerprint: "0".into() };
        let wrong_dim = EmbedService::new(Arc::new(Broken(id.clone(), 3)), 1);
        assert!(matches!(wrong_dim.embed(vec!["x".into()]).await, Err(EmbedError::Dimension { .. })));
        let nan = EmbedService::new(Arc::new(Broken(id, 4)), 1);
        assert!(matches!(nan.embed(vec!["x".into()]).await, Err(EmbedError::NonFinite { .. })));
    }

    /// Records batch sizes.
    struct Recording(HashEmbedder, parking_lot::Mutex<Vec<usize>>);
    impl Embedder for Recording {
        fn identity(&self) -> &EmbedderIdentity {
            self.0.identity()
        }
        fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            self.1.lock().push(texts.len());
            std::thread::sleep(std::time::Duration::from_millis(5));
            self.0.embed_batch(texts)
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_requests_are_batched_and_answers_stay_in_order() {
        let rec = Arc::new(Recording(HashEmbedder::default(), parking_lot::Mutex::new(Vec::new())));
        let cfg = BatchConfig { max_batch: 32, max_wait: std::time::Duration::from_millis(1), permits: 1, cache_entries: 0 };
        let s = EmbedService::with_config(rec.clone(), cfg);
        let reference = HashEmbedder::default();
        let mut tasks = Vec::new();
        for i in 0..64 {
            let s = s.clone();
            tasks.push(tokio::spawn(async move { (i, s.embed(vec![format!("text number {i}"), format!("other {i}")]).await.unwrap()) }));
        }
        for t in tasks {
            let (i, v) = t.await.unwrap();
            let mut want = reference.embed_batch(&[&format!("text number {i}"), &format!("other {i}")]).unwrap();
            want.iter_mut().for_each(|w| {
                normalize(w);
            });
            assert_eq!(v, want, "request {i} got someone else's vectors");
        }
        let sizes = rec.1.lock().clone();
        assert_eq!(sizes.iter().sum::<usize>(), 128);
        assert!(sizes.len() < 64, "no batching happened: {sizes:?}");
        assert!(sizes.iter().all(|n| *n <= 32 + 2), "{sizes:?}");
        assert_eq!(s.stats().batches as usize, sizes.len());
    }

    #[tokio::test]
    async fn the_cache_answers_repeats() {
        let rec = Arc::new(Recording(HashEmbedder::default(), parking_lot::Mutex::new(Vec::new())));
        let s = EmbedService::with_config(rec.clone(), BatchConfig { cache_entries: 2, ..BatchConfig::default() });
        let a = s.embed(vec!["what did Caroline research?".into()]).await.unwrap();
        let b = s.embed(vec!["what did Caroline research?".into(), "new text".into()]).await.unwrap();
        assert_eq!(a[0], b[0]);
        assert_eq!(*rec.1.lock(), vec![1, 1], "the repeated text was not embedded again");
        assert_eq!(s.stats().cache_hits, 1);
        // Capacity 2: a third text evicts the least recently used.
        s.embed(vec!["third".into()]).await.unwrap();
        s.embed(vec!["what did Caroline research?".into()]).await.unwrap();
        assert_eq!(rec.1.lock().len(), 4);
    }

    /// A cheap embedder answers on the calling task (no blocking pool: a current-thread runtime whose
    /// blocking pool is never started would still work) with the same vectors, bypassing the cache.
    #[tokio::test(flavor = "current_thread")]
    async fn a_cheap_embedder_runs_inline_with_the_same_vectors() {
        let s = EmbedService::new(Arc::new(HashEmbedder::default()), 1);
        assert!(HashEmbedder::default().is_cheap());
        let texts = vec!["Caroline went to a support group".to_string(), "Melanie paints".to_string()];
        let inline = s.embed(texts.clone()).await.unwrap();
        let again = s.embed(texts.clone()).await.unwrap();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        assert_eq!(inline, s.embed_blocking(&refs).unwrap());
        assert_eq!(inline, again);
        assert_eq!((s.stats().cache_hits, s.stats().batches), (0, 2));
        // Larger than a batch: through the batcher, same vectors.
        let many: Vec<String> = (0..40).map(|i| format!("text {i}")).collect();
        let batched = s.embed(many.clone()).await.unwrap();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(batched, s.embed_blocking(&refs).unwrap());
    }

    #[tokio::test]
    async fn a_failing_batch_fails_every_request_in_it() {
        let id = EmbedderIdentity { name: "broken".into(), dim: 4, fingerprint: "0".into() };
        let s = EmbedService::new(Arc::new(Broken(id, 4)), 1);
        let (a, b) = tokio::join!(s.embed(vec!["x".into()]), s.embed(vec!["y".into()]));
        assert!(a.is_err() && b.is_err());
    }

    #[tokio::test]
    async fn service_normalises_hash_vectors() {
        let s = EmbedService::new(Arc::new(HashEmbedder::default()), 2);
        let v = s.embed(vec!["Caroline went to a support group".into(), "".into()]).await.unwrap();
        let n0: f32 = v[0].iter().map(|x| x * x).sum();
        assert!((n0 - 1.0).abs() < 1e-5);
        assert!(v[1].iter().all(|x| *x == 0.0), "empty text embeds to the zero vector");
    }

    /// Panics on the text "boom".
    struct Panicking(HashEmbedder);
    impl Embedder for Panicking {
        fn identity(&self) -> &EmbedderIdentity {
            self.0.identity()
        }
        fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            assert!(!texts.contains(&"boom"), "the backend fell over");
            self.0.embed_batch(texts)
        }
    }

    /// A bank write's texts: many batches on both permits, every vector in its text's place, checked and
    /// normalised as any other, and none of them cached.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_bulk_write_embeds_in_order_on_every_permit_without_the_cache() {
        let rec = Arc::new(Recording(HashEmbedder::default(), parking_lot::Mutex::new(Vec::new())));
        let cfg = BatchConfig { max_batch: 32, max_wait: std::time::Duration::ZERO, permits: 2, cache_entries: 64 };
        let s = EmbedService::with_config(rec.clone(), cfg);
        let texts: Vec<String> = (0..200).map(|i| format!("experience number {i} about topic {}", i % 7)).collect();
        let bulk = s.embed_bulk(texts.clone()).await.unwrap();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        assert_eq!(bulk, s.embed_blocking(&refs).unwrap(), "a vector out of its text's place");
        // A model embedder (not cheap): batches of `max_batch`, 200 = 6 × 32 + 8.
        let mut sizes = rec.1.lock().clone();
        sizes.truncate(7);
        assert_eq!(sizes.iter().sum::<usize>(), 200);
        assert!(sizes.iter().all(|&n| n <= 32), "{sizes:?}");
        // Nothing was cached: the same text through `embed` is embedded again.
        rec.1.lock().clear();
        s.embed(vec![texts[0].clone()]).await.unwrap();
        assert_eq!((rec.1.lock().clone(), s.stats().cache_hits), (vec![1], 0));
        // The hash embedder (cheap) takes bigger batches, with the same vectors as one call.
        let cheap = EmbedService::new(Arc::new(HashEmbedder::default()), 2);
        let many: Vec<String> = (0..BULK_CHEAP_BATCH * 2 + 5).map(|i| format!("text {i}")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(cheap.embed_bulk(many.clone()).await.unwrap(), cheap.embed_blocking(&refs).unwrap());
        assert!(cheap.embed_bulk(Vec::new()).await.unwrap().is_empty());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_bulk_write_fails_whole_on_a_bad_vector_or_a_panic() {
        let id = EmbedderIdentity { name: "broken".into(), dim: 4, fingerprint: "0".into() };
        let nan = EmbedService::new(Arc::new(Broken(id, 4)), 2);
        let texts: Vec<String> = (0..100).map(|i| format!("t{i}")).collect();
        assert!(matches!(nan.embed_bulk(texts.clone()).await, Err(EmbedError::NonFinite { .. })));
        let panics = EmbedService::new(Arc::new(Panicking(HashEmbedder::default())), 2);
        let mut texts = texts;
        texts[70] = "boom".into();
        match panics.embed_bulk(texts).await {
            Err(EmbedError::Join(m)) => assert!(m.contains("the backend fell over"), "{m}"),
            other => panic!("expected the panic as an error, got {other:?}"),
        }
    }
}
