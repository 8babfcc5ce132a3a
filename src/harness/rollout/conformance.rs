//! Format failure or policy's choice: the report's split of what went wrong in a run into what a
//! grammar-constrained decoder (vLLM's `tool_choice="required"`, SGLang's xgrammar, llama.cpp's grammars)
//! would have prevented and what no grammar decides, so that a user sees whether a policy fails at writing
//! calls or at choosing them — and what constrained decoding (`--tool-choice required` against an engine
//! that honours it) could change.
//!
//! - A **format failure** is a call attempt that could not be read (parse mode `invalid`), a call read
//!   leniently from another shape (mode `lenient`), or a call read strictly whose name or arguments do not
//!   conform to the JSON schema of the tool the policy was shown ([`crate::util::json_schema`]): an unknown
//!   tool, a repeated argument, an unknown argument, a wrong type, an enum value not listed, a value out
//!   of bounds, a required argument missing. Judged by the schemas themselves, not by memgym's reader, which
//!   is more lenient (an enum value in another case, `null` for unset, a lenient shape): such a call may
//!   still be carried out, and the report counts how many were. A reply cut by `max_tokens`
//!   (`finish_reason` `length`) leaves its last call unfinished under any grammar: the report counts the
//!   format failures in such replies apart, since only a larger `--max-tokens` prevents them.
//! - A **policy's choice** is everything a grammar leaves to the policy: a reply with no call attempt (the
//!   policy stopped), and the schema-valid calls, carried out or refused by the environment (an id that
//!   does not exist, a merge the memory cannot make), counted by refusal kind
//!   ([`super::report::refusal_kind`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::parse::{Call, Mode};
use super::record::{Outcome, Stop, Trajectory};
use super::report::{refusal_kind, TOP_REFUSALS};
use crate::util::json::{strict_value, StrictError};
use crate::util::json_schema::{check, Kind};

/// Why a call is a format failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FormatFailure {
    /// A call attempt that could not be read (parse mode `invalid`).
    Invalid,
    /// Read leniently, from another shape than the format asks for.
    Lenient,
    /// A name no tool schema has.
    UnknownTool,
    /// An argument given twice.
    DuplicateArgument,
    /// An argument the tool's schema does not list.
    UnknownArgument,
    /// An argument not of its schema's type (`null` included).
    WrongType,
    /// A value its schema's `enum` does not list (memgym reads enum values in any case; a schema does not).
    NotInEnum,
    /// A number or a list out of its schema's bounds.
    OutOfBounds,
    /// A required argument missing.
    MissingRequired,
}

impl FormatFailure {
    /// Every kind, in report order.
    pub const ALL: [FormatFailure; 9] = [
        FormatFailure::Invalid,
        FormatFailure::Lenient,
        FormatFailure::UnknownTool,
        FormatFailure::DuplicateArgument,
        FormatFailure::UnknownArgument,
        FormatFailure::WrongType,
        FormatFailure::NotInEnum,
        FormatFailure::OutOfBounds,
        FormatFailure::MissingRequired,
    ];

    /// The name in files and reports.
    pub fn name(self) -> &'static str {
        match self {
            FormatFailure::Invalid => "invalid",
            FormatFailure::Lenient => "lenient",
            FormatFailure::UnknownTool => "unknown_tool",
            FormatFailure::DuplicateArgument => "duplicate_argument",
            FormatFailure::UnknownArgument => "unknown_argument",
            FormatFailure::WrongType => "wrong_type",
            FormatFailure::NotInEnum => "not_in_enum",
            FormatFailure::OutOfBounds => "out_of_bounds",
            FormatFailure::MissingRequired => "missing_required",
        }
    }

    fn of(kind: Kind) -> FormatFailure {
        match kind {
            Kind::UnknownProperty => FormatFailure::UnknownArgument,
            Kind::WrongType => FormatFailure::WrongType,
            Kind::NotInEnum => FormatFailure::NotInEnum,
            Kind::OutOfBounds => FormatFailure::OutOfBounds,
            Kind::MissingRequired => FormatFailure::MissingRequired,
        }
    }
}

/// Why `call` is a format failure against `schemas` (OpenAI function schemas, ListTools'), or `None` when
/// it is schema-valid: the first that applies of its parse mode, its tool's name, a repeated argument,
/// then its arguments against the tool's `parameters`.
pub fn format_failure(call: &Call, schemas: &[Value]) -> Option<FormatFailure> {
    match call.mode {
        Mode::Invalid => return Some(FormatFailure::Invalid),
        Mode::Lenient => return Some(FormatFailure::Lenient),
        Mode::Strict => {}
    }
    let Some(schema) = schemas.iter().find(|s| s.pointer("/function/name").and_then(Value::as_str) == Some(call.name.as_str())) else {
        return Some(FormatFailure::UnknownTool);
    };
    let text = call.arguments.trim();
    let arguments = if text.is_empty() {
        Value::Object(serde_json::Map::new())
    } else {
        match strict_value(text) {
            Ok(v) => v,
            Err(StrictError::Duplicate(_)) => return Some(FormatFailure::DuplicateArgument),
            Err(StrictError::Syntax(_)) => return Some(FormatFailure::Invalid), // a strict call's text is always JSON
        }
    };
    let parameters = schema.pointer("/function/parameters").unwrap_or(&Value::Null);
    check(parameters, &arguments).err().map(|v| FormatFailure::of(v.kind))
}

