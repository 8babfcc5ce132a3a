//! `memgym bench banks`: the memory banks measured, on an in-process server on `127.0.0.1:0` with the
//! hash embedder and its banks in a temporary SQLite file (and PostgreSQL with `--postgres-url`).
//!
//! - **Retrieve over gRPC** at each `--sizes` (default 100, 10,000, 100,000 experiences): one caller
//!   for `--secs` seconds (p50/p99: latency), then `--clients` concurrent callers (calls/s and their
//!   p99), the search path, and at sizes where HNSW answers, recall@10 against the exact scan over
//!   `--recall-queries` queries (by score, as ann-benchmarks counts it, and by id). A bank with a graph is
//!   measured once its index is saved (the steady state). `--ef-sweep` measures the largest bank again at
//!   each of several search beams, each on a fresh server opening its saved index.
//! - **Load and open**: the import of each size (acknowledged once embedded and durable) and the time
//!   until its index is rebuilt in the background (retrieval is measured after that), and — for the
//!   largest — the open of the bank by a fresh server on the same file to its first Retrieve: on the
//!   index the first server saved, then with that file removed (the rows read and the graph built).
//! - **ApplyOperations** batches of 1, 10 and 100 adds, durable, one after another for `--secs`
//!   seconds each: latency and operations/s, on SQLite and on PostgreSQL.
//! - **Compression** at `--compress-sizes` (default 1,000 and 10,000 experiences), each of
//!   `--compress-strategies` as a dry run (the selection alone), timed alone and then again with one caller's
//!   Retrieves on the same bank meanwhile (a selection must not stall them; on two cores the caller also takes
//!   half the machine). A size that is also a Retrieve size reuses that bank.
//!
//! Texts are 12-word sentences from a seeded generator, so every run embeds the same library. Like a real
//! library, which holds many experiences about each of its tasks, they are clustered: each sentence
//! takes 8 words from one of 500 topics (40 words each) and 4 from the whole 2,000-word vocabulary;
//! queries are drawn the same way. (Uniformly random texts, whose hash embeddings are near-uniform on
//! the sphere, are the worst case for HNSW; no library looks like that.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::json;
use tonic::transport::Channel;

use super::hist::Hist;
use crate::api::pb;
use crate::api::pb::banks_client::BanksClient;
use crate::app::cli::BankBenchArgs;
use crate::banks::compress::Params;
use crate::banks::store::postgres::PostgresStore;
use crate::banks::store::sqlite::SqliteStore;
use crate::banks::store::BankStore;
use crate::banks::{Banks, BanksConfig};
use crate::util::vector::dot;

const WORDS: usize = 2_000;

fn vocabulary() -> Vec<String> {
    const SYL: [&str; 20] =
        ["ka", "lo", "mi", "ne", "ru", "ta", "vi", "so", "pe", "da", "gu", "fe", "zo", "bi", "ha", "ju", "we", "xi", "ya", "qo"];
    (0..WORDS).map(|i| format!("{}{}{}", SYL[i % 20], SYL[(i / 20) % 20], SYL[(i / 400) % 20])).collect()
}

const TOPICS: usize = 500;
const TOPIC_WORDS: usize = 40;

fn sentence(rng: &mut ChaCha8Rng, words: &[String]) -> String {
    let topic = rng.random_range(0..TOPICS);
    // The topic's words: a fixed pseudo-random subset of the vocabulary.
    let topic_word = |j: usize| &words[(topic * 7_919 + j * 104_729) % words.len()];
    let mut out: Vec<&str> = (0..8).map(|_| topic_word(rng.random_range(0..TOPIC_WORDS)).as_str()).collect();
    out.extend((0..4).map(|_| words[rng.random_range(0..words.len())].as_str()));
    out.join(" ")
}

/// The upstream per-step file of `n` generated experiences.
fn library(n: usize, seed: u64, words: &[String]) -> String {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let members: Vec<String> = (0..n).map(|i| format!("\"G{i}\": {}", json!(sentence(&mut rng, words)))).collect();
    format!("{{{}}}", members.join(", "))
}

/// The banks' settings the flags describe.
fn banks_config(env: &crate::episode::Environment, a: &BankBenchArgs) -> BanksConfig {
    let index = crate::app::config::banks_index(&a.index, &env.config().index);
    let mut config = BanksConfig { index, ..BanksConfig::default() };
    config.limits.max_experiences = a.max_experiences;
    config
}

