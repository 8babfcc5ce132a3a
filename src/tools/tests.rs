//! Tool semantics on a small real memory, and a property test: random call sequences against a naive
//! model of which ids are live.
#![allow(clippy::wildcard_enum_match_arm)]

use std::collections::BTreeSet;
use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::embed::{EmbedService, HashEmbedder};
use crate::memory::{IndexConfig, MemoryType};

const FACTS: [(&str, &str, u32, &str); 6] = [
    ("Caroline attended an LGBTQ support group on 7 May 2023 and found it inspiring.", "Caroline", 1, "D1:3"),
    ("Melanie paints sunsets by the lake with her kids.", "Melanie", 1, "D1:8"),
    ("Caroline is researching adoption agencies because she wants to be a mother.", "Caroline", 2, "D2:4"),
    ("Melanie ran a charity race for mental health last Saturday.", "Melanie", 2, "D2:9"),
    ("Caroline gave a speech at a school about her transgender journey.", "Caroline", 3, "D3:1"),
    ("Melanie's kids love pottery, and Melanie signed them up for a class in July 2023.", "Melanie", 3, "D3:5"),
];

fn embedder() -> EmbedService {
    EmbedService::new(Arc::new(HashEmbedder::default()), 1)
}

fn memory() -> EpisodeMemory {
    let records = FACTS
        .iter()
        .enumerate()
        .map(|(i, (t, s, sess, d))| MemoryRecord {
            id: MemoryId(i as u32),
            text: t.to_string(),
            memory_type: MemoryType::Episodic,
            speaker: Some(s.to_string()),
            session: Some(*sess),
            session_date: Some(format!("day {sess}")),
            evidence: vec![d.to_string()],
            source: "conversation_observations".into(),
            created_step: 0,
            authored: false,
        })
        .collect();
    let base = crate::episode::build_base(&embedder(), "t".into(), records, &IndexConfig::default()).unwrap();
    EpisodeMemory::new(Arc::new(base))
}

fn run(mem: &mut EpisodeMemory, call: ToolCall, step: u32) -> Result<ToolOutput, ToolError> {
    let limits = ToolLimits::default();
    run_in(mem, &call, ToolContext { step, seed: 7, limits: &limits })
}

fn run_in(mem: &mut EpisodeMemory, call: &ToolCall, ctx: ToolContext<'_>) -> Result<ToolOutput, ToolError> {
    call.run_blocking(mem, ctx, |texts| {
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        embedder().embed_blocking(&refs).unwrap()
    })
}

fn call(name: &str, args: &str) -> ToolCall {
    llm_calls::parse_call(name, args, &ToolLimits::default()).unwrap()
}

