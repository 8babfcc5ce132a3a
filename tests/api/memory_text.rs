//! What memory may hold, end to end: control characters and bidi overrides are refused on every path
//! where a client supplies text (naming the field), stripped from LLM-written text; custom-episode
//! metadata is capped; every memory cap is RESOURCE_EXHAUSTED.

use memgym::api::pb;
use serde_json::json;
use tonic::Code;

use crate::helpers::{spawn_app, App};

/// Values that must never enter memory.
const BAD: [&str; 6] = ["a\0b", "red \u{1b}[31malert", "x\u{202e}gnp.exe", "\u{2066}iso\u{2069}", "c1 \u{9b} csi", "cr\rlf"];

fn mem(text: &str) -> pb::NewMemory {
    pb::NewMemory { text: text.into(), evidence: vec!["D1:1".into()], ..Default::default() }
}

fn custom(id: &str, memories: Vec<pb::NewMemory>) -> pb::CreateEpisodeRequest {
    pb::CreateEpisodeRequest {
        episode_id: id.into(),
        custom: Some(pb::CustomEpisode { memories, question: "What does Ann keep?".into(), answer: "bees".into(), evidence: vec![] }),
        ..Default::default()
    }
}

async fn refused_create(app: &mut App, req: pb::CreateEpisodeRequest) -> tonic::Status {
    app.env.create_episode(req).await.expect_err("refused")
}

fn assert_names(s: &tonic::Status, code: Code, field: &str) {
    assert_eq!(s.code(), code, "{s:?}");
    assert!(s.message().contains(field), "{field}: {}", s.message());
    assert!(s.message().len() < 400, "{}", s.message().len());
}

#[tokio::test]
async fn tool_text_with_control_or_bidi_characters_is_refused_on_every_path() {
    let mut app = spawn_app(&[]).await;
    app.open("t", "conv-26:q0").await;
    let before = app.all_memories("t").await;
    for bad in BAD {
        let calls = [
            ("manage_memory", json!({"operation": "create", "content": bad}), "content"),
            ("manage_memory", json!({"operation": "update", "memory_id": "m0000", "content": bad}), "content"),
            ("manage_memory", json!({"operation": "create", "content": "ok", "speaker": bad}), "speaker"),
            ("manage_memory", json!({"operation": "create", "content": "ok", "source": bad}), "source"),
            ("merge_memory", json!({"memory_ids": ["m0000", "m0001"], "strategy": "concatenate", "content": bad}), "content"),
            ("split_memory", json!({"memory_id": "m0000", "split_criteria": "thematic", "parts": ["fine", bad]}), "parts"),
        ];
        for (tool, args, field) in calls {
            let e = app.tool("t", tool, args).await.expect_err(tool);
            assert_names(&e, Code::InvalidArgument, field);
            assert!(e.message().contains("holds U+"), "{}", e.message());
        }
    }
    // The typed RPC takes the same path.
    let e = app
        .env
        .manage(pb::ManageRequest { episode_id: "t".into(), operation: 1, content: BAD[1].into(), ..Default::default() })
        .await
        .unwrap_err();
    assert_names(&e, Code::InvalidArgument, "content");
    // \n and \t stay allowed in text; nothing refused changed the episode.
    app.tool("t", "manage_memory", json!({"operation": "create", "content": "Line one.\n\tLine two."})).await.unwrap();
    let after = app.all_memories("t").await;
    assert_eq!(after.len(), before.len() + 1);
    assert_eq!(after.last().unwrap().text, "Line one.\n\tLine two.");
    assert_eq!(app.state("t").await.steps_used, 1);
}

