//! The invariants every loaded [`Dataset`] satisfies, checked in one place so the JSON converter
//! and both Parquet readers enforce exactly the same rules. Errors name the Parquet file, the
//! row (position in the vector) and the column of the first bad value.

use std::collections::HashMap;

use super::evidence::is_dia_id;
use super::parquet_io::{CONVERSATIONS_FILE, MEMORIES_FILE, QUESTIONS_FILE};
use super::{memory_id, question_id, Conversation, Dataset, DatasetError};

fn row_err(file: &str, row: usize, column: &str, message: impl Into<String>) -> DatasetError {
    DatasetError::InvalidRow { file: file.to_owned(), row, column: column.to_owned(), message: message.into() }
}

fn non_blank(file: &str, row: usize, column: &str, value: &str, what: &str) -> Result<(), DatasetError> {
    if value.trim().is_empty() {
        Err(row_err(file, row, column, format!("empty {what}")))
    } else {
        Ok(())
    }
}

/// Evidence must be canonical dia ids without repeats; memories also need at least one.
fn check_evidence(file: &str, row: usize, evidence: &[String], required: bool) -> Result<(), DatasetError> {
    if required && evidence.is_empty() {
        return Err(row_err(file, row, "evidence", "no evidence dia id"));
    }
    for (k, id) in evidence.iter().enumerate() {
        if !is_dia_id(id) {
            return Err(row_err(file, row, "evidence", format!("malformed dia id {id:?} (expected D<n>:<n>)")));
        }
        if evidence[..k].contains(id) {
            return Err(row_err(file, row, "evidence", format!("duplicate dia id {id:?}")));
        }
    }
    Ok(())
}