async fn banks_on(store: Arc<dyn BankStore>, env: &crate::episode::Environment, a: &BankBenchArgs) -> Arc<Banks> {
    Arc::new(Banks::new(store, env.embedder().clone(), None, banks_config(env, a)))
}

/// A store under measurement: its name, a client of its server, and the server (for PostgreSQL).
type Target = (&'static str, BanksClient<Channel>, Option<(crate::app::server::Running, Arc<Banks>)>);

/// Retrieval over gRPC for `secs` with `clients` callers.
async fn retrieve_load(
    client: &BanksClient<Channel>,
    bank: &str,
    clients: usize,
    secs: f64,
    words: &[String],
) -> anyhow::Result<(Hist, f64, String)> {
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let mut tasks = Vec::new();
    for c in 0..clients {
        let mut client = client.clone();
        let bank = bank.to_string();
        let words = words.to_vec();
        tasks.push(tokio::spawn(async move {
            let mut rng = ChaCha8Rng::seed_from_u64(1_000 + c as u64);
            let mut hist = Hist::default();
            let mut path = String::new();
            while Instant::now() < deadline {
                let q = sentence(&mut rng, &words);
                let t = Instant::now();
                let r = client.retrieve(pb::RetrieveRequest { bank: bank.clone(), query: q, top_k: 10, ..Default::default() }).await?;
                hist.record(t.elapsed());
                path = r.into_inner().path;
            }
            anyhow::Ok((hist, path))
        }));
    }
    let start = Instant::now();
    let mut all = Hist::default();
    let mut path = String::new();
    for t in tasks {
        let (h, p) = t.await??;
        all.merge(&h);
        path = p;
    }
    let rate = all.len() as f64 / start.elapsed().as_secs_f64();
    Ok((all, rate, path))
}

/// How long the bench waits for a graph to be built or saved before it gives up. A 1,000,000-experience graph
/// takes 47–50 minutes on two quiet cores (`ef_construction` 200); with anything else on the machine it took
/// over an hour (run 12 gave up at 60 minutes with 15 % of its inserts left), so three hours.
const BUILD_LIMIT: Duration = Duration::from_secs(3 * 3_600);

/// One poll of a wait for something built or saved in the background: fails once [`BUILD_LIMIT`] has passed
/// since `since` (`not_done` says what was not done within it), else sleeps 100 ms.
async fn poll_within_limit(since: Instant, not_done: impl FnOnce() -> String) -> anyhow::Result<()> {
    anyhow::ensure!(since.elapsed() < BUILD_LIMIT, "{} within {} hours", not_done(), BUILD_LIMIT.as_secs() / 3_600);
    tokio::time::sleep(Duration::from_millis(100)).await;
    Ok(())
}

/// Waits until the index of a bank imported at `since` is rebuilt in the background (its overlay folded in).
async fn settle(banks: &Banks, name: &str, since: Instant) -> anyhow::Result<()> {
    while banks.read(name, |lib| lib.overlay()).await? > 1_024 {
        poll_within_limit(since, || format!("the index of {name} was not rebuilt")).await?;
    }
    Ok(())
}

/// Imports `data` as bank `name` over gRPC: one ImportBank message, or ImportBankStream in 4 MiB chunks when
/// it is over one message (32 MiB, about 300,000 of these experiences).
async fn import(client: &mut BanksClient<Channel>, name: &str, data: String) -> anyhow::Result<()> {
    if data.len() < crate::api::MAX_MESSAGE_BYTES - (1 << 20) {
        let format = pb::BankFormat::UpstreamJson as i32;
        client.import_bank(pb::ImportBankRequest { bank: name.to_string(), format, data, ..Default::default() }).await?;
    } else {
        println!("  (the {name} file is over one gRPC message: streamed)");
        let chunks = crate::api::grpc::import_chunks(name, pb::BankFormat::UpstreamJson, data.as_bytes(), 4 << 20);
        drop(data);
        client.import_bank_stream(futures_util::stream::iter(chunks)).await?;
    }
    Ok(())
}

/// One caller's Retrieves, back to back until `stop` (at least one): how a bank answers while something
/// else runs on it.
async fn retrieve_until(
    mut client: BanksClient<Channel>,
    bank: String,
    stop: Arc<std::sync::atomic::AtomicBool>,
    words: Vec<String>,
) -> anyhow::Result<Hist> {
    let mut rng = ChaCha8Rng::seed_from_u64(77);
    let mut hist = Hist::default();
    loop {
        let query = sentence(&mut rng, &words);
        let t = Instant::now();
        client.retrieve(pb::RetrieveRequest { bank: bank.clone(), query, top_k: 10, ..Default::default() }).await?;
        hist.record(t.elapsed());
        if stop.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(hist);
        }
    }
}

