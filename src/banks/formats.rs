//! Moving a library in and out: the Training-Free GRPO design's `ExperienceManager` file (`{"experiences": {"G0": text, …},
//! "next_id": N}`), upstream Training-Free GRPO's per-step file (`{"G0": text, …}`) and memgym's own
//! (every field and counter, no vectors: they are embedded again on import).
//!
//! An import is one write. Into a new or empty bank it keeps the file's ids; with `replace` it first
//! removes the bank's experiences. The counter becomes the largest of the bank's, the file's `next_id`
//! and the largest id + 1, so no id the bank ever issued is issued again. Files from the seeds carry no
//! confidence, domain or epoch: those take the defaults of `add`. Exports list experiences in id order.

use serde_json::{json, Value};

use super::experience::{check_domain, check_text, DEFAULT_CONFIDENCE, DEFAULT_DOMAIN};
use super::library::{show_id, Experience};
use super::ops::parse_id;
use super::store::BankMeta;
use super::{BankError, Banks};
use crate::util::excerpt::quoted;
use crate::util::json::Json;

/// A library file format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The Training-Free GRPO design's file.
    Seed,
    /// Upstream's per-step file.
    Upstream,
    /// memgym's own.
    Memgym,
}

/// The tag of memgym's own format.
pub const MEMGYM_FORMAT: &str = "memgym-bank";

/// A parsed file: experiences in file order and the file's counter.
#[derive(Debug, Clone, PartialEq)]
pub struct File {
    /// The experiences.
    pub experiences: Vec<Experience>,
    /// The file's `next_id` (0 when it has none).
    pub next_id: u64,
    /// The file's epoch (memgym format).
    pub epoch: Option<u64>,
}

/// A refusal of the field at `path` (`data.experiences[3].text`; `data` is the request's field).
fn bad_at(path: &str, message: impl Into<String>) -> BankError {
    BankError::invalid(path, message)
}

fn bad(message: impl Into<String>) -> BankError {
    BankError::invalid("data", message)
}

/// An experience of the seeds' files (text only): `add`'s defaults; its epoch is the bank's, stamped when
/// the import is written.
fn defaults(id: u64, text: String) -> Experience {
    Experience {
        id,
        text,
        confidence: DEFAULT_CONFIDENCE,
        domain: DEFAULT_DOMAIN.to_string(),
        created_epoch: 0,
        usage_count: 0,
        last_used_epoch: None,
    }
}

/// Reads `{"G0": "text", …}` members in file order.
fn id_texts(members: &[(String, Json)], path: &str) -> Result<Vec<Experience>, BankError> {
    let mut out = Vec::with_capacity(members.len());
    for (k, v) in members {
        let id = parse_id(&Value::String(k.clone())).map_err(|m| bad_at(path, format!("key {}: {m}", quoted(k))))?;
        let Json::String(text) = v else {
            return Err(bad_at(&format!("{path}.{}", show_id(id)), format!("must be a string, got {}", v.describe())));
        };
        out.push(defaults(id, text.clone()));
    }
    Ok(out)
}

fn u64_of(v: &Json, path: &str) -> Result<u64, BankError> {
    match v {
        Json::Number(n) => n.as_u64().ok_or_else(|| bad_at(path, format!("must be a whole number >= 0, got {n}"))),
        other @ (Json::Null | Json::Bool(_) | Json::String(_) | Json::Array(_) | Json::Object(_)) => {
            Err(bad_at(path, format!("must be a number, got {}", other.describe())))
        }
    }
}

