//! merge_memory: replaces 2..5 memories by one. The sources are removed; the new memory's provenance is
//! the union of theirs (evidence sorted and deduplicated; speaker, session and date kept when all
//! sources agree). Text comes from `content` when given, else from the offline strategy
//! ([`merge_texts`], below): plain rules over the sentences and content words of [`crate::text`] — no
//! LLM, no randomness, no embedder — so the same sources always give the same memory in microseconds.
//! An LLM-backed mode ([`super::llm_edit`]) sits beside it; this remains the reference and the fallback.

use std::collections::BTreeSet;
use std::str::FromStr;

use serde_json::{json, Value};

use crate::memory::{EpisodeMemory, MemoryId, MemoryRecord, MemoryType};
use crate::text::{char_len, content_words, dedup_key, ensure_terminal, sentences};

use super::args::*;
use super::llm_calls::{function, prop, prop_enum, prop_strings, Args};
use super::{join_ids, require_distinct_live, require_room, OutputKind, Prepared, TextError, Tool, ToolContext, ToolError, ToolOutput};

// ---- arguments: what the typed RPC and the LLM's JSON are validated into --------------------

/// Merge takes this many memories at least / at most.
pub const MERGE_IDS: (usize, usize) = (2, 5);

/// merge_memory arguments, unvalidated.
#[derive(Debug, Clone, Default)]
pub struct RawMerge {
    /// memory_ids.
    pub memory_ids: Option<Vec<String>>,
    /// strategy.
    pub strategy: Option<MergeStrategy>,
    /// content.
    pub content: Option<String>,
}

/// merge_memory arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct MergeArgs {
    /// 2..=5 distinct ids.
    pub ids: Vec<MemoryId>,
    /// Strategy.
    pub strategy: MergeStrategy,
    /// Text overriding the strategy's.
    pub content: Option<String>,
}

impl RawMerge {
    /// Validates.
    pub fn validate(self, limits: &ToolLimits) -> Result<MergeArgs, ToolError> {
        let list = self.memory_ids.ok_or_else(|| ToolError::invalid("memory_ids", "is required"))?;
        let ids = parse_ids("memory_ids", &list, MERGE_IDS.0, MERGE_IDS.1)?;
        let strategy =
            self.strategy.ok_or_else(|| ToolError::invalid("strategy", "is required (summarize, concatenate or extract_common)"))?;
        let content = match self.content {
            None => None,
            Some(c) => Some(checked_text("content", &c, limits.max_text_chars)?),
        };
        Ok(MergeArgs { ids, strategy, content })
    }
}

/// The OpenAI function schema the LLM sees.
pub(super) fn schema() -> Value {
    function(
        "merge_memory",
        "Merge 2-5 memories into one that keeps their evidence; the originals are removed.",
        json!({
            "memory_ids": prop_strings("List of 2-5 ids.", MERGE_IDS),
            "strategy": prop_enum(
                "summarize: the sentences covering the content; concatenate: all distinct sentences; extract_common: what all share.",
                &MergeStrategy::ALL.map(MergeStrategy::as_str),
            ),
            "content": prop("string", "Merged text (overrides the strategy)."),
        }),
        &["memory_ids", "strategy"],
    )
}

/// The arguments from an LLM's JSON, validated as on the typed path.
pub(super) fn from_json(a: &mut Args, limits: &ToolLimits) -> Result<MergeArgs, ToolError> {
    RawMerge { memory_ids: a.strings("memory_ids")?, strategy: a.parsed("strategy")?, content: a.string("content")? }.validate(limits)
}

/// Canonical JSON of the arguments (for the trace).
pub(super) fn canonical(a: &MergeArgs) -> Value {
    json!({"memory_ids": id_strings(&a.ids), "strategy": a.strategy.as_str(), "content": a.content})
}

/// How `merge_memory` combines its 2–5 source texts into one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MergeStrategy {
    /// Extractive summary: a greedy subset of the distinct sentences that covers as many
    /// content words as fit in the length budget, in source order. Never longer than
    /// [`MergeStrategy::Concatenate`].
    Summarize,
    /// Every distinct sentence of every source, in source order, joined with one space.
    Concatenate,
    /// A minimal set of sentences covering the content words the sources share.
    ExtractCommon,
}

