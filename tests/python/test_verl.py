"""The verl adapter (``memgym_verl``) driven exactly as verl's ``ToolAgentLoop`` drives tools.

Why this exists: verl calls create → execute → release around every tool call on a fresh instance and
never calls ``calc_reward``; the adapter must still keep one server episode per trajectory, distinct
episodes for concurrent trajectories (GRPO samples of one prompt), and hand the episode to the reward
function, which scores and closes it. ``call_tool_like_verl`` reproduces verl 0.9.1's
``ToolAgentLoop._call_tool`` (tool lookup, ``json.loads`` of the arguments, create/execute/release,
exception → text); ``AgentData`` carries the fields the adapter reads.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Dict

import grpc
import pytest

from verl.tools.schemas import OpenAIFunctionToolSchema

from memgym import MemgymError, MemgymUnavailable
from memgym_verl import reward
from memgym_verl.episode import EPISODE_ID_KEY, episode_id_for
from memgym_verl.tool import MemgymTool

TOOL_NAMES = ["search_memory", "manage_memory", "delete_memory", "sample_memory", "merge_memory", "split_memory"]


@dataclass
class AgentData:
    """The fields of verl's ``AgentData`` the adapter uses."""

    request_id: str
    tools_kwargs: Dict[str, Any]
    extra_fields: Dict[str, Any] = field(default_factory=dict)


def row_tools_kwargs(question_id: str) -> Dict[str, Any]:
    """``extra_info.tools_kwargs`` as ``memgym dataset verl`` writes it."""
    conv = question_id.split(":")[0]
    return {name: {"create_kwargs": {"conversation_id": conv, "question_id": question_id}} for name in TOOL_NAMES}


def make_tools(address: str) -> Dict[str, MemgymTool]:
    """What verl's ``initialize_tools_from_config`` builds from examples/verl/memgym_tool_config.yaml."""
    return {n: MemgymTool(config={"type": "native", "address": address, "tool_name": n}, tool_schema=None) for n in TOOL_NAMES}


async def call_tool_like_verl(tools, name: str, arguments: str, agent_data: AgentData) -> str:
    """verl 0.9.1 ``ToolAgentLoop._call_tool``, minus truncation and multimodal handling."""
    if name not in tools:
        return f"Unknown function '{name}'. Available tools: {list(tools)}"
    try:
        tool_args = json.loads(arguments)
    except (json.JSONDecodeError, TypeError) as e:
        return f"Invalid JSON in arguments for '{name}': {e}"
    tool, instance_id = None, None
    try:
        tool = tools[name]
        kwargs = agent_data.tools_kwargs.get(name, {})
        instance_id, _ = await tool.create(create_kwargs=kwargs.get("create_kwargs", {}))
        response, _reward, _metrics = await tool.execute(instance_id, tool_args, agent_data=agent_data)
    except Exception as e:
        return f"Error executing tool '{name}': {e}"
    finally:
        if tool and instance_id:
            await tool.release(instance_id)
    return response.text


@pytest.fixture(scope="module")
def tools(server_address):
    return make_tools(server_address)


def test_schema_comes_from_list_tools(tools, client):
    served = {t["function"]["name"]: t for t in client.list_tools()}
    for name, tool in tools.items():
        assert tool.name == name
        schema = tool.get_openai_tool_schema().model_dump(exclude_unset=True, exclude_none=True)
        assert schema["function"]["parameters"]["required"] == served[name]["function"]["parameters"].get("required", [])
        assert set(schema["function"]["parameters"]["properties"]) == set(served[name]["function"]["parameters"]["properties"])


def test_unknown_tool_name_in_config_is_refused(server_address):
    with pytest.raises(ValueError, match="no tool 'bogus_tool'"):
        MemgymTool(config={"type": "native", "address": server_address, "tool_name": "bogus_tool"}, tool_schema=None)


