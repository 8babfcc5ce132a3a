//! split_memory: replaces one memory by 2..max_parts memories, each carrying the original's provenance
//! (evidence, speaker, session, date, type). Parts come from `parts` when given, else from the offline
//! segmentation ([`split_text`], below) of its [`crate::text`] clauses by time expressions, topic
//! similarity or speaker mentions: deterministic rules, no LLM, the reference and the fallback for
//! [`super::llm_edit`]. A memory that cannot be split is FailedPrecondition with the reason.

use std::collections::BTreeSet;
use std::str::FromStr;

use serde_json::{json, Value};

use crate::memory::{EpisodeMemory, MemoryId, MemoryRecord};
use crate::text::{char_len, content_words, dedup_key, ensure_terminal, lower, segments, time_expressions};

use super::args::*;
use super::llm_calls::{function, prop, prop_enum, prop_int, prop_strings, Args};
use super::{join_ids, require_room, OutputKind, Prepared, TextError, Tool, ToolContext, ToolError, ToolOutput};

// ---- arguments: what the typed RPC and the LLM's JSON are validated into --------------------

/// Split's max_parts range (least, most) and default; a `parts` list has at least the least and at most the
/// call's `max_parts` texts.
pub const SPLIT_PARTS: (i64, i64, i64) = (2, 5, 3);

/// split_memory arguments, unvalidated.
#[derive(Debug, Clone, Default)]
pub struct RawSplit {
    /// memory_id.
    pub memory_id: Option<String>,
    /// split_criteria.
    pub split_criteria: Option<SplitCriteria>,
    /// max_parts.
    pub max_parts: Option<i64>,
    /// parts.
    pub parts: Option<Vec<String>>,
}

/// split_memory arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct SplitArgs {
    /// The memory to split.
    pub id: MemoryId,
    /// Criterion.
    pub criteria: SplitCriteria,
    /// Most parts (2..=5).
    pub max_parts: usize,
    /// Explicit parts.
    pub parts: Option<Vec<String>>,
}

impl RawSplit {
    /// Validates.
    pub fn validate(self, limits: &ToolLimits) -> Result<SplitArgs, ToolError> {
        let id = match self.memory_id.as_deref().map(str::trim) {
            None | Some("") => return Err(ToolError::invalid("memory_id", "is required")),
            Some(s) => parse_id("memory_id", s)?,
        };
        let criteria =
            self.split_criteria.ok_or_else(|| ToolError::invalid("split_criteria", "is required (temporal, thematic or speaker)"))?;
        let max_parts = int_in("max_parts", self.max_parts, SPLIT_PARTS.2, (SPLIT_PARTS.0, SPLIT_PARTS.1))?;
        let parts = match self.parts {
            None => None,
            Some(ps) => {
                let least = SPLIT_PARTS.0 as usize;
                if ps.len() < least || ps.len() > max_parts {
                    return Err(ToolError::invalid("parts", format!("must list {least} to {max_parts} texts, got {}", ps.len())));
                }
                let mut out = Vec::with_capacity(ps.len());
                for p in &ps {
                    out.push(checked_text("parts", p, limits.max_text_chars)?);
                }
                Some(out)
            }
        };
        Ok(SplitArgs { id, criteria, max_parts, parts })
    }
}

/// The OpenAI function schema the LLM sees.
pub(super) fn schema() -> Value {
    function(
        "split_memory",
        "Split one memory into 2..max_parts focused memories that keep its evidence.",
        json!({
            "memory_id": prop("string", "Id, as a search or sample result showed it."),
            "split_criteria": prop_enum("At time expressions, by topic, or by person.", &SplitCriteria::ALL.map(SplitCriteria::as_str)),
            "max_parts": prop_int("2-5 (default 3).", (SPLIT_PARTS.0, SPLIT_PARTS.1)),
            // At most the largest max_parts: the validation also refuses more parts than the call's own.
            "parts": prop_strings("Part texts to use instead (list).", (SPLIT_PARTS.0 as usize, SPLIT_PARTS.1 as usize)),
        }),
        &["memory_id", "split_criteria"],
    )
}

