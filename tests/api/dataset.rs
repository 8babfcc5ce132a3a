//! The Dataset service against the shipped LoCoMo data.

use memgym::api::pb;
use tonic::Code;

use crate::helpers::spawn_app;

#[tokio::test]
async fn conversations_and_questions() {
    let mut app = spawn_app(&[]).await;
    let cs = app.data.list_conversations(pb::ListConversationsRequest {}).await.unwrap().into_inner().conversations;
    assert_eq!(cs.len(), 10);
    assert_eq!(cs.iter().map(|c| c.memory_count).sum::<u32>(), 2541);
    assert_eq!(cs.iter().map(|c| c.question_count).sum::<u32>(), 1986);
    let test: Vec<&str> = cs.iter().filter(|c| c.split == pb::Split::Test as i32).map(|c| c.conversation_id.as_str()).collect();
    assert_eq!(test.len(), 3);
    for id in ["conv-43", "conv-26", "conv-30"] {
        assert!(test.contains(&id));
    }
    // Paging through everything gives every question once.
    let (mut seen, mut token) = (Vec::new(), String::new());
    loop {
        let page = app
            .data
            .list_questions(pb::ListQuestionsRequest { page_size: 700, page_token: token, ..Default::default() })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(page.total, 1986);
        seen.extend(page.questions.into_iter().map(|q| q.id));
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    assert_eq!(seen.len(), 1986);
    let q = app
        .data
        .list_questions(pb::ListQuestionsRequest { conversation_id: "conv-26".into(), category: 2, ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(q.total, 37);
    assert!(q
        .questions
        .iter()
        .all(|r| r.conversation_id == "conv-26" && r.category == 2 && !r.evidence.is_empty() && r.split == pb::Split::Test as i32));
    let train = app
        .data
        .list_questions(pb::ListQuestionsRequest { split: pb::Split::Train as i32, ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(train.total, 1440);
    for (req, code) in [
        (pb::ListQuestionsRequest { category: 7, ..Default::default() }, Code::InvalidArgument),
        (pb::ListQuestionsRequest { split: 9, ..Default::default() }, Code::InvalidArgument),
        (pb::ListQuestionsRequest { conversation_id: "conv-99".into(), ..Default::default() }, Code::NotFound),
        (pb::ListQuestionsRequest { page_size: 1001, ..Default::default() }, Code::InvalidArgument),
    ] {
        assert_eq!(app.data.list_questions(req).await.unwrap_err().code(), code);
    }
    app.server.stop().await.unwrap();
}
