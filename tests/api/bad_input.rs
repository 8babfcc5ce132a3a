//! The bad-input table: every row expects an exact status code, and after every row the episode's
//! memories and step count are exactly as before.

use memgym::api::pb;
use serde_json::json;
use tonic::Code;

use crate::helpers::{spawn_app, App};

type Call = Box<dyn Fn(App) -> futures_like::BoxFuture<(App, Result<(), tonic::Status>)>>;

mod futures_like {
    pub type BoxFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T>>>;
}

fn tool(name: &'static str, args: serde_json::Value) -> Call {
    raw_tool(name, args.to_string())
}

fn raw_tool(name: &'static str, args: String) -> Call {
    Box::new(move |mut app: App| {
        let args = args.clone();
        Box::pin(async move {
            let req = pb::CallToolRequest { episode_id: "bad".into(), tool_name: name.into(), arguments_json: args };
            let r = app.env.call_tool(req).await.map(|_| ());
            (app, r)
        }) as futures_like::BoxFuture<_>
    })
}

macro_rules! rpc {
    ($method:ident, $req:expr) => {{
        let req = $req;
        Box::new(move |mut app: App| {
            let req = req.clone();
            Box::pin(async move {
                let r = app.env.$method(req).await.map(|_| ());
                (app, r)
            }) as futures_like::BoxFuture<_>
        }) as Call
    }};
}