impl MergeStrategy {
    /// Every strategy, in schema order.
    pub const ALL: [MergeStrategy; 3] = [MergeStrategy::Summarize, MergeStrategy::Concatenate, MergeStrategy::ExtractCommon];

    /// The strategy's name in the tool schema and in canonical arguments.
    pub fn as_str(self) -> &'static str {
        match self {
            MergeStrategy::Summarize => "summarize",
            MergeStrategy::Concatenate => "concatenate",
            MergeStrategy::ExtractCommon => "extract_common",
        }
    }
}

/// Exactly one of the [`MergeStrategy::as_str`] names; the error says which names there are.
impl FromStr for MergeStrategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        by_name(&Self::ALL, Self::as_str, s)
    }
}

/// The same value in every source, else `None`.
fn agreed<T: PartialEq + Clone>(values: impl IntoIterator<Item = Option<T>>) -> Option<T> {
    let mut it = values.into_iter();
    let first = it.next()??;
    it.all(|v| v.as_ref() == Some(&first)).then_some(first)
}

/// Union of evidence ids in dialogue order (D<session>:<turn> compared numerically).
pub(super) fn union_evidence<'a>(lists: impl IntoIterator<Item = &'a [String]>) -> Vec<String> {
    let mut all: Vec<String> = lists.into_iter().flatten().cloned().collect();
    let key = |s: &String| {
        let mut nums = s.trim_start_matches('D').split(':').map(|p| p.parse::<u32>().unwrap_or(u32::MAX));
        (nums.next().unwrap_or(u32::MAX), nums.next().unwrap_or(u32::MAX), s.clone())
    };
    all.sort_by_key(key);
    all.dedup();
    all
}

/// A checked merge: the sources to remove and the record that replaces them.
#[derive(Debug, Clone)]
pub struct MergePlan {
    sources: Vec<MemoryId>,
    merged: MemoryRecord,
}

impl Tool for MergeArgs {
    type Plan = MergePlan;

    fn prepare(&self, mem: &EpisodeMemory, ctx: ToolContext<'_>) -> Result<Prepared<MergePlan>, ToolError> {
        let a = self;
        let sources = require_distinct_live(mem, "memory_ids", &a.ids)?;
        require_room(mem, ctx.limits, a.ids.len(), 1)?;
        let text = match &a.content {
            Some(c) => c.clone(),
            None => {
                let texts: Vec<&str> = sources.iter().map(|r| r.text.as_str()).collect();
                merge_texts(&texts, a.strategy).map_err(|e| ToolError::FailedPrecondition { message: format!("cannot merge: {e}") })?
            }
        };
        let n = text.chars().count();
        if n == 0 {
            return Err(ToolError::FailedPrecondition { message: "cannot merge: the strategy left no text; pass content".into() });
        }
        if n > ctx.limits.max_text_chars {
            return Err(ToolError::FailedPrecondition {
                message: format!(
                    "the merged text would be {n} characters, over the limit of {}; use summarize or pass content",
                    ctx.limits.max_text_chars
                ),
            });
        }
        let merged = MemoryRecord {
            id: mem.peek_next_id(),
            text: text.clone(),
            memory_type: agreed(sources.iter().map(|r| Some(r.memory_type))).unwrap_or(MemoryType::Semantic),
            speaker: agreed(sources.iter().map(|r| r.speaker.clone())),
            session: agreed(sources.iter().map(|r| r.session)),
            session_date: agreed(sources.iter().map(|r| r.session_date.clone())),
            evidence: union_evidence(sources.iter().map(|r| r.evidence.as_slice())),
            source: "merge".to_string(),
            created_step: ctx.step,
            authored: a.content.is_some() || sources.iter().any(|r| r.authored),
        };
        Ok(Prepared { plan: MergePlan { sources: a.ids.clone(), merged }, texts: vec![text] })
    }

