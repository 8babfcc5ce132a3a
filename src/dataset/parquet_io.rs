//! Parquet encoding and decoding of the dataset (schema in the module docs of `dataset`). The
//! readers check the schema before touching data, downcast every column with a check and treat
//! every null explicitly, so a damaged or foreign file yields a [`DatasetError`] naming file,
//! row and column instead of a panic.

use std::fs;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{ListBuilder, StringBuilder, UInt32Builder};
use arrow_array::types::{UInt32Type, UInt8Type};
use arrow_array::{Array, ArrayRef, ArrowPrimitiveType, ListArray, PrimitiveArray, RecordBatch, StringArray, UInt32Array, UInt8Array};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use bytes::Bytes;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

use super::{Conversation, Dataset, DatasetError, MemoryRow, Question, Session, Split};

/// File name of the conversations table.
pub const CONVERSATIONS_FILE: &str = "conversations.parquet";
/// File name of the initial-memories table.
pub const MEMORIES_FILE: &str = "memories.parquet";
/// File name of the questions table.
pub const QUESTIONS_FILE: &str = "questions.parquet";

/// The three encoded Parquet files of a dataset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParquetFiles {
    /// `conversations.parquet`.
    pub conversations: Bytes,
    /// `memories.parquet`.
    pub memories: Bytes,
    /// `questions.parquet`.
    pub questions: Bytes,
}

fn utf8_list() -> DataType {
    DataType::List(Arc::new(Field::new("item", DataType::Utf8, false)))
}

fn u32_list() -> DataType {
    DataType::List(Arc::new(Field::new("item", DataType::UInt32, false)))
}

/// Schema of `conversations.parquet`.
pub(super) fn conversations_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("speaker_a", DataType::Utf8, false),
        Field::new("speaker_b", DataType::Utf8, false),
        Field::new("session_numbers", u32_list(), false),
        Field::new("session_dates", utf8_list(), false),
        Field::new("turn_count", DataType::UInt32, false),
        Field::new("split", DataType::Utf8, false),
    ]))
}

/// Schema of `memories.parquet`.
pub(super) fn memories_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("conversation_id", DataType::Utf8, false),
        Field::new("memory_id", DataType::Utf8, false),
        Field::new("position", DataType::UInt32, false),
        Field::new("text", DataType::Utf8, false),
        Field::new("memory_type", DataType::Utf8, false),
        Field::new("speaker", DataType::Utf8, false),
        Field::new("session", DataType::UInt32, false),
        Field::new("session_date", DataType::Utf8, false),
        Field::new("evidence", utf8_list(), false),
        Field::new("source", DataType::Utf8, false),
    ]))
}

/// Schema of `questions.parquet`.
pub(super) fn questions_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("conversation_id", DataType::Utf8, false),
        Field::new("index", DataType::UInt32, false),
        Field::new("question", DataType::Utf8, false),
        Field::new("answer", DataType::Utf8, true),
        Field::new("adversarial_answer", DataType::Utf8, true),
        Field::new("evidence", utf8_list(), false),
        Field::new("category", DataType::UInt8, false),
        Field::new("split", DataType::Utf8, false),
    ]))
}

/// A non-null Utf8 column of `values`.
pub(super) fn strings<'a>(values: impl Iterator<Item = &'a str>) -> ArrayRef {
    Arc::new(StringArray::from_iter_values(values))
}

fn string_lists<'a, I>(rows: impl Iterator<Item = I>) -> ArrayRef
where
    I: IntoIterator<Item = &'a str>,
{
    let mut builder = ListBuilder::new(StringBuilder::new()).with_field(Arc::new(Field::new("item", DataType::Utf8, false)));
    for row in rows {
        for item in row {
            builder.values().append_value(item);
        }
        builder.append(true);
    }
    Arc::new(builder.finish())
}

fn batch(file: &str, schema: SchemaRef, columns: Vec<ArrayRef>) -> Result<RecordBatch, DatasetError> {
    RecordBatch::try_new(schema, columns).map_err(|e| DatasetError::Parquet { file: file.to_owned(), message: e.to_string() })
}

