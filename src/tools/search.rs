//! search_memory: ranked semantic search with scores, optional threshold and metadata filters.
//! Results always show memory ids (MemUpdate's search hid them, which made update and delete unusable).

use crate::memory::EpisodeMemory;

use super::{OutputKind, Plan, Prepared, SearchArgs, ToolOutput};

pub(super) fn prepare(a: &SearchArgs) -> Prepared {
    Prepared { texts: vec![a.query.clone()], plan: Plan::Search(a.clone()) }
}

pub(super) fn apply(mem: &EpisodeMemory, a: &SearchArgs, query: &[f32]) -> ToolOutput {
    let (hits, path) = mem.search_text(query, &a.query, a.top_k, &a.filter, a.threshold);
    let text = if hits.is_empty() {
        let why = match a.threshold {
            Some(t) => format!(" at or above {t:.2}"),
            None => String::new(),
        };
        format!("no memories matched{why} ({} in memory)", mem.len())
    } else {
        hits.iter().map(|h| h.record.render_line(Some(h.score))).collect::<Vec<_>>().join("\n")
    };
    let hits = hits.into_iter().map(|h| (h.score, h.record.clone())).collect();
    ToolOutput { kind: OutputKind::Search { hits, path }, text }
}