/// Recall@10 of the bank's search against an exact scan of its vectors, two ways: `.0` by id (a hit is
/// one of the exact top 10's ids), `.1` by score as ann-benchmarks counts it (a hit is any returned
/// experience that scores at least the exact 10th, less 1e-6). They differ only where experiences tie
/// at the 10th place, which the hashed embedder's vectors (sums of a few signed weights) allow; in the
/// runs the Banks chapter gives, the two were equal.
async fn recall_at_10(banks: &Banks, bank: &str, queries: usize, words: &[String]) -> anyhow::Result<(f64, f64)> {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let texts: Vec<String> = (0..queries).map(|_| sentence(&mut rng, words)).collect();
    let vectors = banks.embedder().embed(texts).await?;
    let (mut by_id, mut by_score, mut total) = (0usize, 0usize, 0usize);
    for q in &vectors {
        let (found, exact) = banks
            .read(bank, |lib| {
                let (hits, _) = lib.retrieve(q, 10, None, None, false);
                let mut all: Vec<(f32, u64)> = lib.iter().filter_map(|e| lib.vector(e.id).map(|v| (dot(q, &v), e.id))).collect();
                all.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
                all.truncate(10);
                (hits.iter().map(|h| (h.similarity, h.exp.id)).collect::<Vec<_>>(), all)
            })
            .await?;
        let tenth = exact.last().map_or(f32::NEG_INFINITY, |x| x.0);
        by_id += exact.iter().filter(|(_, id)| found.iter().any(|f| f.1 == *id)).count();
        by_score += found.iter().filter(|(s, _)| *s >= tenth - 1e-6).count().min(exact.len());
        total += exact.len();
    }
    let of = |hits: usize| hits as f64 / total.max(1) as f64;
    Ok((of(by_id), of(by_score)))
}

/// ApplyOperations batches of `n` adds, back to back, for `secs`, or until the next batch would put the bank
/// over `room` more experiences (a share of `--max-experiences`: a fast machine could otherwise write past
/// the cap within `secs`, and the cap would refuse the batch; seen with a cap of 3,050). Returns the
/// latencies and the rate.
async fn apply_load(
    client: &mut BanksClient<Channel>,
    bank: &str,
    n: usize,
    secs: f64,
    words: &[String],
    room: usize,
) -> anyhow::Result<(Hist, f64)> {
    let mut rng = ChaCha8Rng::seed_from_u64(n as u64);
    let mut hist = Hist::default();
    let start = Instant::now();
    let mut ops = 0usize;
    while start.elapsed().as_secs_f64() < secs && ops + n <= room {
        let batch: Vec<serde_json::Value> = (0..n).map(|_| json!({"option": "add", "experience": sentence(&mut rng, words)})).collect();
        let t = Instant::now();
        client
            .apply_operations(pb::ApplyOperationsRequest {
                bank: bank.into(),
                operations_json: json!(batch).to_string(),
                ..Default::default()
            })
            .await?;
        hist.record(t.elapsed());
        ops += n;
    }
    Ok((hist, ops as f64 / start.elapsed().as_secs_f64()))
}

