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
    // The LoCoMo audit's columns: conv-26:q13 ("When did Melanie run a charity race?") is not listed; the
    // audit flags conv-26:q2's gold answer as a hallucination and gives its correction.
    let audited = app
        .data
        .list_questions(pb::ListQuestionsRequest { conversation_id: "conv-26".into(), page_size: 3, ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    let q2 = &audited.questions[2];
    assert_eq!((q2.id.as_str(), q2.gold_status.as_str(), q2.gold_error_type.as_str()), ("conv-26:q2", "flagged", "HALLUCINATION"));
    assert_eq!((q2.answer.as_str(), q2.corrected_answer.as_str()), ("Psychology, counseling certification", "Counseling or mental health"));
    assert_eq!(
        (audited.questions[1].gold_status.as_str(), audited.questions[1].corrected_evidence.as_slice()),
        ("wrong-citation", &["D1:14".to_string()][..])
    );
    assert_eq!((audited.questions[0].gold_status.as_str(), audited.questions[0].gold_error_type.as_str()), ("ok", ""));
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

/// A `memgym dataset verl --include-adversarial` file read back: each row's create_kwargs open its episode
/// on the real server, category-5 rows included (their `include_adversarial: true` is what lets them).
#[tokio::test]
async fn verl_rows_with_include_adversarial_open_their_episodes() {
    use arrow_array::cast::AsArray;
    use memgym::dataset::verl::{self, VerlOptions};

    let ds = memgym::dataset::Dataset::load(None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("test.parquet");
    let opts = VerlOptions { include_adversarial: true, ..VerlOptions::new(Some(memgym::dataset::Split::Test)) };
    verl::write(&ds, &opts, &memgym::tools::TOOL_NAMES, &out).unwrap();
    let file = std::fs::File::open(&out).unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file).unwrap().build().unwrap();
    let mut rows = Vec::new(); // (conversation_id, question_id, include_adversarial, category)
    for b in reader {
        let b = b.unwrap();
        let extra = b.column_by_name("extra_info").unwrap().as_struct().clone();
        let category = extra.column_by_name("category").unwrap().as_primitive::<arrow_array::types::UInt8Type>().clone();
        let tools = extra.column_by_name("tools_kwargs").unwrap().as_struct().clone();
        let create =
            tools.column_by_name("delete_memory").unwrap().as_struct().column_by_name("create_kwargs").unwrap().as_struct().clone();
        let (c, q) = (
            create.column_by_name("conversation_id").unwrap().as_string::<i32>(),
            create.column_by_name("question_id").unwrap().as_string::<i32>(),
        );
        let adv = create.column_by_name("include_adversarial").unwrap().as_boolean();
        for i in 0..b.num_rows() {
            rows.push((c.value(i).to_string(), q.value(i).to_string(), adv.value(i), category.value(i)));
        }
    }
    let adversarial = rows.iter().find(|r| r.3 == 5).unwrap().clone();
    let ordinary = rows.iter().find(|r| r.3 != 5).unwrap().clone();
    assert!(adversarial.2 && !ordinary.2);

    let mut app = spawn_app(&[]).await;
    for (i, (conversation_id, question_id, include_adversarial, _)) in [adversarial.clone(), ordinary].into_iter().enumerate() {
        let req = pb::CreateEpisodeRequest {
            episode_id: format!("verl-row-{i}"),
            conversation_id,
            question_id,
            include_adversarial,
            ..Default::default()
        };
        assert!(app.env.create_episode(req).await.unwrap().into_inner().created);
    }
    // Without the flag (the rows before this fix) the server refuses the category-5 row.
    let (conversation_id, question_id, ..) = adversarial;
    let req = pb::CreateEpisodeRequest { episode_id: "verl-row-x".into(), conversation_id, question_id, ..Default::default() };
    assert_eq!(app.env.create_episode(req).await.unwrap_err().code(), Code::FailedPrecondition);
    app.server.stop().await.unwrap();
}
