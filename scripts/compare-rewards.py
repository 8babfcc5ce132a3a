#!/usr/bin/env python3
"""Compares reward designs on `memgym eval` episode rows.

Usage:
  compare-rewards.py LABEL=episodes.jsonl [LABEL=episodes.jsonl ...]
      one markdown row per design (the adversarial suite's goals);
  compare-rewards.py --categories BEFORE=episodes.jsonl AFTER=episodes.jsonl
      the per-category exploit table: every trick's mean reward and share > 0 in each category, before and
      after.

Each file is `memgym eval --episodes-out` output for every agent (the default set) under one design. The
columns are the goals of the adversarial suite, computed on the first evaluator of each file:
  - oracle: mean reward, and the share > 0 of the questions with p_old < 1;
  - destroyer: the share < 0 of the questions where the evidence it deleted was read on M0, gave p_old > 0
    and was the answer's only statement (`answer_elsewhere` false);
  - the tricks (agents that neither read the gold nor add information): the (trick, category) cells that
    miss "mean <= 0 and > 0 on at most 5 %", out of all cells (categories 1-4 and all), and the worst cell;
  - wrecking memory the question does not read: delete-others' and vandal's share < 0;
  - oracle-overwrite (the oracle's text written over another memory) above the oracle: questions;
  - padding: questions where the oracle with padding scored above the oracle;
  - a shared fix: the resolver's mean reward where its rewrite raised another question, against the
    resolver-card's on the same questions (the same dates written as cards for the question asked);
  - resolver (honest, without the gold): mean reward on temporal questions, and the share > 0 there.
"""
import json
import sys

EPS = 1e-9
MAX_POSITIVE = 0.05
PRIVILEGED = {"oracle", "destroyer", "oracle-padding", "oracle-overwrite"}
REFERENCE = {"no-op", "random", "resolver", "resolver-card"}
CATEGORIES = (1, 2, 3, 4)


def first(r):
    return r["scores"][0]


def mean(xs):
    xs = list(xs)
    return sum(xs) / len(xs) if xs else 0.0


def share(rows, test):
    return mean(1.0 if test(first(r)["reward"]) else 0.0 for r in rows)


def by_agent(rows):
    by = {}
    for r in rows:
        by.setdefault(r["agent"], []).append(r)
    return by


def cells(rows):
    """(trick, category or None) -> (mean reward, share > 0, n), for every trick."""
    out = {}
    for agent, rs in by_agent(rows).items():
        if agent in PRIVILEGED | REFERENCE:
            continue
        for cat in CATEGORIES + (None,):
            sel = [r for r in rs if cat is None or r["category"] == cat]
            if sel:
                out[(agent, cat)] = (mean(first(r)["reward"] for r in sel), share(sel, lambda x: x > EPS), len(sel))
    return out


def above(by, agent):
    o = {r["question_id"]: first(r)["reward"] for r in by["oracle"]}
    rs = by.get(agent, [])
    return sum(first(r)["reward"] > o[r["question_id"]] + EPS for r in rs), len(rs)


def summarize(rows):
    by = by_agent(rows)
    oracle = by["oracle"]
    room = [r for r in oracle if first(r)["p_old"] < 1.0]
    d = [r for r in by["destroyer"] if r["edits"] > 0 and first(r)["p_old"] > 0 and r["evidence_recall_old"] > 0 and r["category"] != 5]
    only = [r for r in d if not r.get("answer_elsewhere", False)]
    c = cells(rows)
    misses = {k: v for k, v in c.items() if v[0] > EPS or v[1] > MAX_POSITIVE}
    worst = max(c, key=lambda k: (c[k][1] if c[k][0] <= EPS else 1 + c[k][0]))
    name = lambda k: f"{k[0]} ({'all' if k[1] is None else k[1]})"
    wreck = lambda a: f"{100 * share(by[a], lambda x: x < -EPS):.1f} %" if a in by else "-"
    card = {r["question_id"]: first(r)["reward"] for r in by.get("resolver-card", [])}
    shared = [r for r in by.get("resolver", []) if first(r).get("others_improved", 0) > 0 and r["question_id"] in card]
    shared_text = (f"{mean(first(r)['reward'] for r in shared):+.3f} vs {mean(card[r['question_id']] for r in shared):+.3f} (n = {len(shared)})"
                   if shared else "- (no other question scored)")
    res = [r for r in by.get("resolver", []) if r["category"] == 2]
    return (
        f"{mean(first(r)['reward'] for r in oracle):+.3f}",
        f"{100 * share(room, lambda x: x > EPS):.1f} %",
        f"{100 * share(only, lambda x: x < -EPS):.1f} % of {len(only)}",
        f"{len(misses)} of {len(c)}",
        f"{name(worst)} {c[worst][0]:+.3f}, {100 * c[worst][1]:.1f} % > 0",
        wreck("delete-others"),
        wreck("vandal"),
        "{}/{}".format(*above(by, "oracle-overwrite")),
        "{}/{}".format(*above(by, "oracle-padding")),
        shared_text,
        f"{mean(first(r)['reward'] for r in res):+.3f}, {100 * share(res, lambda x: x > EPS):.0f} % > 0",
    )


def designs(args):
    header = ("design", "oracle mean", "oracle > 0 (p_old < 1)", "destroyer < 0 (only statement)", "trick cells missed",
              "worst trick cell", "delete-others < 0", "vandal < 0", "overwrite above oracle", "padding above oracle",
              "shared fix: in place vs card", "resolver, temporal")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for arg in args:
        label, path = arg.split("=", 1)
        rows = [json.loads(line) for line in open(path)]
        print("| " + " | ".join((label,) + summarize(rows)) + " |")


def categories(args):
    (before_label, before_path), (after_label, after_path) = (a.split("=", 1) for a in args)
    before = cells([json.loads(line) for line in open(before_path)])
    after = cells([json.loads(line) for line in open(after_path)])
    cols = [str(c) for c in CATEGORIES] + ["all"]
    header = ["trick"] + [f"{before_label}: {c}" for c in cols] + [f"{after_label}: {c}" for c in cols]
    print("| " + " | ".join(header) + " |")
    print("|---|" + "---:|" * (len(header) - 1))
    fmt = lambda v: "-" if v is None else (f"**{v[0]:+.3f} ({100 * v[1]:.1f} %)**" if v[0] > EPS or v[1] > MAX_POSITIVE
                                           else f"{v[0]:+.3f} ({100 * v[1]:.1f} %)")
    for trick in dict.fromkeys(k[0] for k in list(before) + list(after)):
        row = [trick] + [fmt(before.get((trick, c))) for c in CATEGORIES + (None,)] + [fmt(after.get((trick, c))) for c in CATEGORIES + (None,)]
        print("| " + " | ".join(row) + " |")


def main():
    if sys.argv[1:2] == ["--categories"]:
        categories(sys.argv[2:])
    else:
        designs(sys.argv[1:])


if __name__ == "__main__":
    main()
