//! Tests of the dataset module against the real `locomo10.json`: exact published counts, the
//! JSON → Parquet → domain round trip, spot checks of the source's quirks, and damaged inputs
//! that must produce precise errors instead of panics.

use std::sync::{Arc, OnceLock};

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use bytes::Bytes;

use super::parquet_io::{conversations_batch, encode, memories_batch, questions_batch};
use super::*;

const LOCOMO_JSON: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/locomo/locomo10.json");

fn real() -> &'static Dataset {
    static DATASET: OnceLock<Dataset> = OnceLock::new();
    DATASET.get_or_init(|| Dataset::from_locomo_json(std::path::Path::new(LOCOMO_JSON)).expect("locomo10.json converts"))
}

fn real_files() -> &'static ParquetFiles {
    static FILES: OnceLock<ParquetFiles> = OnceLock::new();
    FILES.get_or_init(|| real().to_parquet_bytes().expect("encodes"))
}

// ---------------------------------------------------------------- counts

#[test]
fn real_file_matches_the_published_counts() {
    let ds = real();
    let stats = ds.stats();
    println!("{stats}");
    assert_eq!(stats.totals.conversations, 10);
    assert_eq!(stats.totals.sessions, 272);
    assert_eq!(stats.totals.turns, 5_882);
    assert_eq!(stats.totals.memories, 2_541);
    assert_eq!(stats.totals.questions, 1_986);

    let memories: Vec<(&str, u32)> = stats.conversations.iter().map(|c| (c.id.as_str(), c.memories)).collect();
    assert_eq!(
        memories,
        [
            ("conv-26", 184),
            ("conv-30", 169),
            ("conv-41", 324),
            ("conv-42", 266),
            ("conv-43", 267),
            ("conv-44", 277),
            ("conv-47", 268),
            ("conv-48", 291),
            ("conv-49", 240),
            ("conv-50", 255),
        ]
    );
    for c in &stats.conversations {
        assert_eq!(ds.memories_of(&c.id).len(), c.memories as usize, "{}", c.id);
    }

    let categories: Vec<u32> = stats.categories.iter().map(|c| c.questions).collect();
    assert_eq!(categories, [282, 321, 96, 841, 446]);

    let splits: Vec<(Split, u32, u32, u32)> =
        stats.splits.iter().map(|s| (s.split, s.conversations, s.questions, s.questions_without_adversarial)).collect();
    assert_eq!(splits, [(Split::Train, 7, 1_440, 1_129), (Split::Test, 3, 546, 411)]);
}

#[test]
fn evidence_repair_counts_are_reported() {
    let r = real().evidence_repairs().expect("known after JSON conversion");
    assert_eq!(r.list_valued_dia_ids, 10);
    assert_eq!(
        r.memories,
        EvidenceRepairs { raw_entries: 2_554, clean: 2_549, repaired: 5, dropped: 0, dropped_tokens: 0, duplicates_removed: 0 }
    );
    assert_eq!(
        r.questions,
        EvidenceRepairs { raw_entries: 2_815, clean: 2_808, repaired: 5, dropped: 2, dropped_tokens: 2, duplicates_removed: 1 }
    );
}

// ---------------------------------------------------------------- spot checks

#[test]
fn first_memory_of_conv_26() {
    let m = &real().memories_of("conv-26")[0];
    assert_eq!(
        m,
        &MemoryRow {
            conversation_id: "conv-26".into(),
            memory_id: "m0000".into(),
            position: 0,
            text: "Caroline attended an LGBTQ support group recently and found the transgender stories inspiring.".into(),
            memory_type: "episodic".into(),
            speaker: "Caroline".into(),
            session: 1,
            session_date: "1:56 pm on 8 May, 2023".into(),
            evidence: vec!["D1:3".into()],
            source: "conversation_observations".into(),
        }
    );
}

