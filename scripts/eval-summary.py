#!/usr/bin/env python3
"""Statistics of a `memgym eval` run with LLM evaluators that its table does not print, for README's
measurement of the LLM evaluators against answer recall.

    memgym eval --evaluator answer-recall --evaluator llm-f1 --evaluator llm-judge ... --episodes-out EPISODES
    python3 scripts/eval-summary.py EPISODES [REQUESTS]

EPISODES: the rows `--episodes-out` wrote (one JSON object per agent × question, every evaluator's p_old,
p_new and reward). REQUESTS (optional): the `--log-requests` file of scripts/llm-server.py for that run.

Prints, per category: mean p_old under each evaluator (for llm-f1 this is the model's answer F1 on M₀
against gold: a sanity check of the model itself); per agent: sign agreement of every pair of evaluators
and the episodes where the first two disagree, grouped by which one moved; from REQUESTS: requests, median
seconds and prompt tokens per kind (QA answer, judge), and the judge's verdicts.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import Counter, defaultdict

EPS = 1e-9


def sign(x: float) -> int:
    return 0 if abs(x) <= EPS else (1 if x > 0 else -1)


def main() -> None:
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    rows = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8") if line.strip()]
    if not rows:
        sys.exit("no episode rows")
    evaluators = [s["evaluator"] for s in rows[0]["scores"]]

    print("mean p_old (M₀) per category, over the questions")
    print(f"{'category':<10} {'n':>4} " + " ".join(f"{e:>14}" for e in evaluators))
    first_per_question = {}
    for r in rows:
        first_per_question.setdefault(r["question_id"], r)
    by_cat = defaultdict(list)
    for r in first_per_question.values():
        by_cat[r["category"]].append(r)
    for cat in sorted(by_cat) + ["all"]:
        group = list(first_per_question.values()) if cat == "all" else by_cat[cat]
        means = [statistics.fmean(r["scores"][i]["p_old"] for r in group) for i in range(len(evaluators))]
        print(f"{cat!s:<10} {len(group):>4} " + " ".join(f"{m:>14.3f}" for m in means))

    print("\nsign agreement per agent (share of episodes with the same sign of reward)")
    pairs = [(i, j) for i in range(len(evaluators)) for j in range(i + 1, len(evaluators))]
    print(f"{'agent':<10} {'n':>4} " + " ".join(f"{evaluators[i] + '~' + evaluators[j]:>24}" for i, j in pairs))
    by_agent = defaultdict(list)
    for r in rows:
        by_agent[r["agent"]].append(r)
    for agent, group in list(by_agent.items()) + [("all", rows)]:
        shares = [statistics.fmean(sign(r["scores"][i]["reward"]) == sign(r["scores"][j]["reward"]) for r in group) for i, j in pairs]
        print(f"{agent:<10} {len(group):>4} " + " ".join(f"{s:>24.1%}" for s in shares))

    if len(evaluators) >= 2:
        a, b = evaluators[0], evaluators[1]
        print(f"\nwhere {a} and {b} disagree: (sign {a}, sign {b}) per agent")
        for agent, group in by_agent.items():
            c = Counter((sign(r["scores"][0]["reward"]), sign(r["scores"][1]["reward"])) for r in group)
            off = {k: v for k, v in sorted(c.items()) if k[0] != k[1]}
            print(f"  {agent:<10} " + ", ".join(f"({k[0]:+d},{k[1]:+d}) ×{v}" for k, v in off.items()))

    if len(sys.argv) == 3:
        reqs = [json.loads(line) for line in open(sys.argv[2], encoding="utf-8") if line.strip()]
        kinds = defaultdict(list)
        verdicts = Counter()
        for q in reqs:
            text = q["messages"][-1]["content"]
            kind = "judge" if "strict grader" in text else ("edit" if len(q["messages"]) > 1 else "answer")
            kinds[kind].append(q)
            if kind == "judge":
                verdicts[q["reply"].strip().split()[0].strip(".*").upper() if q["reply"].strip() else "(empty)"] += 1
        print("\nLLM requests (scripts/llm-server.py --log-requests)")
        for kind, qs in kinds.items():
            print(
                f"  {kind:<7} {len(qs):>5} requests, median {statistics.median(q['seconds'] for q in qs):.2f} s, "
                f"median prompt {statistics.median(q['prompt_tokens'] for q in qs):.0f} tokens, "
                f"median reply {statistics.median(q['completion_tokens'] for q in qs):.0f} tokens"
            )
        if verdicts:
            print("  judge verdicts: " + ", ".join(f"{k} ×{v}" for k, v in verdicts.most_common()))


if __name__ == "__main__":
    main()
