"""verl's own agent-loop worker runs memgym_agent trajectories against the real memgym server.

Why this exists: this is the path a verl user's rollout takes, run with verl's code (``AgentLoopWorker``:
the tool registry reading examples/verl/memgym_tool_config.yaml, ``ToolAgentLoop``'s state machine and
hermes parser, the worker's padding and post-processing, ``DataProto.concat`` across workers,
``extract_reward``), with only the LLM replaced: ``ScriptedLLM`` answers each ``generate`` with the next
scripted assistant turn as token ids of the real Qwen2.5 tokenizer. The config is the launch script's own
overrides. What must hold, in every supported release and with the ``naive``, ``dapo`` or ``gdpo`` reward
manager configured (verl's own reward-loop worker is handed to the agent-loop workers, as the trainer does),
and without reward-loop handles (the reward-model path):

- 64 trajectories in 8 groups of 8: in the first four groups every trajectory follows another plan (no
  tool call, search, create, delete, merge, split, update, a long search); the last four call no tool at
  all, and they run on a worker of their own, whose outputs must still concatenate with the other's;
- each trajectory has its own episode, closed at the end;
- the reward reaching each sample (``rm_scores``) equals ``ScoreEpisode``'s for a replay of its tool
  calls on a fresh episode, and the ``memgym_*`` breakdown is there for every sample;
- tool texts fit ``max_tool_response_length`` (20-hit searches keep whole hits and say how many more);
- two steps whose request ids repeat (``full_determinism``, verl 0.9.1) never share an episode;
- a trajectory whose episode is reaped mid-way fails the rollout with an error naming the cause.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import time
from collections import defaultdict
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import pyarrow.parquet as pq
import pytest

from conftest import running_server
from with_verl.conftest import compose, launch_overrides, release

from memgym import MemgymClient, MemgymError
from memgym_verl.agent_loop import AGENT_NAME, OVERLONG_KEY
from memgym_verl.reward import BREAKDOWN_KEYS

TOOL_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.S)
TOOL_RESPONSE = re.compile(r"<tool_response>\n(.*?)\n</tool_response>", re.S)
MEMORY_IDS = re.compile(r"\[(m\d{4})")
QUESTION = re.compile(r"Target question: (.*)")

Step = Callable[[str, str, List[str]], Tuple[str, Dict[str, Any]]]

#: Scripted policies: each step maps (question, answer, memory ids in the last tool response) to a call.
PLANS: Dict[str, List[Step]] = {
    "none": [],
    "search": [lambda q, a, ids: ("search_memory", {"query": q})],
    "create": [lambda q, a, ids: ("manage_memory", {"operation": "create", "content": f"{q} {a}."})],
    "delete": [
        lambda q, a, ids: ("search_memory", {"query": q, "top_k": 3}),
        lambda q, a, ids: ("delete_memory", {"memory_ids": ids[:3], "reason": "scripted"}),
    ],
    "merge": [
        lambda q, a, ids: ("search_memory", {"query": q, "top_k": 2}),
        lambda q, a, ids: ("merge_memory", {"memory_ids": ids[:2], "strategy": "concatenate"}),
    ],
    "split": [
        lambda q, a, ids: ("search_memory", {"query": q, "top_k": 1}),
        lambda q, a, ids: ("split_memory", {"memory_id": ids[0], "split_criteria": "thematic"}),
    ],
    "update": [
        lambda q, a, ids: ("sample_memory", {"k": 3, "strategy": "diverse"}),
        lambda q, a, ids: ("manage_memory", {"operation": "update", "memory_id": ids[0], "content": f"{q} {a}."}),
    ],
    "long": [
        lambda q, a, ids: ("search_memory", {"query": q, "top_k": 20}),
        lambda q, a, ids: ("manage_memory", {"operation": "create", "content": f"{a} ({q})"}),
    ],
}
MIXED = list(PLANS)  # the first four groups: one trajectory per plan


class ScriptedLLM:
    """Stands in for verl's LLM server client: each ``generate`` returns the next scripted turn as token ids.

    A trajectory (``request_id``) gets a plan when it first asks: ``plan_for(question, k)`` for the k-th
    trajectory of that question. Each turn is one hermes ``<tool_call>`` (or the final answer), chosen from
    the decoded prompt: the target question and the memory ids in the last ``<tool_response>``.
    ``pause_before`` delays one plan's second turn (to let the server reap its episode).
    """

    def __init__(self, tokenizer, answers: Dict[str, str], plan_for: Callable[[str, int], str], pause: Optional[Tuple[str, float]] = None):
        self.tokenizer = tokenizer
        self.answers = answers
        self.plan_for = plan_for
        self.pause = pause
        self.plans: Dict[str, str] = {}
        self.counts: Dict[str, int] = defaultdict(int)
        self.calls = 0

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        self.calls += 1
        text = self.tokenizer.decode(prompt_ids)
        question = QUESTION.search(text).group(1).strip()
        if request_id not in self.plans:
            self.plans[request_id] = self.plan_for(question, self.counts[question])
            self.counts[question] += 1
        plan = self.plans[request_id]
        responses = TOOL_RESPONSE.findall(text)
        turn = len(responses)
        if self.pause and plan == self.pause[0] and turn == 1:
            await asyncio.sleep(self.pause[1])
        steps = PLANS[plan]
        if turn < len(steps):
            ids = MEMORY_IDS.findall(responses[-1]) if responses else []
            name, arguments = steps[turn](question, self.answers[question], ids)
            reply = f'<tool_call>\n{json.dumps({"name": name, "arguments": arguments})}\n</tool_call><|im_end|>'
        else:
            reply = "The memory is ready.<|im_end|>"
        return TokenOutput(token_ids=self.tokenizer.encode(reply, add_special_tokens=False), log_probs=None)


def reward_manager_overrides(name: str) -> List[str]:
    """The reward manager: ``reward.reward_manager.name`` in every supported release (0.7.1 to 0.9.1)."""
    return [f"reward.reward_manager.name={name}"]


class LocalRewardWorker:
    """verl's own ``RewardLoopWorker`` (the configured reward manager and reward function), called in-process
    the way the agent-loop worker calls its Ray handle: ``await handle.compute_score.remote(data)``.

    Build it inside the running event loop (the manager keeps the loop it was built on). ``calls`` counts
    the samples verl asked it to score.
    """

    def __init__(self, config):
        from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

        self.worker = RewardLoopWorker(config, None)
        self.calls = 0
        outer = self

        class _Remote:
            def remote(self, data):
                outer.calls += 1
                return outer.worker.compute_score(data)

        self.compute_score = _Remote()


def make_worker(config, llm, reward_workers=None):
    """An ``AgentLoopWorker`` of the release under test, talking to ``llm`` (no Ray, no GPU).

    ``reward_workers``: the reward-loop handles, as the trainer passes them when no reward model needs the
    GPUs (the usual case); None as on the reward-model path.
    """
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    params = inspect.signature(AgentLoopWorker.__init__).parameters
    if "llm_client" in params:  # 0.8.0 and later
        return AgentLoopWorker(config, llm_client=llm, reward_loop_worker_handles=reward_workers)

    class Worker(AgentLoopWorker):  # 0.7.1: "for recipe to change", a subclass may bring its server manager
        server_manager = llm

    return Worker(config, servers=[], load_balancer_handle=None, reward_loop_worker_handles=reward_workers)


def question_of(episode_id: str) -> str:
    """The question id in a trajectory's episode id (``{question_id}-{16 hex digits}``)."""
    return episode_id.rsplit("-", 1)[0]


