//! The layer rule of ARCHITECTURE.md, checked on the source tree: every `crate::` path in `src/` may point
//! down the layers, never up, and never sideways into a sibling on its own floor. A new import that climbs
//! fails this test, which names the file, the line and the two modules; a planted upward import is shown to
//! fail below (`a_planted_upward_import_is_caught`).
//!
//! Production code keeps the rule strictly. Test code (a `tests.rs`, a `*_tests.rs`, a `tests/` folder or
//! an inline `#[cfg(test)]` item) may also build its fixtures from any engine floor (the real dataset, the
//! real embedder, an episode's M₀), but it may not reach the wire edge, the faces or the harness.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The floors, lowest first, as ARCHITECTURE.md draws them: each top-level module of `src/` and its floor.
const FLOORS: &[(&str, &[&str])] = &[
    ("Util", &["util"]),
    ("Leaves", &["text", "embed", "llm"]),
    ("Memory", &["memory"]),
    ("Tools, Reward, Dataset", &["tools", "reward", "dataset"]),
    ("Episode, Banks", &["episode", "banks"]),
    ("Api", &["api"]),
    ("App, Harness", &["main", "lib", "app", "harness"]),
];

/// Sideways edges ARCHITECTURE.md allows: (from, to, why).
const SIDEWAYS: &[(&str, &str, &str)] = &[("llm", "text", "model-reply cleaning")];

/// The floor of top-level module `m`, if it is one.
fn floor(m: &str) -> Option<usize> {
    FLOORS.iter().position(|(_, ms)| ms.contains(&m))
}

/// The floor where test code stops: fixtures may come from any floor up to Episode and Banks.
const TEST_CEILING: usize = 4;

/// The top-level module a file of `src/` belongs to (`src/episode/tests/whole.rs` → `episode`).
fn module_of(rel: &Path) -> String {
    let first = rel.components().next().expect("a path under src/").as_os_str().to_string_lossy().into_owned();
    first.trim_end_matches(".rs").to_string()
}

/// Whether the whole file is test code.
fn is_test_file(rel: &Path) -> bool {
    let name = rel.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    name == "tests.rs" || name.ends_with("_tests.rs") || rel.components().any(|c| c.as_os_str() == "tests")
}

/// One `crate::` reference: the line (1-based), the module named, and whether it is in test code.
#[derive(Debug, PartialEq)]
struct Reference {
    line: usize,
    target: String,
    in_test: bool,
}

/// The modules `source` names through `crate::` — `crate::x::…` and each `x` of `crate::{x::…, y}` —
/// outside comments, with whether each sits in test code.
fn references(source: &str, whole_file_is_test: bool) -> Vec<Reference> {
    let mut out = Vec::new();
    // Inline test code: the item after `#[cfg(test)]`, to its closing brace (or its `;`).
    let mut test_depth: Option<i64> = None;
    let mut pending_cfg_test = false;
    let mut depth: i64 = 0;
    let mut group: Option<(usize, String, bool)> = None;
    for (i, raw) in source.lines().enumerate() {
        let code = strip_comment(raw);
        let trimmed = code.trim();
        if trimmed.starts_with("#[cfg(test)]") {
            pending_cfg_test = true;
        }
        let starts_test_item = pending_cfg_test && !trimmed.starts_with("#[") && !trimmed.is_empty();
        if starts_test_item {
            pending_cfg_test = false;
            if trimmed.contains('{') {
                test_depth = Some(depth);
            }
        }
        let in_test = whole_file_is_test || test_depth.is_some() || starts_test_item;
        // A `crate::{` group that rustfmt split over lines is read whole, at its first line.
        let (line, text, in_test) = match group.take() {
            Some((line, text, in_test)) => (line, text + " " + code, in_test),
            None => (i + 1, code.to_string(), in_test),
        };
        let open_group = text.rfind("crate::{").is_some_and(|at| {
            let tail = &text[at..];
            tail.matches('{').count() > tail.matches('}').count()
        });
        if open_group {
            group = Some((line, text, in_test));
        } else {
            for target in crate_targets(&text) {
                out.push(Reference { line, target, in_test });
            }
        }
        depth += code.matches('{').count() as i64 - code.matches('}').count() as i64;
        if let Some(d) = test_depth {
            if depth <= d {
                test_depth = None;
            }
        }
    }
    out
}

/// A line without its `//` comment (a `//` inside a string literal is kept: "http://…").
fn strip_comment(line: &str) -> &str {
    let mut in_string = false;
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        match c {
            '"' if prev != '\\' => in_string = !in_string,
            '/' if !in_string && prev == '/' => return &line[..i - 1],
            _ => {}
        }
        prev = if prev == '\\' && c == '\\' { ' ' } else { c };
    }
    line
}

