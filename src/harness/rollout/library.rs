//! An experience bank's library as the policy sees it, read from a server's banks: `memgym rollout
//! --experience-bank` puts it into the system prompt ([`super::with_library`]), and `memgym learn` reads it
//! before each epoch and for its A/B.

use tonic::transport::Channel;

use crate::api::pb;
use crate::api::pb::banks_client::BanksClient;

/// A channel to the server at `addr` ([`super::env::channel`]).
pub async fn channel(addr: &str) -> anyhow::Result<Channel> {
    super::env::channel(addr).await.map_err(anyhow::Error::msg)
}

/// A banks client on `addr` (host:port).
pub async fn banks_client(addr: &str) -> anyhow::Result<BanksClient<Channel>> {
    Ok(BanksClient::new(channel(addr).await?).max_decoding_message_size(crate::api::MAX_MESSAGE_BYTES))
}

/// A bank's version, size and library as the policy sees it (FormatForPrompt, every experience in id
/// order, read-only).
pub async fn library(client: &mut BanksClient<Channel>, bank: &str) -> anyhow::Result<(u64, u32, String)> {
    let meta =
        client.get_bank(pb::GetBankRequest { name: bank.to_string() }).await.map_err(|s| anyhow::anyhow!("{}", s.message()))?.into_inner();
    let text = client
        .format_for_prompt(pb::FormatForPromptRequest { bank: bank.to_string(), read_only: true, ..Default::default() })
        .await
        .map_err(|s| anyhow::anyhow!("{}", s.message()))?
        .into_inner()
        .text;
    Ok((meta.version, meta.size, text))
}
