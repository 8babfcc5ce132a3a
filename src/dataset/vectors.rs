//! Precomputed M₀ vectors in Parquet (`vectors-<embedder>.parquet`), keyed by the embedder's identity,
//! so a server with a slow embedder never embeds M₀ at startup and no episode ever waits for it.
//!
//! Schema: `conversation_id` Utf8, `memory_id` Utf8, `vector` FixedSizeList<Float32>[dim]; the
//! embedder's name, dimension and fingerprint are stored in the file's key-value metadata. The reader
//! checks the schema, every vector's length and finiteness, and hands back the identity so the caller
//! can refuse vectors made by another model.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{FixedSizeListBuilder, Float32Builder, StringBuilder};
use arrow_array::{Array, FixedSizeListArray, Float32Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use bytes::Bytes;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::DatasetError;

const KEY_NAME: &str = "memgym.embedder.name";
const KEY_DIM: &str = "memgym.embedder.dim";
const KEY_FINGERPRINT: &str = "memgym.embedder.fingerprint";

/// Vectors of M₀ made by one embedder.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorSet {
    /// Embedder name.
    pub name: String,
    /// Dimension.
    pub dim: usize,
    /// Embedder fingerprint.
    pub fingerprint: String,
    /// conversation id → (memory id, vector) in file order.
    pub by_conversation: HashMap<String, Vec<(String, Vec<f32>)>>,
}

impl VectorSet {
    /// The file name used for an embedder.
    pub fn file_name(embedder_name: &str) -> String {
        format!("vectors-{embedder_name}.parquet")
    }

    /// Writes the set atomically.
    pub fn write(&self, path: &Path) -> Result<(), DatasetError> {
        let file = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let item = Arc::new(Field::new("item", DataType::Float32, false));
        let mut meta = HashMap::new();
        meta.insert(KEY_NAME.to_string(), self.name.clone());
        meta.insert(KEY_DIM.to_string(), self.dim.to_string());
        meta.insert(KEY_FINGERPRINT.to_string(), self.fingerprint.clone());
        let schema = Arc::new(
            Schema::new(vec![
                Field::new("conversation_id", DataType::Utf8, false),
                Field::new("memory_id", DataType::Utf8, false),
                Field::new("vector", DataType::FixedSizeList(item.clone(), self.dim as i32), false),
            ])
            .with_metadata(meta),
        );
        let mut conv = StringBuilder::new();
        let mut ids = StringBuilder::new();
        let mut vecs = FixedSizeListBuilder::new(Float32Builder::new(), self.dim as i32).with_field(item);
        let mut keys: Vec<&String> = self.by_conversation.keys().collect();
        keys.sort();
        for c in keys {
            for (id, v) in &self.by_conversation[c] {
                if v.len() != self.dim {
                    return Err(DatasetError::Invalid {
                        message: format!("vector of {c}/{id} has {} dimensions, not {}", v.len(), self.dim),
                    });
                }
                conv.append_value(c);
                ids.append_value(id);
                vecs.values().append_slice(v);
                vecs.append(true);
            }
        }
        let batch = RecordBatch::try_new(schema, vec![Arc::new(conv.finish()), Arc::new(ids.finish()), Arc::new(vecs.finish())])
            .map_err(|e| DatasetError::Parquet { file: file.clone(), message: e.to_string() })?;
        let bytes = super::parquet_io::encode(&file, &batch)?;
        super::parquet_io::atomic_write(path, &bytes)
    }

    /// Reads and checks a set.
    pub fn read(path: &Path) -> Result<VectorSet, DatasetError> {
        let file = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| DatasetError::Io { path: path.to_path_buf(), source })?;
        match catch_unwind(AssertUnwindSafe(|| decode(&file, Bytes::from(bytes)))) {
            Ok(r) => r,
            Err(_) => Err(DatasetError::Parquet { file, message: "the decoder panicked on this file".into() }),
        }
    }
}

