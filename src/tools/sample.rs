//! sample_memory: k memories by one of three strategies.
//!
//! - `random`: uniform without replacement from a ChaCha8 generator seeded by (episode seed, step), so a
//!   replay of the same calls draws the same memories.
//! - `diverse`: farthest-point sampling in embedding space — a seeded random start, then repeatedly the
//!   memory whose nearest already-chosen memory is farthest (ties to the earlier memory).
//! - `recent`: newest first (by creation step, then creation order).

use rand::seq::index;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::borrow::Cow;

use serde_json::{json, Value};

use crate::memory::{EpisodeMemory, MemoryRecord, MemoryType};
use crate::util::vector::dot;

use super::args::*;
use super::llm_calls::{function, prop_enum, prop_int, Args, TYPES};
use super::{OutputKind, Prepared, Tool, ToolContext, ToolError, ToolOutput};

// ---- arguments: what the typed RPC and the LLM's JSON are validated into --------------------

/// sample_memory's strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleStrategy {
    /// Uniform, seeded.
    Random,
    /// Farthest-point in embedding space.
    Diverse,
    /// Newest first.
    Recent,
}

impl SampleStrategy {
    /// Every strategy, in schema order.
    pub const ALL: [SampleStrategy; 3] = [SampleStrategy::Random, SampleStrategy::Diverse, SampleStrategy::Recent];

    /// Schema name.
    pub fn as_str(self) -> &'static str {
        match self {
            SampleStrategy::Random => "random",
            SampleStrategy::Diverse => "diverse",
            SampleStrategy::Recent => "recent",
        }
    }
}

impl std::str::FromStr for SampleStrategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        by_name(&Self::ALL, Self::as_str, s)
    }
}

/// Default sample size.
pub const DEFAULT_SAMPLE_K: i64 = 3;

/// sample_memory arguments, unvalidated.
#[derive(Debug, Clone, Default)]
pub struct RawSample {
    /// k.
    pub k: Option<i64>,
    /// strategy.
    pub strategy: Option<SampleStrategy>,
    /// memory_type.
    pub memory_type: Option<MemoryType>,
}

/// sample_memory arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleArgs {
    /// How many (1..=50).
    pub k: usize,
    /// Strategy.
    pub strategy: SampleStrategy,
    /// Type filter.
    pub memory_type: Option<MemoryType>,
}

impl RawSample {
    /// Validates.
    pub fn validate(self) -> Result<SampleArgs, ToolError> {
        Ok(SampleArgs {
            k: int_in("k", self.k, DEFAULT_SAMPLE_K, TOP_K)?,
            strategy: self.strategy.unwrap_or(SampleStrategy::Random),
            memory_type: self.memory_type,
        })
    }
}

/// The OpenAI function schema the LLM sees.
pub(super) fn schema() -> Value {
    function(
        "sample_memory",
        "Show k memories: random, diverse (spread by meaning) or recent.",
        json!({
            "k": prop_int("1-50 (default 3).", TOP_K),
            "strategy": prop_enum("Default random.", &SampleStrategy::ALL.map(SampleStrategy::as_str)),
            "memory_type": prop_enum("Only this type.", &TYPES),
        }),
        &[],
    )
}

/// The arguments from an LLM's JSON, validated as on the typed path.
pub(super) fn from_json(a: &mut Args) -> Result<SampleArgs, ToolError> {
    RawSample { k: a.int("k")?, strategy: a.parsed("strategy")?, memory_type: a.memory_type("memory_type")? }.validate()
}

/// Canonical JSON of the arguments (for the trace).
pub(super) fn canonical(a: &SampleArgs) -> Value {
    json!({"k": a.k, "strategy": a.strategy.as_str(), "memory_type": a.memory_type.map(MemoryType::as_str)})
}

fn rng(ctx: ToolContext<'_>) -> ChaCha8Rng {
    // Mix the step in so successive calls differ while staying reproducible.
    let mixed = ctx.seed ^ (u64::from(ctx.step)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    ChaCha8Rng::seed_from_u64(mixed)
}

impl Tool for SampleArgs {
    /// Sampling reads the memory as it is when applied; it embeds nothing.
    type Plan = SampleArgs;

    fn prepare(&self, _mem: &EpisodeMemory, _ctx: ToolContext<'_>) -> Result<Prepared<SampleArgs>, ToolError> {
        Ok(Prepared { plan: self.clone(), texts: Vec::new() })
    }

    fn apply(mem: &mut EpisodeMemory, a: SampleArgs, _vectors: &[Vec<f32>], ctx: ToolContext<'_>) -> ToolOutput {
        sample(mem, &a, ctx)
    }
}

fn sample(mem: &EpisodeMemory, a: &SampleArgs, ctx: ToolContext<'_>) -> ToolOutput {
    let pool: Vec<(&MemoryRecord, Cow<'_, [f32]>)> = mem.iter().filter(|(r, _)| a.memory_type.is_none_or(|t| r.memory_type == t)).collect();
    let k = a.k.min(pool.len());
    let picked: Vec<usize> = match a.strategy {
        SampleStrategy::Random => {
            let mut idx = index::sample(&mut rng(ctx), pool.len(), k).into_vec();
            idx.sort_unstable();
            idx
        }
        SampleStrategy::Recent => {
            let mut order: Vec<usize> = (0..pool.len()).collect();
            order.sort_by(|x, y| pool[*y].0.created_step.cmp(&pool[*x].0.created_step).then(y.cmp(x)));
            order.truncate(k);
            order
        }
        SampleStrategy::Diverse => farthest_points(&pool, k, ctx),
    };
    let memories: Vec<MemoryRecord> = picked.into_iter().map(|i| pool[i].0.clone()).collect();
    let text = if memories.is_empty() {
        "no memories to sample".to_string()
    } else {
        memories.iter().map(|r| r.render_line(None)).collect::<Vec<_>>().join("\n")
    };
    ToolOutput { kind: OutputKind::Sampled(memories), text }
}

fn farthest_points(pool: &[(&MemoryRecord, Cow<'_, [f32]>)], k: usize, ctx: ToolContext<'_>) -> Vec<usize> {
    if k == 0 {
        return Vec::new();
    }
    let first = index::sample(&mut rng(ctx), pool.len(), 1).index(0);
    let mut chosen = vec![first];
    // nearest[i] = highest similarity of i to any chosen point (lower = farther).
    let mut nearest: Vec<f32> = pool.iter().map(|(_, v)| dot(v, &pool[first].1)).collect();
    while chosen.len() < k {
        let mut best: Option<(usize, f32)> = None;
        for (i, s) in nearest.iter().enumerate() {
            if chosen.contains(&i) {
                continue;
            }
            if best.is_none_or(|(_, bs)| *s < bs) {
                best = Some((i, *s));
            }
        }
        let Some((next, _)) = best else { break };
        chosen.push(next);
        for (i, s) in nearest.iter_mut().enumerate() {
            *s = s.max(dot(&pool[i].1, &pool[next].1));
        }
    }
    chosen
}
