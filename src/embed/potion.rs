//! A learned embedder that still loads offline and costs almost nothing: Minish Lab's potion-base-2M, a
//! 64-dimension static model2vec model distilled from BAAI/bge-base-en-v1.5.
//!
//! Why it exists: [`super::HashEmbedder`] matches surface features (words, stems, character trigrams), so it
//! cannot connect a question to a fact that shares no words with it. A static model maps each token to a
//! learned vector and mean-pools them, so "Who wants to adopt a child?" finds "Caroline is researching
//! adoption agencies to become a mother." and "What is Melanie's hobby?" finds "Melanie paints sunsets by
//! the lake." (see the tests). It embeds hundreds of thousands of sentences per second on one core and
//! needs no network or ONNX runtime, but it is a bag of token vectors: expect it to trail a transformer
//! such as MiniLM, and measure retrieval on LoCoMo before choosing it.
//!
//! The model files (`config.json`, `modules.json`, `tokenizer.json`, `model.safetensors`, MIT licence)
//! ship in the repository under `data/models/potion-base-2M/` ([`PotionEmbedder::default_dir`]).
//!
//! **Identity.** The fingerprint is a 64-bit FNV-1a hash over the four model files, so changing any byte of
//! them changes the [`EmbedderIdentity`], and vectors stored under the old identity no longer match: they
//! must be re-embedded. Texts longer than about 512 tokens are truncated by the model.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use model2vec_rs::model::StaticModel;

use super::{panic_message, EmbedError, Embedder, EmbedderIdentity};
use crate::util::fnv::{fnv1a_extend, FNV1A_OFFSET};

/// Name recorded in the identity.
const NAME: &str = "potion-base-2M";

/// The model files, in the order they are hashed into the fingerprint. `modules.json` is not read by
/// model2vec but is part of the shipped model, so it is hashed too.
const MODEL_FILES: [&str; 4] = ["config.json", "modules.json", "tokenizer.json", "model.safetensors"];

/// The potion-base-2M static embedder (see the module doc). Returns unit vectors (zeros for a text
/// with no known tokens, such as an empty string).
pub struct PotionEmbedder {
    model: StaticModel,
    identity: EmbedderIdentity,
}

impl std::fmt::Debug for PotionEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PotionEmbedder").field("identity", &self.identity).finish_non_exhaustive()
    }
}

impl PotionEmbedder {
    /// Loads the model from `dir`, which must hold `config.json`, `modules.json`, `tokenizer.json` and
    /// `model.safetensors`. A missing, unreadable or corrupt file is an [`EmbedError::Backend`] naming
    /// the path; this never panics.
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        if !dir.is_dir() {
            return Err(backend(format!("model directory {} does not exist or is not a directory", dir.display())));
        }
        // Read every file ourselves (with errors naming the path), hash exactly the bytes that are
        // loaded, and hand them to model2vec, so the fingerprint always describes the loaded model.
        let mut bytes = Vec::with_capacity(MODEL_FILES.len());
        for name in MODEL_FILES {
            let path = dir.join(name);
            let b = std::fs::read(&path).map_err(|e| backend(format!("cannot read model file {}: {e}", path.display())))?;
            bytes.push(b);
        }
        let fingerprint = format!("{:016x}", fingerprint(&MODEL_FILES, &bytes));
        let [config, _modules, tokenizer, model] = [&bytes[0], &bytes[1], &bytes[2], &bytes[3]];
        // model2vec reports most problems as errors, but a malformed file could still reach a panic
        // inside it or the tokenizers crate: turn that into an error as a last resort.
        let loaded = catch_unwind(AssertUnwindSafe(|| StaticModel::from_bytes(tokenizer, model, config, None)));
        let model = match loaded {
            Ok(Ok(m)) => m,
            Ok(Err(e)) => return Err(backend(format!("cannot load model from {}: {e:#}", dir.display()))),
            Err(p) => return Err(backend(format!("loading model from {} panicked: {}", dir.display(), panic_message(&*p)))),
        };
        let dim = model.dim();
        if dim == 0 {
            return Err(backend(format!("model in {} has dimension 0", dir.display())));
        }
        Ok(PotionEmbedder { model, identity: EmbedderIdentity { name: NAME.into(), dim, fingerprint } })
    }

    /// The directory shipped in the repository: `<crate root>/data/models/potion-base-2M`.
    pub fn default_dir() -> PathBuf {
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/data/models/potion-base-2M"))
    }
}

