#!/usr/bin/env python3
"""Training-Free GRPO end to end: a real LLM as the policy, memgym as the learner.

Why this exists: it shows the whole loop of Training-Free GRPO on memgym with nothing mocked. Each epoch
the experience library (a memgym bank) is rendered into the policy's system prompt by ``FormatForPrompt``
(seed 000's injection: "{system}\\n\\n# Learned Experiences\\n[G0]. ..."), the policy (any
OpenAI-compatible chat endpoint, called directly with ``urllib``) answers every task ``G`` times at
temperature 0.7, each answer is rewarded 1/0 by exact match, and ``LearnFromGroup`` turns the groups into
edits of the library (the server's own LLM endpoint does the summaries, the group operations and the
consolidation). No weights change; only the library does.

    python examples/tf_grpo/loop.py --memgym 127.0.0.1:50051 --llm-url http://127.0.0.1:PORT/v1 \\
        --model NAME --bank tf-grpo --epochs 2 --group-size 4

The memgym server must have an LLM endpoint (``memgym serve --llm-base-url URL --llm-model NAME``); it
may be the same endpoint as the policy's. Needs the ``memgym`` client (``pip install clients/python``).
``run()`` is importable: tests/python/real_llm/test_learn_real_llm.py runs one short epoch of it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from memgym import MemgymClient, MemgymError, Trajectory

#: Tasks with exact answers (arithmetic and unit conversions): (question, answer).
TASKS: List[Tuple[str, str]] = [
    ("What is 37 * 23?", "851"),
    ("How many seconds are in 2.5 hours?", "9000"),
    ("What is 15% of 240?", "36"),
    ("How many inches are in 3.5 feet?", "42"),
    ("What is 1001 - 487?", "514"),
    ("How many grams are in 2.75 kilograms?", "2750"),
]

#: The policy's system prompt; the library is appended to it by FormatForPrompt.
SYSTEM = (
    "You are a careful assistant. Work the task out in one or two short steps, then end your reply with "
    "a line 'Answer: <number>'."
)

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def extract_answer(output: str) -> Optional[str]:
    """The number after the last "Answer:" (else the last number in the reply), normalised ("250.0" → "250")."""
    tail = output.rsplit("Answer:", 1)[-1] if "Answer:" in output else output
    numbers = _NUMBER.findall(tail.replace(",", ""))
    if not numbers:
        return None
    value = float(numbers[0] if "Answer:" in output else numbers[-1])
    return str(int(value)) if value == int(value) else str(value)


def reward(output: str, answer: str) -> float:
    """1.0 when the reply's answer equals the expected one, else 0.0."""
    return 1.0 if extract_answer(output) == answer else 0.0


