//! Summary counts of a [`Dataset`], for the converter's report, start-up logs and the tests that
//! pin the dataset to the published LoCoMo numbers.

use std::collections::HashMap;
use std::fmt::{self, Write as _};

use super::{category_name, Dataset, EvidenceRepairReport, EvidenceRepairs, Split, ADVERSARIAL_CATEGORY};

/// Counts of one conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversationStats {
    /// Conversation id.
    pub id: String,
    /// Its split.
    pub split: Split,
    /// Number of sessions.
    pub sessions: u32,
    /// Number of dialogue turns.
    pub turns: u32,
    /// Number of initial memories.
    pub memories: u32,
    /// Number of questions.
    pub questions: u32,
    /// Questions per category, `[0]` = category 1.
    pub questions_by_category: [u32; 5],
}

/// Counts of one split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitStats {
    /// The split.
    pub split: Split,
    /// Conversations in it.
    pub conversations: u32,
    /// Initial memories of those conversations.
    pub memories: u32,
    /// Questions of all categories.
    pub questions: u32,
    /// Questions except category 5 (adversarial), as MemUpdate uses them.
    pub questions_without_adversarial: u32,
}

/// Questions of one category.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CategoryStats {
    /// 1..=5.
    pub category: u8,
    /// Questions of this category.
    pub questions: u32,
    /// Of those, in the train split.
    pub train: u32,
    /// Of those, in the test split.
    pub test: u32,
}

/// Totals over the whole dataset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Totals {
    /// Conversations.
    pub conversations: u32,
    /// Sessions.
    pub sessions: u32,
    /// Dialogue turns.
    pub turns: u32,
    /// Initial memories.
    pub memories: u32,
    /// Questions.
    pub questions: u32,
}

/// Summary counts of a dataset; `Display` renders them as aligned tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stats {
    /// One entry per conversation, in dataset order.
    pub conversations: Vec<ConversationStats>,
    /// Train then test.
    pub splits: Vec<SplitStats>,
    /// Categories 1..=5.
    pub categories: Vec<CategoryStats>,
    /// Totals.
    pub totals: Totals,
    /// Evidence repairs of the JSON conversion; `None` for a dataset read from Parquet.
    pub evidence_repairs: Option<EvidenceRepairReport>,
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl Dataset {
    /// Computes the summary counts.
    pub fn stats(&self) -> Stats {
        let mut memories: HashMap<&str, u32> = HashMap::new();
        for m in &self.memories {
            *memories.entry(&m.conversation_id).or_default() += 1;
        }
        let mut by_category: HashMap<&str, [u32; 5]> = HashMap::new();
        let mut categories: Vec<CategoryStats> =
            (1..=5u8).map(|category| CategoryStats { category, questions: 0, train: 0, test: 0 }).collect();
        for q in &self.questions {
            let Some(slot) = usize::from(q.category).checked_sub(1).filter(|&k| k < 5) else {
                continue;
            };
            by_category.entry(&q.conversation_id).or_default()[slot] += 1;
            let c = &mut categories[slot];
            c.questions += 1;
            match q.split {
                Split::Train => c.train += 1,
                Split::Test => c.test += 1,
            }
        }

        let conversations: Vec<ConversationStats> = self
            .conversations
            .iter()
            .map(|c| {
                let questions_by_category = by_category.get(c.id.as_str()).copied().unwrap_or_default();
                ConversationStats {
                    id: c.id.clone(),
                    split: c.split,
                    sessions: count(c.sessions.len()),
                    turns: c.turn_count,
                    memories: memories.get(c.id.as_str()).copied().unwrap_or(0),
                    questions: questions_by_category.iter().sum(),
                    questions_by_category,
                }
            })
            .collect();

        let splits = Split::ALL
            .iter()
            .map(|&split| {
                let mut s = SplitStats { split, conversations: 0, memories: 0, questions: 0, questions_without_adversarial: 0 };
                for c in conversations.iter().filter(|c| c.split == split) {
                    s.conversations += 1;
                    s.memories += c.memories;
                    s.questions += c.questions;
                    s.questions_without_adversarial += c.questions - c.questions_by_category[usize::from(ADVERSARIAL_CATEGORY) - 1];
                }
                s
            })
            .collect();

        let totals = Totals {
            conversations: count(self.conversations.len()),
            sessions: conversations.iter().map(|c| c.sessions).sum(),
            turns: conversations.iter().map(|c| c.turns).sum(),
            memories: count(self.memories.len()),
            questions: count(self.questions.len()),
        };
        Stats { conversations, splits, categories, totals, evidence_repairs: self.repairs }
    }
}

