//! Page tokens: opaque, bound to their listing, and stable when memories change between two pages.

use memgym::api::pb;
use tonic::Code;

use crate::helpers::{spawn_app, App};

async fn page(app: &mut App, id: &str, size: u32, token: &str) -> pb::ListMemoriesResponse {
    app.env
        .list_memories(pb::ListMemoriesRequest { episode_id: id.into(), page_size: size, page_token: token.into(), memory_type: 0 })
        .await
        .expect("list")
        .into_inner()
}

#[tokio::test]
async fn edits_between_pages_never_skip_a_live_memory() {
    let mut app = spawn_app(&[]).await;
    app.open("pg", "conv-26:q0").await;
    let first = page(&mut app, "pg", 10, "").await;
    let ids: Vec<String> = first.memories.iter().map(|m| m.id.clone()).collect();
    assert_eq!(ids.len(), 10);

    // Between the pages: delete two memories already read, update one, create one.
    app.tool("pg", "delete_memory", serde_json::json!({"memory_ids": [ids[2], ids[9]]})).await.unwrap();
    app.tool("pg", "manage_memory", serde_json::json!({"operation": "update", "memory_id": ids[0], "content": "Updated text."}))
        .await
        .unwrap();
    let created = app.tool("pg", "manage_memory", serde_json::json!({"operation": "create", "content": "A new memory."})).await.unwrap();
    assert!(!created.text.is_empty());

    // The rest of the listing from the old token: everything live after the last id read, nothing skipped.
    let mut rest = Vec::new();
    let mut token = first.next_page_token.clone();
    while !token.is_empty() {
        let p = page(&mut app, "pg", 50, &token).await;
        rest.extend(p.memories);
        token = p.next_page_token;
    }
    let live = app.all_memories("pg").await;
    let expected: Vec<String> = live.iter().map(|m| m.id.clone()).filter(|id| !ids[1..9].contains(id)).collect();
    let got: Vec<String> = rest.iter().map(|m| m.id.clone()).collect();
    assert_eq!(got, expected, "every memory not on the first page, and the updated one again at the end");
    assert_eq!(rest.last().unwrap().text, "A new memory.");
    assert!(rest.iter().any(|m| m.id == ids[0] && m.text == "Updated text."));
}

#[tokio::test]
async fn tokens_are_bound_to_their_listing_and_cannot_be_forged() {
    let mut app = spawn_app(&[]).await;
    app.open("pg-a", "conv-26:q0").await;
    app.open("pg-b", "conv-26:q0").await;
    let token = page(&mut app, "pg-a", 5, "").await.next_page_token;
    assert_eq!(token.len(), 40);
    let refuse = |r: Result<tonic::Response<pb::ListMemoriesResponse>, tonic::Status>, what: &str| {
        let e = r.expect_err(what);
        assert_eq!(e.code(), Code::InvalidArgument, "{what}: {}", e.message());
        assert!(e.message().contains("page_token"), "{what}: {}", e.message());
    };
    let req = |id: &str, token: &str, memory_type: i32| pb::ListMemoriesRequest {
        episode_id: id.into(),
        page_size: 5,
        page_token: token.into(),
        memory_type,
    };
    refuse(app.env.list_memories(req("pg-b", &token, 0)).await, "another episode");
    refuse(app.env.list_memories(req("pg-a", &token, pb::MemoryType::Semantic as i32)).await, "another filter");
    for forged in ["0", "+5", "05", "5"] {
        refuse(app.env.list_memories(req("pg-a", forged, 0)).await, forged);
    }
    let questions = app.data.list_questions(pb::ListQuestionsRequest { page_size: 3, ..Default::default() }).await.unwrap().into_inner();
    refuse(app.env.list_memories(req("pg-a", &questions.next_page_token, 0)).await, "a ListQuestions token");
    let e = app
        .data
        .list_questions(pb::ListQuestionsRequest { page_size: 3, page_token: token.clone(), ..Default::default() })
        .await
        .expect_err("a ListMemories token on ListQuestions");
    assert_eq!(e.code(), Code::InvalidArgument);
    // The same request gives the same token (tokens do not depend on the server instance or time).
    assert_eq!(page(&mut app, "pg-a", 5, "").await.next_page_token, token);
    assert!(app.env.list_memories(req("pg-a", &token, 0)).await.is_ok());
}
