"""``MemgymTool``, the reward functions and DAPO's overlong penalty, driven by verl's own objects.

Why this exists: the rollout test (test_rollout.py) shows the whole path; these pin the adapter's rules
one by one with verl's real classes — the tool registry building the six tools from
examples/verl/memgym_tool_config.yaml, ``AgentData``, ``ToolAgentLoop``'s calls, and verl's DAPO reward
manager — against the real server:

- one trajectory's calls (parallel ones included) share one episode; its id never comes from verl's
  ``request_id`` (which repeats across steps under ``full_determinism``);
- errors the policy caused come back as text and use no step; a server that is down raises;
- ``fit_text`` never exceeds its limit and keeps whole lines from the top;
- a reward function never scores a silent 0 (``EpisodeMissing``);
- the loop's overlong penalty equals what verl's ``DAPORewardManager`` adds, for the same config.
"""

from __future__ import annotations

import asyncio
import inspect
import random
import uuid

import pytest

from with_verl.conftest import EXAMPLES, compose

from memgym import MemgymError, MemgymUnavailable
from memgym_verl import reward
from memgym_verl.agent_loop import OverlongPenalty
from memgym_verl.episode import ADDRESS_KEY, EPISODE_ID_KEY
from memgym_verl.tool import MemgymTool, check_verl_version, fit_text

TOOL_NAMES = ["search_memory", "manage_memory", "delete_memory", "sample_memory", "merge_memory", "split_memory"]


def registry_tools(address: str, monkeypatch):
    """The six tools as verl's tool registry builds them from examples/verl/memgym_tool_config.yaml."""
    try:
        from verl.tools.tool_registry import initialize_tools_from_config  # 0.8.0 and later
    except ImportError:
        from verl.tools.utils.tool_registry import initialize_tools_from_config  # 0.7.1
    monkeypatch.setenv("MEMGYM_ADDRESS", address)
    tools = initialize_tools_from_config(str(EXAMPLES / "memgym_tool_config.yaml"))
    return {t.name: t for t in tools}


def agent_data(question_id: str, request_id: str = ""):
    """verl's own ``AgentData`` for one trajectory of ``question_id`` (its constructor differs per release)."""
    from verl.experimental.agent_loop.tool_agent_loop import AgentData

    conv = question_id.split(":")[0]
    tools_kwargs = {n: {"create_kwargs": {"conversation_id": conv, "question_id": question_id}} for n in TOOL_NAMES}
    values = dict(messages=[], image_data=None, video_data=None, audio_data=None, mm_processor_kwargs=None, metrics={},
                  request_id=request_id or uuid.uuid4().hex, tools_kwargs=tools_kwargs)
    params = inspect.signature(AgentData.__init__).parameters
    return AgentData(**{k: v for k, v in values.items() if k in params})


async def call(tools, data, name: str, arguments: dict) -> str:
    """One tool call as ``ToolAgentLoop._call_tool`` makes it: create, execute with agent_data, release."""
    tool = tools[name]
    instance_id, _ = await tool.create(create_kwargs=data.tools_kwargs[name]["create_kwargs"])
    try:
        response, _, _ = await tool.execute(instance_id, arguments, agent_data=data)
    finally:
        await tool.release(instance_id)
    return response.text


@pytest.fixture
def tools(server_address, monkeypatch):
    return registry_tools(server_address, monkeypatch)


def test_the_registry_builds_the_six_tools_with_the_servers_schemas(tools, client):
    served = {t["function"]["name"]: t for t in client.list_tools()}
    assert set(tools) == set(TOOL_NAMES)
    for name, tool in tools.items():
        schema = tool.get_openai_tool_schema().model_dump(exclude_unset=True, exclude_none=True)
        assert schema["function"]["parameters"]["required"] == served[name]["function"]["parameters"].get("required", [])
        assert set(schema["function"]["parameters"]["properties"]) == set(served[name]["function"]["parameters"]["properties"])