/// Parses a file. Experiences of the seeds' files get `add`'s defaults; `import` stamps their epoch.
pub fn parse(format: Format, data: &str) -> Result<File, BankError> {
    let root: Json =
        serde_json::from_str(data).map_err(|e| bad(format!("not valid JSON: {}", crate::util::excerpt::cut(&e.to_string()))))?;
    if let Some(k) = root.first_duplicate() {
        return Err(bad(format!("key {} appears twice in one object (duplicate JSON keys are refused)", quoted(k))));
    }
    let Json::Object(members) = &root else { return Err(bad(format!("must be a JSON object, got {}", root.describe()))) };
    match format {
        Format::Upstream => Ok(File { experiences: id_texts(members, "data")?, next_id: 0, epoch: None }),
        Format::Seed => {
            let Some(Json::Object(exps)) = root.get("experiences") else {
                return Err(bad_at("data.experiences", "missing, or not an object"));
            };
            let next_id = root.get("next_id").map(|v| u64_of(v, "data.next_id")).transpose()?.unwrap_or(0);
            Ok(File { experiences: id_texts(exps, "data.experiences")?, next_id, epoch: None })
        }
        Format::Memgym => {
            if root.get("format") != Some(&Json::String(MEMGYM_FORMAT.into())) {
                return Err(bad_at("data.format", format!("must be {}", quoted(MEMGYM_FORMAT))));
            }
            let value: Value = root.clone().into();
            let exps = value["experiences"].as_array().ok_or_else(|| bad_at("data.experiences", "missing, or not an array"))?;
            let mut out = Vec::with_capacity(exps.len());
            for (i, e) in exps.iter().enumerate() {
                let p = |f: &str| format!("data.experiences[{i}].{f}");
                let id = parse_id(&e["id"]).map_err(|m| bad_at(&p("id"), m))?;
                let text = e["text"].as_str().ok_or_else(|| bad_at(&p("text"), "must be a string"))?.to_string();
                let confidence = e["confidence"]
                    .as_f64()
                    .filter(|c| (0.0..=1.0).contains(c))
                    .ok_or_else(|| bad_at(&p("confidence"), "must be a number in [0, 1]"))?;
                let domain = e["domain"].as_str().ok_or_else(|| bad_at(&p("domain"), "must be a string"))?.to_string();
                let num = |f: &str| e[f].as_u64().ok_or_else(|| bad_at(&p(f), "must be a whole number >= 0"));
                let last_used_epoch = match &e["last_used_epoch"] {
                    Value::Null => None,
                    Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Array(_) | Value::Object(_) => {
                        Some(num("last_used_epoch")?)
                    }
                };
                out.push(Experience {
                    id,
                    text,
                    confidence,
                    domain,
                    created_epoch: num("created_epoch")?,
                    usage_count: num("usage_count")?,
                    last_used_epoch,
                });
            }
            Ok(File { experiences: out, next_id: value["next_id"].as_u64().unwrap_or(0), epoch: value["epoch"].as_u64() })
        }
    }
}

fn object_in_order<'a>(entries: impl Iterator<Item = (&'a str, &'a str)>) -> String {
    let members: Vec<String> = entries.map(|(k, v)| format!("{}: {}", Value::String(k.into()), Value::String(v.into()))).collect();
    format!("{{{}}}", members.join(", "))
}

/// Writes a library in `format` (experiences in id order).
pub fn render(format: Format, meta: &BankMeta, exps: &[Experience]) -> String {
    let ids: Vec<String> = exps.iter().map(|e| show_id(e.id)).collect();
    let pairs = || ids.iter().map(String::as_str).zip(exps.iter().map(|e| e.text.as_str()));
    match format {
        Format::Upstream => object_in_order(pairs()),
        Format::Seed => format!("{{\"experiences\": {}, \"next_id\": {}}}", object_in_order(pairs()), meta.next_id),
        Format::Memgym => {
            let list: Vec<Value> = exps
                .iter()
                .map(|e| {
                    json!({"id": show_id(e.id), "text": e.text, "confidence": e.confidence, "domain": e.domain,
                           "created_epoch": e.created_epoch, "usage_count": e.usage_count, "last_used_epoch": e.last_used_epoch})
                })
                .collect();
            json!({"format": MEMGYM_FORMAT, "version": 1, "name": meta.name, "next_id": meta.next_id, "epoch": meta.epoch,
                   "max_size": meta.max_size, "experiences": list})
            .to_string()
        }
    }
}

