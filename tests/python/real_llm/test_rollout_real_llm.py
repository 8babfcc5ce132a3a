"""`memgym rollout` with the real model as the policy (Qwen2.5-Coder-0.5B-Instruct on CPU, served by
scripts/llm-server.py), in both tool formats, then `memgym replay` of what it recorded.

Why this exists: the Rust tests drive the rollout loop with a scripted endpoint; this shows that a real model's
replies, whatever they are, become trajectories that score, and that those trajectories replay byte for byte
without the model. Small on purpose (2 test questions × G = 2, 2 turns, 96 tokens per reply, per format): the
model takes seconds per turn on CPU. No assertion depends on the model's wording or on its reward.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import memgym_bin


def rollout(llm, out, fmt: str, limit: int = 2, max_tokens: int = 96, extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    cmd = [
        str(memgym_bin()), "rollout", "--policy-base-url", llm.url, "--policy-model", llm.model, "--out", str(out),
        "--tool-format", fmt, "--split", "test", "--limit", str(limit), "--group", "2", "--max-turns", "2",
        "--max-tokens", str(max_tokens), "--temperature", "0.7", "--concurrency", "1", "--policy-timeout-ms", "180000", *extra,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900)


@pytest.mark.parametrize("fmt", ["openai", "hermes"])
def test_the_real_model_plays_groups_and_its_trajectories_replay(llm, tmp_path, fmt):
    before = len(llm.requests())
    out = tmp_path / fmt
    r = rollout(llm, out, fmt)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "# memgym rollout report" in r.stdout

    ts = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert len(ts) == 4 and all(t["status"] == "scored" for t in ts), [t.get("failure") for t in ts]
    assert {t["question_id"] for t in ts} and len({t["question_id"] for t in ts}) == 2
    for t in ts:
        assert t["schema"] == "memgym.rollout/1" and t["tool_format"] == fmt and t["model"] == llm.model
        assert 1 <= len(t["turns"]) <= 2
        assert t["stop"] in ("no_call", "max_turns")
        # The opening is the verl row's prompt: system then user, the question in the user message.
        assert [m["role"] for m in t["messages"][:2]] == ["system", "user"]
        assert t["question"] in t["messages"][1]["content"]
        if fmt == "hermes":
            assert "<tools>" in t["messages"][0]["content"]
        for turn in t["turns"]:
            assert turn["reply"]["choices"][0]["message"]["role"] == "assistant"
            assert turn["prompt_tokens"] > 0 and turn["completion_tokens"] > 0
            for c in turn["calls"]:
                assert c["mode"] in ("strict", "lenient", "invalid") and c["outcome"] in ("done", "refused", "unread")
                assert c["result"], "every call's result is shown to the model"
        score = t["score"]
        assert score["evaluator"] == "answer-phrase" and score["reward"] == pytest.approx(score["p_new"] - score["p_old"] - score["growth"])
    # Samples of a group share the episode seed and differ in the sampling seed.
    for q in {t["question_id"] for t in ts}:
        group = [t for t in ts if t["question_id"] == q]
        assert len({t["episode_seed"] for t in group}) == 1 and len({t["sampling_seed"] for t in group}) == 2

    # The model was asked once per recorded turn: no hidden retries, nothing unrecorded.
    logged = llm.requests()[before:]
    assert len(logged) == sum(len(t["turns"]) for t in ts)
    # Each recorded reply is what the model wrote: its text, or the tool_calls the server read from it.
    recorded = [turn["reply"]["choices"][0]["message"] for t in ts for turn in t["turns"]]
    for e in logged:
        if e["tool_calls"]:
            assert any(m.get("tool_calls") and [c["function"] for c in m["tool_calls"]] == [c["function"] for c in e["tool_calls"]] for m in recorded)
        else:
            assert any(m.get("content") == e["reply"] for m in recorded), e["reply"][:200]

    report = json.loads((out / "report.json").read_text())
    assert report["scored"] == 4 and report["failed"] == 0 and report["run"]["tool_format"] == fmt
    assert report["grpo"]["groups"] == 2
    assert sum(m["calls"] for m in report["modes"].values()) == sum(len(turn["calls"]) for t in ts for turn in t["turns"])
    assert (out / "rollouts.parquet").stat().st_size > 0

    # Replayed without the model: every output byte-identical, every reward bit-identical.
    r = subprocess.run([str(memgym_bin()), "replay", str(out / "trajectories.jsonl")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "4 reproduced byte for byte, 0 diverged" in r.stdout, r.stdout

    # The same command again plays nothing.
    before = len(llm.requests())
    r = rollout(llm, out, fmt)
    assert r.returncode == 0 and len(llm.requests()) == before, r.stderr


def test_tool_choice_required_gives_strict_calls_that_replay(llm, tmp_path):
    """`--tool-choice required` against the local server's grammar: every reply that fits its token budget is
    schema-valid calls, read strictly, so no format failure is left but a cut reply; the run replays with the
    constraint checked."""
    out = tmp_path / "required"
    r = rollout(llm, out, "openai", limit=1, max_tokens=192, extra=("--tool-choice", "required"))
    assert r.returncode == 0, r.stdout + r.stderr
    ts = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert len(ts) == 2 and all(t["status"] == "scored" for t in ts)
    finished = [turn for t in ts for turn in t["turns"] if turn["reply"]["choices"][0]["finish_reason"] != "length"]
    assert finished, "at least one reply fits 192 tokens"
    for turn in finished:
        assert turn["reply"]["choices"][0]["finish_reason"] == "tool_calls", turn["reply"]
        assert turn["calls"] and all(c["mode"] == "strict" for c in turn["calls"]), turn["calls"]
    for t in ts:  # under required a policy cannot stop by answering; only a reply cut mid-call ends it early
        assert t["stop"] == "max_turns" or t["turns"][-1]["reply"]["choices"][0]["finish_reason"] == "length", t["stop"]
    report = json.loads((out / "report.json").read_text())
    assert report["run"]["tool_choice"] == "required"
    split = report["format_or_choice"]
    cut = sum(1 for t in ts for turn in t["turns"]) - len(finished)
    assert sum(split["format_failures"].values()) == split["format_failures_cut"], "only a cut reply fails the format"
    assert split["format_failures_cut"] == 0 or cut > 0, split
    assert all(e["constraint"]["tool_choice"] == "required" for e in llm.requests()[-4:])
    r = subprocess.run([str(memgym_bin()), "replay", str(out / "trajectories.jsonl")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "every reply checked for a tool call" in r.stdout, r.stdout + r.stderr