impl Embedder for PotionEmbedder {
    fn identity(&self) -> &EmbedderIdentity {
        &self.identity
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        // Texts are independent (mean of token vectors), so one at a time gives the same vectors as any
        // batching and avoids copying every text into a `String` for `StaticModel::encode`.
        catch_unwind(AssertUnwindSafe(|| texts.iter().map(|t| self.model.encode_single(t)).collect()))
            .map_err(|p| backend(format!("embedding panicked: {}", panic_message(&*p))))
    }
}

fn backend(message: String) -> EmbedError {
    EmbedError::Backend { embedder: NAME.into(), message }
}

/// 64-bit FNV-1a over, for each file in order: its name, a zero byte, its length (u64 little-endian) and
/// its bytes. Names and lengths make the framing unambiguous (bytes moving between files change the hash).
fn fingerprint(names: &[&str], contents: &[Vec<u8>]) -> u64 {
    let mut h = FNV1A_OFFSET;
    let mut feed = |bytes: &[u8]| h = fnv1a_extend(h, bytes);
    for (name, bytes) in names.iter().zip(contents) {
        feed(name.as_bytes());
        feed(&[0]);
        feed(&(bytes.len() as u64).to_le_bytes());
        feed(bytes);
    }
    h
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, OnceLock};

    use super::*;
    use crate::embed::EmbedService;
    use crate::util::vector::dot;

    fn model() -> &'static PotionEmbedder {
        static M: OnceLock<PotionEmbedder> = OnceLock::new();
        M.get_or_init(|| PotionEmbedder::load(&PotionEmbedder::default_dir()).expect("shipped model loads"))
    }

    fn embed(t: &str) -> Vec<f32> {
        model().embed_batch(&[t]).unwrap().remove(0)
    }

    /// A temporary copy of the shipped model directory.
    fn copy_model() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        for name in MODEL_FILES {
            std::fs::copy(PotionEmbedder::default_dir().join(name), tmp.path().join(name)).unwrap();
        }
        tmp
    }

    fn backend_message(r: Result<PotionEmbedder, EmbedError>) -> String {
        match r {
            Err(EmbedError::Backend { embedder, message }) => {
                assert_eq!(embedder, NAME);
                message
            }
            Err(e) => panic!("expected a Backend error, got {e}"),
            Ok(_) => panic!("expected a Backend error, got a model"),
        }
    }

    #[test]
    fn hello_world_matches_reference_vector() {
        // Reference from the Python `model2vec` package on the same files.
        let v = embed("hello world");
        assert_eq!(v.len(), 64);
        let want = [-0.064580f32, -0.150898, -0.270862, 0.159549, 0.036855];
        for (i, (g, w)) in v.iter().zip(want).enumerate() {
            assert!((g - w).abs() < 1e-4, "dim {i}: got {g}, want {w}");
        }
        assert!((dot(&v, &v).sqrt() - 1.0).abs() < 1e-4);
    }

    #[test]
    fn identity_names_the_files() {
        let id = model().identity();
        assert_eq!(id.name, "potion-base-2M");
        assert_eq!(id.dim, 64);
        assert_eq!(id.fingerprint.len(), 16);
        assert!(id.fingerprint.chars().all(|c| c.is_ascii_hexdigit()));
        // Pinned: if this fails, the model files changed and every stored potion vector must be re-embedded.
        assert_eq!(id.fingerprint, PINNED_FINGERPRINT);
    }

    const PINNED_FINGERPRINT: &str = "47c16726e04bacb3";

    #[test]
    fn fingerprint_changes_with_any_file() {
        let tmp = copy_model();
        let same = PotionEmbedder::load(tmp.path()).unwrap();
        assert_eq!(same.identity(), model().identity());
        // modules.json is not read by model2vec, yet it is part of the identity.
        let p = tmp.path().join("modules.json");
        let mut b = std::fs::read(&p).unwrap();
        b.push(b'\n');
        std::fs::write(&p, b).unwrap();
        let changed = PotionEmbedder::load(tmp.path()).unwrap();
        assert_ne!(changed.identity().fingerprint, model().identity().fingerprint);
        assert_eq!(changed.embed_batch(&["hello world"]).unwrap(), model().embed_batch(&["hello world"]).unwrap());
    }

    #[test]
    fn ranks_locomo_style_facts() {
        let facts = [
            "Melanie paints sunsets by the lake.",
            "Caroline went to an LGBTQ support group on Tuesday.",
            "Melanie ran a charity race for mental health last Saturday.",
            "Caroline is researching adoption agencies to become a mother.",
            "Melanie's kids love going camping in the mountains.",
            "Caroline moved from Sweden four years ago.",
        ];
        // (query, index of the fact that must rank first). Each case was checked against the model; the
        // winning margins over the runner-up are 0.12-0.32, so the test is not balanced on a rounding
        // error. "What race did Melanie run?" is left out: it wins by only 0.002 (camping comes second).
        let cases = [
            ("What does Melanie paint?", 0),
            ("What is Melanie's hobby?", 0),
            ("Where did Caroline move from?", 5),
            ("What is Caroline researching?", 3),
            ("Who wants to adopt a child?", 3),
            ("Where do Melanie's kids like to go camping?", 4),
            ("What outdoor activity does Melanie's family enjoy?", 4),
        ];
        let fv = model().embed_batch(&facts).unwrap();
        for (q, want) in cases {
            let qv = embed(q);
            let scores: Vec<f32> = fv.iter().map(|f| dot(&qv, f)).collect();
            let best = (0..facts.len()).max_by(|&a, &b| scores[a].total_cmp(&scores[b])).unwrap();
            assert_eq!(best, want, "{q:?} ranked {:?} first; scores {scores:?}", facts[best]);
            let runner_up = (0..facts.len()).filter(|&i| i != want).map(|i| scores[i]).fold(f32::MIN, f32::max);
            assert!(scores[want] - runner_up > 0.05, "{q:?}: margin {} too thin; scores {scores:?}", scores[want] - runner_up);
        }
    }

    #[test]
    fn batch_equals_one_by_one_and_is_deterministic() {
        let texts = ["Caroline went to a support group", "", "Melanie paints sunsets", "hello world", "   "];
        let batch = model().embed_batch(&texts).unwrap();
        assert_eq!(batch.len(), texts.len());
        for (t, v) in texts.iter().zip(&batch) {
            assert_eq!(&embed(t), v, "{t:?}");
        }
        assert_eq!(model().embed_batch(&texts).unwrap(), batch);
        let again = PotionEmbedder::load(&PotionEmbedder::default_dir()).unwrap();
        assert_eq!(again.identity(), model().identity());
        assert_eq!(again.embed_batch(&texts).unwrap(), batch);
        assert!(model().embed_batch(&[]).unwrap().is_empty());
    }

    #[test]
    fn empty_and_whitespace_texts_give_zeros() {
        for t in ["", " ", "\n\t  "] {
            let v = embed(t);
            assert_eq!(v.len(), 64);
            assert!(v.iter().all(|x| *x == 0.0), "{t:?} -> {v:?}");
        }
    }

    #[test]
    fn missing_dir_is_a_backend_error_naming_the_path() {
        let dir = Path::new("/nonexistent/memgym-models/potion-base-2M");
        let msg = backend_message(PotionEmbedder::load(dir));
        assert!(msg.contains("/nonexistent/memgym-models/potion-base-2M"), "{msg}");
    }

    #[test]
    fn missing_file_is_a_backend_error_naming_the_file() {
        let tmp = copy_model();
        let gone = tmp.path().join("tokenizer.json");
        std::fs::remove_file(&gone).unwrap();
        let msg = backend_message(PotionEmbedder::load(tmp.path()));
        assert!(msg.contains(&gone.display().to_string()), "{msg}");
    }

    #[test]
    fn corrupt_files_are_backend_errors() {
        for name in ["model.safetensors", "tokenizer.json", "config.json"] {
            let tmp = copy_model();
            std::fs::write(tmp.path().join(name), b"not a model").unwrap();
            let msg = backend_message(PotionEmbedder::load(tmp.path()));
            assert!(msg.contains(&tmp.path().display().to_string()), "{name}: {msg}");
        }
    }

    #[tokio::test]
    async fn works_behind_embed_service() {
        let e = PotionEmbedder::load(&PotionEmbedder::default_dir()).unwrap();
        let s = EmbedService::new(Arc::new(e), 2);
        assert_eq!(s.dim(), 64);
        let v = s.embed(vec!["Melanie paints sunsets".into(), String::new()]).await.unwrap();
        assert!((dot(&v[0], &v[0]) - 1.0).abs() < 1e-5);
        assert!(v[1].iter().all(|x| *x == 0.0));
    }
}
