"""512 concurrent episodes over MCP (mcp 2.3.0's ``Client``, the stateless 2026-07-28 wire) while client
connections are cut at random mid-call, as MCP clients see at hundreds of rollouts in flight (prime-rl #3084,
verifiers #2062). Each cut call is sent again on a new connection with its ``call_id``, the fix those
projects adopted, which is safe here because the episode lives in its id and each keyed call is applied once.

Checked afterwards over gRPC, for every episode: exactly the three edits, in order (none lost, none doubled),
the memory count they imply, and the reward MCP reported equal to gRPC's ScoreEpisode. Then every episode is
closed and the server's RSS must come back near its baseline. ``MEMGYM_MCP_STRESS`` sets the episode count
(default 512).
"""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import time

import pytest

from conftest import free_port, memgym_bin
from memgym import MemgymClient
from protocols.conftest import MCP_VERSION, require_package

require_package("mcp", MCP_VERSION, "mcp")
from mcp import Client  # noqa: E402

EPISODES = int(os.environ.get("MEMGYM_MCP_STRESS", "512"))
CUT_SHARE = 0.3  # calls whose connection is cut mid-way


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.fixture()
def server(tmp_path):
    grpc_port, mcp_port = free_port(), free_port()
    proc = subprocess.Popen(
        [str(memgym_bin()), "serve", "--addr", f"127.0.0.1:{grpc_port}", "--no-banks", "--mcp-addr",
         f"127.0.0.1:{mcp_port}", "--max-episodes", "4096"],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "server.log", "wb"),
    )
    deadline = time.monotonic() + 120
    while True:
        try:
            with MemgymClient(f"127.0.0.1:{grpc_port}", retries=0, timeout=1) as c:
                c.list_tools()
            break
        except Exception:
            assert proc.poll() is None and time.monotonic() < deadline, "memgym serve did not start"
            time.sleep(0.2)
    try:
        yield proc, f"127.0.0.1:{grpc_port}", f"http://127.0.0.1:{mcp_port}/mcp"
    finally:
        proc.kill()
        proc.wait()


async def play(url: str, i: int, rng: random.Random, cuts: list) -> dict:
    """One episode; each memory call may have its connection cut, then goes again on a new one."""
    eid = f"stress-{i}"
    calls = [
        ("search_memory", {"query": "support group", "top_k": 3}),
        ("manage_memory", {"operation": "create", "content": f"Stress note {i}: Caroline keeps a garden journal."}),
        ("delete_memory", {"memory_id": "m0001"}),
    ]
    async with Client(url, mode="auto") as client:
        created = await client.call_tool("create_episode", {"question_id": "conv-26:q0", "episode_id": eid, "seed": i})
        assert created.is_error is False, created
    for k, (name, args) in enumerate(calls):
        args = {**args, "episode_id": eid, "call_id": f"{eid}-c{k}"}
        if rng.random() < CUT_SHARE:
            # The connection goes away mid-call: the call may or may not have been applied.
            async with Client(url, mode="auto") as client:
                try:
                    await asyncio.wait_for(client.call_tool(name, args), timeout=rng.uniform(0.0005, 0.02))
                except (asyncio.TimeoutError, Exception):
                    pass
            cuts.append(eid)
        async with Client(url, mode="auto") as client:  # reconnect and send it (again)
            result = await client.call_tool(name, args)
            assert result.is_error is False, result
            assert result.structured_content["step"]["step"] == k + 1, (eid, k, result.structured_content["step"])
    async with Client(url, mode="auto") as client:
        scored = await client.call_tool("score_episode", {"episode_id": eid})
        assert scored.is_error is False, scored
        return scored.structured_content


def test_512_episodes_with_cut_connections_lose_no_edit_and_leave_no_memory(server):
    proc, grpc_address, url = server
    rng = random.Random(20261126)
    with MemgymClient(grpc_address, timeout=60) as g:
        initial = g.create_episode("conv-26:q0", episode_id="warm").initial_memory_count
        g.close_episode("warm")
    baseline = rss_bytes(proc.pid)

    async def run():
        cuts: list = []
        rngs = [random.Random(rng.random()) for _ in range(EPISODES)]
        scores = await asyncio.gather(*(play(url, i, rngs[i], cuts) for i in range(EPISODES)))
        return scores, cuts

    scores, cuts = asyncio.run(run())
    peak = rss_bytes(proc.pid)
    assert len(cuts) > EPISODES * CUT_SHARE  # connections were really cut, many times
    with MemgymClient(grpc_address, timeout=60) as g:
        for i, mcp_score in enumerate(scores):
            eid = f"stress-{i}"
            state = g.get_episode(eid, include_trace=True)
            assert [t.tool_name for t in state.trace] == ["search_memory", "manage_memory", "delete_memory"], eid
            assert (state.state.steps_used, state.state.memory_count) == (3, initial), eid
            assert mcp_score["reward"] == g.score_episode(eid).reward, eid
            g.close_episode(eid)
    # With every episode closed, the memory comes back (the allocator returns pages within seconds).
    deadline = time.monotonic() + 20
    while rss_bytes(proc.pid) > baseline + 64 * 1024 * 1024 and time.monotonic() < deadline:
        time.sleep(0.5)
    after = rss_bytes(proc.pid)
    print(f"\n{EPISODES} episodes, {len(cuts)} cut calls; RSS baseline {baseline / 2**20:.0f} MiB, "
          f"peak {peak / 2**20:.0f} MiB, after closing {after / 2**20:.0f} MiB")
    assert after <= baseline + 64 * 1024 * 1024, (baseline, peak, after)