/// The conversations as one record batch (no validation).
pub(super) fn conversations_batch(rows: &[Conversation]) -> Result<RecordBatch, DatasetError> {
    let mut numbers = ListBuilder::new(UInt32Builder::new()).with_field(Arc::new(Field::new("item", DataType::UInt32, false)));
    for c in rows {
        for s in &c.sessions {
            numbers.values().append_value(s.number);
        }
        numbers.append(true);
    }
    batch(
        CONVERSATIONS_FILE,
        conversations_schema(),
        vec![
            strings(rows.iter().map(|c| c.id.as_str())),
            strings(rows.iter().map(|c| c.speaker_a.as_str())),
            strings(rows.iter().map(|c| c.speaker_b.as_str())),
            Arc::new(numbers.finish()),
            string_lists(rows.iter().map(|c| c.sessions.iter().map(|s| s.date_time.as_str()))),
            Arc::new(rows.iter().map(|c| c.turn_count).collect::<UInt32Array>()),
            strings(rows.iter().map(|c| c.split.as_str())),
        ],
    )
}

/// The memories as one record batch (no validation).
pub(super) fn memories_batch(rows: &[MemoryRow]) -> Result<RecordBatch, DatasetError> {
    batch(
        MEMORIES_FILE,
        memories_schema(),
        vec![
            strings(rows.iter().map(|m| m.conversation_id.as_str())),
            strings(rows.iter().map(|m| m.memory_id.as_str())),
            Arc::new(rows.iter().map(|m| m.position).collect::<UInt32Array>()),
            strings(rows.iter().map(|m| m.text.as_str())),
            strings(rows.iter().map(|m| m.memory_type.as_str())),
            strings(rows.iter().map(|m| m.speaker.as_str())),
            Arc::new(rows.iter().map(|m| m.session).collect::<UInt32Array>()),
            strings(rows.iter().map(|m| m.session_date.as_str())),
            string_lists(rows.iter().map(|m| m.evidence.iter().map(String::as_str))),
            strings(rows.iter().map(|m| m.source.as_str())),
        ],
    )
}

/// The questions as one record batch (no validation).
pub(super) fn questions_batch(rows: &[Question]) -> Result<RecordBatch, DatasetError> {
    batch(
        QUESTIONS_FILE,
        questions_schema(),
        vec![
            strings(rows.iter().map(|q| q.id.as_str())),
            strings(rows.iter().map(|q| q.conversation_id.as_str())),
            Arc::new(rows.iter().map(|q| q.index).collect::<UInt32Array>()),
            strings(rows.iter().map(|q| q.question.as_str())),
            Arc::new(rows.iter().map(|q| q.answer.as_deref()).collect::<StringArray>()),
            Arc::new(rows.iter().map(|q| q.adversarial_answer.as_deref()).collect::<StringArray>()),
            string_lists(rows.iter().map(|q| q.evidence.iter().map(String::as_str))),
            Arc::new(rows.iter().map(|q| q.category).collect::<UInt8Array>()),
            strings(rows.iter().map(|q| q.split.as_str())),
        ],
    )
}

/// Encodes one record batch as a snappy-compressed Parquet file in memory.
pub(super) fn encode(file: &str, batch: &RecordBatch) -> Result<Bytes, DatasetError> {
    let err = |e: parquet::errors::ParquetError| DatasetError::Parquet { file: file.to_owned(), message: e.to_string() };
    let props = WriterProperties::builder().set_compression(Compression::SNAPPY).build();
    let mut writer = ArrowWriter::try_new(Vec::new(), batch.schema(), Some(props)).map_err(err)?;
    writer.write(batch).map_err(err)?;
    Ok(Bytes::from(writer.into_inner().map_err(err)?))
}

/// Writes `batch` as a Snappy Parquet file at `path`, atomically (the harness's `rollouts.parquet`).
pub fn write_batch(path: &Path, batch: &RecordBatch) -> Result<(), DatasetError> {
    let bytes = encode(&path.display().to_string(), batch)?;
    atomic_write(path, &bytes)
}

/// Writes `bytes` to `path` atomically ([`crate::util::atomic_file::write`]): readers see the old file or
/// the new one, never a partial one.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<(), DatasetError> {
    crate::util::atomic_file::write(path, bytes).map_err(|(path, source)| DatasetError::Io { path, source })
}

/// Decodes a Parquet file into record batches after checking its schema against `expected`.
/// A panic inside the decoder on a malformed file is turned into an error as a last resort.
fn decode(file: &str, bytes: Bytes, expected: &Schema) -> Result<Vec<RecordBatch>, DatasetError> {
    let parquet_err = |message: String| DatasetError::Parquet { file: file.to_owned(), message };
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let builder = ParquetRecordBatchReaderBuilder::try_new(bytes).map_err(|e| parquet_err(e.to_string()))?;
        check_schema(file, builder.schema(), expected)?;
        let reader = builder.build().map_err(|e| parquet_err(e.to_string()))?;
        reader.map(|b| b.map_err(|e| parquet_err(e.to_string()))).collect::<Result<Vec<_>, _>>()
    }));
    match outcome {
        Ok(result) => result,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_owned());
            Err(parquet_err(format!("the Parquet decoder failed: {what}")))
        }
    }
}

