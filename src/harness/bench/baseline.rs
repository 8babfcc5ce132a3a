//! The embedder alone, for `memgym bench --embedder-baseline-secs`: batches of 32 LoCoMo observations
//! through the raw model before the load, so the run's tool calls/s and embedded texts/s can be read as
//! shares of what the embedder can do on this machine.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::app::cli::BenchArgs;
use crate::app::config;
use crate::embed::select::EmbedderKind;
use crate::embed::EmbedService;
use crate::episode::Environment;

/// The embedder's own throughput: batches of 32 distinct LoCoMo observations through the raw model (no
/// cache, no batcher), one thread per embedding permit, for `--embedder-baseline-secs`.
pub(super) async fn embedder_alone(a: &BenchArgs, env: Option<&Arc<Environment>>) -> anyhow::Result<Baseline> {
    const BATCH: usize = 32;
    let (service, texts): (EmbedService, Vec<String>) = match env {
        Some(env) => (env.embedder().clone(), observation_texts(env.dataset())),
        None => {
            let kind: EmbedderKind = a.env.embed.embedder.parse().map_err(anyhow::Error::msg).context("--embedder")?;
            let ds = crate::dataset::Dataset::load(a.env.data_dir.as_deref())?;
            (config::embed_service(kind, &a.env.embed)?, observation_texts(&ds))
        }
    };
    anyhow::ensure!(texts.len() >= BATCH, "the dataset has fewer than {BATCH} observations");
    let threads = a.env.embed.embed_threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get())).max(1);
    let texts = Arc::new(texts);
    let until = Instant::now() + Duration::from_secs_f64(a.embedder_baseline_secs);
    let started = Instant::now();
    let mut workers = Vec::new();
    for w in 0..threads {
        let (service, texts) = (service.clone(), texts.clone());
        workers.push(tokio::task::spawn_blocking(move || -> anyhow::Result<usize> {
            let mut done = 0;
            let mut at = w * BATCH;
            while Instant::now() < until {
                let batch: Vec<&str> = (0..BATCH).map(|j| texts[(at + j) % texts.len()].as_str()).collect();
                service.embed_blocking(&batch)?;
                done += BATCH;
                at += threads * BATCH;
            }
            Ok(done)
        }));
    }
    let mut embedded = 0;
    for w in workers {
        embedded += w.await??;
    }
    Ok(Baseline { name: service.identity().to_string(), per_s: embedded as f64 / started.elapsed().as_secs_f64(), threads })
}

fn observation_texts(ds: &crate::dataset::Dataset) -> Vec<String> {
    ds.memories.iter().map(|m| m.text.clone()).collect()
}

/// The embedder alone, measured before the run.
#[derive(Debug)]
pub(super) struct Baseline {
    pub(super) name: String,
    pub(super) per_s: f64,
    pub(super) threads: usize,
}
