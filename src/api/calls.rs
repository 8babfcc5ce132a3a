//! The one path from a validated (or refused) tool call, or a score request, to its wire result, shared by
//! the gRPC service and the gateway the JSON faces use: a refused call counts against its episode, a run
//! call is applied at most once per `call_id`, and a score carries its steps and metrics. Each face only
//! reads its own request shape and writes its own reply shape around these.

use tonic::Status;

use super::grpc::convert::{named, tool_result};
use super::pb;
use crate::episode::Environment;
use crate::tools::{ToolCall, ToolError};

/// A tool call's result as every face shows it: the text, the typed result, its metrics and whether the
/// call spent the episode's last step.
pub struct CallResult {
    /// What the policy reads.
    pub text: String,
    /// The typed result (CallTool's `result`).
    pub result: pb::call_tool_response::Result,
    /// The call's metrics, by name.
    pub metrics: Vec<(&'static str, f64)>,
    /// Whether the call spent the episode's last step.
    pub done: bool,
}

/// Runs `call` on episode `id` (once per `call_id` when one is given). A call its arguments refused counts
/// as a rejection against the episode and changes nothing.
pub async fn run(env: &Environment, id: &str, call: Result<ToolCall, ToolError>, call_id: Option<&str>) -> Result<CallResult, Status> {
    let call = match call {
        Ok(call) => call,
        Err(e) => {
            env.record_rejection(id).await;
            return Err(e.into());
        }
    };
    let result = env.call_tool_once(id, call, call_id).await?;
    let metrics = result.metrics.pairs().to_vec();
    let done = result.step.done;
    let (text, result) = tool_result(result);
    Ok(CallResult { text, result, metrics, done })
}

/// Scores episode `id` (idempotent): ScoreEpisode's response with the steps used and the metrics.
pub async fn score(env: &Environment, id: &str) -> Result<pb::ScoreEpisodeResponse, Status> {
    let (b, state) = env.score_with_state(id).await?;
    let mut resp = pb::ScoreEpisodeResponse::from(b.as_ref());
    resp.steps_used = state.steps_used;
    resp.metrics = named(&crate::episode::score_metrics(&b));
    tracing::debug!(reward = b.reward, p_old = b.old.p, p_new = b.new.p, "scored");
    Ok(resp)
}
