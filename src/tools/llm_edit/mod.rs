//! LLM-written text for `merge_memory` and `split_memory` (server flag `--llm-edit`), as pure steps
//! around the one LLM call the episode layer makes:
//!
//! 1. [`edit_request`]: does this call want LLM text, and with which request? Only a merge with the
//!    `summarize` or `extract_common` strategy and no `content`, or a split with no `parts`, whose ids
//!    name live memories (a call that will be refused anyway costs no LLM request).
//! 2. [`with_llm_text`]: the reply, checked by [`prompts`] (non-empty, within the length limit,
//!    a merge shorter than its sources together, 2..=max_parts parts), becomes the call's `content` / `parts`; the call then goes through the normal
//!    prepare → embed → apply path, so provenance (evidence union, speaker, session, date) and every
//!    other check are exactly those of a caller-supplied text.
//! 3. When the reply is unusable or the endpoint fails, the call runs with the offline strategy
//!    unchanged and the tool text says so ([`fallback_note`]).

pub mod prompts;

use crate::llm::ChatRequest;
use crate::memory::EpisodeMemory;
use prompts::{merge_request, parse_merge, parse_split, sources_chars, split_request};

use super::args::id_strings;
use super::{MergeArgs, RawMerge, RawSplit, SplitArgs, ToolCall, ToolLimits};

/// What the reply must become.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EditKind {
    /// One merged text, shorter than the sources together (`sources_chars` characters).
    Merge {
        /// Length of the sources, as the prompt shows them.
        sources_chars: usize,
    },
    /// 2..=max_parts texts.
    Split,
}

/// The LLM request for `call`, or `None` when the call does not use LLM text (other tools, explicit
/// `content`/`parts`, the `concatenate` strategy, or ids that do not name live memories).
pub fn edit_request(mem: &EpisodeMemory, call: &ToolCall, limits: &ToolLimits) -> Option<(ChatRequest, EditKind)> {
    match call {
        ToolCall::Merge(MergeArgs { ids, strategy, content: None }) => {
            let texts: Vec<&str> = ids.iter().map(|id| mem.get(*id).map(|r| r.text.as_str())).collect::<Option<_>>()?;
            let kind = EditKind::Merge { sources_chars: sources_chars(&texts) };
            merge_request(&texts, *strategy, limits.max_text_chars).map(|r| (r, kind))
        }
        ToolCall::Split(SplitArgs { id, criteria, max_parts, parts: None }) => {
            let original = mem.get(*id)?;
            let speakers = super::split::known_speakers(mem, original);
            Some((split_request(&original.text, *criteria, *max_parts, limits.max_text_chars, &speakers), EditKind::Split))
        }
        ToolCall::Merge(_) | ToolCall::Split(_) | ToolCall::Search(_) | ToolCall::Manage(_) | ToolCall::Delete(_) | ToolCall::Sample(_) => {
            None
        }
    }
}

/// `call` with the LLM's text as its `content` (merge) or `parts` (split), or why the reply is unusable.
pub fn with_llm_text(call: &ToolCall, kind: EditKind, reply: &str, limits: &ToolLimits) -> Result<ToolCall, String> {
    match (call, kind) {
        (ToolCall::Merge(a), EditKind::Merge { sources_chars }) => {
            let text = parse_merge(reply, limits.max_text_chars, sources_chars)?;
            // Through `validate`, as any call's arguments: the model's text meets the caller's rules.
            let raw = RawMerge { memory_ids: Some(id_strings(&a.ids)), strategy: Some(a.strategy), content: Some(text) };
            Ok(ToolCall::Merge(raw.validate(limits).map_err(|e| e.to_string())?))
        }
        (ToolCall::Split(a), EditKind::Split) => {
            let parts = parse_split(reply, a.max_parts, limits.max_text_chars)?;
            let raw = RawSplit {
                memory_id: Some(a.id.to_string()),
                split_criteria: Some(a.criteria),
                max_parts: Some(a.max_parts as i64),
                parts: Some(parts),
            };
            Ok(ToolCall::Split(raw.validate(limits).map_err(|e| e.to_string())?))
        }
        (
            ToolCall::Merge(_) | ToolCall::Split(_) | ToolCall::Search(_) | ToolCall::Manage(_) | ToolCall::Delete(_) | ToolCall::Sample(_),
            _,
        ) => Err(format!("{} does not take LLM text", call.name())),
    }
}

/// The note appended to the tool text when the LLM text was used.
pub fn llm_note(model: &str) -> String {
    format!("note: text written by the LLM ({model})")
}

