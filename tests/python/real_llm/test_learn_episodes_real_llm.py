"""`memgym learn` with the real model (Qwen2.5-Coder-0.5B-Instruct on CPU, scripts/llm-server.py) as both the
policy and the server's learner: one tiny epoch of Training-Free GRPO on memgym's own episodes, then a tiny A/B.

Why this exists: tests/api/learn_loop.rs drives the loop with a scripted endpoint; this shows that real replies
flow through every stage (rollouts that score, groups the learner reads, a library exported, arms played on the
same seeds) and that the epoch's trajectories replay byte for byte without the model. Small on purpose (2 train
questions × G = 2, 2 test questions, 2 turns of at most 96 tokens) so it takes a minute or two on two cores. No
assertion depends on the model's wording, its rewards or what it learns.
"""

from __future__ import annotations

import json
import subprocess

from conftest import memgym_bin, running_server
from real_llm.conftest import memgym_flags


def test_one_tiny_epoch_and_a_tiny_ab(llm, tmp_path):
    out = tmp_path / "learn"
    with running_server(*memgym_flags(llm)) as address:
        cmd = [
            str(memgym_bin()), "learn", "--addr", address, "--bank", "tiny", "--out", str(out),
            "--policy-base-url", llm.url, "--policy-model", llm.model, "--epochs", "1", "--train-limit", "2",
            "--group", "2", "--test-limit", "2", "--ab-group", "1", "--learn-batch", "2", "--max-turns", "2",
            "--max-tokens", "96", "--concurrency", "1", "--policy-timeout-ms", "180000",
        ]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "# memgym learn report" in r.stdout and "**final − none**" in r.stdout, r.stdout

        s = json.loads((out / "summary.json").read_text())
        epoch = s["epochs"][0]
        assert epoch["rollouts"]["scored"] == 4, epoch["rollouts"]["failures"]
        steps = [json.loads(line) for line in (out / "epoch-0" / "learned.jsonl").read_text().splitlines()]
        assert len(steps) == 1 and steps[0]["questions"] == s["settings"]["train"]
        for group, skipped in zip(steps[0]["rewards"], steps[0]["skipped"]):
            assert len(group) == 2 and all(0.0 <= x <= 1.0 for x in group)
            if len(set(group)) == 1:
                assert skipped == "no reward variation"
        # The version moves iff the plan was applied; the export holds what the prompt text lists.
        assert (steps[0]["version_after"] > steps[0]["version_before"]) == steps[0]["applied"]
        library = (out / "epoch-0" / "library.txt").read_text()
        exported = json.loads((out / "epoch-0" / "library.json").read_text())
        assert library.count("[G") == epoch["library_size"] == len(exported["experiences"])

        # The A/B: no library against the final one, the same questions and seeds.
        arms = {a["name"]: a for a in s["ab"]["arms"]}
        assert list(arms) == ["none", "final"] and all(a["scored"] == 2 for a in arms.values())
        contrast = s["ab"]["contrasts"][0]
        if arms["final"].get("same_as") == "none":
            # Nothing learned: the final library is the empty one, so that arm is none's rollouts.
            assert library == "" and not (out / "ab" / "final").exists()
            assert contrast["all"]["mean"] == 0.0 and not contrast["significant"]
        else:
            runs = [json.loads((out / "ab" / name / "run.json").read_text()) for name in arms]
            assert runs[0]["questions"] == runs[1]["questions"] == s["settings"]["test"]
            assert runs[0]["seed"] == runs[1]["seed"]
        assert (contrast["a"], contrast["b"], contrast["all"]["n"]) == ("final", "none", 2)
        assert contrast["all"]["lo"] <= contrast["all"]["mean"] <= contrast["all"]["hi"]

        # The epoch's rollouts replay without the model, on the same server.
        before = len(llm.requests())
        rp = subprocess.run([str(memgym_bin()), "replay", str(out / "epoch-0" / "trajectories.jsonl"), "--addr", address],
                            capture_output=True, text=True, timeout=300)
        assert rp.returncode == 0 and "4 reproduced byte for byte, 0 diverged" in rp.stdout, rp.stdout + rp.stderr
        assert len(llm.requests()) == before
