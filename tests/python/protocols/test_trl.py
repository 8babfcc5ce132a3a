"""``memgym_trl.MemgymTRLEnv`` as TRL's ``GRPOTrainer(environment_factory=...)`` reads and drives it, against
the real server.

What TRL 1.16.0 does with an environment class (``trl/trainer/grpo_trainer.py``), reproduced here where
it is inline code of ``GRPOTrainer`` and not a callable of its own:

- l.679-689: ``inspect.getmembers(type(instance), predicate=inspect.isfunction)``; ``reset`` is required,
  ``get_reward`` optional, every other name without a leading ``_`` is a tool (bound method);
- l.2366-2370: the same walk per rollout, for the tool dicts;
- l.2386-2398: ``reset(**row)`` with the whole dataset row; a returned string is appended to the last
  prompt message as is;
- l.1980-1986: a tool call is ``method(**arguments)``; an exception becomes ``{"error": str(exception)}``.

test_trl_grpo.py runs TRL's own ``GRPOTrainer`` with the class; the rules are reproduced here so that each
is checked on its own, with a message that names it.

The tool schemas are transformers 5.23.0's own ``get_json_schema`` (what TRL's chat templating calls),
compared with the server's ``ListTools``: the function name and description, and per parameter the
property names, ``type``, ``enum``, ``items`` (``{"type": "string"}`` for the lists, hinted ``List[str]``)
and description, and the required set. The one addition ``get_json_schema`` makes is ``"nullable": true``
on exactly the optional parameters (hinted ``Optional[...]``; the environment never sends a None argument).
What it cannot write are the bounds the served schemas state (``minimum``/``maximum``,
``minItems``/``maxItems``, which a type hint cannot say); the server refuses a call out of them all the same.
"""

from __future__ import annotations

import gc
import inspect
import subprocess

import grpc
import pyarrow.parquet as pq
import pytest

from conftest import memgym_bin
from memgym import MemgymClient, MemgymError
from memgym_trl import MemgymTRLEnv, ToolCallError
from protocols.conftest import TRANSFORMERS_VERSION, require_package

get_json_schema = require_package("transformers", TRANSFORMERS_VERSION, "transformers.utils").get_json_schema

# The served schemas' bounds, which get_json_schema cannot write from type hints.
BOUNDS = {"minimum", "maximum", "minItems", "maxItems"}

TOOLS = ("search_memory", "manage_memory", "delete_memory", "sample_memory", "merge_memory", "split_memory")


def trl_walk(env_class):
    """``(has_reset, has_get_reward, tool names)`` the way trl 1.16.0's GRPOTrainer reads the class (l.679-689)."""
    has_reset = has_reward = False
    tools = []
    for name, _ in inspect.getmembers(env_class, predicate=inspect.isfunction):
        if name == "reset":
            has_reset = True
        elif name == "get_reward":
            has_reward = True
        elif not name.startswith("_"):
            tools.append(name)
    return has_reset, has_reward, tools


@pytest.fixture(scope="module")
def list_tools(client):
    """The server's ListTools, by name: ``{name: function}``."""
    return {t["function"]["name"]: t["function"] for t in client.list_tools()}


@pytest.fixture
def env(server_address):
    e = MemgymTRLEnv(server_address)
    yield e
    e._close()


def test_trl_sees_reset_get_reward_and_exactly_the_six_tools(server_address, list_tools, monkeypatch):
    monkeypatch.setenv("MEMGYM_ADDRESS", server_address)
    instance = MemgymTRLEnv()  # TRL's factory is called with no arguments (l.681)
    try:
        assert instance.address == server_address
        has_reset, has_reward, tools = trl_walk(type(instance))
        assert has_reset and has_reward
        assert sorted(tools) == sorted(list_tools) == sorted(TOOLS)
        assert inspect.signature(instance.reset).parameters["row"].kind is inspect.Parameter.VAR_KEYWORD
        assert inspect.signature(instance.get_reward).parameters == {}
    finally:
        instance._close()