/// The run's format failures and policy's choices.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FormatOrChoice {
    /// Call attempts.
    pub calls: usize,
    /// Format failures by kind (every kind, zeros included).
    pub format_failures: BTreeMap<String, usize>,
    /// Of the format failures, those the environment carried out all the same (its reader is more lenient
    /// than a schema).
    pub format_failures_done: usize,
    /// Of the format failures, those in a reply cut by `max_tokens` (`finish_reason` `length`): a grammar
    /// does not prevent them, a larger `--max-tokens` does.
    #[serde(default)]
    pub format_failures_cut: usize,
    /// Schema-valid calls.
    pub valid: usize,
    /// Of those, carried out.
    pub valid_done: usize,
    /// Of those, refused by the environment.
    pub valid_refused: usize,
    /// The schema-valid calls' refusals by kind, most frequent first (at most [`TOP_REFUSALS`]).
    pub valid_refusals: Vec<(String, usize)>,
    /// Replies with no call attempt: rollouts the policy stopped.
    pub stops_without_call: usize,
}

impl FormatOrChoice {
    /// Format failures of every kind.
    pub fn format_total(&self) -> usize {
        self.format_failures.values().sum()
    }
}

/// The split over `ts`, against `schemas`.
pub fn split(ts: &[Trajectory], schemas: &[Value]) -> FormatOrChoice {
    let mut r = FormatOrChoice {
        format_failures: FormatFailure::ALL.iter().map(|k| (k.name().to_string(), 0)).collect(),
        ..FormatOrChoice::default()
    };
    let mut refusals: BTreeMap<String, usize> = BTreeMap::new();
    for t in ts {
        if t.stop == Some(Stop::NoCall) {
            r.stops_without_call += 1;
        }
        for (turn, c) in t.turns.iter().flat_map(|turn| turn.calls.iter().map(move |c| (turn, c))) {
            r.calls += 1;
            match format_failure(&c.call, schemas) {
                Some(kind) => {
                    *r.format_failures.entry(kind.name().to_string()).or_default() += 1;
                    r.format_failures_done += usize::from(c.outcome == Outcome::Done);
                    r.format_failures_cut += usize::from(turn.cut_by_max_tokens());
                }
                None => {
                    r.valid += 1;
                    match c.outcome {
                        Outcome::Done => r.valid_done += 1,
                        Outcome::Refused | Outcome::Unread => {
                            r.valid_refused += 1;
                            *refusals.entry(refusal_kind(&c.result)).or_default() += 1;
                        }
                    }
                }
            }
        }
    }
    let mut v: Vec<(String, usize)> = refusals.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v.truncate(TOP_REFUSALS);
    r.valid_refusals = v;
    r
}