#[tokio::test]
async fn bad_input_table() {
    let mut app = spawn_app(&[]).await;
    app.open("bad", "conv-26:q0").await;
    let huge = "x".repeat(9 * 1024 * 1024);
    let long = "y".repeat(2001);
    let rows: Vec<(&str, Call, Code)> = vec![
        ("unknown tool", tool("wipe_memory", json!({})), Code::InvalidArgument),
        ("malformed JSON", raw_tool("search_memory", "{\"query\": ".into()), Code::InvalidArgument),
        ("JSON array", tool("search_memory", json!([1, 2])), Code::InvalidArgument),
        ("empty query", tool("search_memory", json!({"query": ""})), Code::InvalidArgument),
        ("whitespace query", tool("search_memory", json!({"query": " \t\n "})), Code::InvalidArgument),
        ("query too long", tool("search_memory", json!({"query": long})), Code::InvalidArgument),
        ("query of wrong type", tool("search_memory", json!({"query": 42})), Code::InvalidArgument),
        ("top_k 0", tool("search_memory", json!({"query": "x", "top_k": 0})), Code::InvalidArgument),
        ("top_k 51", tool("search_memory", json!({"query": "x", "top_k": 51})), Code::InvalidArgument),
        ("top_k as string", tool("search_memory", json!({"query": "x", "top_k": "5"})), Code::InvalidArgument),
        ("threshold > 1", tool("search_memory", json!({"query": "x", "threshold": 1.01})), Code::InvalidArgument),
        ("threshold < 0", tool("search_memory", json!({"query": "x", "threshold": -0.1})), Code::InvalidArgument),
        (
            "threshold NaN (typed)",
            rpc!(
                search,
                pb::SearchRequest { episode_id: "bad".into(), query: "x".into(), threshold: Some(f32::NAN), ..Default::default() }
            ),
            Code::InvalidArgument,
        ),
        (
            "threshold inf (typed)",
            rpc!(
                search,
                pb::SearchRequest { episode_id: "bad".into(), query: "x".into(), threshold: Some(f32::INFINITY), ..Default::default() }
            ),
            Code::InvalidArgument,
        ),
        ("unknown memory_type", tool("search_memory", json!({"query": "x", "memory_type": "feelings"})), Code::InvalidArgument),
        (
            "unknown enum value (typed)",
            rpc!(search, pb::SearchRequest { episode_id: "bad".into(), query: "x".into(), memory_type: 99, ..Default::default() }),
            Code::InvalidArgument,
        ),
        ("unknown argument", tool("search_memory", json!({"query": "x", "colour": "red"})), Code::InvalidArgument),
        (
            "message over 8 MiB",
            rpc!(search, pb::SearchRequest { episode_id: "bad".into(), query: huge.clone(), ..Default::default() }),
            Code::OutOfRange,
        ),
        ("update unknown id", tool("manage_memory", json!({"operation": "update", "memory_id": "m0999", "content": "x"})), Code::NotFound),
        (
            "update malformed id",
            tool("manage_memory", json!({"operation": "update", "memory_id": "42", "content": "x"})),
            Code::InvalidArgument,
        ),
        ("update without id", tool("manage_memory", json!({"operation": "update", "content": "x"})), Code::InvalidArgument),
        ("unknown operation", tool("manage_memory", json!({"operation": "upsert", "content": "x"})), Code::InvalidArgument),
        (
            "operation unset (typed)",
            rpc!(manage, pb::ManageRequest { episode_id: "bad".into(), content: "x".into(), ..Default::default() }),
            Code::InvalidArgument,
        ),
        ("empty content", tool("manage_memory", json!({"operation": "create", "content": "  "})), Code::InvalidArgument),
        ("delete known + unknown", tool("delete_memory", json!({"memory_ids": ["m0001", "m0999"]})), Code::NotFound),
        ("delete duplicate ids", tool("delete_memory", json!({"memory_ids": ["m0001", "m0001"]})), Code::InvalidArgument),
        (
            "delete nothing (typed)",
            rpc!(delete, pb::DeleteRequest { episode_id: "bad".into(), ..Default::default() }),
            Code::InvalidArgument,
        ),
        ("delete id and ids", tool("delete_memory", json!({"memory_id": "m0001", "memory_ids": ["m0002"]})), Code::InvalidArgument),
        ("sample k 0", tool("sample_memory", json!({"k": 0})), Code::InvalidArgument),
        ("sample k 51", tool("sample_memory", json!({"k": 51})), Code::InvalidArgument),
        ("sample k 2.5", tool("sample_memory", json!({"k": 2.5})), Code::InvalidArgument),
        ("merge one id", tool("merge_memory", json!({"memory_ids": ["m0001"], "strategy": "summarize"})), Code::InvalidArgument),
        (
            "merge six ids",
            tool("merge_memory", json!({"memory_ids": ["m1", "m2", "m3", "m4", "m5", "m6"], "strategy": "summarize"})),
            Code::InvalidArgument,
        ),
        (
            "merge duplicate ids",
            tool("merge_memory", json!({"memory_ids": ["m0001", "m0001"], "strategy": "concatenate"})),
            Code::InvalidArgument,
        ),
        ("merge unknown id", tool("merge_memory", json!({"memory_ids": ["m0001", "m0999"], "strategy": "concatenate"})), Code::NotFound),
        (
            "merge without strategy (typed)",
            rpc!(
                merge,
                pb::MergeRequest { episode_id: "bad".into(), memory_ids: vec!["m0001".into(), "m0002".into()], ..Default::default() }
            ),
            Code::InvalidArgument,
        ),
        (
            "merge empty content",
            tool("merge_memory", json!({"memory_ids": ["m0001", "m0002"], "strategy": "concatenate", "content": ""})),
            Code::InvalidArgument,
        ),
        ("split unknown id", tool("split_memory", json!({"memory_id": "m0999", "split_criteria": "thematic"})), Code::NotFound),
        (
            "split max_parts 1",
            tool("split_memory", json!({"memory_id": "m0001", "split_criteria": "thematic", "max_parts": 1})),
            Code::InvalidArgument,
        ),
        (
            "split one part",
            tool("split_memory", json!({"memory_id": "m0001", "split_criteria": "thematic", "parts": ["only"]})),
            Code::InvalidArgument,
        ),
        (
            "split parts with empty",
            tool("split_memory", json!({"memory_id": "m0001", "split_criteria": "thematic", "parts": ["a", " "]})),
            Code::InvalidArgument,
        ),
        (
            "split unsplittable",
            tool("split_memory", json!({"memory_id": "m0000", "split_criteria": "speaker", "max_parts": 2})),
            Code::FailedPrecondition,
        ),
        (
            "unknown episode",
            rpc!(search, pb::SearchRequest { episode_id: "nope".into(), query: "x".into(), ..Default::default() }),
            Code::NotFound,
        ),
        ("empty episode id", rpc!(search, pb::SearchRequest { query: "x".into(), ..Default::default() }), Code::InvalidArgument),
        (
            "create without question",
            rpc!(create_episode, pb::CreateEpisodeRequest { episode_id: "new".into(), ..Default::default() }),
            Code::InvalidArgument,
        ),
        (
            "create unknown question",
            rpc!(create_episode, pb::CreateEpisodeRequest { question_id: "conv-26:q9999".into(), ..Default::default() }),
            Code::NotFound,
        ),
        (
            "create bad episode id",
            rpc!(
                create_episode,
                pb::CreateEpisodeRequest { episode_id: "a b".into(), question_id: "conv-26:q0".into(), ..Default::default() }
            ),
            Code::InvalidArgument,
        ),
        (
            "create max_steps 0",
            rpc!(create_episode, pb::CreateEpisodeRequest { question_id: "conv-26:q0".into(), max_steps: Some(0), ..Default::default() }),
            Code::InvalidArgument,
        ),
        (
            "create max_steps over cap",
            rpc!(
                create_episode,
                pb::CreateEpisodeRequest { question_id: "conv-26:q0".into(), max_steps: Some(5000), ..Default::default() }
            ),
            Code::InvalidArgument,
        ),
        (
            "create conflicting id",
            rpc!(
                create_episode,
                pb::CreateEpisodeRequest { episode_id: "bad".into(), question_id: "conv-26:q1".into(), ..Default::default() }
            ),
            Code::AlreadyExists,
        ),
        (
            "create custom without memories",
            rpc!(
                create_episode,
                pb::CreateEpisodeRequest {
                    custom: Some(pb::CustomEpisode { question: "q".into(), answer: "a".into(), ..Default::default() }),
                    ..Default::default()
                }
            ),
            Code::InvalidArgument,
        ),
        (
            "create question and custom",
            rpc!(
                create_episode,
                pb::CreateEpisodeRequest {
                    question_id: "conv-26:q0".into(),
                    custom: Some(pb::CustomEpisode::default()),
                    ..Default::default()
                }
            ),
            Code::InvalidArgument,
        ),
        (
            "list page_size 501",
            rpc!(list_memories, pb::ListMemoriesRequest { episode_id: "bad".into(), page_size: 501, ..Default::default() }),
            Code::InvalidArgument,
        ),
        (
            "list bad page token",
            rpc!(list_memories, pb::ListMemoriesRequest { episode_id: "bad".into(), page_token: "abc".into(), ..Default::default() }),
            Code::InvalidArgument,
        ),
        ("score unknown episode", rpc!(score_episode, pb::ScoreEpisodeRequest { episode_id: "nope".into() }), Code::NotFound),
        ("close unknown episode", rpc!(close_episode, pb::CloseEpisodeRequest { episode_id: "nope".into() }), Code::NotFound),
    ];
    let mut before = app.all_memories("bad").await;
    let mut steps = app.state("bad").await.steps_used;
    assert_eq!(steps, 0);
    for (name, call, code) in rows {
        let (a, r) = call(app).await;
        app = a;
        let err = r.expect_err(name);
        assert_eq!(err.code(), code, "{name}: {}", err.message());
        assert!(!err.message().is_empty(), "{name}: empty message");
        let after = app.all_memories("bad").await;
        assert_eq!(after, before, "{name} changed the memory");
        let st = app.state("bad").await;
        assert_eq!(st.steps_used, steps, "{name} used a step");
        before = after;
        steps = st.steps_used;
    }
    // Error messages name the field.
    let e = app.tool("bad", "search_memory", json!({"query": "x", "top_k": 0})).await.unwrap_err();
    assert!(e.message().contains("top_k"), "{}", e.message());
    let e = app.tool("bad", "delete_memory", json!({"memory_ids": ["m0001", "m0999"]})).await.unwrap_err();
    assert!(e.message().contains("m0999"), "{}", e.message());
    // Refusals are counted, and the episode still works.
    assert!(app.state("bad").await.rejected_calls > 30);
    app.tool("bad", "search_memory", json!({"query": "support group"})).await.unwrap();
    app.server.stop().await.unwrap();
}

#[tokio::test]
async fn adversarial_questions_need_the_flag() {
    let mut app = spawn_app(&[]).await;
    let qs =
        app.data.list_questions(pb::ListQuestionsRequest { category: 5, page_size: 1, ..Default::default() }).await.unwrap().into_inner();
    let q = &qs.questions[0].id;
    let err = app.env.create_episode(pb::CreateEpisodeRequest { question_id: q.clone(), ..Default::default() }).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    let ok = app
        .env
        .create_episode(pb::CreateEpisodeRequest { question_id: q.clone(), include_adversarial: true, ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert!(ok.episode_id.starts_with("ep-"));
    app.server.stop().await.unwrap();
}
