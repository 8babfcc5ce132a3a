//! Reading a policy's tool calls from its reply, strictly where the format says how and tolerantly where
//! small models are merely untidy, and saying which was which.
//!
//! A small instruct model asked for `<tool_call>{…}</tool_call>` often writes bare JSON, fenced JSON, or
//! several objects at once; a rollout that reads only the strict form scores 0 for reasons of format,
//! not of memory. So every shape below is accepted, and each call carries its [`Mode`], which the report
//! counts (format compliance is a result in itself):
//!
//! - **strict**: what the format asks for. `--tool-format openai`: an entry of the reply's `tool_calls`
//!   whose `function.arguments` is a string holding a JSON object (or empty). `--tool-format hermes`:
//!   a `<tool_call>` block holding exactly `{"name": "…", "arguments": {…}}`.
//! - **lenient**: a call read from another shape: a `<tool_call>` block with other keys (`parameters`,
//!   `args`, a nested `function` object, arguments as a string), an unclosed block, several objects or an
//!   array in one block, a fenced code block, or a bare JSON object in the text that names a tool. Under
//!   `openai`, any call read from the message's text (the server parsed none) is lenient.
//! - **invalid**: an attempt that cannot be read: a `<tool_call>` block or a fenced block that names a
//!   tool but is not JSON, a call with no tool name, arguments that are not a JSON object. The policy is
//!   shown why (a tool error it sees), and no environment call is made.
//!
//! Outside tags, an object is a call only when it names one of the six tools or carries arguments: a bare
//! `{"name": "Caroline", "age": 30}` is prose, not a call. A reply with no call at all ends the episode.
//! Arguments are passed on as the model wrote them (document order, repeated keys kept: [`Json`]'s
//! writer), so the server's own argument reader judges them exactly as it judges a trainer's call. At
//! most [`MAX_CALLS`] calls are read from one reply; the rest are dropped and counted.

use serde_json::Value;

use crate::util::json::Json;

/// The most calls read from one reply.
pub const MAX_CALLS: usize = 16;

/// How a call was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// In the format the policy was asked for.
    Strict,
    /// Recovered from another shape.
    Lenient,
    /// An attempt that could not be read.
    Invalid,
}

impl Mode {
    /// Every mode, in report order.
    pub const ALL: [Mode; 3] = [Mode::Strict, Mode::Lenient, Mode::Invalid];

    /// The name in files and reports.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Strict => "strict",
            Mode::Lenient => "lenient",
            Mode::Invalid => "invalid",
        }
    }
}

/// One tool call read from a reply.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Call {
    /// How it was read.
    pub mode: Mode,
    /// The tool's name as written (empty when there is none).
    pub name: String,
    /// The arguments as a JSON object's text (`""` for none), passed to `CallTool` as they are.
    pub arguments: String,
    /// The reply's `tool_calls[i].id` (`openai` format), answered by the `tool` message's `tool_call_id`.
    pub id: Option<String>,
    /// Why an invalid call could not be read.
    pub error: Option<String>,
}

/// What a reply held.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Parsed {
    /// The calls, in reply order (at most [`MAX_CALLS`]).
    pub calls: Vec<Call>,
    /// Calls past [`MAX_CALLS`], not read.
    pub dropped: usize,
}

impl Parsed {
    fn push(&mut self, call: Call) {
        if self.calls.len() < MAX_CALLS {
            self.calls.push(call);
        } else {
            self.dropped += 1;
        }
    }
}

/// The calls of an OpenAI chat message (`choices[0].message`): its `tool_calls` when it has any, else
/// what its text holds (read by [`from_text`], never better than lenient).
pub fn from_message(message: &Value) -> Parsed {
    let content = message.get("content").and_then(Value::as_str).unwrap_or("");
    match message.get("tool_calls").and_then(Value::as_array) {
        Some(calls) if !calls.is_empty() => {
            let mut out = Parsed::default();
            for c in calls {
                out.push(from_tool_call(c));
            }
            out
        }
        Some(_) | None => {
            let mut out = from_text(content);
            for c in &mut out.calls {
                if c.mode == Mode::Strict {
                    c.mode = Mode::Lenient;
                }
            }
            out
        }
    }
}