#[test]
fn memories_follow_session_then_json_speaker_order() {
    let ds = real();
    for c in &ds.conversations {
        let ms = ds.memories_of(&c.id);
        for (k, m) in ms.iter().enumerate() {
            assert_eq!(m.position as usize, k);
            assert_eq!(m.memory_id, memory_id(m.position));
            if k > 0 {
                assert!(ms[k - 1].session <= m.session, "{} {}", c.id, m.memory_id);
            }
        }
    }
    // conv-26 session 2 lists Melanie before Caroline in the JSON object: the order is kept
    // (an alphabetically sorted map would put Caroline first).
    let session2: Vec<&str> = ds.memories_of("conv-26").iter().filter(|m| m.session == 2).map(|m| m.speaker.as_str()).collect();
    assert_eq!(session2.first(), Some(&"Melanie"));
    assert_eq!(session2.last(), Some(&"Caroline"));
    // Sessions are numeric: conv-41 has 32 sessions, 10 comes after 9.
    let numbers: Vec<u32> = ds.conversation("conv-41").expect("conv-41").sessions.iter().map(|s| s.number).collect();
    assert_eq!(numbers, (1..=32).collect::<Vec<_>>());
    // conv-26 has 35 date_time keys for 19 sessions; only the 19 are kept.
    let conv26 = ds.conversation("conv-26").expect("conv-26");
    assert_eq!(conv26.sessions.len(), 19);
    assert_eq!(conv26.split, Split::Test);
    assert_eq!((conv26.speaker_a.as_str(), conv26.speaker_b.as_str()), ("Caroline", "Melanie"));
}

#[test]
fn list_valued_and_comma_joined_dia_ids() {
    let ds = real();
    let listed: Vec<&MemoryRow> = ds.memories_of("conv-30").iter().filter(|m| m.evidence == ["D15:3", "D15:5"]).collect();
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].speaker.as_str(), listed[0].session), ("Jon", 15));
    let joined = ds.memories_of("conv-44").iter().filter(|m| m.evidence == ["D26:14", "D26:34", "D26:42"]).count();
    assert_eq!(joined, 1);
    let multi = ds.memories.iter().filter(|m| m.evidence.len() > 1).count();
    assert_eq!(multi, 15, "10 list-valued + 5 comma-joined dia ids");
}

#[test]
fn question_spot_checks() {
    let ds = real();
    let q = ds.question("conv-26:q1").expect("q1");
    assert_eq!(q.question, "When did Melanie paint a sunrise?");
    assert_eq!(q.answer.as_deref(), Some("2022"));
    assert_eq!((q.category, q.index, q.split), (2, 1, Split::Test));
    assert_eq!(ds.question("conv-26:q40").and_then(|q| q.answer.as_deref()), Some("2"));

    let both = ds.question("conv-26:q167").expect("q167");
    assert_eq!(both.answer.as_deref(), Some("No"));
    assert_eq!(both.adversarial_answer.as_deref(), Some("Yes"));
    let adversarial_only = ds.questions.iter().filter(|q| q.category == 5 && q.answer.is_none()).count();
    assert_eq!(adversarial_only, 444);

    let ev = |id: &str| ds.question(id).expect(id).evidence.clone();
    assert_eq!(ev("conv-26:q37"), ["D8:6", "D9:17"]);
    assert_eq!(ev("conv-42:q88"), ["D1:18", "D1:20"]);
    assert_eq!(ev("conv-43:q18"), ["D1:14", "D2:7", "D4:7", "D5:15", "D20:21", "D26:36"]);
    assert_eq!(ev("conv-49:q31"), ["D9:1", "D4:4", "D4:6"]);
    assert_eq!(ev("conv-50:q69"), ["D30:5"]);
    assert_eq!(ev("conv-50:q5"), ["D4:5", "D5:5"]);
    assert!(ev("conv-26:q30").is_empty());
    assert_eq!(ds.questions.iter().filter(|q| q.evidence.is_empty()).count(), 4);

    assert!(ds.question("conv-26:q9999").is_none());
    assert!(ds.conversation("conv-99").is_none());
    assert!(ds.memories_of("conv-99").is_empty());
}

