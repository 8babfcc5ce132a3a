//! Gold status: a published audit of LoCoMo's gold answers, joined to the questions.
//!
//! Training on a wrong gold answer teaches the policy the wrong fact. The LoCoMo Benchmark Audit
//! (dial481/locomo-audit, CC BY-NC 4.0; `data/locomo-audit/`) lists 156 questions of categories 1–4:
//! 57 whose answer is right but whose evidence ids are wrong (`WRONG_CITATION`), and 99 whose gold answer
//! corrupts the score (`HALLUCINATION`, `TEMPORAL_ERROR`, `ATTRIBUTION_ERROR`, `AMBIGUOUS`, `INCOMPLETE`),
//! each with a corrected answer and evidence.
//!
//! - [`Dataset::join_audit`] joins the records to the questions ([`Question::gold`]): the audit's
//!   `locomo_<c>_qa<i>` is the `i`-th question of the `c`-th conversation in file order, and its question
//!   text must be the dataset's. A record that names no such question, or another text, is not joined
//!   (a dataset other than LoCoMo keeps every question `ok`).
//! - [`Dataset::apply_gold`] applies a [`GoldMode`] to the whole dataset, so episodes, `memgym eval` and
//!   the exports all follow one choice: `original` (LoCoMo as published), `corrected` (the audit's answer
//!   and evidence where it has them), `exclude-flagged` (the score-corrupting questions removed).

use std::collections::HashMap;

use serde::Deserialize;

use super::{normalize_evidence, Dataset, DatasetError, EvidenceRepairs};

/// What the audit says of a question's gold answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub enum GoldStatus {
    /// Not in the audit's list.
    #[default]
    Ok,
    /// The answer is right; the evidence ids are wrong (scoring is unaffected, evidence recall is not).
    WrongCitation,
    /// The gold answer corrupts the score.
    Flagged,
}

impl GoldStatus {
    /// Every status, in report order.
    pub const ALL: [GoldStatus; 3] = [GoldStatus::Ok, GoldStatus::WrongCitation, GoldStatus::Flagged];

    /// Name in reports and on the wire.
    pub fn name(self) -> &'static str {
        match self {
            GoldStatus::Ok => "ok",
            GoldStatus::WrongCitation => "wrong-citation",
            GoldStatus::Flagged => "flagged",
        }
    }
}

/// A question's gold status, with the audit's correction.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Gold {
    /// The status.
    pub status: GoldStatus,
    /// The audit's error type (`HALLUCINATION`, `WRONG_CITATION`, …); `None` when not audited.
    pub error_type: Option<String>,
    /// The audit's answer (for a flagged question, the one to score against).
    pub corrected_answer: Option<String>,
    /// The audit's evidence ids, normalised.
    pub corrected_evidence: Option<Vec<String>>,
}

/// Which gold answers episodes, evaluations and exports use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum GoldMode {
    /// LoCoMo as published.
    #[default]
    Original,
    /// The audit's answer and evidence where it has them.
    Corrected,
    /// The score-corrupting questions removed.
    ExcludeFlagged,
}

impl GoldMode {
    /// Every mode.
    pub const ALL: [GoldMode; 3] = [GoldMode::Original, GoldMode::Corrected, GoldMode::ExcludeFlagged];

    /// Name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            GoldMode::Original => "original",
            GoldMode::Corrected => "corrected",
            GoldMode::ExcludeFlagged => "exclude-flagged",
        }
    }

    /// The mode named `name`.
    pub fn parse(name: &str) -> Result<GoldMode, String> {
        Self::ALL
            .into_iter()
            .find(|m| m.name() == name.trim())
            .ok_or_else(|| format!("unknown gold mode {name:?}: expected original, corrected or exclude-flagged"))
    }
}

/// One record of the audit's `errors.json` (the keys memgym reads; the others are ignored).
#[derive(Debug, Deserialize)]
struct Record {
    question_id: String,
    question: String,
    error_type: String,
    correct_evidence: Vec<String>,
    correct_answer: String,
}

