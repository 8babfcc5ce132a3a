//! The semantic-memory design's `SemanticMemoryManager` on a bank: retrieval by similarity with usage accounting, the
//! retrieval-based prompt section, statistics, the epoch, compression by four strategies
//! ([`super::compress`]) and the merging of near-duplicates.
//!
//! Defaults where the seed is silent: `top_k` 5 for retrieval and 10 for the prompt section (the seed's
//! training loop), `min_similarity` 0.0, `merge_similar` threshold 0.9. A zero vector (empty text) has
//! similarity 0 with everything, never NaN.

use std::collections::BTreeMap;

use super::compress::{self, Candidate, Params, Space, Strategy};
use super::experience::render;
use super::library::{Draft, Experience, Hit, Library};
use super::store::BankMeta;
use super::{BankError, Banks};
use crate::memory::SearchPath;
use crate::tools::llm_edit::prompts;
use crate::tools::{merge_texts, MergeStrategy};
use crate::util::excerpt::quoted;

/// Default `top_k` of Retrieve.
pub const DEFAULT_TOP_K: usize = 5;

/// Default `top_k` of the retrieval-based prompt section.
pub const DEFAULT_PROMPT_TOP_K: usize = 10;

/// Default similarity at which `merge_similar` treats two experiences as near-duplicates.
pub const DEFAULT_MERGE_THRESHOLD: f32 = 0.9;

/// The most `top_k` may ask for.
pub const MAX_TOP_K: usize = 1_000;

/// A retrieval request.
#[derive(Debug, Clone, PartialEq)]
pub struct Query<'a> {
    /// The query text.
    pub text: &'a str,
    /// How many.
    pub top_k: usize,
    /// Lowest similarity returned.
    pub min_similarity: Option<f32>,
    /// Only this domain.
    pub domain: Option<&'a str>,
    /// Count usage.
    pub count: bool,
}

/// SemanticMemoryManager.get_memory_stats.
#[derive(Debug, Clone, PartialEq)]
pub struct Stats {
    /// Experiences.
    pub total: usize,
    /// Mean confidence (0 when empty).
    pub avg_confidence: f64,
    /// Experiences per domain.
    pub domains: BTreeMap<String, usize>,
    /// Sum of usage counts.
    pub total_usage: u64,
    /// Experiences used at least once.
    pub used: usize,
    /// The counters.
    pub meta: BankMeta,
}

/// One merge of near-duplicates.
#[derive(Debug, Clone, PartialEq)]
pub struct MergedGroup {
    /// The sources.
    pub sources: Vec<u64>,
    /// The new experience (None in a dry run).
    pub new_id: Option<u64>,
    /// The merged text.
    pub text: String,
    /// Set when the LLM's text could not be used.
    pub note: Option<String>,
}

fn check_top_k(top_k: usize) -> Result<(), BankError> {
    if top_k > MAX_TOP_K {
        return Err(BankError::invalid("top_k", format!("must be at most {MAX_TOP_K}, got {top_k}")));
    }
    Ok(())
}

fn check_similarity(field: &str, v: Option<f32>) -> Result<(), BankError> {
    match v {
        Some(x) if !x.is_finite() || !(-1.0..=1.0).contains(&x) => {
            Err(BankError::invalid(field, format!("must be a number in [-1, 1], got {x}")))
        }
        _ => Ok(()),
    }
}

/// A refused selection: the bank's state when its graph is missing, else the named field's value.
fn refused(field: &str, e: compress::CompressError) -> BankError {
    use compress::CompressError as E;
    match e {
        E::NoGraph { .. } => BankError::FailedPrecondition { message: e.to_string() },
        E::BadDecay(_)
        | E::BadConfidence { .. }
        | E::DimensionMismatch { .. }
        | E::NonFiniteVector { .. }
        | E::NoRow { .. }
        | E::DuplicateId(_)
        | E::BadThreshold(_) => BankError::invalid(field, e.to_string()),
    }
}

impl Banks {
    /// SemanticMemoryManager.retrieve_relevant.
    pub async fn retrieve(&self, bank: &str, q: Query<'_>) -> Result<(Vec<Hit>, SearchPath), BankError> {
        check_top_k(q.top_k)?;
        check_similarity("min_similarity", q.min_similarity)?;
        // The text rule on the query (it may be empty), capped like an experience's text.
        let text = BankError::admit_text("query", q.text, self.config().limits.max_text_chars)?;
        if q.top_k == 0 {
            return Ok((Vec::new(), SearchPath::Exact));
        }
        let v = self.embedder().embed(vec![text]).await?;
        let query = v.into_iter().next().unwrap_or_default();
        self.read(bank, |lib| lib.retrieve(&query, q.top_k, q.min_similarity, q.domain, q.count)).await
    }