#[test]
fn split_and_ids() {
    assert_eq!("train".parse::<Split>(), Ok(Split::Train));
    assert_eq!(Split::Test.as_str(), "test");
    assert!("validation".parse::<Split>().is_err());
    assert_eq!(memory_id(7), "m0007");
    assert_eq!(memory_id(12_345), "m12345");
    assert_eq!(question_id("conv-26", 17), "conv-26:q17");
    assert_eq!(category_name(1), Some("multi-hop"));
    assert_eq!(category_name(0), None);
    assert_eq!(category_name(6), None);
    let train = SEED42_SPLIT.iter().filter(|(_, s)| *s == Split::Train).count();
    assert_eq!(train, 7);
}

#[test]
fn lookups_survive_edits_without_reindex() {
    let mut ds = real().clone();
    ds.memories.retain(|m| m.conversation_id != "conv-26");
    assert!(ds.memories_of("conv-26").is_empty());
    assert_eq!(ds.memories_of("conv-30").len(), 169);
    assert_eq!(ds.memories_of("conv-50").len(), 255);
    ds.questions.remove(0);
    assert_eq!(ds.question("conv-26:q1").map(|q| q.index), Some(1));
    ds.reindex();
    assert_eq!(ds.memories_of("conv-30").len(), 169);
}

// ---------------------------------------------------------------- round trip

#[test]
fn parquet_round_trip() {
    let ds = real();
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("nested/parquet");
    ds.write_parquet(&out).expect("writes");
    let mut names: Vec<String> =
        std::fs::read_dir(&out).expect("lists").map(|e| e.expect("entry").file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, [CONVERSATIONS_FILE, MEMORIES_FILE, QUESTIONS_FILE]);

    let back = Dataset::read_parquet_dir(&out).expect("reads");
    assert_eq!(&back, ds);
    assert!(back.evidence_repairs().is_none());
    assert_eq!(back.stats().totals, ds.stats().totals);
    assert_eq!(back.memories_of("conv-43").len(), 267);

    // Rewriting replaces the files in place.
    back.write_parquet(&out).expect("rewrites");

    let read = |name: &str| Bytes::from(std::fs::read(out.join(name)).expect("file"));
    let from_bytes = Dataset::read_parquet_bytes(read(CONVERSATIONS_FILE), read(MEMORIES_FILE), read(QUESTIONS_FILE)).expect("reads bytes");
    assert_eq!(&from_bytes, ds);

    let files = real_files();
    let in_memory = Dataset::read_parquet_bytes(files.conversations.clone(), files.memories.clone(), files.questions.clone())
        .expect("reads in-memory files");
    assert_eq!(&in_memory, ds);
}

#[test]
fn files_are_snappy_compressed() {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let reader = SerializedFileReader::new(real_files().memories.clone()).expect("opens");
    let rg = reader.metadata().row_group(0);
    for col in rg.columns() {
        assert_eq!(col.compression(), parquet::basic::Compression::SNAPPY);
    }
}

// ---------------------------------------------------------------- corruption

/// Reads the real dataset with one of the three files replaced.
fn read_with(file: &str, bytes: Bytes) -> Result<Dataset, DatasetError> {
    let f = real_files();
    let pick = |name: &str, original: &Bytes| {
        if name == file {
            bytes.clone()
        } else {
            original.clone()
        }
    };
    Dataset::read_parquet_bytes(
        pick(CONVERSATIONS_FILE, &f.conversations),
        pick(MEMORIES_FILE, &f.memories),
        pick(QUESTIONS_FILE, &f.questions),
    )
}

fn expect_row_error(result: Result<Dataset, DatasetError>, file: &str, row: usize, column: &str) -> String {
    match result {
        Err(e @ DatasetError::InvalidRow { .. }) => {
            let DatasetError::InvalidRow { file: f, row: r, column: c, .. } = &e else { unreachable!() };
            assert_eq!((f.as_str(), *r, c.as_str()), (file, row, column), "{e}");
            e.to_string()
        }
        Err(other) => panic!("expected a row error, got {other}"),
        Ok(_) => panic!("expected an error"),
    }
}