/// The report's section: two lines, the kinds and refusals that occurred.
pub fn markdown(r: &FormatOrChoice) -> String {
    let kinds: Vec<String> = FormatFailure::ALL
        .iter()
        .filter_map(|k| r.format_failures.get(k.name()).filter(|n| **n > 0).map(|n| format!("{} {n}", k.name())))
        .collect();
    let refusals: Vec<String> = r.valid_refusals.iter().map(|(k, n)| format!("{k}: {n}")).collect();
    format!(
        "\n## Format or choice\n\nformat failures (calls not valid under the tools' schemas; a grammar of them prevents all but those cut \
         by max_tokens): {} of {} calls \
         {{{}}} · in replies cut by max_tokens: {} · carried out all the same: {}\n\npolicy's choices: {} schema-valid calls · carried out {} · refused {} {{{}}} · \
         replies with no call (the policy stopped): {}\n",
        r.format_total(),
        r.calls,
        kinds.join(", "),
        r.format_failures_cut,
        r.format_failures_done,
        r.valid,
        r.valid_done,
        r.valid_refused,
        refusals.join("; "),
        r.stops_without_call
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::harness::rollout::record::test_support::traj;
    use crate::harness::rollout::record::{CallRecord, Turn};
    use crate::tools::llm_calls::tool_schemas;
    use crate::tools::ToolLimits;

    fn call(mode: Mode, name: &str, arguments: &str) -> Call {
        Call { mode, name: name.into(), arguments: arguments.into(), id: None, error: None }
    }

    #[test]
    fn each_kind_of_format_failure() {
        let schemas = tool_schemas(&ToolLimits::default());
        let cases = [
            (call(Mode::Invalid, "", ""), Some(FormatFailure::Invalid)),
            (call(Mode::Lenient, "search_memory", r#"{"query": "x"}"#), Some(FormatFailure::Lenient)),
            (call(Mode::Strict, "update_memory", "{}"), Some(FormatFailure::UnknownTool)),
            (call(Mode::Strict, "search_memory", r#"{"query": "x", "query": "y"}"#), Some(FormatFailure::DuplicateArgument)),
            (call(Mode::Strict, "search_memory", r#"{"query": "x", "colour": "red"}"#), Some(FormatFailure::UnknownArgument)),
            (call(Mode::Strict, "search_memory", r#"{"query": "x", "speaker": null}"#), Some(FormatFailure::WrongType)),
            (call(Mode::Strict, "search_memory", r#"{"query": "x", "memory_type": "Episodic"}"#), Some(FormatFailure::NotInEnum)),
            (call(Mode::Strict, "search_memory", r#"{"query": "x", "top_k": 51}"#), Some(FormatFailure::OutOfBounds)),
            (call(Mode::Strict, "merge_memory", r#"{"memory_ids": ["m1"], "strategy": "summarize"}"#), Some(FormatFailure::OutOfBounds)),
            (call(Mode::Strict, "manage_memory", r#"{"operation": "create"}"#), Some(FormatFailure::MissingRequired)),
            (call(Mode::Strict, "sample_memory", ""), None),
            (call(Mode::Strict, "search_memory", r#"{"query": "x", "top_k": 5.0, "threshold": 1}"#), None),
            // Schema-valid, refused by the environment (the id does not exist): a policy's choice.
            (call(Mode::Strict, "delete_memory", r#"{"memory_id": "m9999"}"#), None),
        ];
        for (c, expected) in cases {
            assert_eq!(format_failure(&c, &schemas), expected, "{c:?}");
        }
    }

    /// A hand-made run: a stop without a call, format failures of three kinds (one carried out all the
    /// same), schema-valid calls carried out and refused.
    #[test]
    fn the_run_is_split_into_format_failures_and_choices() {
        let schemas = tool_schemas(&ToolLimits::default());
        let record = |mode, name: &str, args: &str, outcome, result: &str| CallRecord {
            call: call(mode, name, args),
            outcome,
            result: result.into(),
            env_ms: 0.0,
        };
        let turn = |calls: Vec<CallRecord>| Turn {
            sent: 2,
            seed: 1,
            reply: json!({}),
            finish_reason: None,
            prompt_tokens: None,
            completion_tokens: None,
            latency_ms: 0.0,
            calls,
            dropped: 0,
        };
        let mut a = traj("q1", 1, 0, 2, Some(0.0));
        a.turns = vec![
            turn(vec![
                record(Mode::Strict, "search_memory", r#"{"query": "x"}"#, Outcome::Done, "[m0001 0.50] a"),
                record(
                    Mode::Strict,
                    "delete_memory",
                    r#"{"memory_id": "m0042"}"#,
                    Outcome::Refused,
                    "Error: memory_id: memory m0042 not found",
                ),
                record(
                    Mode::Strict,
                    "delete_memory",
                    r#"{"memory_id": "m0043"}"#,
                    Outcome::Refused,
                    "Error: memory_id: memory m0043 not found",
                ),
                record(Mode::Invalid, "", "", Outcome::Unread, "Error: the <tool_call> block is not JSON"),
            ]),
            turn(Vec::new()),
        ];
        // The first reply was cut by max_tokens, so its unfinished call is counted apart.
        a.turns[0].finish_reason = Some("length".into());
        a.stop = Some(Stop::NoCall);
        let mut b = traj("q1", 1, 1, 2, Some(0.0));
        b.turns = vec![turn(vec![
            record(
                Mode::Strict,
                "search_memory",
                r#"{"query": "x", "memory_type": "Semantic"}"#,
                Outcome::Done,
                "no memories matched (9 in memory)",
            ),
            record(
                Mode::Strict,
                "search_memory",
                r#"{"query": "x", "top_k": 500}"#,
                Outcome::Refused,
                "Error: top_k: must be between 1 and 50, got 500",
            ),
        ])];
        b.stop = Some(Stop::MaxTurns);
        let ts = [a, b];
        let r = split(&ts, &schemas);
        let searches = crate::harness::rollout::report::empty_searches(&ts);
        assert_eq!((searches.done, searches.empty), (2, 1), "the refused search is not counted");
        assert_eq!((r.calls, r.format_total(), r.valid, r.valid_done, r.valid_refused), (6, 3, 3, 1, 2));
        assert_eq!((r.format_failures["invalid"], r.format_failures["not_in_enum"], r.format_failures["out_of_bounds"]), (1, 1, 1));
        assert_eq!(r.format_failures_done, 1, "memgym reads \"Semantic\" as semantic");
        assert_eq!(r.format_failures_cut, 1, "only the invalid call's reply was cut");
        assert_eq!(r.valid_refusals, [("memory_id: memory m# not found".to_string(), 2)]);
        assert_eq!(r.stops_without_call, 1);
        let md = markdown(&r);
        assert!(
            md.contains(
                "3 of 6 calls {invalid 1, not_in_enum 1, out_of_bounds 1} · in replies cut by max_tokens: 1 · carried out all the same: 1"
            ),
            "{md}"
        );
        assert!(md.contains("refused 2 {memory_id: memory m# not found: 2} · replies with no call (the policy stopped): 1"), "{md}");
    }
}