impl Dataset {
    /// Checks the invariants of the dataset:
    ///
    /// * at least one conversation; ids of conversations and questions, and memory ids within a
    ///   conversation, are unique; names, texts, questions and dates are not blank;
    /// * session numbers of a conversation are strictly ascending;
    /// * every memory and question references a known conversation; a memory's session exists
    ///   in it and `session_date` is that session's date; a question's split is its
    ///   conversation's split;
    /// * `memory_id` is [`memory_id`]`(position)` and positions are `0..n` per conversation;
    ///   question ids are [`question_id`]`(conversation_id, index)`;
    /// * categories are 1..=5; at least one of `answer`/`adversarial_answer` is set and
    ///   neither is blank;
    /// * evidence ids are canonical `D<n>:<n>` without repeats; memories have at least one.
    ///
    /// Row numbers in the errors are positions in the vectors, i.e. rows of the Parquet files.
    ///
    /// # Errors
    ///
    /// [`DatasetError::InvalidRow`] naming file, row and column of the first bad value, or
    /// [`DatasetError::Invalid`] for an empty dataset or non-contiguous memory positions.
    pub fn validate(&self) -> Result<(), DatasetError> {
        if self.conversations.is_empty() {
            return Err(DatasetError::Invalid { message: "no conversations".to_owned() });
        }

        let file = CONVERSATIONS_FILE;
        let mut conversations: HashMap<&str, (usize, &Conversation)> = HashMap::new();
        for (row, c) in self.conversations.iter().enumerate() {
            non_blank(file, row, "id", &c.id, "id")?;
            if let Some((first, _)) = conversations.get(c.id.as_str()) {
                return Err(row_err(file, row, "id", format!("duplicate id {:?} (first at row {first})", c.id)));
            }
            conversations.insert(&c.id, (row, c));
            non_blank(file, row, "speaker_a", &c.speaker_a, "speaker name")?;
            non_blank(file, row, "speaker_b", &c.speaker_b, "speaker name")?;
            for (k, s) in c.sessions.iter().enumerate() {
                if k > 0 && c.sessions[k - 1].number >= s.number {
                    return Err(row_err(
                        file,
                        row,
                        "session_numbers",
                        format!("session numbers not strictly ascending: {} then {}", c.sessions[k - 1].number, s.number),
                    ));
                }
                if s.date_time.trim().is_empty() {
                    return Err(row_err(file, row, "session_dates", format!("empty date of session {}", s.number)));
                }
            }
        }

        let file = MEMORIES_FILE;
        // conversation id → (first row of each memory id, count, highest position)
        let mut per_conv: HashMap<&str, (HashMap<&str, usize>, u64, u32)> = HashMap::new();
        for (row, m) in self.memories.iter().enumerate() {
            let Some((_, conv)) = conversations.get(m.conversation_id.as_str()) else {
                return Err(row_err(file, row, "conversation_id", format!("unknown conversation {:?}", m.conversation_id)));
            };
            let expected = memory_id(m.position);
            if m.memory_id != expected {
                return Err(row_err(
                    file,
                    row,
                    "memory_id",
                    format!("memory id {:?} does not match position {} (expected {expected:?})", m.memory_id, m.position),
                ));
            }
            let entry = per_conv.entry(&m.conversation_id).or_default();
            if let Some(first) = entry.0.get(m.memory_id.as_str()) {
                return Err(row_err(
                    file,
                    row,
                    "memory_id",
                    format!("duplicate memory id {:?} in {} (first at row {first})", m.memory_id, m.conversation_id),
                ));
            }
            entry.0.insert(&m.memory_id, row);
            entry.1 += 1;
            entry.2 = entry.2.max(m.position);
            non_blank(file, row, "text", &m.text, "text")?;
            non_blank(file, row, "memory_type", &m.memory_type, "memory type")?;
            if !matches!(m.memory_type.as_str(), "episodic" | "semantic" | "procedural") {
                return Err(row_err(
                    file,
                    row,
                    "memory_type",
                    format!("unknown memory type {:?} (expected episodic, semantic or procedural)", m.memory_type),
                ));
            }
            non_blank(file, row, "speaker", &m.speaker, "speaker")?;
            non_blank(file, row, "source", &m.source, "source")?;
            let Some(session) = conv.session(m.session) else {
                return Err(row_err(file, row, "session", format!("{} has no session {}", m.conversation_id, m.session)));
            };
            if m.session_date != session.date_time {
                return Err(row_err(
                    file,
                    row,
                    "session_date",
                    format!("{:?} is not the date of session {} ({:?})", m.session_date, m.session, session.date_time),
                ));
            }
            check_evidence(file, row, &m.evidence, true)?;
        }
        for c in &self.conversations {
            if let Some((_, count, highest)) = per_conv.get(c.id.as_str()) {
                if u64::from(*highest) + 1 != *count {
                    return Err(DatasetError::Invalid {
                        message: format!("memories of {}: positions are not 0..{count} (highest is {highest})", c.id),
                    });
                }
            }
        }

        let file = QUESTIONS_FILE;
        let mut question_rows: HashMap<&str, usize> = HashMap::new();
        for (row, q) in self.questions.iter().enumerate() {
            let Some((_, conv)) = conversations.get(q.conversation_id.as_str()) else {
                return Err(row_err(file, row, "conversation_id", format!("unknown conversation {:?}", q.conversation_id)));
            };
            let expected = question_id(&q.conversation_id, q.index);
            if q.id != expected {
                return Err(row_err(
                    file,
                    row,
                    "id",
                    format!("id {:?} does not match conversation and index (expected {expected:?})", q.id),
                ));
            }
            if let Some(first) = question_rows.get(q.id.as_str()) {
                return Err(row_err(file, row, "id", format!("duplicate id {:?} (first at row {first})", q.id)));
            }
            question_rows.insert(&q.id, row);
            non_blank(file, row, "question", &q.question, "question")?;
            match (&q.answer, &q.adversarial_answer) {
                (None, None) => return Err(row_err(file, row, "answer", "neither answer nor adversarial_answer is set")),
                (answer, adversarial) => {
                    if let Some(a) = answer {
                        non_blank(file, row, "answer", a, "answer")?;
                    }
                    if let Some(a) = adversarial {
                        non_blank(file, row, "adversarial_answer", a, "adversarial answer")?;
                    }
                }
            }
            check_evidence(file, row, &q.evidence, false)?;
            if !(1..=5).contains(&q.category) {
                return Err(row_err(file, row, "category", format!("expected 1..5, got {}", q.category)));
            }
            if q.split != conv.split {
                return Err(row_err(
                    file,
                    row,
                    "split",
                    format!("split {} differs from the split of {} ({})", q.split, q.conversation_id, conv.split),
                ));
            }
        }
        Ok(())
    }
}
