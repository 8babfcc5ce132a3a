//! Exactly-once tool calls by `call_id`: a retry gets the first result without a new step (also after the
//! budget is spent), a reused id with another call is refused naming the field, and an id whose result
//! is no longer kept is refused naming its step.

use super::*;

const NOTE: &str = r#"{"operation": "create", "content": "Caroline keeps a garden journal."}"#;

#[tokio::test]
async fn a_retried_call_id_is_applied_once() {
    let env = env();
    let mut req = locomo("once", "conv-26:q2");
    req.max_steps = Some(2);
    env.create_episode(req).await.unwrap();
    let before = env.get_episode("once", false).await.unwrap().0.memory_count;
    let first = env.call_tool_once("once", call("manage_memory", NOTE), Some("c-1")).await.unwrap();
    let again = env.call_tool_once("once", call("manage_memory", NOTE), Some("c-1")).await.unwrap();
    assert_eq!((first.output.clone(), first.step), (again.output, again.step), "the first call's result");
    let (state, trace) = env.get_episode("once", true).await.unwrap();
    assert_eq!((state.steps_used, state.memory_count, trace.len()), (1, before + 1, 1), "applied once");

    // The same id with another call is a misuse of the key; nothing runs.
    let other = env.call_tool_once("once", call("search_memory", r#"{"query": "garden"}"#), Some("c-1")).await.unwrap_err();
    assert!(matches!(&other, EpisodeError::InvalidArgument(crate::util::invalid::Invalid { field, .. }) if field == "call_id"), "{other}");
    assert!(other.to_string().contains("step 1"), "{other}");

    // The call that spends the budget can still be retried, and so can one after scoring.
    let last = env.call_tool_once("once", call("search_memory", r#"{"query": "garden"}"#), Some("c-2")).await.unwrap();
    assert!(last.step.done);
    assert_eq!(env.call_tool_once("once", call("search_memory", r#"{"query": "garden"}"#), Some("c-2")).await.unwrap().step, last.step);
    env.score_episode("once").await.unwrap();
    assert_eq!(env.call_tool_once("once", call("manage_memory", NOTE), Some("c-1")).await.unwrap().step.step, 1);
    // A new id on a spent episode is refused as before.
    assert!(env.call_tool_once("once", call("manage_memory", NOTE), Some("c-3")).await.is_err());

    let bad = env.call_tool_once("once", call("manage_memory", NOTE), Some("has space")).await.unwrap_err();
    assert!(matches!(&bad, EpisodeError::InvalidArgument(crate::util::invalid::Invalid { field, .. }) if field == "call_id"), "{bad}");
}

#[tokio::test]
async fn only_the_last_results_are_kept() {
    let env = env();
    env.create_episode(locomo("kept", "conv-26:q2")).await.unwrap();
    let n = crate::episode::once::KEPT + 1;
    for i in 0..n {
        env.call_tool_once("kept", call("search_memory", &format!(r#"{{"query": "q{i}"}}"#)), Some(&format!("k-{i}"))).await.unwrap();
    }
    // The newest are answered from memory; the oldest is known but its result is gone.
    let newest = n - 1;
    let again =
        env.call_tool_once("kept", call("search_memory", &format!(r#"{{"query": "q{newest}"}}"#)), Some(&format!("k-{newest}"))).await;
    assert_eq!(again.unwrap().step.step as usize, n);
    let gone = env.call_tool_once("kept", call("search_memory", r#"{"query": "q0"}"#), Some("k-0")).await.unwrap_err();
    assert!(matches!(gone, EpisodeError::FailedPrecondition { .. }) && gone.to_string().contains("step 1"), "{gone}");
    assert_eq!(env.get_episode("kept", false).await.unwrap().0.steps_used as usize, n, "no retry made a step");
}
