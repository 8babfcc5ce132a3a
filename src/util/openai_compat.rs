//! HTTP plumbing shared by the two clients of OpenAI-compatible endpoints: the embeddings client
//! ([`crate::embed::OpenAiEmbedder`]) and the chat client ([`crate::llm::OpenAiChat`]).
//!
//! Both go through `async-openai` with its "bring your own types" calls, and both need the same three
//! things it does not give: one retry policy that is theirs alone (429, 5xx, timeouts and connection
//! errors, with capped exponential backoff), error messages that keep the HTTP status whatever the shape
//! of the error body (OpenAI, vLLM, TEI, FastAPI, plain text), and no `Authorization` header when there is
//! no key. Keeping it in one place means a fix to either reaches both.
//!
//! The API key is handed to `async-openai` explicitly (possibly empty), so `OPENAI_API_KEY` from the
//! environment is never sent by accident; callers decide where a key comes from. Keys are never logged.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use async_openai::config::OpenAIConfig as ClientConfig;
use async_openai::error::{ApiError, ApiErrorResponse, OpenAIError};
use async_openai::middleware::HttpRequestFactory;
use async_openai::Client;

/// First wait between attempts; doubled each retry.
const BACKOFF_BASE: Duration = Duration::from_millis(100);
/// Longest wait between attempts.
const BACKOFF_CAP: Duration = Duration::from_secs(5);
/// Longest server message kept in an error.
pub const MAX_MESSAGE: usize = 500;

/// The `async-openai` client type both callers use.
pub type OpenAiClient = Client<ClientConfig>;

/// Checks a base URL and strips the trailing slash: `http(s)://host[:port]/prefix`.
pub fn normalize_base_url(url: &str) -> Result<String, String> {
    let url = url.trim().trim_end_matches('/').to_string();
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(format!("must start with http:// or https://, got {url:?}"));
    }
    Ok(url)
}

/// An endpoint's bearer token. Its `Debug` never shows it, so every config that holds one derives `Debug`
/// and stays safe to log; only [`ApiKey::expose`] reads it, for the `Authorization` header.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// A key (surrounding whitespace, such as a key file's newline, removed).
    pub fn new(key: impl AsRef<str>) -> ApiKey {
        ApiKey(key.as_ref().trim().to_string())
    }

    /// The key itself, for the request header only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// A client for `base_url` with its own reqwest client (per-attempt `timeout`), our [`Transport`] and
/// an explicit key (`None` → no `Authorization` header).
pub fn build_client(base_url: &str, api_key: Option<&ApiKey>, timeout: Duration) -> Result<OpenAiClient, String> {
    let http = reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        .user_agent(concat!("memgym/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {}", error_chain(&e)))?;
    let config = ClientConfig::new()
        .with_api_base(base_url.to_string())
        .with_api_key(api_key.map(ApiKey::expose).unwrap_or_default().to_string())
        .with_org_id("")
        .with_project_id("");
    Ok(Client::with_config(config).with_http_client(http.clone()).with_http_service(Transport { http }))
}

/// What kind of failure an attempt met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The attempt ran out of time (retried).
    Timeout,
    /// A non-2xx status (429 and 5xx are retried).
    Status(u16),
    /// Connection refused, reset, DNS... (retried).
    Transport,
    /// A 2xx reply that is not what the API promises (not retried).
    BadReply,
}

/// Why one attempt failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Worth another attempt (429, 5xx, timeouts, connection errors).
    pub retry: bool,
    /// What happened.
    pub kind: FailureKind,
    /// What happened, with the URL and status.
    pub message: String,
}

impl Failure {
    /// A reply that is not what the API promises (not retried).
    pub fn bad_reply(message: impl Into<String>) -> Self {
        Failure { retry: false, kind: FailureKind::BadReply, message: message.into() }
    }

    /// An attempt that ran out of time.
    pub fn timeout(url: &str, timeout: Duration) -> Self {
        Failure { retry: true, kind: FailureKind::Timeout, message: format!("request to {url} timed out after {timeout:?}") }
    }
}

/// The last failure after the retries, with the attempt count in the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GaveUp {
    /// The last failure's kind.
    pub kind: FailureKind,
    /// The last failure was retryable (the endpoint is down or overloaded, not refusing the request).
    pub retryable: bool,
    /// "HTTP 500 from …: … (gave up after 4 attempts)".
    pub message: String,
    /// Attempts made.
    pub attempts: u32,
}

