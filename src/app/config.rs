//! Validated settings: turns raw CLI flags ([`crate::app::cli::EnvArgs`]) into an [`EnvConfig`] and the parts
//! an environment is built from (the dataset comes from [`Dataset::load`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};

use crate::app::cli::{EmbedArgs, EnvArgs, LlmArgs};
use crate::dataset::{Dataset, GoldMode, VectorSet};
use crate::embed::select::{self, EmbedderKind, EmbedderOptions};
use crate::embed::{BatchConfig, EmbedService};
use crate::episode::{EnvConfig, Environment, Limits, SystemClock};
use crate::llm::{ChatConfig, Llm, OpenAiChat};
use crate::memory::{IndexConfig, IndexMode};
use crate::reward::{Evaluator, RewardFormula};
use crate::tools::ToolLimits;
use crate::util::openai_compat::ApiKey;

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
            forget_closed_after: Duration::from_secs(a.forget_closed_after_secs),
            max_closed_ids: a.max_closed_ids,
            max_custom_memories: a.max_memories,
            tools: ToolLimits { max_text_chars: a.max_text_chars, max_ids_per_call: a.max_ids_per_call, max_memories: a.max_memories },
        },
        index: IndexConfig {
            mode,
            full_scan_threshold: a.full_scan_threshold,
            hybrid: match a.search.as_str() {
                "dense" => false,
                "hybrid" => true,
                other => bail!("--search must be dense or hybrid, got {other:?}"),
            },
            ..IndexConfig::default()
        },
        top_k: a.top_k,
        n_max: a.n_max,
        evaluator: Evaluator::parse(&a.llm.evaluator).map_err(anyhow::Error::msg).context("--evaluator")?,
        context: crate::reward::Context::parse(&a.context).map_err(anyhow::Error::msg).context("--context")?,
        formula: RewardFormula::parse(&a.reward_formula).map_err(anyhow::Error::msg).context("--reward-formula")?,
        llm_edit: a.llm.llm_edit,
        others_llm: a.llm.others_llm,
        score_threads: match a.llm.score_threads {
            0 => crate::episode::default_score_threads(),
            n => n,
        },
    })
}

/// The LLM client the flags describe, with its answer cache; `None` without `--llm-base-url`.
/// Sends nothing: a wrong address shows at the first scoring or edit, as a clear gRPC error.
pub fn llm_client(a: &LlmArgs) -> anyhow::Result<Option<Arc<Llm>>> {
    let Some(base_url) = &a.llm_base_url else {
        if a.llm_model.is_some() {
            bail!("--llm-model needs --llm-base-url");
        }
        return Ok(None);
    };
    let model = a.llm_model.clone().context("--llm-base-url needs --llm-model")?;
    let api_key = api_key(a.llm_api_key_file.as_deref())?;
    let seed = match a.llm_seed.trim() {
        "none" => None,
        s => Some(s.parse::<u64>().map_err(|_| anyhow::anyhow!("--llm-seed must be a number or none, got {s:?}"))?),
    };
    let chat = OpenAiChat::new(ChatConfig {
        api_key,
        timeout: Duration::from_millis(a.llm_timeout_ms),
        max_retries: a.llm_max_retries,
        concurrency: a.llm_concurrency,
        seed,
        ..ChatConfig::new(base_url.clone(), model)
    })?;
    tracing::info!(base_url = %chat.config().base_url, model = %chat.config().model, "LLM endpoint configured");
    Ok(Some(Arc::new(Llm::new(Arc::new(chat), a.llm_cache))))
}

/// An API key from `file` (trimmed), else from `OPENAI_API_KEY`; `None` when neither has one.
pub fn api_key(file: Option<&Path>) -> anyhow::Result<Option<ApiKey>> {
    Ok(match file {
        Some(p) => Some(ApiKey::new(std::fs::read_to_string(p).with_context(|| format!("reading the API key file {}", p.display()))?)),
        None => std::env::var("OPENAI_API_KEY").ok().filter(|k| !k.trim().is_empty()).map(ApiKey::new),
    })
}

