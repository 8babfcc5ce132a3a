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
            let req = pb::CallToolRequest { episode_id: "bad".into(), tool_name: name.into(), arguments_json: args, ..Default::default() };
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
    let huge = "x".repeat(memgym::api::MAX_MESSAGE_BYTES + 1024);
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
            "message over the 32 MiB cap",
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
        // Issue 12: control and bidi characters, forged page tokens, custom-episode caps.
        ("NUL in content", tool("manage_memory", json!({"operation": "create", "content": "a\u{0}b"})), Code::InvalidArgument),
        (
            "ANSI escape in content",
            tool("manage_memory", json!({"operation": "create", "content": "\u{1b}[31mred"})),
            Code::InvalidArgument,
        ),
        ("bidi override in query", tool("search_memory", json!({"query": "x\u{202e}y"})), Code::InvalidArgument),
        (
            "bidi isolate in merge content",
            tool("merge_memory", json!({"memory_ids": ["m0001", "m0002"], "strategy": "concatenate", "content": "a\u{2066}b"})),
            Code::InvalidArgument,
        ),
        (
            "page token 0",
            rpc!(list_memories, pb::ListMemoriesRequest { episode_id: "bad".into(), page_token: "0".into(), ..Default::default() }),
            Code::InvalidArgument,
        ),
        (
            "page token +5",
            rpc!(list_memories, pb::ListMemoriesRequest { episode_id: "bad".into(), page_token: "+5".into(), ..Default::default() }),
            Code::InvalidArgument,
        ),
        (
            "page token 05",
            rpc!(list_memories, pb::ListMemoriesRequest { episode_id: "bad".into(), page_token: "05".into(), ..Default::default() }),
            Code::InvalidArgument,
        ),
        (
            "page token of another listing",
            rpc!(list_memories, pb::ListMemoriesRequest { episode_id: "bad".into(), page_token: "0".repeat(40), ..Default::default() }),
            Code::InvalidArgument,
        ),
        (
            "custom speaker of 20 KB",
            rpc!(
                create_episode,
                pb::CreateEpisodeRequest {
                    episode_id: "bad-custom".into(),
                    custom: Some(pb::CustomEpisode {
                        memories: vec![pb::NewMemory { text: "Ann keeps bees.".into(), speaker: "z".repeat(20_000), ..Default::default() }],
                        question: "What does Ann keep?".into(),
                        answer: "bees".into(),
                        evidence: vec![],
                    }),
                    ..Default::default()
                }
            ),
            Code::InvalidArgument,
        ),
        (
            "custom evidence of 100,000 ids",
            rpc!(
                create_episode,
                pb::CreateEpisodeRequest {
                    episode_id: "bad-custom".into(),
                    custom: Some(pb::CustomEpisode {
                        memories: vec![pb::NewMemory {
                            text: "Ann keeps bees.".into(),
                            evidence: (0..100_000).map(|i| format!("D1:{i}")).collect(),
                            ..Default::default()
                        }],
                        question: "What does Ann keep?".into(),
                        answer: "bees".into(),
                        evidence: vec![],
                    }),
                    ..Default::default()
                }
            ),
            Code::InvalidArgument,
        ),
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

/// A CallTool with any tool name and raw arguments.
fn call_tool(episode_id: String, name: String, args: String) -> Call {
    rpc!(call_tool, pb::CallToolRequest { episode_id, tool_name: name, arguments_json: args, ..Default::default() })
}