/// Runs `attempt` until it succeeds, fails with a non-retryable [`Failure`], or `max_retries` retries
/// are spent; each attempt is bounded by `timeout`. Waits [`backoff`] between attempts. `label` names
/// the caller in the warnings logged before each retry.
pub async fn with_retries<T, F, Fut>(label: &str, url: &str, timeout: Duration, max_retries: u32, mut attempt: F) -> Result<T, GaveUp>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<T, Failure>>,
{
    let mut n: u32 = 0;
    loop {
        n += 1;
        let failure = match tokio::time::timeout(timeout, attempt(n)).await {
            Ok(Ok(v)) => return Ok(v),
            Ok(Err(f)) => f,
            Err(_) => Failure::timeout(url, timeout),
        };
        let attempts = if n == 1 { "1 attempt".to_string() } else { format!("{n} attempts") };
        if !failure.retry || n > max_retries {
            let how = if failure.retry { "gave up after" } else { "not retried," };
            return Err(GaveUp {
                kind: failure.kind,
                retryable: failure.retry,
                message: format!("{} ({how} {attempts})", failure.message),
                attempts: n,
            });
        }
        let wait = backoff(n - 1);
        tracing::warn!(client = %label, attempt = n, ?wait, error = %failure.message, "request failed; retrying");
        tokio::time::sleep(wait).await;
    }
}

/// Classifies an `async-openai` error of a request to `url`.
pub fn classify(e: OpenAIError, url: &str, timeout: Duration) -> Failure {
    match e {
        OpenAIError::ApiError(ApiErrorResponse { status_code, api_error }) => Failure {
            retry: status_code.as_u16() == 429 || status_code.is_server_error(),
            kind: FailureKind::Status(status_code.as_u16()),
            message: format!(
                "HTTP {status_code} from {url}: {}{}",
                truncate(&api_error.message),
                if status_code.as_u16() == 404 { " (does the base URL include the API prefix, e.g. /v1?)" } else { "" }
            ),
        },
        OpenAIError::Reqwest(e) => {
            if e.is_timeout() {
                Failure::timeout(url, timeout)
            } else {
                Failure {
                    retry: e.is_connect() || e.is_request() || e.is_body(),
                    kind: FailureKind::Transport,
                    message: format!("request to {url} failed: {}", error_chain(&e)),
                }
            }
        }
        OpenAIError::JSONDeserialize(e, body) => Failure::bad_reply(format!("invalid response from {url}: {e}; body: {}", truncate(&body))),
        e @ (OpenAIError::FileSaveError(_)
        | OpenAIError::FileReadError(_)
        | OpenAIError::StreamError(_)
        | OpenAIError::Boxed(_)
        | OpenAIError::InvalidArgument(_)) => Failure { retry: false, kind: FailureKind::Transport, message: e.to_string() },
    }
}

/// Wait before retry number `n` (0-based): 100 ms × 2^n, at most 5 s.
pub fn backoff(n: u32) -> Duration {
    BACKOFF_BASE.saturating_mul(2u32.saturating_pow(n)).min(BACKOFF_CAP)
}

/// The HTTP transport handed to `async-openai` instead of its default one: no retry layer (retries are
/// [`with_retries`]), no empty `Authorization` header, and every non-2xx response turned into an
/// [`OpenAIError::ApiError`] that keeps the status, whatever the shape of the error body.
#[derive(Clone)]
pub struct Transport {
    http: reqwest::Client,
}

impl tower_service::Service<HttpRequestFactory> for Transport {
    type Response = reqwest::Response;
    type Error = OpenAIError;
    type Future = Pin<Box<dyn Future<Output = Result<reqwest::Response, OpenAIError>> + Send + 'static>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, factory: HttpRequestFactory) -> Self::Future {
        let http = self.http.clone();
        Box::pin(async move {
            let mut request = factory.build().await?;
            let headers = request.headers_mut();
            if headers.get(reqwest::header::AUTHORIZATION).is_some_and(|v| v.as_bytes().trim_ascii() == b"Bearer") {
                headers.remove(reqwest::header::AUTHORIZATION);
            }
            let response = http.execute(request).await?;
            let status = response.status();
            if status.is_success() {
                return Ok(response);
            }
            let body = response.bytes().await?;
            let message = error_message(&body);
            Err(OpenAIError::ApiError(ApiErrorResponse { status_code: status, api_error: ApiError { message, ..ApiError::default() } }))
        })
    }
}