/// Same type, except that list item fields may differ in name and nullability.
fn compatible(expected: &DataType, actual: &DataType) -> bool {
    match (expected, actual) {
        (DataType::List(e), DataType::List(a)) => e.data_type() == a.data_type(),
        (e, a) => e == a,
    }
}

fn check_schema(file: &str, actual: &Schema, expected: &Schema) -> Result<(), DatasetError> {
    for field in expected.fields() {
        let column = field.name();
        let schema_err = |message: String| DatasetError::Schema { file: file.to_owned(), column: column.clone(), message };
        let found = actual.field_with_name(column).map_err(|_| schema_err("missing column".to_owned()))?;
        if !compatible(field.data_type(), found.data_type()) {
            return Err(schema_err(format!("expected {}, found {}", field.data_type(), found.data_type())));
        }
    }
    Ok(())
}

/// Checked access to the columns of one record batch; rows are numbered from `offset`.
struct Columns<'a> {
    file: &'a str,
    batch: &'a RecordBatch,
    offset: usize,
}

impl<'a> Columns<'a> {
    fn schema_err(&self, column: &str, message: &str) -> DatasetError {
        DatasetError::Schema { file: self.file.to_owned(), column: column.to_owned(), message: message.to_owned() }
    }

    fn array<A: Array + 'static>(&self, column: &str, type_name: &str) -> Result<&'a A, DatasetError> {
        let batch: &'a RecordBatch = self.batch;
        batch
            .column_by_name(column)
            .ok_or_else(|| self.schema_err(column, "missing column"))?
            .as_any()
            .downcast_ref::<A>()
            .ok_or_else(|| self.schema_err(column, &format!("expected {type_name}")))
    }

    fn strings(&self, column: &'a str) -> Result<StringColumn<'a>, DatasetError> {
        Ok(StringColumn { at: self.at(column), array: self.array::<StringArray>(column, "Utf8")? })
    }

    fn primitives<T: ArrowPrimitiveType>(&self, column: &'a str, type_name: &str) -> Result<PrimitiveColumn<'a, T>, DatasetError> {
        Ok(PrimitiveColumn { at: self.at(column), array: self.array::<PrimitiveArray<T>>(column, type_name)? })
    }

    fn lists<V: Array + 'static>(&self, column: &'a str, type_name: &str) -> Result<ListColumn<'a, V>, DatasetError> {
        let list = self.array::<ListArray>(column, type_name)?;
        let values = list.values().as_any().downcast_ref::<V>().ok_or_else(|| self.schema_err(column, &format!("expected {type_name}")))?;
        Ok(ListColumn { at: self.at(column), list, values })
    }

    fn at(&self, column: &'a str) -> At<'a> {
        At { file: self.file, column, offset: self.offset }
    }
}

/// Where a value is, for errors.
#[derive(Clone, Copy)]
struct At<'a> {
    file: &'a str,
    column: &'a str,
    offset: usize,
}

impl At<'_> {
    fn err(&self, i: usize, message: impl Into<String>) -> DatasetError {
        DatasetError::InvalidRow {
            file: self.file.to_owned(),
            row: self.offset + i,
            column: self.column.to_owned(),
            message: message.into(),
        }
    }

    fn null(&self, i: usize) -> DatasetError {
        self.err(i, "null in a non-nullable column")
    }
}

struct StringColumn<'a> {
    at: At<'a>,
    array: &'a StringArray,
}

impl StringColumn<'_> {
    fn get(&self, i: usize) -> Result<String, DatasetError> {
        self.optional(i)?.ok_or_else(|| self.at.null(i))
    }

    fn optional(&self, i: usize) -> Result<Option<String>, DatasetError> {
        if i >= self.array.len() {
            return Err(self.at.err(i, "column shorter than the batch"));
        }
        Ok((!self.array.is_null(i)).then(|| self.array.value(i).to_owned()))
    }
}

struct PrimitiveColumn<'a, T: ArrowPrimitiveType> {
    at: At<'a>,
    array: &'a PrimitiveArray<T>,
}

impl<T: ArrowPrimitiveType> PrimitiveColumn<'_, T> {
    fn get(&self, i: usize) -> Result<T::Native, DatasetError> {
        if i >= self.array.len() {
            return Err(self.at.err(i, "column shorter than the batch"));
        }
        if self.array.is_null(i) {
            return Err(self.at.null(i));
        }
        Ok(self.array.value(i))
    }
}