def rows_of(verl_dataset, count: int) -> Tuple[Any, Dict[str, str]]:
    """The first ``count`` category 1-4 questions of the test split whose answers are short, and their answers."""
    table = pq.read_table(verl_dataset).to_pylist()
    picked = [r for r in table if r["extra_info"]["category"] != 5 and r["extra_info"]["split"] == "test"]
    picked = [r for r in picked if 0 < len(r["reward_model"]["ground_truth"]) <= 40][:count]
    assert len(picked) == count
    answers = {r["extra_info"]["question"]: r["reward_model"]["ground_truth"] for r in picked}
    return picked, answers


def build_batch(rows, path, tokenizer, config, n: int):
    """The rollout input as verl's trainer builds it: RLHFDataset → collate_fn → DataProto → repeat(n)."""
    import pyarrow as pa

    from verl.protocol import DataProto
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    pq.write_table(pa.Table.from_pylist(rows), path)
    dataset = RLHFDataset(data_files=[str(path)], tokenizer=tokenizer, config=config.data, processor=None)
    batch = DataProto.from_single_dict(collate_fn([dataset[i] for i in range(len(dataset))]))
    return batch.repeat(repeat_times=n, interleave=True)


def rollout_config(tmp_path, qwen_path, address: str, manager: str, extra: List[str] = ()):
    overrides = launch_overrides("run_grpo_memgym.sh", tmp_path, {"MODEL": qwen_path})
    keep = [o for o in overrides if o.startswith(("data.", "actor_rollout_ref.rollout.", "actor_rollout_ref.model."))]
    keep = [o for o in keep if not o.startswith(("data.train_files", "data.val_files"))]
    return compose(keep + reward_manager_overrides(manager) + list(extra))