/// The human part of an error body: OpenAI's `{"error": {"message": ..}}`, TEI's `{"error": ".."}`,
/// `{"message": ..}`, FastAPI's `{"detail": ..}`, or the raw text.
pub fn error_message(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let Ok(json) = serde_json::from_slice::<serde_json::Value>(body) else {
        return if text.trim().is_empty() { "(empty body)".into() } else { text.trim().to_string() };
    };
    let pick = |v: &serde_json::Value| -> Option<String> {
        match v {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Null => None,
            serde_json::Value::Bool(_) | serde_json::Value::Number(_) | serde_json::Value::Array(_) | serde_json::Value::Object(_) => {
                Some(v.to_string())
            }
        }
    };
    json.get("error")
        .and_then(|e| e.get("message").and_then(pick).or_else(|| pick(e)))
        .or_else(|| json.get("message").and_then(pick))
        .or_else(|| json.get("detail").and_then(pick))
        .unwrap_or_else(|| text.trim().to_string())
}

/// `s` cut to [`MAX_MESSAGE`] characters, with "..." when cut.
pub fn truncate(s: &str) -> String {
    match s.char_indices().nth(MAX_MESSAGE) {
        Some((cut, _)) => format!("{}...", &s[..cut]),
        None => s.to_string(),
    }
}

/// `error: source: source ...` (reqwest's own `Display` hides the cause, e.g. "connection refused").
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let c = cause.to_string();
        if !s.contains(&c) {
            s.push_str(": ");
            s.push_str(&c);
        }
        source = cause.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[test]
    fn a_key_never_shows_in_debug_nor_in_the_configs_that_hold_it() {
        let key = ApiKey::new("  sk-live-4242\n");
        assert_eq!(key.expose(), "sk-live-4242");
        assert_eq!(format!("{key:?}"), "ApiKey(<redacted>)");
        let chat = crate::llm::ChatConfig { api_key: Some(key.clone()), ..crate::llm::ChatConfig::new("http://x/v1", "m") };
        let embed = crate::embed::OpenAiConfig { api_key: Some(key), ..crate::embed::OpenAiConfig::new("http://x/v1", "m") };
        for shown in [format!("{chat:?}"), format!("{embed:?}")] {
            assert!(!shown.contains("sk-live") && shown.contains("<redacted>"), "{shown}");
        }
    }

    #[test]
    fn error_bodies_of_common_servers_are_read() {
        assert_eq!(error_message(br#"{"error":{"message":"bad input","type":"x"}}"#), "bad input");
        assert_eq!(error_message(br#"{"error":"Input validation error","error_type":"Validation"}"#), "Input validation error");
        assert_eq!(error_message(br#"{"object":"error","message":"vllm says no","code":400}"#), "vllm says no");
        assert_eq!(error_message(br#"{"detail":"Not Found"}"#), "Not Found");
        assert_eq!(error_message(b"plain text\n"), "plain text");
        assert_eq!(error_message(b""), "(empty body)");
        assert_eq!(truncate(&"x".repeat(MAX_MESSAGE + 10)).len(), MAX_MESSAGE + 3);
        assert_eq!(backoff(0), Duration::from_millis(100));
        assert_eq!(backoff(3), Duration::from_millis(800));
        assert_eq!(backoff(40), BACKOFF_CAP);
    }

    #[test]
    fn base_urls_are_checked_and_trimmed() {
        assert_eq!(normalize_base_url(" http://127.0.0.1:8000/v1/ ").as_deref(), Ok("http://127.0.0.1:8000/v1"));
        assert!(normalize_base_url("127.0.0.1:8000").unwrap_err().contains("http://"));
    }

    #[tokio::test]
    async fn retries_only_retryable_failures_and_counts_attempts() {
        let calls = AtomicU32::new(0);
        let r: Result<u32, GaveUp> = with_retries("t", "u", Duration::from_secs(1), 3, |n| {
            calls.fetch_add(1, Ordering::SeqCst);
            async move {
                if n < 3 {
                    Err(Failure { retry: true, kind: FailureKind::Status(503), message: "busy".into() })
                } else {
                    Ok(n)
                }
            }
        })
        .await;
        assert_eq!(r, Ok(3));

        let r: Result<(), GaveUp> =
            with_retries("t", "u", Duration::from_secs(1), 3, |_| async { Err(Failure::bad_reply("HTTP 400")) }).await;
        let e = r.unwrap_err();
        assert_eq!((e.attempts, e.retryable, e.message.as_str()), (1, false, "HTTP 400 (not retried, 1 attempt)"));

        let r: Result<(), GaveUp> = with_retries("t", "http://x", Duration::from_millis(50), 2, |_| async {
            tokio::time::sleep(Duration::from_secs(10)).await;
            Ok(())
        })
        .await;
        let e = r.unwrap_err();
        assert!(e.kind == FailureKind::Timeout && e.retryable && e.attempts == 3, "{e:?}");
        assert!(e.message.contains("timed out after 50ms") && e.message.ends_with("(gave up after 3 attempts)"), "{}", e.message);
    }
}