def test_one_trajectory_one_episode_even_for_parallel_calls(tools, client):
    data = agent_data("conv-26:q0")

    async def run():
        first = await asyncio.gather(*(call(tools, data, "search_memory", {"query": f"group {i}"}) for i in range(4)))
        second = await call(tools, data, "sample_memory", {"k": 2})
        return first, second

    first, second = asyncio.run(run())
    assert all(t.startswith("[m") for t in first + [second])
    episode_id = data.extra_fields[EPISODE_ID_KEY]
    assert data.extra_fields[ADDRESS_KEY] == tools["search_memory"].address
    assert episode_id.startswith("conv-26:q0-") and data.request_id not in episode_id
    assert client.get_episode(episode_id).state.steps_used == 5
    client.close_episode(episode_id)


def test_repeated_request_ids_get_distinct_episodes(tools, client):
    """verl 0.9.1's full_determinism gives every step the same request ids (det-{priority})."""
    steps = [agent_data("conv-26:q0", request_id="det-0") for _ in range(2)]
    for data in steps:
        asyncio.run(call(tools, data, "manage_memory", {"operation": "create", "content": "Caroline went on 7 May 2023."}))
    ids = [d.extra_fields[EPISODE_ID_KEY] for d in steps]
    assert ids[0] != ids[1]
    for episode_id in ids:
        assert client.get_episode(episode_id).state.steps_used == 1
        client.close_episode(episode_id)


def test_execute_returns_the_servers_per_step_metrics(tools, client):
    """verl logs a tool's third return value as its metrics: the server's CallToolResponse.metrics."""
    data = agent_data("conv-26:q0")
    tool = tools["manage_memory"]

    async def run():
        instance_id, _ = await tool.create(create_kwargs=data.tools_kwargs["manage_memory"]["create_kwargs"])
        try:
            done = await tool.execute(instance_id, {"operation": "create", "content": "Caroline went hiking."}, agent_data=data)
            refused = await tool.execute(instance_id, {"operation": "update", "memory_id": "m9999", "content": "x"}, agent_data=data)
            return done, refused
        finally:
            await tool.release(instance_id)

    (_, reward, metrics), (_, _, none) = asyncio.run(run())
    assert reward == 0.0 and none == {}
    assert set(metrics) == {"tool_ms", "memories", "memories_delta", "memory_chars", "steps_used", "steps_left"}
    assert metrics["memories_delta"] == 1.0 and metrics["steps_used"] == 1.0 and metrics["tool_ms"] > 0
    client.close_episode(data.extra_fields[EPISODE_ID_KEY])


def test_policy_errors_come_back_as_text_and_use_no_step(tools, client):
    data = agent_data("conv-26:q0")
    text = asyncio.run(call(tools, data, "delete_memory", {"memory_id": "m9999"}))
    assert text.startswith("Error: ") and "m9999" in text
    text = asyncio.run(call(tools, data, "search_memory", {"query": "x", "top_k": "many"}))
    assert text.startswith("Error: ") and "top_k" in text
    episode_id = data.extra_fields[EPISODE_ID_KEY]
    assert client.get_episode(episode_id).state.steps_used == 0
    client.close_episode(episode_id)


def test_a_server_that_is_down_raises(tools, monkeypatch):
    from conftest import free_port

    tool = MemgymTool(config={"type": "native", "address": f"127.0.0.1:{free_port()}", "tool_name": "search_memory", "timeout": 2},
                      tool_schema=tools["search_memory"].tool_schema)
    with pytest.raises(MemgymUnavailable):
        asyncio.run(call({"search_memory": tool}, agent_data("conv-26:q0"), "search_memory", {"query": "x"}))


def test_a_call_without_agent_data_names_the_verl_needed(tools):
    tool = tools["search_memory"]

    async def run():
        instance_id, _ = await tool.create(create_kwargs={"question_id": "conv-26:q0"})
        return await tool.execute(instance_id, {"query": "x"})

    with pytest.raises(ValueError, match="needs verl >= 0.7.1"):
        asyncio.run(run())


def test_old_verl_versions_are_refused():
    for old in ("0.5.0", "0.6.1", "0.7.0"):
        with pytest.raises(RuntimeError, match=f"found {old}"):
            check_verl_version(old)
    for ok in ("0.7.1", "0.8.0", "0.9.1", "1.0.0.dev0", None):
        check_verl_version(ok)


