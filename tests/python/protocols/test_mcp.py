"""memgym's MCP server (``memgym serve --mcp-addr``, streamable HTTP at ``/mcp``) with the official MCP
Python SDK, mcp 2.3.0's ``mcp.Client``, in both of its connection modes:

- ``mode="auto"`` (the SDK's default): probes ``server/discover`` and adopts the stateless 2026-07-28 wire;
- ``mode="legacy"``: the ``initialize`` handshake and a session (2025-11-25).

The MCP and gRPC listeners are one server, so every episode the MCP client opens is read and scored over
gRPC too, and the rewards and breakdowns compared. The same standard MCP is served on the OpenEnv port's
``/mcp`` to a client that accepts both JSON and SSE (the OpenEnv dialect there is test_openenv.py's).
"""

from __future__ import annotations

import asyncio
import copy
import http.client
import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import grpc
import pytest

from memgym import MemgymError, message_to_dict, pb
from protocols.conftest import MCP_VERSION, require_package

mcp = require_package("mcp", MCP_VERSION, "mcp")
from mcp import Client  # noqa: E402

TOOLS = ["search_memory", "manage_memory", "delete_memory", "sample_memory", "merge_memory", "split_memory"]
ALL_TOOLS = TOOLS + ["create_episode", "score_episode", "close_episode", "fork_episode"]
BREAKDOWN = [f.name for f in pb.ScoreEpisodeResponse.DESCRIPTOR.fields]
EPISODE_KEYS = {
    "episode_id", "question", "conversation_id", "question_id", "initial_memory_count", "memory_count", "max_steps",
    "steps_used", "steps_left", "done", "scored", "seed", "evaluator", "created",
}  # fmt: skip
PROTOCOL = {"auto": "2026-07-28", "legacy": "2025-11-25"}

MODES = pytest.mark.parametrize("mode", ["auto", "legacy"])


def run(coro):
    return asyncio.run(coro)


def text_of(result):
    assert len(result.content) == 1 and result.content[0].type == "text"
    return result.content[0].text


@MODES
def test_connect_and_list_the_ten_tools(mode, servers, grpc_client):
    list_tools = {t["function"]["name"]: t["function"] for t in grpc_client.list_tools()}

    async def go():
        async with Client(servers.mcp_url, mode=mode) as client:
            return client.protocol_version, client.server_info, (await client.list_tools()).tools

    version, info, tools = run(go())
    assert version == PROTOCOL[mode]
    assert info is not None and info.name == "memgym"
    by_name = {t.name: t for t in tools}
    assert sorted(by_name) == sorted(ALL_TOOLS)
    for name in TOOLS:
        schema, served = by_name[name].input_schema, list_tools[name]
        assert by_name[name].description == served["description"]
        expected = copy.deepcopy(served["parameters"])
        assert schema["properties"]["episode_id"]["type"] == "string"
        assert schema["properties"]["call_id"]["type"] == "string"  # optional: the retry key
        expected["properties"]["episode_id"] = schema["properties"]["episode_id"]
        expected["properties"]["call_id"] = schema["properties"]["call_id"]
        expected["required"] = sorted(expected.get("required", []) + ["episode_id"])
        assert dict(schema, required=sorted(schema["required"])) == expected, name
    assert set(by_name["create_episode"].input_schema["properties"]) == {
        "question_id", "conversation_id", "seed", "episode_id", "max_steps", "evaluator", "include_adversarial",
    }  # fmt: skip
    for name in ("score_episode", "close_episode"):
        assert by_name[name].input_schema["required"] == ["episode_id"]