def replay(client: MemgymClient, question_id: str, calls: List[Tuple[str, Dict[str, Any]]], tag: str) -> Any:
    """The same calls on a fresh episode of the same question; its ScoreEpisode result."""
    episode_id = f"replay-{tag}"
    client.create_episode(question_id, episode_id=episode_id)
    for name, arguments in calls:
        try:
            client.call_tool(episode_id, name, arguments)
        except MemgymError:
            pass  # refused in the rollout too: the policy saw the error text, no step was used
    scored = client.score_episode(episode_id)
    client.close_episode(episode_id)
    return scored


@pytest.mark.parametrize("manager", ["naive", "dapo", "gdpo"])
def test_64_trajectories_get_their_episode_reward(manager, tmp_path, server_address, qwen_path, tokenizer, verl_dataset, monkeypatch):
    from verl.protocol import DataProto
    from verl.trainer.ppo.reward import extract_reward

    monkeypatch.setenv("MEMGYM_ADDRESS", server_address)
    config = rollout_config(tmp_path, qwen_path, server_address, manager)
    rows, answers = rows_of(verl_dataset, 8)
    questions = [r["extra_info"]["question"] for r in rows]
    tool_groups = set(questions[:4])
    llm = ScriptedLLM(tokenizer, answers, lambda q, k: MIXED[k % len(MIXED)] if q in tool_groups else "none")
    batch = build_batch(rows, tmp_path / "rows.parquet", tokenizer, config, n=8)
    assert set(batch.non_tensor_batch["agent_name"]) == {AGENT_NAME}
    chunks = batch.chunk(2)  # as AgentLoopManager splits a batch over its workers
    reward_workers = []

    async def rollout():
        reward_workers.append(LocalRewardWorker(config))  # verl's reward loop with the configured manager
        workers = [make_worker(config, llm, reward_workers), make_worker(config, llm, reward_workers)]
        return await asyncio.gather(*(w.generate_sequences(c) for w, c in zip(workers, chunks)))

    outputs = asyncio.run(rollout())
    assert reward_workers[0].calls == 0, "memgym_agent set every reward: verl did not ask the reward manager"
    assert all(set(o.non_tensor_batch["memgym_steps_used"]) == {0.0} for o in outputs[1:]), "the second worker calls no tool"
    output = DataProto.concat(outputs)  # verl's own concatenation: fails on differing keys
    assert len(output) == 64

    reward_tensor, extra = extract_reward(output)
    assert "reward" not in extra and set(BREAKDOWN_KEYS) | {OVERLONG_KEY} <= set(extra)
    episode_ids = list(output.non_tensor_batch["memgym_episode_id"])
    assert len(set(episode_ids)) == 64

    client = MemgymClient(server_address)
    responses = tokenizer.batch_decode(output.batch["responses"], skip_special_tokens=False)
    limit = config.actor_rollout_ref.rollout.multi_turn.max_tool_response_length
    tool_texts = [t for r in responses for t in TOOL_RESPONSE.findall(r)]
    assert tool_texts and all(len(t) <= limit for t in tool_texts) and not any("(truncated)" in r for r in responses)
    fitted = [t.split("\n") for t in tool_texts if t.endswith("more lines)")]
    assert fitted, "the 20-hit searches were fitted to max_tool_response_length"
    assert all(all(MEMORY_IDS.match(line) for line in lines[:-1]) for lines in fitted)  # whole hits, best first
    plans_seen = defaultdict(int)
    for i, (episode_id, response) in enumerate(zip(episode_ids, responses)):
        calls = [(c["name"], c["arguments"]) for c in map(json.loads, TOOL_CALL.findall(response))]
        plans_seen[len(calls)] += 1
        expected = replay(client, question_of(episode_id), calls, f"{manager}-{i}")
        got = output.non_tensor_batch["memgym_reward"][i]
        assert got == expected.reward, (i, calls)
        assert output.non_tensor_batch["memgym_p_old"][i] == expected.p_old
        assert output.non_tensor_batch["memgym_steps_used"][i] == expected.steps_used
        assert output.non_tensor_batch[OVERLONG_KEY][i] == 0.0  # short responses
        assert float(reward_tensor[i].sum()) == pytest.approx(expected.reward, abs=1e-6)
        with pytest.raises(MemgymError) as gone:
            client.get_episode(episode_id)
        assert "closed" in gone.value.details or gone.value.code.name == "NOT_FOUND"
    assert plans_seen[0] >= 36 and plans_seen[2] >= 4  # 32 + 4 without tools; two-call plans ran
    rewards = output.non_tensor_batch["memgym_reward"]
    assert (rewards > 0).any() and (rewards < 0).any(), "the plans move the reward both ways"


