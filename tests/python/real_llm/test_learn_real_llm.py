"""The Learn service against a real model (Qwen2.5-Coder-0.5B-Instruct on CPU, scripts/llm-server.py), through
the real gRPC server and the Python client, and one short epoch of examples/tf_grpo/loop.py.

Why this exists: test_learn.py scripts the LLM's replies; this tier shows that a real model's replies to the
three stage prompts parse (a summary, JSON operations with every unusable one explained, a plan or a fallback
that says why) and that the Training-Free GRPO loop runs end to end on a real policy. No assertion depends on
the model's wording or wisdom: only on the mechanics (well-formed responses, the version moving iff the plan
was applied, the library rendered into the policy's prompt exactly as FormatForPrompt renders it, rewards in
[0, 1]). The epoch is kept short (two tasks, three rollouts of at most 32 tokens) so the file takes a few
minutes on two cores.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys

import pytest

from conftest import running_server
from memgym import MemgymClient, Trajectory
from real_llm.conftest import ROOT, memgym_flags

LOOP = ROOT / "examples" / "tf_grpo" / "loop.py"
LIBRARY = "[G0]. Check the arithmetic once more before giving the final answer."
SEED_OPTIONS = {"add", "modify", "merge", "delete"}


def load_loop():
    spec = importlib.util.spec_from_file_location("tf_grpo_loop", LOOP)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def check_operations(text: str, *, max_operations: int = 32) -> list:
    """``text`` is a JSON array of operations in the Training-Free GRPO design's vocabulary, each with what its kind needs."""
    ops = json.loads(text or "[]")
    assert isinstance(ops, list) and len(ops) <= max_operations, text
    for op in ops:
        assert op.get("option") in SEED_OPTIONS, op
        if op["option"] in ("add", "modify", "merge"):
            assert isinstance(op.get("experience"), str) and op["experience"].strip(), op
        if op["option"] == "modify":
            assert re.fullmatch(r"G\d+", op["modified_from"]), op
        if op["option"] == "merge":
            assert len(op["merged_from"]) >= 2 and all(re.fullmatch(r"G\d+", i) for i in op["merged_from"]), op
        if op["option"] == "delete":
            assert re.fullmatch(r"G\d+", op["delete_id"]), op
    return ops


def without_confidence(ops: list) -> list:
    return [{k: v for k, v in op.items() if k != "confidence"} for op in ops]


@pytest.fixture(scope="module")
def learn_client(llm):
    with running_server(*memgym_flags(llm)) as address, MemgymClient(address, timeout=600) as client:
        yield client


def test_stage_rpcs_on_real_replies(learn_client):
    right = Trajectory("What is 12 * 7?", "12 * 7 = 84.\nAnswer: 84", 1.0, "84")
    wrong = Trajectory("What is 12 * 7?", "12 * 7 = 74.\nAnswer: 74", 0.0, "84")
    # Stage 1: a summary (numbered steps, for a reasonable model; only non-empty is asserted).
    summary = learn_client.summarize_trajectory(right).summary
    assert summary.strip() and summary == summary.strip()
    # Stage 2: JSON operations, possibly none, every rejected one explained; or a skip that says why.
    right.summary, wrong.summary = summary, "1. Multiplied 12 by 7 and got 74."
    ext = learn_client.extract_group_operations([right, wrong], LIBRARY, max_operations=2)
    assert ext.confidence == 1.0
    ops = check_operations(ext.operations_json, max_operations=2)
    assert all(r.strip() for r in ext.rejected)
    if ext.skipped:
        assert ext.skipped.startswith("stage 2") and ops == []
    for op in ops:
        assert op["option"] in ("add", "modify")  # the extraction prompt's vocabulary
    # Stage 3: a plan, or the groups' operations flattened with the reason.
    proposed = [
        [{"option": "add", "experience": "Multiply the tens and the units separately, then add them."}],
        [{"option": "add", "experience": "Check a product by estimating it first."}],
    ]
    plan = learn_client.consolidate_operations(proposed, LIBRARY)
    plan_ops = check_operations(plan.operations_json)
    assert all(r.strip() for r in plan.rejected)
    if plan.fallback:
        assert plan_ops == [op for group in proposed for op in group]


def test_one_epoch_of_the_tf_grpo_loop(learn_client, llm):
    loop = load_loop()
    bank = "tf-grpo-test"
    learn_client.create_bank(bank)
    learn_client.add_experience(bank, "Give the final answer as a plain number.")
    rendered = learn_client.format_for_prompt(bank, system=loop.SYSTEM).text
    assert rendered == f"{loop.SYSTEM}\n\n# Learned Experiences\n[G0]. Give the final answer as a plain number."
    tasks = [("What is 37 * 23?", "851"), ("What is 15% of 240?", "36")]
    logged = []
    (epoch,) = loop.run(
        learn_client, llm.url, llm.model, bank, tasks=tasks, epochs=1, group_size=3, max_tokens=32, log=logged.append
    )
    # The policy saw the library exactly as FormatForPrompt rendered it.
    assert epoch.system_prompt == rendered
    policy = [r for r in llm.requests() if r["messages"][0]["content"].startswith(loop.SYSTEM)]
    assert len(policy) >= 6 and all(r["messages"][0]["content"] == rendered for r in policy[-6:])
    # Rewards are numbers in [0, 1], one per rollout, and agree with the outputs.
    assert [len(g) for g in epoch.rewards] == [3, 3]
    for (question, answer), rewards, outputs in zip(tasks, epoch.rewards, epoch.outputs):
        for r, out in zip(rewards, outputs):
            assert isinstance(r, float) and 0.0 <= r <= 1.0 and r == loop.reward(out, answer)
    # The LearnFromGroup response is well-formed.
    resp = epoch.response
    assert len(resp.groups) == 2
    for rewards, g in zip(epoch.rewards, resp.groups):
        assert len(g.summaries) == 3 and all(r.strip() for r in g.rejected)
        varies = max(rewards) > min(rewards)
        assert g.HasField("confidence") == varies
        if varies:
            assert g.confidence == pytest.approx(min(1.0, max(rewards) - min(rewards)))
        else:
            assert g.skipped == "no reward variation"
        group_ops = check_operations(g.operations_json)
        if g.skipped:
            assert group_ops == []
    plan = check_operations(resp.plan_json)
    assert resp.applied == bool(plan) and len(resp.results) == len(plan)  # one result per planned operation
    if resp.fallback:  # the groups' operations flattened (the plan adds the batch's confidence)
        flat = [op for g in resp.groups for op in json.loads(g.operations_json or "[]")]
        assert without_confidence(plan) == without_confidence(flat)
    # The version moves iff the plan was applied.
    now = learn_client.get_bank(bank).version
    assert resp.version == now
    assert (now != epoch.version_before) == resp.applied
    if resp.applied:
        assert plan and now > epoch.version_before
    # The next epoch's prompt is the library as it is now, rendered by FormatForPrompt.
    library = {e.id: e.text for e in learn_client.iter_experiences(bank)}
    assert library == epoch.library
    expected = loop.SYSTEM + "\n\n# Learned Experiences\n" + "\n".join(f"[{k}]. {v}" for k, v in library.items())
    assert loop.render(learn_client, bank) == (expected if library else loop.SYSTEM)
    assert any(line.startswith("== epoch 1/1: mean reward") for line in logged)
    print("\n" + "\n".join(logged))  # what the epoch did (shown with -s)
