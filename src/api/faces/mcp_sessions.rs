//! A cap on MCP sessions. rmcp 3.11's `LocalSessionManager` opens a session (a worker task) for every
//! `initialize` without limit, and keeps a session's entry after its worker idled out until a DELETE names
//! it. This wrapper delegates everything to it, remembers when each session was last used, ends the ones
//! idle past rmcp's keep-alive (freeing their entries), and refuses a new session at `--mcp-max-sessions`.
//! The stateless 2026-07-28 wire opens no session and is never refused here. The HTTP layer
//! (`mcp::handle`) answers an `initialize` at the cap with 503 before rmcp sees it; the refusal here
//! covers the race between two.

use std::time::Duration;

use futures_util::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, LocalSessionManagerError, SessionConfig};
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId, SessionManager};

use super::sessions::{Full, SessionTable};

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
    /// The sessions rmcp holds, capped and swept (the faces' one session table).
    used: SessionTable<SessionId, ()>,
}

impl CappedSessions {
    /// At most `max` sessions; a session unused for longer than rmcp's keep-alive (plus a minute) is ended.
    pub fn new(max: usize) -> Self {
        let keep_alive = SessionConfig::default().keep_alive.unwrap_or(SessionConfig::DEFAULT_KEEP_ALIVE);
        CappedSessions { inner: LocalSessionManager::default(), used: SessionTable::new(max, keep_alive + Duration::from_secs(60)) }
    }

    fn touch(&self, id: &SessionId) {
        self.used.with(id, |()| ());
    }

    /// Ends the sessions idle past the limit in rmcp too.
    async fn sweep(&self) {
        for (id, ()) in self.used.sweep(|()| true) {
            let _ = self.inner.close_session(&id).await;
        }
    }

    /// Ends the sessions idle past the limit, then says whether the cap is reached: `Some((open, max))`.
    pub async fn full(&self) -> Option<(usize, usize)> {
        self.sweep().await;
        let (open, max) = (self.used.len(), self.used.max());
        (open >= max).then_some((open, max))
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
        let (added, swept) = self.used.insert(id.clone(), (), |()| true);
        for (old, ()) in swept {
            let _ = self.inner.close_session(&old).await;
        }
        if let Err(Full { active, max }) = added {
            let _ = self.inner.close_session(&id).await;
            return Err(SessionsError::Full { active, max });
        }
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
        self.used.remove(id);
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