def test_ten_calls_of_one_trajectory_make_one_episode(tools, client):
    agent = AgentData(request_id=uuid.uuid4().hex, tools_kwargs=row_tools_kwargs("conv-26:q0"))

    async def run():
        texts = []
        for i in range(10):
            name = "search_memory" if i % 2 == 0 else "sample_memory"
            args = {"query": f"support group {i}", "top_k": 2} if name == "search_memory" else {"k": 2}
            texts.append(await call_tool_like_verl(tools, name, json.dumps(args), agent))
        return texts

    texts = asyncio.run(run())
    assert all(t.startswith("[m") for t in texts), texts
    episode_id = agent.extra_fields[EPISODE_ID_KEY]
    assert episode_id == episode_id_for({"question_id": "conv-26:q0"}, agent.request_id)
    state = client.get_episode(episode_id, include_trace=True)
    assert state.state.steps_used == 10 and state.state.episode_id == episode_id
    assert [t.tool_name for t in state.trace] == ["search_memory", "sample_memory"] * 5
    assert all(not t._instances for t in tools.values())  # every instance released
    client.close_episode(episode_id)


def test_concurrent_trajectories_get_distinct_episodes(tools, client):
    agents = [AgentData(request_id=uuid.uuid4().hex, tools_kwargs=row_tools_kwargs("conv-26:q0")) for _ in range(8)]

    async def trajectory(agent: AgentData, calls: int):
        for _ in range(calls):
            await call_tool_like_verl(tools, "search_memory", json.dumps({"query": "painting"}), agent)

    async def run():
        await asyncio.gather(*(trajectory(a, 1 + i % 3) for i, a in enumerate(agents)))

    asyncio.run(run())
    ids = [a.extra_fields[EPISODE_ID_KEY] for a in agents]
    assert len(set(ids)) == len(agents)
    for i, episode_id in enumerate(ids):
        assert client.get_episode(episode_id).state.steps_used == 1 + i % 3
        client.close_episode(episode_id)


def test_policy_errors_come_back_as_text_and_use_no_step(tools, client):
    agent = AgentData(request_id=uuid.uuid4().hex, tools_kwargs=row_tools_kwargs("conv-26:q0"))

    async def run():
        return [
            # verl answers these itself, before the adapter is involved:
            await call_tool_like_verl(tools, "no_such_tool", "{}", agent),
            await call_tool_like_verl(tools, "search_memory", "{not json", agent),
            # the server refuses these; the adapter returns the reason as the tool's text:
            await call_tool_like_verl(tools, "search_memory", json.dumps({"query": "x", "top_k": 0}), agent),
            await call_tool_like_verl(tools, "delete_memory", json.dumps({"memory_id": "m9999"}), agent),
            await call_tool_like_verl(tools, "search_memory", json.dumps({"qeury": "typo"}), agent),
        ]

    unknown, bad_json, out_of_range, missing, typo = asyncio.run(run())
    assert unknown.startswith("Unknown function 'no_such_tool'")
    assert bad_json.startswith("Invalid JSON in arguments for 'search_memory'")
    assert out_of_range.startswith("Error: ") and "top_k" in out_of_range
    assert missing.startswith("Error: ") and "m9999" in missing
    assert typo.startswith("Error: ")
    state = client.get_episode(agent.extra_fields[EPISODE_ID_KEY]).state
    assert state.steps_used == 0 and state.rejected_calls == 3
    client.close_episode(state.episode_id)


def test_adapter_raises_when_server_is_down():
    """Infrastructure failures raise (verl turns them into "Error executing tool ..." and logs them)."""
    from conftest import free_port

    address = f"127.0.0.1:{free_port()}"
    tool = MemgymTool(
        config={"type": "native", "address": address, "tool_name": "search_memory", "timeout": 2},
        tool_schema=OpenAIFunctionToolSchema.model_validate(
            {"type": "function", "function": {"name": "search_memory", "description": "d"}}
        ),
    )
    agent = AgentData(request_id="r1", tools_kwargs=row_tools_kwargs("conv-26:q0"))
    text = asyncio.run(call_tool_like_verl({"search_memory": tool}, "search_memory", '{"query": "x"}', agent))
    assert text.startswith("Error executing tool 'search_memory'") and address in text


