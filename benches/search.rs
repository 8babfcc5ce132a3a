//! Search latency: the exact scan against its memory-bandwidth bound and against forced HNSW (and the
//! crossover the index planner's default comes from), the O(1) episode fork, and a search on an
//! edited episode.
//!
//! What it measures, and why (these numbers are quoted in the README's Performance section):
//!
//! - `bandwidth/...`: how fast this machine reads the exact scan's bytes, and how close the scan comes
//!   to that. Prints one line: `exact-scan bound at 3000×384 …: read bandwidth … → bound … µs; exact
//!   scan … µs; ratio …×; DRAM … GB/s` (see [`bandwidth`]). Measured on the 2-core VM: ~29 GB/s over
//!   the scan's 4.6 MB (LLC-resident), ~15 GB/s from DRAM; the scan within 1.0–1.2× of the bound.
//! - `search/{exact,hnsw}/{300,1000,2000,3000,5000,10000,20000,30000}`: one top-10 `EpisodeMemory::search` (no
//!   filter, no threshold) on an unedited episode over an M₀ of that size, 384-dim `HashEmbedder`
//!   vectors. The memories are real: the 2,541 LoCoMo observations (the first 300 of them for the
//!   smallest size), and above that the originals followed by deterministic two-fact combinations
//!   (`fact[i] + " " + fact[(i + 1 + 131·c) mod 2541]` for copy c ≥ 1) so that every vector differs
//!   and none is a near-duplicate of another. Each iteration asks the next of the 1,986 LoCoMo
//!   questions, embedded once. `IndexMode::Exact` never builds a graph; `IndexMode::Hnsw` always does
//!   (m 16, ef_construction 200, ef_search 64, the defaults). 1k–5k bracket the crossover.
//! - `crossover/{n}`: the same two searches, alternating blocks of questions so both see the same
//!   machine load; prints the medians and HNSW's recall@10 against the exact scan per size, and the
//!   interpolated crossover (see [`crossover`]). Measured: the exact scan is faster up to ≈ 2.4k–2.5k
//!   memories (three runs), HNSW above (2.2× faster at 10k). Banks' `--banks-full-scan-threshold`
//!   default, 2,000, is the largest probed size at which the exact scan was never slower; episodes keep
//!   20,000 (see `IndexConfig::full_scan_threshold`). (With hnsw_rs's own search, before
//!   `memory::graph`, the crossover was ≈ 21k–26k.)
//! - `vector/dot_384`: one 384-dim dot product (`vector::dot`), the unit of work of an HNSW
//!   search and of diverse sampling; `vector/dot_rows_300x384`: the exact scan's kernel
//!   (`vector::dot_rows`, four rows at a time) over 300 cache-resident rows, ~2.5× faster than
//!   300 separate `dot`s.
//! - `fork/{324,30000}`: `EpisodeMemory::new(Arc<BaseMemory>)`, what every `CreateEpisode` does. It
//!   must not depend on |M₀|.
//! - `search_edited/...`: top-10 search on an episode with 20 tombstoned M₀ memories and 10 added ones
//!   (the state of a mid-episode policy), against the same search on a clean fork: what tombstone
//!   checks and the scan of the additions cost. On conv-41 (324 memories, the exact path the planner
//!   picks at that size) and on the 3k HNSW base (where tombstones switch HNSW to its filtered search).
//!
//! Every M₀ is built once, lazily, outside the timing loop, the first time a benchmark that needs it
//! runs. HNSW graphs are built sequentially (deterministic, as the server builds them): on a 2-core VM
//! in release, ~0.1 s at 300, ~3 s at 3k and ~90 s at 30k, once per `cargo bench` run (the whole
//! `cargo bench --bench search` takes ~5 min, most of it building the 20k/25k/30k graphs), and far
//! slower unoptimised, so the graphs above 300 are built only under `cargo bench` (`--bench` without
//! `--test`). Under `cargo test --benches` (criterion's test mode, unoptimised) the benchmarks that
//! need them, and the exact 20k/25k ones, are skipped so test mode stays quick; every other
//! benchmark, the 30k exact base included, runs once (the 2 GiB DRAM read only under `cargo bench`).

mod common;

use std::cell::{OnceCell, RefCell};
use std::hint::black_box;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput};
use memgym::dataset::Dataset;
use memgym::embed::{EmbedService, HashEmbedder};
use memgym::episode::build_base;
use memgym::memory::{BaseMemory, EpisodeMemory, Filter, IndexConfig, IndexMode, MemoryId, MemoryRecord, MemoryType};
use memgym::util::vector::{dot, dot_rows};

