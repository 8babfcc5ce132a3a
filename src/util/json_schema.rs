//! Whether a JSON value conforms to a JSON schema, for the subset memgym's tool schemas use: `type`,
//! `enum`, `minimum`/`maximum`, objects' `properties`, `required` and `additionalProperties`, arrays'
//! `items` and `minItems`/`maxItems`. It exists so that the rollout report can tell a call a
//! grammar-constrained decoder would never have written (one that breaks the schema the policy was
//! shown) from a policy's choice, judged by the schemas themselves rather than by memgym's own reader,
//! which is more lenient (an enum's case, `null` for unset).
//!
//! The rules are JSON Schema's (draft 2020-12) for these keywords: an integer is any number with no
//! fractional part (`5.0` is one); `number` includes integers; `enum` compares JSON values exactly;
//! `required` names members that must be present (a present `null` is present, and then fails its type);
//! `additionalProperties` is `false`, `true` or a schema for the members `properties` does not name. Any
//! other keyword is ignored, as a validator ignores an unknown one. A leaf: it knows nothing of the crate.

use serde_json::Value;

/// How a value breaks its schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Not of the schema's `type`.
    WrongType,
    /// Not one of the schema's `enum` values.
    NotInEnum,
    /// Below `minimum` or above `maximum`, or an array shorter than `minItems` or longer than `maxItems`.
    OutOfBounds,
    /// A member `required` names is absent.
    MissingRequired,
    /// A member `properties` does not name, where `additionalProperties` is `false`.
    UnknownProperty,
}

impl Kind {
    /// The name in files and reports.
    pub fn name(self) -> &'static str {
        match self {
            Kind::WrongType => "wrong_type",
            Kind::NotInEnum => "not_in_enum",
            Kind::OutOfBounds => "out_of_bounds",
            Kind::MissingRequired => "missing_required",
            Kind::UnknownProperty => "unknown_property",
        }
    }
}

/// The first way a value breaks its schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// How.
    pub kind: Kind,
    /// Where: the path of the member or item (`top_k`, `memory_ids[2]`), empty for the value itself.
    pub at: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.at.is_empty() {
            f.write_str(self.kind.name())
        } else {
            write!(f, "{}: {}", self.at, self.kind.name())
        }
    }
}

/// Checks `value` against `schema`: the first violation found, checking a value's `type`, then its `enum`,
/// then its bounds, then (objects) each member in key order and what `required` names, (arrays) its length
/// and each item in order.
pub fn check(schema: &Value, value: &Value) -> Result<(), Violation> {
    check_at(schema, value, "")
}

fn violation(kind: Kind, at: &str) -> Result<(), Violation> {
    Err(Violation { kind, at: at.to_string() })
}

fn check_at(schema: &Value, value: &Value, at: &str) -> Result<(), Violation> {
    let Some(s) = schema.as_object() else { return Ok(()) }; // `true` or `{}`-like: anything
    if let Some(ty) = s.get("type") {
        let fits = match ty {
            Value::String(t) => has_type(t, value),
            Value::Array(ts) => ts.iter().any(|t| t.as_str().is_some_and(|t| has_type(t, value))),
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::Object(_) => true,
        };
        if !fits {
            return violation(Kind::WrongType, at);
        }
    }
    if let Some(Value::Array(allowed)) = s.get("enum") {
        if !allowed.iter().any(|a| same(a, value)) {
            return violation(Kind::NotInEnum, at);
        }
    }
    if let Some(x) = value.as_f64() {
        let below = s.get("minimum").and_then(Value::as_f64).is_some_and(|lo| x < lo);
        let above = s.get("maximum").and_then(Value::as_f64).is_some_and(|hi| x > hi);
        if below || above {
            return violation(Kind::OutOfBounds, at);
        }
    }
    match value {
        Value::Object(members) => {
            let properties = s.get("properties").and_then(Value::as_object);
            for (k, v) in members {
                let path = if at.is_empty() { k.clone() } else { format!("{at}.{k}") };
                match properties.and_then(|p| p.get(k)) {
                    Some(sub) => check_at(sub, v, &path)?,
                    None => match s.get("additionalProperties") {
                        Some(Value::Bool(false)) => return violation(Kind::UnknownProperty, &path),
                        Some(sub @ Value::Object(_)) => check_at(sub, v, &path)?,
                        Some(Value::Null | Value::Bool(true) | Value::Number(_) | Value::String(_) | Value::Array(_)) | None => {}
                    },
                }
            }
            if let Some(Value::Array(required)) = s.get("required") {
                if let Some(missing) = required.iter().filter_map(Value::as_str).find(|r| !members.contains_key(*r)) {
                    let path = if at.is_empty() { missing.to_string() } else { format!("{at}.{missing}") };
                    return violation(Kind::MissingRequired, &path);
                }
            }
            Ok(())
        }
        Value::Array(items) => {
            let n = items.len() as u64;
            let short = s.get("minItems").and_then(Value::as_u64).is_some_and(|lo| n < lo);
            let long = s.get("maxItems").and_then(Value::as_u64).is_some_and(|hi| n > hi);
            if short || long {
                return violation(Kind::OutOfBounds, at);
            }
            if let Some(item) = s.get("items") {
                for (i, v) in items.iter().enumerate() {
                    check_at(item, v, &format!("{at}[{i}]"))?;
                }
            }
            Ok(())
        }
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => Ok(()),
    }
}

