//! The reading of episode-opening keys and the JSON renderings, without a server.

use proptest::prelude::*;
use serde_json::{json, Map, Value};

use super::*;
use tonic::Code;

fn map(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap()
}

#[test]
fn open_keys_are_read_with_their_types_and_null_means_unset() {
    let r = open_request(&map(json!({"question_id": "conv-26:q3", "seed": 7, "max_steps": 5.0, "evaluator": "LLM-F1",
        "include_adversarial": true, "episode_id": null})))
    .unwrap();
    assert_eq!((r.question_id.as_str(), r.seed, r.max_steps, r.include_adversarial), ("conv-26:q3", Some(7), Some(5), true));
    assert_eq!(r.evaluator, pb::Evaluator::LlmF1 as i32);
    assert!(r.episode_id.is_empty() && r.custom.is_none());
    let server_name = open_request(&map(json!({"evaluator": "answer-recall"}))).unwrap();
    assert_eq!(server_name.evaluator, pb::Evaluator::AnswerRecall as i32, "the name breakdowns report is accepted");
    let empty = open_request(&Map::new()).unwrap();
    assert_eq!((empty.seed, empty.evaluator), (None, pb::Evaluator::Unspecified as i32));
}

#[test]
fn bad_open_keys_name_the_field() {
    let cases = [
        (json!({"questionid": "x"}), "questionid: unknown key"),
        (json!({"seed": -1}), "seed: must be a non-negative integer"),
        (json!({"seed": 1.5}), "seed: must be a non-negative integer"),
        (json!({"max_steps": "ten"}), "max_steps: must be a non-negative integer, got a string"),
        (json!({"max_steps": 5_000_000_000u64}), "max_steps: too large"),
        (json!({"evaluator": "gpt"}), "evaluator: must be one of answer_phrase, answer_recall, llm_f1, llm_judge, got \"gpt\""),
        (json!({"include_adversarial": "yes"}), "include_adversarial: must be a boolean"),
        (json!({"question_id": 3}), "question_id: must be a string, got a number"),
    ];
    for (args, want) in cases {
        let e = open_request(&map(args.clone())).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().starts_with(want), "{args}: {}", e.message());
    }
}

#[test]
fn a_long_bad_key_is_quoted_by_a_prefix_only() {
    let key = "k".repeat(5_000);
    let e = open_request(&map(json!({ key: 1 }))).unwrap_err();
    assert!(e.message().len() < 400, "{}", e.message().len());
}

#[test]
fn breakdown_json_keeps_every_field_name_of_the_grpc_message() {
    let r =
        pb::ScoreEpisodeResponse { reward: 0.25, p_new: 0.5, retrieved_new: vec!["m0001".into()], f1_new: Some(0.5), ..Default::default() };
    let v = breakdown_json(r);
    assert_eq!((v["reward"].as_f64(), v["p_new"].as_f64(), v["f1_new"].as_f64()), (Some(0.25), Some(0.5), Some(0.5)));
    assert_eq!(v["retrieved_new"], json!(["m0001"]));
    assert_eq!(v.as_object().unwrap().len(), 38);
    assert_eq!(v["metrics"], json!({}));
    assert_eq!(v["others"], json!(null), "unset without the other questions");
    assert!(score_text(&v).starts_with("Scored: reward 0.2500"));
    let delta = breakdown_json(pb::ScoreEpisodeResponse { reward_formula: "delta-growth".into(), ..Default::default() });
    assert!(score_text(&delta).contains("- growth 0.0000"), "{}", score_text(&delta));
    let whole = breakdown_json(pb::ScoreEpisodeResponse {
        reward_formula: "whole-memory".into(),
        others_term: -0.5,
        words_initial: 1000,
        words_added: 10,
        others: Some(pb::OtherQuestions { count: 7, damaged: 1, evaluator: "answer-phrase".into(), ..Default::default() }),
        ..Default::default()
    });
    assert_eq!((whole["others"]["count"].as_u64(), whole["others"]["damaged"].as_u64()), (Some(7), Some(1)));
    // The policy's line says what the rest of memory cost, and nothing about which questions.
    let text = score_text(&whole);
    assert!(text.contains("+ the rest of memory -0.5000 - words added 0.0100 - words removed 0.0000"), "{text}");
    let memupdate = breakdown_json(pb::ScoreEpisodeResponse { reward_formula: "memupdate".into(), ..Default::default() });
    assert!(score_text(&memupdate).contains("x memory efficiency"), "{}", score_text(&memupdate));
}

fn json_value() -> impl Strategy<Value = Value> {
    crate::util::json::strategies::tree(crate::util::json::strategies::scalar(), "[a-z_]{1,12}".boxed(), 2, 8)
}

proptest! {
    #[test]
    fn open_request_never_panics_and_refuses_or_keeps_the_keys(
        keys in prop::collection::vec(prop_oneof![
            Just("question_id".to_string()), Just("seed".to_string()), Just("max_steps".to_string()),
            Just("evaluator".to_string()), Just("include_adversarial".to_string()), "[a-z_]{1,12}"], 0..6),
        values in prop::collection::vec(json_value(), 6),
    ) {
        let m: Map<String, Value> = keys.into_iter().zip(values).collect();
        match open_request(&m) {
            Ok(r) => prop_assert!(r.custom.is_none()),
            Err(e) => {
                prop_assert_eq!(e.code(), Code::InvalidArgument);
                let field = e.message().split(':').next().unwrap_or("").to_string();
                prop_assert!(m.keys().any(|k| crate::util::excerpt::name(k) == field), "{}", e.message());
            }
        }
    }
}
