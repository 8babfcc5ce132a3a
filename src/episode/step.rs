//! One tool call on an episode: refusals counted under the episode's lock, the optional LLM text of a
//! merge or split (`--llm-edit`), then prepare → embed → apply, the step count and the trace.

use crate::memory::EpisodeMemory;
use crate::tools::{self, Tool, ToolCall, ToolContext, ToolOutput};

use super::*;

impl Environment {
    /// Counts a call refused before it reached the episode (bad arguments). Unknown ids are ignored. It
    /// waits for the episode's lock like any call, so a refusal is counted even while another call on
    /// the episode is running.
    pub async fn record_rejection(&self, episode_id: &str) {
        if let Some(e) = self.registry.get(episode_id) {
            e.episode.lock().await.rejected += 1;
        }
    }

    /// Runs one tool call: validate, embed, apply, count the step, record the trace (and its metrics).
    pub async fn call_tool(&self, episode_id: &str, call: ToolCall) -> Result<ToolResult, EpisodeError> {
        self.call_tool_once(episode_id, call, None).await
    }

    /// [`Self::call_tool`] with an optional `call_id`: a call already applied under that id returns its
    /// first result without a new step ([`super::once`]).
    pub async fn call_tool_once(&self, episode_id: &str, call: ToolCall, call_id: Option<&str>) -> Result<ToolResult, EpisodeError> {
        if let Some(id) = call_id {
            super::create::valid_id("call_id", id)?;
        }
        let started = std::time::Instant::now();
        let tool = call.name();
        let mut r = self.call_tool_unobserved(episode_id, call, call_id).await;
        let seconds = started.elapsed().as_secs_f64();
        crate::util::prometheus::tool_call(tool, r.is_ok(), seconds);
        if let Ok(r) = &mut r {
            r.metrics.tool_ms = seconds * 1e3;
        }
        r
    }

    async fn call_tool_unobserved(&self, episode_id: &str, call: ToolCall, call_id: Option<&str>) -> Result<ToolResult, EpisodeError> {
        let entry = self.entry(episode_id)?;
        let mut ep = entry.episode.lock().await;
        self.check_open(&ep)?;
        // A retry of an applied call gets its result, even once the episode is scored or its budget spent.
        if let Some(id) = call_id {
            if let super::once::Seen::Again(result) = ep.applied.seen(id, &call)? {
                return Ok(*result);
            }
        }
        if ep.scored.is_some() {
            ep.rejected += 1;
            return Err(EpisodeError::precondition(format!("episode {episode_id} is scored; no further edits")));
        }
        if ep.steps_used >= ep.max_steps {
            ep.rejected += 1;
            return Err(EpisodeError::precondition(format!("episode {episode_id} has used its budget of {} steps", ep.max_steps)));
        }
        let ctx = ToolContext { step: ep.steps_used + 1, seed: ep.seed, limits: &self.config.limits.tools };
        let memories_before = ep.memory.len();
        // --llm-edit: the LLM writes the text of merge/split; nothing has changed yet if this is abandoned.
        let (edited, note) = self.llm_text(&ep.memory, &call).await;
        let mut output = match edited.as_ref().unwrap_or(&call) {
            ToolCall::Search(a) => self.run(&mut ep, a, ctx).await?,
            ToolCall::Manage(a) => self.run(&mut ep, a, ctx).await?,
            ToolCall::Delete(a) => self.run(&mut ep, a, ctx).await?,
            ToolCall::Sample(a) => self.run(&mut ep, a, ctx).await?,
            ToolCall::Merge(a) => self.run(&mut ep, a, ctx).await?,
            ToolCall::Split(a) => self.run(&mut ep, a, ctx).await?,
        };
        if let Some(note) = note {
            output.text.push('\n');
            output.text.push_str(&note);
        }
        ep.steps_used += 1;
        let step = ep.steps_used;
        ep.trace.push(step, &call, &call.arguments_json(), &output.result_ids());
        let steps_left = ep.max_steps - step;
        let memories = ep.memory.len();
        let metrics = StepMetrics {
            tool_ms: 0.0, // set by call_tool, which times the whole call
            memories,
            memories_delta: memories as i64 - memories_before as i64,
            memory_chars: ep.memory.total_chars(),
            steps_used: step,
            steps_left,
        };
        let result = ToolResult { output, step: StepInfo { step, steps_left, done: steps_left == 0 }, metrics };
        if let Some(id) = call_id {
            ep.applied.record(id, &call, &result);
        }
        Ok(result)
    }

    /// Prepare → embed → apply for one tool; a refused call is counted and changes nothing.
    async fn run<T: Tool + Sync>(&self, ep: &mut Episode, args: &T, ctx: ToolContext<'_>) -> Result<ToolOutput, EpisodeError> {
        let prepared = match args.prepare(&ep.memory, ctx) {
            Ok(p) => p,
            Err(e) => {
                ep.rejected += 1;
                return Err(e.into());
            }
        };
        // Nothing has changed yet: if this await is abandoned, the episode is as it was.
        let vectors = self.embed.embed(prepared.texts).await?;
        Ok(T::apply(&mut ep.memory, prepared.plan, &vectors, ctx))
    }

    /// With `--llm-edit`, the call with the LLM's text for merge/split and the note for the tool text;
    /// `(None, None)` when the call does not use LLM text; `(None, Some(note))` when the LLM failed or
    /// its reply was unusable and the offline strategy runs instead.
    async fn llm_text(&self, mem: &EpisodeMemory, call: &ToolCall) -> (Option<ToolCall>, Option<String>) {
        let Some(llm) = self.llm.as_ref().filter(|_| self.config.llm_edit) else { return (None, None) };
        let limits = &self.config.limits.tools;
        let Some((request, kind)) = tools::llm_edit::edit_request(mem, call, limits) else { return (None, None) };
        let reason = match llm.ask(&request).await {
            Ok(reply) => match tools::llm_edit::with_llm_text(call, kind, &reply, limits) {
                Ok(edited) => return (Some(edited), Some(tools::llm_edit::llm_note(llm.model()))),
                Err(reason) => format!("the LLM reply was unusable ({reason})"),
            },
            Err(e) => {
                tracing::warn!(error = %e, tool = call.name(), "LLM edit failed; using the offline strategy");
                format!("the LLM failed ({e})")
            }
        };
        (None, Some(tools::llm_edit::fallback_note(call, &reason)))
    }
}