def chat(llm_url: str, model: str, system: str, user: str, *, temperature: float, max_tokens: int, seed: int, timeout: float = 300.0) -> str:
    """One chat completion from an OpenAI-compatible endpoint (``{llm_url}/chat/completions``)."""
    body = {
        "model": model,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        "temperature": temperature,
        "max_tokens": max_tokens,
        "seed": seed,
    }
    req = urllib.request.Request(
        llm_url.rstrip("/") + "/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())["choices"][0]["message"]["content"] or ""


def render(client: MemgymClient, bank: str) -> str:
    """The policy's system prompt with the library injected (FormatForPrompt, seed 000's format)."""
    return client.format_for_prompt(bank, system=SYSTEM).text


@dataclass
class Epoch:
    """What one epoch did."""

    epoch: int
    system_prompt: str
    rewards: List[List[float]]
    outputs: List[List[str]]
    response: Any  # the LearnFromGroupResponse
    version_before: int
    seconds: float
    library: Dict[str, str] = field(default_factory=dict)

    @property
    def mean_reward(self) -> float:
        flat = [r for g in self.rewards for r in g]
        return sum(flat) / len(flat) if flat else 0.0


def run(
    client: MemgymClient,
    llm_url: str,
    model: str,
    bank: str,
    *,
    tasks: Sequence[Tuple[str, str]] = TASKS,
    epochs: int = 2,
    group_size: int = 4,
    temperature: float = 0.7,
    max_tokens: int = 96,
    seed: int = 0,
    learn_timeout: float = 1800.0,
    log: Callable[[str], None] = print,
) -> List[Epoch]:
    """The loop: per epoch, render the library, roll out ``group_size`` answers per task, reward them and
    LearnFromGroup on the groups. The bank is created if missing. Returns one ``Epoch`` per epoch."""
    client.create_bank(bank, if_not_exists=True)
    history: List[Epoch] = []
    for epoch in range(epochs):
        started = time.monotonic()
        system_prompt = render(client, bank)
        version_before = client.get_bank(bank).version
        groups, rewards, outputs = [], [], []
        for t, (question, answer) in enumerate(tasks):
            group, rs, outs = [], [], []
            for g in range(group_size):
                out = chat(llm_url, model, system_prompt, question, temperature=temperature, max_tokens=max_tokens,
                           seed=seed + 1000 * epoch + 10 * t + g)
                r = reward(out, answer)
                group.append(Trajectory(question, out, r, answer))
                rs.append(r)
                outs.append(out)
            groups.append(group)
            rewards.append(rs)
            outputs.append(outs)
        resp = client.learn_from_group(bank, groups, timeout=learn_timeout)
        library = {e.id: e.text for e in client.iter_experiences(bank)}
        e = Epoch(epoch, system_prompt, rewards, outputs, resp, version_before, time.monotonic() - started, library)
        history.append(e)
        log(f"== epoch {epoch + 1}/{epochs}: mean reward {e.mean_reward:.3f} ({e.seconds:.0f} s)")
        for (question, answer), rs, result in zip(tasks, rewards, resp.groups):
            why = f" skipped: {result.skipped}" if result.skipped else f" operations: {result.operations_json}"
            log(f"   {question!r} (answer {answer}) rewards {rs}{why}")
            for rejected in result.rejected:
                log(f"     rejected: {rejected}")
        if resp.fallback:
            log(f"   consolidation fell back: {resp.fallback}")
        log(f"   plan: {resp.plan_json or '[]'}; applied: {resp.applied}; bank version {version_before} -> {resp.version}")
        for r in resp.results:
            if r.message:
                log(f"   result: {r.message}")
        log("   library:" + ("".join(f"\n     [{k}]. {v}" for k, v in library.items()) or " (empty)"))
    return history


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--memgym", default="127.0.0.1:50051", help="memgym server address")
    p.add_argument("--llm-url", required=True, help="the policy's OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--model", required=True, help="the policy's model name")
    p.add_argument("--bank", default="tf-grpo", help="the experience bank (created if missing)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--group-size", type=int, default=4, help="rollouts per task (G)")
    p.add_argument("--max-tokens", type=int, default=96, help="the policy's max_tokens per rollout")
    p.add_argument("--seed", type=int, default=0, help="base of the rollouts' sampling seeds")
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--fresh", action="store_true", help="delete the bank first")
    args = p.parse_args(argv)
    with MemgymClient(args.memgym, timeout=60.0) as client:
        if args.fresh:
            try:
                client.delete_bank(args.bank)
            except MemgymError:
                pass
        started = time.monotonic()
        history = run(
            client, args.llm_url, args.model, args.bank, epochs=args.epochs, group_size=args.group_size,
            temperature=args.temperature, max_tokens=args.max_tokens, seed=args.seed,
        )
        print(f"== done in {time.monotonic() - started:.0f} s")
        print("reward per epoch: " + ", ".join(f"{e.mean_reward:.3f}" for e in history))
        print("what the library learned:")
        final = {e.id: e.text for e in client.iter_experiences(args.bank)}
        print("".join(f"  [{k}]. {v}\n" for k, v in final.items()) or "  (nothing)", end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
