//! The LoCoMo dataset as typed, validated domain values.
//!
//! memgym's episodes start from LoCoMo's `observation` facts (MemUpdate's initial memory M₀) and
//! ask one LoCoMo question each. This module turns the upstream `locomo10.json` into three
//! Parquet files once ([`Dataset::from_locomo_json`], [`Dataset::write_parquet`]) and loads them
//! at start-up ([`Dataset::read_parquet_dir`], [`Dataset::read_parquet_bytes`]), failing fast with
//! an error that names the file, row and column of the first bad value. Both readers and the JSON
//! converter end in [`Dataset::validate`], so every `Dataset` in the process is valid.
//!
//! # Construction of the rows
//!
//! * One [`Conversation`] per LoCoMo sample, in file order. Its sessions are the
//!   `conversation.session_N` lists in numeric order (`session_2` before `session_10`), each with
//!   its `session_N_date_time`; `date_time` keys without a session (conv-26 has 35 for 19
//!   sessions) are ignored. `turn_count` is the number of dialogue turns over all sessions.
//! * One [`MemoryRow`] per `[fact, dia_id]` observation pair, numbered per conversation in this
//!   order: sessions ascending (numeric), then speakers in the order the JSON object lists them,
//!   then facts in order. `memory_id` is `m` + the position zero-padded to 4 digits (`m0000`).
//! * One [`Question`] per `qa` item, `id = "{conversation_id}:q{index}"` with the 0-based index
//!   in the `qa` list. Integer answers are rendered as decimal strings.
//! * Evidence (of memories and questions) goes through [`normalize_evidence`]: split on `;`, `,`
//!   and whitespace, keep tokens that are exactly `D<digits>:<digits>` (in canonical form,
//!   without leading zeros), drop the rest, de-duplicate keeping order. The JSON converter
//!   counts what it repaired ([`EvidenceRepairReport`], shown by [`Stats`]).
//! * The split is MemUpdate's seed-42 split ([`SEED42_SPLIT`]); a conversation that is not in it
//!   is an error.
//!
//! # Parquet schema
//!
//! Three snappy-compressed files; every column is non-nullable unless marked nullable. List items
//! are non-nullable `item` fields. Extra columns are ignored by the readers; a missing column or
//! a column of another type is an error. Files written by other tools may mark columns nullable:
//! a null in a column listed here as non-nullable is an error naming file, row and column.
//!
//! `conversations.parquet` (one row per conversation, file order):
//!
//! | column | type | content |
//! |---|---|---|
//! | `id` | Utf8 | `conv-26` |
//! | `speaker_a` | Utf8 | |
//! | `speaker_b` | Utf8 | |
//! | `session_numbers` | `List<UInt32>` | ascending |
//! | `session_dates` | `List<Utf8>` | same length, `1:56 pm on 8 May, 2023` |
//! | `turn_count` | UInt32 | |
//! | `split` | Utf8 | `train` / `test` |
//!
//! `memories.parquet` (one row per initial memory, by conversation order then position):
//!
//! | column | type | content |
//! |---|---|---|
//! | `conversation_id` | Utf8 | |
//! | `memory_id` | Utf8 | `m0000` … |
//! | `position` | UInt32 | 0-based, contiguous per conversation |
//! | `text` | Utf8 | the observation fact |
//! | `memory_type` | Utf8 | `episodic` |
//! | `speaker` | Utf8 | |
//! | `session` | UInt32 | a session of the conversation |
//! | `session_date` | Utf8 | that session's date |
//! | `evidence` | `List<Utf8>` | canonical dia ids, at least one |
//! | `source` | Utf8 | `conversation_observations` |
//!
//! `questions.parquet` (one row per QA item, by conversation order then index):
//!
//! | column | type | content |
//! |---|---|---|
//! | `id` | Utf8 | `conv-26:q17` |
//! | `conversation_id` | Utf8 | |
//! | `index` | UInt32 | 0-based position in the `qa` list |
//! | `question` | Utf8 | |
//! | `answer` | Utf8, nullable | |
//! | `adversarial_answer` | Utf8, nullable | at least one of the two is set |
//! | `evidence` | `List<Utf8>` | canonical dia ids, possibly empty |
//! | `category` | UInt8 | 1..=5 |
//! | `split` | Utf8 | the conversation's split |
//!
//! Row numbers in errors are 0-based positions in the file (or in the `Dataset` vectors, for
//! [`Dataset::validate`] called on a hand-built value).

