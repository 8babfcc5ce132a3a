//! Building M₀: every conversation's memory embedded once at startup (or taken from precomputed
//! vectors) and indexed, a custom episode's own M₀, and what an episode on a LoCoMo question is scored
//! against.

use std::collections::HashMap;
use std::sync::Arc;

use crate::dataset::Dataset;
use crate::embed::{EmbedError, EmbedService};
use crate::memory::{BaseMemory, IndexConfig, MemoryId, MemoryRecord, MemoryType};
use crate::reward::Target;

use super::*;

impl Environment {
    /// Like [`Self::new`], but takes M₀ vectors from `vectors` where they cover a conversation exactly
    /// (same embedder — the caller checks the identity — same ids in order), and reports embedding
    /// progress (`done`, `total` memories) for the rest.
    pub fn with_vectors(
        config: EnvConfig,
        dataset: Arc<Dataset>,
        embed: EmbedService,
        clock: Arc<dyn Clock>,
        vectors: Option<&crate::dataset::VectorSet>,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Self, EmbedError> {
        let mut bases = HashMap::new();
        let total = dataset.memories.len();
        let mut done = 0;
        for conv in &dataset.conversations {
            let rows = dataset.memories_of(&conv.id);
            let records = initial_records(rows);
            let stored = vectors.and_then(|v| v.by_conversation.get(&conv.id)).filter(|stored| {
                stored.len() == rows.len() && stored.iter().zip(rows).all(|((id, v), m)| *id == m.memory_id && v.len() == embed.dim())
            });
            let base = match stored {
                Some(stored) => {
                    let mut flat = Vec::with_capacity(rows.len() * embed.dim());
                    for (_, v) in stored {
                        // Stored vectors came out of an EmbedService, already unit length: use them bit for
                        // bit (normalising again moves them by an ulp, and ties could then rank
                        // differently than on a server that embedded M₀ itself).
                        let norm = crate::util::vector::dot(v, v).sqrt();
                        if (norm - 1.0).abs() <= 1e-4 {
                            flat.extend_from_slice(v);
                        } else {
                            let mut v = v.clone();
                            crate::util::vector::normalize(&mut v);
                            flat.extend_from_slice(&v);
                        }
                    }
                    BaseMemory::build(conv.id.clone(), records, flat, embed.dim(), config.index.clone())
                }
                None => build_base(&embed, conv.id.clone(), records, &config.index)?,
            };
            done += rows.len();
            progress(done, total);
            bases.insert(conv.id.clone(), Arc::new(base));
        }
        let base_words = bases
            .iter()
            .map(|(id, b): (&String, &Arc<BaseMemory>)| {
                (id.clone(), b.records().iter().map(|r| crate::reward::ledger::words(&r.text)).sum())
            })
            .collect();
        let id_salt = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
        Ok(Environment {
            registry: Registry::new(config.limits.max_open_episodes, config.limits.max_closed_ids, config.limits.forget_closed_after),
            config,
            dataset,
            bases,
            embed,
            clock,
            llm: None,
            p_old: Mutex::new(HashMap::new()),
            panels: Mutex::new(HashMap::new()),
            base_words,
            next_id: AtomicU64::new(0),
            id_salt,
            replica: super::replica::Replica::default(),
        })
    }

    pub(super) async fn custom_base(&self, key: &str, memories: &[NewMemory]) -> Result<BaseMemory, EpisodeError> {
        let records: Vec<MemoryRecord> = memories
            .iter()
            .enumerate()
            .map(|(i, m)| MemoryRecord {
                id: MemoryId(i as u32),
                text: m.text.trim().to_string(),
                memory_type: m.memory_type,
                speaker: m.speaker.clone(),
                session: m.session,
                session_date: m.session_date.clone(),
                evidence: m.evidence.clone(),
                source: m.source.clone().unwrap_or_else(|| "custom".to_string()),
                created_step: 0,
                authored: false,
            })
            .collect();
        let texts: Vec<String> = records.iter().map(|r| r.text.clone()).collect();
        let vectors = self.embed.embed(texts).await?;
        let (key, index, dim) = (key.to_string(), self.config.index.clone(), self.embed.dim());
        // Building an index is CPU work: keep it off the async workers.
        tokio::task::spawn_blocking(move || BaseMemory::build(key, records, vectors.concat(), dim, index))
            .await
            .map_err(|e| EmbedError::Join(e.to_string()).into())
    }
}

/// What an episode on a LoCoMo question is scored against. Here, not in `reward`, so that the reward
/// does not know the dataset: the episode is where the two meet.
impl From<&crate::dataset::Question> for Target {
    fn from(q: &crate::dataset::Question) -> Self {
        Target {
            question: q.question.clone(),
            answer: q.answer.clone(),
            adversarial_answer: q.adversarial_answer.clone(),
            category: Some(q.category),
            evidence: q.evidence.clone(),
        }
    }
}

/// The initial memory records of a conversation's dataset rows: ids `m0000…` by position, metadata kept.
pub fn initial_records(rows: &[crate::dataset::MemoryRow]) -> Vec<MemoryRecord> {
    rows.iter()
        .enumerate()
        .map(|(i, m)| MemoryRecord {
            id: MemoryId(i as u32),
            text: m.text.clone(),
            // The dataset validator admits only the three type names.
            memory_type: m.memory_type.parse().unwrap_or(MemoryType::Episodic),
            speaker: Some(m.speaker.clone()),
            session: Some(m.session),
            session_date: Some(m.session_date.clone()),
            evidence: m.evidence.clone(),
            source: m.source.clone(),
            created_step: 0,
            authored: false,
        })
        .collect()
}

/// Embeds records (batched) and builds an M₀.
pub fn build_base(embed: &EmbedService, key: String, records: Vec<MemoryRecord>, index: &IndexConfig) -> Result<BaseMemory, EmbedError> {
    let mut vectors = Vec::with_capacity(records.len() * embed.dim());
    for chunk in records.chunks(256) {
        let texts: Vec<&str> = chunk.iter().map(|r| r.text.as_str()).collect();
        for v in embed.embed_blocking(&texts)? {
            vectors.extend_from_slice(&v);
        }
    }
    Ok(BaseMemory::build(key, records, vectors, embed.dim(), index.clone()))
}