/// The open of bank `name` by a fresh server on the same file, to its first correct Retrieve: on the
/// saved index (once the first server has saved it), then with no saved index (the exact scan answers
/// while the graph builds in the background; when it is swapped in is reported too). Returns the JSON row.
async fn open_times(
    store: &Arc<dyn BankStore>,
    sqlite: &SqliteStore,
    env: &crate::episode::Environment,
    a: &BankBenchArgs,
    name: &str,
    words: &[String],
) -> anyhow::Result<serde_json::Value> {
    index_saved(store.as_ref(), name).await?;
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let query = sentence(&mut rng, words);
    let mut row = serde_json::Map::new();
    let opens: &[(&str, bool)] =
        if a.no_open_without_saved { &[("saved_index", false)] } else { &[("saved_index", false), ("without_saved_index", true)] };
    for &(label, remove) in opens {
        if remove {
            std::fs::remove_file(sqlite.index_file(name)).context("removing the saved index")?;
        }
        let rss_before = super::probe::Probe::this_process().rss_bytes();
        let fresh = banks_on(Arc::clone(store), env, a).await;
        let t = Instant::now();
        let q = crate::banks::semantic::Query { text: &query, top_k: 10, min_similarity: None, domain: None, count: false };
        let hits = fresh.retrieve(name, q).await?.0.len();
        let open = t.elapsed();
        let (size, origin) = fresh.read(name, |lib| (lib.len(), lib.origin())).await?;
        anyhow::ensure!(hits == 10, "the first Retrieve returned {hits} hits");
        let rss_added = rss_added_since(rss_before);
        println!(
            "open of {size} experiences by a fresh server to its first Retrieve ({origin:?}): {:.2} s, {} MiB of RSS added",
            open.as_secs_f64(),
            mib_or_na(rss_added)
        );
        // Without a saved index the graph builds in the background: report when it is swapped in.
        let mut graph_ready = None;
        if origin == crate::banks::IndexOrigin::Pending {
            while fresh.read(name, |lib| lib.origin()).await? == crate::banks::IndexOrigin::Pending {
                poll_within_limit(t, || format!("bank {name}'s graph was not built")).await?;
            }
            graph_ready = Some(t.elapsed().as_secs_f64());
            println!("  its graph, built in the background meanwhile, answered from {:.1} s", t.elapsed().as_secs_f64());
        }
        row.insert("size".into(), size.into());
        row.insert(label.into(), json!({"seconds": open.as_secs_f64(), "origin": format!("{origin:?}"), "graph_ready_s": graph_ready, "rss_added_mib": rss_added}));
    }
    Ok(row.into())
}

/// Retrieve on bank `name` at each `--ef-sweep` search beam, each on a fresh server that opens the bank's
/// saved index with that beam (the first server's index is not changed): p50/p99 with one caller and
/// recall@10. Returns the JSON rows.
async fn ef_sweep(
    store: &Arc<dyn BankStore>,
    env: &Arc<crate::episode::Environment>,
    a: &BankBenchArgs,
    name: &str,
    words: &[String],
) -> anyhow::Result<Vec<serde_json::Value>> {
    if a.ef_sweep.is_empty() {
        return Ok(Vec::new());
    }
    println!("\nRetrieve on the {name} bank's saved index at each search beam (a fresh server each; one caller)");
    println!("{:>9} {:>9} {:>9} {:>10} {:>6} {:>10}", "ef", "p50 ms", "p99 ms", "recall@10", "by id", "huge MiB");
    let mut rows = Vec::new();
    for &ef in &a.ef_sweep {
        let mut config = banks_config(env, a);
        config.index.hnsw_ef_search = crate::memory::SearchBeam::Fixed(ef);
        let probe = super::probe::Probe::this_process();
        let huge_before = probe.anon_huge_bytes();
        let banks = Arc::new(Banks::new(Arc::clone(store), env.embedder().clone(), None, config));
        // Its own environment: stopping a server drains its environment, which the first server still serves.
        let own = crate::app::config::build_environment(&a.env)?;
        let running = crate::app::server::spawn_with(own, Some(Arc::clone(&banks)), "127.0.0.1:0".parse()?).await?;
        let client = BanksClient::new(Channel::from_shared(format!("http://{}", running.addr))?.connect().await?);
        let origin = banks.read(name, |lib| lib.origin()).await?;
        anyhow::ensure!(
            matches!(origin, crate::banks::IndexOrigin::Saved { .. }),
            "the sweep's server did not open {name} on its saved index ({origin:?})"
        );
        // What this server's open put on huge pages (`--banks-no-huge-pages` asks for none; the kernel may still
        // give them where the allocator reuses memory a bank that asked for them freed).
        let huge_added = probe.anon_huge_bytes().zip(huge_before).map(|(a, b)| a.saturating_sub(b) as f64 / 1_048_576.0);
        let (hist, _, path) = retrieve_load(&client, name, 1, a.secs, words).await?;
        let (by_id, by_score) = recall_at_10(&banks, name, a.recall_queries, words).await?;
        println!(
            "{ef:>9} {:>9.3} {:>9.3} {by_score:>10.3} {by_id:>6.3} {:>10}",
            hist.pct_ms(50.0),
            hist.pct_ms(99.0),
            mib_or_na(huge_added)
        );
        rows.push(json!({"ef_search": ef, "huge_pages_mib_added": huge_added, "path": path,
                         "p50_ms": hist.pct_ms(50.0), "p99_ms": hist.pct_ms(99.0), "recall_at_10": by_score, "recall_at_10_by_id": by_id}));
        running.stop().await?;
    }
    Ok(rows)
}

