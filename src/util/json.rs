//! An order-preserving JSON value whose objects keep every member, repeated keys included.
//! `serde_json::Value` sorts object keys (the crate is built without `preserve_order`) and silently
//! keeps the last of a repeated key. The LoCoMo converter needs the document order (the memory order
//! follows the speakers inside each observation object), and both it and the tool-argument reader
//! refuse a repeated key rather than guess ([`Json::first_duplicate`]). A leaf: it knows nothing of
//! the crate.

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// A parsed JSON value whose objects keep their keys in document order.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// Any number.
    Number(serde_json::Number),
    /// A string.
    String(String),
    /// An array.
    Array(Vec<Json>),
    /// An object, members in document order, repeated keys kept.
    Object(Vec<(String, Json)>),
}

impl Json {
    /// A short description of the value for error messages: the number or a type name.
    pub fn describe(&self) -> String {
        match self {
            Json::Null => "null".to_owned(),
            Json::Bool(b) => b.to_string(),
            Json::Number(n) => n.to_string(),
            Json::String(s) if s.chars().count() <= 40 => format!("the string {s:?}"),
            Json::String(_) => "a string".to_owned(),
            Json::Array(_) => "an array".to_owned(),
            Json::Object(_) => "an object".to_owned(),
        }
    }

    /// The value of `key` if `self` is an object that has it (the first, if repeated).
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            Json::Null | Json::Bool(_) | Json::Number(_) | Json::String(_) | Json::Array(_) => None,
        }
    }

    /// The first key repeated inside one object, searching depth-first in document order; `None` when
    /// every object's keys are distinct.
    pub fn first_duplicate(&self) -> Option<&str> {
        match self {
            Json::Object(entries) => {
                let mut seen: HashSet<&str> = HashSet::with_capacity(entries.len());
                for (k, v) in entries {
                    if !seen.insert(k) {
                        return Some(k);
                    }
                    if let Some(d) = v.first_duplicate() {
                        return Some(d);
                    }
                }
                None
            }
            Json::Array(items) => items.iter().find_map(Json::first_duplicate),
            Json::Null | Json::Bool(_) | Json::Number(_) | Json::String(_) => None,
        }
    }
}

impl From<Json> for serde_json::Value {
    /// The `serde_json` value: object members in key order, the last of a repeated key kept.
    fn from(j: Json) -> Self {
        match j {
            Json::Null => serde_json::Value::Null,
            Json::Bool(b) => serde_json::Value::Bool(b),
            Json::Number(n) => serde_json::Value::Number(n),
            Json::String(s) => serde_json::Value::String(s),
            Json::Array(items) => serde_json::Value::Array(items.into_iter().map(Into::into).collect()),
            Json::Object(entries) => serde_json::Value::Object(entries.into_iter().map(|(k, v)| (k, v.into())).collect()),
        }
    }
}

