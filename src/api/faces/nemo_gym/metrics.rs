//! `/aggregate_metrics`: the statistics NeMo Gym asks a resources server for at the end of a rollout
//! collection, over the verify responses it kept. Every numeric top-level field (a boolean counts as 0 or
//! 1; NeMo Gym's `_`-prefixed bookkeeping excluded) gets its mean, median, standard deviation (sample),
//! minimum and maximum under NeMo Gym's `stat/field` names, over all rollouts (`agent_metrics`) and per
//! task (`group_level_metrics`, by `_ng_task_index`); `key_metrics` are the means. A sample marked
//! `mask_sample` is left out of the statistics and counted.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};
use tonic::Status;

use crate::api::faces::gateway::kind;
use crate::api::status::invalid;

/// The `/aggregate_metrics` answer for the request body `body`.
pub fn aggregate(body: &Map<String, Value>) -> Result<Value, Status> {
    if let Some(k) = body.keys().find(|k| *k != "verify_responses") {
        return Err(invalid(format!("{}: unknown key (expected verify_responses)", crate::util::excerpt::name(k))));
    }
    let rows = match body.get("verify_responses") {
        Some(Value::Array(rows)) => rows,
        Some(v) => return Err(invalid(format!("verify_responses: must be an array, got {}", kind(v)))),
        None => return Err(invalid("verify_responses: is required".into())),
    };
    let mut all: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut tasks: BTreeMap<i64, (usize, BTreeMap<String, Vec<f64>>)> = BTreeMap::new();
    let mut masked = 0usize;
    for (i, row) in rows.iter().enumerate() {
        let Value::Object(row) = row else {
            return Err(invalid(format!("verify_responses[{i}]: must be an object, got {}", kind(row))));
        };
        if row.get("mask_sample").and_then(Value::as_bool) == Some(true) {
            masked += 1;
            continue;
        }
        let task = row.get("_ng_task_index").and_then(Value::as_i64).unwrap_or(0);
        let group = tasks.entry(task).or_default();
        group.0 += 1;
        for (k, v) in row.iter().filter(|(k, _)| !k.starts_with('_')) {
            let x = match v {
                Value::Bool(b) => f64::from(u8::from(*b)),
                Value::Number(n) => match n.as_f64() {
                    Some(x) if x.is_finite() => x,
                    _ => continue,
                },
                Value::Null | Value::String(_) | Value::Array(_) | Value::Object(_) => continue,
            };
            all.entry(k.clone()).or_default().push(x);
            group.1.entry(k.clone()).or_default().push(x);
        }
    }
    let mut agent = stats(&all);
    agent.insert("num_rollouts".into(), json!(rows.len()));
    agent.insert("num_masked_rollouts".into(), json!(masked));
    let key: Map<String, Value> = agent.iter().filter(|(k, _)| k.starts_with("mean/")).map(|(k, v)| (k.clone(), v.clone())).collect();
    let groups: Vec<Value> = tasks
        .into_iter()
        .map(|(task, (n, fields))| {
            let mut g = stats(&fields);
            g.insert("_ng_task_index".into(), json!(task));
            g.insert("num_rollouts".into(), json!(n));
            Value::Object(g)
        })
        .collect();
    Ok(json!({"group_level_metrics": groups, "agent_metrics": agent, "key_metrics": key}))
}

/// `mean/f`, `median/f`, `std/f`, `min/f`, `max/f` for each field (std is null for one value).
fn stats(fields: &BTreeMap<String, Vec<f64>>) -> Map<String, Value> {
    let mut out = Map::new();
    for (field, xs) in fields {
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let std = (xs.len() > 1).then(|| (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt());
        let mut sorted = xs.clone();
        sorted.sort_by(f64::total_cmp);
        let mid = sorted.len() / 2;
        let median = if sorted.len() % 2 == 1 { sorted[mid] } else { (sorted[mid - 1] + sorted[mid]) / 2.0 };
        out.insert(format!("mean/{field}"), json!(mean));
        out.insert(format!("median/{field}"), json!(median));
        out.insert(format!("std/{field}"), json!(std));
        out.insert(format!("min/{field}"), json!(sorted[0]));
        out.insert(format!("max/{field}"), json!(sorted[sorted.len() - 1]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn means_by_task_and_overall_leave_masked_samples_out() {
        let Value::Object(body) = json!({"verify_responses": [
            {"_ng_task_index": 0, "reward": 1.0, "p_new": 0.5, "response": {}},
            {"_ng_task_index": 0, "reward": 0.0, "p_new": 0.25},
            {"_ng_task_index": 1, "reward": 0.5, "done": true},
            {"_ng_task_index": 1, "reward": 9.0, "mask_sample": true},
        ]}) else {
            unreachable!()
        };
        let m = aggregate(&body).unwrap();
        assert_eq!(m["agent_metrics"]["mean/reward"], json!(0.5));
        assert_eq!(m["agent_metrics"]["median/reward"], json!(0.5));
        assert_eq!(m["agent_metrics"]["std/reward"], json!(0.5));
        assert_eq!(m["agent_metrics"]["max/reward"], json!(1.0));
        assert_eq!(m["agent_metrics"]["num_masked_rollouts"], json!(1));
        assert_eq!(m["key_metrics"]["mean/p_new"], json!(0.375));
        assert_eq!(m["group_level_metrics"][1]["mean/done"], json!(1.0));
        assert_eq!(m["group_level_metrics"][1]["std/reward"], Value::Null);
        assert!(m["agent_metrics"].get("mean/_ng_task_index").is_none());
    }

    #[test]
    fn a_bad_body_names_its_field() {
        for (body, field) in [
            (json!({"verify_responses": 1}), "verify_responses"),
            (json!({"verify_responses": [1]}), "verify_responses[0]"),
            (json!({"rows": []}), "rows"),
            (json!({}), "verify_responses"),
        ] {
            let Value::Object(b) = body else { unreachable!() };
            let e = aggregate(&b).unwrap_err();
            assert!(e.message().starts_with(&format!("{field}:")), "{}", e.message());
        }
    }
}
