//! Tool-call latency: each of the six tools, end to end, on a real conversation's memory.
//!
//! What it measures, and why (these numbers are quoted in the README's Performance section): the
//! server-side cost of one `CallTool` minus the gRPC and task hops, i.e. `Tool::prepare` (validation
//! and the offline text work of merge/split) + embedding the texts it asks for (`HashEmbedder`,
//! synchronously, as the blocking-pool task does) + `Tool::apply`, through `ToolCall::run_blocking`. Calls are built once from JSON
//! arguments like an LLM's with `tools::llm_calls::parse_call`, outside the timing (`tools/parse_call`
//! times that step on its own).
//!
//! The memory is conv-41's M₀ (324 LoCoMo observations with their provenance, built as the server
//! builds it: `IndexConfig::default()`, so the exact scan at this size). Every iteration starts from M₀:
//! `iter_batched` hands each one a fresh `EpisodeMemory::new(base.clone())` (the O(1) fork), made and
//! dropped outside the timing.
//!
//! Calls: search top_k 5 with a conv-41 question; manage create; manage update of m0010; delete m0010;
//! sample random / diverse / recent with k 5 (diverse is farthest-point sampling over all 324 vectors,
//! the heaviest sample); merge of m0010 + m0011 with concatenate and with summarize; split (thematic)
//! of the first conv-41 memory that splits into exactly two parts (found outside the timing).
//!
//! `fork/edits_N` times ForkEpisode's copy (`EpisodeMemory::clone`: the overlay only, M₀ shared) of an
//! episode after N = 1, 10 and 100 edits (creates and deletes, alternating), and prints the overlay's
//! bytes, which is what each fork allocates.

mod common;

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use memgym::embed::{EmbedService, HashEmbedder};
use memgym::episode::{build_base, initial_records};
use memgym::memory::{BaseMemory, EpisodeMemory, IndexConfig, MemoryId};
use memgym::tools::llm_calls::parse_call;
use memgym::tools::{Tool, ToolCall, ToolContext, ToolLimits, ToolOutput};

const SEED: u64 = 7;

fn conv41(embed: &EmbedService) -> Arc<BaseMemory> {
    let ds = memgym::dataset::Dataset::load(None).expect("the embedded LoCoMo dataset loads");
    let records = initial_records(ds.memories_of("conv-41"));
    Arc::new(build_base(embed, "conv-41".into(), records, &IndexConfig::default()).expect("hash embedding cannot fail"))
}

/// prepare + embed + apply: what `Environment::call_tool` does between taking the episode lock and
/// recording the trace.
fn run(mem: &mut EpisodeMemory, call: &ToolCall, embed: &EmbedService, limits: &ToolLimits) -> ToolOutput {
    let ctx = ToolContext { step: 1, seed: SEED, limits };
    call.run_blocking(mem, ctx, |texts| {
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        embed.embed_blocking(&texts).expect("hash embedding cannot fail")
    })
    .expect("the benchmarked call is valid on M₀")
}

/// The id of the first memory that a thematic split turns into exactly two parts.
fn splittable(base: &Arc<BaseMemory>, limits: &ToolLimits) -> String {
    let mem = EpisodeMemory::new(base.clone());
    let ctx = ToolContext { step: 1, seed: SEED, limits };
    (0..base.len())
        .map(|i| MemoryId(i as u32).to_string())
        .find(|id| {
            let args = format!(r#"{{"memory_id": "{id}", "split_criteria": "thematic"}}"#);
            let Ok(ToolCall::Split(split)) = parse_call("split_memory", &args, limits) else { panic!("valid split arguments") };
            split.prepare(&mem, ctx).is_ok_and(|p| p.texts.len() == 2)
        })
        .expect("some conv-41 memory splits thematically in two")
}

fn tools(c: &mut Criterion) {
    let embed = EmbedService::new(Arc::new(HashEmbedder::default()), 2);
    let base = conv41(&embed);
    let limits = ToolLimits::default();
    let split_id = splittable(&base, &limits);
    let split_args = format!(r#"{{"memory_id": "{split_id}", "split_criteria": "thematic"}}"#);

    let cases: Vec<(&str, &str, String)> = vec![
        ("search_top5", "search_memory", r#"{"query": "What type of volunteering have John and Maria both done?", "top_k": 5}"#.into()),
        (
            "manage_create",
            "manage_memory",
            r#"{"operation": "create", "content": "John volunteered at the homeless shelter with Maria in May 2023.", "memory_type": "episodic", "speaker": "John"}"#
                .into(),
        ),
        (
            "manage_update",
            "manage_memory",
            r#"{"operation": "update", "memory_id": "m0010", "content": "Maria made peach cobbler for dinner with her mother on May 3, 2023."}"#
                .into(),
        ),
        ("delete", "delete_memory", r#"{"memory_id": "m0010", "reason": "superseded"}"#.into()),
        ("sample_random_k5", "sample_memory", r#"{"k": 5, "strategy": "random"}"#.into()),
        ("sample_diverse_k5", "sample_memory", r#"{"k": 5, "strategy": "diverse"}"#.into()),
        ("sample_recent_k5", "sample_memory", r#"{"k": 5, "strategy": "recent"}"#.into()),
        ("merge2_concatenate", "merge_memory", r#"{"memory_ids": ["m0010", "m0011"], "strategy": "concatenate"}"#.into()),
        ("merge2_summarize", "merge_memory", r#"{"memory_ids": ["m0010", "m0011"], "strategy": "summarize"}"#.into()),
        ("split_thematic", "split_memory", split_args),
    ];

    let mut g = c.benchmark_group("tools");
    for (label, tool, args) in &cases {
        let call = parse_call(tool, args, &limits).unwrap_or_else(|e| panic!("{label}: {e}"));
        // Check once, outside the timing, that the call succeeds on M₀.
        run(&mut EpisodeMemory::new(base.clone()), &call, &embed, &limits);
        g.bench_function(*label, |b| {
            b.iter_batched(
                || EpisodeMemory::new(base.clone()),
                |mut mem| {
                    let out = run(&mut mem, black_box(&call), &embed, &limits);
                    (mem, out)
                },
                BatchSize::SmallInput,
            )
        });
    }
    g.bench_function("parse_call", |b| {
        let (_, tool, args) = &cases[7];
        b.iter(|| parse_call(black_box(tool), black_box(args), &limits).expect("valid"))
    });
    g.finish();

    let mut g = c.benchmark_group("fork");
    for edits in [1usize, 10, 100] {
        let mut mem = EpisodeMemory::new(base.clone());
        for i in 0..edits {
            let (tool, args) = if i % 2 == 0 {
                ("manage_memory", format!(r#"{{"operation": "create", "content": "John and Maria volunteered together, visit {i}."}}"#))
            } else {
                ("delete_memory", format!(r#"{{"memory_id": "m{:04}"}}"#, i))
            };
            let call = parse_call(tool, &args, &limits).unwrap_or_else(|e| panic!("{tool} {args}: {e}"));
            run(&mut mem, &call, &embed, &limits);
        }
        println!("fork/edits_{edits}: {} overlay bytes per fork", mem.overlay_bytes());
        g.bench_function(format!("edits_{edits}"), |b| b.iter(|| black_box(&mem).clone()));
    }
    g.finish();
}

// `criterion_group!` defines an undocumented `pub fn`; keep the crate's `missing_docs` lint quiet about it.
#[allow(missing_docs)]
mod group {
    use super::*;

    criterion_group! {
        name = benches;
        config = common::criterion();
        targets = tools
    }
}
criterion_main!(group::benches);