/// One entry of `tool_calls`.
fn from_tool_call(c: &Value) -> Call {
    let id = c.get("id").and_then(Value::as_str).map(str::to_string);
    let function = c.get("function");
    let name = function.and_then(|f| f.get("name")).and_then(Value::as_str).map(str::trim).unwrap_or("");
    let invalid = |name: &str, error: String| Call {
        mode: Mode::Invalid,
        name: name.to_string(),
        arguments: String::new(),
        id: id.clone(),
        error: Some(error),
    };
    if name.is_empty() {
        return invalid("", "the tool call has no function.name".into());
    }
    match function.and_then(|f| f.get("arguments")) {
        None | Some(Value::Null) => Call { mode: Mode::Strict, name: name.into(), arguments: String::new(), id, error: None },
        Some(Value::String(s)) => match object_text(s) {
            Ok(arguments) => Call { mode: Mode::Strict, name: name.into(), arguments, id, error: None },
            Err(e) => invalid(name, format!("function.arguments is not a JSON object: {e}")),
        },
        Some(Value::Object(_)) => {
            // Not what the API promises (a string), but unambiguous.
            let arguments = function.and_then(|f| f.get("arguments")).map(Value::to_string).unwrap_or_default();
            Call { mode: Mode::Lenient, name: name.into(), arguments, id, error: None }
        }
        Some(other) => invalid(name, format!("function.arguments is {}, not a JSON object", crate::util::json::kind_of(other))),
    }
}

/// `s` as a JSON object's text, written back in document order with repeated keys kept; `""` stays `""`.
fn object_text(s: &str) -> Result<String, String> {
    let s = s.trim();
    if s.is_empty() {
        return Ok(String::new());
    }
    match serde_json::from_str::<Json>(s) {
        Ok(j @ Json::Object(_)) => Ok(serde_json::to_string(&j).unwrap_or_default()),
        Ok(other) => Err(format!("it is {}", other.describe())),
        Err(e) => Err(e.to_string()),
    }
}

const OPEN: &str = "<tool_call>";
const CLOSE: &str = "</tool_call>";

/// The calls in a plain-text reply (`--tool-format hermes`, or an `openai` reply without `tool_calls`):
/// `<tool_call>` blocks when there are any; otherwise fenced code blocks; otherwise bare JSON objects
/// that name a tool.
pub fn from_text(text: &str) -> Parsed {
    let mut out = Parsed::default();
    if text.contains(OPEN) {
        let mut rest = text;
        while let Some(start) = rest.find(OPEN) {
            let body_start = &rest[start + OPEN.len()..];
            let (body, closed, next) = match body_start.find(CLOSE) {
                Some(end) => (&body_start[..end], true, &body_start[end + CLOSE.len()..]),
                // An unclosed block: up to the next opening tag, or the end (a reply cut short).
                None => match body_start.find(OPEN) {
                    Some(end) => (&body_start[..end], false, &body_start[end..]),
                    None => (body_start, false, ""),
                },
            };
            block(body, closed, &mut out);
            rest = next;
        }
        return out;
    }
    let fenced = fences(text);
    if !fenced.is_empty() {
        for body in fenced {
            scan(body, &mut out);
        }
        if !out.calls.is_empty() {
            return out;
        }
    }
    scan(text, &mut out);
    out
}

/// One `<tool_call>` block's body.
fn block(body: &str, closed: bool, out: &mut Parsed) {
    let inner = strip_fence(body.trim());
    if inner.is_empty() {
        out.push(invalid("an empty <tool_call> block"));
        return;
    }
    let mut values = serde_json::Deserializer::from_str(inner).into_iter::<Json>();
    let mut read = Vec::new();
    let mut trailing = false;
    loop {
        match values.next() {
            None => break,
            Some(Ok(v)) => read.push(v),
            Some(Err(e)) => {
                if read.is_empty() {
                    out.push(invalid(&format!("the <tool_call> block is not JSON: {e}")));
                    return;
                }
                trailing = true; // text after the objects: keep what was read, not strict
                break;
            }
        }
    }
    let several = read.len() > 1 || trailing || matches!(read.first(), Some(Json::Array(_)));
    for v in read {
        let items = match v {
            Json::Array(items) => items,
            other @ (Json::Null | Json::Bool(_) | Json::Number(_) | Json::String(_) | Json::Object(_)) => vec![other],
        };
        for item in items {
            match call_of(&item) {
                Some(Ok((mut call, canonical))) => {
                    call.mode =
                        if canonical && closed && !several && inner.len() == body.trim().len() { Mode::Strict } else { Mode::Lenient };
                    out.push(call);
                }
                Some(Err(call)) => out.push(call),
                None => out.push(invalid(&format!("the <tool_call> block holds {} with no tool name", item.describe()))),
            }
        }
    }
}

