//! Agent banks served: the agent-memory design's memory, one document per bank, in the banks' database.
//!
//! The seed rewrites a JSON file in place, resets it silently when it is corrupt and loses updates when
//! two processes record at once. Here every change reads the bank's document and version in one
//! snapshot, changes a copy, and commits the new document with the version check in one durable
//! transaction before it replies. This server's writers of a bank take turns (the bank's lock); a
//! write that loses a race with another replica is read and applied again (after a random back-off,
//! like the experience banks' writes), unless it named `expected_version`, which makes it ABORTED.
//! A document that does not read is an error naming the database and the bank, never an empty memory.
//!
//! Consolidation asks the LLM outside any lock, then applies the rules to the document as it is by then
//! (rules only add to `global_rules`, so an episode recorded meanwhile is kept). A reply that gives no
//! rules changes nothing and is reported; the counter does not move.

use std::sync::Arc;

use super::consolidate::{apply_rules, due, heuristic, llm_prompt, mark_consolidated, parse_llm_rules};
use super::{build_memory_context, record_episode, summary, AgentMemory, Episode, RecordOutcome, Summary};
use crate::banks::store::{BankMeta, Commit, Committed, StoreError};
use crate::banks::{check_name, BankError, Banks, Kind, KIND_AGENT, WRITE_ATTEMPTS};
use crate::llm::{ChatMessage, ChatRequest};
use crate::util::excerpt::quoted;

/// The consolidation reply's token cap (the agent-memory design's `max_tokens`).
const CONSOLIDATION_MAX_TOKENS: u32 = 300;

/// How `MaybeConsolidate` makes its rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsolidateMode {
    /// The LLM when the server has one, the heuristic otherwise (the seed's rule, on the server's
    /// configuration instead of an API key).
    Auto,
    /// `[HIGH SCORE x.xx] …` rules from the logged high-scoring episodes.
    Heuristic,
    /// Five one-sentence rules from the LLM, `[CONSOLIDATED] …` (FailedPrecondition without an LLM).
    Llm,
}

/// What a consolidation did.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Consolidation {
    /// Whether rules were merged and the counter advanced.
    pub ran: bool,
    /// `"heuristic"` or `"llm"` when it ran or asked; empty when it was not due.
    pub mode: &'static str,
    /// The global rules that are new after the merge.
    pub rules_added: Vec<String>,
    /// Why an LLM reply was not used (then nothing changed).
    pub error: String,
    /// The document's counters after the call.
    pub total_episodes: u64,
    /// `total_episodes` at the last consolidation.
    pub last_consolidated_at: Option<u64>,
}

/// Runs `f` (parsing or writing a document of up to a few megabytes of JSON) off the async workers.
async fn off_workers<T: Send + 'static>(bank: &str, what: &str, f: impl FnOnce() -> T + Send + 'static) -> Result<T, BankError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| BankError::FailedPrecondition { message: format!("{what} the agent memory of bank {} failed: {e}", quoted(bank)) })
}

impl Banks {
    /// The agent bank's counters and document.
    async fn agent_doc(&self, name: &str) -> Result<(BankMeta, AgentMemory), BankError> {
        check_name("bank", name)?;
        let Some((meta, doc)) = self.store.document(name).await? else { return Err(BankError::BankNotFound { name: name.to_string() }) };
        if meta.kind != KIND_AGENT {
            return Err(BankError::WrongKind { name: name.to_string(), kind: meta.kind, wanted: KIND_AGENT });
        }
        let Some(doc) = doc else { return Ok((meta, AgentMemory::new())) };
        let read = off_workers(name, "reading", move || AgentMemory::import(&doc)).await?;
        let mem = read.map_err(|e| {
            BankError::Store(StoreError::Corrupt {
                location: format!("{}, bank {}", self.store.location(), quoted(name)),
                message: format!("its agent memory document does not read ({e})"),
            })
        })?;
        Ok((meta, mem))
    }

    /// Applies `change` to the bank's document and commits it (see the module doc). `change` may run
    /// more than once (on a newer document after a lost race); an error from it changes nothing.
    async fn agent_write<T>(
        &self,
        name: &str,
        expected: Option<u64>,
        mut change: impl FnMut(&mut AgentMemory) -> Result<T, BankError>,
    ) -> Result<(T, BankMeta), BankError> {
        check_name("bank", name)?;
        let handle = self.handle(name);
        let _turn = handle.write().await;
        for attempt in 0..WRITE_ATTEMPTS {
            let (meta, mut mem) = self.agent_doc(name).await?;
            if let Some(e) = expected.filter(|e| *e != meta.version) {
                return Err(BankError::VersionConflict { name: name.to_string(), expected: e, current: meta.version });
            }
            let out = change(&mut mem)?;
            let next = BankMeta { version: meta.version + 1, ..meta.clone() };
            let document = off_workers(name, "writing", move || mem.export()).await?;
            let commit = Commit { put: Vec::new(), delete: Vec::new(), clear: false, meta: next.clone(), document: Some(document) };
            match self.store.commit(meta.version, Arc::new(commit)).await? {
                Committed::Done => return Ok((out, next)),
                Committed::Conflict { current: None } => return Err(BankError::BankNotFound { name: name.to_string() }),
                Committed::Conflict { current: Some(current) } => {
                    if let Some(e) = expected {
                        return Err(BankError::VersionConflict { name: name.to_string(), expected: e, current });
                    }
                    Self::back_off(attempt).await;
                }
            }
        }
        Err(BankError::FailedPrecondition {
            message: format!("bank {} kept changing under this write ({WRITE_ATTEMPTS} attempts); nothing was written", quoted(name)),
        })
    }

