//! Fuzz-style properties (issue 12) over everything that reads client input before the episode layer:
//! `CallTool`'s JSON parser with arbitrary tool names, bytes and JSON values, and every `TryFrom`
//! conversion of a typed request with arbitrary field values, huge strings included. None panics,
//! every refusal names a field, and every message stays under [`MAX_MESSAGE`] bytes (grpcio refuses
//! trailers over 16 KiB, and a client should see the real error).

use proptest::prelude::*;
use serde_json::Value;
use tonic::Status;

use super::*;
use crate::tools::{llm_calls, ToolCall, ToolLimits, TOOL_NAMES};

/// The bound on any refusal's message.
const MAX_MESSAGE: usize = 1024;

/// Argument names the six tools know, so generated objects reach the validation behind the parser.
const KEYS: [&str; 16] = [
    "query",
    "top_k",
    "threshold",
    "memory_type",
    "speaker",
    "session",
    "operation",
    "content",
    "memory_id",
    "memory_ids",
    "reason",
    "k",
    "strategy",
    "split_criteria",
    "max_parts",
    "parts",
];

/// Short text, text with control and bidi characters, or a 10,000-60,000 character run.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => any::<String>(),
        2 => "[mM]?[0-9]{0,12}",
        1 => "[a-z_ ]{0,20}",
        1 => (10_000usize..60_000, any::<char>()).prop_map(|(n, c)| c.to_string().repeat(n)),
        1 => (5_000usize..20_000).prop_map(|n| "\u{202e}\u{0}\u{1b}[31m".repeat(n)),
    ]
}

fn tool_name() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => proptest::sample::select(TOOL_NAMES.to_vec()).prop_map(str::to_string),
        1 => proptest::sample::select(TOOL_NAMES.to_vec()).prop_map(|t| format!(" {} ", t.to_uppercase())),
        1 => text(),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        (-10i64..60).prop_map(|i| Value::from(i as f64)),
        text().prop_map(Value::String),
        proptest::sample::select(vec!["create", "update", "RANDOM", "Diverse", "speaker", "summarize", "episodic", "m0001", "m0002"])
            .prop_map(Value::from),
    ];
    crate::util::json::strategies::tree(leaf.boxed(), key().boxed(), 3, 24)
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![3 => proptest::sample::select(KEYS.to_vec()).prop_map(str::to_string), 1 => text()]
}

/// A refusal's message is short and names `field` (when given).
fn check_message(message: &str, field: Option<&str>) -> Result<(), TestCaseError> {
    prop_assert!(message.len() < MAX_MESSAGE, "{} bytes: {}", message.len(), &message[..message.len().min(300)]);
    prop_assert!(message.starts_with("invalid argument "), "{message}");
    if let Some(f) = field {
        prop_assert!(!f.is_empty() && message.contains(f), "{f}: {message}");
    }
    Ok(())
}

fn check_tool_error(e: &ToolError) -> Result<(), TestCaseError> {
    match e {
        ToolError::InvalidArgument(crate::util::invalid::Invalid { field, .. }) => check_message(&e.to_string(), Some(field)),
        other @ (ToolError::MemoryNotFound { .. } | ToolError::FailedPrecondition { .. } | ToolError::ResourceExhausted { .. }) => {
            Err(TestCaseError::fail(format!("a parser refusal must be InvalidArgument, got {other:?}")))
        }
    }
}

fn check_status(s: &Status) -> Result<(), TestCaseError> {
    prop_assert_eq!(s.code(), tonic::Code::InvalidArgument);
    check_message(s.message(), None)
}

