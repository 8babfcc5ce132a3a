//! What the policy is shown: the opening messages (the verl dataset's, built by one rule:
//! [`crate::dataset::verl::prompt_messages`]), the tool schemas (`ListTools`'), and the two ways of
//! giving it tools and answering its calls.
//!
//! - `openai` (default): the schemas go in the request's `tools` parameter; the endpoint (vLLM,
//!   SGLang, llama.cpp's server, `scripts/llm-server.py`) renders them with the model's chat template
//!   and returns `tool_calls`. Each call's result is a `tool` message answering its `tool_call_id`.
//! - `hermes`: no `tools` parameter; the tools block is written into the system message the way
//!   Qwen2.5's and Hermes' chat templates write it, and calls are read from the reply's text.
//!
//! Results of calls that have no id (every `hermes` call, and `openai` calls read from the text because
//! the endpoint parsed none) go back in one `user` message, each inside `<tool_response>` tags, as
//! Qwen2.5's template renders consecutive `tool` messages. A refused call's result is `Error: …`, the
//! environment's message, as the verl adapter shows it.

use serde_json::{json, Value};

use crate::dataset::verl::prompt_messages;

/// How tools are given to the policy and its calls read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolFormat {
    /// The OpenAI `tools` parameter and `tool_calls`.
    #[serde(rename = "openai")]
    OpenAi,
    /// A Hermes/Qwen2.5 tools block in the system message, `<tool_call>` tags in the reply.
    Hermes,
}

impl ToolFormat {
    /// The name on the command line and in files.
    pub fn name(self) -> &'static str {
        match self {
            ToolFormat::OpenAi => "openai",
            ToolFormat::Hermes => "hermes",
        }
    }
}

impl std::str::FromStr for ToolFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "openai" => Ok(ToolFormat::OpenAi),
            "hermes" => Ok(ToolFormat::Hermes),
            other => Err(format!("unknown tool format {}: expected openai or hermes", crate::util::excerpt::quoted(other))),
        }
    }
}

/// The first messages of a rollout: the verl row's system (`system`) and user messages; under `hermes` the
/// system message carries the tools block after the task.
pub fn opening(format: ToolFormat, system: &str, question: &str, tools: &[Value]) -> Vec<Value> {
    prompt_messages(system, question)
        .into_iter()
        .map(|(role, content)| {
            let content = match (format, role) {
                (ToolFormat::Hermes, "system") => hermes_system(&content, tools),
                _ => content,
            };
            json!({"role": role, "content": content})
        })
        .collect()
}

/// A system message with the tools block, as Qwen2.5's (and Hermes 2 Pro's) chat template writes it:
/// each schema as `tojson` renders it (Python's separators, `", "` and `": "`).
pub fn hermes_system(system: &str, tools: &[Value]) -> String {
    let mut out = String::with_capacity(system.len() + 4096);
    out.push_str(system);
    out.push_str(
        "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function \
         signatures within <tools></tools> XML tags:\n<tools>",
    );
    for t in tools {
        out.push('\n');
        out.push_str(&python_json(t));
    }
    out.push_str(
        "\n</tools>\n\nFor each function call, return a json object with function name and arguments within \
         <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>",
    );
    out
}

/// The `tool` message answering call `id` (`openai`).
pub fn tool_message(id: &str, text: &str) -> Value {
    json!({"role": "tool", "tool_call_id": id, "content": text})
}

/// One `user` message holding the results of calls without ids, each in `<tool_response>` tags.
pub fn tool_responses(texts: &[&str]) -> Value {
    let parts: Vec<String> = texts.iter().map(|t| format!("<tool_response>\n{t}\n</tool_response>")).collect();
    json!({"role": "user", "content": parts.join("\n")})
}

/// `value` as Python's `json.dumps` writes it by default (what Jinja's `tojson` gives a chat template):
/// `", "` between items, `": "` after keys, non-ASCII kept.
pub fn python_json(value: &Value) -> String {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, PythonFormatter);
    serde::Serialize::serialize(value, &mut ser).expect("writing JSON to memory cannot fail");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

struct PythonFormatter;

impl serde_json::ser::Formatter for PythonFormatter {
    fn begin_array_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::verl::{user_prompt, SYSTEM_PROMPT};

    #[test]
    fn the_opening_is_the_verl_rows_prompt() {
        let tools = crate::tools::llm_calls::tool_schemas(&crate::tools::ToolLimits::default());
        let m = opening(ToolFormat::OpenAi, SYSTEM_PROMPT, "When did Caroline go to the LGBTQ support group?", &tools);
        assert_eq!(m[0], json!({"role": "system", "content": SYSTEM_PROMPT}));
        assert_eq!(m[1], json!({"role": "user", "content": user_prompt("When did Caroline go to the LGBTQ support group?")}));
        let h = opening(ToolFormat::Hermes, SYSTEM_PROMPT, "q?", &tools);
        let system = h[0]["content"].as_str().unwrap();
        assert!(system.starts_with(SYSTEM_PROMPT), "the task first, then the tools block");
        // One line per schema, keys in ListTools' order (what a Python client's json.loads keeps).
        assert_eq!(system.matches("\n{\"function\": {\"description\": ").count(), 6, "{system}");
        assert!(system.ends_with("</tool_call>"));
        assert_eq!(h[1], json!({"role": "user", "content": user_prompt("q?")}));
    }

    #[test]
    fn python_json_writes_as_json_dumps_does() {
        let v = json!({"b": [1, 2.5, "é"], "a": {"x": null, "y": true}});
        assert_eq!(python_json(&v), r#"{"a": {"x": null, "y": true}, "b": [1, 2.5, "é"]}"#);
        assert_eq!(serde_json::from_str::<Value>(&python_json(&v)).unwrap(), v);
    }

    #[test]
    fn results_without_ids_go_back_as_tool_responses() {
        let m = tool_responses(&["[m0001 0.50] a", "Error: no memory m0099"]);
        assert_eq!(m["role"], "user");
        assert_eq!(
            m["content"],
            "<tool_response>\n[m0001 0.50] a\n</tool_response>\n<tool_response>\nError: no memory m0099\n</tool_response>"
        );
        assert_eq!(tool_message("call_1", "ok"), json!({"role": "tool", "tool_call_id": "call_1", "content": "ok"}));
        assert_eq!("hermes".parse::<ToolFormat>(), Ok(ToolFormat::Hermes));
        assert!("xml".parse::<ToolFormat>().unwrap_err().contains("openai or hermes"));
    }
}
