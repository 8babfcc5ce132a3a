//! The gRPC face's part of replicas and draining ([`crate::episode::replica`] holds the rule). Every reply
//! names the replica that answered (the `memgym-replica` header), so a trainer or a test can see where
//! a call went. While the server drains, calls to the banks, agent-memory and learn services are refused
//! with a retryable `DRAINING`: their state is in the shared database, so a retry through the proxy is
//! served by another replica. Episode calls are decided by the episode layer (new episodes refused, the
//! episodes held here served).

use std::sync::Arc;

use tonic::server::NamedService;
use tonic::{Code, Status};

use crate::api::layers::stack::{Call, Hook};
use crate::api::pb::agent_memory_server::AgentMemoryServer;
use crate::api::pb::banks_server::BanksServer;
use crate::api::pb::learn_server::LearnServer;
use crate::api::status::refusal;
use crate::api::{AgentService, BanksService, LearnService};
use crate::episode::replica::REPLICA_HEADER;
use crate::episode::Environment;

/// The services a draining server refuses: those whose state another replica shares.
const SHARED_SERVICES: [&str; 3] = [
    <BanksServer<BanksService> as NamedService>::NAME,
    <AgentMemoryServer<AgentService> as NamedService>::NAME,
    <LearnServer<LearnService> as NamedService>::NAME,
];

/// The hook: the environment whose drain flag it reads, and its replica name as the reply header (made
/// once, not per call).
#[derive(Debug, Clone)]
pub struct Drain {
    env: Arc<Environment>,
    header: Option<http::HeaderValue>,
}

impl Drain {
    /// The hook for `env`'s replica.
    pub fn new(env: Arc<Environment>) -> Drain {
        let header = env.replica().name().and_then(|n| http::HeaderValue::from_str(n).ok());
        Drain { env, header }
    }
}

impl Hook for Drain {
    type Seen = (Option<Status>, Option<http::HeaderValue>);

    fn see<B>(&self, req: &http::Request<B>) -> Self::Seen {
        let replica = self.env.replica();
        let service = req.uri().path().trim_start_matches('/').split('/').next().unwrap_or("");
        let refused = (replica.draining() && SHARED_SERVICES.contains(&service)).then(|| {
            let who = replica.name().map(|r| format!(" (replica {r})")).unwrap_or_default();
            let message = format!(
                "this server{who} is draining: it takes no new {service} calls; retry, and the proxy sends the call to another replica"
            );
            refusal(Code::Unavailable, "DRAINING", message, None)
        });
        (refused, self.header.clone())
    }

    fn around<E: Send + 'static>((refused, name): Self::Seen, call: Call<E>) -> Call<E> {
        Box::pin(async move {
            let mut response = match refused {
                Some(s) => s.into_http(),
                None => call.await?,
            };
            if let Some(name) = name {
                response.headers_mut().insert(REPLICA_HEADER, name);
            }
            Ok(response)
        })
    }
}
