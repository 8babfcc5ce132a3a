//! Conversion of the upstream LoCoMo file (`locomo10.json`) into the domain types. Kept apart from
//! the Parquet code because it runs once, offline, and deals with the quirks of the source: keys
//! that must be read in numeric order, list-valued dia ids, integer answers, malformed evidence.
//! Every error names the JSON path of the offending value.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use super::evidence::normalize_evidence;
use super::{
    memory_id, question_id, seed42_split, Conversation, Dataset, DatasetError, EvidenceRepairReport, MemoryRow, Question, Session,
    MEMORY_TYPE_EPISODIC, SOURCE_OBSERVATIONS,
};
use crate::util::json::Json;

impl Dataset {
    /// Reads and converts `locomo10.json` (see the module docs for how rows are built).
    ///
    /// # Errors
    ///
    /// [`DatasetError::Io`] if the file cannot be read, otherwise as
    /// [`Dataset::from_locomo_json_bytes`].
    pub fn from_locomo_json(path: &Path) -> Result<Dataset, DatasetError> {
        let bytes = std::fs::read(path).map_err(|source| DatasetError::Io { path: path.to_path_buf(), source })?;
        Dataset::from_locomo_json_bytes(&bytes, &path.display().to_string())
    }

    /// Converts the bytes of a LoCoMo JSON file; `file` names it in errors.
    ///
    /// # Errors
    ///
    /// [`DatasetError::JsonSyntax`] for malformed JSON; [`DatasetError::Json`], naming the JSON
    /// path, for a value that is missing or wrong (unknown conversation, missing session date,
    /// category outside 1..=5, observation without a well-formed dia id, …).
    pub fn from_locomo_json_bytes(bytes: &[u8], file: &str) -> Result<Dataset, DatasetError> {
        let syntax = |message: String| DatasetError::JsonSyntax { file: file.to_owned(), message };
        let root: Json = serde_json::from_slice(bytes).map_err(|e| syntax(e.to_string()))?;
        if let Some(key) = root.first_duplicate() {
            return Err(syntax(format!("duplicate key {}", crate::util::excerpt::quoted(key))));
        }
        let mut converter = Converter {
            file,
            conversations: Vec::new(),
            memories: Vec::new(),
            questions: Vec::new(),
            repairs: EvidenceRepairReport::default(),
        };
        let samples = converter.array(&root, "$")?;
        let mut seen = HashSet::new();
        for (i, sample) in samples.iter().enumerate() {
            converter.sample(sample, &format!("[{i}]"), &mut seen)?;
        }
        let repairs = converter.repairs;
        let mut dataset = Dataset::new(converter.conversations, converter.memories, converter.questions)?;
        dataset.repairs = Some(repairs);
        Ok(dataset)
    }
}

struct Converter<'f> {
    file: &'f str,
    conversations: Vec<Conversation>,
    memories: Vec<MemoryRow>,
    questions: Vec<Question>,
    repairs: EvidenceRepairReport,
}

/// `session_N` → `Some(N)` for a key of exactly that shape (`N` decimal, no leading zero).
fn session_number(key: &str, prefix: &str, suffix: &str) -> Option<Result<u32, ()>> {
    let digits = key.strip_prefix(prefix)?.strip_suffix(suffix)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    match digits.parse::<u32>() {
        Ok(n) if n.to_string() == digits => Some(Ok(n)),
        Ok(_) | Err(_) => Some(Err(())),
    }
}

