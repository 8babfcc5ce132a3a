use proptest::prelude::*;
use serde_json::json;

use super::*;

fn one(p: &Parsed) -> &Call {
    assert_eq!(p.calls.len(), 1, "{p:?}");
    &p.calls[0]
}

#[test]
fn a_tagged_canonical_call_is_strict_and_keeps_its_arguments_as_written() {
    let p = from_text(
        "I will search.\n<tool_call>\n{\"name\": \"search_memory\", \"arguments\": {\"query\": \"Paris\", \"top_k\": 5}}\n</tool_call>",
    );
    let c = one(&p);
    assert_eq!((c.mode, c.name.as_str(), c.arguments.as_str()), (Mode::Strict, "search_memory", r#"{"query":"Paris","top_k":5}"#));
    // Repeated keys reach the server, which refuses them by name.
    let p = from_text(r#"<tool_call>{"name": "manage_memory", "arguments": {"content": "a", "content": "b"}}</tool_call>"#);
    assert_eq!(one(&p).arguments, r#"{"content":"a","content":"b"}"#);
}

#[test]
fn other_shapes_are_lenient() {
    let cases = [
        // bare JSON, no tags
        r#"{"name": "search_memory", "arguments": {"query": "x"}}"#,
        // fenced
        "Here:\n```json\n{\"name\": \"search_memory\", \"arguments\": {\"query\": \"x\"}}\n```",
        // parameters instead of arguments, inside tags
        r#"<tool_call>{"name": "search_memory", "parameters": {"query": "x"}}</tool_call>"#,
        // arguments as a string
        r#"<tool_call>{"name": "search_memory", "arguments": "{\"query\": \"x\"}"}</tool_call>"#,
        // nested function object
        r#"{"type": "function", "function": {"name": "search_memory", "arguments": {"query": "x"}}}"#,
        // unclosed tag at the end
        "<tool_call>\n{\"name\": \"search_memory\", \"arguments\": {\"query\": \"x\"}}",
        // a fence inside the tags
        "<tool_call>\n```json\n{\"name\": \"search_memory\", \"arguments\": {\"query\": \"x\"}}\n```\n</tool_call>",
    ];
    for text in cases {
        let p = from_text(text);
        let c = one(&p);
        assert_eq!((c.mode, c.name.as_str(), c.arguments.as_str()), (Mode::Lenient, "search_memory", r#"{"query":"x"}"#), "{text}");
    }
}

#[test]
fn several_objects_at_once_are_each_a_call() {
    let text = "```json\n{\"name\": \"delete_memory\", \"arguments\": {\"memory_id\": \"m0001\"}}\n{\"name\": \"delete_memory\", \"arguments\": {\"memory_id\": \"m0002\"}}\n```";
    let p = from_text(text);
    assert_eq!(p.calls.len(), 2);
    assert!(p.calls.iter().all(|c| c.mode == Mode::Lenient));
    let p = from_text(r#"<tool_call>[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}]</tool_call>"#);
    assert_eq!(p.calls.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["a", "b"]);
    let two_tags =
        "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\n<tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>";
    assert!(from_text(two_tags).calls.iter().all(|c| c.mode == Mode::Strict));
}

#[test]
fn unreadable_attempts_are_invalid_and_say_why() {
    let p = from_text(r#"<tool_call>{"name": "search_memory", "arguments": {"query": "x"</tool_call>"#);
    let c = one(&p);
    assert_eq!(c.mode, Mode::Invalid);
    assert!(c.error.as_deref().unwrap().contains("not JSON"), "{c:?}");
    let c = one(&from_text(r#"<tool_call>{"arguments": {"query": "x"}}</tool_call>"#)).clone();
    assert_eq!(c.mode, Mode::Invalid);
    assert!(c.error.unwrap().contains("no tool name"));
    let c = one(&from_text(r#"<tool_call>{"name": "search_memory", "arguments": [1, 2]}</tool_call>"#)).clone();
    assert_eq!((c.mode, c.name.as_str()), (Mode::Invalid, "search_memory"));
    let c = one(&from_text("```json\n{\"name\": \"search_memory\", \"arguments\": {\"query\": \"x\"\n```")).clone();
    assert_eq!(c.mode, Mode::Invalid);
    assert_eq!(one(&from_text("<tool_call></tool_call>")).mode, Mode::Invalid);
}

#[test]
fn prose_and_json_that_names_no_tool_are_no_call() {
    for text in [
        "The memory is ready.",
        r#"Memory {"id": "m0001"} looks right."#,
        "```\nm0001: Paris\n```",
        "",
        "{",
        r#"She is {"name": "Caroline", "age": 30}."#,
        "```json\n{\"name\": \"Caroline\"}\n```",
    ] {
        assert!(from_text(text).calls.is_empty(), "{text}");
    }
}

#[test]
fn openai_tool_calls_are_strict_and_text_calls_at_best_lenient() {
    let m = json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "search_memory", "arguments": "{\"query\": \"x\"}"}},
        {"id": "call_2", "type": "function", "function": {"name": "delete_memory", "arguments": "{\"memory_id\": "}},
        {"id": "call_3", "type": "function", "function": {"name": "sample_memory", "arguments": {"k": 3}}},
        {"id": "call_4", "type": "function", "function": {"arguments": "{}"}}
    ]});
    let p = from_message(&m);
    let modes: Vec<Mode> = p.calls.iter().map(|c| c.mode).collect();
    assert_eq!(modes, [Mode::Strict, Mode::Invalid, Mode::Lenient, Mode::Invalid]);
    assert_eq!(p.calls[0].id.as_deref(), Some("call_1"));
    assert_eq!(p.calls[0].arguments, r#"{"query":"x"}"#);
    assert!(p.calls[1].error.as_deref().unwrap().contains("not a JSON object"));
    let text_only = json!({"role": "assistant", "content": "<tool_call>{\"name\": \"search_memory\", \"arguments\": {}}</tool_call>"});
    assert_eq!(one(&from_message(&text_only)).mode, Mode::Lenient, "the server parsed nothing: our reading is lenient");
    assert!(from_message(&json!({"role": "assistant", "content": "done"})).calls.is_empty());
}

#[test]
fn at_most_max_calls_are_read() {
    let text: String = (0..MAX_CALLS + 3).map(|i| format!("<tool_call>{{\"name\": \"t{i}\", \"arguments\": {{}}}}</tool_call>")).collect();
    let p = from_text(&text);
    assert_eq!((p.calls.len(), p.dropped), (MAX_CALLS, 3));
}

fn name() -> impl Strategy<Value = String> {
    "[a-z_]{1,16}"
}

fn args() -> impl Strategy<Value = serde_json::Map<String, serde_json::Value>> {
    proptest::collection::btree_map(
        "[a-z_]{1,8}",
        prop_oneof![any::<i32>().prop_map(|n| json!(n)), "[ -_a-~]{0,12}".prop_map(|s| json!(s)), any::<bool>().prop_map(|b| json!(b))],
        0..4,
    )
    .prop_map(|m| m.into_iter().collect())
}

proptest! {
    /// Whatever a model writes, the parser returns (it never panics), and every call it reads either
    /// names a tool with an object (or empty) as arguments, or is invalid with a reason.
    #[test]
    fn never_panics_and_every_call_is_well_formed(text in "(?s).{0,300}", tagged in "[{}\\[\\]\":, a-z<>/_`\n]{0,120}") {
        for t in [text.as_str(), tagged.as_str(), &format!("<tool_call>{tagged}</tool_call>"), &format!("```json\n{tagged}")] {
            let p = from_text(t);
            prop_assert!(p.calls.len() <= MAX_CALLS);
            for c in &p.calls {
                match c.mode {
                    Mode::Invalid => prop_assert!(c.error.is_some()),
                    Mode::Strict | Mode::Lenient => {
                        prop_assert!(!c.name.trim().is_empty());
                        prop_assert!(c.arguments.is_empty() || serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&c.arguments).is_ok());
                    }
                }
            }
        }
    }

    /// The canonical form reads back strict with the same name and arguments; the same object fenced or
    /// bare reads back lenient, unchanged.
    #[test]
    fn a_rendered_call_reads_back(n in name(), a in args(), prose in "[A-Za-z .]{0,40}") {
        let object = json!({"name": n, "arguments": a});
        let expected_args = serde_json::to_string(&serde_json::Value::Object(a.clone())).unwrap();
        let strict = from_text(&format!("{prose}\n<tool_call>\n{object}\n</tool_call>"));
        prop_assert_eq!(strict.calls.len(), 1);
        prop_assert_eq!(strict.calls[0].mode, Mode::Strict);
        prop_assert_eq!(&strict.calls[0].name, &n);
        prop_assert_eq!(&strict.calls[0].arguments, &expected_args);
        for text in [format!("{prose}\n```json\n{object}\n```"), format!("{prose} {object}")] {
            let p = from_text(&text);
            prop_assert_eq!(p.calls.len(), 1);
            prop_assert_eq!(p.calls[0].mode, Mode::Lenient);
            prop_assert_eq!(&p.calls[0].arguments, &expected_args);
        }
    }
}

#[test]
fn a_bare_call_that_is_not_json_is_one_invalid_attempt() {
    for text in [
        "{'name': 'search_memory', 'arguments': {'query': 'x'}}",
        r#"{"name": "search_memory", "arguments": {"query": "x",}}"#,
        r#"Sure: {"name": "manage_memory", "arguments": {"operation": "create", "content": "Caroline went to"#,
    ] {
        let p = from_text(text);
        assert_eq!(p.calls.len(), 1, "{text}");
        assert_eq!(p.calls[0].mode, Mode::Invalid, "{text}");
    }
    // An unknown tool with arguments is a call (the environment refuses it, and the model sees why).
    let c = one(&from_text(r#"{"name": "update_memory", "arguments": {"memory_id": "m0042"}}"#)).clone();
    assert_eq!((c.mode, c.name.as_str()), (Mode::Lenient, "update_memory"));
    // Trailing text after the object inside the tags: read, but not strict.
    assert_eq!(one(&from_text(r#"<tool_call>{"name": "a", "arguments": {}} and more</tool_call>"#)).mode, Mode::Lenient);
}