fn decode(file: &str, bytes: Bytes) -> Result<VectorSet, DatasetError> {
    let perr = |m: String| DatasetError::Parquet { file: file.to_owned(), message: m };
    let schema_err = |column: &str, m: String| DatasetError::Schema { file: file.to_owned(), column: column.to_owned(), message: m };
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes).map_err(|e| perr(e.to_string()))?;
    let meta = builder.schema().metadata().clone();
    let get = |k: &str| meta.get(k).cloned().ok_or_else(|| schema_err("(metadata)", format!("missing key {k}")));
    let name = get(KEY_NAME)?;
    let dim: usize = get(KEY_DIM)?.parse().map_err(|_| schema_err("(metadata)", format!("{KEY_DIM} is not a number")))?;
    let fingerprint = get(KEY_FINGERPRINT)?;
    let reader = builder.build().map_err(|e| perr(e.to_string()))?;
    let mut by_conversation: HashMap<String, Vec<(String, Vec<f32>)>> = HashMap::new();
    let mut row = 0usize;
    for batch in reader {
        let batch = batch.map_err(|e| perr(e.to_string()))?;
        let col = |name: &str| batch.column_by_name(name).ok_or_else(|| schema_err(name, "missing column".into()));
        let conv = col("conversation_id")?
            .as_any()
            .downcast_ref::<StringArray>()
            .ok_or_else(|| schema_err("conversation_id", "expected Utf8".into()))?;
        let ids =
            col("memory_id")?.as_any().downcast_ref::<StringArray>().ok_or_else(|| schema_err("memory_id", "expected Utf8".into()))?;
        let vecs = col("vector")?
            .as_any()
            .downcast_ref::<FixedSizeListArray>()
            .ok_or_else(|| schema_err("vector", "expected FixedSizeList<Float32>".into()))?;
        if vecs.value_length() as usize != dim {
            return Err(schema_err("vector", format!("lists of {} values, metadata says {dim}", vecs.value_length())));
        }
        let values =
            vecs.values().as_any().downcast_ref::<Float32Array>().ok_or_else(|| schema_err("vector", "expected Float32 items".into()))?;
        for i in 0..batch.num_rows() {
            let bad = |column: &str, m: &str| DatasetError::InvalidRow {
                file: file.to_owned(),
                row: row + i,
                column: column.into(),
                message: m.into(),
            };
            if conv.is_null(i) || ids.is_null(i) || vecs.is_null(i) {
                return Err(bad("vector", "null value"));
            }
            let v: Vec<f32> = values.values()[i * dim..(i + 1) * dim].to_vec();
            if !v.iter().all(|x| x.is_finite()) {
                return Err(bad("vector", "non-finite value"));
            }
            by_conversation.entry(conv.value(i).to_string()).or_default().push((ids.value(i).to_string(), v));
        }
        row += batch.num_rows();
    }
    Ok(VectorSet { name, dim, fingerprint, by_conversation })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set() -> VectorSet {
        let mut by = HashMap::new();
        by.insert("conv-1".to_string(), vec![("m0000".to_string(), vec![0.6, 0.8, 0.0]), ("m0001".to_string(), vec![0.0, 0.0, 1.0])]);
        by.insert("conv-2".to_string(), vec![("m0000".to_string(), vec![1.0, 0.0, 0.0])]);
        VectorSet { name: "toy".into(), dim: 3, fingerprint: "abc".into(), by_conversation: by }
    }

    #[test]
    fn round_trip_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(VectorSet::file_name("toy"));
        set().write(&path).unwrap();
        assert_eq!(VectorSet::read(&path).unwrap(), set());
        std::fs::write(&path, b"garbage").unwrap();
        let e = VectorSet::read(&path).unwrap_err().to_string();
        assert!(e.contains("vectors-toy.parquet"), "{e}");
        let mut bad = set();
        bad.by_conversation.get_mut("conv-2").unwrap()[0].1.push(1.0);
        assert!(bad.write(&path).is_err());
        assert!(VectorSet::read(&dir.path().join("missing.parquet")).is_err());
    }
}
