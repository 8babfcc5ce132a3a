"""memgym as a NeMo Gym resources server (``--nemo-gym-addr``), driven by NeMo Gym's own released code
(nemo-gym 0.7.0, in its own venv on Python 3.13):

- NeMo Gym's session-contract check (``nemo_gym.testing.session_conformance``: seed, repeated seed, close,
  repeated close, close of a never-seeded session, seed after close) passes against the face. The check
  drives a FastAPI app in process; it is handed a transparent proxy app whose every request is forwarded to
  memgym's listener, so every answer it checks is memgym's. The same check run again on the closed session
  fails, as it must.
- One full episode through NeMo Gym's ``SimpleAgent`` (its ``/run``: ``/seed_session``, the model, the tool
  routes with the session cookie, ``/verify``), with memgym configured as an external resources server by
  the yaml the book shows, and a scripted policy behind a Responses API endpoint. The reward and breakdown
  ``/verify`` returns equal gRPC ``ScoreEpisode``'s for the same calls replayed on a gRPC episode, and every
  tool output the policy read equals the text gRPC ``CallTool`` returns.
- ``expose_tools_over_mcp``: the typed seed's reply validates as NeMo Gym's ``ResourcesSeedSessionResponse``,
  and the MCP SDK NeMo Gym pins, with the reply's ``resources_tools`` headers, drives the session's episode.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
import urllib.request
import uuid

import pytest

from conftest import free_port, running_server
from memgym import MemgymClient, message_to_dict, pb
from protocols.conftest import require_package

#: The NeMo Gym release under test (scripts/install-protocols.sh pins it).
NEMO_GYM_VERSION = "0.7.0"

require_package("nemo-gym", NEMO_GYM_VERSION, "nemo_gym")
# At module level: FastAPI reads the routes' (postponed) annotations from this module's globals.
from fastapi import FastAPI, Request, Response  # noqa: E402

BREAKDOWN = [f.name for f in pb.ScoreEpisodeResponse.DESCRIPTOR.fields]
QUESTION_ID = "conv-26:q3"

#: What a user writes to point NeMo Gym at memgym (the book's "NeMo Gym" chapter): a resources server with
#: no entrypoint (NeMo Gym starts nothing for it, its ServerClient calls host:port) and an agent using it.
USER_YAML = """
memgym:
  resources_servers:
    memgym:
      host: 127.0.0.1
      port: {memgym_port}
memgym_agent:
  responses_api_agents:
    simple_agent:
      entrypoint: app.py
      host: 127.0.0.1
      port: {agent_port}
      resources_server:
        type: resources_servers
        name: memgym
      model_server:
        type: responses_api_models
        name: policy_model
      max_steps: 8
policy_model:
  responses_api_models:
    scripted:
      host: 127.0.0.1
      port: {model_port}