    /// SemanticMemoryManager.format_for_prompt: the retrieved experiences as `[G0]. text` lines, best
    /// first.
    pub async fn format_relevant(&self, bank: &str, q: Query<'_>) -> Result<(String, Vec<u64>), BankError> {
        let (hits, _) = self.retrieve(bank, q).await?;
        let exps: Vec<&Experience> = hits.iter().map(|h| &h.exp).collect();
        Ok((render(exps.iter().copied()), exps.iter().map(|e| e.id).collect()))
    }

    /// SemanticMemoryManager.get_memory_stats.
    pub async fn stats(&self, bank: &str) -> Result<Stats, BankError> {
        self.read(bank, |lib| {
            let mut domains = BTreeMap::new();
            let (mut sum, mut total_usage, mut used) = (0.0, 0, 0);
            for e in lib.iter() {
                let (usage_count, _) = lib.usage(e);
                *domains.entry(e.domain.clone()).or_insert(0) += 1;
                sum += e.confidence;
                total_usage += usage_count;
                used += usize::from(usage_count > 0);
            }
            let total = lib.len();
            Stats {
                total,
                avg_confidence: if total == 0 { 0.0 } else { sum / total as f64 },
                domains,
                total_usage,
                used,
                meta: lib.meta().clone(),
            }
        })
        .await
    }

    /// SemanticMemoryManager.set_epoch.
    pub async fn set_epoch(&self, bank: &str, epoch: u64, expected: Option<u64>) -> Result<BankMeta, BankError> {
        let ((), meta) = self
            .write(bank, expected, |lib, draft| {
                if epoch == lib.meta().epoch {
                    return Ok(());
                }
                draft.epoch = epoch;
                Ok(())
            })
            .await?;
        Ok(meta)
    }