/// The embedder options the flags describe (reads the OpenAI key file or `OPENAI_API_KEY`).
pub fn embedder_options(a: &EmbedArgs) -> anyhow::Result<EmbedderOptions> {
    let openai_api_key = api_key(a.openai_api_key_file.as_deref())?;
    Ok(EmbedderOptions {
        potion_dir: a.potion_dir.clone(),
        model_dir: a.embed_model_dir.clone(),
        tokenizer_dir: a.tokenizer_dir.clone(),
        ort_dylib: a.ort_dylib.clone(),
        sessions: a.embed_sessions,
        openai_base_url: a.openai_base_url.clone(),
        openai_model: a.openai_model.clone(),
        openai_api_key,
    })
}

/// Builds one embedder and its batching service.
pub fn embed_service(kind: EmbedderKind, a: &EmbedArgs) -> anyhow::Result<EmbedService> {
    if a.embed_batch == 0 {
        bail!("--embed-batch must be positive");
    }
    let embedder = select::build(kind, &embedder_options(a)?).with_context(|| format!("starting the {} embedder", kind.as_str()))?;
    let transformer_or_remote = matches!(kind, EmbedderKind::FastEmbed | EmbedderKind::OpenAi);
    let wait_us = a.embed_wait_us.unwrap_or(if transformer_or_remote { 1_000 } else { 0 });
    let permits = a.embed_threads.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2));
    Ok(EmbedService::with_config(
        embedder,
        BatchConfig { max_batch: a.embed_batch, max_wait: Duration::from_micros(wait_us), permits, cache_entries: a.embed_cache },
    ))
}

/// Progress of embedding M₀ at startup: a bar on a terminal, a log line per quarter otherwise.
fn progress_reporter(name: String) -> impl FnMut(usize, usize) {
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut last_quarter = 0;
    move |done, total| {
        let total = total.max(1);
        if tty {
            let filled = done * 30 / total;
            eprint!("\rembedding M₀ with {name} [{}{}] {done}/{total}", "#".repeat(filled), " ".repeat(30 - filled));
            if done >= total {
                eprintln!();
            }
        } else {
            let quarter = done * 4 / total;
            if quarter > last_quarter {
                last_quarter = quarter;
                tracing::info!(done, total, embedder = %name, "embedding M₀");
            }
        }
    }
}

/// Builds the environment the flags describe (dataset, embedder, shared M₀ per conversation). M₀
/// vectors come from a matching `vectors-<embedder>.parquet` when there is one; otherwise they are
/// embedded now, before the server accepts any episode.
pub fn build_environment(a: &EnvArgs) -> anyhow::Result<Arc<Environment>> {
    build_replica_environment(a, None)
}

/// [`build_environment`] for one of several replicas (`serve --replica`): its ids name it.
pub fn build_replica_environment(a: &EnvArgs, replica: Option<String>) -> anyhow::Result<Arc<Environment>> {
    let config = env_config(a)?;
    let gold = GoldMode::parse(&a.gold).map_err(anyhow::Error::msg).context("--gold")?;
    let dataset = Arc::new(Dataset::load_with_gold(a.data_dir.as_deref(), gold)?);
    let kind: EmbedderKind = a.embed.embedder.parse().map_err(anyhow::Error::msg).context("--embedder")?;
    let embed = embed_service(kind, &a.embed)?;
    let id = embed.identity().clone();
    let path = a
        .vectors
        .clone()
        .unwrap_or_else(|| a.data_dir.clone().unwrap_or_else(|| PathBuf::from("data/locomo")).join(VectorSet::file_name(&id.name)));
    let vectors = if path.exists() {
        let set = VectorSet::read(&path).with_context(|| format!("reading {}", path.display()))?;
        if (set.name.as_str(), set.dim, set.fingerprint.as_str()) == (id.name.as_str(), id.dim, id.fingerprint.as_str()) {
            tracing::info!(path = %path.display(), "using precomputed M₀ vectors");
            Some(set)
        } else {
            let file = format!("{}/{}/{}", set.name, set.dim, set.fingerprint);
            tracing::warn!(path = %path.display(), %file, embedder = %id, "precomputed vectors come from another embedder; embedding M₀ instead");
            None
        }
    } else if a.vectors.is_some() {
        bail!("--vectors {}: no such file", path.display());
    } else {
        None
    };
    let mut progress = progress_reporter(id.name.clone());
    let llm = llm_client(&a.llm)?;
    let env = Environment::with_vectors(config, dataset, embed, Arc::new(SystemClock::default()), vectors.as_ref(), &mut progress)
        .context("embedding the initial memories")?
        .with_llm(llm)?
        .with_replica(replica)?;
    Ok(Arc::new(env))
}