mod audit;
mod embedded;
mod evidence;
mod locomo;
mod parquet_io;
pub use parquet_io::{atomic_write, write_batch};
mod stats;
mod validate;
mod vectors;
pub mod verl;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::str::FromStr;

pub use audit::{AuditJoin, Gold, GoldMode, GoldStatus};
pub use evidence::{canonical_dia_id, is_dia_id, normalize_evidence, EvidenceRepairs};
pub use parquet_io::{ParquetFiles, CONVERSATIONS_FILE, MEMORIES_FILE, QUESTIONS_FILE};
pub use stats::{CategoryStats, ConversationStats, SplitStats, Stats, Totals};
pub use vectors::VectorSet;

/// The `memory_type` of every initial memory.
pub const MEMORY_TYPE_EPISODIC: &str = "episodic";

/// The `source` of every initial memory: LoCoMo's per-session observations.
pub const SOURCE_OBSERVATIONS: &str = "conversation_observations";

/// The LoCoMo question categories, indexed by `category - 1`.
pub const CATEGORY_NAMES: [&str; 5] = ["multi-hop", "temporal", "open-domain", "single-hop", "adversarial"];

/// The category of adversarial questions (no answer in the conversation).
pub const ADVERSARIAL_CATEGORY: u8 = 5;

/// The name of a LoCoMo question category (1..=5), or `None` outside that range.
pub fn category_name(category: u8) -> Option<&'static str> {
    CATEGORY_NAMES.get(usize::from(category).checked_sub(1)?).copied()
}

/// The train/test split used by MemUpdate (`Astera-org/memupdate`,
/// `memupdate/data/preprocess_locomo.py`): `random.seed(42)`, then
/// `random.shuffle(list(range(10)))`, which gives `[7,3,2,8,5,6,9,4,0,1]`; the first seven
/// conversations of `locomo10.json` in that order are train, the last three test. Recomputed
/// in `shared/reference/memupdate-locomo-verl.md` §1.4. It gives 1,440/546 questions
/// (1,129/411 without category 5).
pub const SEED42_SPLIT: [(&str, Split); 10] = [
    ("conv-48", Split::Train),
    ("conv-42", Split::Train),
    ("conv-41", Split::Train),
    ("conv-49", Split::Train),
    ("conv-44", Split::Train),
    ("conv-47", Split::Train),
    ("conv-50", Split::Train),
    ("conv-43", Split::Test),
    ("conv-26", Split::Test),
    ("conv-30", Split::Test),
];

/// The split of a LoCoMo conversation in [`SEED42_SPLIT`], or `None` for an unknown id.
pub fn seed42_split(conversation_id: &str) -> Option<Split> {
    SEED42_SPLIT.iter().find(|(id, _)| *id == conversation_id).map(|(_, split)| *split)
}

/// The id of the memory at `position` within its conversation: `m` + at least 4 digits.
pub fn memory_id(position: u32) -> String {
    format!("m{position:04}")
}

/// The id of question `index` of a conversation: `"{conversation_id}:q{index}"`.
pub fn question_id(conversation_id: &str, index: u32) -> String {
    format!("{conversation_id}:q{index}")
}

/// Which part of the data a conversation (and its questions) belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Split {
    /// Training conversations.
    Train,
    /// Held-out conversations.
    Test,
}

impl Split {
    /// Both splits, train first.
    pub const ALL: [Split; 2] = [Split::Train, Split::Test];

