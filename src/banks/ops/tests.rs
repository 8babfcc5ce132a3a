//! The operation reader: both vocabularies, leniency rules, errors naming index and field, and proptests
//! that it never panics.

use super::*;
use proptest::prelude::*;
use serde_json::json;

fn ok(text: &str) -> Vec<Op> {
    parse_batch(text, &OpLimits::default()).unwrap().into_iter().map(|r| r.unwrap().op).collect()
}
fn add(text: &str) -> Op {
    Op::Add { text: text.into(), confidence: None, domain: None }
}
fn modify(id: u64, text: &str) -> Op {
    Op::Modify { id, text: text.into(), confidence: None, domain: None }
}
fn merge(ids: &[u64], text: &str) -> Op {
    Op::Merge { ids: ids.to_vec(), text: text.into(), confidence: None, domain: None }
}
fn one(value: Value) -> Result<Parsed, OpError> {
    parse_op(3, &value, &OpLimits::default())
}

const SEED: &str = r#"[{"option":"add","experience":"When solving..."},{"option":"modify","experience":"Updated...","modified_from":"G17"},{"option":"delete","delete_id":"G5"},{"option":"merge","experience":"Merged...","merged_from":["G1","G3"]}]"#;

#[test]
fn seed_vocabulary() {
    let want = vec![add("When solving..."), modify(17, "Updated..."), Op::Delete { id: 5 }, merge(&[1, 3], "Merged...")];
    assert_eq!(ok(SEED), want);
    assert_eq!(ok(r#"[{"option":"keep"}]"#), vec![Op::Keep]);
    assert_eq!(want.iter().map(Op::kind).collect::<Vec<_>>(), ["add", "modify", "delete", "merge"]);
}

#[test]
fn upstream_vocabulary_and_mixed() {
    let text = r#"[{"operation":"ADD","content":"x"},{"operation":"UPDATE","id":"G3","content":"y"},{"operation":"DELETE","id":"G5","content":null},{"operation":"NONE"}]"#;
    let parsed: Vec<Parsed> = parse_batch(text, &OpLimits::default()).unwrap().into_iter().map(Result::unwrap).collect();
    assert_eq!(parsed.iter().map(|p| p.op.clone()).collect::<Vec<_>>(), vec![add("x"), modify(3, "y"), Op::Delete { id: 5 }, Op::Keep]);
    assert!(parsed.iter().all(|p| p.ignored_keys.is_empty()));
    let mixed =
        r#"[{"operation":"ADD","content":"x"},{"option":"delete","delete_id":"G5"},{"option":"update","id":"g2","experience":"z"}]"#;
    assert_eq!(ok(mixed), vec![add("x"), Op::Delete { id: 5 }, modify(2, "z")]);
}

#[test]
fn messy_replies() {
    let want = vec![add("a [b] ]"), Op::Delete { id: 5 }];
    let array = r#"[{"option":"add","experience":"a [b] ]"},{"option":"delete","delete_id":"G5"}]"#;
    for text in [
        format!("Here are my edits:\n```json\n{array}\n```\nThese keep the library small."),
        format!("```\n{array}\n```"),
        format!("Sure! ```JSON{array}``` done"),
        format!("{array}\n\nI removed G5 because it [was] wrong."),
        format!("Edits [draft]: {array} (end)"),
        format!(r#"{{"operations": {array}, "reason": "x"}}"#),
        format!(r#"Result: {{"updates": {array}}} ok"#),
        format!("```json\nnot json```\n```\n\"a string\"\n```\nthen {array}"),
    ] {
        assert_eq!(ok(&text), want, "{text}");
    }
    assert_eq!(ok(r#"{"ops": {"option":"keep"}}"#), vec![Op::Keep]);
    assert_eq!(ok(r#"{"operation":"ADD","content":"x"}"#), vec![add("x")]);
    // A single operation in prose: its enclosing object wins over its `merged_from` array.
    assert_eq!(
        ok(r#"I propose {"option":"merge","merged_from":["G1","G3"],"experience":"m \"}\""} now."#),
        vec![merge(&[1, 3], "m \"}\"")]
    );
    assert_eq!(ok("[]"), vec![]);
}

#[test]
fn names_ids_and_aliases() {
    assert_eq!(ok(r#"[{"content":"x"},{"experience":"  y  ","reason":"r"}]"#), vec![add("x"), add("y")]);
    assert_eq!(
        ok(r#"[{"option":"Add","experience":"x"},{"operation":" update ","modified_from":" G12 ","content":"y"}]"#),
        vec![add("x"), modify(12, "y")]
    );
    assert_eq!(
        ok(r#"[{"option":"REMOVE","id":12},{"option":"remove","id":"12"},{"option":"delete","delete_id":"g12","id":"G12"}]"#),
        vec![Op::Delete { id: 12 }; 3]
    );
    assert_eq!(
        ok(r#"[{"option":"merge","ids":[1,"g2"," G3 "],"content":"m"},{"option":"None","id":"junk"}]"#),
        vec![merge(&[1, 2, 3], "m"), Op::Keep]
    );
    assert_eq!(ok(r#"[{"option":"add","operation":"ADD","experience":"x","content":"x"}]"#), vec![add("x")]);
    for (value, id) in [(json!("G12"), 12), (json!("g12"), 12), (json!(" G12 "), 12), (json!(12), 12), (json!("12"), 12), (json!("G0"), 0)]
    {
        assert_eq!(parse_id(&value), Ok(id));
    }
    let bad: Vec<Value> = serde_json::from_str(r#"["G", "H12", "G-1", -1, 1.5, null, "G99999999999999999999999", "G1 G2", [1]]"#).unwrap();
    for bad in bad.into_iter().chain([json!("x".repeat(500))]) {
        let message = parse_id(&bad).unwrap_err();
        assert!(message.contains("\"G12\"") && message.len() < 300, "{message}");
    }
    assert_eq!(show_id(12), "G12");
}

#[test]
fn extensions_and_ignored_keys() {
    let p =
        one(json!({"option":"merge","merged_from":["G1","G2"],"experience":"m","confidence":0.5,"domain":" math ","reason":"r","id":"G9"}))
            .unwrap();
    assert_eq!(p.op, Op::Merge { ids: vec![1, 2], text: "m".into(), confidence: Some(0.5), domain: Some("math".into()) });
    assert_eq!(p.ignored_keys, ["id", "reason"]);
    let p = one(json!({"operation":"UPDATE","id":"G1","content":"t","confidence":1,"domain":null})).unwrap();
    assert_eq!(p.op, Op::Modify { id: 1, text: "t".into(), confidence: Some(1.0), domain: None });
    assert!(p.ignored_keys.is_empty());
    let p = one(json!({"option":"keep","experience":"x","id":"garbage","confidence":7,"domain":null})).unwrap();
    assert_eq!((p.op, p.ignored_keys), (Op::Keep, vec!["confidence".to_string(), "experience".into(), "id".into()]));
    assert_eq!(one(json!({"option":"delete","id":"G1","experience":"x"})).unwrap().ignored_keys, ["experience"]);
}

#[test]
fn op_errors_name_index_and_field() {
    let long = "x".repeat(4001);
    let cases = [
        (json!("add"), "", "must be a JSON object, got a string"),
        (json!({"option":"rewrite","experience":"x"}), "option", "unknown operation \"rewrite\", expected one of add"),
        (json!({"operation":5}), "operation", "must be a string"),
        (json!({"option":"add","operation":"DELETE","experience":"x"}), "operation", "conflicts"),
        (json!({"reason":"x"}), "option", "missing"),
        (json!({"option":"add"}), "experience", "missing"),
        (json!({"operation":"ADD"}), "content", "missing"),
        (json!({"option":"add","experience":"   "}), "experience", "must not be empty"),
        (json!({"option":"add","content":long}), "content", "is 4001 characters long, over the limit of 4000"),
        (json!({"option":"add","experience":"a\u{7}b"}), "experience", "U+0007 (a control character) at character 1"),
        (json!({"option":"add","experience":["x"]}), "experience", "must be a string, got an array"),
        (json!({"option":"add","experience":"a","content":"b"}), "content", "differs"),
        (json!({"option":"modify","experience":"x"}), "modified_from", "missing"),
        (json!({"operation":"UPDATE","content":"x"}), "id", "missing"),
        (json!({"option":"modify","modified_from":"X1","experience":"x"}), "modified_from", "like \"G12\""),
        (json!({"option":"modify","modified_from":"G1","id":"G2","experience":"x"}), "id", "G2 conflicts"),
        (json!({"operation":"DELETE","content":"x"}), "id", "missing"),
        (json!({"option":"delete","delete_id":true}), "delete_id", "got a boolean"),
        (json!({"option":"merge","experience":"x"}), "merged_from", "missing"),
        (json!({"option":"merge","merged_from":"G1,G2","experience":"x"}), "merged_from", "must be an array"),
        (json!({"option":"merge","merged_from":["G1"],"experience":"x"}), "merged_from", "at least 2 distinct"),
        (json!({"option":"merge","ids":["G1","g1"],"experience":"x"}), "ids", "G1 appears more than once"),
        (json!({"option":"merge","merged_from":["G1","x"],"experience":"x"}), "merged_from[1]", "got \"x\""),
        (json!({"option":"merge","merged_from":(0..33).collect::<Vec<_>>(),"experience":"x"}), "merged_from", "33 ids, at most 32"),
        (json!({"option":"merge","merged_from":["G1","G2"],"ids":["G1"],"experience":"x"}), "ids", "conflicts"),
        (json!({"option":"add","experience":"x","confidence":1.5}), "confidence", "in [0, 1], got 1.5"),
        (json!({"option":"add","experience":"x","confidence":"high"}), "confidence", "got a string"),
        (json!({"option":"add","experience":"x","domain":""}), "domain", "must not be empty"),
        (json!({"option":"add","experience":"x","domain":"d".repeat(65)}), "domain", "over the limit of 64"),
        (json!({"option":"add","experience":"x","domain":"a\nb"}), "domain", "U+000A (a line break or tab in a one-line field)"),
        (json!({"option":"add","experience":"x\u{202e}y"}), "experience", "U+202E (a bidi override/isolate) at character 1"),
        (json!({"option":"add","experience":"x\u{2028}y"}), "experience", "U+2028"),
        (json!({"option":"add","experience":"x","domain":7}), "domain", "must be a string"),
    ];
    for (value, field, fragment) in cases {
        let e = one(value.clone()).unwrap_err();
        assert_eq!((e.index, e.field.as_str()), (3, field), "{value}: {e}");
        assert!(e.message.contains(fragment) && e.to_string().len() < 400, "{value}: {e}");
    }
    let e = one(json!("add")).unwrap_err();
    assert_eq!(e.to_string(), "operations[3]: must be a JSON object, got a string");
    let e = one(json!({"option":"add"})).unwrap_err();
    assert!(e.to_string().starts_with("operations[3].experience: missing"), "{e}");
    // A bad operation does not stop the others.
    let results = parse_batch(r#"[{"option":"add"},{"option":"keep"}]"#, &OpLimits::default()).unwrap();
    assert!(results[0].is_err() && results[1] == Ok(Parsed { op: Op::Keep, ignored_keys: vec![] }));
}

#[test]
fn batch_errors() {
    let limits = OpLimits::default();
    assert!(matches!(parse_batch("", &limits), Err(BatchError::NotJson { .. })));
    let e = parse_batch(&format!("I have no edits {}", "z".repeat(10_000)), &limits).unwrap_err();
    assert!(matches!(e, BatchError::NotJson { .. }) && e.to_string().starts_with("operations: ") && e.to_string().len() < 600, "{e}");
    assert_eq!(parse_batch("\"add\"", &limits), Err(BatchError::NotABatch { found: "a string" }));
    assert_eq!(parse_batch("{\"operations\": 5}", &limits), Err(BatchError::NotABatch { found: "a number" }));
    let many = format!("[{}]", vec!["{\"option\":\"keep\"}"; 1001].join(","));
    let e = parse_batch(&many, &limits).unwrap_err();
    assert_eq!(e, BatchError::TooMany { count: 1001, max: 1000 });
    assert_eq!(e.to_string(), "operations: 1001 operations in one batch, at most 1000 allowed");
}

fn small_limits() -> OpLimits {
    OpLimits { max_ops: 20, max_text_chars: 12, max_merge_ids: 4 }
}

fn check_limits(results: &[Result<Parsed, OpError>], limits: &OpLimits) {
    assert!(results.len() <= limits.max_ops);
    for r in results.iter().flatten() {
        let (text, confidence) = match &r.op {
            Op::Add { text, confidence, .. } | Op::Modify { text, confidence, .. } => (text, confidence),
            Op::Merge { ids, text, confidence, .. } => {
                assert!(ids.len() >= 2 && ids.len() <= limits.max_merge_ids && ids.iter().collect::<HashSet<_>>().len() == ids.len());
                (text, confidence)
            }
            Op::Delete { .. } | Op::Keep => continue,
        };
        assert!(!text.is_empty() && text.trim() == text && text.chars().count() <= limits.max_text_chars);
        assert!(confidence.is_none_or(|c| (0.0..=1.0).contains(&c)));
    }
}

/// Arbitrary JSON, and batches of valid operations with one field replaced or added, so every kind and error path is reached.
fn json_value() -> impl Strategy<Value = Value> {
    let keys = "option operation experience content id ids merged_from modified_from delete_id confidence domain reason";
    let keys = prop::sample::select(keys.split(' ').map(String::from).collect::<Vec<_>>());
    let words = "add Modify ~UPDATE~ delete remove merge keep NONE rewrite G1 g2 ~3~ 4 G1 ~ x\u{1} a~[b]~] abcdefghijklmn";
    let leaf = prop_oneof![
        prop::sample::select(words.split(' ').map(|w| Value::from(w.replace('~', " "))).collect::<Vec<_>>()),
        "[a-z {}\\[\\]\"]{0,16}".prop_map(Value::from),
        prop::sample::select(
            "0 1 2 0.5 -1 1.5 1e300 null true".split(' ').map(|v| serde_json::from_str(v).unwrap()).collect::<Vec<Value>>()
        ),
    ];
    let op_keys = keys.clone();
    let any = crate::util::json::strategies::tree(leaf.clone().boxed(), keys.boxed(), 3, 24);
    let op = (valid_op(), prop::option::of((op_keys, prop_oneof![leaf.clone(), prop::collection::vec(leaf, 0..6).prop_map(Value::from)])))
        .prop_map(|(op, field)| {
            let mut value = to_seed_json(&op);
            if let (Some((key, field)), Some(map)) = (field, value.as_object_mut()) {
                map.insert(key, field);
            }
            value
        })
        .boxed();
    prop_oneof![
        prop::collection::vec(op.clone(), 0..8).prop_map(Value::from),
        prop::collection::vec(op, 0..3).prop_map(|ops| json!({ "operations": ops })),
        any,
    ]
}

/// Short valid operations (some longer than [`small_limits`] allow).
fn valid_op() -> impl Strategy<Value = Op> {
    let text = "[a-zA-Z0-9]([a-zA-Z0-9 \n\t\\[\\]{}\"é]{0,14}[a-z])?";
    let confidence = prop::option::of(0.0..=1.0f64);
    let domain = prop::option::of("[a-z][a-z ]{0,20}[a-z]");
    let id = 0..6u64;
    prop_oneof![
        (text, confidence.clone(), domain.clone()).prop_map(|(text, confidence, domain)| Op::Add { text, confidence, domain }),
        (id.clone(), text, confidence.clone(), domain.clone()).prop_map(|(id, text, confidence, domain)| Op::Modify {
            id,
            text,
            confidence,
            domain
        }),
        id.clone().prop_map(|id| Op::Delete { id }),
        (prop::collection::hash_set(id, 2..6), text, confidence, domain).prop_map(|(ids, text, confidence, domain)| Op::Merge {
            ids: ids.into_iter().collect(),
            text,
            confidence,
            domain
        }),
        Just(Op::Keep),
    ]
}

/// `op` in the Training-Free GRPO design's vocabulary rewritten with the aliases, upstream names and messy spellings `bits` choose.
fn aliased(op: &Op, bits: u8) -> Value {
    let mut map = to_seed_json(op).as_object().cloned().unwrap_or_default();
    let renames = [
        (1, "option", "operation"),
        (2, "experience", "content"),
        (4, "modified_from", "id"),
        (4, "delete_id", "id"),
        (4, "merged_from", "ids"),
    ];
    for (bit, from, to) in renames {
        if let Some(value) = (bits & bit != 0).then(|| map.remove(from)).flatten() {
            map.insert(to.into(), value);
        }
    }
    if let Some(name) = map.get_mut("operation") {
        let upstream = [("add", "ADD"), ("modify", " Update"), ("delete", "REMOVE "), ("keep", "NONE"), ("merge", "Merge")];
        *name = upstream.iter().find(|(seed, _)| *seed == op.kind()).map(|(_, name)| *name).into();
    }
    let id_keys = ["modified_from", "delete_id", "merged_from", "id", "ids"];
    for (_, value) in map.iter_mut().filter(|(key, _)| bits & 8 != 0 && id_keys.contains(&key.as_str())) {
        *value = match value.as_array() {
            Some(ids) => ids.iter().map(|id| json!(parse_id(id).unwrap())).collect(),
            None => json!(format!(" g{} ", parse_id(value).unwrap())),
        };
    }
    if bits & 16 != 0 {
        map.insert("reason".into(), "because".into());
    }
    if bits & 32 != 0 && op.kind() == "add" {
        map.retain(|key, _| key != "option" && key != "operation");
    }
    Value::Object(map)
}

proptest! {
    #[test]
    fn arbitrary_text_never_panics(text in any::<String>(), messy in "[\\[\\]{}\"\\\\:,`a-z0-9 \n]{0,200}") {
        for t in [&text, &messy] {
            if let Ok(results) = parse_batch(t, &small_limits()) {
                check_limits(&results, &small_limits());
            }
        }
    }

    #[test]
    fn arbitrary_json_respects_limits(value in json_value(), prose in prop::bool::ANY) {
        let text = if prose { format!("Edits:\n```json\n{value}\n```\nDone.") } else { value.to_string() };
        if let Ok(results) = parse_batch(&text, &small_limits()) {
            check_limits(&results, &small_limits());
        }
    }

    #[test]
    fn seed_json_round_trips(op in valid_op()) {
        let value = to_seed_json(&op);
        prop_assert_eq!(parse_op(0, &value, &OpLimits::default()), Ok(Parsed { op, ignored_keys: vec![] }));
    }

    #[test]
    fn aliases_parse_to_the_same_op(op in valid_op(), bits in any::<u8>()) {
        let ignored_keys = if bits & 16 != 0 { vec!["reason".to_string()] } else { vec![] };
        prop_assert_eq!(parse_op(0, &aliased(&op, bits), &OpLimits::default()), Ok(Parsed { op, ignored_keys }));
    }
}

#[test]
fn an_array_cut_off_is_refused_as_a_batch_and_its_complete_leading_ops_can_be_read() {
    let limits = OpLimits::default();
    let cut = r#"Here are the updates: [{"option": "add", "experience": "Check units."}, {"option": "add", "experience": "Reread the ques"#;
    assert_eq!(parse_batch(cut, &limits), Err(BatchError::Truncated { complete: 1 }), "never the first object alone, silently");
    let leading = parse_leading(cut, &limits).expect("an unterminated array");
    assert_eq!(leading.len(), 1);
    assert!(matches!(&leading[0], Ok(Parsed { op: Op::Add { .. }, .. })));
    for (text, complete) in [
        (r#"[{"option":"keep"},"#, 1),
        (r#"[ {"option":"keep"} , {"option":"keep"}"#, 2),
        (r#"[{"option":"add","experience":"a \"]\" b"}, {"#, 1),
        (r#"[{"opt"#, 0),
    ] {
        assert_eq!(parse_batch(text, &limits), Err(BatchError::Truncated { complete }), "{text}");
    }
    // Not a cut array: prose with a bracket, a closed array, an object alone.
    assert!(parse_leading(r#"I think [this] is fine: {"option":"keep"}"#, &limits).is_none());
    assert_eq!(parse_batch(r#"see [1 {"option":"keep"}"#, &limits).map(|r| r.len()), Ok(1), "a '[' not before an object is prose");
    assert!(parse_leading(r#"[{"option":"keep"}]"#, &limits).is_none());
}