    /// The agent-memory design's `record_episode`: validated first (a refused episode changes nothing), durable before
    /// the reply.
    pub async fn record_episode(
        &self,
        bank: &str,
        episode: &Episode,
        expected: Option<u64>,
    ) -> Result<(RecordOutcome, BankMeta), BankError> {
        let now = super::super::now_rfc3339();
        self.agent_write(bank, expected, |mem| Ok(record_episode(mem, episode, &now)?)).await
    }

    /// The agent-memory design's `build_memory_context`, byte for byte.
    pub async fn memory_context(&self, bank: &str, task: Option<&str>, max_rules: usize, max_recent: usize) -> Result<String, BankError> {
        let (_, mem) = self.agent_doc(bank).await?;
        Ok(build_memory_context(&mem, task, max_rules, max_recent))
    }

    /// The agent-memory design's `memory_summary`, with the bank's counters.
    pub async fn agent_summary(&self, bank: &str) -> Result<(Summary, BankMeta), BankError> {
        let (meta, mem) = self.agent_doc(bank).await?;
        Ok((summary(&mem), meta))
    }

    /// The agent-memory design's `maybe_consolidate_memory`: runs when 20 episodes have been recorded since the last
    /// one (or with `force`).
    pub async fn consolidate(
        &self,
        bank: &str,
        mode: ConsolidateMode,
        force: bool,
        expected: Option<u64>,
    ) -> Result<(Consolidation, BankMeta), BankError> {
        let (meta, mem) = self.agent_doc(bank).await?;
        if let Some(e) = expected.filter(|e| *e != meta.version) {
            return Err(BankError::VersionConflict { name: bank.to_string(), expected: e, current: meta.version });
        }
        let idle = |mem: &AgentMemory, mode, error: String| Consolidation {
            ran: false,
            mode,
            error,
            total_episodes: mem.total_episodes,
            last_consolidated_at: mem.last_consolidated_at,
            ..Consolidation::default()
        };
        // A mode the server cannot serve is refused whether or not a consolidation is due.
        let llm = match mode {
            ConsolidateMode::Heuristic => None,
            ConsolidateMode::Auto => self.llm().cloned(),
            ConsolidateMode::Llm => Some(self.require_llm("mode LLM")?),
        };
        if !force && !due(&mem) {
            return Ok((idle(&mem, "", String::new()), meta));
        }
        let (mode, rules) = match llm {
            None => ("heuristic", None),
            Some(llm) => {
                let request = ChatRequest {
                    messages: vec![ChatMessage::user(llm_prompt(&mem))],
                    max_tokens: CONSOLIDATION_MAX_TOKENS,
                    temperature: 0.0,
                };
                let reply = llm.ask(&request).await?;
                match parse_llm_rules(&reply) {
                    Ok(rules) => ("llm", Some(rules)),
                    Err(why) => {
                        let error = format!("the LLM reply gave no rules ({why}); nothing changed and the counter was not advanced");
                        return Ok((idle(&mem, "llm", error), meta));
                    }
                }
            }
        };
        let (c, meta) = self
            .agent_write(bank, expected, |mem| {
                let before = mem.global_rules.clone();
                match &rules {
                    Some(r) => apply_rules(mem, r.clone(), true),
                    None => {
                        let r = heuristic(mem);
                        apply_rules(mem, r, false);
                    }
                }
                mark_consolidated(mem);
                Ok(Consolidation {
                    ran: true,
                    mode,
                    rules_added: mem.global_rules.iter().filter(|r| !before.contains(r)).cloned().collect(),
                    error: String::new(),
                    total_episodes: mem.total_episodes,
                    last_consolidated_at: mem.last_consolidated_at,
                })
            })
            .await?;
        Ok((c, meta))
    }

    /// Imports the agent-memory design's document into an agent bank (created if missing); returns the bank's counters
    /// and the document's episode count. A bank that has recorded episodes is replaced only with `replace`.
    pub async fn import_agent(&self, bank: &str, json: &str, replace: bool, expected: Option<u64>) -> Result<(BankMeta, u64), BankError> {
        let json = json.to_string();
        let imported = off_workers(bank, "reading", move || AgentMemory::import(&json)).await??;
        let total = imported.total_episodes;
        // A bank this call creates is removed again if the write is refused: a refusal leaves no trace.
        let created = self.store.meta(bank).await?.is_none();
        self.create(bank, Kind::Agent, None, true).await?;
        let written = self
            .agent_write(bank, expected, |mem| {
                if !replace && *mem != AgentMemory::new() {
                    return Err(BankError::FailedPrecondition {
                        message: format!("bank {} already holds an agent memory; import with replace to overwrite it", quoted(bank)),
                    });
                }
                *mem = imported.clone();
                Ok(())
            })
            .await;
        match written {
            Ok(((), meta)) => Ok((meta, total)),
            Err(e) => {
                if created {
                    let _ = self.delete(bank, Some(0)).await;
                }
                Err(e)
            }
        }
    }

    /// The agent-memory design's document of an agent bank.
    pub async fn export_agent(&self, bank: &str) -> Result<String, BankError> {
        let (_, mem) = self.agent_doc(bank).await?;
        off_workers(bank, "writing", move || mem.export()).await
    }
}