fn expect_schema_error(result: Result<Dataset, DatasetError>, file: &str, column: &str) -> String {
    match result {
        Err(e @ DatasetError::Schema { .. }) => {
            let DatasetError::Schema { file: f, column: c, .. } = &e else { unreachable!() };
            assert_eq!((f.as_str(), c.as_str()), (file, column), "{e}");
            e.to_string()
        }
        Err(other) => panic!("expected a schema error, got {other}"),
        Ok(_) => panic!("expected an error"),
    }
}

/// `batch` with column `name` replaced by `array` under `field`, or removed if `None`.
fn with_column(batch: &RecordBatch, name: &str, replacement: Option<(Field, ArrayRef)>) -> RecordBatch {
    let schema = batch.schema();
    let mut fields = Vec::new();
    let mut columns = Vec::new();
    for (field, column) in schema.fields().iter().zip(batch.columns()) {
        if field.name() == name {
            if let Some((f, a)) = &replacement {
                fields.push(f.clone());
                columns.push(a.clone());
            }
        } else {
            fields.push(field.as_ref().clone());
            columns.push(column.clone());
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).expect("valid batch")
}

#[test]
fn empty_text_names_file_row_and_column() {
    let mut memories = real().memories.clone();
    memories[5].text = "   ".into();
    let bytes = encode(MEMORIES_FILE, &memories_batch(&memories).expect("batch")).expect("encodes");
    let message = expect_row_error(read_with(MEMORIES_FILE, bytes), MEMORIES_FILE, 5, "text");
    assert_eq!(message, r#"memories.parquet row 5, column "text": empty text"#);
}

#[test]
fn bad_category_is_rejected() {
    let mut questions = real().questions.clone();
    questions[12].category = 9;
    let bytes = encode(QUESTIONS_FILE, &questions_batch(&questions).expect("batch")).expect("encodes");
    let message = expect_row_error(read_with(QUESTIONS_FILE, bytes), QUESTIONS_FILE, 12, "category");
    assert_eq!(message, r#"questions.parquet row 12, column "category": expected 1..5, got 9"#);
}

#[test]
fn missing_column_is_rejected() {
    let batch = with_column(&memories_batch(&real().memories).expect("batch"), "speaker", None);
    let bytes = encode(MEMORIES_FILE, &batch).expect("encodes");
    let message = expect_schema_error(read_with(MEMORIES_FILE, bytes), MEMORIES_FILE, "speaker");
    assert_eq!(message, r#"memories.parquet, column "speaker": missing column"#);
}

#[test]
fn wrong_column_type_is_rejected() {
    let questions = &real().questions;
    let category: ArrayRef = Arc::new(questions.iter().map(|q| i64::from(q.category)).collect::<Int64Array>());
    let batch = with_column(
        &questions_batch(questions).expect("batch"),
        "category",
        Some((Field::new("category", DataType::Int64, false), category)),
    );
    let bytes = encode(QUESTIONS_FILE, &batch).expect("encodes");
    let message = expect_schema_error(read_with(QUESTIONS_FILE, bytes), QUESTIONS_FILE, "category");
    assert!(message.contains("expected UInt8, found Int64"), "{message}");
}

#[test]
fn duplicate_ids_are_rejected() {
    let mut questions = real().questions.clone();
    questions[7] = questions[6].clone();
    let bytes = encode(QUESTIONS_FILE, &questions_batch(&questions).expect("batch")).expect("encodes");
    let message = expect_row_error(read_with(QUESTIONS_FILE, bytes), QUESTIONS_FILE, 7, "id");
    assert!(message.contains("duplicate id \"conv-26:q6\" (first at row 6)"), "{message}");

    let mut conversations = real().conversations.clone();
    conversations[3] = conversations[1].clone();
    let bytes = encode(CONVERSATIONS_FILE, &conversations_batch(&conversations).expect("batch")).expect("encodes");
    expect_row_error(read_with(CONVERSATIONS_FILE, bytes), CONVERSATIONS_FILE, 3, "id");

    let mut memories = real().memories.clone();
    memories[9] = memories[8].clone();
    let bytes = encode(MEMORIES_FILE, &memories_batch(&memories).expect("batch")).expect("encodes");
    expect_row_error(read_with(MEMORIES_FILE, bytes), MEMORIES_FILE, 9, "memory_id");
}

#[test]
fn null_in_non_nullable_column_is_rejected() {
    let memories = &real().memories;
    let text: ArrayRef = Arc::new(memories.iter().enumerate().map(|(i, m)| (i != 5).then_some(m.text.as_str())).collect::<StringArray>());
    let batch = with_column(&memories_batch(memories).expect("batch"), "text", Some((Field::new("text", DataType::Utf8, true), text)));
    let bytes = encode(MEMORIES_FILE, &batch).expect("encodes");
    let message = expect_row_error(read_with(MEMORIES_FILE, bytes), MEMORIES_FILE, 5, "text");
    assert_eq!(message, r#"memories.parquet row 5, column "text": null in a non-nullable column"#);
}

#[test]
fn bad_evidence_id_is_rejected() {
    let mut memories = real().memories.clone();
    memories[5].evidence = vec!["D1:3".into(), "D:11:26".into()];
    let bytes = encode(MEMORIES_FILE, &memories_batch(&memories).expect("batch")).expect("encodes");
    let message = expect_row_error(read_with(MEMORIES_FILE, bytes), MEMORIES_FILE, 5, "evidence");
    assert!(message.contains("malformed dia id \"D:11:26\""), "{message}");

    let mut questions = real().questions.clone();
    questions[3].evidence = vec!["D01:3".into()];
    let bytes = encode(QUESTIONS_FILE, &questions_batch(&questions).expect("batch")).expect("encodes");
    expect_row_error(read_with(QUESTIONS_FILE, bytes), QUESTIONS_FILE, 3, "evidence");
}

#[test]
fn other_invalid_rows_are_rejected() {
    let mut questions = real().questions.clone();
    questions[20].answer = None;
    questions[20].adversarial_answer = None;
    let bytes = encode(QUESTIONS_FILE, &questions_batch(&questions).expect("batch")).expect("encodes");
    expect_row_error(read_with(QUESTIONS_FILE, bytes), QUESTIONS_FILE, 20, "answer");

    let mut memories = real().memories.clone();
    memories[4].session = 99;
    let bytes = encode(MEMORIES_FILE, &memories_batch(&memories).expect("batch")).expect("encodes");
    expect_row_error(read_with(MEMORIES_FILE, bytes), MEMORIES_FILE, 4, "session");

    let mut memories = real().memories.clone();
    memories[4].memory_id = "m0005".into();
    let bytes = encode(MEMORIES_FILE, &memories_batch(&memories).expect("batch")).expect("encodes");
    expect_row_error(read_with(MEMORIES_FILE, bytes), MEMORIES_FILE, 4, "memory_id");

    let mut memories = real().memories.clone();
    memories[2].conversation_id = "conv-99".into();
    let bytes = encode(MEMORIES_FILE, &memories_batch(&memories).expect("batch")).expect("encodes");
    expect_row_error(read_with(MEMORIES_FILE, bytes), MEMORIES_FILE, 2, "conversation_id");

    // A gap in the positions of a conversation.
    let mut memories = real().memories.clone();
    memories.remove(3);
    let bytes = encode(MEMORIES_FILE, &memories_batch(&memories).expect("batch")).expect("encodes");
    match read_with(MEMORIES_FILE, bytes) {
        Err(DatasetError::Invalid { message }) => assert!(message.contains("conv-26"), "{message}"),
        other => panic!("expected Invalid, got {other:?}"),
    }

    let split: ArrayRef = Arc::new(StringArray::from_iter_values(real().conversations.iter().map(|_| "validation")));
    let batch = with_column(
        &conversations_batch(&real().conversations).expect("batch"),
        "split",
        Some((Field::new("split", DataType::Utf8, false), split)),
    );
    let bytes = encode(CONVERSATIONS_FILE, &batch).expect("encodes");
    let message = expect_row_error(read_with(CONVERSATIONS_FILE, bytes), CONVERSATIONS_FILE, 0, "split");
    assert!(message.contains("unknown split \"validation\""), "{message}");
}

#[test]
fn truncated_and_garbage_files_are_errors_not_panics() {
    let memories = &real_files().memories;
    let cases: Vec<(&str, Bytes)> = vec![
        ("empty", Bytes::new()),
        ("half", memories.slice(..memories.len() / 2)),
        ("no footer", memories.slice(..memories.len() - 8)),
        ("tail only", memories.slice(memories.len() - 100..)),
        ("garbage", Bytes::from_static(b"PAR1 this is not a parquet file at all PAR1")),
        ("text", Bytes::from_static(b"{\"not\": \"parquet\"}")),
    ];
    for (what, bytes) in cases {
        match read_with(MEMORIES_FILE, bytes) {
            Err(DatasetError::Parquet { file, message }) => {
                assert_eq!(file, MEMORIES_FILE, "{what}: {message}");
            }
            other => panic!("{what}: expected a Parquet error, got {other:?}"),
        }
    }
    // Bytes flipped in the middle of the data pages: any error is fine, a panic is not.
    let mut flipped = memories.to_vec();
    let mid = flipped.len() / 2;
    for b in &mut flipped[mid..mid + 64] {
        *b ^= 0x5a;
    }
    assert!(read_with(MEMORIES_FILE, Bytes::from(flipped)).is_err());
    // A valid Parquet file of the wrong table.
    expect_schema_error(read_with(MEMORIES_FILE, real_files().questions.clone()), MEMORIES_FILE, "memory_id");
}

#[test]
fn directory_errors_name_the_full_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    real().write_parquet(dir.path()).expect("writes");
    let mut memories = real().memories.clone();
    memories[5].text = String::new();
    let bytes = encode(MEMORIES_FILE, &memories_batch(&memories).expect("batch")).expect("encodes");
    std::fs::write(dir.path().join(MEMORIES_FILE), &bytes).expect("overwrites");
    let err = Dataset::read_parquet_dir(dir.path()).expect_err("invalid");
    let expected = format!("{} row 5, column \"text\": empty text", dir.path().join(MEMORIES_FILE).display());
    assert_eq!(err.to_string(), expected);

    std::fs::remove_file(dir.path().join(QUESTIONS_FILE)).expect("removes");
    match Dataset::read_parquet_dir(dir.path()) {
        Err(DatasetError::Io { path, .. }) => assert!(path.ends_with(QUESTIONS_FILE)),
        other => panic!("expected Io, got {other:?}"),
    }
}

// ---------------------------------------------------------------- JSON errors

fn mini_json(category: &str, extra: &str) -> String {
    format!(
        r#"[{{"sample_id": "conv-26",
            "conversation": {{"speaker_a": "A", "speaker_b": "B",
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_2_date_time": "2:00 pm on 9 May, 2023",
                "session_10_date_time": "3:00 pm on 10 May, 2023",
                "session_10": [{{"speaker": "A", "dia_id": "D10:1", "text": "hi"}}],
                "session_2": [{{"speaker": "A", "dia_id": "D2:1", "text": "hi"}}],
                "session_1": [{{"speaker": "A", "dia_id": "D1:1", "text": "hi"}},
                              {{"speaker": "B", "dia_id": "D1:2", "text": "yo"}}]{extra}}},
            "observation": {{
                "session_10_observation": {{"B": [["ten", "D10:1"]]}},
                "session_2_observation": {{"B": [["two-b", "D2:1"]], "A": [["two-a", ["D2:1", "D2:1"]]]}},
                "session_1_observation": {{"A": [["one", "D1:1"]]}}}},
            "session_summary": {{}}, "event_summary": {{}},
            "qa": [{{"question": "Q?", "answer": 7, "evidence": ["D1:1"], "category": {category}}}]}}]"#
    )
}

#[test]
fn mini_json_converts_in_numeric_session_order() {
    let ds = Dataset::from_locomo_json_bytes(mini_json("4", "").as_bytes(), "mini.json").expect("converts");
    let texts: Vec<(&str, &str, u32)> = ds.memories.iter().map(|m| (m.memory_id.as_str(), m.text.as_str(), m.session)).collect();
    assert_eq!(texts, [("m0000", "one", 1), ("m0001", "two-b", 2), ("m0002", "two-a", 2), ("m0003", "ten", 10)]);
    assert_eq!(ds.memories[2].evidence, ["D2:1"]);
    assert_eq!(ds.conversations[0].turn_count, 4);
    assert_eq!(ds.questions[0].answer.as_deref(), Some("7"));
    let r = ds.evidence_repairs().expect("repairs");
    assert_eq!((r.list_valued_dia_ids, r.memories.duplicates_removed), (1, 1));
}

#[test]
fn json_errors_name_the_path() {
    let err = |json: &str| Dataset::from_locomo_json_bytes(json.as_bytes(), "mini.json").expect_err("invalid").to_string();
    assert_eq!(err(&mini_json("7", "")), "mini.json: [0].qa[0].category: expected 1..5, got 7");
    assert_eq!(err(&mini_json("\"4\"", "")), "mini.json: [0].qa[0].category: expected 1..5, got the string \"4\"");
    assert_eq!(err(&mini_json("4", r#", "session_3": []"#)), "mini.json: [0].conversation.session_3_date_time: missing date of session 3");
    assert_eq!(
        err(&mini_json("4", "").replace("conv-26", "conv-99")),
        "mini.json: [0].sample_id: conversation \"conv-99\" is not in the seed-42 train/test split"
    );
    assert_eq!(
        err(&mini_json("4", "").replace(r#""answer": 7"#, r#""answer": null"#)),
        "mini.json: [0].qa[0]: neither answer nor adversarial_answer"
    );
    assert_eq!(
        err(&mini_json("4", "").replace(r#"["ten", "D10:1"]"#, r#"["ten", "D"]"#)),
        "mini.json: [0].observation.session_10_observation.B[0][1]: no well-formed dia id (D<n>:<n>)"
    );
    assert_eq!(
        err(&mini_json("4", "").replace(r#"["one", "D1:1"]"#, r#"["  ", "D1:1"]"#)),
        "mini.json: [0].observation.session_1_observation.A[0][0]: empty fact"
    );
    assert!(err("[{").starts_with("mini.json: invalid JSON: "));
    assert_eq!(err("{}"), "mini.json: $: expected an array, got an object");
    let twice =
        format!("[{}, {}]", &mini_json("4", "")[1..mini_json("4", "").len() - 1], &mini_json("4", "")[1..mini_json("4", "").len() - 1]);
    assert_eq!(err(&twice), "mini.json: [1].sample_id: duplicate conversation id \"conv-26\"");
}

#[test]
fn real_json_with_a_bad_category_names_the_path() {
    let text = std::fs::read_to_string(LOCOMO_JSON).expect("reads");
    let mut value: serde_json::Value = serde_json::from_str(&text).expect("parses");
    value[3]["qa"][12]["category"] = serde_json::json!(7);
    let bytes = serde_json::to_vec(&value).expect("serialises");
    let err = Dataset::from_locomo_json_bytes(&bytes, "locomo10.json").expect_err("invalid");
    assert_eq!(err.to_string(), "locomo10.json: [3].qa[12].category: expected 1..5, got 7");

    let missing = Dataset::from_locomo_json(std::path::Path::new("/nonexistent/locomo10.json")).expect_err("missing file");
    assert!(matches!(missing, DatasetError::Io { .. }), "{missing}");
}

#[test]
fn unknown_memory_types_are_refused() {
    let mut ds = real().clone();
    ds.memories[3].memory_type = "feelings".into();
    let err = ds.validate().unwrap_err().to_string();
    assert!(err.contains("row 3") && err.contains("memory_type") && err.contains("feelings"), "{err}");
}