"""


def _wait_tcp(port: int) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"nothing listens on {port}"
            time.sleep(0.1)


@pytest.fixture(scope="module")
def memgym_server():
    """The real ``memgym serve`` with its NeMo Gym listener: (gRPC address, NeMo Gym port)."""
    port = free_port()
    with running_server("--nemo-gym-addr", f"127.0.0.1:{port}") as grpc_address:
        _wait_tcp(port)
        yield grpc_address, port


def _proxy_app(base_url: str):
    """A FastAPI app that forwards every request, its body and cookies to ``base_url`` and returns the answer
    as it came (status, body, content type, Set-Cookie)."""
    import httpx

    app = FastAPI()

    @app.api_route("/{path:path}", methods=["GET", "POST"])
    async def forward(path: str, request: Request) -> Response:
        headers = {k: v for k, v in request.headers.items() if k.lower() in ("cookie", "content-type", "accept")}
        async with httpx.AsyncClient() as client:
            r = await client.request(request.method, f"{base_url}/{path}", content=await request.body(), headers=headers)
        out = Response(content=r.content, status_code=r.status_code, media_type=r.headers.get("content-type"))
        for cookie in r.headers.get_list("set-cookie"):
            out.headers.append("set-cookie", cookie)
        return out

    return app


def test_nemo_gyms_session_contract_check_passes(memgym_server):
    from nemo_gym.base_resources_server import ResourcesSeedSessionRequest
    from nemo_gym.episode_types import EpisodeId, TaskId
    from nemo_gym.testing.session_conformance import check_resources_session_contract

    _, port = memgym_server
    app = _proxy_app(f"http://127.0.0.1:{port}")
    seed = ResourcesSeedSessionRequest(
        resources_session_id=f"contract-{uuid.uuid4().hex}",
        episode_id=EpisodeId(rollout_id="contract-rollout", attempt=0),
        task_id=TaskId(taskset="memgym", task_id=QUESTION_ID),
        task_data={"question_id": QUESTION_ID},
    )
    check_resources_session_contract(app, seed, keeps_state=True)
    # The check is not vacuous: run again on the session it closed, its first seed is refused.
    with pytest.raises(AssertionError, match="seed failed: 409"):
        check_resources_session_contract(app, seed, keeps_state=True)


def _serve(app, port: int):
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.05)
    return server, thread


def _scripted_policy():
    """A Responses API endpoint whose deterministic policy searches for the question, deletes the first
    memory the search showed, writes a note, and stops."""
    app = FastAPI()

    @app.post("/v1/responses")
    async def responses(request: Request):
        body = await request.json()
        items = body["input"]
        question = next(i["content"] for i in items if i.get("role") == "user")
        outputs = [i["output"] for i in items if i.get("type") == "function_call_output"]
        step = len(outputs)
        if step == 0:
            call = ("search_memory", {"query": question})
        elif step == 1:
            call = ("delete_memory", {"memory_id": re.search(r"\bm\d{4,}\b", outputs[0]).group(0)})
        elif step == 2:
            call = ("manage_memory", {"operation": "create", "content": f"Note for the question: {question}"})
        else:
            call = None
        if call is None:
            output = [{"type": "message", "id": "msg_end", "role": "assistant", "status": "completed",
                       "content": [{"type": "output_text", "text": "The memory is ready.", "annotations": []}]}]
        else:
            name, args = call
            output = [{"type": "function_call", "id": f"fc_{step}", "call_id": f"call_{step}", "name": name,
                       "arguments": json.dumps(args), "status": "completed"}]
        return {"id": f"resp_{step}", "created_at": 0, "model": "scripted", "object": "response", "output": output,
                "parallel_tool_calls": False, "tool_choice": "auto", "tools": []}

    return app


def _responses_tools(grpc: MemgymClient):
    """memgym's six tools as Responses API function tools (what a NeMo Gym dataset row carries)."""
    return [{"type": "function", "name": t["function"]["name"], "description": t["function"]["description"],
             "parameters": t["function"]["parameters"], "strict": False} for t in grpc.list_tools()]


def test_a_full_episode_through_nemo_gyms_simple_agent_scores_as_grpc(memgym_server, monkeypatch):
    from nemo_gym.config_types import BaseServerConfig, ModelServerRef, ResourcesServerRef
    from nemo_gym.server_utils import ServerClient
    from omegaconf import OmegaConf
    from responses_api_agents.simple_agent.app import SimpleAgent, SimpleAgentConfig

    grpc_address, memgym_port = memgym_server
    agent_port, model_port = free_port(), free_port()
    yaml = USER_YAML.format(memgym_port=memgym_port, agent_port=agent_port, model_port=model_port)
    # How NeMo Gym hands its servers the merged config (a child server reads it from this variable).
    monkeypatch.setenv("NEMO_GYM_CONFIG_DICT", yaml)
    config = OmegaConf.create(yaml)
    client = ServerClient(head_server_config=BaseServerConfig(host="127.0.0.1", port=free_port()), global_config_dict=config)
    agent_config = SimpleAgentConfig(
        host="127.0.0.1", port=agent_port, entrypoint="app.py", name="memgym_agent", max_steps=8,
        resources_server=ResourcesServerRef(type="resources_servers", name="memgym"),
        model_server=ModelServerRef(type="responses_api_models", name="policy_model"),
    )
    agent = SimpleAgent(config=agent_config, server_client=client)

    with MemgymClient(grpc_address, timeout=60.0) as grpc:
        question = grpc.create_episode(QUESTION_ID, seed=5).state
        grpc.close_episode(question.episode_id)
        row = {
            "responses_create_params": {
                "input": [
                    {"role": "system", "content": "Edit the memory so that it answers the question, then stop."},
                    {"role": "user", "content": question.question},
                ],
                "tools": _responses_tools(grpc),
            },
            "question_id": QUESTION_ID,
            "seed": 5,
            "_ng_task_index": 0,
            "_ng_rollout_index": 0,
        }
        servers = [_serve(_scripted_policy(), model_port), _serve(agent.setup_webserver(), agent_port)]
        try:
            request = urllib.request.Request(
                f"http://127.0.0.1:{agent_port}/run", data=json.dumps(row).encode(), headers={"content-type": "application/json"}
            )
            with urllib.request.urlopen(request, timeout=120) as r:
                result = json.loads(r.read())
        finally:
            for server, thread in servers:
                server.should_exit = True
                thread.join(timeout=10)

        output = result["response"]["output"]
        calls = [o for o in output if o["type"] == "function_call"]
        seen = [o["output"] for o in output if o["type"] == "function_call_output"]
        assert [c["name"] for c in calls] == ["search_memory", "delete_memory", "manage_memory"], output
        assert result["breakdown"]["steps_used"] == 3
        # The same calls on a gRPC episode of the same question and seed.
        twin = grpc.create_episode(QUESTION_ID, seed=5).state.episode_id
        texts = [grpc.call_tool(twin, c["name"], c["arguments"])[0] for c in calls]
        assert seen == texts, "the policy read what gRPC CallTool returns"
        scored = grpc.score_episode(twin)
        grpc.close_episode(twin)
    expected = dict(message_to_dict(scored), evaluator=scored.evaluator)
    assert result["reward"] == scored.reward
    for field in BREAKDOWN:
        if field == "metrics":  # timings differ between two episodes; every other metric is the same
            untimed = lambda m: {k: v for k, v in m.items() if not k.endswith("_ms")}  # noqa: E731
            assert untimed(result["breakdown"][field]) == untimed(expected[field])
        else:
            assert result["breakdown"][field] == expected.get(field), field
    assert result["p_new"] == scored.p_new, "the breakdown's numbers are at the top level, for NeMo Gym's metrics"
    assert result["question_id"] == QUESTION_ID and result["_ng_task_index"] == 0, "the run request comes back"


