//! `memgym dataset verl`: LoCoMo questions as verl's RL dataset (one row per question), so a verl user
//! needs no preprocessing script of their own.
//!
//! verl's `RLHFDataset` reads `prompt` (chat messages), `data_source`, `agent_name` (the agent loop that
//! runs the row: by default [`DEFAULT_AGENT_NAME`], the memgym agent loop the Python package registers
//! through verl's `agent_loop_config_path`; `--agent-name tool_agent` selects verl's own `ToolAgentLoop`),
//! `reward_model.ground_truth`, and `extra_info` — which must be a **struct** (a dict in Python; MemUpdate
//! wrote a JSON string and needed a patched loader) holding `index`, `need_tools_kwargs` and
//! `tools_kwargs` = `{tool_name: {create_kwargs: {...}}}`. Every tool's `create_kwargs` carry the
//! conversation and question ids and `include_adversarial` (true on category-5 rows, without which
//! CreateEpisode refuses them), which is what the memgym verl adapter needs to open (idempotently) the
//! episode for a trajectory. Parquet has one schema per file, so every row has all three keys.
//!
//! Columns:
//!
//! | column | Arrow type |
//! |---|---|
//! | `prompt` | List<Struct{role: Utf8, content: Utf8}>: system + user |
//! | `data_source` | Utf8: `"memgym/locomo"` |
//! | `agent_name` | Utf8: `"memgym_agent"` (`--agent-name`) |
//! | `ability` | Utf8: `"memory-editing"` |
//! | `reward_model` | Struct{style: Utf8 = "rule", ground_truth: Utf8 = the gold answer, or "" for category 5} |
//! | `extra_info` | Struct{index: Int64, split, conversation_id, question_id, question: Utf8, category: UInt8, gold_status: Utf8 (the LoCoMo audit's: ok, wrong-citation, flagged), need_tools_kwargs: Boolean, tools_kwargs: Struct{<tool>: Struct{create_kwargs: Struct{conversation_id, question_id: Utf8, include_adversarial: Boolean = category 5}}}} |

use std::path::Path;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BooleanArray, Int64Array, ListArray, RecordBatch, StructArray, UInt8Array};
use arrow_schema::{DataType, Field, Fields};

use super::parquet_io::{strings, write_batch};
use super::{Dataset, DatasetError, Question, Split};

/// `data_source` of every row (the memgym reward function checks it).
pub const DATA_SOURCE: &str = "memgym/locomo";

/// `agent_name` of every row unless `--agent-name` says otherwise: the memgym agent loop of the Python
/// package (`memgym_verl`), registered with verl through `agent_loop_config_path`.
pub const DEFAULT_AGENT_NAME: &str = "memgym_agent";

/// The system message: the task, the tools and the rules the server enforces.
pub const SYSTEM_PROMPT: &str = "You are a memory editing agent. A memory database holds facts from a long conversation \
between two people; every memory has an id, a text, a speaker, a session date and evidence ids. Edit the \
database so that a reader who retrieves the top 5 memories for the target question can answer it correctly, and keep \
it compact.\n\nTools: search_memory (find memories; results lead with ids), sample_memory (look around), \
manage_memory (create a memory, or update one by id), delete_memory (remove wrong, duplicate or useless memories), \
merge_memory (combine 2 to 5 related memories into one), split_memory (cut a memory that mixes facts into parts). \
Name only ids that a tool result showed you: any other id belongs to some unrelated memory, which an edit would \
destroy. Every tool call uses one step of a limited budget; a refused call changes nothing. Dates matter: put the date into a \
memory's text when the question asks when. Stop calling tools when the memory is ready.";

/// The user message for one question.
pub fn user_prompt(question: &str) -> String {
    format!("Target question: {question}\n\nUpdate the memory database so that this question can be answered correctly from it.")
}

