//! Embeddings: the [`Embedder`] trait (batch-first, synchronous, CPU-bound) and [`EmbedService`], which
//! runs it on the blocking pool behind a semaphore so embedding never stalls the async workers.
//!
//! Every embedder has an [`EmbedderIdentity`] (name, dimension, hash of its parameters or model files),
//! recorded in reward breakdowns. The default until real models land is [`HashEmbedder`], a
//! deterministic offline n-gram feature hasher.

mod hash;

use std::sync::Arc;

pub use hash::HashEmbedder;
use tokio::sync::Semaphore;

use crate::memory::vector::normalize;

/// Failures of an embedder.
#[derive(Debug, thiserror::Error)]
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
}

/// Runs an [`Embedder`] on the blocking pool, at most `permits` batches at a time, and checks and
/// normalises what it returns.
#[derive(Clone)]
pub struct EmbedService {
    embedder: Arc<dyn Embedder>,
    permits: Arc<Semaphore>,
}

impl std::fmt::Debug for EmbedService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbedService").field("embedder", self.embedder.identity()).finish()
    }
}

impl EmbedService {
    /// Wraps an embedder; `permits` bounds concurrent batches (use the core count).
    pub fn new(embedder: Arc<dyn Embedder>, permits: usize) -> Self {
        EmbedService { embedder, permits: Arc::new(Semaphore::new(permits.max(1))) }
    }

    /// The embedder's identity.
    pub fn identity(&self) -> &EmbedderIdentity {
        self.embedder.identity()
    }

    /// Vector dimension.
    pub fn dim(&self) -> usize {
        self.embedder.identity().dim
    }

    /// Embeds synchronously (for startup and tools that already run off the async workers).
    pub fn embed_blocking(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let vs = self.embedder.embed_batch(texts)?;
        check_and_normalize(self.embedder.identity(), texts.len(), vs)
    }

    /// Embeds on the blocking pool behind the semaphore.
    pub async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let _permit = self.permits.acquire().await.map_err(|e| EmbedError::Join(e.to_string()))?;
        let this = self.clone();
        let span = tracing::Span::current();
        tokio::task::spawn_blocking(move || {
            let _g = span.enter();
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            this.embed_blocking(&refs)
        })
        .await
        .map_err(|e| EmbedError::Join(e.to_string()))?
    }
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

    #[tokio::test]
    async fn service_normalises_hash_vectors() {
        let s = EmbedService::new(Arc::new(HashEmbedder::default()), 2);
        let v = s.embed(vec!["Caroline went to a support group".into(), "".into()]).await.unwrap();
        let n0: f32 = v[0].iter().map(|x| x * x).sum();
        assert!((n0 - 1.0).abs() < 1e-5);
        assert!(v[1].iter().all(|x| *x == 0.0), "empty text embeds to the zero vector");
    }
}
