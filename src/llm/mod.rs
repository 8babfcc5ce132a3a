//! The LLM side of memgym: a small chat-completion interface ([`ChatModel`]) with one real
//! implementation for any OpenAI-compatible endpoint ([`OpenAiChat`]: vLLM, SGLang, llama.cpp server,
//! OpenAI) and the answer cache in front of it ([`Llm`]).
//!
//! A leaf: it knows no prompt. Two features use it, each with its prompts beside it: the LLM evaluators
//! of the reward (`crate::reward::llm_eval`: `llm-f1`, `llm-judge`) and the LLM-backed `merge_memory` /
//! `split_memory` strategies (`crate::tools::llm_edit`). Both build their prompts from pure functions and
//! check the replies (`crate::text::reply` has the cleaning they share); this module only moves text.
//!
//! # Cache
//! An answer depends only on the model and the request (messages, `max_tokens`, temperature; the seed
//! is fixed per client), so [`Llm::ask`] keeps answers in a bounded LRU keyed by (model, 128-bit hash of
//! the request). Identical requests in flight at once are sent once: the others wait for that answer
//! (a GRPO group scores the same `p_old` prompt at the same moment). A failed request is not cached.

mod openai;

use std::future::Future;
use std::hash::{Hash, Hasher};
use std::num::NonZeroUsize;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::OnceCell;

pub use openai::{ChatConfig, OpenAiChat};

/// Default bound of the answer cache (entries).
pub const DEFAULT_CACHE_ENTRIES: usize = 16_384;

/// Errors of the LLM layer. `api::status` maps them: [`LlmError::Timeout`] → DeadlineExceeded,
/// [`LlmError::Unavailable`] and [`LlmError::BadReply`] → Unavailable, [`LlmError::Config`] →
/// InvalidArgument.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LlmError {
    /// Every attempt ran out of time.
    #[error("the LLM endpoint did not answer in time: {message}")]
    Timeout {
        /// URL, timeout and attempts.
        message: String,
    },
    /// The endpoint failed (connection, 429, 5xx after the retries) or refused the request (4xx).
    #[error("the LLM endpoint failed: {message}")]
    Unavailable {
        /// Status and the server's message.
        message: String,
    },
    /// The endpoint answered with something that is not a usable completion (malformed JSON, no
    /// choices, no content, a verdict that is neither CORRECT nor WRONG).
    #[error("the LLM reply is unusable: {message}")]
    BadReply {
        /// What is wrong and the start of the reply.
        message: String,
    },
    /// A setting of the client is invalid.
    #[error("invalid LLM setting {field}: {message}")]
    Config {
        /// The setting (`llm_base_url`, `llm_model`, ...).
        field: &'static str,
        /// What is wrong.
        message: String,
    },
}

/// Who speaks a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Instructions.
    System,
    /// The question.
    User,
}

impl Role {
    /// The API's name for the role.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
        }
    }
}

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ChatMessage {
    /// Speaker.
    pub role: Role,
    /// Text.
    pub content: String,
}

impl ChatMessage {
    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        ChatMessage { role: Role::User, content: content.into() }
    }
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        ChatMessage { role: Role::System, content: content.into() }
    }
}

/// One chat-completion request.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    /// The conversation.
    pub messages: Vec<ChatMessage>,
    /// Reply length cap.
    pub max_tokens: u32,
    /// Sampling temperature (0 for every request memgym makes).
    pub temperature: f32,
}

impl ChatRequest {
    /// A deterministic (temperature 0) request of one user message.
    pub fn user(content: impl Into<String>, max_tokens: u32) -> Self {
        ChatRequest { messages: vec![ChatMessage::user(content)], max_tokens, temperature: 0.0 }
    }

    fn key(&self, model: &str) -> u128 {
        let half = |salt: u64| {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            salt.hash(&mut h);
            model.hash(&mut h);
            self.messages.hash(&mut h);
            self.max_tokens.hash(&mut h);
            self.temperature.to_bits().hash(&mut h);
            h.finish()
        };
        (u128::from(half(0x6d65_6d67)) << 64) | u128::from(half(0x7379_6d21))
    }
}

/// A boxed future, for the object-safe [`ChatModel`].
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Something that completes chats. The real one is [`OpenAiChat`]; tests use scripted fakes.
pub trait ChatModel: Send + Sync + std::fmt::Debug {
    /// The model name (recorded in reward breakdowns and cache keys).
    fn model(&self) -> &str;
    /// The assistant's reply text.
    fn complete<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, Result<String, LlmError>>;
}

/// Counters of an [`Llm`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LlmStats {
    /// Requests handed to the model (each may have retried over HTTP).
    pub sent: u64,
    /// Answers served from the cache or from an identical request in flight.
    pub cached: u64,
}

/// A [`ChatModel`] with the answer cache in front (see the module doc).
pub struct Llm {
    model: Arc<dyn ChatModel>,
    cache: Option<Mutex<lru::LruCache<u128, Arc<OnceCell<String>>>>>,
    sent: AtomicU64,
    cached: AtomicU64,
}

impl std::fmt::Debug for Llm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Llm").field("model", &self.model).field("stats", &self.stats()).finish()
    }
}

impl Llm {
    /// Wraps `model` with a cache of at most `cache_entries` answers (0: no cache, no sharing).
    pub fn new(model: Arc<dyn ChatModel>, cache_entries: usize) -> Self {
        Llm {
            model,
            cache: NonZeroUsize::new(cache_entries).map(|n| Mutex::new(lru::LruCache::new(n))),
            sent: AtomicU64::new(0),
            cached: AtomicU64::new(0),
        }
    }

    /// The model name.
    pub fn model(&self) -> &str {
        self.model.model()
    }