/// The policy's opening messages for one question under the system message `system` ([`SYSTEM_PROMPT`]
/// unless `--system-prompt-file` says otherwise), as (role, content): the one rule that builds both a verl
/// row's `prompt` and the first messages `memgym rollout` sends (`crate::harness::rollout::prompt`), so the policy
/// measured before training sees what the trainer will show it.
pub fn prompt_messages(system: &str, question: &str) -> [(&'static str, String); 2] {
    [("system", system.to_string()), ("user", user_prompt(question))]
}

/// The longest system prompt a file may give.
pub const MAX_SYSTEM_PROMPT_BYTES: usize = 64 << 10;

/// A system prompt from `--system-prompt-file`: UTF-8, not blank, at most [`MAX_SYSTEM_PROMPT_BYTES`]; one
/// trailing newline is dropped (editors add it), everything else is kept as written.
pub fn read_system_prompt(path: &Path) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("--system-prompt-file {}: {e}", path.display()))?;
    if bytes.len() > MAX_SYSTEM_PROMPT_BYTES {
        return Err(format!("--system-prompt-file {}: {} bytes, at most {MAX_SYSTEM_PROMPT_BYTES}", path.display(), bytes.len()));
    }
    let text = String::from_utf8(bytes).map_err(|_| format!("--system-prompt-file {}: not UTF-8", path.display()))?;
    let text = text.strip_suffix('\n').map(|t| t.strip_suffix('\r').unwrap_or(t)).unwrap_or(&text).to_string();
    if text.trim().is_empty() {
        return Err(format!("--system-prompt-file {}: empty", path.display()));
    }
    Ok(text)
}

/// Which questions to write, and for which agent loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerlOptions {
    /// Only this split; `None` for all.
    pub split: Option<Split>,
    /// Include category 5 (adversarial). Their rows carry `include_adversarial: true` in `create_kwargs`.
    pub include_adversarial: bool,
    /// `agent_name` of every row.
    pub agent_name: String,
    /// The system message of every row.
    pub system_prompt: String,
}

impl VerlOptions {
    /// `split`, without category 5, for [`DEFAULT_AGENT_NAME`].
    pub fn new(split: Option<Split>) -> Self {
        VerlOptions {
            split,
            include_adversarial: false,
            agent_name: DEFAULT_AGENT_NAME.to_string(),
            system_prompt: SYSTEM_PROMPT.to_string(),
        }
    }
}

/// The questions a verl dataset holds, in dataset order.
pub fn select<'a>(ds: &'a Dataset, opts: &VerlOptions) -> Vec<&'a Question> {
    ds.questions.iter().filter(|q| opts.split.is_none_or(|s| q.split == s) && (opts.include_adversarial || q.category != 5)).collect()
}

fn utf8(name: &str) -> Arc<Field> {
    Arc::new(Field::new(name, DataType::Utf8, false))
}