def test_compute_score_scores_and_closes(tools, client):
    agent = AgentData(request_id=uuid.uuid4().hex, tools_kwargs=row_tools_kwargs("conv-26:q0"))
    update = {
        "operation": "update",
        "memory_id": "m0000",
        "content": "Caroline attended an LGBTQ support group on 7 May 2023.",
    }
    asyncio.run(call_tool_like_verl(tools, "manage_memory", json.dumps(update), agent))
    # verl >= 0.7.1's reward loop merges the loop's extra_fields into the row's extra_info before compute_score.
    extra_info = {"index": 0, "question_id": "conv-26:q0", "tools_kwargs": agent.tools_kwargs, **agent.extra_fields}
    result = reward.compute_score("memgym/locomo", "<model output>", "7 May 2023", extra_info=extra_info)
    assert result["score"] == result["reward"] > 0.5
    assert result["p_old"] == 0.0 and result["p_new"] == 1.0 and result["steps_used"] == 1.0
    assert result["memgym_missing"] == 0.0
    assert all(isinstance(v, float) for v in result.values())
    with pytest.raises(MemgymError) as err:
        client.get_episode(agent.extra_fields[EPISODE_ID_KEY])
    assert err.value.code == grpc.StatusCode.NOT_FOUND


def test_compute_score_without_tool_calls_is_zero_with_the_same_keys(server_address, monkeypatch):
    monkeypatch.setenv("MEMGYM_ADDRESS", server_address)
    extra_info = {"index": 1, "question_id": "conv-26:q1", "tools_kwargs": row_tools_kwargs("conv-26:q1")}
    result = reward.compute_score("memgym/locomo", "no tools used", "x", extra_info=extra_info)
    assert result["score"] == 0.0 and result["memgym_missing"] == 1.0
    assert set(result) == {"score", "memgym_missing", *reward.BREAKDOWN_KEYS}


def test_compute_score_fallback_id_without_agent_data(server_address, client, monkeypatch, caplog):
    """A custom loop passing create_kwargs but no agent_data: the episode is keyed by the row alone."""
    monkeypatch.setenv("MEMGYM_ADDRESS", server_address)
    tool = MemgymTool(config={"type": "native", "address": server_address, "tool_name": "sample_memory"}, tool_schema=None)
    kwargs = {"create_kwargs": {"question_id": "conv-30:q0", "episode_id": "row-17"}}

    async def run():
        for _ in range(2):
            instance_id, _ = await tool.create(**kwargs)
            await tool.execute(instance_id, {"k": 1})
            await tool.release(instance_id)

    with caplog.at_level("WARNING", logger="memgym_verl.tool"):
        asyncio.run(run())
    assert [r.getMessage() for r in caplog.records] == ["sample_memory: execute() got no agent_data; episodes are keyed by the row alone"]
    assert client.get_episode("row-17").state.steps_used == 2
    result = reward.compute_score("memgym/locomo", "", "", extra_info={"tools_kwargs": {"sample_memory": kwargs}})
    assert result["steps_used"] == 2.0 and result["score"] == 0.0
    with pytest.raises(MemgymError):
        client.get_episode("row-17")


def test_a_call_naming_no_question_says_which_verl_is_needed(tools):
    """Calls as verl 0.5.0's ToolAgentLoop._call_tool makes them: ``create()`` without create_kwargs,
    ``execute`` without agent_data (on today's BaseTool API, where create returns ``(id, response)``)."""

    async def call_like_verl_0_5(tool):
        instance_id, _ = await tool.create()
        try:
            return await tool.execute(instance_id, {"query": "x"})
        finally:
            await tool.release(instance_id)

    with pytest.raises(ValueError) as err:
        asyncio.run(call_like_verl_0_5(tools["search_memory"]))
    assert str(err.value).startswith(
        "memgym_verl needs verl >= 0.7.1: this verl called create() without create_kwargs and execute() without agent_data"
    )
    assert "dataset verl" not in str(err.value)  # not the misleading "rebuild the dataset" error


def test_a_verl_older_than_min_verl_is_refused_at_construction(server_address, monkeypatch):
    import verl

    config = {"type": "native", "address": server_address, "tool_name": "search_memory"}
    monkeypatch.setattr(verl, "__version__", "0.7.0", raising=False)
    with pytest.raises(RuntimeError, match=r"needs verl >= 0\.7\.1, found 0\.7\.0"):
        MemgymTool(config=config, tool_schema=None)
    for version in ("0.7.1", "0.9.1", "0.10.0.dev0", "unknown"):
        monkeypatch.setattr(verl, "__version__", version)
        assert MemgymTool(config=config, tool_schema=None).name == "search_memory"