#[tokio::test]
async fn custom_episode_fields_are_capped_and_checked() {
    let mut app = spawn_app(&[]).await;
    type Edit = Box<dyn Fn(&mut pb::CreateEpisodeRequest)>;
    let cases: Vec<(&str, Edit)> = vec![
        ("custom.memories[1].text", Box::new(|r| r.custom.as_mut().unwrap().memories[1].text = "Ann \u{1b}[31mkeeps bees".into())),
        ("custom.memories[0].text", Box::new(|r| r.custom.as_mut().unwrap().memories[0].text = "x\u{202e}y".into())),
        ("custom.memories[0].speaker", Box::new(|r| r.custom.as_mut().unwrap().memories[0].speaker = "z".repeat(20_000))),
        ("custom.memories[0].speaker", Box::new(|r| r.custom.as_mut().unwrap().memories[0].speaker = "Ann\nBob".into())),
        ("custom.memories[0].session_date", Box::new(|r| r.custom.as_mut().unwrap().memories[0].session_date = "8 May\0\0 2023".into())),
        ("custom.memories[0].session_date", Box::new(|r| r.custom.as_mut().unwrap().memories[0].session_date = "d".repeat(65))),
        ("custom.memories[0].source", Box::new(|r| r.custom.as_mut().unwrap().memories[0].source = "s".repeat(201))),
        ("custom.memories[0].evidence", Box::new(|r| r.custom.as_mut().unwrap().memories[0].evidence = vec!["D1:1".into(); 100_000])),
        ("custom.memories[0].evidence[1]", Box::new(|r| r.custom.as_mut().unwrap().memories[0].evidence.push("D1 3".into()))),
        ("custom.memories[0].evidence[1]", Box::new(|r| r.custom.as_mut().unwrap().memories[0].evidence.push("D".repeat(33)))),
        ("custom.memories[0].evidence[1]", Box::new(|r| r.custom.as_mut().unwrap().memories[0].evidence.push(String::new()))),
        ("custom.question", Box::new(|r| r.custom.as_mut().unwrap().question = "What\0?".into())),
        ("custom.answer", Box::new(|r| r.custom.as_mut().unwrap().answer = "\u{2066}bees".into())),
        ("custom.evidence", Box::new(|r| r.custom.as_mut().unwrap().evidence = vec!["D1:1".into(); 101])),
        ("custom.evidence[0]", Box::new(|r| r.custom.as_mut().unwrap().evidence = vec!["D1:1\u{1b}".into()])),
        ("custom.memories", Box::new(|r| r.custom.as_mut().unwrap().memories.clear())),
    ];
    for (i, (field, edit)) in cases.iter().enumerate() {
        let mut req = custom(&format!("c{i}"), vec![mem("Ann keeps bees."), mem("Ann likes green.")]);
        edit(&mut req);
        let e = refused_create(&mut app, req).await;
        assert_names(&e, Code::InvalidArgument, field);
    }
    // At the caps, and with ordinary metadata, the episode opens.
    let mut ok = mem("Ann keeps bees.\n\tShe has three hives.");
    ok.speaker = "s".repeat(200);
    ok.session_date = "1:56 pm on 8 May, 2023".into();
    ok.source = "import-v2".into();
    ok.evidence = (0..100).map(|i| format!("D{i}:{i}")).collect();
    let r = app.env.create_episode(custom("ok", vec![ok, mem("Ann likes green.")])).await.unwrap().into_inner();
    assert_eq!(r.initial_memory_count, 2);
}

#[tokio::test]
async fn every_memory_cap_is_resource_exhausted() {
    let mut app = spawn_app(&["--max-memories", "3"]).await;
    // A custom episode over the cap...
    let four = (0..4).map(|i| mem(&format!("Fact number {i}."))).collect();
    let e = refused_create(&mut app, custom("big", four)).await;
    assert_names(&e, Code::ResourceExhausted, "custom.memories");
    // ...and an edit over it.
    let three = (0..3).map(|i| mem(&format!("Fact number {i}."))).collect();
    app.env.create_episode(custom("full", three)).await.unwrap();
    let e = app.tool("full", "manage_memory", json!({"operation": "create", "content": "One more."})).await.unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    assert_eq!(app.all_memories("full").await.len(), 3);
}