@pytest.mark.parametrize("name", TOOLS)
def test_tool_schema_from_get_json_schema_equals_list_tools(name, list_tools):
    schema = get_json_schema(getattr(MemgymTRLEnv, name))
    assert schema["type"] == "function"
    function, served = schema["function"], list_tools[name]
    assert function["name"] == served["name"] == name
    assert function["description"] == served["description"]
    params, served_params = function["parameters"], served["parameters"]
    assert params["type"] == served_params["type"] == "object"
    assert sorted(params.get("required", [])) == sorted(served_params.get("required", []))
    assert sorted(params["properties"]) == sorted(served_params["properties"])
    required = set(served_params.get("required", []))
    for prop, spec in params["properties"].items():
        assert spec.get("nullable", False) is (prop not in required), (name, prop, spec)
        served_spec = served_params["properties"][prop]
        assert set(served_spec) - set(spec) <= BOUNDS, (name, prop, served_spec)
        assert {k: v for k, v in spec.items() if k != "nullable"} == {k: v for k, v in served_spec.items() if k not in BOUNDS}, (name, prop)


def test_tool_schemas_from_a_bound_method_are_the_same(env):
    # TRL hands bound methods (getattr(instance, name), l.689) to the chat template.
    for name in TOOLS:
        assert get_json_schema(getattr(env, name)) == get_json_schema(getattr(MemgymTRLEnv, name))


def test_a_rollout_matches_the_same_episode_over_grpc(env, client):
    row = {"prompt": [{"role": "user", "content": "Fix the memory."}], "question_id": "conv-26:q0", "seed": 7, "max_steps": 6, "solution": "ignored"}
    observation = env.reset(**row)
    state = client.get_episode(env.episode_id).state
    assert observation == "\n\n" + state.question == "\n\n" + env.question
    assert (state.question_id, state.seed, state.max_steps, state.steps_used) == ("conv-26:q0", 7, 6, 0)

    twin = f"{env.episode_id}-twin"
    client.create_episode("conv-26:q0", episode_id=twin, seed=7, max_steps=6)
    try:
        calls = [
            ("search_memory", {"query": "LGBTQ support group", "top_k": 3}),
            ("manage_memory", {"operation": "create", "content": "Caroline went to the LGBTQ support group on 7 May 2023.", "speaker": "Caroline"}),
            ("sample_memory", {"k": 2, "strategy": "recent"}),
        ]
        for name, arguments in calls:
            text = getattr(env, name)(**arguments)
            twin_text, _ = client.call_tool(twin, name, arguments)
            assert isinstance(text, str) and text == twin_text, name
        assert client.get_episode(env.episode_id).state.steps_used == 3
        # The server's per-step metrics, one dict per carried-out call, for a callback to log.
        assert [m["steps_used"] for m in env.step_metrics] == [1.0, 2.0, 3.0]
        assert [m["memories_delta"] for m in env.step_metrics] == [0.0, 1.0, 0.0]

        # A refused call: TRL gives the model str(exception), which is the server's message alone.
        with pytest.raises(ToolCallError) as refused:
            env.search_memory(query="support group", top_k=0)
        with pytest.raises(MemgymError) as twin_refused:
            client.call_tool(twin, "search_memory", {"query": "support group", "top_k": 0})
        assert refused.value.code == twin_refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert str(refused.value) == twin_refused.value.details and "top_k" in str(refused.value)
        assert client.get_episode(env.episode_id).state.steps_used == client.get_episode(twin).state.steps_used

        reward = env.get_reward()
        assert isinstance(reward, float)
        assert reward == client.score_episode(env.episode_id).reward == client.score_episode(twin).reward
        assert env.get_reward() == reward  # idempotent
        assert env.score_metrics["memories_delta"] == 1.0 and 0.0 <= env.score_metrics["retrieved_overlap"] <= 1.0
    finally:
        client.close_episode(twin)


def test_next_reset_closes_the_previous_episode(env, client):
    env.reset(question_id="conv-26:q0")
    first = env.episode_id
    env.search_memory(query="support group")
    env.reset(question_id="conv-26:q1")
    assert env.episode_id != first
    with pytest.raises(MemgymError) as closed:
        client.get_episode(first)
    assert closed.value.code == grpc.StatusCode.FAILED_PRECONDITION and "closed" in closed.value.details
    assert client.get_episode(env.episode_id).state.question_id == "conv-26:q1"


