//! API keys (`serve --api-key-file`): without a key nobody reaches an episode or a bank; a read-only key
//! reads and writes nothing. Anyone who can reach a port could otherwise read and rewrite every bank.
//!
//! - **The file**: one key per line, `KEY` (read-write) or `KEY read-only`; `#` starts a comment. A key is
//!   16 to 256 visible ASCII characters. The file is read again when it changes (its modification time is
//!   checked at most once a second), so keys rotate without a restart; a file that no longer reads keeps
//!   the keys in force and logs why.
//! - **The request** presents its key as gRPC metadata or an HTTP header, `authorization: Bearer KEY` or
//!   `api-key: KEY` (or `x-api-key: KEY`, as the `openreward` SDK sends it; an empty value is none). No
//!   key, or an unknown one, is UNAUTHENTICATED (`API_KEY_MISSING`, `API_KEY_INVALID`); a read-only key on
//!   anything but [`READS`] is PERMISSION_DENIED (`READ_ONLY_KEY`), as qdrant answers.
//! - **Open by choice**: gRPC health and reflection, and the HTTP faces' `/health`, need no key.
//!   `/metrics` does (a scraper sends a bearer token).
//!
//! Keys are compared in time independent of where they differ, and never logged.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::RwLock;
use tonic::Code;

use crate::api::layers::stack::{AroundLayer, Call, Hook};
use crate::api::status::refusal;

/// What a key may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Everything.
    ReadWrite,
    /// The RPCs of [`READS`] only.
    ReadOnly,
}

/// The RPCs a read-only key may call (`Service/Method`; `Service/*` for all of a service).
pub const READS: &[&str] = &[
    "memgym.v1.Dataset/*",
    "memgym.v1.MemoryEnv/ListTools",
    "memgym.v1.MemoryEnv/GetEpisode",
    "memgym.v1.MemoryEnv/ListMemories",
    "memgym.v1.Banks/GetBank",
    "memgym.v1.Banks/ListBanks",
    "memgym.v1.Banks/GetExperience",
    "memgym.v1.Banks/ListExperiences",
    "memgym.v1.Banks/GetStats",
    "memgym.v1.Banks/ExportBank",
    "memgym.v1.AgentMemory/GetAgentSummary",
    "memgym.v1.AgentMemory/ExportAgentMemory",
];

/// The gRPC services that need no key.
const OPEN_SERVICES: &[&str] =
    &["grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"];

/// Parses a key file's text.
pub fn parse(text: &str) -> Result<HashMap<String, Access>, String> {
    let mut keys = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let key = words.next().unwrap_or_default();
        let access = match (words.next(), words.next()) {
            (None, _) => Access::ReadWrite,
            (Some("read-only"), None) => Access::ReadOnly,
            (Some("read-write"), None) => Access::ReadWrite,
            _ => return Err(format!("line {}: expected `KEY` or `KEY read-only`", i + 1)),
        };
        if !(16..=256).contains(&key.len()) || !key.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!("line {}: a key is 16 to 256 visible ASCII characters", i + 1));
        }
        if keys.insert(key.to_string(), access).is_some() {
            return Err(format!("line {}: a key given twice", i + 1));
        }
    }
    if keys.is_empty() {
        return Err("no key".into());
    }
    Ok(keys)
}

/// The keys in force, read again when their file changes.
#[derive(Debug)]
pub struct Keys {
    path: PathBuf,
    state: RwLock<(Option<SystemTime>, HashMap<String, Access>)>,
    checked_secs: AtomicU64,
}

impl Keys {
    /// Reads `path` (refused, naming the flag, when it does not read).
    pub fn load(path: &Path) -> Result<Arc<Keys>, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("--api-key-file {}: {e}", path.display()))?;
        let keys = parse(&text).map_err(|e| format!("--api-key-file {}: {e}", path.display()))?;
        let mtime = std::fs::metadata(path).and_then(|m| m.modified()).ok();
        Ok(Arc::new(Keys { path: path.to_path_buf(), state: RwLock::new((mtime, keys)), checked_secs: AtomicU64::new(now_secs()) }))
    }

    /// Reads the file again if it changed, at most once a second.
    fn refresh(&self) {
        let now = now_secs();
        if self.checked_secs.swap(now, Ordering::Relaxed) == now {
            return;
        }
        let mtime = std::fs::metadata(&self.path).and_then(|m| m.modified()).ok();
        if mtime == self.state.read().0 {
            return;
        }
        match std::fs::read_to_string(&self.path).map_err(|e| e.to_string()).and_then(|t| parse(&t)) {
            Ok(keys) => {
                tracing::info!(keys = keys.len(), "API keys read again");
                *self.state.write() = (mtime, keys);
            }
            Err(e) => tracing::error!(path = %self.path.display(), error = %e, "the API key file no longer reads; the keys in force stay"),
        }
    }

    /// What the presented key may do, if it is one.
    pub fn access(&self, presented: &str) -> Option<Access> {
        self.refresh();
        let state = self.state.read();
        let mut found = None;
        for (key, access) in &state.1 {
            if same(key.as_bytes(), presented.as_bytes()) {
                found = Some(*access);
            }
        }
        found
    }
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Equality in time that does not depend on where two strings of one length differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The key a request presents: `authorization: Bearer KEY`, else `api-key: KEY`, else `x-api-key: KEY`
/// (what the `openreward` SDK sends to an ORS server).
pub fn presented(headers: &http::HeaderMap) -> Option<&str> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).filter(|v| !v.trim().is_empty());
    let bearer = header(http::header::AUTHORIZATION.as_str()).and_then(|v| v.strip_prefix("Bearer "));
    bearer.or_else(|| header("api-key")).or_else(|| header("x-api-key")).map(str::trim)
}