def test_importing_the_tool_under_verl_0_5_says_which_verl_is_needed(monkeypatch):
    """verl 0.5.0's ``verl.tools.schemas`` has no ``ToolResponse``: the import error names the verl needed."""
    import importlib.util

    import verl
    import verl.tools.schemas

    import memgym_verl.tool

    monkeypatch.delattr(verl.tools.schemas, "ToolResponse")
    monkeypatch.setattr(verl, "__version__", "0.5.0", raising=False)
    spec = importlib.util.spec_from_file_location("memgym_verl_tool_under_verl_0_5", memgym_verl.tool.__file__)
    with pytest.raises(ImportError, match=r"needs verl >= 0\.7\.1, found 0\.5\.0: cannot import name 'ToolResponse'"):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


def test_compute_score_server_down_raises(monkeypatch):
    from conftest import free_port

    address = f"127.0.0.1:{free_port()}"
    with pytest.raises(MemgymUnavailable) as err:
        reward.compute_score("memgym/locomo", "", "", extra_info={"memgym_episode_id": "x", "memgym_address": address})
    assert address in str(err.value)


def test_example_tool_config_builds_the_six_tools(server_address, monkeypatch):
    """examples/verl/memgym_tool_config.yaml, loaded the way verl's initialize_tools_from_config does."""
    omegaconf = pytest.importorskip("omegaconf")
    import importlib
    from pathlib import Path

    monkeypatch.setenv("MEMGYM_ADDRESS", server_address)
    path = Path(__file__).resolve().parents[2] / "examples" / "verl" / "memgym_tool_config.yaml"
    config = omegaconf.OmegaConf.load(path)
    built = []
    for entry in config.tools:
        module_name, class_name = entry.class_name.rsplit(".", 1)
        cls = getattr(importlib.import_module(module_name), class_name)
        assert entry.get("tool_schema", None) is None
        built.append(cls(config=omegaconf.OmegaConf.to_container(entry.config, resolve=True), tool_schema=None))
    assert [t.name for t in built] == TOOL_NAMES
    assert {t.address for t in built} == {server_address}


# -- compute_score_batch (custom loops, verl's legacy `batch` manager) and compute_score_async (verl >= 0.7.1 reward loop) --

ANSWER_UPDATE = {"operation": "update", "memory_id": "m0000", "content": "Caroline attended an LGBTQ support group on 7 May 2023."}


@pytest.fixture
def rollouts(tools, client, server_address, monkeypatch):
    """``run_trajectories`` with ``$MEMGYM_ADDRESS`` set: samples without a tool call carry no address."""
    monkeypatch.setenv("MEMGYM_ADDRESS", server_address)
    return lambda n: run_trajectories(tools, client, n)


def run_trajectories(tools, client, n: int):
    """``n`` rollouts of conv-26 questions as verl's reward manager receives them, and each one's expected result.

    Trajectory ``i`` makes ``i % 4`` tool calls (none when ``i % 4 == 0``: no episode, the zero result);
    those of ``conv-26:q0`` with calls start with an update that writes the answer, so rewards differ by
    sample and a reordering would show. The expectation is ``ScoreEpisode`` itself (idempotent) called
    here first.
    """
    questions = [f"conv-26:q{i % 3}" for i in range(n)]
    agents = [AgentData(request_id=uuid.uuid4().hex, tools_kwargs=row_tools_kwargs(q)) for q in questions]

    async def trajectory(i: int, agent: AgentData):
        for call in range(i % 4):
            if call == 0 and questions[i] == "conv-26:q0":
                await call_tool_like_verl(tools, "manage_memory", json.dumps(ANSWER_UPDATE), agent)
            else:
                await call_tool_like_verl(tools, "search_memory", json.dumps({"query": f"topic {i}"}), agent)

    async def run():
        await asyncio.gather(*(trajectory(i, a) for i, a in enumerate(agents)))

    asyncio.run(run())
    extra_infos, expected = [], []
    for i, (question_id, agent) in enumerate(zip(questions, agents)):
        extra_infos.append({"index": i, "question_id": question_id, "tools_kwargs": agent.tools_kwargs, **agent.extra_fields})
        if i % 4 == 0:
            assert EPISODE_ID_KEY not in agent.extra_fields
            expected.append({"score": 0.0, "memgym_missing": 1.0, **{k: 0.0 for k in reward.BREAKDOWN_KEYS}})
        else:
            resp = client.score_episode(agent.extra_fields[EPISODE_ID_KEY])
            breakdown = {k: float(getattr(resp, k)) for k in reward.BREAKDOWN_KEYS}
            expected.append({"score": float(resp.reward), "memgym_missing": 0.0, **breakdown})
    assert [e["steps_used"] for e in expected] == [float(i % 4) for i in range(n)]
    assert len({e["score"] for e in expected}) > 1
    return extra_infos, expected