    /// `decide` of the bank's experiences at one version, and that version's counters: the experiences are
    /// copied under the read lock (Retrieve goes on meanwhile) and `decide` runs on the blocking pool, off the
    /// bank's lock and the async workers (compression and MergeSimilar compare every pair: seconds on a large
    /// bank). A version other than `expected` is the caller's conflict.
    async fn off_lock<T: Send + 'static>(
        &self,
        bank: &str,
        expected: Option<u64>,
        what: &str,
        decide: impl FnOnce(Vec<Candidate<'static>>, Space<'_>, &BankMeta) -> Result<T, BankError> + Send + 'static,
    ) -> Result<(T, BankMeta), BankError> {
        let ((input, base), meta) = self.read(bank, |lib| (lib.selection(), lib.meta().clone())).await?;
        if let Some(e) = expected.filter(|e| *e != meta.version) {
            return Err(BankError::VersionConflict { name: bank.to_string(), expected: e, current: meta.version });
        }
        let m = meta.clone();
        let decided = tokio::task::spawn_blocking(move || {
            let space = Space { rows: base.rows(), dim: base.dim(), graph: base.graph(), huge_pages: base.config().huge_pages };
            decide(input, space, &m)
        })
        .await
        .map_err(|e| BankError::FailedPrecondition { message: format!("{what} bank {} failed: {e}", quoted(bank)) })??;
        Ok((decided, meta))
    }

    /// SemanticMemoryManager.compress_memory: the ids removed (or to be removed, in a dry run).
    ///
    /// The selection is seconds of CPU on a large bank (diversity and hybrid grow faster than the bank), so it
    /// never holds the bank's lock or an async worker: the experiences are copied at one version under the read
    /// lock (Retrieve goes on meanwhile), the selection runs on the blocking pool, and the removals are written
    /// at that version. A write in between means selecting again, from the bank as it then is, up to
    /// [`super::WRITE_ATTEMPTS`] times (with `expected`, the conflict is the caller's). So the result is
    /// always the selection of the bank it is applied to.
    #[allow(clippy::too_many_arguments)]
    pub async fn compress(
        &self,
        bank: &str,
        max_size: Option<u32>,
        strategy: Strategy,
        params: Params,
        dry_run: bool,
        expected: Option<u64>,
    ) -> Result<(Vec<u64>, usize, BankMeta), BankError> {
        if max_size == Some(0) {
            return Err(BankError::invalid(
                "max_size",
                "must be at least 1: 0 would remove every experience (to empty a bank, delete it, or import an empty library with replace)",
            ));
        }
        let mut attempt = 0;
        loop {
            attempt += 1;
            let ((removed, size), meta) = self
                .off_lock(bank, expected, "compressing", move |input, space, meta| {
                    let keep = max_size.unwrap_or(meta.max_size) as usize;
                    let removed = compress::removals(&input, Some(space), keep, strategy, meta.epoch, &params);
                    removed.map(|r| (r, input.len())).map_err(|e| refused("compress", e))
                })
                .await?;
            // What is (or, in a dry run, would be) left.
            let left = size - removed.len();
            if dry_run || removed.is_empty() {
                return Ok((removed, left, meta));
            }
            let written = self
                .write(bank, Some(meta.version), |_, draft| {
                    for id in &removed {
                        draft.delete(*id);
                    }
                    Ok(())
                })
                .await;
            match written {
                Ok(((), meta)) => return Ok((removed, left, meta)),
                Err(e) if again(&e, expected, attempt) => {
                    tracing::debug!(bank, attempt, "the bank changed while compressing; selecting again");
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// SemanticMemoryManager.merge_similar: each group of near-duplicates (connected by similarity ≥
    /// `threshold`) becomes one experience with the highest confidence of the group. Its text is
    /// merge_memory's offline `summarize` of the group (in id order), or with `use_llm` the LLM's:
    /// merge_memory's `summarize` prompt and reply checks (`--llm-edit`), one request per group,
    /// concurrently, against the library as it was when the call began; a failed request or an unusable
    /// reply falls back to the offline text and says so in the group's note, and the merges are one
    /// write at the version the groups were read at.
    ///
    /// The groups are found as a compression selects (every pair compared: seconds on a large bank): on a
    /// copy of the experiences at one version, on the blocking pool, off the bank's lock; the merges are
    /// written at that version, and found again if another write landed in between (offline only: an LLM's
    /// texts are not asked twice, so that conflict is `ABORTED`).
    pub async fn merge_similar(
        &self,
        bank: &str,
        threshold: f32,
        use_llm: bool,
        dry_run: bool,
        expected: Option<u64>,
    ) -> Result<(Vec<MergedGroup>, BankMeta), BankError> {
        check_similarity("threshold", Some(threshold))?;
        let max_chars = self.config().limits.max_text_chars;
        let llm = if use_llm { Some(self.require_llm("use_llm")?) } else { None };
        let mut attempt = 0;
        loop {
            attempt += 1;
            let (groups, meta) = self
                .off_lock(bank, expected, "grouping", move |input, space, _| {
                    compress::similar_groups(&input, Some(space), threshold).map_err(|e| refused("threshold", e))
                })
                .await?;
            let version = meta.version;
            let written = match &llm {
                Some(llm) => {
                    // The groups' texts at the version they were found at (else find them again).
                    let (sources, now) = self
                        .read(bank, |lib| {
                            let sources: Vec<Vec<String>> = groups
                                .iter()
                                .map(|ids| ids.iter().filter_map(|id| lib.get(*id)).map(|e| e.text.clone()).collect())
                                .collect();
                            (sources, lib.meta().version)
                        })
                        .await?;
                    if now != version {
                        let conflict = BankError::VersionConflict { name: bank.to_string(), expected: version, current: now };
                        if again(&conflict, expected, attempt) {
                            continue;
                        }
                        return Err(conflict);
                    }
                    Some(llm_texts(llm, sources, max_chars).await?)
                }
                None => None,
            };
            let merged = self
                .write(bank, Some(version), |lib, draft| {
                    let texts = match &written {
                        None => groups.iter().map(|ids| (offline_text(lib, ids, max_chars), None)).collect(),
                        Some(written) => groups
                            .iter()
                            .zip(written.iter().cloned())
                            .map(|(ids, r)| match r {
                                Some(Ok(text)) => (text, None),
                                Some(Err(reason)) => {
                                    (offline_text(lib, ids, max_chars), Some(format!("{reason}; merged offline (summarize)")))
                                }
                                None => (offline_text(lib, ids, max_chars), Some("no LLM reply; merged offline (summarize)".to_string())),
                            })
                            .collect(),
                    };
                    Ok(plan_merges(lib, draft, groups.clone(), texts, dry_run))
                })
                .await;
            match merged {
                Err(e) if llm.is_none() && again(&e, expected, attempt) => {
                    tracing::debug!(bank, attempt, "the bank changed while grouping; grouping again");
                }
                other => return other,
            }
        }
    }
}

/// Whether a decision made off the lock is made again after `e`: another write landed since the version it
/// was made at, the caller named no version, and attempts are left.
fn again(e: &BankError, expected: Option<u64>, attempt: u32) -> bool {
    matches!(e, BankError::VersionConflict { .. }) && expected.is_none() && attempt < super::WRITE_ATTEMPTS
}

/// The LLM's merged text of each group (`Err` with the reason it is unusable), asked concurrently.
async fn llm_texts(
    llm: &std::sync::Arc<crate::llm::Llm>,
    sources: Vec<Vec<String>>,
    max_chars: usize,
) -> Result<Vec<Option<Result<String, String>>>, BankError> {
    let mut tasks = tokio::task::JoinSet::new();
    let n = sources.len();
    for (i, texts) in sources.into_iter().enumerate() {
        let llm = std::sync::Arc::clone(llm);
        tasks.spawn(async move {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            let Some(request) = prompts::merge_request(&refs, MergeStrategy::Summarize, max_chars) else {
                return (i, Err("the merge strategy asks no LLM".to_string()));
            };
            let reply = match llm.ask(&request).await {
                Ok(r) => prompts::parse_merge(&r, max_chars, prompts::sources_chars(&refs))
                    .map_err(|r| format!("the LLM reply was unusable ({r})")),
                Err(e) => Err(format!("the LLM failed ({e})")),
            };
            (i, reply)
        });
    }
    let mut written: Vec<Option<Result<String, String>>> = vec![None; n];
    while let Some(done) = tasks.join_next().await {
        let (i, r) = done.map_err(|e| BankError::FailedPrecondition { message: format!("an LLM merge task failed: {e}") })?;
        written[i] = Some(r);
    }
    Ok(written)
}

/// merge_memory's offline `summarize` of a group's texts (their concatenation if it finds nothing),
/// cut to the text limit.
fn offline_text(lib: &Library, ids: &[u64], max_chars: usize) -> String {
    let texts: Vec<&str> = ids.iter().filter_map(|id| lib.get(*id)).map(|e| e.text.as_str()).collect();
    let text = merge_texts(&texts, MergeStrategy::Summarize).unwrap_or_else(|_| texts.join(" "));
    text.chars().take(max_chars).collect()
}

/// Plans one merge per group: the sources removed, a new experience with the group's text, the highest
/// confidence, the first source's domain, the summed usage, the current epoch.
fn plan_merges(
    lib: &Library,
    draft: &mut Draft,
    groups: Vec<Vec<u64>>,
    texts: Vec<(String, Option<String>)>,
    dry_run: bool,
) -> Vec<MergedGroup> {
    let mut out = Vec::with_capacity(groups.len());
    for (ids, (text, note)) in groups.into_iter().zip(texts) {
        let sources: Vec<Experience> = ids.iter().filter_map(|id| lib.get(*id)).map(|e| lib.with_usage(e)).collect();
        let new_id = (!dry_run).then(|| {
            for id in &ids {
                draft.delete(*id);
            }
            let id = draft.allocate();
            draft.put(Experience {
                id,
                text: text.clone(),
                confidence: sources.iter().map(|e| e.confidence).fold(0.0, f64::max),
                domain: sources.first().map(|e| e.domain.clone()).unwrap_or_default(),
                created_epoch: draft.epoch,
                usage_count: sources.iter().map(|e| e.usage_count).sum(),
                last_used_epoch: sources.iter().filter_map(|e| e.last_used_epoch).max(),
            });
            id
        });
        out.push(MergedGroup { sources: ids, new_id, text, note });
    }
    out
}

/// Parses a strategy name ("" is the semantic-memory design's recommended `hybrid`).
pub fn strategy(field: &str, s: &str) -> Result<Strategy, BankError> {
    if s.trim().is_empty() {
        return Ok(Strategy::Hybrid);
    }
    s.parse().map_err(|m: String| BankError::invalid(field, m))
}