/// Why a request for `what` is refused, if it is: (code, reason, message). `read`: a read-only key may
/// make it.
pub fn decide(keys: &Keys, headers: &http::HeaderMap, what: &str, read: bool) -> Option<(Code, &'static str, String)> {
    let Some(key) = presented(headers) else {
        return Some((
            Code::Unauthenticated,
            "API_KEY_MISSING",
            "an API key is required: send `authorization: Bearer KEY` or `api-key: KEY`".into(),
        ));
    };
    match keys.access(key) {
        None => Some((Code::Unauthenticated, "API_KEY_INVALID", "the API key is not one the server accepts".into())),
        Some(Access::ReadWrite) => None,
        Some(Access::ReadOnly) if read => None,
        Some(Access::ReadOnly) => Some((Code::PermissionDenied, "READ_ONLY_KEY", format!("a read-only API key may not call {what}"))),
    }
}

/// Whether `rpc` (`Service/Method`) is in [`READS`].
pub fn is_read(rpc: &str) -> bool {
    let service = rpc.split('/').next().unwrap_or("");
    READS.iter().any(|r| *r == rpc || r.strip_suffix("/*").is_some_and(|s| s == service))
}

/// The gRPC hook: refuses a request without an accepted key before its route runs (no keys: open).
#[derive(Debug, Clone, Default)]
pub struct Auth(pub Option<Arc<Keys>>);

/// Wraps every gRPC route in [`Auth`].
pub type AuthLayer = AroundLayer<Auth>;

impl Hook for Auth {
    type Seen = Option<tonic::Status>;

    fn see<B>(&self, req: &http::Request<B>) -> Option<tonic::Status> {
        let keys = self.0.as_ref()?;
        let rpc = req.uri().path().trim_start_matches('/');
        if OPEN_SERVICES.iter().any(|s| rpc.split('/').next() == Some(*s)) {
            return None;
        }
        decide(keys, req.headers(), rpc, is_read(rpc)).map(|(code, reason, message)| refusal(code, reason, message, None))
    }

    fn around<E: Send + 'static>(refused: Option<tonic::Status>, call: Call<E>) -> Call<E> {
        match refused {
            None => call,
            Some(s) => Box::pin(async move { Ok(s.into_http()) }),
        }
    }
}

/// Axum middleware of the HTTP faces: the same keys, `/health` and `/ready` open; a read-only key may only `GET`.
pub async fn http_auth(keys: Arc<Keys>, req: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    use axum::response::IntoResponse;
    if matches!(req.uri().path(), "/health" | "/ready") {
        return next.run(req).await;
    }
    let what = format!("{} {}", crate::util::excerpt::name(req.method().as_str()), crate::util::excerpt::quoted(req.uri().path()));
    match decide(&keys, req.headers(), &what, req.method() == http::Method::GET) {
        None => next.run(req).await,
        Some((code, reason, message)) => {
            let status = if code == Code::Unauthenticated { http::StatusCode::UNAUTHORIZED } else { http::StatusCode::FORBIDDEN };
            let body = serde_json::json!({"detail": [{"loc": ["header", "authorization"], "msg": message, "type": "auth", "reason": reason, "retryable": false}]});
            (status, axum::Json(body)).into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_file_reads_keys_and_their_access() {
        let keys = parse("# rotated 2026-11\nabcdefghijklmnop\nread-only-key-0123 read-only  # a scraper\n\n").unwrap();
        assert_eq!(keys["abcdefghijklmnop"], Access::ReadWrite);
        assert_eq!(keys["read-only-key-0123"], Access::ReadOnly);
        for (bad, why) in [
            ("short", "16 to 256"),
            ("abcdefghijklmnop sometimes", "expected"),
            ("abcdefghijklmnop\nabcdefghijklmnop", "twice"),
            ("# nothing\n", "no key"),
        ] {
            assert!(parse(bad).unwrap_err().contains(why), "{bad}");
        }
    }

    #[test]
    fn read_only_keys_reach_the_reads_only() {
        assert!(is_read("memgym.v1.Dataset/ListQuestions"));
        assert!(is_read("memgym.v1.Banks/ExportBank"));
        assert!(!is_read("memgym.v1.Banks/ApplyOperations"));
        assert!(!is_read("memgym.v1.MemoryEnv/CreateEpisode"));
        assert!(same(b"abc", b"abc") && !same(b"abc", b"abd") && !same(b"abc", b"abcd"));
        let mut h = http::HeaderMap::new();
        assert_eq!(presented(&h), None);
        h.insert("api-key", "k-1".parse().unwrap());
        assert_eq!(presented(&h), Some("k-1"));
        h.insert(http::header::AUTHORIZATION, "Bearer k-2".parse().unwrap());
        assert_eq!(presented(&h), Some("k-2"), "the bearer token first");
        let mut x = http::HeaderMap::new();
        x.insert("x-api-key", "".parse().unwrap());
        assert_eq!(presented(&x), None, "an empty key (the SDK's when it has none) is no key");
        x.insert("x-api-key", "k-3".parse().unwrap());
        assert_eq!(presented(&x), Some("k-3"));
    }
}
