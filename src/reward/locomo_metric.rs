//! LoCoMo's official QA metric (`snap-research/locomo`, `task_eval/evaluation.py`), implemented once as
//! pure functions, for the LLM evaluators: an LLM answers from the retrieved memories and the answer is
//! scored here exactly as LoCoMo scores it.
//!
//! - `f1_score`: LoCoMo normalisation, NLTK Porter stemming of every token, multiset overlap;
//!   P = |common| / |pred|, R = |common| / |gold|, F1 = 2PR / (P + R); 0 without overlap.
//! - `f1` (category 1, multi-hop): both strings split on `,`; mean over gold parts of the best F1 over
//!   predicted parts.
//! - Category 3 keeps the gold answer's first `;` alternative; categories 2, 3 and 4 use `f1_score`;
//!   category 5 scores 1 iff the output contains "no information available" or "not mentioned".

use std::collections::HashMap;

use crate::text::stemmed_tokens;

/// Token F1 after LoCoMo normalisation and Porter stemming.
pub fn f1_score(prediction: &str, gold: &str) -> f64 {
    let p = stemmed_tokens(prediction);
    let g = stemmed_tokens(gold);
    let mut counts: HashMap<&str, (usize, usize)> = HashMap::new();
    for t in &p {
        counts.entry(t).or_default().0 += 1;
    }
    for t in &g {
        counts.entry(t).or_default().1 += 1;
    }
    let same: usize = counts.values().map(|(a, b)| (*a).min(*b)).sum();
    if same == 0 {
        return 0.0;
    }
    let precision = same as f64 / p.len() as f64;
    let recall = same as f64 / g.len() as f64;
    2.0 * precision * recall / (precision + recall)
}

/// Multi-answer F1 (category 1): mean over the gold's comma-separated parts of the best part-wise F1.
pub fn f1_multi(prediction: &str, gold: &str) -> f64 {
    let preds: Vec<&str> = prediction.split(',').map(str::trim).collect();
    let golds: Vec<&str> = gold.split(',').map(str::trim).collect();
    let total: f64 = golds.iter().map(|g| preds.iter().map(|p| f1_score(p, g)).fold(0.0, f64::max)).sum();
    total / golds.len() as f64
}

/// The official per-category score of a model `output` against the gold `answer` (LoCoMo categories:
/// 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial). `None` for another category.
pub fn score(output: &str, answer: &str, category: u8) -> Option<f64> {
    match category {
        1 => Some(f1_multi(output, answer)),
        2 | 4 => Some(f1_score(output, answer)),
        3 => Some(f1_score(output, answer.split(';').next().unwrap_or("").trim())),
        5 => {
            let o = output.to_lowercase();
            Some(if o.contains("no information available") || o.contains("not mentioned") { 1.0 } else { 0.0 })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Expected values computed by the official Python code (NLTK 3.10.4 PorterStemmer, `regex`
    /// normalisation) on the same inputs.
    #[test]
    fn matches_the_official_implementation() {
        let cases: [(&str, &str, u8, f64); 20] = [
            ("7 May 2023", "7 May 2023", 2, 1.0),
            ("On the 7th of May, 2023", "7 May 2023", 2, 0.5),
            ("She went in May 2023", "7 May 2023", 2, 0.5),
            ("Adoption agencies", "Adoption agencies", 4, 1.0),
            ("researching adoption agency options", "Adoption agencies", 4, 0.6666666666666666),
            ("the beach", "The beach", 4, 1.0),
            ("painting and pottery", "Pottery, painting, running", 1, 0.4444444444444444),
            ("running, pottery", "Pottery, painting, running", 1, 0.6666666666666666),
            ("camping", "Pottery, painting, running", 1, 0.0),
            ("Likely no; she prefers cats", "Likely no; she prefers dogs", 3, 0.5714285714285715),
            ("Likely no", "Likely no; she prefers dogs", 3, 1.0),
            ("Yes", "Likely yes; because she loves art", 3, 0.6666666666666666),
            ("Not mentioned in the conversation", "", 5, 1.0),
            ("No information available.", "", 5, 1.0),
            ("Sweden", "", 5, 0.0),
            ("", "Sweden", 4, 0.0),
            ("Sweden Sweden Sweden", "Sweden", 4, 0.5),
            ("runs ran running", "running", 4, 0.5),
            ("2022", "2022", 2, 1.0),
            ("The Alchemist, Harry Potter", "Harry Potter, The Alchemist, Dune", 1, 0.6666666666666666),
        ];
        for (out, gold, cat, want) in cases {
            let got = score(out, gold, cat).unwrap();
            assert!((got - want).abs() < 1e-12, "{out:?} vs {gold:?} (cat {cat}): {got} != {want}");
        }
        assert_eq!(score("x", "y", 6), None);
    }

    #[test]
    fn dates_a_real_model_writes_differently_score_by_their_tokens() {
        // Real replies of Qwen2.5-Coder-0.5B-Instruct to LoCoMo's category-2 prompt. The metric is a bag of
        // normalised tokens: order and commas do not matter; extra tokens (a time of day) cost precision;
        // "7th" is not "7" (LoCoMo's official metric, kept as it is).
        for (reply, gold, want) in [
            ("May 7, 2023", "7 May 2023", 1.0),
            ("14 August, 2023", "14 August 2023", 1.0),
            ("10:31 am on 13 October, 2023", "13 October 2023", 2.0 * 0.5 * 1.0 / 1.5),
            ("13 August", "14 August 2023", 2.0 * 0.5 * (1.0 / 3.0) / (0.5 + 1.0 / 3.0)),
        ] {
            let got = score(reply, gold, 2).unwrap();
            assert!((got - want).abs() < 1e-12, "{reply:?} vs {gold:?}: {got} != {want}");
        }
    }
}