const TOP_K: usize = 10;
/// M₀ sizes: the 300 / 3k / 30k, and 1k to 20k around the exact/HNSW crossover.
const SIZES: [usize; 8] = [300, 1_000, 2_000, 3_000, 5_000, 10_000, 20_000, 30_000];
const DIM: usize = 384;
/// The vectors of the 3k M₀: the bytes one exact scan at 3k reads.
const SCAN_FLOATS: usize = 3_000 * DIM;
/// 2 GiB, far more than the last-level cache (this VM reports 480 MiB; reads fall to DRAM speed from
/// ~48 MiB on), so every pass streams from DRAM.
const DRAM_FLOATS: usize = 512 << 20;

/// True under `cargo bench`; false under `cargo test --benches` (criterion's test mode).
fn bench_mode() -> bool {
    let args: Vec<String> = std::env::args().collect();
    args.iter().any(|a| a == "--bench") && !args.iter().any(|a| a == "--test")
}

/// Whether this run builds the M₀ of `n` memories in `mode`: every one under `cargo bench`; in test
/// mode the 300-memory graph and the exact M₀s of 300, 3k and 30k only (see the module doc).
fn affordable(n: usize, mode: IndexMode) -> bool {
    bench_mode()
        || match mode {
            IndexMode::Hnsw => n <= SIZES[0],
            IndexMode::Exact | IndexMode::Auto => [300, 3_000, 30_000].contains(&n),
        }
}

fn embed() -> &'static EmbedService {
    static E: OnceLock<EmbedService> = OnceLock::new();
    E.get_or_init(|| EmbedService::new(Arc::new(HashEmbedder::default()), 2))
}

fn dataset() -> &'static Dataset {
    static D: OnceLock<Dataset> = OnceLock::new();
    D.get_or_init(|| memgym::dataset::Dataset::load(None).expect("the embedded LoCoMo dataset loads"))
}

/// Every LoCoMo question, embedded (the query set).
fn queries() -> &'static [Vec<f32>] {
    static Q: OnceLock<Vec<Vec<f32>>> = OnceLock::new();
    Q.get_or_init(|| {
        let texts: Vec<&str> = dataset().questions.iter().map(|q| q.question.as_str()).collect();
        embed().embed_blocking(&texts).expect("questions embed")
    })
}

fn record(i: usize, text: String, speaker: &str, session: u32) -> MemoryRecord {
    MemoryRecord {
        id: MemoryId(i as u32),
        text,
        memory_type: MemoryType::Episodic,
        speaker: Some(speaker.to_string()),
        session: Some(session),
        session_date: None,
        evidence: Vec::new(),
        source: "bench".to_string(),
        created_step: 0,
        authored: false,
    }
}

/// `n` memories: the LoCoMo observations in dataset order, then two-fact combinations.
fn corpus(n: usize) -> Vec<MemoryRecord> {
    let rows = &dataset().memories;
    let m = rows.len();
    (0..n)
        .map(|idx| {
            let (c, i) = (idx / m, idx % m);
            let text = if c == 0 { rows[i].text.clone() } else { format!("{} {}", rows[i].text, rows[(i + 1 + 131 * c) % m].text) };
            record(idx, text, &rows[i].speaker, rows[i].session)
        })
        .collect()
}

fn build(n: usize, mode: IndexMode) -> Arc<BaseMemory> {
    let config = IndexConfig { mode, ..IndexConfig::default() };
    Arc::new(build_base(embed(), format!("bench-{n}"), corpus(n), &config).expect("hash embedding cannot fail"))
}

fn size_slot(n: usize) -> usize {
    SIZES.iter().position(|s| *s == n).expect("a benchmarked size")
}

/// The M₀ of `n` synthetic-from-LoCoMo memories in `mode`, built on first use.
fn base(n: usize, mode: IndexMode) -> Arc<BaseMemory> {
    static EXACT: [OnceLock<Arc<BaseMemory>>; SIZES.len()] = [const { OnceLock::new() }; SIZES.len()];
    static HNSW: [OnceLock<Arc<BaseMemory>>; SIZES.len()] = [const { OnceLock::new() }; SIZES.len()];
    let slots = if mode == IndexMode::Hnsw { &HNSW } else { &EXACT };
    slots[size_slot(n)].get_or_init(|| build(n, mode)).clone()
}

