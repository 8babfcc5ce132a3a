//! The tools as an LLM sees them: the six OpenAI function schemas in order (verl-compatible: each
//! property has only `type`, `description` and `enum`), the dispatch of an LLM's call by tool name, and
//! the reading of JSON argument values ([`Args`]). Each tool's own schema, the names it reads and its
//! canonical form live in the tool's file.
//!
//! Parsing is strict where a call would be ambiguous and lenient where LLM output is merely untidy
//! (the book's "Tool arguments"): the arguments must be one JSON object with distinct keys (`""` is `{}`),
//! every value must have the schema's type (integers may be written `5` or `5.0`), enum values ignore
//! case and surrounding spaces, unknown argument names are refused, and `null` means unset. Every error
//! names the argument and quotes at most a prefix of a bad value ([`crate::util::excerpt`]). The parsed values
//! go through the same validation as the typed RPCs.

use std::str::FromStr;

use serde_json::{json, Map, Value};

use crate::memory::MemoryType;
use crate::util::excerpt::{name, quoted};
use crate::util::json::{kind_of, Json};

use super::args::{by_name, ToolLimits};
use super::{delete, manage, merge, sample, search, split, ToolCall, ToolError, TOOL_NAMES};

pub(super) const TYPES: [&str; 3] = ["episodic", "semantic", "procedural"];

pub(super) fn prop(ty: &str, description: &str) -> Value {
    json!({"type": ty, "description": description})
}

pub(super) fn prop_enum(description: &str, values: &[&str]) -> Value {
    json!({"type": "string", "description": description, "enum": values})
}

pub(super) fn function(name: &str, description: &str, properties: Value, required: &[&str]) -> Value {
    json!({"type": "function", "function": {"name": name, "description": description,
        "parameters": {"type": "object", "properties": properties, "required": required}}})
}

/// The six tools' OpenAI function schemas, in [`TOOL_NAMES`] order.
pub fn tool_schemas() -> Vec<Value> {
    // Every word here is in every prompt (about 1,000 Qwen2.5 tokens for the six): keep them short.
    vec![search::schema(), manage::schema(), delete::schema(), sample::schema(), merge::schema(), split::schema()]
}

/// Reads one tool's arguments into its validated call.
type Reader = fn(&mut Args, &ToolLimits) -> Result<ToolCall, ToolError>;

/// Each tool's argument reader, in [`TOOL_NAMES`] order.
const READERS: [Reader; 6] = [
    |a, l| search::from_json(a, l).map(ToolCall::Search),
    |a, l| manage::from_json(a, l).map(ToolCall::Manage),
    |a, l| delete::from_json(a, l).map(ToolCall::Delete),
    |a, _| sample::from_json(a).map(ToolCall::Sample),
    |a, l| merge::from_json(a, l).map(ToolCall::Merge),
    |a, l| split::from_json(a, l).map(ToolCall::Split),
];

/// Parses `arguments_json` for `tool_name` into a validated call.
pub fn parse_call(tool_name: &str, arguments_json: &str, limits: &ToolLimits) -> Result<ToolCall, ToolError> {
    let name = tool_name.trim();
    let Some(i) = TOOL_NAMES.iter().position(|n| *n == name) else {
        return Err(ToolError::invalid(
            "tool_name",
            format!("unknown tool {} (expected one of {})", quoted(tool_name), TOOL_NAMES.join(", ")),
        ));
    };
    let mut a = Args { obj: top_level_object(arguments_json)?, used: Vec::new() };
    let call = READERS[i](&mut a, limits)?;
    a.refuse_unknown()?;
    Ok(call)
}

/// The arguments object: `""` (or only whitespace) is `{}`; anything else must be one JSON object
/// whose keys are distinct (serde_json's `Map` would silently keep the last of a repeated key).
fn top_level_object(arguments_json: &str) -> Result<Map<String, Value>, ToolError> {
    let raw = arguments_json.trim();
    if raw.is_empty() {
        return Ok(Map::new());
    }
    let parsed: Json = serde_json::from_str(raw)
        .map_err(|e| ToolError::invalid("arguments_json", format!("not valid JSON: {}", crate::util::excerpt::cut(&e.to_string()))))?;
    let Json::Object(members) = parsed else { return Err(ToolError::invalid("arguments_json", "must be a JSON object")) };
    let mut obj = Map::new();
    for (k, v) in members {
        if obj.contains_key(&k) {
            return Err(ToolError::invalid(&name(&k), "is given more than once (duplicate JSON key)"));
        }
        obj.insert(k, v.into());
    }
    Ok(obj)
}