/// Whether `value` is of JSON Schema type `ty` (an unknown type name fits nothing).
fn has_type(ty: &str, value: &Value) -> bool {
    match ty {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "number" => value.is_number(),
        "integer" => match value {
            Value::Number(n) => n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.is_finite() && f.fract() == 0.0),
            Value::Null | Value::Bool(_) | Value::String(_) | Value::Array(_) | Value::Object(_) => false,
        },
        _ => false,
    }
}

/// JSON equality, numbers by value (`1` equals `1.0`, as JSON Schema's `enum` compares them).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64().zip(y.as_f64()).is_some_and(|(x, y)| x == y),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y)),
        (Value::Object(x), Value::Object(y)) => x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w))),
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn kind(schema: &Value, value: Value) -> Option<(Kind, String)> {
        check(schema, &value).err().map(|v| (v.kind, v.at))
    }

    fn tool() -> Value {
        json!({"type": "object", "additionalProperties": false, "required": ["query"], "properties": {
            "query": {"type": "string"},
            "top_k": {"type": "integer", "minimum": 1, "maximum": 50},
            "threshold": {"type": "number", "minimum": 0.0, "maximum": 1.0},
            "memory_type": {"type": "string", "enum": ["episodic", "semantic"]},
            "ids": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 3},
        }})
    }

    #[test]
    fn each_keyword_of_the_subset() {
        let s = tool();
        let ok = |v: Value| assert_eq!(kind(&s, v.clone()), None, "{v}");
        ok(json!({"query": "x"}));
        ok(json!({"query": "x", "top_k": 1, "threshold": 0, "memory_type": "semantic", "ids": ["a", "b", "c"]}));
        ok(json!({"query": "x", "top_k": 50.0, "threshold": 1.0}));
        let bad = |v: Value, k: Kind, at: &str| assert_eq!(kind(&s, v.clone()), Some((k, at.to_string())), "{v}");
        bad(json!([]), Kind::WrongType, "");
        bad(json!({}), Kind::MissingRequired, "query");
        bad(json!({"query": null}), Kind::WrongType, "query");
        bad(json!({"query": "x", "colour": "red"}), Kind::UnknownProperty, "colour");
        bad(json!({"query": "x", "top_k": 2.5}), Kind::WrongType, "top_k");
        bad(json!({"query": "x", "top_k": "5"}), Kind::WrongType, "top_k");
        bad(json!({"query": "x", "top_k": 0}), Kind::OutOfBounds, "top_k");
        bad(json!({"query": "x", "top_k": 51}), Kind::OutOfBounds, "top_k");
        bad(json!({"query": "x", "threshold": 1.01}), Kind::OutOfBounds, "threshold");
        bad(json!({"query": "x", "threshold": -0.0001}), Kind::OutOfBounds, "threshold");
        bad(json!({"query": "x", "memory_type": "Semantic"}), Kind::NotInEnum, "memory_type");
        bad(json!({"query": "x", "ids": ["a"]}), Kind::OutOfBounds, "ids");
        bad(json!({"query": "x", "ids": ["a", "b", "c", "d"]}), Kind::OutOfBounds, "ids");
        bad(json!({"query": "x", "ids": ["a", 2]}), Kind::WrongType, "ids[1]");
        bad(json!({"query": "x", "ids": "a"}), Kind::WrongType, "ids");
    }

    #[test]
    fn open_objects_and_unknown_keywords() {
        let open = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
        assert_eq!(kind(&open, json!({"a": 1, "b": [1]})), None, "additionalProperties absent: anything else goes");
        let typed = json!({"type": "object", "additionalProperties": {"type": "string"}});
        assert_eq!(kind(&typed, json!({"b": 1})), Some((Kind::WrongType, "b".into())));
        assert_eq!(kind(&json!({"type": ["string", "null"]}), json!(null)), None);
        assert_eq!(kind(&json!({"type": "string", "format": "date", "pattern": "^x$"}), json!("y")), None, "ignored keywords");
        assert_eq!(kind(&json!({"enum": [1, "a"]}), json!(1.0)), None, "numbers compare by value");
        assert_eq!(
            kind(&json!({"type": "integer", "maximum": 4294967295u64}), json!(4294967296u64)),
            Some((Kind::OutOfBounds, String::new()))
        );
        assert_eq!(
            kind(&json!({"type": "object", "properties": {"o": {"type": "object", "required": ["x"]}}}), json!({"o": {}})),
            Some((Kind::MissingRequired, "o.x".into()))
        );
        assert_eq!(Violation { kind: Kind::OutOfBounds, at: "top_k".into() }.to_string(), "top_k: out_of_bounds");
    }

    proptest! {
        /// An integer with bounds: conforms exactly when it is within them, written as `n` or `n.0`.
        #[test]
        fn integer_bounds(lo in -1_000i64..1_000, span in 0i64..1_000, n in -3_000i64..3_000, float in any::<bool>()) {
            let s = json!({"type": "integer", "minimum": lo, "maximum": lo + span});
            let v = if float { json!(n as f64) } else { json!(n) };
            prop_assert_eq!(check(&s, &v).is_ok(), (lo..=lo + span).contains(&n));
        }

        /// An array with bounds on its length: conforms exactly when its length is within them.
        #[test]
        fn array_bounds(lo in 0usize..6, span in 0usize..6, n in 0usize..16) {
            let s = json!({"type": "array", "items": {"type": "string"}, "minItems": lo, "maxItems": lo + span});
            let v = Value::Array((0..n).map(|i| json!(format!("m{i}"))).collect());
            prop_assert_eq!(check(&s, &v).is_ok(), (lo..=lo + span).contains(&n));
        }
    }
}
