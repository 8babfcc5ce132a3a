//! `memgym eval retrieval`: evidence recall@k and MRR of each retriever on LoCoMo.
//!
//! For every question (optionally one split), the conversation's M₀ is ranked by the retriever; a
//! memory is relevant when its evidence ids intersect the question's. recall@k is the share of the
//! question's evidence ids covered by the provenance of the top k (questions without evidence are
//! skipped); MRR is the mean of 1 / rank of the first relevant memory (0 if none). Throughput is the
//! embedder alone: sentences per second embedding the M₀ texts in batches of 32, one batch per core.

use std::collections::HashSet;
use std::time::Instant;

use super::bm25::{rank_by, rrf, Bm25, RRF_K};
use crate::dataset::{Dataset, Split};
use crate::embed::{EmbedError, EmbedService};
use crate::util::vector::dot;

/// One row of the report.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Row {
    /// Retriever name ("bm25", an embedder name, or "hybrid(bm25+NAME)").
    pub retriever: String,
    /// Category 1..5, 0 for categories 1–4 (what `CreateEpisode` serves by default), `None` for all.
    pub category: Option<u8>,
    /// Questions counted.
    pub questions: usize,
    /// Evidence recall@1.
    pub recall_at_1: f64,
    /// Evidence recall@5.
    pub recall_at_5: f64,
    /// Evidence recall@10.
    pub recall_at_10: f64,
    /// Mean reciprocal rank of the first relevant memory.
    pub mrr: f64,
    /// Embedding throughput (sentences/s, batch 32), for dense retrievers.
    pub sentences_per_s: Option<f64>,
}

#[derive(Debug, Default, Clone)]
struct Acc {
    n: usize,
    r: [f64; 3],
    rr: f64,
}

impl Acc {
    fn add(&mut self, evidence: &HashSet<&str>, ranking: &[usize], provenance: &[Vec<String>]) {
        let covered = |k: usize| {
            let got: HashSet<&str> = ranking.iter().take(k).flat_map(|i| provenance[*i].iter().map(String::as_str)).collect();
            evidence.iter().filter(|e| got.contains(*e)).count() as f64 / evidence.len() as f64
        };
        self.n += 1;
        self.r[0] += covered(1);
        self.r[1] += covered(5);
        self.r[2] += covered(10);
        if let Some(pos) = ranking.iter().position(|i| provenance[*i].iter().any(|e| evidence.contains(e.as_str()))) {
            self.rr += 1.0 / (pos as f64 + 1.0);
        }
    }

    fn row(&self, retriever: &str, category: Option<u8>, sps: Option<f64>) -> Row {
        let d = self.n.max(1) as f64;
        Row {
            retriever: retriever.to_string(),
            category,
            questions: self.n,
            recall_at_1: self.r[0] / d,
            recall_at_5: self.r[1] / d,
            recall_at_10: self.r[2] / d,
            mrr: self.rr / d,
            sentences_per_s: sps,
        }
    }
}

/// Per-category accumulators (index 0 = all, 1..=5 the categories, 6 = categories 1–4).
type ByCategory = [Acc; 7];

/// The accumulators a question of `category` adds to.
fn slots(category: u8) -> Vec<usize> {
    let mut v = vec![0, category as usize];
    if (1..=4).contains(&category) {
        v.push(6);
    }
    v
}

fn rows(name: &str, acc: &ByCategory, sps: Option<f64>) -> Vec<Row> {
    let mut out = vec![acc[0].row(name, None, sps), acc[6].row(name, Some(0), sps)];
    out.extend((1..=5u8).filter(|c| acc[*c as usize].n > 0).map(|c| acc[c as usize].row(name, Some(c), sps)));
    out
}

/// Embeds `texts` in batches of 32, one batch per core at a time (as the server's batcher does).
fn embed_parallel(e: &EmbedService, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
    let chunks: Vec<&[&str]> = texts.chunks(32).collect();
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).min(chunks.len().max(1));
    type Chunks = Vec<(usize, Vec<Vec<f32>>)>;
    let results: Vec<Result<Chunks, EmbedError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let chunks = &chunks;
                scope.spawn(move || (t..chunks.len()).step_by(threads).map(|i| e.embed_blocking(chunks[i]).map(|v| (i, v))).collect())
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(EmbedError::Join("embedding thread panicked".into())))).collect()
    });
    let mut by_chunk: Vec<(usize, Vec<Vec<f32>>)> = Vec::with_capacity(chunks.len());
    for r in results {
        by_chunk.extend(r?);
    }
    by_chunk.sort_by_key(|(i, _)| *i);
    Ok(by_chunk.into_iter().flat_map(|(_, v)| v).collect())
}

