"""memgym's MCP server with the official MCP Python SDK's 1.x line (mcp 1.30.0, the newest 1.x; openenv 0.10
and fastmcp 3 still pin ``mcp<2``), in its own venv: ``ClientSession``, the
initialize handshake and a session over ``streamable_http_client`` (the 1.x client has no stateless wire).

A full episode: the ten tools listed, ``create_episode``, two memory tools, and ``score_episode``, whose
breakdown equals gRPC's ScoreEpisode for the same episode. Then the client reconnects (a new connection and
a new MCP session) and goes on with the same episode: its state lives in the episode id, not in the MCP
session, so the reconnect-and-retry that MCP clients do under load (prime-rl #3084, verifiers #2062) loses
nothing; the call sent again with its ``call_id`` after the reconnect is not applied twice. test_mcp.py
covers mcp 2.x.
"""

from __future__ import annotations

import asyncio

from memgym import message_to_dict, pb
from protocols.conftest import MCP1_VERSION, require_package

mcp = require_package("mcp", MCP1_VERSION, "mcp")
from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

ALL_TOOLS = ["search_memory", "manage_memory", "delete_memory", "sample_memory", "merge_memory", "split_memory",
             "create_episode", "score_episode", "close_episode", "fork_episode"]
BREAKDOWN = [f.name for f in pb.ScoreEpisodeResponse.DESCRIPTOR.fields]


async def _session(url: str, steps):
    async with streamable_http_client(url) as (read, write, _):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            return init, await steps(session)


def test_a_full_episode_with_mcp_1x_scores_as_over_grpc_and_survives_a_reconnect(servers, grpc_client):
    async def first(session):
        tools = (await session.list_tools()).tools
        created = await session.call_tool("create_episode", {"question_id": "conv-26:q0", "seed": 7, "max_steps": 10})
        assert created.isError is False, created
        eid = created.structuredContent["episode_id"]
        found = await session.call_tool(
            "search_memory", {"episode_id": eid, "query": "LGBTQ support group", "top_k": 3, "call_id": "mcp1-search"}
        )
        return tools, eid, found

    async def second(session, eid):
        # The call is sent again with its call_id, as a client that lost the reply would: not applied twice.
        repeated = await session.call_tool(
            "search_memory", {"episode_id": eid, "query": "LGBTQ support group", "top_k": 3, "call_id": "mcp1-search"}
        )
        assert repeated.isError is False and repeated.structuredContent["step"]["step"] == 1
        made = await session.call_tool(
            "manage_memory", {"episode_id": eid, "operation": "create", "content": "Caroline went to an LGBTQ support group on 7 May 2023."}
        )
        scored = await session.call_tool("score_episode", {"episode_id": eid})
        return made, scored

    async def go():
        init, (tools, eid, found) = await _session(servers.mcp_url, first)
        # A new connection and a new MCP session: the episode goes on where it was.
        _, (made, scored) = await _session(servers.mcp_url, lambda s: second(s, eid))
        return init, tools, eid, found, made, scored

    init, tools, eid, found, made, scored = asyncio.run(go())
    assert init.serverInfo.name == "memgym" and init.protocolVersion
    assert sorted(t.name for t in tools) == sorted(ALL_TOOLS)
    assert found.isError is False and found.structuredContent["step"]["step"] == 1
    assert made.isError is False and made.structuredContent["step"]["step"] == 2, "the edit after the reconnect is step 2"
    state = grpc_client.get_episode(eid).state
    assert state.steps_used == 2 and state.scored
    grpc_scored = grpc_client.score_episode(eid)  # idempotent: the same breakdown
    assert scored.isError is False
    expected = dict(message_to_dict(grpc_scored), evaluator=grpc_scored.evaluator)
    for field in BREAKDOWN:
        assert scored.structuredContent[field] == expected.get(field), field
    grpc_client.close_episode(eid)
