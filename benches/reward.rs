//! Reward latency: the pure reward pieces and a full `ScoreEpisode` on the domain service.
//!
//! What it measures, and why (these numbers are quoted in the README's Performance section): the
//! reward is computed on the server for every episode of every GRPO group, so it must stay far below
//! the cost of the policy's generation.
//!
//! - `reward/answer_recall`: LoCoMo's normalisation + NLTK-exact Porter stemming of a typical gold
//!   answer (conv-41:q1, "21 December 2022") and of the 5-memory context retrieved for its question
//!   from conv-41's M₀ (joined by newlines, as the evaluator does).
//! - `reward/memory_efficiency`: MemUpdate's size × density × change factors (pure arithmetic).
//! - `reward/evaluate`: `reward::evaluate` with the answer-recall evaluator on those 5 records read whole
//!   (answer recall + evidence recall + the retrieved ids).
//! - `reward/answer_phrase`: the default evaluator, `answer-phrase`, on the same reading (parts,
//!   phrases, focus, answer cards, date lists), and `reward/reading`: building the reading of those 5
//!   records within their own text budget.
//! - `episode/score_episode`: `Environment::score_episode` on a fresh, unedited conv-41:q1 episode
//!   (top-5 search of the episode's memory, evaluate, efficiency, breakdown). Each iteration creates
//!   a new episode with a unique id, scores it and closes it; only the scoring is timed
//!   (`iter_custom`). `p_old` depends only on (question, M₀, evaluator, embedder), so the environment
//!   caches it per question: the first iteration pays for embedding the question and scoring M₀, every
//!   later one reads the cache. That cached path is the steady state a GRPO group sees (all episodes
//!   of a group share the question), and it is what the median reports.
//! - `episode/create_score_close`: the whole server-side lifecycle of a no-op episode (CreateEpisode +
//!   ScoreEpisode + CloseEpisode, without gRPC).
//!
//! Episodes are closed after scoring, so the registry (16,384 open episodes by default) never fills.

mod common;

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use memgym::config::load_dataset;
use memgym::embed::{EmbedService, HashEmbedder};
use memgym::episode::{CreateRequest, EnvConfig, Environment, EpisodeSource, SystemClock};
use memgym::memory::{EpisodeMemory, Filter, MemoryRecord};
use memgym::reward::reading::Reading;
use memgym::reward::{answer_recall, evaluate, memory_efficiency, Evaluator, SizeInput, Target};

const QUESTION: &str = "conv-41:q1";

fn environment() -> Environment {
    let dataset = Arc::new(load_dataset(None).expect("the embedded LoCoMo dataset loads"));
    let embed = EmbedService::new(Arc::new(HashEmbedder::default()), 2);
    Environment::new(EnvConfig::default(), dataset, embed, Arc::new(SystemClock::default())).expect("hash embedding cannot fail")
}

fn request(id: String) -> CreateRequest {
    CreateRequest {
        episode_id: Some(id),
        source: EpisodeSource::Locomo { question_id: QUESTION.to_string(), conversation_id: None },
        seed: Some(1),
        max_steps: None,
        include_adversarial: false,
        evaluator: None,
    }
}

fn pieces(c: &mut Criterion, env: &Environment) {
    let q = env.dataset().question(QUESTION).expect("the question exists").clone();
    let target = Target::from(&q);
    let gold = q.answer.clone().expect("a non-adversarial question has an answer");
    let base = env.base(&q.conversation_id).expect("conv-41 is loaded").clone();
    let query = env.embedder().embed_blocking(&[q.question.as_str()]).expect("embeds").remove(0);
    let mem = EpisodeMemory::new(base.clone());
    let (hits, _) = mem.search(&query, env.config().top_k, &Filter::default(), None);
    let records: Vec<&MemoryRecord> = hits.iter().map(|h| h.record).collect();
    let context = records.iter().map(|r| r.text.as_str()).collect::<Vec<_>>().join("\n");
    let sizes = SizeInput {
        old_count: base.len(),
        new_count: base.len() - 3,
        old_chars: base.total_chars(),
        new_chars: base.total_chars() - 120,
        n_max: base.len(),
    };

    let mut g = c.benchmark_group("reward");
    g.bench_function("answer_recall", |b| b.iter(|| answer_recall(black_box(&gold), black_box(&context))));
    g.bench_function("memory_efficiency", |b| b.iter(|| memory_efficiency(black_box(sizes))));
    let reading = Reading::whole(&records);
    g.bench_function("evaluate", |b| b.iter(|| evaluate(Evaluator::AnswerRecall, black_box(&target), black_box(&reading))));
    g.bench_function("answer_phrase", |b| b.iter(|| evaluate(Evaluator::AnswerPhrase, black_box(&target), black_box(&reading))));
    g.bench_function("reading", |b| b.iter(|| Reading::budgeted(black_box(&records), black_box(reading.budget))));
    g.finish();
}

fn episode(c: &mut Criterion, env: &Environment) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a tokio runtime");
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let fresh = || format!("bench-{}", NEXT.fetch_add(1, Ordering::Relaxed));

    let mut g = c.benchmark_group("episode");
    g.bench_function("score_episode", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let id = fresh();
                    env.create_episode(request(id.clone())).await.expect("creates");
                    let t = Instant::now();
                    let breakdown = env.score_episode(&id).await.expect("scores");
                    total += t.elapsed();
                    black_box(breakdown);
                    env.close_episode(&id).await.expect("closes");
                }
                total
            })
        })
    });
    g.bench_function("create_score_close", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let t = Instant::now();
                for _ in 0..iters {
                    let id = fresh();
                    env.create_episode(request(id.clone())).await.expect("creates");
                    black_box(env.score_episode(&id).await.expect("scores"));
                    env.close_episode(&id).await.expect("closes");
                }
                t.elapsed()
            })
        })
    });
    g.finish();
    assert_eq!(env.open_episodes(), 0, "every benchmarked episode was closed");
}

fn all(c: &mut Criterion) {
    let env = environment();
    pieces(c, &env);
    episode(c, &env);
}

// `criterion_group!` defines an undocumented `pub fn`; keep the crate's `missing_docs` lint quiet about it.
#[allow(missing_docs)]
mod group {
    use super::*;

    criterion_group! {
        name = benches;
        config = common::criterion();
        targets = all
    }
}
criterion_main!(group::benches);