    /// Counters since start.
    pub fn stats(&self) -> LlmStats {
        LlmStats { sent: self.sent.load(Ordering::Relaxed), cached: self.cached.load(Ordering::Relaxed) }
    }

    /// The reply to `request`, from the cache when an identical request was answered before.
    pub async fn ask(&self, request: &ChatRequest) -> Result<String, LlmError> {
        let Some(cache) = &self.cache else {
            self.sent.fetch_add(1, Ordering::Relaxed);
            return self.complete_observed(request).await;
        };
        let key = request.key(self.model.model());
        let cell = cache.lock().get_or_insert(key, || Arc::new(OnceCell::new())).clone();
        let mut ran = false;
        let answer = cell
            .get_or_try_init(|| {
                ran = true;
                self.sent.fetch_add(1, Ordering::Relaxed);
                self.complete_observed(request)
            })
            .await?;
        if !ran {
            self.cached.fetch_add(1, Ordering::Relaxed);
            crate::util::prometheus::llm_cache_hit();
        }
        Ok(answer.clone())
    }

    /// One request to the endpoint, timed and counted ([`crate::util::prometheus`]).
    async fn complete_observed(&self, request: &ChatRequest) -> Result<String, LlmError> {
        let started = std::time::Instant::now();
        let r = self.model.complete(request).await;
        crate::util::prometheus::llm_request(r.is_ok(), started.elapsed().as_secs_f64());
        r
    }
}

#[cfg(test)]
pub(crate) mod fake {
    //! A scripted [`ChatModel`] for unit tests.
    use std::collections::VecDeque;
    use std::time::Duration;

    use super::*;

    /// A reply function.
    pub type ReplyFn = Box<dyn Fn(&ChatRequest) -> Result<String, LlmError> + Send + Sync>;

    /// Replies by a function of the last user message, or from a queue first; records every request.
    pub struct ScriptedChat {
        /// Model name.
        pub name: String,
        /// Replies used first, one per request.
        pub queue: Mutex<VecDeque<Result<String, LlmError>>>,
        /// Then this.
        pub reply: ReplyFn,
        /// Every request seen.
        pub seen: Mutex<Vec<ChatRequest>>,
        /// Delay before answering.
        pub delay: Duration,
    }

    impl std::fmt::Debug for ScriptedChat {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("ScriptedChat").field("name", &self.name).finish()
        }
    }

    impl ScriptedChat {
        /// Always answers with `reply(request)`.
        pub fn new(reply: impl Fn(&ChatRequest) -> Result<String, LlmError> + Send + Sync + 'static) -> Self {
            ScriptedChat {
                name: "fake-model".into(),
                queue: Mutex::new(VecDeque::new()),
                reply: Box::new(reply),
                seen: Mutex::new(Vec::new()),
                delay: Duration::ZERO,
            }
        }
    }

    impl ChatModel for ScriptedChat {
        fn model(&self) -> &str {
            &self.name
        }
        fn complete<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, Result<String, LlmError>> {
            Box::pin(async move {
                self.seen.lock().push(request.clone());
                if !self.delay.is_zero() {
                    tokio::time::sleep(self.delay).await;
                }
                let queued = self.queue.lock().pop_front();
                queued.unwrap_or_else(|| (self.reply)(request))
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::fake::ScriptedChat;
    use super::*;

    #[tokio::test]
    async fn identical_requests_are_answered_once_even_when_concurrent() {
        let mut chat = ScriptedChat::new(|r| Ok(format!("echo {}", r.messages[0].content)));
        chat.delay = Duration::from_millis(50);
        let chat = Arc::new(chat);
        let llm = Arc::new(Llm::new(chat.clone(), 8));
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let llm = llm.clone();
            tasks.push(tokio::spawn(async move { llm.ask(&ChatRequest::user("q1", 32)).await }));
        }
        for t in tasks {
            assert_eq!(t.await.unwrap().unwrap(), "echo q1");
        }
        assert_eq!(chat.seen.lock().len(), 1);
        assert_eq!(llm.stats(), LlmStats { sent: 1, cached: 7 });
        // Another prompt, or the same prompt with another length cap, is another request.
        llm.ask(&ChatRequest::user("q2", 32)).await.unwrap();
        llm.ask(&ChatRequest::user("q1", 16)).await.unwrap();
        assert_eq!(chat.seen.lock().len(), 3);
    }

    #[tokio::test]
    async fn failures_are_not_cached_and_the_cache_is_bounded() {
        let chat = Arc::new(ScriptedChat::new(|r| Ok(r.messages[0].content.clone())));
        chat.queue.lock().push_back(Err(LlmError::Unavailable { message: "HTTP 503".into() }));
        let llm = Llm::new(chat.clone(), 2);
        let req = ChatRequest::user("a", 8);
        assert!(matches!(llm.ask(&req).await, Err(LlmError::Unavailable { .. })));
        assert_eq!(llm.ask(&req).await.unwrap(), "a");
        assert_eq!(llm.ask(&req).await.unwrap(), "a");
        assert_eq!(chat.seen.lock().len(), 2, "the failure was retried, the success was cached");
        // Two more prompts evict "a" from a cache of two.
        llm.ask(&ChatRequest::user("b", 8)).await.unwrap();
        llm.ask(&ChatRequest::user("c", 8)).await.unwrap();
        llm.ask(&req).await.unwrap();
        assert_eq!(chat.seen.lock().len(), 5);
        // Without a cache every request is sent.
        let plain = Llm::new(chat.clone(), 0);
        plain.ask(&req).await.unwrap();
        plain.ask(&req).await.unwrap();
        assert_eq!(plain.stats(), LlmStats { sent: 2, cached: 0 });
    }
}