/// What this process's RSS grew by since it was `before`, in MiB: what a fresh open added (the bank held a
/// second time, plus what the allocator kept of the rows read), the server's memory for the bank from above.
fn rss_added_since(before: Option<u64>) -> Option<f64> {
    super::probe::Probe::this_process().rss_bytes().zip(before).map(|(after, before)| after.saturating_sub(before) as f64 / 1_048_576.0)
}

fn mib_or_na(m: Option<f64>) -> String {
    m.map_or("n/a".to_string(), |m| format!("{m:.0}"))
}

/// Waits until `store` holds a saved index of bank `name` at its current version.
async fn index_saved(store: &dyn BankStore, name: &str) -> anyhow::Result<()> {
    let meta = store.meta(name).await?.context("the bank exists")?;
    let saved_at = Instant::now();
    loop {
        let saved = store.index(name).await?.map(|b| crate::banks::saved_index::decode(&b, &meta).map(|s| s.version));
        if matches!(saved, Some(Ok(v)) if v == meta.version) {
            return Ok(());
        }
        poll_within_limit(saved_at, || format!("bank {name}'s index was not saved")).await?;
    }
}

/// A bank shared through PostgreSQL: one server (the writer) imports `n` experiences, and once it has saved
/// the bank's index to the database, a replica that starts afterwards opens the bank to its first Retrieve,
/// which must equal the writer's. Then the writer adds experiences and the replica's next Retrieve sees
/// them (caught up from the change log, over the index it holds). Returns the JSON row.
async fn replica_open(
    url: &str,
    env: &crate::episode::Environment,
    a: &BankBenchArgs,
    n: usize,
    words: &[String],
) -> anyhow::Result<serde_json::Value> {
    let name = format!("replica-{n}-{}", std::process::id());
    let writer_store: Arc<dyn BankStore> = Arc::new(PostgresStore::connect(url).await?);
    let writer = banks_on(Arc::clone(&writer_store), env, a).await;
    let t = Instant::now();
    writer.import(&name, crate::banks::formats::Format::Upstream, &library(n, n as u64 + 1, words), false, None).await?;
    let import = t.elapsed();
    index_saved(writer_store.as_ref(), &name).await?;
    let saved = t.elapsed();
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let query = sentence(&mut rng, words);
    let q = || crate::banks::semantic::Query { text: &query, top_k: 10, min_similarity: None, domain: None, count: false };
    let ids = |hits: Vec<crate::banks::library::Hit>| hits.into_iter().map(|h| h.exp.id).collect::<Vec<_>>();
    let want = ids(writer.retrieve(&name, q()).await?.0);

    let rss_before = super::probe::Probe::this_process().rss_bytes();
    let replica = banks_on(Arc::new(PostgresStore::connect(url).await?), env, a).await;
    let t = Instant::now();
    let got = ids(replica.retrieve(&name, q()).await?.0);
    let open = t.elapsed();
    let origin = replica.read(&name, |lib| lib.origin()).await?;
    let rss_added = rss_added_since(rss_before);
    anyhow::ensure!(got.len() == 10 && got == want, "the replica's first Retrieve differs from the writer's");

    // The writer's change, seen by the replica's next Retrieve: the query's own text (the new top hit) and
    // 99 more, each a durable write. A bank at the cap (1,000,000 by default) first loses as many experiences
    // as the adds would put over it (one delete each, none of the first Retrieve's hits), so the replica catches
    // up on tombstones too.
    let added = 100;
    let cap = writer.config().limits.max_experiences;
    let deleted = (n + added).saturating_sub(cap);
    let doomed: Vec<u64> =
        writer.read(&name, |lib| lib.iter().map(|e| e.id).filter(|id| !got.contains(id)).take(deleted).collect()).await?;
    for id in &doomed {
        writer.delete_experience(&name, &crate::banks::library::show_id(*id), None).await?;
    }
    for i in 0..added {
        let text = if i == 0 { query.clone() } else { sentence(&mut rng, words) };
        writer.add(&name, &text, crate::banks::experience::NewFields::default(), None).await?;
    }
    let t = Instant::now();
    let after = ids(replica.retrieve(&name, q()).await?.0);
    let catch_up = t.elapsed();
    let (size, want_after) = (replica.read(&name, |lib| lib.len()).await?, ids(writer.retrieve(&name, q()).await?.0));
    anyhow::ensure!(size == n + added - deleted && after == want_after && after != got, "the replica did not see the writer's change");
    writer.delete(&name, None).await?;
    println!(
        "PostgreSQL replica: {n} experiences imported by the writer in {:.1} s, its index saved at {:.1} s; a replica started \
         then opened the bank to its first Retrieve ({origin:?}) in {:.2} s, {} MiB of RSS added; after the writer deleted \
         {deleted} and added {added}, the replica's next Retrieve took {:.3} s and saw the change",
        import.as_secs_f64(),
        saved.as_secs_f64(),
        open.as_secs_f64(),
        mib_or_na(rss_added),
        catch_up.as_secs_f64()
    );
    Ok(json!({"size": n, "import_s": import.as_secs_f64(), "index_saved_s": saved.as_secs_f64(), "replica_open_s": open.as_secs_f64(),
              "origin": format!("{origin:?}"), "rss_added_mib": rss_added, "deleted": deleted, "added": added,
              "catch_up_s": catch_up.as_secs_f64()}))
}