@MODES
def test_an_episode_over_mcp_scores_as_over_grpc(mode, servers, grpc_client):
    async def go():
        async with Client(servers.mcp_url, mode=mode) as client:
            created = await client.call_tool("create_episode", {"question_id": "conv-26:q0", "seed": 7, "max_steps": 10})
            assert created.is_error is False
            episode = created.structured_content
            eid = episode["episode_id"]
            found = await client.call_tool("search_memory", {"episode_id": eid, "query": "LGBTQ support group", "top_k": 3})
            made = await client.call_tool(
                "manage_memory", {"episode_id": eid, "operation": "create", "content": "Caroline went to an LGBTQ support group on 7 May 2023."}
            )
            scored = await client.call_tool("score_episode", {"episode_id": eid})
            return episode, found, made, scored

    episode, found, made, scored = run(go())
    assert EPISODE_KEYS <= set(episode)
    assert (episode["question_id"], episode["seed"], episode["max_steps"], episode["steps_used"]) == ("conv-26:q0", 7, 10, 0)
    eid = episode["episode_id"]
    state = grpc_client.get_episode(eid).state  # the same server, the same episode
    assert (state.question, state.steps_used, state.memory_count) == (episode["question"], 2, episode["memory_count"] + 1)

    twin = f"{eid}-twin"
    grpc_client.create_episode("conv-26:q0", episode_id=twin, seed=7, max_steps=10)
    twin_found, _ = grpc_client.call_tool(twin, "search_memory", {"query": "LGBTQ support group", "top_k": 3})
    assert found.is_error is False and text_of(found) == found.structured_content["text"] == twin_found
    assert found.structured_content["tool"] == "search_memory" and len(found.structured_content["results"]) == 3
    assert found.structured_content["step"] == {"step": 1, "steps_left": 9, "done": False}
    assert found.structured_content["metrics"]["steps_used"] == 1 and found.structured_content["metrics"]["memories_delta"] == 0
    assert made.is_error is False and made.structured_content["memory"]["text"].startswith("Caroline went")

    grpc_scored = grpc_client.score_episode(eid)
    assert scored.is_error is False
    breakdown = scored.structured_content
    assert sorted(breakdown) == sorted(BREAKDOWN)
    expected = dict(message_to_dict(grpc_scored), evaluator=grpc_scored.evaluator)
    for field in BREAKDOWN:
        assert breakdown[field] == expected.get(field), field
    assert breakdown["reward"] == grpc_scored.reward
    grpc_client.close_episode(twin)
    grpc_client.close_episode(eid)


@MODES
def test_episode_tools_content_is_the_json_of_their_structured_content(mode, servers):
    """Contract: ``content`` is one text block, the compact text for the six tools, JSON text for the others."""

    async def go():
        async with Client(servers.mcp_url, mode=mode) as client:
            created = await client.call_tool("create_episode", {"question_id": "conv-26:q0"})
            eid = created.structured_content["episode_id"]
            scored = await client.call_tool("score_episode", {"episode_id": eid})
            closed = await client.call_tool("close_episode", {"episode_id": eid})
            return created, scored, closed

    for result in run(go()):
        assert result.is_error is False
        assert json.loads(text_of(result)) == result.structured_content


@MODES
def test_bad_arguments_are_tool_errors_not_protocol_errors(mode, servers, grpc_client):
    async def go():
        async with Client(servers.mcp_url, mode=mode) as client:
            eid = (await client.call_tool("create_episode", {"question_id": "conv-26:q0"})).structured_content["episode_id"]
            results = {
                "top_k": await client.call_tool("search_memory", {"episode_id": eid, "query": "x", "top_k": 0}),
                "query": await client.call_tool("search_memory", {"episode_id": eid}),
                "episode_id": await client.call_tool("search_memory", {"query": "x"}),
                "unknown episode": await client.call_tool("search_memory", {"episode_id": "no-such-episode", "query": "x"}),
                "bogus": await client.call_tool("create_episode", {"question_id": "conv-26:q0", "bogus": 1}),
                "question_id": await client.call_tool("create_episode", {"question_id": "conv-99:q0"}),
            }
            ok = await client.call_tool("search_memory", {"episode_id": eid, "query": "support group"})
            return eid, results, ok

    eid, results, ok = run(go())
    for named, result in results.items():
        assert result.is_error is True, named
        message = text_of(result)
        assert named.split()[0] in message or "not found" in message, (named, message)
    assert ok.is_error is False
    assert grpc_client.get_episode(eid).state.steps_used == 1  # only the good call spent a step
    grpc_client.close_episode(eid)