def assert_all_closed(client, extra_infos):
    for info in extra_infos:
        if EPISODE_ID_KEY in info:
            with pytest.raises(MemgymError) as err:
                client.get_episode(info[EPISODE_ID_KEY])
            assert err.value.code == grpc.StatusCode.NOT_FOUND


def test_compute_score_batch_scores_in_order_and_closes(rollouts, client):
    extra_infos, expected = rollouts(24)
    n = len(extra_infos)
    results = reward.compute_score_batch(
        data_sources=("memgym/locomo",) * n, solution_strs=["<out>"] * n, ground_truths=["x"] * n, extra_infos=extra_infos
    )
    assert results == expected
    assert all(list(r) == list(results[0]) for r in results)  # same keys, same order: verl stacks them
    assert_all_closed(client, extra_infos)
    assert reward.compute_score_batch([], [], [], []) == []


def test_compute_score_batch_bounds_its_threads(rollouts, monkeypatch):
    extra_infos, expected = rollouts(12)
    real = reward.sync_client
    in_flight, peak, lock = [0], [0], threading.Lock()

    class Counting:
        def __init__(self, inner):
            self.inner = inner

        def score_episode(self, episode_id):
            with lock:
                in_flight[0] += 1
                peak[0] = max(peak[0], in_flight[0])
            try:
                time.sleep(0.05)  # long enough for the pool to overlap calls
                return self.inner.score_episode(episode_id)
            finally:
                with lock:
                    in_flight[0] -= 1

        def close_episode(self, episode_id):
            return self.inner.close_episode(episode_id)

    monkeypatch.setattr(reward, "sync_client", lambda address: Counting(real(address)))
    n = len(extra_infos)
    results = reward.compute_score_batch(["memgym/locomo"] * n, [""] * n, [""] * n, extra_infos, memgym_concurrency=3)
    assert results == expected
    assert 2 <= peak[0] <= 3
    with pytest.raises(ValueError, match="one data_source"):
        reward.compute_score_batch(["memgym/locomo"], ["", ""], ["", ""], None)


def test_compute_score_async_under_gather(rollouts, client):
    extra_infos, expected = rollouts(24)

    async def run():
        return await asyncio.gather(
            *(reward.compute_score_async("memgym/locomo", "<out>", "x", extra_info=info) for info in extra_infos)
        )

    assert asyncio.run(run()) == expected
    assert_all_closed(client, extra_infos)


def test_batch_and_async_raise_when_server_is_down():
    from conftest import free_port

    address = f"127.0.0.1:{free_port()}"
    infos = [{"memgym_episode_id": f"x{i}", "memgym_address": address} for i in range(5)]
    with pytest.raises(MemgymUnavailable) as err:
        reward.compute_score_batch(["memgym/locomo"] * 5, [""] * 5, [""] * 5, infos)
    assert address in str(err.value)

    async def run():
        return await asyncio.gather(*(reward.compute_score_async("memgym/locomo", "", "", extra_info=i) for i in infos))

    with pytest.raises(MemgymUnavailable) as err:
        asyncio.run(run())
    assert address in str(err.value)