    /// `"train"` or `"test"`, as stored in Parquet.
    pub fn as_str(self) -> &'static str {
        match self {
            Split::Train => "train",
            Split::Test => "test",
        }
    }
}

impl fmt::Display for Split {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of parsing a [`Split`] from anything but `"train"` or `"test"`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown split {0:?}: expected \"train\" or \"test\"")]
pub struct ParseSplitError(pub String);

impl FromStr for Split {
    type Err = ParseSplitError;

    fn from_str(s: &str) -> Result<Split, ParseSplitError> {
        match s {
            "train" => Ok(Split::Train),
            "test" => Ok(Split::Test),
            other => Err(ParseSplitError(other.to_owned())),
        }
    }
}

/// One session of a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// `N` of `session_N`, 1-based.
    pub number: u32,
    /// `session_N_date_time`, e.g. `1:56 pm on 8 May, 2023`; never empty.
    pub date_time: String,
}

/// One LoCoMo conversation (a "sample").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conversation {
    /// `sample_id`, e.g. `conv-26`.
    pub id: String,
    /// The first speaker's name.
    pub speaker_a: String,
    /// The second speaker's name.
    pub speaker_b: String,
    /// Sessions in ascending number order.
    pub sessions: Vec<Session>,
    /// Dialogue turns over all sessions.
    pub turn_count: u32,
    /// Train or test.
    pub split: Split,
}

impl Conversation {
    /// The session numbered `number`, if the conversation has it.
    pub fn session(&self, number: u32) -> Option<&Session> {
        self.sessions.iter().find(|s| s.number == number)
    }
}

/// One initial memory: one `[fact, dia_id]` observation pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryRow {
    /// The conversation the memory belongs to.
    pub conversation_id: String,
    /// [`memory_id`] of `position`, e.g. `m0007`.
    pub memory_id: String,
    /// 0-based order within the conversation: sessions ascending, then speakers in JSON order,
    /// then facts in order.
    pub position: u32,
    /// The fact text; never blank.
    pub text: String,
    /// Always [`MEMORY_TYPE_EPISODIC`] for LoCoMo observations.
    pub memory_type: String,
    /// The speaker the fact is about.
    pub speaker: String,
    /// The session number the observation belongs to.
    pub session: u32,
    /// That session's `date_time`; never empty.
    pub session_date: String,
    /// Normalised dia ids the fact was observed in; at least one.
    pub evidence: Vec<String>,
    /// Always [`SOURCE_OBSERVATIONS`] for LoCoMo observations.
    pub source: String,
}

/// One LoCoMo question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// [`question_id`]: `"{conversation_id}:q{index}"`, e.g. `conv-26:q17`.
    pub id: String,
    /// The conversation the question is about.
    pub conversation_id: String,
    /// 0-based position in the conversation's `qa` list.
    pub index: u32,
    /// The question text; never blank.
    pub question: String,
    /// The gold answer (integers rendered in decimal), if any.
    pub answer: Option<String>,
    /// The adversarial (wrong) answer of category-5 questions, if any.
    pub adversarial_answer: Option<String>,
    /// Normalised dia ids of the supporting turns; may be empty.
    pub evidence: Vec<String>,
    /// 1..=5: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial
    /// (see [`CATEGORY_NAMES`]).
    pub category: u8,
    /// The conversation's split.
    pub split: Split,
    /// What the LoCoMo audit says of the gold answer ([`Dataset::join_audit`]); `ok` when not joined.
    /// Not stored in the Parquet files: the audit is its own data file, joined at load.
    pub gold: Gold,
}

/// What the JSON converter repaired in the evidence of memories and questions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EvidenceRepairReport {
    /// Dia ids of observation pairs.
    pub memories: EvidenceRepairs,
    /// `evidence` entries of questions.
    pub questions: EvidenceRepairs,
    /// Observation pairs whose dia id was a JSON list rather than a string.
    pub list_valued_dia_ids: u32,
}