/// Reads a file and checks every experience as an import stores it: the text rule on texts and domains
/// (stored in the form the rule leaves), the text cap (RESOURCE_EXHAUSTED), ids given once.
pub fn admit(format: Format, data: &str, limits: &super::BankLimits) -> Result<File, BankError> {
    let mut file = parse(format, data)?;
    let ops = super::ops::OpLimits { max_text_chars: limits.max_text_chars, ..super::ops::OpLimits::default() };
    let mut seen = std::collections::HashSet::with_capacity(file.experiences.len());
    let path = |i: usize, e: &Experience, f: &str| match format {
        Format::Memgym => format!("data.experiences[{i}].{f}"),
        Format::Seed => format!("data.experiences.{}", show_id(e.id)),
        Format::Upstream => format!("data.{}", show_id(e.id)),
    };
    for (i, e) in file.experiences.iter_mut().enumerate() {
        if !seen.insert(e.id) {
            return Err(bad_at(&path(i, e, "id"), format!("{} appears twice", show_id(e.id))));
        }
        e.text = check_text(&path(i, e, "text"), &e.text, &ops)?;
        if format == Format::Memgym {
            e.domain = check_domain(&path(i, e, "domain"), Some(&e.domain))?.unwrap_or_default();
        }
    }
    Ok(file)
}

impl Banks {
    /// Imports a file into `bank` (created if missing): the number imported and the counters after.
    ///
    /// The file is read and every experience checked (the text rule, the caps, repeated ids) before
    /// anything is written, and a bank this call created is removed again if the write is refused, so a
    /// refused import leaves no bank, row or version behind.
    pub async fn import(
        &self,
        bank: &str,
        format: Format,
        data: &str,
        replace: bool,
        expected: Option<u64>,
    ) -> Result<(usize, BankMeta), BankError> {
        super::check_name("bank", bank)?;
        let started = std::time::Instant::now();
        let file = admit(format, data, &self.config().limits)?;
        tracing::debug!(bank, experiences = file.experiences.len(), secs = started.elapsed().as_secs_f64(), "import file read and checked");
        let created = match self.store_meta(bank).await? {
            Some(_) => false,
            None => {
                if expected.is_some_and(|v| v != 0) {
                    return Err(BankError::BankNotFound { name: bank.to_string() });
                }
                self.create(bank, super::Kind::Experience, None, true).await?;
                true
            }
        };
        let result = self
            .write(bank, expected, |lib, draft| {
                if !replace && !lib.is_empty() {
                    return Err(BankError::FailedPrecondition {
                        message: format!(
                            "bank {} holds {} experiences; import into an empty bank, or pass replace",
                            quoted(bank),
                            lib.len()
                        ),
                    });
                }
                draft.clear = replace;
                let max_id = file.experiences.iter().map(|e| e.id + 1).max().unwrap_or(0);
                draft.next_id = draft.next_id.max(file.next_id).max(max_id);
                if let Some(epoch) = file.epoch {
                    draft.epoch = epoch;
                }
                let stamp = draft.epoch;
                for e in &file.experiences {
                    // The seeds' files carry no epoch: their experiences are stamped with the bank's.
                    let created_epoch = if format == Format::Memgym { e.created_epoch } else { stamp };
                    draft.put(Experience { created_epoch, ..e.clone() });
                }
                Ok(file.experiences.len())
            })
            .await;
        if result.is_err() && created {
            // Only an empty bank at version 0 (the one created above) is removed: a bank another
            // client wrote into meanwhile stays.
            let _ = self.delete(bank, Some(0)).await;
        }
        result
    }

    /// Exports `bank` in `format`.
    pub async fn export(&self, bank: &str, format: Format) -> Result<(String, BankMeta), BankError> {
        self.read(bank, |lib| {
            let exps: Vec<Experience> = lib.iter().map(|e| lib.with_usage(e)).collect();
            (render(format, lib.meta(), &exps), lib.meta().clone())
        })
        .await
    }

    async fn store_meta(&self, bank: &str) -> Result<Option<BankMeta>, BankError> {
        Ok(self.store.meta(bank).await?)
    }
}