/// A directory removed when this goes out of scope.
struct RemoveOnDrop(std::path::PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs the measurements and prints the table (and JSON).
pub async fn run(a: BankBenchArgs) -> anyhow::Result<()> {
    let env = crate::app::config::build_environment(&a.env)?;
    let words = vocabulary();
    let dir = std::env::temp_dir().join(format!("memgym-bench-banks-{}", std::process::id()));
    // Removed however the run ends (a 1,000,000-experience run leaves 9 GB): on success, and on an error.
    let _removed = RemoveOnDrop(dir.clone());
    let sqlite = Arc::new(SqliteStore::open(&dir).with_context(|| format!("banks in {}", dir.display()))?);
    let store: Arc<dyn BankStore> = Arc::clone(&sqlite) as Arc<dyn BankStore>;
    let banks = banks_on(Arc::clone(&store), &env, &a).await;
    let running = crate::app::server::spawn_with(env.clone(), Some(Arc::clone(&banks)), "127.0.0.1:0".parse()?).await?;
    let channel = Channel::from_shared(format!("http://{}", running.addr))?.connect().await?;
    let mut client = BanksClient::new(channel.clone()).max_decoding_message_size(64 << 20).max_encoding_message_size(64 << 20);
    let (mut retrieve_rows, mut apply_rows, mut compress_rows, mut open_row) = (Vec::new(), Vec::new(), Vec::new(), json!(null));
    println!("memgym bench banks — embedder {}, {} s per measurement", env.embedder().identity(), a.secs);

    println!("\nRetrieve over gRPC (top_k 10, usage counted): latency with one caller, throughput with {}", a.clients);
    println!(
        "{:>9} {:>10} {:>10} {:>8} {:>9} {:>9} {:>10} {:>11} {:>10} {:>6}",
        "size", "import s", "index s", "path", "p50 ms", "p99 ms", "calls/s", "p99 ms (n)", "recall@10", "by id"
    );
    let mut largest = None;
    for &n in &a.sizes {
        let name = format!("retrieve-{n}");
        let data = library(n, n as u64, &words);
        let t = Instant::now();
        import(&mut client, &name, data).await?;
        let load = t.elapsed();
        // A large import is acknowledged once durable; its index is rebuilt in the background. Measure
        // retrieval once that is done (the steady state), and report when it was.
        settle(&banks, &name, t).await?;
        let ready = t.elapsed();
        // A bank with a graph then saves it (about 140 MB at 1,000,000, encoded and written with an fsync in
        // about a second, on the same two cores): measured after that, in the steady state.
        let saved = if banks.config().index.wants_graph(n) {
            index_saved(store.as_ref(), &name).await?;
            Some(t.elapsed().as_secs_f64())
        } else {
            None
        };
        let (hist, _, path) = retrieve_load(&client, &name, 1, a.secs, &words).await?;
        let (loaded, rate, _) = retrieve_load(&client, &name, a.clients, a.secs, &words).await?;
        let recall = if path == "hnsw" { Some(recall_at_10(&banks, &name, a.recall_queries, &words).await?) } else { None };
        // The beam the graph searches used (the automatic one grows with the bank).
        let beam = (path == "hnsw").then(|| banks.config().index.hnsw_ef_search.for_nodes(n));
        println!(
            "{n:>9} {:>10.2} {:>10.2} {path:>8} {:>9.3} {:>9.3} {rate:>10.0} {:>11.3} {:>10} {:>6}",
            load.as_secs_f64(),
            ready.as_secs_f64(),
            hist.pct_ms(50.0),
            hist.pct_ms(99.0),
            loaded.pct_ms(99.0),
            recall.map_or("exact".to_string(), |r| format!("{:.3}", r.1)),
            recall.map_or("exact".to_string(), |r| format!("{:.3}", r.0))
        );
        retrieve_rows.push(json!({"size": n, "import_s": load.as_secs_f64(), "index_ready_s": ready.as_secs_f64(), "index_saved_s": saved, "path": path, "ef_search": beam,
                                  "p50_ms": hist.pct_ms(50.0), "p99_ms": hist.pct_ms(99.0), "callers": a.clients, "calls_per_s": rate,
                                  "p99_ms_loaded": loaded.pct_ms(99.0), "recall_at_10": recall.map(|r| r.1), "recall_at_10_by_id": recall.map(|r| r.0)}));
        largest = Some((name, path == "hnsw"));
    }
    // A bank under the full-scan threshold has no graph, so no index is saved to open on.
    let indexed = largest.as_ref().is_some_and(|l| l.1);
    let mut sweep_rows = Vec::new();
    match &largest {
        Some((name, true)) => {
            sweep_rows = ef_sweep(&store, &env, &a, name, &words).await?;
            open_row = open_times(&store, &sqlite, &env, &a, name, &words).await?;
        }
        Some((_, false)) => println!("(opens not measured: the largest bank is under the full-scan threshold, so it saves no index)"),
        None => {}
    }

    let mut targets: Vec<Target> = vec![("sqlite", client.clone(), None)];
    if let Some(url) = &a.postgres_url {
        let pg: Arc<dyn BankStore> = Arc::new(PostgresStore::connect(url).await?);
        let pg_banks = banks_on(pg, &env, &a).await;
        let r = crate::app::server::spawn_with(env.clone(), Some(Arc::clone(&pg_banks)), "127.0.0.1:0".parse()?).await?;
        let c = BanksClient::new(Channel::from_shared(format!("http://{}", r.addr))?.connect().await?);
        targets.push(("postgres", c, Some((r, pg_banks))));
    }
    println!("\nApplyOperations, durable, batches of adds back to back");
    println!("{:>9} {:>6} {:>9} {:>9} {:>10}", "store", "ops", "p50 ms", "p99 ms", "ops/s");
    for (store_name, c, pg) in &mut targets {
        let bank = format!("apply-{}-{}", store_name, std::process::id());
        c.create_bank(pb::CreateBankRequest { name: bank.clone(), if_not_exists: true, ..Default::default() }).await?;
        // Each batch size may fill a third of the cap.
        let room = a.max_experiences / 3;
        for n in [1usize, 10, 100] {
            anyhow::ensure!(room >= n, "--max-experiences {} leaves no room for three runs of batches of {n} adds", a.max_experiences);
            let (hist, rate) = apply_load(c, &bank, n, a.secs, &words, room).await?;
            println!("{store_name:>9} {n:>6} {:>9.3} {:>9.3} {rate:>10.0}", hist.pct_ms(50.0), hist.pct_ms(99.0));
            apply_rows
                .push(json!({"store": store_name, "ops": n, "p50_ms": hist.pct_ms(50.0), "p99_ms": hist.pct_ms(99.0), "ops_per_s": rate}));
        }
        // The writes' last background rebuild (of 100,000 and more experiences: minutes on both cores) runs on
        // whether the bank is deleted or not: let it end, or it shares the cores with the measurements below.
        let owner = pg.as_ref().map_or(&banks, |(_, b)| b);
        let t = Instant::now();
        while owner.read(&bank, |lib| lib.rebuilding()).await? {
            poll_within_limit(t, || format!("the index of {bank} was not rebuilt")).await?;
        }
        println!("{store_name:>9} (its last index rebuild ended {:.1} s after the writes)", t.elapsed().as_secs_f64());
        c.delete_bank(pb::DeleteBankRequest { name: bank, expected_version: None }).await?;
    }

    println!(
        "\nCompression (dry run: the selection alone), timed alone and with one Retrieve caller meanwhile (its calls, p99 and slowest)"
    );
    println!("{:>9} {:>11} {:>10} {:>12} {:>8} {:>9} {:>9}", "size", "strategy", "alone s", "w/ caller s", "calls", "p99 ms", "max ms");
    for &n in &a.compress_sizes {
        // A bank of the Retrieve sizes is there already (compression is a dry run: it changes nothing).
        let name = if a.sizes.contains(&n) {
            format!("retrieve-{n}")
        } else {
            let name = format!("compress-{n}");
            let t = Instant::now();
            import(&mut client, &name, library(n, 99, &words)).await?;
            // Diversity, hybrid and MergeSimilar over a large bank read its graph: wait for it.
            settle(&banks, &name, t).await?;
            name
        };
        for &s in &a.compress_strategies {
            let keep = Some((n / 10) as u32);
            let t = Instant::now();
            banks.compress(&name, keep, s, Params::default(), true, None).await?;
            let alone = t.elapsed().as_secs_f64();
            let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let prober = tokio::spawn(retrieve_until(client.clone(), name.clone(), Arc::clone(&stop), words.clone()));
            let t = Instant::now();
            let selected = banks.compress(&name, keep, s, Params::default(), true, None).await;
            let secs = t.elapsed().as_secs_f64();
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
            let during = prober.await??;
            selected?;
            println!(
                "{n:>9} {:>11} {alone:>10.3} {secs:>12.3} {:>8} {:>9.3} {:>9.3}",
                s.as_str(),
                during.len(),
                during.pct_ms(99.0),
                during.pct_ms(100.0)
            );
            compress_rows.push(json!({"size": n, "strategy": s.as_str(), "keep": n / 10, "seconds_alone": alone, "seconds": secs,
                                      "retrieve_calls_during": during.len(), "retrieve_p99_ms_during": during.pct_ms(99.0),
                                      "retrieve_max_ms_during": during.pct_ms(100.0)}));
        }
    }
    // Last: at 1,000,000 the writer's import and index take half an hour, and every table above is printed.
    let mut replica_row = json!(null);
    if let (Some(url), Some(n)) = (&a.postgres_url, a.replica_size.or(a.sizes.iter().max().copied())) {
        // A bank searched by its graph saves an index; one the planner scans exactly has none.
        if a.replica_size.map_or(indexed, |n| banks.config().index.wants_graph(n)) {
            replica_row = replica_open(url, &env, &a, n, &words).await?;
        } else {
            println!("(the replica's open not measured: {n} experiences are under the full-scan threshold, so no index is saved)");
        }
    }
    if a.json {
        let out = json!({"embedder": env.embedder().identity().to_string(), "retrieve": retrieve_rows, "ef_sweep": sweep_rows, "open": open_row, "replica_open": replica_row,
                         "apply": apply_rows, "compress": compress_rows});
        println!("{out}");
    }
    for (_, _, pg) in targets {
        if let Some((r, _)) = pg {
            r.stop().await?;
        }
    }
    running.stop().await?;
    drop(banks);
    drop(store);
    Ok(())
}
