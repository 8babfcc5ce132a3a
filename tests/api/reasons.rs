//! Typed refusals through a real gRPC client: every refusal carries `google.rpc.ErrorInfo` (reason, domain,
//! `retryable`, `field`) and a retryable one `google.rpc.RetryInfo`, read back with tonic-types.

use memgym::api::pb;
use tonic_types::StatusExt;

use crate::helpers::spawn_app;

fn info(s: &tonic::Status) -> (String, String, Option<String>, bool) {
    let d = s.get_error_details();
    let i = d.error_info().unwrap_or_else(|| panic!("no ErrorInfo in {s:?}"));
    (i.reason.clone(), i.metadata["retryable"].clone(), i.metadata.get("field").cloned(), d.retry_info().is_some())
}

#[tokio::test]
async fn refusals_say_their_reason_and_whether_to_retry() {
    let mut app = spawn_app(&["--max-episodes", "1"]).await;
    app.open("r1", "conv-26:q0").await;
    let bad = app.tool("r1", "search_memory", serde_json::json!({"query": "x", "top_k": 0})).await.unwrap_err();
    assert_eq!(bad.code(), tonic::Code::InvalidArgument);
    assert_eq!(info(&bad), ("INVALID_ARGUMENT".into(), "false".into(), Some("top_k".into()), false));
    let missing = app.tool("r1", "delete_memory", serde_json::json!({"memory_id": "m9999"})).await.unwrap_err();
    assert_eq!(info(&missing).0, "MEMORY_NOT_FOUND");
    let token =
        app.env.list_memories(pb::ListMemoriesRequest { episode_id: "r1".into(), page_size: 5, page_token: "0".into(), memory_type: 0 });
    assert_eq!(info(&token.await.unwrap_err()).2.as_deref(), Some("page_token"));
    // The cap of open episodes is the server's state, not the request's: retry after a delay.
    let full = app
        .env
        .create_episode(pb::CreateEpisodeRequest { episode_id: "r2".into(), question_id: "conv-26:q0".into(), ..Default::default() })
        .await
        .unwrap_err();
    assert_eq!(full.code(), tonic::Code::ResourceExhausted);
    assert_eq!(info(&full), ("EPISODE_CAP".into(), "true".into(), None, true));
    assert_eq!(full.get_error_details().error_info().unwrap().domain, "memgym.v1");
    app.env.close_episode(pb::CloseEpisodeRequest { episode_id: "r1".into() }).await.unwrap();
    let ended = app.tool("r1", "search_memory", serde_json::json!({"query": "x"})).await.unwrap_err();
    assert_eq!(info(&ended).0, "EPISODE_ENDED");
    let unknown = app.env.get_episode(pb::GetEpisodeRequest { episode_id: "nope".into(), include_trace: false }).await.unwrap_err();
    assert_eq!(info(&unknown).0, "EPISODE_NOT_FOUND");
}
