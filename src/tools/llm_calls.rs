//! The tools as an LLM sees them: the six OpenAI function schemas in order, the dispatch of an LLM's call
//! by tool name, and the reading of JSON argument values ([`Args`]). Each tool's own schema, the names it
//! reads and its canonical form live in the tool's file.
//!
//! A schema says what the tool's validation enforces, in the JSON-schema subset every constrained decoder
//! reads (vLLM's `tool_choice="required"`, SGLang's xgrammar, llama.cpp's grammars), so that a grammar
//! built from it writes only calls memgym accepts as far as a schema can say: `parameters` is closed
//! (`"additionalProperties": false`: unknown argument names are refused), integers and numbers carry
//! the `minimum`/`maximum` their validation checks, lists carry `"items": {"type": "string"}` and the
//! `minItems`/`maxItems` it checks, each bound from the same constant the validation reads. What a
//! schema cannot say stays the validation's alone (a text's characters and length, ids that exist, one of
//! `memory_id`/`memory_ids`, `memory_id` only on an update, `parts` no longer than `max_parts`: the rules
//! that span arguments would need an `anyOf` at the root of `parameters`, which OpenAI's strict function
//! schemas forbid). verl's pydantic property model
//! (`OpenAIFunctionPropertySchema`) keeps only `type`, `description` and `enum` and silently drops the
//! other keys, so verl's prompts show the descriptions, which state the bounds in words too.
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

/// An integer the validation accepts from `lo` to `hi` (both included).
pub(super) fn prop_int(description: &str, (lo, hi): (i64, i64)) -> Value {
    json!({"type": "integer", "description": description, "minimum": lo, "maximum": hi})
}

/// A number the validation accepts from `lo` to `hi` (both included).
pub(super) fn prop_number(description: &str, (lo, hi): (f64, f64)) -> Value {
    json!({"type": "number", "description": description, "minimum": lo, "maximum": hi})
}

/// A list of `lo` to `hi` strings.
pub(super) fn prop_strings(description: &str, (lo, hi): (usize, usize)) -> Value {
    json!({"type": "array", "description": description, "items": {"type": "string"}, "minItems": lo, "maxItems": hi})
}

/// One tool's function schema; its `parameters` are closed (`"additionalProperties": false`), since
/// [`parse_call`] refuses an argument name the tool does not read.
pub(super) fn function(name: &str, description: &str, properties: Value, required: &[&str]) -> Value {
    json!({"type": "function", "function": {"name": name, "description": description,
        "parameters": {"type": "object", "properties": properties, "required": required, "additionalProperties": false}}})
}