/// The record batch of `questions` with `agent_name` and the system message `system` on every row and one
/// `tools_kwargs` entry per name of `tools` (the server's tool names, passed in by the caller: the dataset
/// knows no tools; see the module doc for the schema).
pub fn batch(questions: &[&Question], agent_name: &str, system: &str, tools: &[&str]) -> Result<RecordBatch, DatasetError> {
    let err = |e: arrow_schema::ArrowError| DatasetError::Parquet { file: "verl".into(), message: e.to_string() };
    let n = questions.len();

    // prompt: [system, user] per row.
    let message_fields = Fields::from(vec![utf8("role"), utf8("content")]);
    let rows: Vec<[(&str, String); 2]> = questions.iter().map(|q| prompt_messages(system, &q.question)).collect();
    let roles = rows.iter().flat_map(|r| r.iter().map(|(role, _)| *role));
    let contents = rows.iter().flat_map(|r| r.iter().map(|(_, content)| content.as_str()));
    let messages = StructArray::try_new(message_fields.clone(), vec![strings(roles), strings(contents)], None).map_err(err)?;
    let item = Arc::new(Field::new("item", DataType::Struct(message_fields), false));
    let mut offsets = arrow_array::builder::OffsetBufferBuilder::<i32>::new(n);
    for _ in 0..n {
        offsets.push_length(2);
    }
    let prompt = ListArray::try_new(item, offsets.finish(), Arc::new(messages), None).map_err(err)?;

    let reward_fields = Fields::from(vec![utf8("style"), utf8("ground_truth")]);
    let reward_model = StructArray::try_new(
        reward_fields,
        vec![strings(questions.iter().map(|_| "rule")), strings(questions.iter().map(|q| q.answer.as_deref().unwrap_or("")))],
        None,
    )
    .map_err(err)?;

    let create_fields = Fields::from(vec![
        utf8("conversation_id"),
        utf8("question_id"),
        Arc::new(Field::new("include_adversarial", DataType::Boolean, false)),
    ]);
    let create = StructArray::try_new(
        create_fields.clone(),
        vec![
            strings(questions.iter().map(|q| q.conversation_id.as_str())),
            strings(questions.iter().map(|q| q.id.as_str())),
            Arc::new(questions.iter().map(|q| Some(q.category == 5)).collect::<BooleanArray>()),
        ],
        None,
    )
    .map_err(err)?;
    let per_tool_fields = Fields::from(vec![Field::new("create_kwargs", DataType::Struct(create_fields), false)]);
    let per_tool = StructArray::try_new(per_tool_fields.clone(), vec![Arc::new(create) as ArrayRef], None).map_err(err)?;
    let tools_fields: Fields = tools.iter().map(|t| Field::new(*t, DataType::Struct(per_tool_fields.clone()), false)).collect();
    let tools_kwargs =
        StructArray::try_new(tools_fields, tools.iter().map(|_| Arc::new(per_tool.clone()) as ArrayRef).collect(), None).map_err(err)?;

    let extra_fields = Fields::from(vec![
        Field::new("index", DataType::Int64, false),
        Field::new("split", DataType::Utf8, false),
        Field::new("conversation_id", DataType::Utf8, false),
        Field::new("question_id", DataType::Utf8, false),
        Field::new("question", DataType::Utf8, false),
        Field::new("category", DataType::UInt8, false),
        Field::new("gold_status", DataType::Utf8, false),
        Field::new("need_tools_kwargs", DataType::Boolean, false),
        Field::new("tools_kwargs", tools_kwargs.data_type().clone(), false),
    ]);
    let extra_info = StructArray::try_new(
        extra_fields,
        vec![
            Arc::new((0..n as i64).collect::<Int64Array>()),
            strings(questions.iter().map(|q| q.split.as_str())),
            strings(questions.iter().map(|q| q.conversation_id.as_str())),
            strings(questions.iter().map(|q| q.id.as_str())),
            strings(questions.iter().map(|q| q.question.as_str())),
            Arc::new(questions.iter().map(|q| q.category).collect::<UInt8Array>()),
            strings(questions.iter().map(|q| q.gold.status.name())),
            Arc::new(BooleanArray::from(vec![true; n])),
            Arc::new(tools_kwargs),
        ],
        None,
    )
    .map_err(err)?;

    RecordBatch::try_from_iter(vec![
        ("prompt", Arc::new(prompt) as ArrayRef),
        ("data_source", strings(questions.iter().map(|_| DATA_SOURCE))),
        ("agent_name", strings(questions.iter().map(|_| agent_name))),
        ("ability", strings(questions.iter().map(|_| "memory-editing"))),
        ("reward_model", Arc::new(reward_model)),
        ("extra_info", Arc::new(extra_info)),
    ])
    .map_err(err)
}

/// Writes the verl dataset of `ds` to `out` (atomically), with `tools_kwargs` for `tools`; returns the
/// number of rows.
pub fn write(ds: &Dataset, opts: &VerlOptions, tools: &[&str], out: &Path) -> Result<usize, DatasetError> {
    let questions = select(ds, opts);
    write_batch(out, &batch(&questions, &opts.agent_name, &opts.system_prompt, tools)?)?;
    Ok(questions.len())
}

