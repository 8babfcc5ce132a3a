"""memgym's OpenEnv server (``memgym serve --openenv-addr``) with openenv 0.10.0's own code: the
``openenv validate --url`` CLI, ``GenericEnvClient`` over ``/ws`` (its sync wrapper), ``MCPToolClient`` on
the OpenEnv ``/mcp`` dialect, and plain HTTP/WebSocket requests for what those clients cannot send.

Every reward is checked against gRPC ``ScoreEpisode`` on the same server: either of the very episode the
OpenEnv session opened (episode ids are shared by every listener), or of a twin episode opened over gRPC
with the same question, seed and tool calls.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
import requests

from memgym import MemgymClient, MemgymError, message_to_dict, pb
from protocols.conftest import OPENENV_VERSION, protocol_server, require_package

openenv = require_package("openenv", OPENENV_VERSION, "openenv")
from openenv import GenericEnvClient  # noqa: E402
from openenv.core.mcp_client import MCPToolClient  # noqa: E402
from websockets.sync.client import connect as ws_connect  # noqa: E402  (openenv's own dependency)

TOOLS = ["search_memory", "manage_memory", "delete_memory", "sample_memory", "merge_memory", "split_memory"]
#: ScoreEpisodeResponse's fields: the breakdown's keys on every surface.
BREAKDOWN = [f.name for f in pb.ScoreEpisodeResponse.DESCRIPTOR.fields]
VALIDATE_CRITERIA = {
    "openapi_version_available",
    "health_endpoint",
    "metadata_endpoint",
    "schema_endpoint",
    "mcp_endpoint",
    "mode_endpoint_consistency",
}


def env_client(servers):
    """openenv's ``GenericEnvClient`` on the server's OpenEnv port, sync wrapper (a context manager)."""
    return GenericEnvClient(base_url=servers.openenv).sync()


def call(env, tool, **arguments):
    """One ``call_tool`` action (MCP-style step) through the client."""
    return env.step({"type": "call_tool", "tool_name": tool, "arguments": arguments})


def assert_breakdown_equals_grpc(breakdown, scored):
    """The breakdown (JSON) has exactly ScoreEpisodeResponse's fields, with the gRPC response's values."""
    assert sorted(breakdown) == sorted(BREAKDOWN)
    expected = message_to_dict(scored)
    expected["evaluator"] = scored.evaluator
    for field in BREAKDOWN:
        assert breakdown[field] == expected.get(field), field


def closed_over_grpc(client, episode_id, wait=5.0):
    """True once gRPC GetEpisode says the episode is closed (FAILED_PRECONDITION); polls up to ``wait`` s
    because a WebSocket close is processed after the client has returned."""
    deadline = time.monotonic() + wait
    while True:
        try:
            client.get_episode(episode_id)
        except MemgymError as err:
            return err.code == grpc.StatusCode.FAILED_PRECONDITION
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


def test_openenv_validate_url_passes_all_six_criteria(servers, tmp_path):
    cli = Path(sys.executable).with_name("openenv")
    # The full JSON report is kept where $MEMGYM_TEST_REPORTS says (scripts/test: under the target dir).
    reports = Path(os.environ.get("MEMGYM_TEST_REPORTS") or tmp_path)
    reports.mkdir(parents=True, exist_ok=True)
    stored = reports / "openenv-validate.json"
    done = subprocess.run([str(cli), "validate", "--url", servers.openenv, "--json", "--output", str(stored)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert json.loads(stored.read_text()) == report, "the stored report is the one printed"
    assert report["passed"] is True and report["mode"] == "simulation"
    assert {c["id"] for c in report["criteria"]} == VALIDATE_CRITERIA
    assert [c["id"] for c in report["criteria"] if not c["passed"]] == []
    # The text report (no --json) says so too, and exits 0.
    text = subprocess.run([str(cli), "validate", "--url", servers.openenv], capture_output=True, text=True, timeout=120)
    assert text.returncode == 0, text.stdout + text.stderr


def test_an_episode_over_ws_matches_its_grpc_twin(servers, grpc_client):
    list_tools = {t["function"]["name"]: t["function"] for t in grpc_client.list_tools()}
    with env_client(servers) as env:
        reset = env.reset(question_id="conv-26:q0", seed=7, max_steps=10)
        obs = reset.observation
        assert reset.reward is None and reset.done is False
        episode_id = obs["episode_id"]
        state = grpc_client.get_episode(episode_id).state  # the same server, the same episode
        assert (obs["question"], state.question_id, state.seed, state.max_steps) == (state.question, "conv-26:q0", 7, 10)
        assert (obs["steps_used"], obs["steps_left"], obs["memory_count"]) == (0, 10, state.memory_count)

        twin = f"{episode_id}-twin"
        grpc_client.create_episode("conv-26:q0", episode_id=twin, seed=7, max_steps=10)

        listed = env.step({"type": "list_tools"})
        assert (listed.reward, listed.done) == (0.0, False)
        tools = {t["name"]: t for t in listed.observation["tools"]}
        assert sorted(tools) == sorted(TOOLS)
        for name, tool in tools.items():
            assert tool["input_schema"] == list_tools[name]["parameters"], name
            assert tool["description"] == list_tools[name]["description"], name

        calls = [
            ("search_memory", {"query": "LGBTQ support group", "top_k": 3}),
            ("manage_memory", {"operation": "create", "content": "Caroline went to an LGBTQ support group on 7 May 2023.", "speaker": "Caroline"}),
            ("search_memory", {"query": "When did Caroline go to the LGBTQ support group?"}),
        ]
        for i, (tool, arguments) in enumerate(calls, start=1):
            result = call(env, tool, **arguments)
            twin_text, _ = grpc_client.call_tool(twin, tool, arguments)
            o = result.observation
            assert (result.reward, result.done, o["error"], o["tool_name"]) == (0.0, False, None, tool)
            assert o["result"]["tool"] == tool and o["result"]["text"] == o["text"] == twin_text
            assert o["result"]["step"] == {"step": i, "steps_left": 10 - i, "done": False}
            assert o["result"]["metrics"]["steps_used"] == i and o["result"]["metrics"]["steps_left"] == 10 - i
        assert o["result"]["results"][0]["memory"]["text"].startswith("Caroline")

        st = env.state()
        assert st["episode_id"] == episode_id
        assert st["step_count"] == 4  # list_tools + three calls: every step message answered
        assert (st["steps_used"], st["steps_left"], st["max_steps"]) == (3, 7, 10)
        assert st["memory_count"] == grpc_client.get_episode(episode_id).state.memory_count == state.memory_count + 1
        assert (st["done"], st["scored"]) == (False, False)

        scored = env.step({"type": "score"})
        twin_score = grpc_client.score_episode(twin)
        assert scored.done is True
        assert scored.reward == twin_score.reward == grpc_client.score_episode(episode_id).reward
        assert_breakdown_equals_grpc(scored.metadata, grpc_client.score_episode(episode_id))
        assert scored.observation["metadata"] == scored.metadata
        twin_breakdown = dict(message_to_dict(twin_score), evaluator=twin_score.evaluator)
        for field in ("p_old", "p_new", "performance_delta", "memory_efficiency", "reward", "retrieved_new", "final_memory_count", "steps_used"):
            assert scored.metadata[field] == twin_breakdown[field], field
        assert env.state()["scored"] is True
    grpc_client.close_episode(twin)
    assert closed_over_grpc(grpc_client, episode_id), "the episode stays open after the client closed"


def test_unknown_tool_and_bad_arguments_are_observation_errors_and_the_session_goes_on(servers, grpc_client):
    with env_client(servers) as env:
        episode_id = env.reset(question_id="conv-26:q0").observation["episode_id"]
        unknown = call(env, "fly_memory", query="x")
        o = unknown.observation
        assert (unknown.reward, unknown.done, o["result"]) == (0.0, False, None)
        assert o["error"]["error_type"] == "tool_not_found" and "fly_memory" in o["error"]["message"]

        bad = call(env, "search_memory", query="support group", top_k=0)
        o = bad.observation
        assert (bad.reward, bad.done, o["result"]) == (0.0, False, None)
        assert o["error"]["error_type"] == "invalid_args" and "top_k" in o["error"]["message"]
        assert grpc_client.get_episode(episode_id).state.steps_used == 0  # nothing was spent

        ok = call(env, "search_memory", query="support group")
        assert ok.observation["error"] is None and ok.observation["steps_used"] == 1
        assert env.state()["step_count"] == 3


def test_the_budget_running_out_ends_the_episode_with_its_reward(servers, grpc_client):
    with env_client(servers) as env:
        episode_id = env.reset(question_id="conv-26:q0", seed=3, max_steps=2).observation["episode_id"]
        first = call(env, "search_memory", query="support group")
        assert (first.done, first.reward) == (False, 0.0)
        last = call(env, "manage_memory", operation="create", content="Caroline went to an LGBTQ support group on 7 May 2023.")
        scored = grpc_client.score_episode(episode_id)
        assert last.done is True and last.reward == scored.reward
        assert last.observation["steps_left"] == 0
        assert_breakdown_equals_grpc(last.metadata, scored)
        after = call(env, "search_memory", query="support group")
        assert after.done is True and after.observation["error"]["error_type"] == "execution_error"
        assert env.state()["scored"] is True


def test_a_second_reset_closes_the_first_episode(servers, grpc_client):
    with env_client(servers) as env:
        first = env.reset(question_id="conv-26:q0").observation["episode_id"]
        call(env, "search_memory", query="support group")
        second = env.reset(question_id="conv-26:q1").observation["episode_id"]
        assert second != first
        # The replaced episode is closed in the background (Gateway::close_later): poll, as for a disconnect.
        assert closed_over_grpc(grpc_client, first)
        st = env.state()
        assert (st["episode_id"], st["steps_used"]) == (second, 0)
        assert grpc_client.get_episode(second).state.question_id == "conv-26:q1"


def test_two_sessions_are_isolated(servers, grpc_client):
    with env_client(servers) as a, env_client(servers) as b:
        ea = a.reset(question_id="conv-26:q0", seed=1).observation
        eb = b.reset(question_id="conv-26:q0", seed=1).observation
        assert ea["episode_id"] != eb["episode_id"]
        created = call(a, "manage_memory", operation="create", content="Zanzibar quokka marmalade is a unique memgym probe.")
        new_id = created.observation["result"]["memory"]["id"]
        assert a.state()["memory_count"] == ea["memory_count"] + 1
        assert b.state()["memory_count"] == eb["memory_count"]
        found_a = call(a, "search_memory", query="Zanzibar quokka marmalade", top_k=3).observation["result"]["results"]
        found_b = call(b, "search_memory", query="Zanzibar quokka marmalade", top_k=3).observation["result"]["results"]
        assert found_a[0]["memory"]["id"] == new_id
        assert all("Zanzibar" not in r["memory"]["text"] for r in found_b)
        assert b.state()["steps_used"] == 1 and a.state()["steps_used"] == 2


def test_capacity_refuses_the_third_session_until_one_closes():
    with protocol_server("--openenv-max-sessions", "2") as s:
        first, second = env_client(s), env_client(s)
        first.connect()
        second.connect()
        assert first.reset(question_id="conv-26:q0").observation["episode_id"]
        assert second.reset(question_id="conv-26:q1").observation["episode_id"]
        third = env_client(s)
        try:
            third.connect()  # openenv's client connects even at capacity; the refusal is the first frame
            with pytest.raises(RuntimeError, match=r"\(code: CAPACITY_REACHED\)"):
                third.reset(question_id="conv-26:q2")
        finally:
            third.close()
        first.close()
        # The slot is freed when the server has processed the close (asynchronously): retry briefly.
        deadline = time.monotonic() + 5
        while True:
            fourth = env_client(s)
            try:
                obs = fourth.reset(question_id="conv-26:q3").observation
                break
            except RuntimeError as err:
                fourth.close()
                if "CAPACITY_REACHED" not in str(err) or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        try:
            with MemgymClient(s.grpc) as c:
                assert c.get_episode(obs["episode_id"]).state.question_id == "conv-26:q3"
            assert call(fourth, "search_memory", query="support group").observation["error"] is None
            assert second.state()["question"]  # the survivor is untouched
        finally:
            fourth.close()
            second.close()


def test_capacity_frame_on_the_wire():
    with protocol_server("--openenv-max-sessions", "1") as s:
        url = s.openenv.replace("http://", "ws://") + "/ws"
        with ws_connect(url) as held, ws_connect(url) as refused:
            frame = json.loads(refused.recv(timeout=10))
            assert frame["type"] == "error"
            assert frame["data"]["code"] == "CAPACITY_REACHED"
            assert (frame["data"]["active_sessions"], frame["data"]["max_sessions"]) == (1, 1)
            held.send(json.dumps({"type": "state"}))
            assert json.loads(held.recv(timeout=10)) == {"type": "state", "data": {"episode_id": None, "step_count": 0}}


def test_protocol_errors_keep_the_connection_open(servers):
    with ws_connect(servers.openenv.replace("http://", "ws://") + "/ws") as ws:

        def send(message):
            ws.send(message if isinstance(message, str) else json.dumps(message))
            return json.loads(ws.recv(timeout=30))

        cases = [
            ("not json", "INVALID_JSON"),
            ({"type": "fly"}, "UNKNOWN_TYPE"),
            ({"type": "state", "data": {}}, "VALIDATION_ERROR"),
            ({"type": "step"}, "VALIDATION_ERROR"),
            ({"type": "reset", "data": {"bogus": 1}}, "VALIDATION_ERROR"),
            ({"type": "step", "data": {"type": "score"}}, "EXECUTION_ERROR"),  # before any reset
        ]
        for message, code in cases:
            reply = send(message)
            assert reply["type"] == "error" and reply["data"]["code"] == code, (message, reply)
            assert reply["data"]["message"]
        assert "bogus" in send({"type": "reset", "data": {"bogus": 1}})["data"]["message"]
        reset = send({"type": "reset", "data": {"question_id": "conv-26:q0"}})
        assert reset["type"] == "observation" and reset["data"]["reward"] is None and reset["data"]["done"] is False
        bad_action = send({"type": "step", "data": {"type": "fly"}})
        assert bad_action["type"] == "error" and bad_action["data"]["code"] == "VALIDATION_ERROR"
        assert send({"type": "state"})["data"]["episode_id"] == reset["data"]["observation"]["episode_id"]


def test_http_endpoints_are_openenvs_stateless_ones(servers):
    base = servers.openenv
    assert requests.get(f"{base}/health", timeout=10).json() == {"status": "healthy"}
    meta = requests.get(f"{base}/metadata", timeout=10).json()
    assert meta["name"] == "memgym" and isinstance(meta["description"], str)
    schema = requests.get(f"{base}/schema", timeout=10).json()
    assert all(isinstance(schema[k], dict) for k in ("action", "observation", "state"))
    paths = requests.get(f"{base}/openapi.json", timeout=10).json()["paths"]
    assert {"/reset", "/step", "/state"} <= set(paths)

    reset = requests.post(f"{base}/reset", json={"question_id": "conv-26:q0"}, timeout=30)
    assert reset.status_code == 200
    body = reset.json()
    assert body["reward"] is None and body["done"] is False and body["observation"]["question"]
    assert requests.post(f"{base}/reset", timeout=30).status_code == 200  # an empty body is allowed
    assert requests.get(f"{base}/state", timeout=10).json() == {"episode_id": None, "step_count": 0}
    step = requests.post(f"{base}/step", json={"action": {"type": "call_tool", "tool_name": "search_memory", "arguments": {"query": "support group"}}}, timeout=30)
    assert step.status_code == 200 and step.json()["observation"]["result"]["tool"] == "search_memory"
    bad = requests.post(f"{base}/step", json={"action": {"type": "fly"}}, timeout=30)
    assert bad.status_code == 422 and isinstance(bad.json()["detail"], list)


def test_openenv_mcp_dialect_plain_post(servers, grpc_client):
    def rpc(body, **kwargs):
        resp = requests.post(f"{servers.openenv}/mcp", timeout=30, **({"json": body} if body is not None else kwargs))
        assert resp.status_code == 200
        return resp.json()

    assert rpc({})["error"]["code"] == -32600
    assert rpc(None, data="{not json", headers={"Content-Type": "application/json"})["error"]["code"] == -32700
    assert rpc({"jsonrpc": "2.0", "method": "initialize", "params": {}, "id": 1})["error"]["code"] == -32601

    session = rpc({"jsonrpc": "2.0", "method": "openenv/session/create", "params": {}, "id": 2})
    assert session["id"] == 2 and session["result"]["session_id"]
    listed = rpc({"jsonrpc": "2.0", "method": "tools/list", "params": {"session_id": session["result"]["session_id"]}, "id": 3})
    tools = {t["name"]: t for t in listed["result"]["tools"]}
    assert sorted(tools) == sorted(TOOLS + ["create_episode", "score_episode", "close_episode", "fork_episode"])
    assert all(t["inputSchema"]["type"] == "object" for t in tools.values())

    created = rpc({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "create_episode", "arguments": {"question_id": "conv-26:q0", "seed": 7}}, "id": 4})
    result = created["result"]
    assert result["isError"] is False and result["data"] == result["structuredContent"]
    episode_id = result["data"]["episode_id"]
    assert grpc_client.get_episode(episode_id).state.question_id == "conv-26:q0"
    refused = rpc({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "search_memory", "arguments": {"episode_id": episode_id, "query": "x", "top_k": 0}}, "id": 5})
    assert refused["result"]["isError"] is True and "top_k" in refused["result"]["content"][0]["text"]
    closed = rpc({"jsonrpc": "2.0", "method": "openenv/session/close", "params": {"session_id": session["result"]["session_id"]}, "id": 6})
    assert closed["result"]["closed"] is True
    grpc_client.close_episode(episode_id)


def test_openenv_mcp_tool_client(servers, grpc_client):
    """openenv's own MCPToolClient: session/create + tools over the OpenEnv /mcp dialect."""

    async def run():
        async with MCPToolClient(base_url=servers.openenv) as client:
            tools = await client.list_tools()
            assert sorted(t.name for t in tools) == sorted(TOOLS + ["create_episode", "score_episode", "close_episode", "fork_episode"])
            episode = await client.call_tool("create_episode", question_id="conv-26:q0", seed=7)
            found = await client.call_tool("search_memory", episode_id=episode["episode_id"], query="support group", top_k=2)
            scored = await client.call_tool("score_episode", episode_id=episode["episode_id"])
            await client.call_tool("close_episode", episode_id=episode["episode_id"])
            return episode, found, scored

    episode, found, scored = asyncio.run(run())
    assert episode["question_id"] == "conv-26:q0" and found["tool"] == "search_memory" and len(found["results"]) == 2
    with pytest.raises(MemgymError):
        grpc_client.get_episode(episode["episode_id"])  # closed by close_episode
    assert sorted(scored) == sorted(BREAKDOWN)


def test_the_readme_example_runs_against_the_server(servers):
    """examples/protocols/openenv_episode.py, as the book's "Trainers and agents" runs it."""
    example = Path(__file__).resolve().parents[3] / "examples" / "protocols" / "openenv_episode.py"
    out = subprocess.run([sys.executable, str(example), servers.openenv], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "question: What did Caroline research?" in out.stdout
    assert "tools: search_memory, manage_memory, delete_memory, sample_memory, merge_memory, split_memory" in out.stdout
    assert "Scored: reward" in out.stdout, out.stdout