impl serde::Serialize for Json {
    /// Compact JSON in document order, repeated keys written as often as they were read (so a reader
    /// downstream still sees, and refuses, the repetition).
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self {
            Json::Null => s.serialize_unit(),
            Json::Bool(b) => s.serialize_bool(*b),
            Json::Number(n) => n.serialize(s),
            Json::String(v) => s.serialize_str(v),
            Json::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Json::Object(entries) => {
                let mut map = s.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Json, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Json, E> {
        Ok(Json::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Json, E> {
        Ok(Json::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Json, E> {
        Ok(Json::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Json, E> {
        serde_json::Number::from_f64(v).map(Json::Number).ok_or_else(|| E::custom("non-finite number"))
    }

    fn visit_str<E>(self, v: &str) -> Result<Json, E> {
        Ok(Json::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Json, E> {
        Ok(Json::String(v))
    }

    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_none<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Json, D::Error> {
        Json::deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(item) = seq.next_element::<Json>()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut entries: Vec<(String, Json)> = Vec::new();
        while let Some(entry) = map.next_entry::<String, Json>()? {
            entries.push(entry);
        }
        Ok(Json::Object(entries))
    }
}

/// Why [`strict_value`] refused a document.
#[derive(Debug)]
pub enum StrictError {
    /// Not JSON (serde_json's message: line and column; a `\ud800` lone surrogate escape is refused here).
    Syntax(serde_json::Error),
    /// A key repeated inside one object (the first found, depth-first in document order).
    Duplicate(String),
}

impl fmt::Display for StrictError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StrictError::Syntax(e) => write!(f, "not valid JSON: {}", crate::util::excerpt::cut(&e.to_string())),
            StrictError::Duplicate(k) => {
                write!(f, "key {} appears twice in one object (duplicate JSON keys are refused)", crate::util::excerpt::quoted(k))
            }
        }
    }
}

/// The one strict reading of a JSON document a client sends: a repeated key inside one object is
/// refused rather than silently keeping one of the two values (what `serde_json::Value` does).
pub fn strict_value(text: &str) -> Result<serde_json::Value, StrictError> {
    without_repeats(serde_json::from_str(text))
}

/// [`strict_value`] on bytes (an HTTP body); invalid UTF-8 is a syntax error.
pub fn strict_value_bytes(bytes: &[u8]) -> Result<serde_json::Value, StrictError> {
    without_repeats(serde_json::from_slice(bytes))
}

/// The strict reading's one rule, after either parse: a repeated key refuses the document.
fn without_repeats(parsed: Result<Json, serde_json::Error>) -> Result<serde_json::Value, StrictError> {
    let parsed = parsed.map_err(StrictError::Syntax)?;
    if let Some(k) = parsed.first_duplicate() {
        return Err(StrictError::Duplicate(k.to_string()));
    }
    Ok(parsed.into())
}

/// "a string", "an array", … : what a `serde_json::Value` is, for error messages.
pub fn kind_of(value: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Proptest strategies for JSON, written once for every property test that feeds a reader arbitrary JSON:
/// the tree's shape here, the leaves and keys each test's domain needs from its caller.
#[cfg(test)]
pub(crate) mod strategies {
    use proptest::prelude::*;
    use serde_json::{Map, Value};

    /// Any scalar: null, a boolean, an integer, a finite float or a short string.
    pub(crate) fn scalar() -> BoxedStrategy<Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
            "\\PC{0,12}".prop_map(Value::String),
        ]
        .boxed()
    }

    /// JSON trees of `leaf`s in arrays and objects keyed by `keys`, at most `depth` deep, about `size` nodes.
    pub(crate) fn tree(leaf: BoxedStrategy<Value>, keys: BoxedStrategy<String>, depth: u32, size: u32) -> BoxedStrategy<Value> {
        leaf.prop_recursive(depth, size, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec((keys.clone(), inner), 0..6).prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
            ]
        })
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_key_order_and_finds_duplicates() {
        let v: Json = serde_json::from_str(r#"{"b":1,"a":[true,null,"x",2.5]}"#).expect("parses");
        let Json::Object(entries) = &v else { panic!("not an object: {v:?}") };
        assert_eq!(entries[0].0, "b");
        assert_eq!(v.get("b"), Some(&Json::Number(1u64.into())));
        assert_eq!(v.first_duplicate(), None);
        let dup: Json = serde_json::from_str(r#"{"a":1,"a":2}"#).expect("parses");
        assert_eq!(dup.first_duplicate(), Some("a"));
        let nested: Json = serde_json::from_str(r#"[{"x":{"k":1,"j":2,"k":3}}, {"y":1,"y":2}]"#).expect("parses");
        assert_eq!(nested.first_duplicate(), Some("k"), "depth-first, in document order");
        assert_eq!(serde_json::to_string(&dup).unwrap(), r#"{"a":1,"a":2}"#, "written back with the repetition");
        assert_eq!(serde_json::to_string(&v).unwrap(), r#"{"b":1,"a":[true,null,"x",2.5]}"#, "in document order");
        assert_eq!(serde_json::Value::from(dup), serde_json::json!({"a": 2}), "serde_json keeps the last");
    }

    #[test]
    fn strict_refuses_duplicates_lone_surrogates_and_bad_json() {
        assert_eq!(strict_value(r#"{"b":[1,{"c":null}]}"#).unwrap(), serde_json::json!({"b": [1, {"c": null}]}));
        let e = strict_value(r#"{"text":"a","text":"b"}"#).unwrap_err();
        assert_eq!(e.to_string(), r#"key "text" appears twice in one object (duplicate JSON keys are refused)"#);
        for bad in [r#"{"t":"\ud800"}"#, r#"{"t":"\udc00x"}"#, "{", "[1,]"] {
            assert!(matches!(strict_value(bad), Err(StrictError::Syntax(_))), "{bad}");
        }
        assert!(strict_value(r#"{"t":"\ud83d\udc1d"}"#).is_ok(), "a surrogate pair is one character");
        assert!(matches!(strict_value_bytes(b"{\"a\":\"\xff\"}"), Err(StrictError::Syntax(_))));
    }

    proptest::proptest! {
        /// Never panics; refuses exactly the documents serde_json refuses or that repeat a key, and
        /// otherwise reads what serde_json reads.
        #[test]
        fn strict_agrees_with_serde_json_but_refuses_repeats(keys in proptest::collection::vec("[a-c]", 0..5), tail in "[\\]\\[{}\",:0-9a-c ]{0,12}") {
            let body: Vec<String> = keys.iter().enumerate().map(|(i, k)| format!("\"{k}\":{i}")).collect();
            let doc = format!("{{{}}}", body.join(","));
            let distinct = keys.iter().collect::<std::collections::HashSet<_>>().len() == keys.len();
            match strict_value(&doc) {
                Ok(v) => { proptest::prop_assert!(distinct); proptest::prop_assert_eq!(v, serde_json::from_str::<serde_json::Value>(&doc).unwrap()); }
                Err(StrictError::Duplicate(k)) => { proptest::prop_assert!(!distinct); proptest::prop_assert!(keys.contains(&k)); }
                Err(StrictError::Syntax(e)) => proptest::prop_assert!(false, "{e}"),
            }
            let junk = format!("{doc}{tail}");
            let loose = serde_json::from_str::<serde_json::Value>(&junk);
            match strict_value(&junk) {
                Ok(v) => proptest::prop_assert_eq!(Some(v), loose.ok()),
                Err(StrictError::Syntax(_)) => proptest::prop_assert!(loose.is_err()),
                Err(StrictError::Duplicate(_)) => proptest::prop_assert!(!distinct),
            }
        }
    }
}