def test_the_seeds_mcp_access_serves_the_sessions_tools_to_nemo_gyms_mcp_client(memgym_server):
    """``expose_tools_over_mcp``: the typed seed's reply validates as NeMo Gym's ``ResourcesSeedSessionResponse``
    with ``resources_tools``; the MCP SDK NeMo Gym pins (mcp 1.x), replaying its headers at its ``url_path`` on
    the resources server's address as NeMo Gym's MCP transport does, lists the six tools and edits the
    session's episode, with the text gRPC ``CallTool`` gives on a twin episode."""
    import asyncio

    import httpx
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from nemo_gym.base_resources_server import ResourcesSeedSessionRequest, ResourcesSeedSessionResponse
    from nemo_gym.episode_types import EpisodeId, TaskId

    grpc_address, port = memgym_server
    base = f"http://127.0.0.1:{port}"
    session_id = f"mcp-{uuid.uuid4().hex[:12]}"
    seed = ResourcesSeedSessionRequest(
        resources_session_id=session_id,
        episode_id=EpisodeId(rollout_id="mcp-rollout", attempt=0),
        task_id=TaskId(taskset="memgym", task_id=QUESTION_ID),
        task_data={"question_id": QUESTION_ID, "seed": 5},
    )
    r = httpx.post(f"{base}/seed_session", json=seed.model_dump(mode="json"))
    assert r.status_code == 200, r.text
    reply = ResourcesSeedSessionResponse.model_validate(r.json())
    access = reply.resources_tools
    assert access is not None and access.url_path == "/mcp" and access.transport == "http"
    args = {"query": "What did Caroline research?", "top_k": 3}

    async def drive():
        async with httpx.AsyncClient(headers=access.headers) as http, streamable_http_client(
            f"{base}{access.url_path}", http_client=http
        ) as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = (await session.list_tools()).tools
                result = await session.call_tool("search_memory", args)
                return [t.name for t in tools], tools, result

    names, tools, result = asyncio.run(drive())
    with MemgymClient(grpc_address) as grpc:
        assert names == [t["function"]["name"] for t in grpc.list_tools()]
        assert all("episode_id" not in t.inputSchema.get("properties", {}) for t in tools)
        assert not result.isError
        twin = grpc.create_episode(QUESTION_ID, seed=5).state.episode_id
        expected, _ = grpc.call_tool(twin, "search_memory", args)
        grpc.close_episode(twin)
    assert result.content[0].text == expected
    cookies = {"memgym_session": session_id}
    body = {"responses_create_params": {"input": "Edit the memory."}, "response": {"output": []}}
    verified = httpx.post(f"{base}/verify", json=body, cookies=cookies).json()
    assert verified["steps_used"] == 1, verified