/// The arguments from an LLM's JSON, validated as on the typed path.
pub(super) fn from_json(a: &mut Args, limits: &ToolLimits) -> Result<SplitArgs, ToolError> {
    RawSplit {
        memory_id: a.string("memory_id")?,
        split_criteria: a.parsed("split_criteria")?,
        max_parts: a.int("max_parts")?,
        // `[]` is unset, as on the typed path (proto3 cannot send an empty list apart from none).
        parts: a.strings("parts")?.filter(|p| !p.is_empty()),
    }
    .validate(limits)
}

/// Canonical JSON of the arguments (for the trace).
pub(super) fn canonical(a: &SplitArgs) -> Value {
    json!({"memory_id": a.id.to_string(), "split_criteria": a.criteria.as_str(),
            "max_parts": a.max_parts, "parts": a.parts})
}

/// How `split_memory` decides where one memory becomes several.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SplitCriteria {
    /// One part per time expression ("last week", "7 May 2023", "yesterday", ...).
    Temporal,
    /// Adjacent clauses are grouped by content-word overlap; dissimilar runs become parts.
    Thematic,
    /// One part per known speaker the clauses mention.
    Speaker,
}

impl SplitCriteria {
    /// Every criterion, in schema order.
    pub const ALL: [SplitCriteria; 3] = [SplitCriteria::Temporal, SplitCriteria::Thematic, SplitCriteria::Speaker];

    /// The criterion's name in the tool schema and in canonical arguments.
    pub fn as_str(self) -> &'static str {
        match self {
            SplitCriteria::Temporal => "temporal",
            SplitCriteria::Thematic => "thematic",
            SplitCriteria::Speaker => "speaker",
        }
    }
}

/// Exactly one of the [`SplitCriteria::as_str`] names; the error says which names there are.
impl FromStr for SplitCriteria {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        by_name(&Self::ALL, Self::as_str, s)
    }
}

fn cannot_split(reason: &str) -> TextError {
    TextError::CannotSplit { reason: reason.to_string() }
}

/// The speakers a split by speaker may name: the conversation's, plus the memory's own speaker.
pub(super) fn known_speakers<'m>(mem: &'m EpisodeMemory, original: &'m MemoryRecord) -> Vec<&'m str> {
    let mut speakers: Vec<&str> = mem.base().speakers().iter().map(String::as_str).collect();
    if let Some(s) = original.speaker.as_deref() {
        if !speakers.contains(&s) {
            speakers.push(s);
        }
    }
    speakers
}

/// A checked split: the memory to remove and its parts.
#[derive(Debug, Clone)]
pub struct SplitPlan {
    source: MemoryId,
    parts: Vec<MemoryRecord>,
}

impl Tool for SplitArgs {
    type Plan = SplitPlan;

    fn prepare(&self, mem: &EpisodeMemory, ctx: ToolContext<'_>) -> Result<Prepared<SplitPlan>, ToolError> {
        let a = self;
        let original = mem.get(a.id).ok_or(ToolError::MemoryNotFound { field: "memory_id".into(), id: a.id })?;
        let texts = match &a.parts {
            Some(p) => p.clone(),
            None => split_text(&original.text, a.criteria, a.max_parts, &known_speakers(mem, original))
                .map_err(|e| ToolError::FailedPrecondition { message: format!("cannot split {}: {e}", a.id) })?,
        };
        if texts.iter().any(|t| t.chars().count() > ctx.limits.max_text_chars) {
            return Err(ToolError::invalid("parts", format!("a part is over the limit of {} characters", ctx.limits.max_text_chars)));
        }
        require_room(mem, ctx.limits, 1, texts.len())?;
        let parts = texts
            .iter()
            .map(|t| MemoryRecord {
                id: MemoryId(0),
                text: t.clone(),
                source: "split".to_string(),
                created_step: ctx.step,
                authored: a.parts.is_some() || original.authored,
                ..original.clone()
            })
            .collect();
        Ok(Prepared { plan: SplitPlan { source: a.id, parts }, texts })
    }

