//! The policy: any OpenAI-compatible chat endpoint (vLLM, SGLang, llama.cpp's server,
//! `scripts/llm-server.py`, a hosted API) asked for the next turn of a rollout.
//!
//! Unlike [`crate::llm`] (a text-in, text-out client with a cache, for the evaluators), a rollout needs the
//! whole reply as received (the message with its `tool_calls`, the finish reason, the token counts), sends
//! messages of every role and the `tools` parameter, and must never be served from a cache: two samples of
//! a GRPO group ask the same thing and must get independent answers. The transport, the retry policy and
//! the error messages are [`crate::util::openai_compat`]'s, shared with the other two clients: 429, 5xx,
//! timeouts and connection errors are retried with backoff; what is left is a failed rollout, never a
//! reward of 0.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::util::openai_compat::{
    build_client, classify, normalize_base_url, truncate, with_retries, ApiKey, Failure, GaveUp, OpenAiClient,
};

/// What the policy is asked to do with the tools (`--tool-choice`): the request's `tool_choice`, sent with
/// the `tools` parameter (so under `--tool-format openai` only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ToolChoice {
    /// Each reply may call tools or answer in text; a reply with no call ends the rollout.
    #[default]
    Auto,
    /// Each reply must call a tool (an engine that honours it decodes under a grammar of the tools'
    /// schemas): the policy can never stop by answering in text, so every rollout runs --max-turns replies.
    Required,
}

impl ToolChoice {
    /// The name on the command line, in requests and in files.
    pub fn name(self) -> &'static str {
        match self {
            ToolChoice::Auto => "auto",
            ToolChoice::Required => "required",
        }
    }
}

/// The endpoint and the sampling settings of every request.
#[derive(Debug, Clone)]
pub struct PolicyConfig {
    /// API base including the version prefix (`http://127.0.0.1:8080/v1`).
    pub base_url: String,
    /// Model name sent with every request.
    pub model: String,
    /// Bearer token; never logged, never written to the output.
    pub api_key: Option<ApiKey>,
    /// Timeout of one attempt.
    pub timeout: Duration,
    /// Retries after the first attempt (429, 5xx, timeouts, connection errors).
    pub max_retries: u32,
    /// Sampling temperature.
    pub temperature: f32,
    /// Nucleus sampling.
    pub top_p: f32,
    /// Tokens per reply.
    pub max_tokens: u32,
    /// The `tool_choice` sent with the tools.
    pub tool_choice: ToolChoice,
}

/// One reply, as received.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The response body.
    pub body: Value,
    /// `choices[0].message`.
    pub message: Value,
    /// `choices[0].finish_reason`.
    pub finish_reason: Option<String>,
    /// `usage.prompt_tokens`.
    pub prompt_tokens: Option<u64>,
    /// `usage.completion_tokens`.
    pub completion_tokens: Option<u64>,
    /// Wall time of the request, retries included.
    pub latency: Duration,
}

/// A client of the policy's endpoint.
pub struct Policy {
    config: PolicyConfig,
    client: OpenAiClient,
    url: String,
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy").field("config", &self.config).finish()
    }
}

impl Policy {
    /// Checks the settings (each error names its flag) and builds the HTTP client. Sends nothing.
    pub fn new(mut config: PolicyConfig) -> Result<Self, String> {
        config.base_url = normalize_base_url(&config.base_url).map_err(|m| format!("--policy-base-url {m}"))?;
        if config.model.trim().is_empty() {
            return Err("--policy-model must not be empty".into());
        }
        if config.timeout.is_zero() {
            return Err("--policy-timeout-ms must be positive".into());
        }
        if !(config.temperature.is_finite() && (0.0..=2.0).contains(&config.temperature)) {
            return Err(format!("--temperature must be between 0 and 2, got {}", config.temperature));
        }
        if !(config.top_p.is_finite() && config.top_p > 0.0 && config.top_p <= 1.0) {
            return Err(format!("--top-p must be in (0, 1], got {}", config.top_p));
        }
        if config.max_tokens == 0 {
            return Err("--max-tokens must be positive".into());
        }
        let client =
            build_client(&config.base_url, config.api_key.as_ref(), config.timeout).map_err(|m| format!("--policy-base-url: {m}"))?;
        let url = format!("{}/chat/completions", config.base_url);
        Ok(Policy { config, client, url })
    }

    /// The settings in use.
    pub fn config(&self) -> &PolicyConfig {
        &self.config
    }

    /// The request body of one turn: the messages so far, the tools under `openai` with the configured
    /// `tool_choice`, the sampling settings and `seed`.
    pub fn body(&self, messages: &[Value], tools: Option<&[Value]>, seed: u64) -> Value {
        let mut body = json!({
            "model": self.config.model,
            "messages": messages,
            "temperature": self.config.temperature,
            "top_p": self.config.top_p,
            "max_tokens": self.config.max_tokens,
            "seed": seed,
        });
        if let Some(tools) = tools {
            body["tools"] = Value::Array(tools.to_vec());
            body["tool_choice"] = json!(self.config.tool_choice.name());
        }
        body
    }

    /// Sends one turn and returns the reply; retried as the module doc says.
    pub async fn complete(&self, body: &Value) -> Result<Reply, GaveUp> {
        let started = Instant::now();
        let (url, timeout) = (self.url.as_str(), self.config.timeout);
        let value = with_retries("policy", url, timeout, self.config.max_retries, |attempt| {
            tracing::debug!(model = %self.config.model, attempt, "policy request");
            let chat = self.client.chat();
            async move {
                let v = chat.create_byot::<_, Value>(body).await.map_err(|e| classify(e, url, timeout))?;
                if v.pointer("/choices/0/message").is_some_and(Value::is_object) {
                    Ok(v)
                } else {
                    Err(Failure::bad_reply(format!("no choices[0].message in the reply from {url}: {}", truncate(&v.to_string()))))
                }
            }
        })
        .await?;
        let usage = |k: &str| value.get("usage").and_then(|u| u.get(k)).and_then(Value::as_u64);
        Ok(Reply {
            message: value.pointer("/choices/0/message").cloned().unwrap_or(Value::Null),
            finish_reason: value.pointer("/choices/0/finish_reason").and_then(Value::as_str).map(str::to_string),
            prompt_tokens: usage("prompt_tokens"),
            completion_tokens: usage("completion_tokens"),
            latency: started.elapsed(),
            body: value,
        })
    }
}