/// Issue 12: a refused value is quoted as a short prefix (a 20 KB value used to come back whole and
/// overflow grpcio's 16 KiB trailer limit). Every row: the code, a message under 1 KiB that names the
/// field, and the memory and step count unchanged.
#[tokio::test]
async fn long_values_come_back_as_a_short_prefix() {
    let mut app = spawn_app(&[]).await;
    app.open("long", "conv-26:q0").await;
    let z = "z".repeat(20_000);
    let mb5 = "9".repeat(5 * 1024 * 1024);
    let ep = || "long".to_string();
    let json = |v: serde_json::Value| v.to_string();
    let rows: Vec<(&str, Call, Code, &str)> = vec![
        ("CallTool memory_id", call_tool(ep(), "delete_memory".into(), json(json!({"memory_id": z}))), Code::InvalidArgument, "memory_id"),
        (
            "CallTool memory_ids",
            call_tool(ep(), "delete_memory".into(), json(json!({"memory_ids": [z]}))),
            Code::InvalidArgument,
            "memory_ids",
        ),
        ("CallTool tool_name", call_tool(ep(), z.clone(), "{}".into()), Code::InvalidArgument, "tool_name"),
        (
            "CallTool argument name",
            call_tool(ep(), "sample_memory".into(), format!(r#"{{"{z}": 1}}"#)),
            Code::InvalidArgument,
            "unknown argument",
        ),
        (
            "CallTool memory_type",
            call_tool(ep(), "search_memory".into(), json(json!({"query": "x", "memory_type": z}))),
            Code::InvalidArgument,
            "memory_type",
        ),
        (
            "CallTool operation",
            call_tool(ep(), "manage_memory".into(), json(json!({"operation": z, "content": "x"}))),
            Code::InvalidArgument,
            "operation",
        ),
        ("CallTool strategy", call_tool(ep(), "sample_memory".into(), json(json!({"strategy": z}))), Code::InvalidArgument, "strategy"),
        (
            "CallTool split_criteria",
            call_tool(ep(), "split_memory".into(), json(json!({"memory_id": "m0001", "split_criteria": z}))),
            Code::InvalidArgument,
            "split_criteria",
        ),
        // An id CreateEpisode would refuse is refused by name on every call, not looked up.
        ("CallTool episode_id", call_tool(z.clone(), "sample_memory".into(), "{}".into()), Code::InvalidArgument, "episode_id"),
        (
            "CallTool duplicate key",
            call_tool(ep(), "search_memory".into(), r#"{"query": "a", "query": "b"}"#.into()),
            Code::InvalidArgument,
            "query",
        ),
        (
            "CallTool JSON error",
            call_tool(ep(), "search_memory".into(), format!(r#"{{"query": "{z}"#)),
            Code::InvalidArgument,
            "arguments_json",
        ),
        (
            "Split.memory_id (typed)",
            rpc!(split, pb::SplitRequest { episode_id: ep(), memory_id: z.clone(), split_criteria: 1, ..Default::default() }),
            Code::InvalidArgument,
            "memory_id",
        ),
        (
            "Manage.memory_id (typed)",
            rpc!(
                manage,
                pb::ManageRequest { episode_id: ep(), operation: 2, content: "x".into(), memory_id: z.clone(), ..Default::default() }
            ),
            Code::InvalidArgument,
            "memory_id",
        ),
        (
            "GetEpisode.episode_id",
            rpc!(get_episode, pb::GetEpisodeRequest { episode_id: z.clone(), include_trace: false }),
            Code::InvalidArgument,
            "episode_id",
        ),
        (
            "CreateEpisode.question_id",
            rpc!(create_episode, pb::CreateEpisodeRequest { question_id: z.clone(), ..Default::default() }),
            Code::NotFound,
            "question_id",
        ),
        (
            "CreateEpisode.conversation_id",
            rpc!(
                create_episode,
                pb::CreateEpisodeRequest { question_id: "conv-26:q0".into(), conversation_id: z.clone(), ..Default::default() }
            ),
            Code::NotFound,
            "conversation_id",
        ),
        (
            "CreateEpisode.episode_id 5 MB",
            rpc!(
                create_episode,
                pb::CreateEpisodeRequest { episode_id: mb5.clone(), question_id: "conv-26:q0".into(), ..Default::default() }
            ),
            Code::InvalidArgument,
            "episode_id",
        ),
        (
            "ListMemories.page_token 5 MB",
            rpc!(list_memories, pb::ListMemoriesRequest { episode_id: ep(), page_token: mb5.clone(), ..Default::default() }),
            Code::InvalidArgument,
            "page_token",
        ),
    ];
    let before = app.all_memories("long").await;
    for (name, call, code, field) in rows {
        let (a, r) = call(app).await;
        app = a;
        let err = r.expect_err(name);
        let m = err.message();
        assert_eq!(err.code(), code, "{name}: {}", &m[..m.len().min(300)]);
        assert!(m.len() < 1024 && m.contains(field), "{name}: {} bytes: {}", m.len(), &m[..m.len().min(300)]);
        assert!(!m.contains(&"z".repeat(65)) && !m.contains(&"9".repeat(65)), "{name}: {m}");
        assert_eq!(app.all_memories("long").await, before, "{name} changed the memory");
        assert_eq!(app.state("long").await.steps_used, 0, "{name} used a step");
    }
    // The Dataset service follows the same rule.
    let e = app.data.list_questions(pb::ListQuestionsRequest { page_token: mb5, ..Default::default() }).await.unwrap_err();
    assert!(e.code() == Code::InvalidArgument && e.message().len() < 1024 && e.message().contains("page_token"), "{}", e.message());
    let e = app.data.list_questions(pb::ListQuestionsRequest { conversation_id: z, ..Default::default() }).await.unwrap_err();
    assert!(e.code() == Code::NotFound && e.message().len() < 1024 && e.message().contains("conversation_id"), "{}", e.message());
    app.server.stop().await.unwrap();
}

/// Issue 12 point 6: an unknown enum value is a refused call on both paths, so both count it.
#[tokio::test]
async fn unknown_enum_values_are_counted_on_both_paths() {
    let mut app = spawn_app(&[]).await;
    app.open("enums", "conv-26:q0").await;
    let ep = || "enums".to_string();
    let typed: Vec<(&str, Call)> = vec![
        ("memory_type", rpc!(search, pb::SearchRequest { episode_id: ep(), query: "x".into(), memory_type: 99, ..Default::default() })),
        ("operation", rpc!(manage, pb::ManageRequest { episode_id: ep(), operation: 99, content: "x".into(), ..Default::default() })),
        ("strategy", rpc!(sample, pb::SampleRequest { episode_id: ep(), strategy: 99, ..Default::default() })),
        (
            "strategy",
            rpc!(
                merge,
                pb::MergeRequest { episode_id: ep(), memory_ids: vec!["m0001".into(), "m0002".into()], strategy: 99, ..Default::default() }
            ),
        ),
        (
            "split_criteria",
            rpc!(split, pb::SplitRequest { episode_id: ep(), memory_id: "m0001".into(), split_criteria: 99, ..Default::default() }),
        ),
        ("memory_type", rpc!(sample, pb::SampleRequest { episode_id: ep(), memory_type: 99, ..Default::default() })),
    ];
    let n = typed.len() as u32;
    for (field, call) in typed {
        let (a, r) = call(app).await;
        app = a;
        let e = r.expect_err(field);
        assert!(e.code() == Code::InvalidArgument && e.message().contains(field) && e.message().contains("99"), "{}", e.message());
        eprintln!("DEBUG {field} {} {}", e.message(), app.state("enums").await.rejected_calls);
    }
    assert_eq!(app.state("enums").await.rejected_calls, n);
    for (tool, args) in [
        ("search_memory", json!({"query": "x", "memory_type": "99"})),
        ("manage_memory", json!({"operation": "99", "content": "x"})),
        ("sample_memory", json!({"strategy": "99"})),
        ("merge_memory", json!({"memory_ids": ["m0001", "m0002"], "strategy": "99"})),
        ("split_memory", json!({"memory_id": "m0001", "split_criteria": "99"})),
        ("sample_memory", json!({"memory_type": "99"})),
    ] {
        assert_eq!(app.tool("enums", tool, args).await.unwrap_err().code(), Code::InvalidArgument);
    }
    let st = app.state("enums").await;
    assert_eq!((st.rejected_calls, st.steps_used), (2 * n, 0));
    app.server.stop().await.unwrap();
}