    fn apply(mem: &mut EpisodeMemory, plan: SplitPlan, vectors: &[Vec<f32>], _ctx: ToolContext<'_>) -> ToolOutput {
        let SplitPlan { source, mut parts } = plan;
        let removed = mem.remove(source);
        debug_assert!(removed.is_some(), "prepare checked the id");
        for (p, v) in parts.iter_mut().zip(vectors) {
            p.id = mem.allocate_id();
            mem.insert(p.clone(), v);
        }
        let ids: Vec<MemoryId> = parts.iter().map(|p| p.id).collect();
        let lines: Vec<String> = parts.iter().map(|p| p.render_line(None)).collect();
        let text = format!("split {source} into {}:\n{}", join_ids(&ids), lines.join("\n"));
        ToolOutput { kind: OutputKind::Split { parts, removed: source }, text }
    }
}

/// Splits one memory into 2..=`max_parts` parts under `criteria`.
///
/// The text is cut into [`segments`] (duplicates dropped), which are then grouped:
/// - `Temporal`: a new group starts at each segment whose first time expression differs from
///   the current group's; segments before the first time expression join the first group.
///   Needs two distinct time expressions.
/// - `Thematic`: one group per segment, then the most similar adjacent pair (Jaccard overlap
///   of content words; a segment without content words counts as fully similar) is merged
///   while there are more than `max_parts` groups or the best similarity is >= 0.5.
/// - `Speaker`: each segment goes to the first of `speakers` it mentions (earliest position;
///   whole words, case-sensitive, else case-insensitive); segments naming nobody follow the
///   previous segment (the first named one at the start). One group per speaker, ordered by
///   first appearance. Needs two distinct speakers.
///
/// While more than `max_parts` groups remain, the adjacent pair with the smallest combined
/// length is merged. A part is its segments (in original order) joined by a space, with
/// terminal punctuation. Parts are non-empty and distinct.
///
/// # Errors
///
/// [`TextError::CannotSplit`] with the reason: "max_parts must be at least 2", "empty text;
/// nothing to split", "a single clause; nothing to split", "fewer than two time expressions",
/// "all clauses share one theme", "mentions fewer than two speakers", or (in theory) "the parts
/// would be identical".
pub fn split_text(text: &str, criteria: SplitCriteria, max_parts: usize, speakers: &[&str]) -> Result<Vec<String>, TextError> {
    if max_parts < 2 {
        return Err(cannot_split("max_parts must be at least 2"));
    }
    let mut seen = BTreeSet::new();
    let segs: Vec<String> = segments(text).into_iter().filter(|s| seen.insert(dedup_key(s))).collect();
    match segs.len() {
        0 => return Err(cannot_split("empty text; nothing to split")),
        1 => return Err(cannot_split("a single clause; nothing to split")),
        _ => {}
    }
    let mut groups = match criteria {
        SplitCriteria::Temporal => temporal_groups(&segs)?,
        SplitCriteria::Thematic => thematic_groups(&segs, max_parts)?,
        SplitCriteria::Speaker => speaker_groups(&segs, speakers)?,
    };
    let lens: Vec<usize> = segs.iter().map(|s| char_len(s)).collect();
    while groups.len() > max_parts {
        let glen = |g: &Vec<usize>| g.iter().map(|&i| lens[i] + 1).sum::<usize>();
        let mut best = 0usize;
        let mut best_len = usize::MAX;
        for k in 0..groups.len() - 1 {
            let l = glen(&groups[k]) + glen(&groups[k + 1]);
            if l < best_len {
                best = k;
                best_len = l;
            }
        }
        let next = groups.remove(best + 1);
        groups[best].extend(next);
        groups[best].sort_unstable();
    }
    let mut parts: Vec<String> = Vec::with_capacity(groups.len());
    for g in &groups {
        let part = ensure_terminal(&g.iter().map(|&i| segs[i].as_str()).collect::<Vec<_>>().join(" "));
        if !part.is_empty() && !parts.contains(&part) {
            parts.push(part);
        }
    }
    if parts.len() < 2 {
        return Err(cannot_split("the parts would be identical"));
    }
    Ok(parts)
}

