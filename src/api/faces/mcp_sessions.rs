//! A cap on MCP sessions. rmcp 3.11's `LocalSessionManager` opens a session (a worker task) for every
//! `initialize` without limit, and keeps a session's entry after its worker idled out until a DELETE names
//! it. This wrapper delegates everything to it, remembers when each session was last used, ends the ones
//! idle past rmcp's keep-alive (freeing their entries), and refuses a new session at `--mcp-max-sessions`.
//! The stateless 2026-07-28 wire opens no session and is never refused here. The HTTP layer
//! (`mcp::handle`) answers an `initialize` at the cap with 503 before rmcp sees it; the refusal here
//! covers the race between two.

use std::collections::HashMap;
use std::time::Duration;

use futures_util::Stream;
use parking_lot::Mutex;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, LocalSessionManagerError, SessionConfig};
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId, SessionManager};
use tokio::time::Instant;

/// Why a session call failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionsError {
    /// `--mcp-max-sessions` are open.
    #[error("Server at capacity: {active}/{max} MCP sessions open")]
    Full {
        /// Open sessions.
        active: usize,
        /// The cap.
        max: usize,
    },
    /// rmcp's own error.
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

/// rmcp's session manager with a cap and an idle sweep.
#[derive(Debug)]
pub struct CappedSessions {
    inner: LocalSessionManager,
    max: usize,
    idle: Duration,
    used: Mutex<HashMap<SessionId, Instant>>,
}

impl CappedSessions {
    /// At most `max` sessions; a session unused for longer than rmcp's keep-alive (plus a minute) is ended.
    pub fn new(max: usize) -> Self {
        let keep_alive = SessionConfig::default().keep_alive.unwrap_or(SessionConfig::DEFAULT_KEEP_ALIVE);
        CappedSessions {
            inner: LocalSessionManager::default(),
            max,
            idle: keep_alive + Duration::from_secs(60),
            used: Mutex::new(HashMap::new()),
        }
    }

    fn touch(&self, id: &SessionId) {
        if let Some(t) = self.used.lock().get_mut(id) {
            *t = Instant::now();
        }
    }

    /// Ends the sessions idle past the limit, then says whether the cap is reached: `Some((open, max))`.
    pub async fn full(&self) -> Option<(usize, usize)> {
        let expired: Vec<SessionId> = {
            let mut used = self.used.lock();
            let expired: Vec<SessionId> = used.iter().filter(|(_, t)| t.elapsed() > self.idle).map(|(id, _)| id.clone()).collect();
            for id in &expired {
                used.remove(id);
            }
            expired
        };
        for id in expired {
            let _ = self.inner.close_session(&id).await;
        }
        let open = self.used.lock().len();
        (open >= self.max).then_some((open, self.max))
    }
}

impl SessionManager for CappedSessions {
    type Error = SessionsError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        if let Some((active, max)) = self.full().await {
            return Err(SessionsError::Full { active, max });
        }
        let (id, transport) = self.inner.create_session().await?;
        self.used.lock().insert(id.clone(), Instant::now());
        Ok((id, transport))
    }

    async fn initialize_session(&self, id: &SessionId, message: ClientJsonRpcMessage) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.touch(id);
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.touch(id);
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.used.lock().remove(id);
        Ok(self.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        Ok(self.inner.create_stream(id, message).await?)
    }

    async fn accept_message(&self, id: &SessionId, message: ClientJsonRpcMessage) -> Result<(), Self::Error> {
        self.touch(id);
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        Ok(self.inner.resume(id, last_event_id).await?)
    }
}