#[cfg(test)]
mod tests {
    use arrow_array::cast::AsArray;
    use arrow_array::Array;

    use super::*;
    use crate::tools::TOOL_NAMES;

    fn dataset() -> Dataset {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/locomo/locomo10.json");
        Dataset::from_locomo_json(Path::new(path)).unwrap()
    }

    #[test]
    fn rows_carry_the_gold_status_and_exclude_flagged_drops_the_audits_corrupt_golds() {
        let mut ds = crate::dataset::Dataset::load(None).unwrap();
        let opts = VerlOptions { split: Some(Split::Train), ..VerlOptions::new(None) };
        let status = |ds: &Dataset| -> Vec<String> {
            let b = batch(&select(ds, &opts), DEFAULT_AGENT_NAME, SYSTEM_PROMPT, &TOOL_NAMES).unwrap();
            let extra = b.column_by_name("extra_info").unwrap().as_struct().clone();
            let col = extra.column_by_name("gold_status").unwrap().as_string::<i32>().clone();
            (0..col.len()).map(|i| col.value(i).to_string()).collect()
        };
        let all = status(&ds);
        assert_eq!(all.iter().filter(|s| *s == "flagged").count(), 67, "the audit flags 67 train questions");
        ds.apply_gold(crate::dataset::GoldMode::ExcludeFlagged);
        let kept = status(&ds);
        assert_eq!(kept.len(), all.len() - 67);
        assert!(kept.iter().all(|s| s == "ok" || s == "wrong-citation"));
    }

    #[test]
    fn rows_follow_verls_contract_with_extra_info_as_a_struct() {
        let ds = dataset();
        let test = select(&ds, &VerlOptions::new(Some(Split::Test)));
        assert_eq!(test.len(), 411);
        assert_eq!(select(&ds, &VerlOptions::new(Some(Split::Train))).len(), 1_129);
        assert_eq!(select(&ds, &VerlOptions { include_adversarial: true, ..VerlOptions::new(None) }).len(), 1_986);

        let b = batch(&test, DEFAULT_AGENT_NAME, SYSTEM_PROMPT, &TOOL_NAMES).unwrap();
        assert_eq!(b.num_rows(), 411);
        let names: Vec<&str> = b.schema_ref().fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["prompt", "data_source", "agent_name", "ability", "reward_model", "extra_info"]);

        let prompt = b.column(0).as_list::<i32>();
        let first = prompt.value(0);
        let first = first.as_struct();
        let role = first.column(0).as_string::<i32>();
        let content = first.column(1).as_string::<i32>();
        assert_eq!((role.value(0), role.value(1)), ("system", "user"));
        assert_eq!(content.value(0), SYSTEM_PROMPT);
        assert_eq!(content.value(1), user_prompt(&test[0].question));
        assert_eq!(b.column(2).as_string::<i32>().value(5), "memgym_agent");

        let reward = b.column(4).as_struct();
        assert_eq!(reward.column_by_name("ground_truth").unwrap().as_string::<i32>().value(0), test[0].answer.as_deref().unwrap());