pub(super) struct Args {
    obj: Map<String, Value>,
    used: Vec<&'static str>,
}

impl Args {
    fn get(&mut self, key: &'static str) -> Option<&Value> {
        self.used.push(key);
        self.obj.get(key).filter(|v| !v.is_null())
    }

    pub(super) fn string(&mut self, key: &'static str) -> Result<Option<String>, ToolError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(v) => Err(ToolError::invalid(key, format!("must be a string, got {}", kind_of(v)))),
        }
    }

    pub(super) fn int(&mut self, key: &'static str) -> Result<Option<i64>, ToolError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) => {
                if let Some(i) = n.as_i64() {
                    Ok(Some(i))
                } else {
                    match n.as_f64() {
                        Some(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 9.0e15 => Ok(Some(f as i64)),
                        _ => Err(ToolError::invalid(key, format!("must be an integer, got {n}"))),
                    }
                }
            }
            Some(v) => Err(ToolError::invalid(key, format!("must be an integer, got {}", kind_of(v)))),
        }
    }

    pub(super) fn number(&mut self, key: &'static str) -> Result<Option<f64>, ToolError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) => n.as_f64().map(Some).ok_or_else(|| ToolError::invalid(key, "must be a number")),
            Some(v) => Err(ToolError::invalid(key, format!("must be a number, got {}", kind_of(v)))),
        }
    }

    #[allow(clippy::wildcard_enum_match_arm)] // `kind` names whatever else it is
    pub(super) fn strings(&mut self, key: &'static str) -> Result<Option<Vec<String>>, ToolError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s.clone()),
                    other => Err(ToolError::invalid(key, format!("must be a list of strings, found {}", kind_of(other)))),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(v) => Err(ToolError::invalid(key, format!("must be a list of strings, got {}", kind_of(v)))),
        }
    }

    pub(super) fn choice<T: Copy>(&mut self, key: &'static str, options: &[(&str, T)]) -> Result<Option<T>, ToolError> {
        let Some(s) = self.string(key)? else { return Ok(None) };
        by_name(options, |(n, _)| n, &s.trim().to_ascii_lowercase()).map(|(_, v)| Some(v)).map_err(|e| not_one_of(key, &e, &s))
    }

    /// An enum argument read with its own [`FromStr`] (names as in [`Args::choice`]).
    pub(super) fn parsed<T: FromStr<Err = String>>(&mut self, key: &'static str) -> Result<Option<T>, ToolError> {
        let Some(s) = self.string(key)? else { return Ok(None) };
        s.trim().to_ascii_lowercase().parse().map(Some).map_err(|e: String| not_one_of(key, &e, &s))
    }

    pub(super) fn memory_type(&mut self, key: &'static str) -> Result<Option<MemoryType>, ToolError> {
        self.choice(key, &[("episodic", MemoryType::Episodic), ("semantic", MemoryType::Semantic), ("procedural", MemoryType::Procedural)])
    }

    fn refuse_unknown(&self) -> Result<(), ToolError> {
        match self.obj.keys().find(|k| !self.used.contains(&k.as_str())) {
            Some(k) => Err(ToolError::invalid(&name(k), format!("unknown argument (expected one of {})", self.used.join(", ")))),
            None => Ok(()),
        }
    }
}

/// "must be one of ..., got <a prefix of what was sent>".
fn not_one_of(key: &str, expected: &str, got: &str) -> ToolError {
    ToolError::invalid(key, format!("{expected}, got {}", quoted(got)))
}

/// The validated call as canonical JSON arguments (recorded in the trace): every argument the call sets,
/// with defaults filled in; an unset optional argument is left out, not written as `null` (an open
/// episode keeps its trace, and the nulls were a third of a create's).
pub fn canonical_arguments(call: &ToolCall) -> Value {
    let mut v = match call {
        ToolCall::Search(a) => search::canonical(a),
        ToolCall::Manage(a) => manage::canonical(a),
        ToolCall::Delete(a) => delete::canonical(a),
        ToolCall::Sample(a) => sample::canonical(a),
        ToolCall::Merge(a) => merge::canonical(a),
        ToolCall::Split(a) => split::canonical(a),
    };
    if let Value::Object(m) = &mut v {
        m.retain(|_, x| !x.is_null());
    }
    v
}