/// conv-41's real M₀ (324 memories, with provenance), in `Auto` mode as the server builds it.
fn conv41() -> Arc<BaseMemory> {
    static B: OnceLock<Arc<BaseMemory>> = OnceLock::new();
    B.get_or_init(|| {
        let records = dataset()
            .memories_of("conv-41")
            .iter()
            .enumerate()
            .map(|(i, m)| MemoryRecord { evidence: m.evidence.clone(), ..record(i, m.text.clone(), &m.speaker, m.session) })
            .collect();
        Arc::new(build_base(embed(), "conv-41".into(), records, &IndexConfig::default()).expect("embeds"))
    })
    .clone()
}

/// A fork of `base` with 20 tombstones (every 7th memory from 3) and 10 added memories.
fn edited(base: &Arc<BaseMemory>) -> EpisodeMemory {
    let mut mem = EpisodeMemory::new(base.clone());
    for j in 0..20 {
        mem.remove(MemoryId((3 + 7 * j) as u32)).expect("a live M₀ memory");
    }
    let rows = &dataset().memories;
    let texts: Vec<String> = (0..10).map(|j| format!("{} (revised)", rows[1_000 + 37 * j].text)).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    for (text, v) in texts.iter().zip(embed().embed_blocking(&refs).expect("embeds")) {
        let id = mem.allocate_id();
        mem.insert(MemoryRecord { created_step: 1, ..record(id.0 as usize, text.clone(), "bench", 1) }, &v);
    }
    mem
}

/// Times one top-10 search per iteration, cycling through the questions.
fn bench_search(b: &mut criterion::Bencher<'_>, mem: &EpisodeMemory) {
    let qs = queries();
    let mut i = 0usize;
    b.iter(|| {
        i = (i + 1) % qs.len();
        let (hits, path) = mem.search(black_box(&qs[i]), TOP_K, &Filter::default(), None);
        black_box((hits.len(), path))
    });
}

fn search(c: &mut Criterion) {
    let mut g = c.benchmark_group("search");
    for n in SIZES {
        for (name, mode) in [("exact", IndexMode::Exact), ("hnsw", IndexMode::Hnsw)] {
            if !affordable(n, mode) {
                continue;
            }
            g.bench_function(BenchmarkId::new(name, n), |b| {
                let mem = EpisodeMemory::new(base(n, mode));
                bench_search(b, &mem);
            });
        }
    }
    g.finish();
}

/// Sums `buf` with 32 independent lanes (eight 4-wide SSE2 vectors), so it is bound by how fast the
/// core can read, not by the latency of an add chain: the fastest way to touch every byte once. (A
/// build of it for AVX measured no faster here.)
fn read_sum(buf: &[f32]) -> f32 {
    let (chunks, rest) = buf.as_chunks::<32>();
    let mut acc = [0.0f32; 32];
    for c in chunks {
        for j in 0..32 {
            acc[j] += c[j];
        }
    }
    acc.iter().sum::<f32>() + rest.iter().sum::<f32>()
}

/// Median of `v` (0 when empty).
fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// Runs `f` once and returns how long it took; the result goes through `black_box`.
fn timed<T>(f: impl FnOnce() -> T) -> Duration {
    let start = Instant::now();
    black_box(f());
    start.elapsed()
}

/// Per-call times recorded inside criterion routines (warm-up included), for the printed summaries:
/// a routine that criterion's filter skips records nothing, and its summary is not printed.
#[derive(Default)]
struct Record(RefCell<Vec<f64>>);

impl Record {
    fn push(&self, d: Duration) -> Duration {
        self.0.borrow_mut().push(d.as_secs_f64());
        d
    }
    fn median(&self) -> Option<f64> {
        let v = self.0.borrow();
        (!v.is_empty()).then(|| median(&v))
    }
}