    fn apply(mem: &mut EpisodeMemory, plan: MergePlan, vectors: &[Vec<f32>], _ctx: ToolContext<'_>) -> ToolOutput {
        let MergePlan { sources, mut merged } = plan;
        for id in &sources {
            let removed = mem.remove(*id);
            debug_assert!(removed.is_some(), "prepare checked the ids");
        }
        merged.id = mem.allocate_id();
        let text = format!("merged {} into {}", join_ids(&sources), merged.render_line(None));
        mem.insert(merged.clone(), &vectors[0]);
        ToolOutput { kind: OutputKind::Merged { memory: merged, removed: sources }, text }
    }
}

/// A distinct sentence of the merge sources, already terminated.
struct MergeSentence {
    text: String,
    chars: usize,
    words: BTreeSet<String>,
}

/// Sentences of all sources in order, deduplicated by normalised form.
///
/// Also returns, per source, the indices of its sentences (a duplicate maps to the first
/// occurrence: equal normalised forms have equal content words). Content words are computed
/// only when `with_words`.
fn distinct_sentences(sources: &[&str], with_words: bool) -> (Vec<MergeSentence>, Vec<Vec<usize>>) {
    let mut seen: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    let mut out = Vec::new();
    let mut per_source = Vec::with_capacity(sources.len());
    for src in sources {
        let mut idx = Vec::new();
        for s in sentences(src) {
            let key = dedup_key(&s);
            if key.is_empty() {
                continue;
            }
            if let Some(&i) = seen.get(&key) {
                idx.push(i);
                continue;
            }
            seen.insert(key, out.len());
            idx.push(out.len());
            let text = ensure_terminal(&s);
            out.push(MergeSentence {
                chars: char_len(&text),
                words: if with_words { content_words(&text) } else { BTreeSet::new() },
                text,
            });
        }
        per_source.push(idx);
    }
    (out, per_source)
}

fn join_picked(sents: &[MergeSentence], picked: &[bool]) -> String {
    sents.iter().zip(picked).filter(|(_, &p)| p).map(|(s, _)| s.text.as_str()).collect::<Vec<_>>().join(" ")
}

/// Merges 2–5 memory texts into one with `strategy`.
///
/// - `Concatenate`: all sentences, duplicates (same lowercase alphanumeric form) dropped,
///   each with terminal punctuation, joined by one space in source order.
/// - `Summarize`: from those sentences, greedily the one covering the most not-yet-covered
///   content words per character (ties: earlier), while it fits in the budget of
///   max(longest source, 60 % of the concatenation) characters and until all content words
///   are covered; output in source order. Always at least one sentence (when any source has
///   one), never longer than `Concatenate`.
/// - `ExtractCommon`: the content words present in every source (or, failing that, in at
///   least two), covered greedily by the fewest sentences (most shared words first; ties:
///   shorter, then earlier), in source order. `Err(NothingInCommon)` when nothing is shared.
///
/// Blank input gives `Ok("")` for `Concatenate`/`Summarize`.
///
/// # Errors
///
/// [`TextError::NothingInCommon`] from `ExtractCommon` when no content word occurs in two or
/// more sources. `Concatenate` and `Summarize` never fail.
pub fn merge_texts(sources: &[&str], strategy: MergeStrategy) -> Result<String, TextError> {
    let (sents, per_source) = distinct_sentences(sources, strategy != MergeStrategy::Concatenate);
    match strategy {
        MergeStrategy::Concatenate => Ok(join_picked(&sents, &vec![true; sents.len()])),
        MergeStrategy::Summarize => Ok(summarize(sources, &sents)),
        MergeStrategy::ExtractCommon => extract_common(&sents, &per_source),
    }
}