def test_fit_text_keeps_whole_lines_within_the_limit():
    rng = random.Random(7)
    words = ["Caroline", "Melanie", "support", "group", "on", "7", "May", "2023", "painted", "a", "sunrise"]
    for _ in range(3000):
        lines = [f"[m{rng.randrange(10000):04d} 0.{rng.randrange(100):02d}] " + " ".join(rng.choices(words, k=rng.randrange(0, 40)))
                 for _ in range(rng.randrange(1, 12))]
        text = "\n".join(lines)
        limit = rng.randrange(1, 600)
        fitted = fit_text(text, limit)
        assert len(fitted) <= max(limit, 0) or len(text) <= limit
        if len(text) <= limit:
            assert fitted == text
            continue
        kept = fitted.split("\n")
        if kept[-1].startswith("(+") and len(kept) > 1 and not kept[-2].endswith("…"):
            assert kept[:-1] == lines[: len(kept) - 1]  # whole lines, from the top
            assert kept[-1] == f"(+{len(lines) - len(kept) + 1} more lines)"
    assert fit_text("short", 256) == "short" and fit_text("a\nb", None) == "a\nb"


def test_reward_functions_never_score_a_silent_zero(server_address):
    with pytest.raises(reward.EpisodeMissing, match="memgym_agent"):
        reward.compute_score("memgym/locomo", "", "", {"index": 3})
    with pytest.raises(reward.EpisodeMissing):
        asyncio.run(reward.compute_score_async("memgym/locomo", "", "", {}))
    with pytest.raises(reward.EpisodeMissing):
        reward.compute_score_batch(["memgym/locomo"], [""], [""], [{}])
    with pytest.raises(MemgymError) as unknown:
        reward.compute_score(extra_info={EPISODE_ID_KEY: "never-opened", ADDRESS_KEY: server_address})
    assert unknown.value.code.name == "NOT_FOUND"


def test_reward_functions_score_and_close(tools, client, server_address):
    datas = [agent_data("conv-26:q0") for _ in range(3)]
    for data in datas:
        content = "Caroline went to the LGBTQ support group on 7 May 2023."
        asyncio.run(call(tools, data, "manage_memory", {"operation": "create", "content": content}))
    first = reward.compute_score(extra_info=datas[0].extra_fields)
    assert first["score"] == first["memgym_reward"] > 0 and "reward" not in first
    assert set(first) == {"score", *reward.BREAKDOWN_KEYS}
    rest = reward.compute_score_batch(["memgym/locomo"] * 2, ["", ""], ["", ""], [d.extra_fields for d in datas[1:]])
    assert [r["score"] for r in rest] == [first["score"]] * 2  # same edit, same reward
    for data in datas:
        with pytest.raises(MemgymError) as closed:
            client.get_episode(data.extra_fields[EPISODE_ID_KEY])
        assert "closed" in closed.value.details


def test_overlong_penalty_equals_verls_dapo_manager(qwen_path, tokenizer):
    """DAPO's overlong shaping, computed by verl's own DAPORewardManager and by the loop, for the same config."""
    import torch
    from verl.experimental.reward_loop.reward_manager.dapo import DAPORewardManager
    from verl.protocol import DataProto

    config = compose([
        f"actor_rollout_ref.model.path={qwen_path}",
        "reward.reward_manager.name=dapo",
        "+reward.reward_kwargs.max_resp_len=1024",
        "+reward.reward_kwargs.overlong_buffer_cfg.enable=True",
        "+reward.reward_kwargs.overlong_buffer_cfg.len=256",
        "+reward.reward_kwargs.overlong_buffer_cfg.penalty_factor=1.0",
        "+reward.reward_kwargs.overlong_buffer_cfg.log=True",
    ])
    ours = OverlongPenalty(config)
    assert ours.enabled

    def zero(**kwargs):
        return {"score": 0.0}

    async def verl_dapo(data):  # the manager takes the running event loop when it is built
        return await DAPORewardManager(config, tokenizer, zero).run_single(data)

    for length in (1, 700, 768, 769, 900, 1024):
        responses = torch.ones((1, 1024), dtype=torch.long)
        mask = torch.zeros((1, 8 + 1024), dtype=torch.long)
        mask[0, : 8 + length] = 1
        data = DataProto.from_dict(
            tensors={"responses": responses, "attention_mask": mask},
            non_tensors={"data_source": ["memgym/locomo"], "reward_model": [{"ground_truth": ""}], "extra_info": [{}]},
        )
        got = asyncio.run(verl_dapo(data))
        assert ours(length) == pytest.approx(float(got["reward_score"]), abs=1e-9), length