/// The memory-bandwidth bound of the exact scan at 3k × 384.
///
/// - `bandwidth/sum_3000x384`: [`read_sum`] over a buffer of exactly the scan's bytes (4.6 MB: more
///   than a core's L2, inside the LLC, where the 3k M₀ sits between queries), as throughput.
/// - `bandwidth/sum_dram_2GiB`: the same over 2 GiB, far more than the LLC: the DRAM figure (only
///   under `cargo bench`).
/// - `bandwidth/scan_3000_vs_sum`: each iteration times one read of the 4.6 MB buffer and then one
///   exact top-10 search on the 3k M₀ (the next question each time); criterion reports the scan.
///   Interleaved, so both see the same machine load. Then one printed line: the bandwidth (median of
///   the sums), bound = bytes / bandwidth, the scan's median and their ratio, and the DRAM figure.
fn bandwidth(c: &mut Criterion) {
    let scan_buf = vec![1.0f32; SCAN_FLOATS];
    let scan_bytes = (SCAN_FLOATS * 4) as f64;
    let dram_buf = OnceCell::new();
    let (sums, scans, dram) = (Record::default(), Record::default(), Record::default());
    let mut g = c.benchmark_group("bandwidth");
    g.throughput(Throughput::Bytes(scan_bytes as u64));
    g.bench_function("sum_3000x384", |b| b.iter(|| read_sum(black_box(&scan_buf))));
    g.bench_function("scan_3000_vs_sum", |b| {
        let mem = EpisodeMemory::new(base(3_000, IndexMode::Exact));
        let qs = queries();
        b.iter_custom(|iters| {
            (0..iters as usize)
                .map(|i| {
                    sums.push(timed(|| read_sum(black_box(&scan_buf))));
                    scans.push(timed(|| mem.search(black_box(&qs[i % qs.len()]), TOP_K, &Filter::default(), None).0.len()))
                })
                .sum()
        })
    });
    if bench_mode() {
        g.throughput(Throughput::Bytes((DRAM_FLOATS * 4) as u64)).sampling_mode(SamplingMode::Flat).sample_size(10);
        g.bench_function("sum_dram_2GiB", |b| {
            let buf = dram_buf.get_or_init(|| vec![1.0f32; DRAM_FLOATS]);
            b.iter_custom(|iters| (0..iters).map(|_| dram.push(timed(|| read_sum(black_box(buf))))).sum())
        });
    }
    g.finish();
    drop(dram_buf);
    // Test mode runs each routine once, unoptimised: no summary.
    if let (true, Some(sum_s), Some(scan_s)) = (bench_mode(), sums.median(), scans.median()) {
        let bw = scan_bytes / sum_s;
        let bound = scan_bytes / bw;
        let dram_note = dram
            .median()
            .map(|d| {
                format!(
                    "; DRAM {:.1} GB/s (bound if M₀ came from DRAM {:.0} µs)",
                    (DRAM_FLOATS * 4) as f64 / d / 1e9,
                    scan_bytes / ((DRAM_FLOATS * 4) as f64 / d) * 1e6
                )
            })
            .unwrap_or_default();
        println!(
            "exact-scan bound at 3000×384 ({:.2} MB): read bandwidth {:.1} GB/s → bound {:.0} µs; exact scan {:.0} µs; ratio {:.2}×{dram_note}",
            scan_bytes / 1e6,
            bw / 1e9,
            bound * 1e6,
            scan_s * 1e6,
            scan_s / bound
        );
    }
}

/// Questions per path in one `crossover` iteration.
const BLOCK: usize = 16;

/// `crossover/{n}`: each iteration asks the next [`BLOCK`] questions of the exact M₀ of `n` memories
/// and then the same questions of the HNSW one, timing every search; criterion reports the pair of
/// blocks. Alternating blocks lets both paths see the same machine load (the machine is shared) while
/// each runs warm, as the server runs one path per M₀; alternating single queries would instead make
/// the two M₀s and the graph evict each other from the LLC, which from ~20k memories on turns the
/// exact scan into a DRAM stream. Then a printed table of the two per-search medians per size and
/// the crossover: linear interpolation of exact − HNSW between the last size where the exact scan
/// wins and the first where HNSW does. The planner's `full_scan_threshold` default is set from it.
fn crossover(c: &mut Criterion) {
    let qs = queries();
    let mut g = c.benchmark_group("crossover");
    // An iteration is 2 × BLOCK searches (up to ~0.1 s at 30k): equal iterations per sample keep the
    // group within a few seconds per size.
    g.sampling_mode(SamplingMode::Flat).sample_size(10);
    let mut rows = Vec::new();
    for n in SIZES {
        if !affordable(n, IndexMode::Hnsw) {
            continue;
        }
        let (exact, hnsw) = (Record::default(), Record::default());
        g.bench_function(BenchmarkId::from_parameter(n), |b| {
            let (e, h) = (EpisodeMemory::new(base(n, IndexMode::Exact)), EpisodeMemory::new(base(n, IndexMode::Hnsw)));
            let mut next = 0usize;
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let block: Vec<&Vec<f32>> = (0..BLOCK).map(|j| &qs[(next + j) % qs.len()]).collect();
                    next = (next + BLOCK) % qs.len();
                    for (mem, rec) in [(&e, &exact), (&h, &hnsw)] {
                        for q in &block {
                            total += rec.push(timed(|| mem.search(black_box(q), TOP_K, &Filter::default(), None).0.len()));
                        }
                    }
                }
                total
            })
        });
        if let (Some(e), Some(h)) = (exact.median(), hnsw.median()) {
            rows.push((n, e, h, recall_at_10(n, qs)));
        }
    }
    g.finish();
    // Test mode runs each routine once, unoptimised: no summary.
    if rows.is_empty() || !bench_mode() {
        return;
    }
    for (n, e, h, r) in &rows {
        println!(
            "crossover probe at {n:>6}: exact {:>7.1} µs, hnsw {:>7.1} µs, exact/hnsw {:.2}, hnsw recall@10 {r:.3}",
            e * 1e6,
            h * 1e6,
            e / h
        );
    }
    let found = rows.windows(2).find(|w| w[0].1 <= w[0].2 && w[1].1 > w[1].2).map(|w| {
        let ((n0, e0, h0, _), (n1, e1, h1, _)) = (w[0], w[1]);
        let (d0, d1) = (e0 - h0, e1 - h1);
        n0 as f64 + (n1 - n0) as f64 * (-d0) / (d1 - d0)
    });
    match found {
        Some(x) => println!("crossover: the exact scan is faster up to ≈ {x:.0} memories, HNSW above"),
        None => println!("crossover: no single exact→HNSW switch among the probed sizes"),
    }
}

