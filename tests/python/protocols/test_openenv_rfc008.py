"""OpenEnv RFC 008's runtime contracts, checked the way the RFC frames them, with openenv 0.10.0's own code.

The 0.10 wheel specifies ``runtime.seed_control``, ``runtime.episode_determinism``,
``runtime.episode_isolation`` and ``semantic.replayability`` (its severity policies list them) but ships no
grader for them yet. This test builds a runtime plan with the wheel's own ``RuntimePlan`` model (a reset with
an episode id, a seed and options, then public actions) and plays it over ``GenericEnvClient``'s WebSocket:

- **seed control and determinism**: the plan played on two fresh sessions gives the same observations,
  rewards and breakdown (timings aside: any ``*_ms`` field), and ``state()`` names the requested episode id;
  the same plan with another seed changes what the seeded tool (``sample_memory``, strategy random) returns;
- **isolation**: two plans played interleaved on two concurrent sessions each give what they give alone;
- **replayability**: the tool calls the server recorded for an episode (gRPC GetEpisode's trace), replayed on
  a new session, reach the same reward and breakdown.

Episode ids are never reused on memgym (an ended id is refused), so each run of a plan gets a fresh id; a
grader that replays a plan with the very same id would be refused, and that is noted in the book.
"""

from __future__ import annotations

import json
import uuid

from openenv import GenericEnvClient
from openenv.validation.runtime.contracts import RuntimePlan
from protocols.conftest import OPENENV_VERSION, require_package

require_package("openenv", OPENENV_VERSION, "openenv")

ACTIONS = [
    {"type": "call_tool", "tool_name": "search_memory", "arguments": {"query": "LGBTQ support group", "top_k": 3}},
    {"type": "call_tool", "tool_name": "sample_memory", "arguments": {"k": 4, "strategy": "random"}},
    {"type": "call_tool", "tool_name": "manage_memory", "arguments": {"operation": "update", "memory_id": "m0000",
     "content": "Caroline attended an LGBTQ support group on 7 May 2023 and found the transgender stories inspiring."}},
    {"type": "call_tool", "tool_name": "delete_memory", "arguments": {"memory_id": "m0002"}},
    {"type": "score"},
]


def plan(seed: int, question: str = "conv-26:q0") -> RuntimePlan:
    return RuntimePlan.model_validate({
        "plan_schema_version": "1",
        "reset": {"episode_id": f"rfc008-{uuid.uuid4().hex[:12]}", "seed": seed,
                  "options": {"question_id": question, "max_steps": 10}},
        "actions": ACTIONS,
    })


def scrub(value, episode_id):
    """The observation without what differs by design: the episode id (fresh per run) and timings."""
    if isinstance(value, dict):
        return {k: scrub(v, episode_id) for k, v in value.items() if not k.endswith("_ms")}
    if isinstance(value, list):
        return [scrub(v, episode_id) for v in value]
    if isinstance(value, str):
        return value.replace(episode_id, "<episode>")
    return value


class Run:
    """One plan on one session, a step at a time (so two can interleave)."""

    def __init__(self, servers, p: RuntimePlan):
        self.plan, self.env = p, GenericEnvClient(base_url=servers.openenv).sync()
        self.env.__enter__()
        self.episode_id = p.reset.episode_id
        reset = self.env.reset(episode_id=self.episode_id, seed=p.reset.seed, **p.reset.options)
        assert self.env.state()["episode_id"] == self.episode_id, "the state names the requested episode"
        self.record = [scrub(reset.observation, self.episode_id)]
        self.left = list(p.actions)

    def step(self) -> bool:
        result = self.env.step(self.left.pop(0))
        self.record.append(scrub({"observation": result.observation, "reward": result.reward, "done": result.done,
                                  "metadata": result.metadata}, self.episode_id))
        return bool(self.left)

    def finish(self) -> list:
        while self.left:
            self.step()
        self.env.__exit__(None, None, None)
        return self.record


def test_seed_control_and_episode_determinism(servers):
    first, second = Run(servers, plan(7)).finish(), Run(servers, plan(7)).finish()
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)
    assert first[-1]["done"] is True and first[-1]["reward"] == first[-1]["metadata"]["reward"]
    # The seed is what the seeded tool draws with: another seed, another sample.
    other = Run(servers, plan(8)).finish()
    sampled = lambda record: record[2]["observation"]["result"]  # noqa: E731  (the sample_memory step)
    assert sampled(first) != sampled(other)


def test_episode_isolation_two_interleaved_sessions_each_match_their_solo_run(servers):
    alone_a, alone_b = Run(servers, plan(7)).finish(), Run(servers, plan(3, "conv-30:q1")).finish()
    a, b = Run(servers, plan(7)), Run(servers, plan(3, "conv-30:q1"))
    while a.left or b.left:
        if a.left:
            a.step()
        if b.left:
            b.step()
    assert json.dumps(a.finish(), sort_keys=True) == json.dumps(alone_a, sort_keys=True)
    assert json.dumps(b.finish(), sort_keys=True) == json.dumps(alone_b, sort_keys=True)


def test_a_recorded_episode_replays_to_the_same_reward(servers, grpc_client):
    p = plan(11)
    run = Run(servers, p)
    for _ in range(len(ACTIONS) - 1):  # every action but the score: read the record first
        run.step()
    trace = grpc_client.get_episode(run.episode_id, include_trace=True).trace
    recorded = [{"type": "call_tool", "tool_name": t.tool_name, "arguments": json.loads(t.arguments_json)} for t in trace]
    assert [a["tool_name"] for a in recorded] == [a["tool_name"] for a in ACTIONS[:-1]]
    original = run.finish()[-1]
    replay = RuntimePlan.model_validate({
        "plan_schema_version": "1",
        "reset": {"episode_id": f"rfc008-replay-{uuid.uuid4().hex[:8]}", "seed": 11, "options": p.reset.options},
        "actions": recorded + [{"type": "score"}],
    })
    replayed = Run(servers, replay).finish()[-1]
    assert replayed["reward"] == original["reward"]
    assert replayed["metadata"] == original["metadata"]