/// The top-level modules a line names after `crate::`.
fn crate_targets(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let preceded_by_word = rest[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$');
        rest = &rest[at + "crate::".len()..];
        if preceded_by_word {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a::b, c}`: the first name of each item at the group's own level.
            let mut level = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => level += 1,
                    '}' if level == 0 => break,
                    '}' => level -= 1,
                    ',' if level == 0 => {
                        out.extend(first_name(&item));
                        item.clear();
                    }
                    c if level == 0 => item.push(c),
                    _ => {}
                }
            }
            out.extend(first_name(&item));
        } else {
            let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if !name.is_empty() {
                out.push(name);
            }
        }
    }
    out
}

/// The leading identifier of a `use` item (`vector::dot` → `vector`).
fn first_name(item: &str) -> Option<String> {
    let name: String = item.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
    (!name.is_empty()).then_some(name)
}

/// What is wrong with `from` naming `to`, if anything.
fn violation(from: &str, to: &str, in_test: bool) -> Option<String> {
    if from == to || to == "fake_openai" {
        return None; // within a module, or the test-only fake OpenAI server (tests/support)
    }
    let (Some(f), Some(t)) = (floor(from), floor(to)) else {
        return Some(format!("`{to}` (or `{from}`) is on no floor of tests/layers.rs: add it where ARCHITECTURE.md draws it"));
    };
    if SIDEWAYS.iter().any(|(a, b, _)| *a == from && *b == to) {
        return None;
    }
    let top = FLOORS.len() - 1;
    if t < f || (f == top && t == top) || (in_test && t <= TEST_CEILING.max(f)) {
        return None;
    }
    let (fname, tname) = (FLOORS[f].0, FLOORS[t].0);
    Some(if t > f {
        format!("`{from}` ({fname}) names `{to}` ({tname}), a floor above it")
    } else {
        format!("`{from}` and `{to}` are siblings on one floor ({fname}): neither may name the other")
    })
}

/// Every violation in `source`, a file at `rel` under `src/`, one line each.
fn check(rel: &Path, source: &str) -> Vec<String> {
    let from = module_of(rel);
    references(source, is_test_file(rel))
        .into_iter()
        .filter_map(|r| violation(&from, &r.target, r.in_test).map(|why| format!("src/{}:{}: {why}", rel.display(), r.line)))
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_import_climbs_a_floor_or_crosses_to_a_sibling() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 100, "read {} files under src/", files.len());
    let mut seen = BTreeSet::new();
    let mut wrong = Vec::new();
    for path in &files {
        let rel = path.strip_prefix(&src).unwrap();
        seen.insert(module_of(rel));
        wrong.extend(check(rel, &std::fs::read_to_string(path).unwrap()));
    }
    assert!(wrong.is_empty(), "imports against the layers (ARCHITECTURE.md):\n{}", wrong.join("\n"));
    // Every top-level module has a floor, and every floor's modules exist: the table stays the tree's.
    let listed: BTreeSet<String> = FLOORS.iter().flat_map(|(_, ms)| ms.iter().map(|m| m.to_string())).collect();
    assert_eq!(seen, listed, "the top-level modules of src/ against the floors above");
}

#[test]
fn the_sideways_edges_have_no_cycle() {
    // A sideways edge goes one way only, and stays on its floor.
    for (a, b, why) in SIDEWAYS {
        assert!(!SIDEWAYS.iter().any(|(x, y, _)| x == b && y == a), "{a} and {b} name each other");
        assert_eq!(floor(a), floor(b), "{a} -> {b} ({why}) is not sideways");
    }
}

#[test]
fn a_planted_upward_import_is_caught() {
    // A leaf naming the episode layer, in code and in a `use` group.
    let text = Path::new("text/words.rs");
    assert_eq!(check(text, "use crate::episode::Environment;").len(), 1);
    let grouped = check(Path::new("memory/base.rs"), "use crate::{\n    util::{fnv, vector::dot},\n    api::status, embed,\n};");
    assert_eq!(grouped, vec!["src/memory/base.rs:1: `memory` (Memory) names `api` (Api), a floor above it"]);
    let grouped = check(Path::new("memory/base.rs"), "use crate::{util::vector::{dot, normalize}, api::status, text};");
    assert_eq!(grouped, vec!["src/memory/base.rs:1: `memory` (Memory) names `api` (Api), a floor above it"]);
    // A leaf names another leaf only along the edges listed in SIDEWAYS; util is below every leaf.
    assert_eq!(check(text, "use crate::embed::Embedder;").len(), 1);
    assert!(check(text, "use crate::util::excerpt::quoted;").is_empty());
    assert!(check(Path::new("llm/mod.rs"), "use crate::text::reply;").is_empty());
    assert_eq!(check(Path::new("util/json.rs"), "use crate::text::words;").len(), 1);
    // The message names the file, the line and both floors.
    let found = check(Path::new("memory/base.rs"), "fn f() {}\nlet x = crate::reward::p_of(m);");
    assert_eq!(found, vec!["src/memory/base.rs:2: `memory` (Memory) names `reward` (Tools, Reward, Dataset), a floor above it"]);
    // Siblings on one floor.
    assert_eq!(check(Path::new("tools/merge.rs"), "use crate::reward::Evaluator;").len(), 1);
    assert_eq!(check(Path::new("episode/mod.rs"), "use crate::banks::Bank;").len(), 1);
    // Down is fine; comments, doc links and strings are not imports.
    assert!(
        check(Path::new("episode/mod.rs"), "use crate::memory::EpisodeMemory;\n/// see [`crate::api::x`]\n// crate::app::cli").is_empty()
    );
    assert!(check(Path::new("text/x.rs"), r#"let u = "http://a"; // crate::api"#).is_empty());
    assert!(check(Path::new("text/x.rs"), "let p = my_crate::api::x;").is_empty());
    // Test code may build fixtures from the engine, but not from the wire edge or the app.
    assert!(check(Path::new("memory/tests.rs"), "let ds = crate::dataset::Dataset::load(None);").is_empty());
    assert_eq!(check(Path::new("memory/tests.rs"), "let c = crate::app::config::env_config(&a);").len(), 1);
    let inline = "fn f() {}\n#[cfg(test)]\nmod tests {\n    use crate::episode::build_base;\n}\nuse crate::episode::X;";
    let found = check(Path::new("memory/lexical.rs"), inline);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("src/memory/lexical.rs:6:"), "{found:?}");
    // Production code has no test ceiling: the same fixture import outside tests is a violation.
    assert_eq!(check(Path::new("memory/base.rs"), "use crate::episode::build_base;").len(), 1);
}