/// The six tools' OpenAI function schemas, in [`TOOL_NAMES`] order, with the bounds `limits` sets (the
/// server's: `delete_memory`'s `memory_ids` lists at most [`ToolLimits::max_ids_per_call`] ids; every other
/// bound is a constant of its tool).
pub fn tool_schemas(limits: &ToolLimits) -> Vec<Value> {
    // Every word here is in every prompt (about 1,000 Qwen2.5 tokens for the six): keep them short.
    vec![search::schema(), manage::schema(), delete::schema(limits), sample::schema(), merge::schema(), split::schema()]
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

    /// verl's property model keeps `type`, `description` and `enum` and drops the rest; every other key a
    /// property carries is one of the bounds the validation enforces.
    #[test]
    fn schemas_are_verl_compatible() {
        let schemas = tool_schemas(&ToolLimits::default());
        assert_eq!(schemas.len(), 6);
        for (s, name) in schemas.iter().zip(TOOL_NAMES) {
            assert_eq!(s["type"], "function");
            assert_eq!(s["function"]["name"], name);
            let params = &s["function"]["parameters"];
            assert_eq!(params["type"], "object");
            assert_eq!(params["additionalProperties"], false, "{name}");
            let props = params["properties"].as_object().unwrap();
            for (pname, p) in props {
                assert!(p["type"].is_string() && p["description"].is_string(), "{name}.{pname}");
                for key in p.as_object().unwrap().keys() {
                    let known = ["type", "description", "enum", "minimum", "maximum", "items", "minItems", "maxItems"];
                    assert!(known.contains(&key.as_str()), "{name}.{pname} has {key}");
                }
                if p["type"] == "array" {
                    assert_eq!(p["items"], json!({"type": "string"}), "{name}.{pname}");
                }
            }
            for r in params["required"].as_array().unwrap() {
                assert!(props.contains_key(r.as_str().unwrap()), "{name} requires unknown {r}");
            }
        }
    }

    /// Arguments every tool accepts, to which one argument is added or changed.
    fn base(tool: &str) -> Value {
        match tool {
            "search_memory" => json!({"query": "x"}),
            "manage_memory" => json!({"operation": "create", "content": "x"}),
            "merge_memory" => json!({"memory_ids": ["m1", "m2"], "strategy": "summarize"}),
            // The largest max_parts, so that parts may reach the schema's maxItems.
            "split_memory" => json!({"memory_id": "m1", "split_criteria": "speaker", "max_parts": 5}),
            _ => json!({}),
        }
    }

    /// A value at the edge of a property's bounds, or just past it.
    fn edge(p: &Value) -> Vec<(Value, bool)> {
        let mut out = Vec::new();
        if let (Some(lo), Some(hi)) = (p.get("minimum"), p.get("maximum")) {
            if p["type"] == "integer" {
                let (lo, hi) = (lo.as_i64().unwrap(), hi.as_i64().unwrap());
                out.extend([(json!(lo), true), (json!(hi), true), (json!(lo - 1), false), (json!(hi + 1), false)]);
            } else {
                let (lo, hi) = (lo.as_f64().unwrap(), hi.as_f64().unwrap());
                out.extend([(json!(lo), true), (json!(hi), true), (json!(lo - 1e-6), false), (json!(hi + 1e-6), false)]);
            }
        }
        if let (Some(lo), Some(hi)) = (p.get("minItems"), p.get("maxItems")) {
            let list = |n: u64| Value::Array((1..=n).map(|i| json!(format!("m{i}"))).collect());
            let (lo, hi) = (lo.as_u64().unwrap(), hi.as_u64().unwrap());
            out.extend([(list(lo), true), (list(hi), true), (list(lo - 1), false), (list(hi + 1), false)]);
        }
        out
    }

    /// Each bound a schema states is the validation's: a call at the bound is accepted by [`parse_call`]
    /// and conforms to the schema, one just past it is refused by both; an unknown argument is refused by
    /// both; the names the schema lists are exactly the names the tool reads. Checked with the default
    /// limits and with a smaller `max_ids_per_call`.
    #[test]
    fn schema_bounds_are_the_validations() {
        use crate::util::json_schema::check;
        for limits in [ToolLimits::default(), ToolLimits { max_ids_per_call: 7, ..ToolLimits::default() }] {
            let mut edges = 0;
            for s in tool_schemas(&limits) {
                let (name, params) = (s["function"]["name"].as_str().unwrap(), &s["function"]["parameters"]);
                let b = base(name);
                let mut props: Vec<&String> = params["properties"].as_object().unwrap().keys().collect();
                for (pname, p) in params["properties"].as_object().unwrap() {
                    for (v, inside) in edge(p) {
                        let mut args = b.clone();
                        args[pname] = v.clone();
                        let parsed = parse_call(name, &args.to_string(), &limits);
                        assert_eq!(parsed.is_ok(), inside, "{name}.{pname} = {v}: {parsed:?}");
                        if let Err(e) = parsed {
                            assert_eq!(field_of(e), *pname, "{name}.{pname} = {v}");
                        }
                        assert_eq!(check(params, &args).is_ok(), inside, "{name}.{pname} = {v} against the schema");
                        edges += 1;
                    }
                }
                // delete_memory needs one of its two id arguments before it reads on.
                let mut unknown = if name == "delete_memory" { json!({"memory_id": "m1"}) } else { b.clone() };
                unknown["zzz"] = json!(1);
                let e = parse_call(name, &unknown.to_string(), &limits).unwrap_err();
                assert!(check(params, &unknown).is_err(), "{name}: additionalProperties");
                // The refusal lists the names the tool read: exactly the schema's.
                let m = e.to_string();
                let read = m.rsplit("expected one of ").next().unwrap().trim_end_matches(')');
                let mut read: Vec<&str> = read.split(", ").collect();
                read.sort_unstable();
                props.sort_unstable();
                assert_eq!(read, props, "{name}: {m}");
            }
            // top_k, threshold, session, k, max_parts: 4 edges each; three lists: 4 each.
            assert_eq!(edges, 8 * 4, "every bound was tried");
        }
        let delete = &tool_schemas(&ToolLimits { max_ids_per_call: 7, ..ToolLimits::default() })[2];
        assert_eq!(delete["function"]["parameters"]["properties"]["memory_ids"]["maxItems"], 7, "the server's limit");
    }

    proptest::proptest! {
        /// For any integer, the schema and the validation agree on every bounded integer argument.
        #[test]
        fn integers_agree_with_the_schema(n in -10i64..5_000_000_000, which in 0usize..4) {
            let (tool, arg) = [("search_memory", "top_k"), ("search_memory", "session"), ("sample_memory", "k"), ("split_memory", "max_parts")][which];
            let schemas = tool_schemas(&ToolLimits::default());
            let s = schemas.iter().find(|s| s["function"]["name"] == tool).unwrap();
            let mut args = base(tool);
            args[arg] = json!(n);
            let parsed = parse(tool, &args.to_string());
            proptest::prop_assert_eq!(parsed.is_ok(), crate::util::json_schema::check(&s["function"]["parameters"], &args).is_ok());
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