impl Converter<'_> {
    fn err(&self, path: &str, message: impl Into<String>) -> DatasetError {
        DatasetError::Json { file: self.file.to_owned(), path: path.to_owned(), message: message.into() }
    }

    fn array<'j>(&self, v: &'j Json, path: &str) -> Result<&'j [Json], DatasetError> {
        if let Json::Array(items) = v {
            Ok(items)
        } else {
            Err(self.err(path, format!("expected an array, got {}", v.describe())))
        }
    }

    fn object<'j>(&self, v: &'j Json, path: &str) -> Result<&'j [(String, Json)], DatasetError> {
        if let Json::Object(entries) = v {
            Ok(entries)
        } else {
            Err(self.err(path, format!("expected an object, got {}", v.describe())))
        }
    }

    fn string<'j>(&self, v: &'j Json, path: &str) -> Result<&'j str, DatasetError> {
        if let Json::String(s) = v {
            Ok(s)
        } else {
            Err(self.err(path, format!("expected a string, got {}", v.describe())))
        }
    }

    fn field<'j>(&self, v: &'j Json, key: &str, path: &str) -> Result<&'j Json, DatasetError> {
        v.get(key).ok_or_else(|| self.err(&format!("{path}.{key}"), "missing"))
    }

    /// A required, non-blank string field.
    fn text_field(&self, v: &Json, key: &str, path: &str) -> Result<String, DatasetError> {
        let path = format!("{path}.{key}");
        let s = self.string(v.get(key).ok_or_else(|| self.err(&path, "missing"))?, &path)?;
        if s.trim().is_empty() {
            return Err(self.err(&path, "empty string"));
        }
        Ok(s.to_owned())
    }

    /// An optional answer: absent or null → `None`, string or number → its text.
    fn answer(&self, v: &Json, key: &str, path: &str) -> Result<Option<String>, DatasetError> {
        let path = format!("{path}.{key}");
        match v.get(key) {
            None | Some(Json::Null) => Ok(None),
            Some(Json::String(s)) if s.trim().is_empty() => Err(self.err(&path, "empty answer")),
            Some(Json::String(s)) => Ok(Some(s.clone())),
            Some(Json::Number(n)) => Ok(Some(n.to_string())),
            Some(other) => Err(self.err(&path, format!("expected a string or a number, got {}", other.describe()))),
        }
    }

    fn sample(&mut self, sample: &Json, path: &str, seen: &mut HashSet<String>) -> Result<(), DatasetError> {
        self.object(sample, path)?;
        let id = self.text_field(sample, "sample_id", path)?;
        let id_path = format!("{path}.sample_id");
        let split =
            seed42_split(&id).ok_or_else(|| self.err(&id_path, format!("conversation {id:?} is not in the seed-42 train/test split")))?;
        if !seen.insert(id.clone()) {
            return Err(self.err(&id_path, format!("duplicate conversation id {id:?}")));
        }

        // Sessions and their dates, in numeric order.
        let conv_path = format!("{path}.conversation");
        let conversation = self.field(sample, "conversation", path)?;
        let entries = self.object(conversation, &conv_path)?;
        let speaker_a = self.text_field(conversation, "speaker_a", &conv_path)?;
        let speaker_b = self.text_field(conversation, "speaker_b", &conv_path)?;
        let mut turns_by_session: BTreeMap<u32, u32> = BTreeMap::new();
        let mut dates: BTreeMap<u32, &str> = BTreeMap::new();
        for (key, value) in entries {
            let key_path = format!("{conv_path}.{key}");
            if let Some(n) = session_number(key, "session_", "") {
                let n = n.map_err(|()| self.err(&key_path, "bad session number"))?;
                let turns = self.array(value, &key_path)?;
                for (t, turn) in turns.iter().enumerate() {
                    self.object(turn, &format!("{key_path}[{t}]"))?;
                }
                let count = u32::try_from(turns.len()).map_err(|_| self.err(&key_path, "too many turns"))?;
                turns_by_session.insert(n, count);
            } else if let Some(n) = session_number(key, "session_", "_date_time") {
                let n = n.map_err(|()| self.err(&key_path, "bad session number"))?;
                dates.insert(n, self.string(value, &key_path)?);
            }
        }
        let mut sessions = Vec::with_capacity(turns_by_session.len());
        let mut turn_count: u32 = 0;
        for (&number, &turns) in &turns_by_session {
            let date_path = format!("{conv_path}.session_{number}_date_time");
            let date = match dates.get(&number) {
                None => return Err(self.err(&date_path, format!("missing date of session {number}"))),
                Some(date) if date.trim().is_empty() => return Err(self.err(&date_path, "empty date")),
                Some(date) => (*date).to_owned(),
            };
            turn_count = turn_count.checked_add(turns).ok_or_else(|| self.err(&conv_path, "too many turns"))?;
            sessions.push(Session { number, date_time: date });
        }

        self.observations(sample, path, &id, &sessions)?;
        self.qa(sample, path, &id, split)?;
        self.conversations.push(Conversation { id, speaker_a, speaker_b, sessions, turn_count, split });
        Ok(())
    }

    fn observations(&mut self, sample: &Json, path: &str, conversation_id: &str, sessions: &[Session]) -> Result<(), DatasetError> {
        let obs_path = format!("{path}.observation");
        let observation = self.field(sample, "observation", path)?;
        let mut by_session: BTreeMap<u32, (&Json, String)> = BTreeMap::new();
        for (key, value) in self.object(observation, &obs_path)? {
            let key_path = format!("{obs_path}.{key}");
            let Some(Ok(n)) = session_number(key, "session_", "_observation") else {
                return Err(self.err(&key_path, "expected a key session_N_observation"));
            };
            by_session.insert(n, (value, key_path));
        }
        let mut position: u32 = 0;
        for (&number, (value, session_path)) in &by_session {
            let Some(session) = sessions.iter().find(|s| s.number == number) else {
                return Err(self.err(session_path, format!("observations of session {number}, which has no dialogue")));
            };
            for (speaker, facts) in self.object(value, session_path)? {
                let speaker_path = format!("{session_path}.{speaker}");
                if speaker.trim().is_empty() {
                    return Err(self.err(&speaker_path, "empty speaker name"));
                }
                for (f, fact) in self.array(facts, &speaker_path)?.iter().enumerate() {
                    let fact_path = format!("{speaker_path}[{f}]");
                    let pair = self.array(fact, &fact_path)?;
                    let [text, dia] = pair else {
                        return Err(self.err(&fact_path, format!("expected [fact, dia_id], got {} elements", pair.len())));
                    };
                    let text_path = format!("{fact_path}[0]");
                    let text = self.string(text, &text_path)?;
                    if text.trim().is_empty() {
                        return Err(self.err(&text_path, "empty fact"));
                    }
                    let dia_path = format!("{fact_path}[1]");
                    let raw: Vec<&str> = match dia {
                        Json::String(s) => vec![s.as_str()],
                        Json::Array(items) => {
                            self.repairs.list_valued_dia_ids += 1;
                            items
                                .iter()
                                .enumerate()
                                .map(|(k, item)| self.string(item, &format!("{dia_path}[{k}]")))
                                .collect::<Result<_, _>>()?
                        }
                        other @ (Json::Null | Json::Bool(_) | Json::Number(_) | Json::Object(_)) => {
                            return Err(self.err(&dia_path, format!("expected a dia id or a list of them, got {}", other.describe())))
                        }
                    };
                    let evidence = normalize_evidence(raw.iter().copied(), &mut self.repairs.memories);
                    if evidence.is_empty() {
                        return Err(self.err(&dia_path, "no well-formed dia id (D<n>:<n>)"));
                    }
                    self.memories.push(MemoryRow {
                        conversation_id: conversation_id.to_owned(),
                        memory_id: memory_id(position),
                        position,
                        text: text.to_owned(),
                        memory_type: MEMORY_TYPE_EPISODIC.to_owned(),
                        speaker: speaker.clone(),
                        session: number,
                        session_date: session.date_time.clone(),
                        evidence,
                        source: SOURCE_OBSERVATIONS.to_owned(),
                    });
                    position = position.checked_add(1).ok_or_else(|| self.err(&fact_path, "too many memories"))?;
                }
            }
        }
        Ok(())
    }

    fn qa(&mut self, sample: &Json, path: &str, conversation_id: &str, split: super::Split) -> Result<(), DatasetError> {
        let qa_path = format!("{path}.qa");
        let qa = self.field(sample, "qa", path)?;
        for (i, item) in self.array(qa, &qa_path)?.iter().enumerate() {
            let item_path = format!("{qa_path}[{i}]");
            self.object(item, &item_path)?;
            let index = u32::try_from(i).map_err(|_| self.err(&item_path, "too many questions"))?;
            let question = self.text_field(item, "question", &item_path)?;
            let answer = self.answer(item, "answer", &item_path)?;
            let adversarial_answer = self.answer(item, "adversarial_answer", &item_path)?;
            if answer.is_none() && adversarial_answer.is_none() {
                return Err(self.err(&item_path, "neither answer nor adversarial_answer"));
            }
            let evidence_path = format!("{item_path}.evidence");
            let raw: Vec<&str> = self
                .array(self.field(item, "evidence", &item_path)?, &evidence_path)?
                .iter()
                .enumerate()
                .map(|(k, e)| self.string(e, &format!("{evidence_path}[{k}]")))
                .collect::<Result<_, _>>()?;
            let evidence = normalize_evidence(raw.iter().copied(), &mut self.repairs.questions);
            let category_path = format!("{item_path}.category");
            let category = match self.field(item, "category", &item_path)? {
                Json::Number(n) => match n.as_u64().and_then(|c| u8::try_from(c).ok()) {
                    Some(c @ 1..=5) => c,
                    Some(_) | None => return Err(self.err(&category_path, format!("expected 1..5, got {n}"))),
                },
                other @ (Json::Null | Json::Bool(_) | Json::String(_) | Json::Array(_) | Json::Object(_)) => {
                    return Err(self.err(&category_path, format!("expected 1..5, got {}", other.describe())))
                }
            };
            self.questions.push(Question {
                gold: super::Gold::default(),
                id: question_id(conversation_id, index),
                conversation_id: conversation_id.to_owned(),
                index,
                question,
                answer,
                adversarial_answer,
                evidence,
                category,
                split,
            });
        }
        Ok(())
    }
}