def test_steps_that_repeat_request_ids_never_share_an_episode(tmp_path, server_address, qwen_path, tokenizer, verl_dataset, monkeypatch):
    """Two rollout steps of the same prompts; with full_determinism, verl 0.9.1 repeats the request ids."""
    import verl
    from verl.trainer.ppo.reward import extract_reward

    monkeypatch.setenv("MEMGYM_ADDRESS", server_address)
    extra = ["actor_rollout_ref.rollout.full_determinism=True"] if "full_determinism" in compose([]).actor_rollout_ref.rollout else []
    config = rollout_config(tmp_path, qwen_path, server_address, "naive", extra)
    rows, answers = rows_of(verl_dataset, 2)
    llm = ScriptedLLM(tokenizer, answers, lambda q, k: "create")
    seen_ids, episodes = [], []

    async def two_steps():
        worker = make_worker(config, llm)
        for step in range(2):
            llm.plans.clear()
            batch = build_batch(rows, tmp_path / f"rows{step}.parquet", tokenizer, config, n=2)
            batch.non_tensor_batch["priority"] = np.arange(len(batch), dtype=np.int64)  # as AgentLoopManager sets it
            output = await worker.generate_sequences(batch)
            seen_ids.append(sorted(llm.plans))
            episodes.extend(output.non_tensor_batch["memgym_episode_id"])
            assert list(output.non_tensor_batch["memgym_steps_used"]) == [1.0] * 4  # each step edits a fresh episode
            # No reward-loop handles here, as on the reward-model path: the rewards are in rm_scores all the same,
            # so the trainer does not call the reward manager for them.
            reward_tensor, _ = extract_reward(output)
            assert reward_tensor.sum(-1).tolist() == pytest.approx(list(output.non_tensor_batch["memgym_reward"]), abs=1e-6)

    asyncio.run(two_steps())
    if release(verl.__version__) >= (0, 9, 1):
        assert seen_ids[0] == seen_ids[1] and all(r.startswith("det-") for r in seen_ids[0])
    assert len(set(episodes)) == 8


def test_a_reaped_episode_fails_the_rollout_naming_the_cause(tmp_path, qwen_path, tokenizer, verl_dataset, monkeypatch):
    with running_server("--idle-ttl-secs", "1") as address:
        monkeypatch.setenv("MEMGYM_ADDRESS", address)
        config = rollout_config(tmp_path, qwen_path, address, "naive")
        rows, answers = rows_of(verl_dataset, 1)
        llm = ScriptedLLM(tokenizer, answers, lambda q, k: "create" if k else "delete", pause=("delete", 2.5))
        batch = build_batch(rows, tmp_path / "rows.parquet", tokenizer, config, n=2)
        started = time.monotonic()
        with pytest.raises(MemgymError) as failed:
            asyncio.run(make_worker(config, llm).generate_sequences(batch))
        assert time.monotonic() - started >= 2.5
    message = str(failed.value)
    assert "could not be scored" in message and "reaped" in message, message
