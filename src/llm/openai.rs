//! [`OpenAiChat`]: chat completions from any OpenAI-compatible `POST {base_url}/chat/completions`
//! endpoint (vLLM, SGLang, llama.cpp server, OpenAI), through `async-openai`.
//!
//! - Body: `{"model", "messages": [{"role", "content"}], "temperature", "max_tokens", "seed"}`; `seed`
//!   is the client's fixed seed (vLLM, SGLang, llama.cpp and OpenAI accept it; omitted when `None`).
//! - At most [`ChatConfig::concurrency`] requests in flight (a semaphore); each attempt is bounded by
//!   [`ChatConfig::timeout`]; 429, 5xx, timeouts and connection errors are retried up to
//!   [`ChatConfig::max_retries`] times with backoff (see [`crate::util::openai_compat`]); other statuses and
//!   malformed replies fail at once.
//! - Errors: all attempts timed out → [`LlmError::Timeout`]; an HTTP failure → [`LlmError::Unavailable`]
//!   naming the status, the server's message and the attempts; a 2xx reply without a text completion →
//!   [`LlmError::BadReply`].
//! - The key is sent as `Authorization: Bearer …` only, never logged; `Debug` redacts it.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::sync::Semaphore;

use super::{BoxFuture, ChatModel, ChatRequest, LlmError};
use crate::util::openai_compat::{
    build_client, classify, normalize_base_url, truncate, with_retries, ApiKey, Failure, FailureKind, GaveUp, OpenAiClient,
};

/// Default timeout of one attempt.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Default retries after the first attempt.
pub const DEFAULT_MAX_RETRIES: u32 = 3;
/// Default requests in flight.
pub const DEFAULT_CONCURRENCY: usize = 16;
/// Default seed sent with every request.
pub const DEFAULT_SEED: u64 = 42;

/// Settings of an [`OpenAiChat`]. Build with [`ChatConfig::new`] and struct update syntax.
#[derive(Debug, Clone)]
pub struct ChatConfig {
    /// API base including the version prefix (`http://127.0.0.1:8000/v1`).
    pub base_url: String,
    /// Model name sent with every request.
    pub model: String,
    /// Bearer token. Never logged, redacted in `Debug`.
    pub api_key: Option<ApiKey>,
    /// Timeout of one attempt (default 30 s).
    pub timeout: Duration,
    /// Retries after the first attempt on 429, 5xx, timeouts and connection errors (default 3).
    pub max_retries: u32,
    /// Requests in flight at once (default 16).
    pub concurrency: usize,
    /// Seed sent with every request (default 42); `None` leaves it out.
    pub seed: Option<u64>,
}

impl ChatConfig {
    /// A config for `model` at `base_url` with no key and the defaults.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        ChatConfig {
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            timeout: DEFAULT_TIMEOUT,
            max_retries: DEFAULT_MAX_RETRIES,
            concurrency: DEFAULT_CONCURRENCY,
            seed: Some(DEFAULT_SEED),
        }
    }
}

/// A [`ChatModel`] backed by an OpenAI-compatible endpoint (see the module doc).
pub struct OpenAiChat {
    config: ChatConfig,
    client: OpenAiClient,
    url: String,
    permits: Arc<Semaphore>,
}

impl std::fmt::Debug for OpenAiChat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiChat").field("config", &self.config).finish()
    }
}

#[derive(Serialize)]
struct Message<'a> {
    role: &'static str,
    content: &'a str,
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Vec<Message<'a>>,
    temperature: f32,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<u64>,
}

impl OpenAiChat {
    /// Checks the settings and builds the HTTP client. Sends nothing.
    pub fn new(mut config: ChatConfig) -> Result<Self, LlmError> {
        config.base_url = normalize_base_url(&config.base_url).map_err(|message| LlmError::Config { field: "llm_base_url", message })?;
        if config.model.trim().is_empty() {
            return Err(LlmError::Config { field: "llm_model", message: "must not be empty".into() });
        }
        if config.timeout.is_zero() {
            return Err(LlmError::Config { field: "llm_timeout", message: "must be positive".into() });
        }
        if config.concurrency == 0 {
            return Err(LlmError::Config { field: "llm_concurrency", message: "must be at least 1".into() });
        }
        let client = build_client(&config.base_url, config.api_key.as_ref(), config.timeout)
            .map_err(|message| LlmError::Config { field: "llm_base_url", message })?;
        let url = format!("{}/chat/completions", config.base_url);
        let permits = Arc::new(Semaphore::new(config.concurrency));
        Ok(OpenAiChat { config, client, url, permits })
    }

    /// The settings in use (`base_url` without a trailing slash).
    pub fn config(&self) -> &ChatConfig {
        &self.config
    }

    async fn send(&self, request: &ChatRequest) -> Result<String, LlmError> {
        let body = Body {
            model: &self.config.model,
            messages: request.messages.iter().map(|m| Message { role: m.role.as_str(), content: &m.content }).collect(),
            temperature: request.temperature,
            max_tokens: request.max_tokens,
            seed: self.config.seed,
        };
        let _permit = self.permits.acquire().await.map_err(|_| LlmError::Unavailable { message: "the client is shut down".into() })?;
        let (url, timeout) = (self.url.as_str(), self.config.timeout);
        let reply = with_retries("llm", url, timeout, self.config.max_retries, |attempt| {
            tracing::debug!(model = %self.config.model, attempt, "chat completion request");
            let chat = self.client.chat();
            let body = &body;
            async move {
                let value = chat.create_byot::<_, serde_json::Value>(body).await.map_err(|e| classify(e, url, timeout))?;
                completion_text(&value).map_err(|m| Failure::bad_reply(format!("{m} from {url}")))
            }
        })
        .await
        .map_err(into_llm_error)?;
        Ok(reply)
    }
}

impl ChatModel for OpenAiChat {
    fn model(&self) -> &str {
        &self.config.model
    }

    fn complete<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, Result<String, LlmError>> {
        Box::pin(self.send(request))
    }
}

/// `choices[0].message.content` as a string, or why not.
fn completion_text(v: &serde_json::Value) -> Result<String, String> {
    let choice = v.get("choices").and_then(|c| c.get(0)).ok_or_else(|| format!("no choices in the reply {}", truncate(&v.to_string())))?;
    match choice.get("message").and_then(|m| m.get("content")) {
        Some(serde_json::Value::String(s)) => Ok(s.clone()),
        _ => Err(format!("no message content in the reply {}", truncate(&v.to_string()))),
    }
}

fn into_llm_error(e: GaveUp) -> LlmError {
    match e.kind {
        FailureKind::Timeout => LlmError::Timeout { message: e.message },
        FailureKind::BadReply => LlmError::BadReply { message: e.message },
        FailureKind::Status(_) | FailureKind::Transport => LlmError::Unavailable { message: e.message },
    }
}

#[cfg(test)]
mod tests;