/// Writes rows of cells, first column left-aligned, the others right-aligned.
fn table(f: &mut fmt::Formatter<'_>, rows: &[Vec<String>]) -> fmt::Result {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> =
        (0..columns).map(|k| rows.iter().filter_map(|r| r.get(k)).map(|c| c.chars().count()).max().unwrap_or(0)).collect();
    for row in rows {
        let mut line = String::new();
        for (k, (cell, &w)) in row.iter().zip(&widths).enumerate() {
            // Writing to a String cannot fail.
            let _ = if k == 0 { write!(line, "{cell:<w$}") } else { write!(line, "  {cell:>w$}") };
        }
        writeln!(f, "{}", line.trim_end())?;
    }
    Ok(())
}

fn repairs_row(name: &str, r: &EvidenceRepairs) -> Vec<String> {
    vec![
        name.to_owned(),
        r.raw_entries.to_string(),
        r.clean.to_string(),
        r.repaired.to_string(),
        r.dropped.to_string(),
        r.dropped_tokens.to_string(),
        r.duplicates_removed.to_string(),
    ]
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = &self.totals;
        writeln!(
            f,
            "{} conversations, {} sessions, {} turns, {} memories, {} questions",
            t.conversations, t.sessions, t.turns, t.memories, t.questions
        )?;
        writeln!(f)?;

        let head = |first: &str| -> Vec<String> {
            [first, "split", "sessions", "turns", "memories", "questions"]
                .iter()
                .map(|s| (*s).to_owned())
                .chain((1..=5).map(|c| format!("cat{c}")))
                .collect()
        };
        let mut rows = vec![head("conversation")];
        for c in &self.conversations {
            let mut row = vec![
                c.id.clone(),
                c.split.to_string(),
                c.sessions.to_string(),
                c.turns.to_string(),
                c.memories.to_string(),
                c.questions.to_string(),
            ];
            row.extend(c.questions_by_category.iter().map(u32::to_string));
            rows.push(row);
        }
        let mut total = vec![
            "total".to_owned(),
            String::new(),
            t.sessions.to_string(),
            t.turns.to_string(),
            t.memories.to_string(),
            t.questions.to_string(),
        ];
        total.extend(self.categories.iter().map(|c| c.questions.to_string()));
        rows.push(total);
        table(f, &rows)?;
        writeln!(f)?;

        let mut rows =
            vec![["split", "conversations", "memories", "questions", "without cat5"].iter().map(|s| (*s).to_owned()).collect::<Vec<_>>()];
        for s in &self.splits {
            rows.push(vec![
                s.split.to_string(),
                s.conversations.to_string(),
                s.memories.to_string(),
                s.questions.to_string(),
                s.questions_without_adversarial.to_string(),
            ]);
        }
        table(f, &rows)?;
        writeln!(f)?;

        let mut rows = vec![["category", "questions", "train", "test"].iter().map(|s| (*s).to_owned()).collect::<Vec<_>>()];
        for c in &self.categories {
            rows.push(vec![
                format!("{} {}", c.category, category_name(c.category).unwrap_or("?")),
                c.questions.to_string(),
                c.train.to_string(),
                c.test.to_string(),
            ]);
        }
        table(f, &rows)?;

        match &self.evidence_repairs {
            None => writeln!(f, "\nevidence repairs: not known (dataset not read from JSON)")?,
            Some(r) => {
                writeln!(f)?;
                let rows = vec![
                    ["evidence", "raw entries", "clean", "repaired", "dropped", "bad tokens", "duplicates"]
                        .iter()
                        .map(|s| (*s).to_owned())
                        .collect::<Vec<_>>(),
                    repairs_row("memories", &r.memories),
                    repairs_row("questions", &r.questions),
                ];
                table(f, &rows)?;
                writeln!(f, "observation pairs with a list-valued dia_id: {}", r.list_valued_dia_ids)?;
            }
        }
        Ok(())
    }
}