fn summarize(sources: &[&str], sents: &[MergeSentence]) -> String {
    if sents.is_empty() {
        return String::new();
    }
    let total = sents.iter().map(|s| s.chars).sum::<usize>() + sents.len() - 1;
    let longest = sources.iter().map(|s| char_len(s.trim())).max().unwrap_or(0);
    let budget = longest.max((total * 3).div_ceil(5));
    let mut picked = vec![false; sents.len()];
    let mut covered: BTreeSet<&str> = BTreeSet::new();
    let mut used = 0usize;
    let mut any = false;
    loop {
        // best = (index, new words); compare new/len by cross-multiplication
        let mut best: Option<(usize, usize)> = None;
        for (i, s) in sents.iter().enumerate() {
            if picked[i] {
                continue;
            }
            let cost = if any { used + 1 + s.chars } else { s.chars };
            if any && cost > budget {
                continue;
            }
            let new = s.words.iter().filter(|w| !covered.contains(w.as_str())).count();
            if new == 0 {
                continue;
            }
            let better = match best {
                None => true,
                Some((b, bn)) => new * sents[b].chars > bn * s.chars,
            };
            if better {
                best = Some((i, new));
            }
        }
        let Some((i, _)) = best else { break };
        picked[i] = true;
        used = if any { used + 1 + sents[i].chars } else { sents[i].chars };
        any = true;
        covered.extend(sents[i].words.iter().map(String::as_str));
    }
    if !any {
        picked[0] = true; // no content words anywhere: keep the first sentence
    }
    join_picked(sents, &picked)
}