/// Evaluates BM25, then each embedder alone and fused with BM25.
pub fn evaluate(ds: &Dataset, split: Option<Split>, embedders: &[EmbedService]) -> Result<Vec<Row>, EmbedError> {
    let mut bm25_acc = ByCategory::default();
    let mut dense: Vec<(ByCategory, ByCategory, f64, usize)> = embedders.iter().map(|_| Default::default()).collect();
    for conv in &ds.conversations {
        if split.is_some_and(|s| conv.split != s) {
            continue;
        }
        let mems = ds.memories_of(&conv.id);
        let texts: Vec<&str> = mems.iter().map(|m| m.text.as_str()).collect();
        let provenance: Vec<Vec<String>> = mems.iter().map(|m| m.evidence.clone()).collect();
        let questions: Vec<_> = ds.questions.iter().filter(|q| q.conversation_id == conv.id && !q.evidence.is_empty()).collect();
        let index = Bm25::new(texts.iter().copied());
        let lexical: Vec<Vec<usize>> = questions.iter().map(|q| index.rank(&q.question)).collect();
        for (q, ranking) in questions.iter().zip(&lexical) {
            let ev: HashSet<&str> = q.evidence.iter().map(String::as_str).collect();
            for c in slots(q.category) {
                bm25_acc[c].add(&ev, ranking, &provenance);
            }
        }
        for (e, (alone, fused, secs, count)) in embedders.iter().zip(dense.iter_mut()) {
            let start = Instant::now();
            let mvecs = embed_parallel(e, &texts)?;
            *secs += start.elapsed().as_secs_f64();
            *count += texts.len();
            let qtexts: Vec<&str> = questions.iter().map(|q| q.question.as_str()).collect();
            let mut qvecs = Vec::with_capacity(qtexts.len());
            for chunk in qtexts.chunks(32) {
                qvecs.extend(e.embed_blocking(chunk)?);
            }
            for ((q, qv), lex) in questions.iter().zip(&qvecs).zip(&lexical) {
                let scores: Vec<f64> = mvecs.iter().map(|m| f64::from(dot(qv, m))).collect();
                let ranking = rank_by(&scores);
                let hybrid = rrf(&[&ranking, lex], mvecs.len(), RRF_K);
                let ev: HashSet<&str> = q.evidence.iter().map(String::as_str).collect();
                for c in slots(q.category) {
                    alone[c].add(&ev, &ranking, &provenance);
                    fused[c].add(&ev, &hybrid, &provenance);
                }
            }
        }
    }
    let mut out = rows("bm25", &bm25_acc, None);
    for (e, (alone, fused, secs, count)) in embedders.iter().zip(&dense) {
        let sps = (*secs > 0.0).then(|| *count as f64 / secs);
        let name = e.identity().name.clone();
        out.extend(rows(&name, alone, sps));
        out.extend(rows(&format!("hybrid(bm25+{name})"), fused, sps));
    }
    Ok(out)
}

/// The report as an aligned text table.
pub fn table(rows: &[Row]) -> String {
    use std::fmt::Write as _;
    let w = rows.iter().map(|r| r.retriever.len()).max().unwrap_or(9).max(9);
    let mut s = format!(
        "{:<w$}  {:<13} {:>5}  {:>8}  {:>8}  {:>9}  {:>6}  {:>10}\n",
        "retriever", "category", "n", "recall@1", "recall@5", "recall@10", "MRR", "sentences/s"
    );
    for r in rows {
        let cat = match r.category {
            None => "all".to_string(),
            Some(0) => "1-4".to_string(),
            Some(c) => format!("{c} {}", crate::dataset::category_name(c).unwrap_or("?")),
        };
        let sps = r.sentences_per_s.map_or("-".to_string(), |v| format!("{v:.0}"));
        let _ = writeln!(
            s,
            "{:<w$}  {:<13} {:>5}  {:>8.3}  {:>8.3}  {:>9.3}  {:>6.3}  {:>10}",
            r.retriever, cat, r.questions, r.recall_at_1, r.recall_at_5, r.recall_at_10, r.mrr, sps
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::embed::HashEmbedder;

    #[test]
    fn metrics_on_a_tiny_case() {
        let prov = vec![vec!["D1:1".to_string()], vec!["D1:2".to_string(), "D1:3".to_string()], vec![]];
        let ev: HashSet<&str> = ["D1:2", "D1:3"].into_iter().collect();
        let mut a = Acc::default();
        a.add(&ev, &[2, 1, 0], &prov);
        let r = a.row("x", None, None);
        assert_eq!((r.recall_at_1, r.recall_at_5, r.mrr), (0.0, 1.0, 0.5));
    }

    #[test]
    fn the_real_table_is_sane() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/locomo/locomo10.json");
        let ds = Dataset::from_locomo_json(std::path::Path::new(path)).unwrap();
        let hash = EmbedService::new(Arc::new(HashEmbedder::default()), 1);
        let rows = evaluate(&ds, Some(Split::Test), &[hash]).unwrap();
        let all = |name: &str| rows.iter().find(|r| r.retriever == name && r.category.is_none()).unwrap().clone();
        let (b, h, y) = (all("bm25"), all("hash-ngram-v1"), all("hybrid(bm25+hash-ngram-v1)"));
        // 546 test questions, 545 with evidence.
        assert!(b.questions > 500 && b.questions == h.questions && h.questions == y.questions);
        for r in [&b, &h, &y] {
            assert!(r.recall_at_1 <= r.recall_at_5 && r.recall_at_5 <= r.recall_at_10 && r.recall_at_10 <= 1.0);
            // Far better than chance (10 of ~200 memories).
            assert!(r.recall_at_10 > 0.3, "{r:?}");
        }
        assert!(table(&rows).contains("recall@10"));
    }
}
