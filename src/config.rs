//! Validated settings: turns raw CLI flags ([`crate::cli::EnvArgs`]) into an [`EnvConfig`], and loads
//! the dataset (a Parquet directory, or by default the copy embedded in the binary at build time, so the
//! server runs with nothing but its binary).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};

use crate::cli::EnvArgs;
use crate::dataset::Dataset;
use crate::embed::{EmbedService, HashEmbedder};
use crate::episode::{EnvConfig, Environment, Limits, SystemClock};
use crate::memory::{IndexConfig, IndexMode};
use crate::reward::Evaluator;
use crate::tools::ToolLimits;

const EMBEDDED_CONVERSATIONS: &[u8] = include_bytes!("../data/locomo/conversations.parquet");
const EMBEDDED_MEMORIES: &[u8] = include_bytes!("../data/locomo/memories.parquet");
const EMBEDDED_QUESTIONS: &[u8] = include_bytes!("../data/locomo/questions.parquet");

/// The LoCoMo dataset from `dir`, or the embedded copy.
pub fn load_dataset(dir: Option<&Path>) -> anyhow::Result<Dataset> {
    match dir {
        Some(d) => Dataset::read_parquet_dir(d).with_context(|| format!("loading the dataset from {}", d.display())),
        None => Dataset::read_parquet_bytes(
            bytes::Bytes::from_static(EMBEDDED_CONVERSATIONS),
            bytes::Bytes::from_static(EMBEDDED_MEMORIES),
            bytes::Bytes::from_static(EMBEDDED_QUESTIONS),
        )
        .context("loading the embedded dataset"),
    }
}

/// Validates the flags.
pub fn env_config(a: &EnvArgs) -> anyhow::Result<EnvConfig> {
    let mode: IndexMode = a.index.parse().map_err(anyhow::Error::msg).context("--index")?;
    if a.top_k == 0 || a.top_k > 50 {
        bail!("--top-k must be 1 to 50, got {}", a.top_k);
    }
    if a.default_max_steps == 0 || a.default_max_steps > a.max_steps_cap {
        bail!("--default-max-steps must be 1 to --max-steps-cap ({}), got {}", a.max_steps_cap, a.default_max_steps);
    }
    if a.max_episodes == 0 || a.max_memories == 0 || a.max_text_chars == 0 || a.max_ids_per_call == 0 {
        bail!("--max-episodes, --max-memories, --max-text-chars and --max-ids-per-call must be positive");
    }
    if a.idle_ttl_secs == 0 {
        bail!("--idle-ttl-secs must be positive");
    }
    if a.n_max == Some(0) {
        bail!("--n-max must be positive");
    }
    Ok(EnvConfig {
        limits: Limits {
            max_open_episodes: a.max_episodes,
            default_max_steps: a.default_max_steps,
            max_steps_cap: a.max_steps_cap,
            idle_ttl: Duration::from_secs(a.idle_ttl_secs),
            max_custom_memories: a.max_memories,
            tools: ToolLimits { max_text_chars: a.max_text_chars, max_ids_per_call: a.max_ids_per_call, max_memories: a.max_memories },
        },
        index: IndexConfig { mode, full_scan_threshold: a.full_scan_threshold, ..IndexConfig::default() },
        top_k: a.top_k,
        n_max: a.n_max,
        evaluator: Evaluator::AnswerRecall,
    })
}

/// Builds the environment the flags describe (dataset, embedder, shared M₀ per conversation).
pub fn build_environment(a: &EnvArgs) -> anyhow::Result<Arc<Environment>> {
    let config = env_config(a)?;
    let dataset = Arc::new(load_dataset(a.data_dir.as_deref())?);
    let threads = a.embed_threads.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2));
    let embed = EmbedService::new(Arc::new(HashEmbedder::default()), threads);
    let env = Environment::new(config, dataset, embed, Arc::new(SystemClock::default())).context("embedding the initial memories")?;
    Ok(Arc::new(env))
}