fn extract_common(sents: &[MergeSentence], per_source: &[Vec<usize>]) -> Result<String, TextError> {
    let mut counts: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for idx in per_source {
        let words: BTreeSet<&str> = idx.iter().flat_map(|&i| sents[i].words.iter().map(String::as_str)).collect();
        for w in words {
            *counts.entry(w).or_insert(0) += 1;
        }
    }
    let mut shared: BTreeSet<&str> = counts.iter().filter(|(_, &c)| c == per_source.len()).map(|(w, _)| *w).collect();
    if shared.is_empty() {
        shared = counts.iter().filter(|(_, &c)| c >= 2).map(|(w, _)| *w).collect();
    }
    if shared.is_empty() {
        return Err(TextError::NothingInCommon);
    }
    let mut picked = vec![false; sents.len()];
    while !shared.is_empty() {
        let mut best: Option<(usize, usize)> = None;
        for (i, s) in sents.iter().enumerate() {
            if picked[i] {
                continue;
            }
            let cover = s.words.iter().filter(|w| shared.contains(w.as_str())).count();
            if cover == 0 {
                continue;
            }
            let better = match best {
                None => true,
                Some((b, bc)) => cover > bc || (cover == bc && s.chars < sents[b].chars),
            };
            if better {
                best = Some((i, cover));
            }
        }
        // Every shared word comes from some sentence, so `best` exists; stay total anyway.
        let Some((i, _)) = best else { break };
        picked[i] = true;
        for w in &sents[i].words {
            shared.remove(w.as_str());
        }
    }
    Ok(join_picked(sents, &picked))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::fixtures::FACTS;

    #[test]
    fn concatenate_dedups_and_terminates() {
        let c = |srcs: &[&str]| merge_texts(srcs, MergeStrategy::Concatenate).unwrap();
        assert_eq!(
            c(&["Caroline went hiking", "caroline went hiking!", "Melanie swims. Caroline went hiking."]),
            "Caroline went hiking. Melanie swims."
        );
        assert_eq!(c(&[FACTS[0], FACTS[1]]), format!("{} {}", FACTS[0], FACTS[1]));
        // identical sources give the source back (with terminal punctuation)
        for f in FACTS {
            assert_eq!(c(&[f, f]), *f);
            assert_eq!(c(&[f.trim_end_matches('.'), f]), *f);
        }
        assert_eq!(c(&["Jon dances, ", "Gina sings;"]), "Jon dances. Gina sings.");
        assert_eq!(c(&["", "  "]), "");
    }

    #[test]
    fn summarize_properties() {
        let groups: Vec<Vec<&str>> = vec![
            FACTS[..2].to_vec(),
            FACTS[2..5].to_vec(),
            FACTS[5..10].to_vec(),
            vec![FACTS[0], FACTS[0], FACTS[1]],
            vec!["Caroline went to the support group. She loved it.", "Caroline loved the support group."],
        ];
        for g in &groups {
            let concat = merge_texts(g, MergeStrategy::Concatenate).unwrap();
            let sum = merge_texts(g, MergeStrategy::Summarize).unwrap();
            assert!(!sum.is_empty(), "{g:?}");
            assert!(sum.len() <= concat.len(), "{sum:?} longer than {concat:?}");
            let all: Vec<String> = sentences(&concat);
            for s in sentences(&sum) {
                assert!(all.contains(&s), "{s:?} not a sentence of {concat:?}");
            }
            // deterministic
            assert_eq!(sum, merge_texts(g, MergeStrategy::Summarize).unwrap());
        }
        // greedy by new words per character: the short sentence wins; "at the lake" would
        // exceed the budget of max(45, 60% of 95) = 57 characters, "Caroline paints." adds nothing
        assert_eq!(
            merge_texts(
                &["Caroline loves painting sunsets. Caroline paints.", "Caroline loves painting sunsets at the lake."],
                MergeStrategy::Summarize
            )
            .unwrap(),
            "Caroline loves painting sunsets."
        );
        // "Jon opened a studio." has the best ratio (3 words / 20 chars), then the Gina sentence;
        // the longer Jon sentence (2 new words) no longer fits the 71-character budget
        assert_eq!(
            merge_texts(
                &[
                    "Jon opened a dance studio downtown. Jon opened a studio.",
                    "Gina runs an online clothing store. Jon opened a dance studio downtown!"
                ],
                MergeStrategy::Summarize
            )
            .unwrap(),
            "Jon opened a studio. Gina runs an online clothing store."
        );
        // everything covered within budget: the redundant short sentence is left out
        assert_eq!(
            merge_texts(
                &["Jon opened a dance studio downtown.", "Jon danced. Jon opened a dance studio downtown!"],
                MergeStrategy::Summarize
            )
            .unwrap(),
            "Jon opened a dance studio downtown. Jon danced."
        );
        // content-free input still yields a sentence
        assert_eq!(merge_texts(&["Yes.", "And so it is."], MergeStrategy::Summarize).unwrap(), "Yes.");
        assert_eq!(merge_texts(&["", ""], MergeStrategy::Summarize).unwrap(), "");
    }

    #[test]
    fn summarize_respects_budget() {
        // three unrelated sentences of similar length: the budget (60% of the total) holds
        // only one of them besides the first pick... so exactly the best two do not fit.
        let srcs = [
            "Dave opened his own car shop last week.",
            "Melanie painted a lake sunrise last year.",
            "Joanna had a dog named Tilly in Michigan.",
        ];
        let sum = merge_texts(&srcs, MergeStrategy::Summarize).unwrap();
        let budget = (merge_texts(&srcs, MergeStrategy::Concatenate).unwrap().chars().count() * 3).div_ceil(5);
        assert!(sum.chars().count() <= budget, "{sum:?}");
        assert_eq!(sentences(&sum).len(), 1);
    }

    #[test]
    fn extract_common_table() {
        let e = |srcs: &[&str]| merge_texts(srcs, MergeStrategy::ExtractCommon);
        // shared = {caroline, support, group}; both sentences cover it, the shorter one wins
        assert_eq!(
            e(&[
                "Caroline attended an LGBTQ support group recently. She bought a guitar.",
                "The support group has made Caroline feel very accepted.",
            ]),
            Ok("Caroline attended an LGBTQ support group recently.".to_string())
        );
        // nothing in all three, but "pottery" is in two; ties go to the shorter sentence
        assert_eq!(e(&["Melanie loves pottery.", "Jon likes dancing.", "Pottery calms Gina."]), Ok("Pottery calms Gina.".to_string()));
        assert_eq!(e(&["Melanie loves pottery.", "Jon dances."]), Err(TextError::NothingInCommon));
        assert_eq!(e(&["", ""]), Err(TextError::NothingInCommon));
        // covering needs two sentences
        assert_eq!(
            e(&["Jon dances salsa. Jon bakes bread.", "Jon dances salsa and bakes bread."]),
            Ok("Jon dances salsa and bakes bread.".to_string())
        );
        assert_eq!(e(&["Jon dances salsa on Fridays. Gina bakes bread.", "Salsa and bread."]), Ok("Salsa and bread.".to_string()));
        assert_eq!(
            e(&["Jon dances salsa on Fridays. Gina bakes bread.", "Salsa on Fridays!", "Bread, Gina."]),
            Ok("Salsa on Fridays! Bread, Gina.".to_string())
        );
    }
}