/// How a join went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AuditJoin {
    /// Records joined to a question.
    pub joined: usize,
    /// Records naming no question of the dataset, or another question text.
    pub unmatched: usize,
}

impl Dataset {
    /// Joins the audit's `errors.json` to the questions (see the module docs).
    ///
    /// # Errors
    ///
    /// [`DatasetError::JsonSyntax`] or [`DatasetError::Json`] when the file is not the audit's format.
    pub fn join_audit(&mut self, file: &str, json: &[u8]) -> Result<AuditJoin, DatasetError> {
        let records: Vec<Record> =
            serde_json::from_slice(json).map_err(|e| DatasetError::JsonSyntax { file: file.into(), message: e.to_string() })?;
        let order: Vec<String> = self.conversations.iter().map(|c| c.id.clone()).collect();
        let index: HashMap<String, usize> = self.questions.iter().enumerate().map(|(i, q)| (q.id.clone(), i)).collect();
        let mut join = AuditJoin::default();
        for (n, r) in records.into_iter().enumerate() {
            let target = parse_id(&r.question_id).and_then(|(c, i)| Some(format!("{}:q{i}", order.get(c)?)));
            let Some(&at) = target.as_ref().and_then(|id| index.get(id)) else {
                join.unmatched += 1;
                continue;
            };
            let q = &mut self.questions[at];
            if q.question.trim() != r.question.trim() {
                join.unmatched += 1;
                continue;
            }
            let status = match r.error_type.as_str() {
                "WRONG_CITATION" => GoldStatus::WrongCitation,
                "HALLUCINATION" | "TEMPORAL_ERROR" | "ATTRIBUTION_ERROR" | "AMBIGUOUS" | "INCOMPLETE" => GoldStatus::Flagged,
                other => {
                    return Err(DatasetError::Json {
                        file: file.into(),
                        path: format!("[{n}].error_type"),
                        message: format!("unknown error type {}", crate::util::excerpt::quoted(other)),
                    })
                }
            };
            let evidence = normalize_evidence(r.correct_evidence.iter().map(String::as_str), &mut EvidenceRepairs::default());
            let answer = Some(r.correct_answer.trim().to_string()).filter(|a| !a.is_empty());
            q.gold = Gold { status, error_type: Some(r.error_type), corrected_answer: answer, corrected_evidence: Some(evidence) };
            join.joined += 1;
        }
        Ok(join)
    }

    /// Applies `mode` to every question (see the module docs).
    pub fn apply_gold(&mut self, mode: GoldMode) {
        match mode {
            GoldMode::Original => {}
            GoldMode::Corrected => {
                for q in &mut self.questions {
                    if q.gold.status == GoldStatus::Flagged {
                        if let Some(a) = &q.gold.corrected_answer {
                            q.answer = Some(a.clone());
                        }
                    }
                    if let Some(e) = &q.gold.corrected_evidence {
                        q.evidence = e.clone();
                    }
                }
            }
            GoldMode::ExcludeFlagged => {
                for q in self.questions.iter().filter(|q| q.gold.status == GoldStatus::Flagged) {
                    self.excluded.insert(q.id.clone(), q.gold.error_type.clone().unwrap_or_default());
                }
                self.questions.retain(|q| q.gold.status != GoldStatus::Flagged);
                self.reindex();
            }
        }
    }

    /// The audit's error type of a question [`GoldMode::ExcludeFlagged`] removed.
    pub fn excluded(&self, question_id: &str) -> Option<&str> {
        self.excluded.get(question_id).map(String::as_str)
    }
}

