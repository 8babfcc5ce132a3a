#!/usr/bin/env python3
"""Compares reward designs on `memgym eval` episode rows: one markdown row per design.

Usage: compare-rewards.py LABEL=episodes.jsonl [LABEL=episodes.jsonl ...]

Each file is `memgym eval --episodes-out` output for every agent (the default set) under one design. The
columns are the goals of the adversarial suite, computed on the first evaluator of each file:
  - oracle: mean reward, and the share > 0 of the questions with p_old < 1;
  - destroyer: the share < 0 of the questions where the evidence was deleted, read on M0 and gave p_old > 0;
    then of those where no memory left after the deletion states the answer (`answer_elsewhere`);
  - the worst trick (an agent that neither reads the gold nor adds information): the highest mean reward,
    and the highest share of questions > 0;
  - padding: questions where the oracle with padding scored above the oracle;
  - resolver (honest, without the gold): mean reward on temporal questions, and the share > 0 there.
"""
import json
import sys

EPS = 1e-9
PRIVILEGED = {"oracle", "destroyer", "oracle-padding"}
REFERENCE = {"no-op", "random", "resolver"}


def summarize(rows):
    by = {}
    for r in rows:
        by.setdefault(r["agent"], []).append(r)
    first = lambda r: r["scores"][0]
    oracle = by["oracle"]
    room = [r for r in oracle if first(r)["p_old"] < 1.0]
    o_pos = sum(first(r)["reward"] > EPS for r in room) / max(len(room), 1)
    o_mean = sum(first(r)["reward"] for r in oracle) / len(oracle)
    d = [r for r in by["destroyer"] if r["edits"] > 0 and first(r)["p_old"] > 0 and r["evidence_recall_old"] > 0 and r["category"] != 5]
    d_neg = sum(first(r)["reward"] < -EPS for r in d) / max(len(d), 1)
    only = [r for r in d if not r.get("answer_elsewhere", False)]
    d_only = sum(first(r)["reward"] < -EPS for r in only) / max(len(only), 1)
    tricks = {a: rs for a, rs in by.items() if a not in PRIVILEGED | REFERENCE}
    means = {a: sum(first(r)["reward"] for r in rs) / len(rs) for a, rs in tricks.items()}
    pos = {a: sum(first(r)["reward"] > EPS for r in rs) / len(rs) for a, rs in tricks.items()}
    worst_mean = max(means, key=means.get)
    worst_pos = max(pos, key=pos.get)
    o_by_q = {r["question_id"]: first(r)["reward"] for r in oracle}
    padded = [r for r in by.get("oracle-padding", []) if first(r)["reward"] > o_by_q[r["question_id"]] + EPS]
    res = [r for r in by.get("resolver", []) if r["category"] == 2]
    res_mean = sum(first(r)["reward"] for r in res) / max(len(res), 1)
    res_pos = sum(first(r)["reward"] > EPS for r in res) / max(len(res), 1)
    return (
        f"{o_mean:+.3f}",
        f"{100 * o_pos:.1f} %",
        f"{100 * d_neg:.1f} % of {len(d)}; {100 * d_only:.1f} % of {len(only)}",
        f"{worst_mean} {means[worst_mean]:+.3f}",
        f"{worst_pos} {100 * pos[worst_pos]:.1f} %",
        f"{len(padded)}/{len(by.get('oracle-padding', []))}",
        f"{res_mean:+.3f}, {100 * res_pos:.0f} % > 0",
    )


def main():
    header = ("design", "oracle mean", "oracle > 0 (p_old < 1)", "destroyer < 0 (evidence read; and the answer's only statement)", "best trick mean", "trick most often > 0",
              "padding raised", "resolver, temporal")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for arg in sys.argv[1:]:
        label, path = arg.split("=", 1)
        rows = [json.loads(line) for line in open(path)]
        print("| " + " | ".join((label,) + summarize(rows)) + " |")


if __name__ == "__main__":
    main()