        let extra = b.column(5).as_struct();
        assert!(matches!(extra.data_type(), DataType::Struct(_)), "extra_info is a struct, not a JSON string");
        assert_eq!(extra.column_by_name("index").unwrap().as_primitive::<arrow_array::types::Int64Type>().value(7), 7);
        assert_eq!(extra.column_by_name("question_id").unwrap().as_string::<i32>().value(3), test[3].id);
        let tools = extra.column_by_name("tools_kwargs").unwrap().as_struct();
        assert_eq!(tools.num_columns(), 6);
        for name in TOOL_NAMES {
            let create = tools.column_by_name(name).unwrap().as_struct().column_by_name("create_kwargs").unwrap().as_struct().clone();
            assert_eq!(create.column_by_name("conversation_id").unwrap().as_string::<i32>().value(3), test[3].conversation_id);
            assert_eq!(create.column_by_name("question_id").unwrap().as_string::<i32>().value(3), test[3].id);
            let adversarial = create.column_by_name("include_adversarial").unwrap().as_boolean().clone();
            assert_eq!((adversarial.null_count(), adversarial.true_count()), (0, 0), "no category 5 without the flag");
        }
    }

    /// `memgym dataset verl --include-adversarial`: every tool's create_kwargs of a category-5 row say
    /// `include_adversarial: true` (CreateEpisode refuses the row otherwise), the others `false`.
    #[test]
    fn category_5_rows_ask_for_include_adversarial_in_every_tool() {
        let ds = dataset();
        let all = select(&ds, &VerlOptions { include_adversarial: true, ..VerlOptions::new(Some(Split::Test)) });
        let b = batch(&all, DEFAULT_AGENT_NAME, SYSTEM_PROMPT, &TOOL_NAMES).unwrap();
        let tools = b.column(5).as_struct().column_by_name("tools_kwargs").unwrap().as_struct().clone();
        let expected: Vec<bool> = all.iter().map(|q| q.category == 5).collect();
        assert_eq!(expected.iter().filter(|x| **x).count(), 135, "546 - 411 category-5 test questions");
        for name in TOOL_NAMES {
            let create = tools.column_by_name(name).unwrap().as_struct().column_by_name("create_kwargs").unwrap().as_struct().clone();
            let flag = create.column_by_name("include_adversarial").unwrap().as_boolean().clone();
            let got: Vec<bool> = (0..flag.len()).map(|i| flag.value(i)).collect();
            assert_eq!(got, expected, "{name}");
        }
    }

    #[test]
    fn agent_name_is_memgym_agent_unless_chosen() {
        let ds = dataset();
        let qs = select(&ds, &VerlOptions::new(Some(Split::Test)));
        for (name, expected) in [(DEFAULT_AGENT_NAME, "memgym_agent"), ("tool_agent", "tool_agent")] {
            let b = batch(&qs[..3], name, SYSTEM_PROMPT, &TOOL_NAMES).unwrap();
            let col = b.column_by_name("agent_name").unwrap().as_string::<i32>().clone();
            assert!(col.iter().all(|v| v == Some(expected)), "{col:?}");
        }
    }

    #[test]
    fn the_file_round_trips_through_parquet() {
        let ds = dataset();
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("test.parquet");
        let opts = VerlOptions { include_adversarial: true, agent_name: "tool_agent".into(), ..VerlOptions::new(Some(Split::Test)) };
        let n = write(&ds, &opts, &TOOL_NAMES, &out).unwrap();
        assert_eq!(n, 546);
        let file = std::fs::File::open(&out).unwrap();
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file).unwrap().build().unwrap();
        let batches: Vec<RecordBatch> = reader.map(|b| b.unwrap()).collect();
        assert_eq!(batches.iter().map(RecordBatch::num_rows).sum::<usize>(), 546);
        // One schema for every row, the Boolean included; the flag and the agent name survive the file.
        let b = &batches[0];
        assert_eq!(b.column_by_name("agent_name").unwrap().as_string::<i32>().value(0), "tool_agent");
        let tools = b.column_by_name("extra_info").unwrap().as_struct().column_by_name("tools_kwargs").unwrap().as_struct().clone();
        let create = tools.column_by_name("merge_memory").unwrap().as_struct().column_by_name("create_kwargs").unwrap().as_struct().clone();
        let flags = batches.iter().map(|b| {
            let t = b.column_by_name("extra_info").unwrap().as_struct().column_by_name("tools_kwargs").unwrap().as_struct().clone();
            let c = t.column_by_name("search_memory").unwrap().as_struct().column_by_name("create_kwargs").unwrap().as_struct().clone();
            c.column_by_name("include_adversarial").unwrap().as_boolean().true_count()
        });
        assert_eq!(flags.sum::<usize>(), 135);
        assert_eq!(create.column_by_name("include_adversarial").unwrap().data_type(), &DataType::Boolean);
    }
}