/// The whole dataset: conversations, initial memories and questions, validated.
///
/// The fields are public for reading. `memories` and `questions` are sorted by (conversation
/// order, position/index) and indexed; code that edits the vectors must call
/// [`Dataset::reindex`] (or rebuild with [`Dataset::new`]) afterwards. Lookups stay correct
/// without it as long as that order holds, only slower.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// Conversations in file order.
    pub conversations: Vec<Conversation>,
    /// Initial memories, by conversation order then position.
    pub memories: Vec<MemoryRow>,
    /// Questions, by conversation order then index.
    pub questions: Vec<Question>,
    index: Index,
    repairs: Option<EvidenceRepairReport>,
    /// Questions [`GoldMode::ExcludeFlagged`] removed, with the audit's error type.
    excluded: HashMap<String, String>,
}

/// Equality compares the three public vectors only (not the lookup index, nor the evidence
/// repair counts, which only a JSON conversion knows).
impl PartialEq for Dataset {
    fn eq(&self, other: &Dataset) -> bool {
        self.conversations == other.conversations && self.memories == other.memories && self.questions == other.questions
    }
}

/// Lookup tables from ids to positions in the `Dataset` vectors.
#[derive(Clone, Default)]
struct Index {
    conversations: HashMap<String, usize>,
    memories: HashMap<String, Range<usize>>,
    questions: HashMap<String, usize>,
}

impl fmt::Debug for Index {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Index")
            .field("conversations", &self.conversations.len())
            .field("memory_ranges", &self.memories.len())
            .field("questions", &self.questions.len())
            .finish()
    }
}

/// Everything that can go wrong while loading, converting or validating the dataset.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The LoCoMo JSON is not valid JSON.
    #[error("{file}: invalid JSON: {message}")]
    JsonSyntax {
        /// The JSON file.
        file: String,
        /// serde_json's message, with line and column.
        message: String,
    },
    /// The LoCoMo JSON is valid JSON but not valid LoCoMo.
    #[error("{file}: {path}: {message}")]
    Json {
        /// The JSON file.
        file: String,
        /// Where in the document, e.g. `[3].qa[12].category`.
        path: String,
        /// What is wrong, e.g. `expected 1..5, got 7`.
        message: String,
    },
    /// A Parquet file could not be written or decoded.
    #[error("{file}: {message}")]
    Parquet {
        /// The Parquet file.
        file: String,
        /// The decoder's or encoder's message.
        message: String,
    },
    /// A Parquet file lacks a column or has one of the wrong type.
    #[error("{file}, column \"{column}\": {message}")]
    Schema {
        /// The Parquet file.
        file: String,
        /// The column.
        column: String,
        /// What is wrong, e.g. `expected UInt8, found Int64`.
        message: String,
    },
    /// One value of one row is invalid.
    #[error("{file} row {row}, column \"{column}\": {message}")]
    InvalidRow {
        /// The Parquet file (or the file the row would be written to).
        file: String,
        /// 0-based row number.
        row: usize,
        /// The column.
        column: String,
        /// What is wrong, e.g. `empty text`.
        message: String,
    },
    /// A check across rows or files failed.
    #[error("invalid dataset: {message}")]
    Invalid {
        /// What is wrong.
        message: String,
    },
}

impl DatasetError {
    /// Prefixes the file names of Parquet-side errors with `dir`, so an error from
    /// [`Dataset::read_parquet_dir`] names the full path.
    fn in_dir(self, dir: &Path) -> DatasetError {
        let full = |file: String| dir.join(file).display().to_string();
        match self {
            DatasetError::Parquet { file, message } => DatasetError::Parquet { file: full(file), message },
            DatasetError::Schema { file, column, message } => DatasetError::Schema { file: full(file), column, message },
            DatasetError::InvalidRow { file, row, column, message } => DatasetError::InvalidRow { file: full(file), row, column, message },
            other @ (DatasetError::Io { .. }
            | DatasetError::JsonSyntax { .. }
            | DatasetError::Json { .. }
            | DatasetError::Invalid { .. }) => other,
        }
    }
}

