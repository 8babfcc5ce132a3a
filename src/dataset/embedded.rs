//! Where the dataset comes from: a Parquet directory, or by default the copy of LoCoMo embedded in the binary
//! at build time, so the server runs with nothing but its binary. The LoCoMo audit's list of wrong gold
//! answers is embedded beside it and joined on every load.

use std::path::Path;

use super::{Dataset, DatasetError, GoldMode};

const EMBEDDED_CONVERSATIONS: &[u8] = include_bytes!("../../data/locomo/conversations.parquet");
const EMBEDDED_MEMORIES: &[u8] = include_bytes!("../../data/locomo/memories.parquet");
const EMBEDDED_QUESTIONS: &[u8] = include_bytes!("../../data/locomo/questions.parquet");
/// The LoCoMo Benchmark Audit's list of wrong gold answers (CC BY-NC 4.0; `data/locomo-audit/`).
const EMBEDDED_AUDIT: &[u8] = include_bytes!("../../data/locomo-audit/errors.json");
const AUDIT_FILE: &str = "data/locomo-audit/errors.json";

impl Dataset {
    /// The dataset in `dir`, or the embedded LoCoMo, with the audit joined to the questions it names (all
    /// of them on LoCoMo, none on another dataset).
    pub fn load(dir: Option<&Path>) -> Result<Dataset, DatasetError> {
        let mut ds = match dir {
            Some(d) => Dataset::read_parquet_dir(d)?,
            None => Dataset::read_parquet_bytes(
                bytes::Bytes::from_static(EMBEDDED_CONVERSATIONS),
                bytes::Bytes::from_static(EMBEDDED_MEMORIES),
                bytes::Bytes::from_static(EMBEDDED_QUESTIONS),
            )?,
        };
        let join = ds.join_audit(AUDIT_FILE, EMBEDDED_AUDIT)?;
        tracing::debug!(joined = join.joined, unmatched = join.unmatched, "LoCoMo audit");
        Ok(ds)
    }

    /// [`Dataset::load`], with the gold answers `mode` chooses ([`Dataset::apply_gold`]).
    pub fn load_with_gold(dir: Option<&Path>, mode: GoldMode) -> Result<Dataset, DatasetError> {
        let mut ds = Dataset::load(dir)?;
        ds.apply_gold(mode);
        Ok(ds)
    }
}