@MODES
def test_two_clients_are_isolated(mode, servers, grpc_client):
    async def go():
        async with Client(servers.mcp_url, mode=mode) as a, Client(servers.mcp_url, mode=mode) as b:
            ea = (await a.call_tool("create_episode", {"question_id": "conv-26:q0", "seed": 1})).structured_content
            eb = (await b.call_tool("create_episode", {"question_id": "conv-26:q0", "seed": 1})).structured_content
            made = await a.call_tool(
                "manage_memory", {"episode_id": ea["episode_id"], "operation": "create", "content": "Zanzibar quokka marmalade probe."}
            )
            found_b = await b.call_tool("search_memory", {"episode_id": eb["episode_id"], "query": "Zanzibar quokka marmalade"})
            found_a = await a.call_tool("search_memory", {"episode_id": ea["episode_id"], "query": "Zanzibar quokka marmalade"})
            return ea, eb, made, found_a, found_b

    ea, eb, made, found_a, found_b = run(go())
    assert ea["episode_id"] != eb["episode_id"]
    new_id = made.structured_content["memory"]["id"]
    assert found_a.structured_content["results"][0]["memory"]["id"] == new_id
    assert all("Zanzibar" not in r["memory"]["text"] for r in found_b.structured_content["results"])
    assert grpc_client.get_episode(ea["episode_id"]).state.memory_count == ea["memory_count"] + 1
    assert grpc_client.get_episode(eb["episode_id"]).state.memory_count == eb["memory_count"]
    for e in (ea, eb):
        grpc_client.close_episode(e["episode_id"])


@MODES
def test_close_episode_closes_it_for_grpc_too(mode, servers, grpc_client):
    async def go():
        async with Client(servers.mcp_url, mode=mode) as client:
            eid = (await client.call_tool("create_episode", {"question_id": "conv-26:q1"})).structured_content["episode_id"]
            closed = await client.call_tool("close_episode", {"episode_id": eid})
            again = await client.call_tool("search_memory", {"episode_id": eid, "query": "x"})
            return eid, closed, again

    eid, closed, again = run(go())
    assert closed.is_error is False and closed.structured_content["episode_id"] == eid
    assert again.is_error is True
    with pytest.raises(MemgymError) as err:
        grpc_client.get_episode(eid)
    assert err.value.code == grpc.StatusCode.FAILED_PRECONDITION


@MODES
def test_the_openenv_port_serves_standard_mcp_too(mode, servers):
    async def go():
        async with Client(f"{servers.openenv}/mcp", mode=mode) as client:
            tools = (await client.list_tools()).tools
            eid = (await client.call_tool("create_episode", {"question_id": "conv-26:q0"})).structured_content["episode_id"]
            found = await client.call_tool("search_memory", {"episode_id": eid, "query": "support group"})
            await client.call_tool("close_episode", {"episode_id": eid})
            return client.protocol_version, tools, found

    version, tools, found = run(go())
    assert version == PROTOCOL[mode]
    assert sorted(t.name for t in tools) == sorted(ALL_TOOLS)
    assert found.is_error is False and found.structured_content["tool"] == "search_memory"


def test_a_foreign_host_header_is_forbidden(servers):
    """DNS-rebinding protection (--http-allowed-hosts, default loopback names): another Host gets 403."""
    url = urlsplit(servers.mcp_url)
    body = json.dumps({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    })  # fmt: skip
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    for host, status in (("evil.example", 403), (f"localhost:{url.port}", 200)):
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
        try:
            conn.request("POST", url.path, body=body, headers={**headers, "Host": host})
            assert conn.getresponse().status == status, host
        finally:
            conn.close()


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_the_readme_example_runs_against_the_server(mode, servers):
    """examples/protocols/mcp_episode.py, as the book's "Trainers and agents" runs it."""
    example = Path(__file__).resolve().parents[3] / "examples" / "protocols" / "mcp_episode.py"
    out = subprocess.run([sys.executable, str(example), servers.mcp_url, mode], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert ("protocol: 2026-07-28" if mode == "auto" else "protocol: 2025-11-25") in out.stdout, out.stdout
    refused = next(line for line in out.stdout.splitlines() if line.startswith("refused:"))
    assert refused.startswith("refused: True Error:") and "memory_id" in refused and "m9999" in refused, refused
    assert "reward: " in out.stdout
    assert "Session termination failed" not in out.stderr, out.stderr