impl Dataset {
    /// Validates the rows ([`Dataset::validate`]), sorts memories and questions by (conversation
    /// order, position/index) and builds the lookup index.
    ///
    /// # Errors
    ///
    /// The first violation found by [`Dataset::validate`].
    pub fn new(conversations: Vec<Conversation>, memories: Vec<MemoryRow>, questions: Vec<Question>) -> Result<Dataset, DatasetError> {
        let mut dataset = Dataset { conversations, memories, questions, index: Index::default(), repairs: None, excluded: HashMap::new() };
        dataset.validate()?;
        dataset.reindex();
        Ok(dataset)
    }

    /// Re-sorts memories and questions by (conversation order, position/index) and rebuilds the
    /// lookup index. Call it after editing the public vectors.
    pub fn reindex(&mut self) {
        let order: HashMap<&str, usize> = self.conversations.iter().enumerate().map(|(i, c)| (c.id.as_str(), i)).collect();
        let rank = |id: &str| order.get(id).copied().unwrap_or(usize::MAX);
        self.memories.sort_by_cached_key(|m| (rank(&m.conversation_id), m.position));
        self.questions.sort_by_cached_key(|q| (rank(&q.conversation_id), q.index));

        let mut index =
            Index { conversations: self.conversations.iter().enumerate().map(|(i, c)| (c.id.clone(), i)).collect(), ..Index::default() };
        let mut start = 0;
        while start < self.memories.len() {
            let id = &self.memories[start].conversation_id;
            let len = self.memories[start..].iter().take_while(|m| &m.conversation_id == id).count();
            index.memories.insert(id.clone(), start..start + len);
            start += len;
        }
        index.questions = self.questions.iter().enumerate().map(|(i, q)| (q.id.clone(), i)).collect();
        self.index = index;
    }

    /// The conversation with this id.
    pub fn conversation(&self, id: &str) -> Option<&Conversation> {
        match self.index.conversations.get(id) {
            Some(&i) if self.conversations.get(i).is_some_and(|c| c.id == id) => self.conversations.get(i),
            _ => self.conversations.iter().find(|c| c.id == id),
        }
    }

    /// The initial memories of a conversation, by position; empty for an unknown id.
    pub fn memories_of(&self, conversation_id: &str) -> &[MemoryRow] {
        if let Some(range) = self.index.memories.get(conversation_id) {
            if let Some(slice) = self.memories.get(range.clone()) {
                let first_ok = slice.first().is_some_and(|m| m.conversation_id == conversation_id);
                let last_ok = slice.last().is_some_and(|m| m.conversation_id == conversation_id);
                let before_ok = range.start == 0 || self.memories[range.start - 1].conversation_id != conversation_id;
                let after_ok = self.memories.get(range.end).is_none_or(|m| m.conversation_id != conversation_id);
                if first_ok && last_ok && before_ok && after_ok {
                    return slice;
                }
            }
        }
        // Stale or missing index entry: find the run by scanning.
        let Some(start) = self.memories.iter().position(|m| m.conversation_id == conversation_id) else {
            return &[];
        };
        let len = self.memories[start..].iter().take_while(|m| m.conversation_id == conversation_id).count();
        &self.memories[start..start + len]
    }

    /// The question with this id (`conv-26:q17`).
    pub fn question(&self, id: &str) -> Option<&Question> {
        match self.index.questions.get(id) {
            Some(&i) if self.questions.get(i).is_some_and(|q| q.id == id) => self.questions.get(i),
            _ => self.questions.iter().find(|q| q.id == id),
        }
    }

    /// The questions of a conversation, in `qa` order.
    pub fn questions_of<'a>(&'a self, conversation_id: &'a str) -> impl Iterator<Item = &'a Question> + 'a {
        self.questions.iter().filter(move |q| q.conversation_id == conversation_id)
    }

    /// What the JSON converter repaired in the evidence; `None` for a dataset read from Parquet.
    pub fn evidence_repairs(&self) -> Option<&EvidenceRepairReport> {
        self.repairs.as_ref()
    }
}