#[cfg(test)]
#[allow(clippy::wildcard_enum_match_arm)]
mod tests {
    use super::*;
    use crate::tools::{ManageOp, SplitCriteria};

    fn parse(name: &str, args: &str) -> Result<ToolCall, ToolError> {
        parse_call(name, args, &ToolLimits::default())
    }

    fn field_of(e: ToolError) -> String {
        match e {
            ToolError::InvalidArgument(crate::util::invalid::Invalid { field, .. }) => field,
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }

    #[test]
    fn schemas_are_verl_compatible() {
        let schemas = tool_schemas();
        assert_eq!(schemas.len(), 6);
        for (s, name) in schemas.iter().zip(TOOL_NAMES) {
            assert_eq!(s["type"], "function");
            assert_eq!(s["function"]["name"], name);
            assert_eq!(s["function"]["parameters"]["type"], "object");
            let props = s["function"]["parameters"]["properties"].as_object().unwrap();
            for (pname, p) in props {
                for key in p.as_object().unwrap().keys() {
                    assert!(["type", "description", "enum"].contains(&key.as_str()), "{name}.{pname} has {key}");
                }
            }
            for r in s["function"]["parameters"]["required"].as_array().unwrap() {
                assert!(props.contains_key(r.as_str().unwrap()), "{name} requires unknown {r}");
            }
        }
    }

    #[test]
    fn parses_what_llms_emit() {
        let c = parse("search_memory", r#"{"query": "support group", "top_k": 3.0, "memory_type": "Episodic", "speaker": null}"#).unwrap();
        let ToolCall::Search(a) = c else { panic!() };
        assert_eq!((a.top_k, a.filter.memory_type), (3, Some(MemoryType::Episodic)));
        assert!(matches!(parse("sample_memory", "").unwrap(), ToolCall::Sample(_)));
        let c = parse("split_memory", r#"{"memory_id": " M42 ", "split_criteria": " Speaker", "parts": [], "max_parts": 4.0}"#).unwrap();
        let ToolCall::Split(a) = c else { panic!() };
        assert_eq!((a.id.0, a.criteria, a.max_parts, a.parts), (42, SplitCriteria::Speaker, 4, None));
        let c = parse("manage_memory", r#"{"operation": "CREATE", "content": " x ", "speaker": "", "memory_id": null}"#).unwrap();
        let ToolCall::Manage(a) = c else { panic!() };
        assert_eq!((a.op, a.content.as_str(), a.speaker), (ManageOp::Create, "x", None));
        let c = parse("delete_memory", r#"{"memory_ids": ["m0001", "m0002"], "reason": "dup"}"#).unwrap();
        assert_eq!(c.arguments_json(), r#"{"memory_ids":["m0001","m0002"],"reason":"dup"}"#);
    }

    #[test]
    fn long_values_are_quoted_as_a_prefix() {
        let long = "z".repeat(20_000);
        let cases = [
            (long.clone(), "{}".to_string(), "tool_name"),
            ("delete_memory".into(), json!({ "memory_id": long }).to_string(), "memory_id"),
            ("delete_memory".into(), json!({ "memory_ids": ["m1", long] }).to_string(), "memory_ids"),
            ("manage_memory".into(), json!({ "operation": long, "content": "x" }).to_string(), "operation"),
            ("search_memory".into(), json!({ "query": "x", "memory_type": long }).to_string(), "memory_type"),
            ("sample_memory".into(), json!({ "strategy": long }).to_string(), "strategy"),
            ("merge_memory".into(), json!({ "memory_ids": ["m1", "m2"], "strategy": long }).to_string(), "strategy"),
            ("split_memory".into(), json!({ "memory_id": "m1", "split_criteria": long }).to_string(), "split_criteria"),
            ("split_memory".into(), json!({ "memory_id": long, "split_criteria": "speaker" }).to_string(), "memory_id"),
            ("search_memory".into(), format!(r#"{{"query": "x", "{long}": 1}}"#), "\""),
            ("search_memory".into(), format!(r#"{{"query": "x", "{long}": 1, "{long}": 2}}"#), "\""),
            ("search_memory".into(), format!(r#"{{"query": "{long}"#), "arguments_json"),
        ];
        for (tool, args, field) in cases {
            let e = parse(&tool, &args).expect_err(field);
            let m = e.to_string();
            assert!(m.len() < 400 && m.contains(field), "{field}: {m}");
            if field != "arguments_json" {
                assert!(m.contains("(20000 characters)"), "{field}: {m}");
            }
        }
    }

    #[test]
    fn deep_nesting_is_refused_not_a_stack_overflow() {
        for args in [
            "[".repeat(100_000),
            format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)),
            format!(r#"{{"query": {}1{}}}"#, "[".repeat(100_000), "]".repeat(100_000)),
            format!(r#"{{"query": "x", "k": {}}}"#, r#"{"a":"#.repeat(50_000)),
        ] {
            let e = parse("search_memory", &args).unwrap_err();
            assert!(e.to_string().len() < 400, "{e}");
        }
    }

    #[test]
    fn errors_name_the_argument() {
        let cases = [
            ("search_memory", "{", "arguments_json"),
            ("search_memory", "[1]", "arguments_json"),
            ("search_memory", r#"{"query": 5}"#, "query"),
            ("search_memory", r#"{"query": "  "}"#, "query"),
            ("search_memory", r#"{"query": "x", "top_k": "5"}"#, "top_k"),
            ("search_memory", r#"{"query": "x", "top_k": 2.5}"#, "top_k"),
            ("search_memory", r#"{"query": "x", "top_k": 0}"#, "top_k"),
            ("search_memory", r#"{"query": "x", "top_k": 51}"#, "top_k"),
            ("search_memory", r#"{"query": "x", "threshold": 1.5}"#, "threshold"),
            ("search_memory", r#"{"query": "x", "memory_type": "feelings"}"#, "memory_type"),
            ("search_memory", r#"{"query": "x", "colour": "red"}"#, "colour"),
            ("manage_memory", r#"{"content": "x"}"#, "operation"),
            ("manage_memory", r#"{"operation": "upsert", "content": "x"}"#, "operation"),
            ("manage_memory", r#"{"operation": "update", "content": "x"}"#, "memory_id"),
            ("manage_memory", r#"{"operation": "update", "content": "x", "memory_id": "42"}"#, "memory_id"),
            ("manage_memory", r#"{"operation": "create"}"#, "content"),
            ("delete_memory", r#"{}"#, "memory_id"),
            ("delete_memory", r#"{"memory_ids": "m0001"}"#, "memory_ids"),
            ("delete_memory", r#"{"memory_ids": ["m0001", "m0001"]}"#, "memory_ids"),
            ("delete_memory", r#"{"memory_ids": []}"#, "memory_ids"),
            ("delete_memory", r#"{"memory_ids": [1]}"#, "memory_ids"),
            ("sample_memory", r#"{"k": -1}"#, "k"),
            ("sample_memory", r#"{"strategy": "newest"}"#, "strategy"),
            ("merge_memory", r#"{"memory_ids": ["m0001"], "strategy": "summarize"}"#, "memory_ids"),
            ("merge_memory", r#"{"memory_ids": ["m1","m2","m3","m4","m5","m6"], "strategy": "summarize"}"#, "memory_ids"),
            ("merge_memory", r#"{"memory_ids": ["m1","m2"]}"#, "strategy"),
            ("merge_memory", r#"{"memory_ids": ["m1","m2"], "strategy": "concatenate", "content": ""}"#, "content"),
            ("split_memory", r#"{"split_criteria": "temporal"}"#, "memory_id"),
            ("split_memory", r#"{"memory_id": "m1"}"#, "split_criteria"),
            ("split_memory", r#"{"memory_id": "m1", "split_criteria": "speaker", "max_parts": 6}"#, "max_parts"),
            ("split_memory", r#"{"memory_id": "m1", "split_criteria": "speaker", "parts": ["only one"]}"#, "parts"),
            ("wipe_memory", r#"{}"#, "tool_name"),
            ("search_memory", r#"{"query": "a", "query": "b"}"#, "query"),
            ("search_memory", r#"{"query": "a", "top_k": 3, "top_k": null}"#, "top_k"),
            ("search_memory", r#"{"query": "a"} {}"#, "arguments_json"),
            ("search_memory", "null", "arguments_json"),
            ("search_memory", "\"query\"", "arguments_json"),
        ];
        for (tool, args, field) in cases {
            let got = field_of(parse(tool, args).expect_err(args));
            assert_eq!(got, field, "{tool} {args}");
        }
    }
}