fn temporal_groups(segs: &[String]) -> Result<Vec<Vec<usize>>, TextError> {
    let keys: Vec<Option<String>> = segs.iter().map(|s| time_expressions(s).into_iter().next()).collect();
    let distinct: BTreeSet<&str> = keys.iter().flatten().map(String::as_str).collect();
    if distinct.len() < 2 {
        return Err(cannot_split("fewer than two time expressions"));
    }
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut current: Option<&str> = None;
    for (i, key) in keys.iter().enumerate() {
        match (key.as_deref(), current) {
            (Some(k), None) => {
                current = Some(k);
                match groups.last_mut() {
                    Some(g) => g.push(i), // leading segments without a time expression
                    None => groups.push(vec![i]),
                }
            }
            (Some(k), Some(c)) if k != c => {
                current = Some(k);
                groups.push(vec![i]);
            }
            (Some(_), Some(_)) | (None, _) => match groups.last_mut() {
                Some(g) => g.push(i),
                None => groups.push(vec![i]),
            },
        }
    }
    Ok(groups)
}

/// Jaccard similarity as an exact fraction (intersection, union), compared by
/// cross-multiplication so no float rounding can change a decision. A set without content
/// words counts as fully similar (1/1): a "Yes." clause attaches to its neighbour.
fn jaccard_parts(a: &BTreeSet<String>, b: &BTreeSet<String>) -> (usize, usize) {
    if a.is_empty() || b.is_empty() {
        return (1, 1);
    }
    let inter = a.intersection(b).count();
    (inter, a.len() + b.len() - inter)
}

fn thematic_groups(segs: &[String], max_parts: usize) -> Result<Vec<Vec<usize>>, TextError> {
    let mut groups: Vec<(Vec<usize>, BTreeSet<String>)> = segs.iter().enumerate().map(|(i, s)| (vec![i], content_words(s))).collect();
    while groups.len() > 1 {
        let mut best = 0usize;
        let mut best_sim = (0usize, 1usize);
        for k in 0..groups.len() - 1 {
            let sim = jaccard_parts(&groups[k].1, &groups[k + 1].1);
            if k == 0 || sim.0 * best_sim.1 > best_sim.0 * sim.1 {
                best = k;
                best_sim = sim;
            }
        }
        let similar = 2 * best_sim.0 >= best_sim.1;
        if groups.len() <= max_parts && !similar {
            break;
        }
        let (idx, words) = groups.remove(best + 1);
        groups[best].0.extend(idx);
        groups[best].1.extend(words);
    }
    if groups.len() < 2 {
        return Err(cannot_split("all clauses share one theme"));
    }
    Ok(groups.into_iter().map(|(g, _)| g).collect())
}

/// Byte position of the first whole-word occurrence of `name` in `hay`.
fn find_word(hay: &str, name: &str) -> Option<usize> {
    hay.match_indices(name).map(|(p, _)| p).find(|&p| {
        let before = hay[..p].chars().next_back();
        let after = hay[p + name.len()..].chars().next();
        !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
    })
}

/// Index into `names` of the earliest mentioned name (longer first on a tie).
fn first_mention(seg: &str, names: &[&str]) -> Option<usize> {
    let pick = |hay: &str, case_fold: bool| {
        names
            .iter()
            .enumerate()
            .filter_map(|(i, n)| {
                let pos = if case_fold { find_word(hay, &lower(n)) } else { find_word(hay, n) };
                pos.map(|p| (p, std::cmp::Reverse(n.len()), i))
            })
            .min()
            .map(|(_, _, i)| i)
    };
    pick(seg, false).or_else(|| pick(&lower(seg), true))
}