/// The default banks directory: `$XDG_DATA_HOME/memgym/banks`, else `~/.local/share/memgym/banks`,
/// else `./memgym-banks`.
pub fn default_banks_dir() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_DATA_HOME").filter(|x| !x.is_empty()) {
        return PathBuf::from(x).join("memgym/banks");
    }
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(h) => PathBuf::from(h).join(".local/share/memgym/banks"),
        None => PathBuf::from("memgym-banks"),
    }
}

/// The banks' index settings: the episodes' engine (its mode and HNSW shape), dense, the banks' own
/// exact-scan threshold and beams, the graph built on every core.
pub fn banks_index(a: &crate::app::cli::BankIndexArgs, episodes: &IndexConfig) -> IndexConfig {
    IndexConfig {
        full_scan_threshold: a.banks_full_scan_threshold,
        hnsw_ef_search: a.banks_hnsw_ef_search,
        hnsw_ef_construction: a.banks_hnsw_ef_construction,
        hybrid: false,
        parallel_build: true,
        huge_pages: !a.banks_no_huge_pages,
        ..episodes.clone()
    }
}

/// The banks the flags describe, on the environment's embedder and LLM; `None` with `--no-banks`.
pub async fn build_banks(a: &crate::app::cli::BanksArgs, env: &Environment) -> anyhow::Result<Option<Arc<crate::banks::Banks>>> {
    use crate::banks::store::{postgres::PostgresStore, sqlite::SqliteStore, BankStore};
    use crate::banks::{Banks, BanksConfig, OnEmbedderChange};
    if a.no_banks {
        return Ok(None);
    }
    let on_change: OnEmbedderChange =
        a.banks_on_embedder_change.parse().map_err(anyhow::Error::msg).context("--banks-on-embedder-change")?;
    let store: Arc<dyn BankStore> = match &a.banks_url {
        Some(url) => Arc::new(PostgresStore::connect(url).await.context("--banks-url")?),
        None => {
            let dir = a.banks_dir.clone().unwrap_or_else(default_banks_dir);
            Arc::new(SqliteStore::open(&dir).with_context(|| format!("opening the banks in {}", dir.display()))?)
        }
    };
    let store = crate::banks::store::observed::Observed::wrap(store);
    let config = BanksConfig { on_embedder_change: on_change, index: banks_index(&a.index, &env.config().index), ..BanksConfig::default() };
    Ok(Some(Arc::new(Banks::new(store, env.embedder().clone(), env.llm().cloned(), config))))
}