#[test]
fn search_leads_with_ids_and_filters() {
    let mut m = memory();
    let out = run(&mut m, call("search_memory", r#"{"query": "adoption agencies", "top_k": 2}"#), 1).unwrap();
    assert!(out.text.starts_with("[m0002 "), "{}", out.text);
    assert!(out.text.contains("(D2:4)"));
    let out = run(&mut m, call("search_memory", r#"{"query": "kids", "speaker": "melanie", "session": 3}"#), 2).unwrap();
    let OutputKind::Search { hits, .. } = &out.kind else { panic!() };
    assert_eq!(hits.iter().map(|h| h.1.id).collect::<Vec<_>>(), vec![MemoryId(5)]);
    let out = run(&mut m, call("search_memory", r#"{"query": "adoption", "threshold": 1.0}"#), 3).unwrap();
    assert!(out.text.starts_with("no memories matched") && super::matched_nothing(&out.text), "{}", out.text);
}

#[test]
fn manage_create_and_update_keep_provenance() {
    let mut m = memory();
    let out =
        run(&mut m, call("manage_memory", r#"{"operation": "create", "content": "Caroline wants to adopt.", "speaker": "Caroline"}"#), 1)
            .unwrap();
    let OutputKind::Created(r) = out.kind else { panic!() };
    assert_eq!((r.id, r.memory_type, r.source.as_str(), r.created_step), (MemoryId(6), MemoryType::Semantic, "agent", 1));
    assert!(out.text.starts_with("created [m0006]"));
    let out = run(
        &mut m,
        call("manage_memory", r#"{"operation": "update", "memory_id": "m0002", "content": "Caroline researches adoption agencies."}"#),
        2,
    )
    .unwrap();
    let OutputKind::Updated(u) = out.kind else { panic!() };
    assert_eq!(
        (u.id, u.evidence.clone(), u.session, u.speaker.as_deref()),
        (MemoryId(2), vec!["D2:4".to_string()], Some(2), Some("Caroline"))
    );
    assert_eq!(m.get(MemoryId(2)).unwrap().text, "Caroline researches adoption agencies.");
    let err = run(&mut m, call("manage_memory", r#"{"operation": "update", "memory_id": "m0099", "content": "x"}"#), 3).unwrap_err();
    assert!(matches!(err, ToolError::MemoryNotFound { id: MemoryId(99), .. }));
    assert!(m.get(MemoryId(99)).is_none(), "no silent upsert");
}

#[test]
fn delete_is_all_or_nothing() {
    let mut m = memory();
    let err = run(&mut m, call("delete_memory", r#"{"memory_ids": ["m0001", "m0042"]}"#), 1).unwrap_err();
    assert!(matches!(err, ToolError::MemoryNotFound { id: MemoryId(42), .. }));
    assert_eq!(m.len(), 6);
    let out = run(&mut m, call("delete_memory", r#"{"memory_ids": ["m0001", "m0003"]}"#), 1).unwrap();
    assert_eq!(out.text, "deleted m0001, m0003 (4 memories left)");
    assert!(m.get(MemoryId(1)).is_none());
    let err = run(&mut m, call("delete_memory", r#"{"memory_id": "m0001"}"#), 2).unwrap_err();
    assert!(matches!(err, ToolError::MemoryNotFound { .. }));
}

#[test]
fn sample_strategies() {
    let mut m = memory();
    let ids = |o: ToolOutput| match o.kind {
        OutputKind::Sampled(rs) => rs.iter().map(|r| r.id).collect::<Vec<_>>(),
        _ => panic!(),
    };
    let a = ids(run(&mut m.clone(), call("sample_memory", r#"{"k": 3}"#), 4).unwrap());
    let b = ids(run(&mut m.clone(), call("sample_memory", r#"{"k": 3}"#), 4).unwrap());
    assert_eq!(a, b, "random is replayable");
    assert_eq!(a.iter().collect::<BTreeSet<_>>().len(), 3);
    let d = ids(run(&mut m.clone(), call("sample_memory", r#"{"k": 6, "strategy": "diverse"}"#), 1).unwrap());
    assert_eq!(d.iter().collect::<BTreeSet<_>>().len(), 6, "diverse picks distinct memories");
    run(&mut m, call("manage_memory", r#"{"operation": "create", "content": "newest fact"}"#), 1).unwrap();
    let r = ids(run(&mut m, call("sample_memory", r#"{"k": 2, "strategy": "recent"}"#), 2).unwrap());
    assert_eq!(r, vec![MemoryId(6), MemoryId(5)]);
    let all = ids(run(&mut m, call("sample_memory", r#"{"k": 50, "memory_type": "semantic"}"#), 3).unwrap());
    assert_eq!(all, vec![MemoryId(6)]);
}

#[test]
fn merge_unions_provenance() {
    let mut m = memory();
    let out = run(&mut m, call("merge_memory", r#"{"memory_ids": ["m0002", "m0000"], "strategy": "concatenate"}"#), 1).unwrap();
    let OutputKind::Merged { memory: r, removed } = out.kind else { panic!() };
    assert_eq!(removed, vec![MemoryId(2), MemoryId(0)]);
    assert_eq!(r.evidence, vec!["D1:3".to_string(), "D2:4".to_string()]);
    assert_eq!((r.speaker.as_deref(), r.session, r.source.as_str()), (Some("Caroline"), None, "merge"));
    assert!(r.text.contains("support group") && r.text.contains("adoption"));
    assert!(m.get(MemoryId(0)).is_none() && m.get(MemoryId(2)).is_none());
    assert_eq!(m.len(), 5);
    let out = run(
        &mut m,
        call("merge_memory", r#"{"memory_ids": ["m0001", "m0003"], "strategy": "summarize", "content": "Melanie paints and runs."}"#),
        2,
    )
    .unwrap();
    let OutputKind::Merged { memory: r, .. } = out.kind else { panic!() };
    assert_eq!((r.text.as_str(), r.speaker.as_deref()), ("Melanie paints and runs.", Some("Melanie")));
}

#[test]
fn split_carries_provenance_or_explains() {
    let mut m = memory();
    let out = run(&mut m, call("split_memory", r#"{"memory_id": "m0005", "split_criteria": "thematic", "parts": ["Melanie's kids love pottery.", "Melanie signed them up for a class in July 2023."]}"#), 1).unwrap();
    let OutputKind::Split { parts, removed } = out.kind else { panic!() };
    assert_eq!(removed, MemoryId(5));
    assert_eq!(parts.len(), 2);
    assert!(parts.iter().all(|p| p.evidence == vec!["D3:5".to_string()] && p.session == Some(3) && p.source == "split"));
    assert_eq!(m.len(), 7);
    let err = run(&mut m, call("split_memory", r#"{"memory_id": "m0001", "split_criteria": "speaker"}"#), 2).unwrap_err();
    assert!(matches!(err, ToolError::FailedPrecondition { .. }), "{err:?}");
    assert_eq!(m.len(), 7);
}

#[derive(Debug, Clone)]
enum Op {
    Create,
    Update(usize),
    Delete(usize),
    Merge(usize, usize),
    Split(usize),
    Search,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        Just(Op::Create),
        (0usize..40).prop_map(Op::Update),
        (0usize..40).prop_map(Op::Delete),
        (0usize..40, 0usize..40).prop_map(|(a, b)| Op::Merge(a, b)),
        (0usize..40).prop_map(Op::Split),
        Just(Op::Search),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever the sequence, the live ids equal a naive model's, ids are never reused, a refused call
    /// changes nothing, and the character count stays exact.
    #[test]
    fn random_sequences_match_a_model(ops in prop::collection::vec(op(), 1..25)) {
        let mut m = memory();
        let mut live: BTreeSet<u32> = (0..6).collect();
        let mut issued: BTreeSet<u32> = (0..6).collect();
        for (step, op) in ops.into_iter().enumerate() {
            let pick = |i: usize| format!("m{:04}", i % 12);
            let c = match &op {
                Op::Create => call("manage_memory", r#"{"operation": "create", "content": "A new fact on 3 June 2023, and another about pottery."}"#),
                Op::Update(i) => call("manage_memory", &format!(r#"{{"operation": "update", "memory_id": "{}", "content": "rewritten"}}"#, pick(*i))),
                Op::Delete(i) => call("delete_memory", &format!(r#"{{"memory_id": "{}"}}"#, pick(*i))),
                Op::Merge(a, b) if a % 12 != b % 12 => call("merge_memory", &format!(r#"{{"memory_ids": ["{}", "{}"], "strategy": "concatenate"}}"#, pick(*a), pick(*b))),
                Op::Merge(..) | Op::Search => call("search_memory", r#"{"query": "pottery"}"#),
                Op::Split(i) => call("split_memory", &format!(r#"{{"memory_id": "{}", "split_criteria": "temporal"}}"#, pick(*i))),
            };
            let before: Vec<MemoryRecord> = m.iter().map(|(r, _)| r.clone()).collect();
            match run(&mut m, c, step as u32 + 1) {
                Ok(out) => match out.kind {
                    OutputKind::Created(r) => { prop_assert!(issued.insert(r.id.0)); live.insert(r.id.0); }
                    OutputKind::Updated(r) => prop_assert!(live.contains(&r.id.0)),
                    OutputKind::Deleted { ids, .. } => for id in ids { prop_assert!(live.remove(&id.0)); },
                    OutputKind::Merged { memory, removed } => {
                        for id in removed { prop_assert!(live.remove(&id.0)); }
                        prop_assert!(issued.insert(memory.id.0)); live.insert(memory.id.0);
                    }
                    OutputKind::Split { parts, removed } => {
                        prop_assert!(live.remove(&removed.0));
                        for p in parts { prop_assert!(issued.insert(p.id.0)); live.insert(p.id.0); }
                    }
                    OutputKind::Search { hits, .. } => for h in hits { prop_assert!(live.contains(&h.1.id.0)); },
                    OutputKind::Sampled(_) => {}
                },
                Err(_) => {
                    let after: Vec<MemoryRecord> = m.iter().map(|(r, _)| r.clone()).collect();
                    prop_assert_eq!(before, after, "a refused call changed the memory");
                }
            }
            let ids: BTreeSet<u32> = m.iter().map(|(r, _)| r.id.0).collect();
            prop_assert_eq!(&ids, &live);
            prop_assert_eq!(m.len(), live.len());
            prop_assert_eq!(m.total_chars(), m.iter().map(|(r, _)| r.char_len()).sum::<usize>());
        }
    }
}

#[test]
fn the_memory_cap_refuses_growth_but_not_shrinking() {
    let mut m = memory();
    let limits = ToolLimits { max_memories: 7, ..ToolLimits::default() };
    let ctx = ToolContext { step: 1, seed: 0, limits: &limits };
    let create = call("manage_memory", r#"{"operation": "create", "content": "one more"}"#);
    run_in(&mut m, &create, ctx).unwrap();
    assert_eq!(m.len(), 7);
    assert!(matches!(run_in(&mut m, &create, ctx).unwrap_err(), ToolError::ResourceExhausted { .. }));
    let split = call("split_memory", r#"{"memory_id": "m0000", "split_criteria": "thematic", "parts": ["a b c", "d e f"]}"#);
    assert!(matches!(run_in(&mut m, &split, ctx).unwrap_err(), ToolError::ResourceExhausted { .. }));
    // Merging shrinks the memory, so it is allowed at the cap.
    let merge = call("merge_memory", r#"{"memory_ids": ["m0001", "m0003"], "strategy": "concatenate"}"#);
    assert!(run_in(&mut m, &merge, ctx).is_ok());
}

/// The offline merge and split strategies together with the `text` functions they are built on.
mod offline_strategies {
    use crate::text::{content_words, has_time_expression, segments, sentences};
    use crate::tools::{merge_texts, split_text, MergeStrategy, SplitCriteria, TextError};

    #[test]
    fn errors_display() {
        assert_eq!(TextError::NothingInCommon.to_string(), "the memories have no content words in common");
        assert_eq!(
            TextError::CannotSplit { reason: "a single clause; nothing to split".into() }.to_string(),
            "a single clause; nothing to split"
        );
        let e: Box<dyn std::error::Error> = Box::new(TextError::NothingInCommon);
        assert!(!e.to_string().is_empty());
    }

    /// Tiny deterministic generator (xorshift) for robustness inputs; std only.
    fn xorshift(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn never_panics_on_odd_input() {
        const PIECES: &[&str] = &[
            "Caroline",
            "and",
            "but",
            "after",
            "because",
            ",",
            ";",
            ".",
            "!",
            "?",
            "…",
            "...",
            " ",
            "\n",
            "\r\n",
            "Mr.",
            "e.g.",
            "U.S.",
            "3.5",
            "May",
            "7",
            "2023",
            "last",
            "week",
            "ago",
            "found",
            "finds",
            "the",
            "her",
            "é",
            "Zoë",
            "東京",
            "。",
            "🎉",
            "\"",
            "“",
            "”",
            "(",
            ")",
            "'s",
            "’s",
            "-",
            "—",
            "\u{200b}",
            "İ",
            "ß",
            "ﬁ",
            "\t",
            "1.",
            "- ",
            "5/7/2023",
            "3pm",
            "and found",
            "Melanie's kids",
        ];
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..3000 {
            let n = (xorshift(&mut state) % 24) as usize;
            let mut text = String::new();
            for _ in 0..n {
                text.push_str(PIECES[(xorshift(&mut state) % PIECES.len() as u64) as usize]);
                if xorshift(&mut state).is_multiple_of(2) {
                    text.push(' ');
                }
            }
            let _ = sentences(&text);
            let segs = segments(&text);
            assert!(segs.iter().all(|s| !s.is_empty()));
            let _ = has_time_expression(&text);
            let _ = content_words(&text);
            let srcs = [text.as_str(), "Caroline went hiking last week.", ""];
            for st in [MergeStrategy::Concatenate, MergeStrategy::Summarize, MergeStrategy::ExtractCommon] {
                if let Ok(m) = merge_texts(&srcs, st) {
                    assert!(st != MergeStrategy::Summarize || !m.is_empty());
                }
            }
            for c in [SplitCriteria::Temporal, SplitCriteria::Thematic, SplitCriteria::Speaker] {
                for max_parts in [0, 1, 2, 5] {
                    if let Ok(parts) = split_text(&text, c, max_parts, &["Caroline", "Zoë", "東京"]) {
                        assert!((2..=max_parts).contains(&parts.len()));
                        assert!(parts.iter().all(|p| !p.is_empty()));
                    }
                }
            }
        }
    }
}