/// Recall@10 of the HNSW M₀ of `n` memories against its exact scan, over every question.
fn recall_at_10(n: usize, qs: &[Vec<f32>]) -> f64 {
    let (e, h) = (EpisodeMemory::new(base(n, IndexMode::Exact)), EpisodeMemory::new(base(n, IndexMode::Hnsw)));
    let (mut found, mut wanted) = (0usize, 0usize);
    for q in qs {
        let truth: Vec<MemoryId> = e.search(q, TOP_K, &Filter::default(), None).0.iter().map(|s| s.record.id).collect();
        found += h.search(q, TOP_K, &Filter::default(), None).0.iter().filter(|s| truth.contains(&s.record.id)).count();
        wanted += truth.len();
    }
    found as f64 / wanted.max(1) as f64
}

fn vector(c: &mut Criterion) {
    let mut g = c.benchmark_group("vector");
    g.bench_function("dot_384", |b| {
        let base = conv41();
        let (x, y) = (base.vector(0).to_vec(), base.vector(1).to_vec());
        b.iter(|| dot(black_box(&x), black_box(&y)));
    });
    // The exact scan's kernel on 300 rows (460 KB, cache-resident: compute, not memory, bound).
    g.bench_function("dot_rows_300x384", |b| {
        let m0 = base(300, IndexMode::Exact);
        let rows: Vec<f32> = (0..m0.len()).flat_map(|i| m0.vector(i).to_vec()).collect();
        let (q, mut out) = (queries()[0].clone(), vec![0.0f32; m0.len()]);
        b.iter(|| dot_rows(black_box(&q), black_box(&rows), DIM, &mut out))
    });
    g.finish();
}

fn fork(c: &mut Criterion) {
    let mut g = c.benchmark_group("fork");
    g.bench_function(BenchmarkId::from_parameter(324), |b| {
        let base = conv41();
        b.iter(|| EpisodeMemory::new(black_box(&base).clone()));
    });
    g.bench_function(BenchmarkId::from_parameter(30_000), |b| {
        let base = base(30_000, IndexMode::Exact);
        b.iter(|| EpisodeMemory::new(black_box(&base).clone()));
    });
    g.finish();
}

fn search_edited(c: &mut Criterion) {
    let mut g = c.benchmark_group("search_edited");
    g.bench_function("conv41_clean", |b| bench_search(b, &EpisodeMemory::new(conv41())));
    g.bench_function("conv41_20del_10add", |b| bench_search(b, &edited(&conv41())));
    if affordable(3_000, IndexMode::Hnsw) {
        g.bench_function("hnsw3000_clean", |b| bench_search(b, &EpisodeMemory::new(base(3_000, IndexMode::Hnsw))));
        g.bench_function("hnsw3000_20del_10add", |b| bench_search(b, &edited(&base(3_000, IndexMode::Hnsw))));
    }
    g.finish();
}

// `criterion_group!` defines an undocumented `pub fn`; keep the crate's `missing_docs` lint quiet about it.
#[allow(missing_docs)]
mod group {
    use super::*;

    criterion_group! {
        name = benches;
        config = common::criterion();
        targets = bandwidth, search, crossover, vector, fork, search_edited
    }
}
criterion_main!(group::benches);