fn speaker_groups(segs: &[String], speakers: &[&str]) -> Result<Vec<Vec<usize>>, TextError> {
    let mut names: Vec<&str> = Vec::new();
    for s in speakers.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        if !names.contains(&s) {
            names.push(s);
        }
    }
    let mentions: Vec<Option<usize>> = segs.iter().map(|s| first_mention(s, &names)).collect();
    let Some(first_named) = mentions.iter().flatten().next().copied() else {
        return Err(cannot_split("mentions fewer than two speakers"));
    };
    let mut order: Vec<usize> = Vec::new(); // speakers by first appearance
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut current = first_named;
    for (i, m) in mentions.iter().enumerate() {
        if let Some(s) = m {
            current = *s;
        }
        match order.iter().position(|&o| o == current) {
            Some(g) => groups[g].push(i),
            None => {
                order.push(current);
                groups.push(vec![i]);
            }
        }
    }
    if groups.len() < 2 {
        return Err(cannot_split("mentions fewer than two speakers"));
    }
    Ok(groups)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::fixtures::FACTS;
    use crate::text::words::{is_closer, is_terminator};

    fn words_of(s: &str) -> BTreeSet<String> {
        s.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(lower).collect()
    }

    fn cannot(reason: &str) -> Result<Vec<String>, TextError> {
        Err(TextError::CannotSplit { reason: reason.to_string() })
    }

    #[test]
    fn split_temporal() {
        let t = |s: &str, n: usize| split_text(s, SplitCriteria::Temporal, n, &[]);
        assert_eq!(
            t("Caroline went hiking last week and will go swimming tomorrow.", 5),
            Ok(vec!["Caroline went hiking last week.".to_string(), "Caroline will go swimming tomorrow.".to_string()])
        );
        assert_eq!(
            t(FACTS[10], 5),
            Ok(vec![
                "Jolene suggested meeting on Friday at 5.".to_string(),
                "Deborah couldn't make it on Wednesday, mentioning she needed to sort out books from a bookcase.".to_string()
            ])
        );
        // leading segment without a time joins the first group; same time continues a group
        assert_eq!(
            t("Jon loves dancing. He opened a studio in May 2023. It was busy in May 2023. He closed it in 2024.", 5),
            Ok(vec![
                "Jon loves dancing. He opened a studio in May 2023. It was busy in May 2023.".to_string(),
                "He closed it in 2024.".to_string()
            ])
        );
        assert_eq!(t(FACTS[7], 5), cannot("fewer than two time expressions"));
        assert_eq!(t("Caroline paints. Melanie swims.", 5), cannot("fewer than two time expressions"));
        assert_eq!(t(FACTS[3], 5), cannot("a single clause; nothing to split"));
        // more groups than max_parts: the shortest adjacent pair merges
        let parts = t("Jon danced on Monday. Gina sang on Tuesday. Jon rested on Wednesday.", 2).unwrap();
        assert_eq!(parts, vec!["Jon danced on Monday. Gina sang on Tuesday.", "Jon rested on Wednesday."]);
    }

    #[test]
    fn split_thematic() {
        let th = |s: &str, n: usize| split_text(s, SplitCriteria::Thematic, n, &[]);
        assert_eq!(
            th(FACTS[7], 5),
            Ok(vec!["Dave opened his own car shop last week.".to_string(), "Dave celebrated with friends.".to_string()])
        );
        assert_eq!(
            th("Melanie painted a lake sunrise. Melanie loves painting a lake sunrise. John plays basketball with his team.", 5),
            Ok(vec![
                "Melanie painted a lake sunrise. Melanie loves painting a lake sunrise.".to_string(),
                "John plays basketball with his team.".to_string()
            ])
        );
        assert_eq!(th("Jon dances salsa. Jon dances salsa well.", 5), cannot("all clauses share one theme"));
        let five = "Jon dances. Gina sings loudly. Maria volunteers often. John plays chess. Tim reads books.";
        for n in 2..=5 {
            let parts = th(five, n).unwrap();
            assert_eq!(parts.len(), n, "{parts:?}");
            assert_eq!(parts.join(" "), five);
        }
        assert_eq!(th("Hi", 3), cannot("a single clause; nothing to split"));
        assert_eq!(th("", 3), cannot("empty text; nothing to split"));
        assert_eq!(th(FACTS[7], 1), cannot("max_parts must be at least 2"));
    }

    #[test]
    fn split_speaker() {
        let sp = |s: &str, names: &[&str]| split_text(s, SplitCriteria::Speaker, 5, names);
        assert_eq!(
            sp("Caroline went to the support group. Melanie took her kids camping. She loved it.", &["Caroline", "Melanie"]),
            Ok(vec!["Caroline went to the support group.".to_string(), "Melanie took her kids camping. She loved it.".to_string()])
        );
        // unnamed lead joins the first named segment; later segments of a speaker rejoin them
        assert_eq!(
            sp("It was a sunny day. Caroline painted. Melanie swam. Then caroline rested.", &["Melanie", "Caroline"]),
            Ok(vec!["It was a sunny day. Caroline painted. Then caroline rested.".to_string(), "Melanie swam.".to_string()])
        );
        assert_eq!(
            sp("John is open to reading George R. R. Martin's books after Tim recommended them.", &["John", "Tim"]),
            Ok(vec!["John is open to reading George R. R. Martin's books.".to_string(), "Tim recommended them.".to_string()])
        );
        // whole words only: "Jonathan" is not "Jon"
        assert_eq!(sp("Jonathan dances. Gina sings.", &["Jon", "Gina"]), cannot("mentions fewer than two speakers"));
        assert_eq!(sp(FACTS[7], &["Dave", "Calvin"]), cannot("mentions fewer than two speakers"));
        assert_eq!(sp("Caroline paints. Melanie swims.", &[]), cannot("mentions fewer than two speakers"));
        assert_eq!(sp("Caroline paints. Melanie swims.", &["", " "]), cannot("mentions fewer than two speakers"));
    }

    #[test]
    fn split_parts_properties_on_locomo_facts() {
        let text = FACTS.join(" ");
        let original = words_of(&text);
        for criteria in [SplitCriteria::Temporal, SplitCriteria::Thematic, SplitCriteria::Speaker] {
            for max_parts in 2..=5 {
                let names = ["Caroline", "Melanie", "Dave", "Joanna", "James", "Jolene", "Deborah", "Maria", "Calvin"];
                let Ok(parts) = split_text(&text, criteria, max_parts, &names) else {
                    panic!("{criteria:?} should split the joined facts");
                };
                assert!((2..=max_parts).contains(&parts.len()), "{criteria:?} {max_parts}: {}", parts.len());
                let distinct: BTreeSet<&String> = parts.iter().collect();
                assert_eq!(distinct.len(), parts.len());
                for p in &parts {
                    assert!(!p.trim().is_empty());
                    assert!(p.trim_end_matches(is_closer).ends_with(is_terminator), "{p:?}");
                    // every word of a part comes from the original (prefixed subjects included)
                    assert!(words_of(p).is_subset(&original), "{p:?}");
                }
            }
        }
        for f in FACTS {
            for criteria in [SplitCriteria::Temporal, SplitCriteria::Thematic, SplitCriteria::Speaker] {
                if let Ok(parts) = split_text(f, criteria, 5, &["Caroline", "Melanie", "Deborah", "Jolene", "John", "Tim"]) {
                    assert!(parts.len() >= 2);
                    assert!(parts.iter().all(|p| words_of(p).is_subset(&words_of(f))), "{parts:?}");
                }
            }
        }
    }
}