/// Validates converted typed arguments the way the service does and checks any refusal.
fn check_typed<Raw>(
    r: Result<Typed<Raw>, Status>,
    validate: impl FnOnce(Raw, &ToolLimits) -> Result<ToolCall, ToolError>,
) -> Result<(), TestCaseError> {
    match r {
        Err(s) => {
            check_status(&s)?;
            prop_assert!(s.message().contains("episode_id"), "{}", s.message());
        }
        Ok(Typed { raw, .. }) => {
            if let Err(e) = raw.and_then(|raw| validate(raw, &ToolLimits::default())) {
                check_tool_error(&e)?;
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn json_parser_over_arbitrary_bytes(name in tool_name(), bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let args = String::from_utf8_lossy(&bytes);
        if let Err(e) = llm_calls::parse_call(&name, &args, &ToolLimits::default()) {
            check_tool_error(&e)?;
        }
    }

    #[test]
    fn json_parser_over_arbitrary_json(name in tool_name(), v in json_value()) {
        if let Err(e) = llm_calls::parse_call(&name, &v.to_string(), &ToolLimits::default()) {
            check_tool_error(&e)?;
        }
    }

    #[test]
    fn json_parser_over_known_keys(
        name in proptest::sample::select(TOOL_NAMES.to_vec()),
        kv in proptest::collection::vec((key(), json_value()), 0..8),
        repeat in any::<bool>(),
    ) {
        // Members written out by hand so that repeated keys reach the parser.
        let mut members: Vec<String> = kv.iter().map(|(k, v)| format!("{}:{v}", Value::from(k.as_str()))).collect();
        if repeat && !members.is_empty() {
            members.push(members[0].clone());
        }
        let args = format!("{{{}}}", members.join(","));
        match llm_calls::parse_call(name, &args, &ToolLimits::default()) {
            Err(e) => check_tool_error(&e)?,
            Ok(_) => prop_assert!(!repeat || members.is_empty(), "a repeated key was accepted: {args}"),
        }
    }

    #[test]
    fn typed_search(id in text(), query in text(), top_k in any::<Option<u32>>(), threshold in any::<Option<f32>>(),
                    memory_type in any::<i32>(), speaker in text(), session in any::<Option<u32>>()) {
        let r = pb::SearchRequest { episode_id: id, query, top_k, threshold, memory_type, speaker, session };
        check_typed(Typed::try_from(r), |raw: RawSearch, l| raw.validate(l).map(ToolCall::Search))?;
    }

    #[test]
    fn typed_manage(id in text(), operation in any::<i32>(), content in text(), memory_id in text(), memory_type in -2i32..5,
                    speaker in text(), source in text()) {
        let r = pb::ManageRequest { episode_id: id, operation, content, memory_id, memory_type, speaker, source };
        check_typed(Typed::try_from(r), |raw: RawManage, l| raw.validate(l).map(ToolCall::Manage))?;
    }

    #[test]
    fn typed_delete(id in text(), memory_ids in proptest::collection::vec(text(), 0..4), reason in text()) {
        let r = pb::DeleteRequest { episode_id: id, memory_ids, reason };
        check_typed(Typed::try_from(r), |raw: RawDelete, l| raw.validate(l).map(ToolCall::Delete))?;
    }

    #[test]
    fn typed_sample(id in text(), k in any::<Option<u32>>(), strategy in any::<i32>(), memory_type in any::<i32>()) {
        let r = pb::SampleRequest { episode_id: id, k, strategy, memory_type };
        check_typed(Typed::try_from(r), |raw: RawSample, _l| raw.validate().map(ToolCall::Sample))?;
    }

    #[test]
    fn typed_merge(id in text(), memory_ids in proptest::collection::vec(text(), 0..7), strategy in -1i32..5,
                   content in proptest::option::of(text())) {
        let r = pb::MergeRequest { episode_id: id, memory_ids, strategy, content };
        check_typed(Typed::try_from(r), |raw: RawMerge, l| raw.validate(l).map(ToolCall::Merge))?;
    }

    #[test]
    fn typed_split(id in text(), memory_id in text(), split_criteria in any::<i32>(), max_parts in any::<Option<u32>>(),
                   parts in proptest::collection::vec(text(), 0..7)) {
        let r = pb::SplitRequest { episode_id: id, memory_id, split_criteria, max_parts, parts };
        check_typed(Typed::try_from(r), |raw: RawSplit, l| raw.validate(l).map(ToolCall::Split))?;
    }

    #[test]
    fn create_episode(episode_id in text(), conversation_id in text(), question_id in text(), custom in any::<bool>(),
                      memory_type in any::<i32>(), text_ in text(), evaluator in any::<i32>(), max_steps in any::<Option<u32>>()) {
        let custom = custom.then(|| pb::CustomEpisode {
            memories: vec![pb::NewMemory { text: text_.clone(), memory_type, speaker: text_.clone(), ..Default::default() }],
            question: text_.clone(),
            answer: text_,
            evidence: Vec::new(),
        });
        let r = pb::CreateEpisodeRequest {
            episode_id, conversation_id, question_id, custom, seed: None, max_steps, include_adversarial: false, evaluator,
        };
        if let Err(s) = CreateRequest::try_from(r) {
            check_status(&s)?;
        }
    }

    #[test]
    fn page_tokens_and_enums(token in text(), size in any::<u32>(), split in any::<i32>()) {
        let key = crate::api::grpc::page::listing_key(crate::api::grpc::page::Rpc::Memories, &["ep"]);
        let page = crate::api::grpc::page::decode(crate::api::grpc::page::Rpc::Memories, key, &token).map(drop);
        for r in [page, page_size(size, 50, 500).map(drop), split_in(split).map(drop)] {
            if let Err(s) = r {
                check_status(&s)?;
            }
        }
    }
}