/// Embeds M₀ and writes `vectors-<embedder>.parquet` into `out`.
pub fn embed_dataset(data_dir: Option<&Path>, out: &Path, a: &EmbedArgs) -> anyhow::Result<PathBuf> {
    let dataset = Dataset::load(data_dir)?;
    let kind: EmbedderKind = a.embedder.parse().map_err(anyhow::Error::msg).context("--embedder")?;
    let embed = embed_service(kind, a)?;
    let id = embed.identity().clone();
    let mut progress = progress_reporter(id.name.clone());
    let mut by_conversation = std::collections::HashMap::new();
    let (mut done, total) = (0, dataset.memories.len());
    for conv in &dataset.conversations {
        let rows = dataset.memories_of(&conv.id);
        let mut out_rows = Vec::with_capacity(rows.len());
        for chunk in rows.chunks(32) {
            let texts: Vec<&str> = chunk.iter().map(|m| m.text.as_str()).collect();
            for (m, v) in chunk.iter().zip(embed.embed_blocking(&texts)?) {
                out_rows.push((m.memory_id.clone(), v));
            }
            done += chunk.len();
            progress(done, total);
        }
        by_conversation.insert(conv.id.clone(), out_rows);
    }
    let set = VectorSet { name: id.name.clone(), dim: id.dim, fingerprint: id.fingerprint.clone(), by_conversation };
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let path = out.join(VectorSet::file_name(&id.name));
    set.write(&path)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::app::cli::{Cli, Command};

    #[test]
    fn the_banks_search_beam_grows_with_the_bank_unless_a_beam_is_given() {
        let beam = |flags: &[&str]| parse_serve(flags).map(|a| banks_index(&a.banks.index, &IndexConfig::default()).hnsw_ef_search);
        let auto = beam(&[]).unwrap();
        assert_eq!(auto, crate::memory::SearchBeam::Auto);
        assert_eq!((auto.for_nodes(100_000), auto.for_nodes(1_000_000)), (64, 112));
        assert_eq!(beam(&["--banks-hnsw-ef-search", "96"]).unwrap(), crate::memory::SearchBeam::Fixed(96));
        let err = beam(&["--banks-hnsw-ef-search", "0"]).unwrap_err().to_string();
        assert!(err.contains("--banks-hnsw-ef-search") && err.contains("out of range"), "{err}");
    }

    fn serve_args(flags: &[&str]) -> EnvArgs {
        parse_serve(flags).unwrap().env
    }

    fn parse_serve(flags: &[&str]) -> Result<crate::app::cli::ServeArgs, clap::Error> {
        let mut argv = vec!["memgym", "serve"];
        argv.extend_from_slice(flags);
        Ok(match Cli::try_parse_from(argv)?.command {
            Command::Serve(a) => a,
            Command::Dataset(_)
            | Command::Bench(_)
            | Command::Eval(_)
            | Command::Rollout(_)
            | Command::Replay(_)
            | Command::Learn(_)
            | Command::Health(_)
            | Command::Reference(_) => {
                unreachable!("parsed `serve`")
            }
        })
    }

    #[test]
    fn precomputed_vectors_are_used_when_the_identity_matches_and_ignored_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        let args = serve_args(&[]);
        let path = embed_dataset(None, dir.path(), &args.embed).unwrap();
        assert!(path.ends_with("vectors-hash-ngram-v1.parquet"));
        let fresh = build_environment(&args).unwrap();
        let file = path.to_string_lossy().into_owned();
        let loaded = build_environment(&serve_args(&["--vectors", &file])).unwrap();
        for conv in ["conv-26", "conv-50"] {
            let (a, b) = (fresh.base(conv).unwrap(), loaded.base(conv).unwrap());
            for i in [0, a.len() - 1] {
                assert_eq!(a.vector(i), b.vector(i));
            }
        }
        // Vectors from "another model" (same name, other fingerprint; here: all zeros) are not used.
        let mut other = VectorSet::read(&path).unwrap();
        other.fingerprint = "0000000000000000".into();
        other.by_conversation.values_mut().flatten().for_each(|(_, v)| v.iter_mut().for_each(|x| *x = 0.0));
        other.write(&path).unwrap();
        let refused = build_environment(&serve_args(&["--vectors", &file])).unwrap();
        assert_eq!(refused.base("conv-26").unwrap().vector(0), fresh.base("conv-26").unwrap().vector(0));
        assert!(build_environment(&serve_args(&["--vectors", "/nonexistent/vectors.parquet"])).is_err());
    }

    #[test]
    fn misconfigured_embedders_are_clear_errors() {
        let mut a = serve_args(&["--embedder", "fastembed"]);
        a.embed.embed_model_dir = None;
        let e = format!("{:#}", build_environment(&a).unwrap_err());
        assert!(e.contains("--embed-model-dir"), "{e}");
        let e = format!("{:#}", build_environment(&serve_args(&["--embedder", "openai"])).unwrap_err());
        assert!(e.contains("--openai-base-url"), "{e}");
        let e = format!("{:#}", build_environment(&serve_args(&["--embedder", "bert"])).unwrap_err());
        assert!(e.contains("unknown embedder"), "{e}");
        let e = format!("{:#}", build_environment(&serve_args(&["--embedder", "potion-2m", "--potion-dir", "/nonexistent"])).unwrap_err());
        assert!(e.contains("/nonexistent"), "{e}");
        let e = format!("{:#}", build_environment(&serve_args(&["--search", "fuzzy"])).unwrap_err());
        assert!(e.contains("--search"), "{e}");
    }
}