/// `locomo_<c>_qa<i>` → (c, i).
fn parse_id(id: &str) -> Option<(usize, usize)> {
    let (c, i) = id.strip_prefix("locomo_")?.split_once("_qa")?;
    Some((c.parse().ok()?, i.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn locomo() -> Dataset {
        crate::dataset::Dataset::load(None).unwrap()
    }

    #[test]
    fn the_shipped_audit_joins_every_record_to_its_question() {
        let ds = locomo();
        let count = |s: GoldStatus| ds.questions.iter().filter(|q| q.gold.status == s).count();
        assert_eq!((count(GoldStatus::WrongCitation), count(GoldStatus::Flagged)), (57, 99));
        let flagged = |split| ds.questions.iter().filter(|q| q.gold.status == GoldStatus::Flagged && q.split == split).count();
        assert_eq!((flagged(crate::dataset::Split::Test), flagged(crate::dataset::Split::Train)), (32, 67));
        // locomo_0_qa2 is conv-26:q2.
        let q = ds.question("conv-26:q2").unwrap();
        assert_eq!((q.gold.status, q.gold.error_type.as_deref()), (GoldStatus::Flagged, Some("HALLUCINATION")));
        assert_eq!(q.gold.corrected_answer.as_deref(), Some("Counseling or mental health"));
        assert_eq!(q.answer.as_deref(), Some("Psychology, counseling certification"), "the original stays until a mode applies");
        let cited = ds.question("conv-26:q1").unwrap();
        assert_eq!(cited.gold.status, GoldStatus::WrongCitation);
        assert_eq!(cited.gold.corrected_evidence.as_deref(), Some(&["D1:14".to_string()][..]));
    }

    #[test]
    fn modes_correct_or_exclude_and_the_original_is_kept() {
        let mut corrected = locomo();
        corrected.apply_gold(GoldMode::Corrected);
        assert_eq!(corrected.question("conv-26:q2").unwrap().answer.as_deref(), Some("Counseling or mental health"));
        assert_eq!(corrected.question("conv-26:q1").unwrap().evidence, ["D1:14"]);
        assert_eq!(corrected.question("conv-26:q1").unwrap().answer.as_deref(), Some("2022"));
        let mut excluded = locomo();
        let before = excluded.questions.len();
        excluded.apply_gold(GoldMode::ExcludeFlagged);
        assert_eq!(excluded.questions.len(), before - 99);
        assert!(excluded.question("conv-26:q2").is_none() && excluded.question("conv-26:q1").is_some());
        let mut original = locomo();
        original.apply_gold(GoldMode::Original);
        assert_eq!(original.questions, locomo().questions);
        for m in GoldMode::ALL {
            assert_eq!(GoldMode::parse(m.name()), Ok(m));
        }
        assert!(GoldMode::parse("fixed").unwrap_err().contains("exclude-flagged"));
    }

    #[test]
    fn records_that_do_not_match_are_not_joined_and_bad_files_are_errors() {
        let mut ds = locomo();
        let other = br#"[{"question_id":"locomo_0_qa2","question":"Another question?","error_type":"HALLUCINATION","correct_evidence":[],"correct_answer":"x"},
                        {"question_id":"locomo_99_qa0","question":"q","error_type":"AMBIGUOUS","correct_evidence":[],"correct_answer":"x"},
                        {"question_id":"nonsense","question":"q","error_type":"AMBIGUOUS","correct_evidence":[],"correct_answer":"x"}]"#;
        assert_eq!(ds.join_audit("a.json", other).unwrap(), AuditJoin { joined: 0, unmatched: 3 });
        let bad = br#"[{"question_id":"locomo_0_qa2","question":"What fields would Caroline be likely to pursue in her educaton?","error_type":"TYPO","correct_evidence":[],"correct_answer":"x"}]"#;
        let e = ds.join_audit("a.json", bad).unwrap_err().to_string();
        assert!(e.contains("[0].error_type") && e.contains("TYPO"), "{e}");
        assert!(ds.join_audit("a.json", b"{").unwrap_err().to_string().contains("invalid JSON"));
    }
}