def test_close_and_garbage_collection_close_the_episode(server_address, client):
    for how in ("close", "gc"):
        instance = MemgymTRLEnv(server_address)
        instance.reset(question_id="conv-26:q0")
        episode_id = instance.episode_id
        if how == "close":
            instance._close()
        else:
            del instance
            gc.collect()
        with pytest.raises(MemgymError) as closed:
            client.get_episode(episode_id)
        assert closed.value.code == grpc.StatusCode.FAILED_PRECONDITION, how


def test_row_keys_are_read_from_the_row_extra_info_and_create_kwargs(env, client):
    row = {
        "prompt": [{"role": "user", "content": "x"}],
        "seed": 5,
        "extra_info": {
            "max_steps": 7,
            "tools_kwargs": {"search_memory": {"create_kwargs": {"question_id": "conv-30:q3", "conversation_id": "conv-30", "seed": 1}}},
        },
    }
    env.reset(**row)
    state = client.get_episode(env.episode_id).state
    assert (state.question_id, state.conversation_id, state.seed, state.max_steps) == ("conv-30:q3", "conv-30", 5, 7)


def test_a_row_without_a_question_id_is_refused_by_name(env):
    with pytest.raises(ValueError, match="question_id"):
        env.reset(prompt=[{"role": "user", "content": "x"}], seed=3)
    assert env.episode_id is None


def test_factory_keywords_are_defaults_the_row_overrides(server_address, client):
    with MemgymTRLEnv(server_address, max_steps=4) as instance:
        instance.reset(question_id="conv-26:q0")
        assert client.get_episode(instance.episode_id).state.max_steps == 4
        instance.reset(question_id="conv-26:q0", max_steps=9)
        assert client.get_episode(instance.episode_id).state.max_steps == 9


def test_the_budget_running_out_refuses_further_calls(env, client):
    env.reset(question_id="conv-26:q0", max_steps=1)
    env.search_memory(query="support group")
    assert client.get_episode(env.episode_id).state.steps_left == 0
    with pytest.raises(ToolCallError) as refused:
        env.search_memory(query="support group")
    assert str(refused.value)
    assert env.get_reward() == client.score_episode(env.episode_id).reward


def test_tools_and_reward_before_reset_raise(env):
    with pytest.raises(RuntimeError):
        env.search_memory(query="x")
    with pytest.raises(RuntimeError):
        env.get_reward()


def test_reset_from_rows_of_the_verl_export(tmp_path, env, client):
    out = tmp_path / "all.parquet"
    done = subprocess.run(
        [str(memgym_bin()), "dataset", "verl", "--split", "all", "--include-adversarial", "--out", str(out)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    rows = pq.read_table(out).to_pylist()
    adversarial = next(r for r in rows if r["extra_info"]["category"] == 5)
    for row in (rows[0], adversarial):
        extra = row["extra_info"]
        observation = env.reset(**row)  # every column, as TRL passes it (prompt, reward_model, ... are ignored)
        state = client.get_episode(env.episode_id).state
        assert observation == "\n\n" + extra["question"]
        assert (state.question_id, state.conversation_id) == (extra["question_id"], extra["conversation_id"])
        # include_adversarial is only in extra_info.tools_kwargs.<tool>.create_kwargs; without it the
        # server refuses a category-5 question.
        assert env.search_memory(query=extra["question"])
    with pytest.raises(MemgymError) as refused:
        client.create_episode(adversarial["extra_info"]["question_id"], episode_id=f"{env.episode_id}-x")
    assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION and "include_adversarial" in refused.value.details


def test_one_connection_per_instance(server_address):
    a, b = MemgymTRLEnv(server_address), MemgymTRLEnv(server_address)
    try:
        assert isinstance(a._client, MemgymClient) and a._client is not b._client
    finally:
        a._close()
        b._close()


def test_boolean_columns_read_strings_and_refuse_garbage():
    """A row that writes include_adversarial as text ("false", as CSV-born datasets do) is read as meant."""
    from memgym_trl import row_episode_kwargs

    for written, meant in [("false", False), ("True", True), (0, False), (True, True)]:
        _, kwargs = row_episode_kwargs({"question_id": "conv-26:q3", "include_adversarial": written})
        assert kwargs["include_adversarial"] is meant, written
    with pytest.raises(ValueError, match="include_adversarial must be a boolean"):
        row_episode_kwargs({"question_id": "conv-26:q3", "include_adversarial": "maybe"})