struct ListColumn<'a, V> {
    at: At<'a>,
    list: &'a ListArray,
    values: &'a V,
}

impl<V: Array> ListColumn<'_, V> {
    /// The item range of row `i`, checked against nulls and bounds.
    fn range(&self, i: usize) -> Result<std::ops::Range<usize>, DatasetError> {
        if i >= self.list.len() {
            return Err(self.at.err(i, "column shorter than the batch"));
        }
        if self.list.is_null(i) {
            return Err(self.at.null(i));
        }
        let offsets = self.list.value_offsets();
        let (Some(&start), Some(&end)) = (offsets.get(i), offsets.get(i + 1)) else {
            return Err(self.at.err(i, "bad list offsets"));
        };
        let (Ok(start), Ok(end)) = (usize::try_from(start), usize::try_from(end)) else {
            return Err(self.at.err(i, "bad list offsets"));
        };
        if start > end || end > self.values.len() {
            return Err(self.at.err(i, "bad list offsets"));
        }
        for j in start..end {
            if self.values.is_null(j) {
                return Err(self.at.err(i, format!("null list item {}", j - start)));
            }
        }
        Ok(start..end)
    }
}

impl ListColumn<'_, StringArray> {
    fn get(&self, i: usize) -> Result<Vec<String>, DatasetError> {
        Ok(self.range(i)?.map(|j| self.values.value(j).to_owned()).collect())
    }
}

impl ListColumn<'_, UInt32Array> {
    fn get(&self, i: usize) -> Result<Vec<u32>, DatasetError> {
        Ok(self.range(i)?.map(|j| self.values.value(j)).collect())
    }
}