/// Every call-shaped JSON value in `text`, in order (objects, or arrays of them); anything else skipped.
/// Outside `<tool_call>` tags an object is a call only when it names one of the six tools or carries
/// arguments (`{"name": "Caroline", "age": 30}` is prose). When nothing is read but the text holds a `{`
/// that does not parse and names a tool after it (single quotes, a trailing comma, a reply cut by
/// `max_tokens`), one invalid call says so: the attempt counts, and the model is told.
fn scan(text: &str, out: &mut Parsed) {
    let before = out.calls.len() + out.dropped;
    let mut broken = false;
    let mut i = 0;
    while i < text.len() {
        let Some(off) = text[i..].find(['{', '[']) else { break };
        let start = i + off;
        let mut de = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Json>();
        match de.next() {
            Some(Ok(v)) => {
                let end = start + de.byte_offset();
                let items = match &v {
                    Json::Array(items) => items.clone(),
                    Json::Null | Json::Bool(_) | Json::Number(_) | Json::String(_) | Json::Object(_) => vec![v],
                };
                let mut any = false;
                for item in items.iter().filter(|item| looks_like_a_call(item)) {
                    match call_of(item) {
                        Some(Ok((mut call, _))) => {
                            call.mode = Mode::Lenient;
                            out.push(call);
                            any = true;
                        }
                        Some(Err(call)) => {
                            out.push(call);
                            any = true;
                        }
                        None => {}
                    }
                }
                if any {
                    i = end;
                    continue;
                }
            }
            Some(Err(_)) if text[start..].starts_with('{') && names_a_tool(&text[start..]) => broken = true,
            Some(Err(_)) | None => {}
        }
        i = start + 1;
    }
    if broken && out.calls.len() + out.dropped == before {
        out.push(invalid("the reply holds a tool call that is not valid JSON"));
    }
}

/// Outside tags: an object naming one of the six tools, or carrying an arguments key (then an unknown name
/// is still a call, refused by the environment so the model sees it).
fn looks_like_a_call(v: &Json) -> bool {
    let inner = match v.get("function") {
        Some(f @ Json::Object(_)) => f,
        _ => v,
    };
    let named_tool = ["name", "tool", "tool_name", "function"]
        .iter()
        .any(|k| matches!(inner.get(k), Some(Json::String(n)) if crate::tools::TOOL_NAMES.contains(&n.trim())));
    named_tool || ["arguments", "parameters", "args", "input"].iter().any(|k| inner.get(k).is_some())
}

/// The call an object describes: `Some(Ok((call, canonical)))` when it names a tool (`canonical`: exactly
/// `{"name", "arguments": {…}}`), `Some(Err(invalid))` when it names one but its arguments are unusable,
/// `None` when it names none.
fn call_of(v: &Json) -> Option<Result<(Call, bool), Call>> {
    let Json::Object(entries) = v else { return None };
    let get = |k: &str| entries.iter().find(|(key, _)| key == k).map(|(_, v)| v);
    // {"type": "function", "function": {"name", "arguments"}} and {"function": {…}}: the inner object.
    if let Some(inner @ Json::Object(_)) = get("function") {
        return call_of(inner).map(|r| r.map(|(c, _)| (c, false)));
    }
    let name = ["name", "tool", "tool_name", "function"].iter().find_map(|k| match get(k) {
        Some(Json::String(s)) if !s.trim().is_empty() => Some(s.trim().to_string()),
        _ => None,
    })?;
    let args_key = ["arguments", "parameters", "args", "input"].into_iter().find(|k| get(k).is_some());
    let arguments = match args_key.and_then(get) {
        None | Some(Json::Null) => String::new(),
        Some(o @ Json::Object(_)) => serde_json::to_string(o).unwrap_or_default(),
        Some(Json::String(s)) => match object_text(s) {
            Ok(t) => t,
            Err(e) => {
                let mut c = invalid(&format!("the arguments of {name} are not a JSON object: {e}"));
                c.name = name;
                return Some(Err(c));
            }
        },
        Some(other) => {
            let mut c = invalid(&format!("the arguments of {name} are {}, not a JSON object", other.describe()));
            c.name = name;
            return Some(Err(c));
        }
    };
    let canonical = entries.len() == 2 && get("name").is_some() && matches!(get("arguments"), Some(Json::Object(_)));
    Some(Ok((Call { mode: Mode::Lenient, name, arguments, id: None, error: None }, canonical)))
}

fn invalid(error: &str) -> Call {
    Call { mode: Mode::Invalid, name: String::new(), arguments: String::new(), id: None, error: Some(error.to_string()) }
}

/// Whether a text that is not JSON still looks like a tool call (`name` or `arguments` in double or single
/// quotes).
fn names_a_tool(text: &str) -> bool {
    ["\"name\"", "\"arguments\"", "'name'", "'arguments'"].iter().any(|k| text.contains(k))
}

/// The bodies of the fenced code blocks (```` ```json … ``` ````), closed or running to the end
/// ([`crate::text::reply::fences`], the one fence rule).
fn fences(text: &str) -> Vec<&str> {
    crate::text::reply::fences(text).into_iter().map(|f| f.body).collect()
}

/// A block's body without a code fence around it.
fn strip_fence(body: &str) -> &str {
    match crate::text::reply::fences(body).first() {
        Some(f) if f.at == 0 => f.body.trim(),
        Some(_) | None => body,
    }
}

#[cfg(test)]
mod tests;