/// The note appended to the tool text when the call fell back to the offline strategy.
pub fn fallback_note(call: &ToolCall, reason: &str) -> String {
    let strategy = match call {
        ToolCall::Merge(a) => format!("offline {} strategy", a.strategy.as_str()),
        ToolCall::Split(a) => format!("offline {} split", a.criteria.as_str()),
        ToolCall::Search(_) | ToolCall::Manage(_) | ToolCall::Delete(_) | ToolCall::Sample(_) => "offline tool".to_string(),
    };
    format!("note: {reason}; used the {strategy} instead")
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::memory::{BaseMemory, IndexConfig, MemoryId, MemoryRecord, MemoryType};
    use crate::tools::{llm_calls, MergeStrategy};

    fn memory() -> EpisodeMemory {
        let rec = |i: u32, text: &str, speaker: &str| MemoryRecord {
            id: MemoryId(i),
            text: text.into(),
            memory_type: MemoryType::Episodic,
            speaker: Some(speaker.into()),
            session: Some(1),
            session_date: Some("8 May 2023".into()),
            evidence: vec![format!("D1:{i}")],
            source: "locomo".into(),
            created_step: 0,
            authored: false,
        };
        let records = vec![
            rec(0, "Caroline went to an LGBTQ support group on 7 May 2023.", "Caroline"),
            rec(1, "Caroline found the support group very powerful.", "Caroline"),
            rec(2, "Melanie painted a sunset and ran a charity race last week.", "Melanie"),
        ];
        let dim = 4;
        let vectors: Vec<f32> = (0..records.len() * dim).map(|i| if i % dim == 0 { 1.0 } else { 0.0 }).collect();
        EpisodeMemory::new(Arc::new(BaseMemory::build("t".into(), records, vectors, dim, IndexConfig::default())))
    }

    fn call(name: &str, args: &str) -> ToolCall {
        llm_calls::parse_call(name, args, &ToolLimits::default()).unwrap()
    }

    #[test]
    fn only_calls_without_text_of_their_own_ask_the_llm() {
        let mem = memory();
        let limits = ToolLimits::default();
        let (req, kind) =
            edit_request(&mem, &call("merge_memory", r#"{"memory_ids": ["m0000", "m0001"], "strategy": "summarize"}"#), &limits).unwrap();
        assert_eq!(kind, EditKind::Merge { sources_chars: 54 + 47 }, "the two sources' lengths");
        let user = &req.messages[1].content;
        assert!(user.contains("1. Caroline went to an LGBTQ support group on 7 May 2023.") && user.contains("2. Caroline found"), "{user}");
        let (req, kind) =
            edit_request(&mem, &call("split_memory", r#"{"memory_id": "m0002", "split_criteria": "thematic"}"#), &limits).unwrap();
        assert_eq!(kind, EditKind::Split);
        assert!(req.messages[1].content.contains("Melanie painted a sunset"));
        for (name, args) in [
            ("merge_memory", r#"{"memory_ids": ["m0000", "m0001"], "strategy": "concatenate"}"#),
            ("merge_memory", r#"{"memory_ids": ["m0000", "m0001"], "strategy": "summarize", "content": "mine"}"#),
            ("merge_memory", r#"{"memory_ids": ["m0000", "m0099"], "strategy": "summarize"}"#),
            ("split_memory", r#"{"memory_id": "m0002", "split_criteria": "temporal", "parts": ["a", "b"]}"#),
            ("split_memory", r#"{"memory_id": "m0099", "split_criteria": "temporal"}"#),
            ("delete_memory", r#"{"memory_id": "m0000"}"#),
        ] {
            assert!(edit_request(&mem, &call(name, args), &limits).is_none(), "{name} {args}");
        }
    }

    #[test]
    fn usable_replies_become_the_calls_text_and_unusable_ones_say_why() {
        let limits = ToolLimits::default();
        let merge = call("merge_memory", r#"{"memory_ids": ["m0000", "m0001"], "strategy": "extract_common"}"#);
        let ToolCall::Merge(m) =
            with_llm_text(&merge, EditKind::Merge { sources_chars: 1000 }, "Merged memory: Caroline went to a support group.", &limits)
                .unwrap()
        else {
            panic!()
        };
        assert_eq!((m.content.as_deref(), m.strategy), (Some("Caroline went to a support group."), MergeStrategy::ExtractCommon));
        assert!(with_llm_text(&merge, EditKind::Merge { sources_chars: 1000 }, "   ", &limits).unwrap_err().contains("empty"));

        let split = call("split_memory", r#"{"memory_id": "m0002", "split_criteria": "temporal", "max_parts": 2}"#);
        let ToolCall::Split(s) =
            with_llm_text(&split, EditKind::Split, r#"["Melanie painted a sunset.", "Melanie ran a race."]"#, &limits).unwrap()
        else {
            panic!()
        };
        assert_eq!(s.parts.unwrap().len(), 2);
        assert!(with_llm_text(&split, EditKind::Split, r#"["a.", "b.", "c."]"#, &limits).unwrap_err().contains("over the limit"));
        assert!(with_llm_text(&split, EditKind::Merge { sources_chars: 1000 }, "x", &limits).is_err());
        assert_eq!(
            fallback_note(&split, "the model found nothing to split"),
            "note: the model found nothing to split; used the offline temporal split instead"
        );
        assert_eq!(fallback_note(&merge, "x"), "note: x; used the offline extract_common strategy instead");
    }
}