/// Calls `row` for every row of every batch with typed column access.
fn for_each_row<T>(
    file: &str,
    batches: &[RecordBatch],
    mut row: impl FnMut(&Columns<'_>, usize) -> Result<T, DatasetError>,
) -> Result<Vec<T>, DatasetError> {
    let mut out = Vec::new();
    let mut offset = 0;
    for batch in batches {
        let columns = Columns { file, batch, offset };
        for i in 0..batch.num_rows() {
            out.push(row(&columns, i)?);
        }
        offset += batch.num_rows();
    }
    Ok(out)
}

fn read_conversations(file: &str, bytes: Bytes) -> Result<Vec<Conversation>, DatasetError> {
    let batches = decode(file, bytes, &conversations_schema())?;
    for_each_row(file, &batches, |cols, i| {
        let numbers = cols.lists::<UInt32Array>("session_numbers", "List<UInt32>")?.get(i)?;
        let dates_col = cols.lists::<StringArray>("session_dates", "List<Utf8>")?;
        let dates = dates_col.get(i)?;
        if numbers.len() != dates.len() {
            return Err(dates_col.at.err(i, format!("{} dates for {} session numbers", dates.len(), numbers.len())));
        }
        let split_col = cols.strings("split")?;
        let split_text = split_col.get(i)?;
        let split: Split = split_text.parse().map_err(|e: super::ParseSplitError| split_col.at.err(i, e.to_string()))?;
        Ok(Conversation {
            id: cols.strings("id")?.get(i)?,
            speaker_a: cols.strings("speaker_a")?.get(i)?,
            speaker_b: cols.strings("speaker_b")?.get(i)?,
            sessions: numbers.into_iter().zip(dates).map(|(number, date_time)| Session { number, date_time }).collect(),
            turn_count: cols.primitives::<UInt32Type>("turn_count", "UInt32")?.get(i)?,
            split,
        })
    })
}

fn read_memories(file: &str, bytes: Bytes) -> Result<Vec<MemoryRow>, DatasetError> {
    let batches = decode(file, bytes, &memories_schema())?;
    for_each_row(file, &batches, |cols, i| {
        Ok(MemoryRow {
            conversation_id: cols.strings("conversation_id")?.get(i)?,
            memory_id: cols.strings("memory_id")?.get(i)?,
            position: cols.primitives::<UInt32Type>("position", "UInt32")?.get(i)?,
            text: cols.strings("text")?.get(i)?,
            memory_type: cols.strings("memory_type")?.get(i)?,
            speaker: cols.strings("speaker")?.get(i)?,
            session: cols.primitives::<UInt32Type>("session", "UInt32")?.get(i)?,
            session_date: cols.strings("session_date")?.get(i)?,
            evidence: cols.lists::<StringArray>("evidence", "List<Utf8>")?.get(i)?,
            source: cols.strings("source")?.get(i)?,
        })
    })
}

fn read_questions(file: &str, bytes: Bytes) -> Result<Vec<Question>, DatasetError> {
    let batches = decode(file, bytes, &questions_schema())?;
    for_each_row(file, &batches, |cols, i| {
        let split_col = cols.strings("split")?;
        let split: Split = split_col.get(i)?.parse().map_err(|e: super::ParseSplitError| split_col.at.err(i, e.to_string()))?;
        Ok(Question {
            gold: super::Gold::default(),
            id: cols.strings("id")?.get(i)?,
            conversation_id: cols.strings("conversation_id")?.get(i)?,
            index: cols.primitives::<UInt32Type>("index", "UInt32")?.get(i)?,
            question: cols.strings("question")?.get(i)?,
            answer: cols.strings("answer")?.optional(i)?,
            adversarial_answer: cols.strings("adversarial_answer")?.optional(i)?,
            evidence: cols.lists::<StringArray>("evidence", "List<Utf8>")?.get(i)?,
            category: cols.primitives::<UInt8Type>("category", "UInt8")?.get(i)?,
            split,
        })
    })
}

impl Dataset {
    /// Encodes the three tables as snappy-compressed Parquet files in memory.
    ///
    /// # Errors
    ///
    /// [`DatasetError::Parquet`] if the encoder fails.
    pub fn to_parquet_bytes(&self) -> Result<ParquetFiles, DatasetError> {
        Ok(ParquetFiles {
            conversations: encode(CONVERSATIONS_FILE, &conversations_batch(&self.conversations)?)?,
            memories: encode(MEMORIES_FILE, &memories_batch(&self.memories)?)?,
            questions: encode(QUESTIONS_FILE, &questions_batch(&self.questions)?)?,
        })
    }

    /// Writes `conversations.parquet`, `memories.parquet` and `questions.parquet` into `dir`
    /// (created if missing). Each file is replaced atomically (temporary file in `dir`, then
    /// rename), so a reader never sees a partial file; the three are not replaced as one unit.
    ///
    /// # Errors
    ///
    /// [`DatasetError::Io`] naming the path that could not be created, written or renamed;
    /// [`DatasetError::Parquet`] if encoding fails.
    pub fn write_parquet(&self, dir: &Path) -> Result<(), DatasetError> {
        let files = self.to_parquet_bytes()?;
        fs::create_dir_all(dir).map_err(|source| DatasetError::Io { path: dir.to_path_buf(), source })?;
        atomic_write(&dir.join(CONVERSATIONS_FILE), &files.conversations)?;
        atomic_write(&dir.join(MEMORIES_FILE), &files.memories)?;
        atomic_write(&dir.join(QUESTIONS_FILE), &files.questions)?;
        Ok(())
    }

    /// Reads and validates the three Parquet files in `dir`. Errors name the full path.
    ///
    /// # Errors
    ///
    /// [`DatasetError::Io`] for a missing or unreadable file, otherwise as
    /// [`Dataset::read_parquet_bytes`].
    pub fn read_parquet_dir(dir: &Path) -> Result<Dataset, DatasetError> {
        let read = |name: &str| {
            let path = dir.join(name);
            fs::read(&path).map(Bytes::from).map_err(|source| DatasetError::Io { path, source })
        };
        Dataset::read_parquet_bytes(read(CONVERSATIONS_FILE)?, read(MEMORIES_FILE)?, read(QUESTIONS_FILE)?).map_err(|e| e.in_dir(dir))
    }

    /// Reads and validates the three tables from in-memory Parquet files, e.g. copies embedded
    /// with `include_bytes!` (`Bytes::from_static`). Errors name the bare file names.
    ///
    /// # Errors
    ///
    /// [`DatasetError::Parquet`] for a file that cannot be decoded (truncated, garbage),
    /// [`DatasetError::Schema`] for a missing column or one of the wrong type,
    /// [`DatasetError::InvalidRow`] for a null in a non-nullable column or a value that fails
    /// [`Dataset::validate`], [`DatasetError::Invalid`] for a failed cross-row check.
    pub fn read_parquet_bytes(conversations: Bytes, memories: Bytes, questions: Bytes) -> Result<Dataset, DatasetError> {
        let conversations = read_conversations(CONVERSATIONS_FILE, conversations)?;
        let memories = read_memories(MEMORIES_FILE, memories)?;
        let questions = read_questions(QUESTIONS_FILE, questions)?;
        Dataset::new(conversations, memories, questions)
    }
}
