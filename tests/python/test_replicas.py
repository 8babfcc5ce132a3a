"""Three replicas behind a real HAProxy (Debian's package) with ``deploy/haproxy.cfg`` as committed, banks on a
real PostgreSQL, driven by the Python client's asyncio API.

Why this exists: a trainer keeps hundreds of rollouts in flight over one address. Each episode lives in one
replica's memory, so every call must reach the replica that holds it; a replica drained and then killed
must not cost the others anything, and must never turn into a wrong reward.

- 256 concurrent episodes through the proxy: no call fails, each is scored by the replica that created it
  (the ``memgym-replica`` reply header against the replica its id names), every reward equals the one the
  same edits earn on one replica reached directly, and every edit is kept.
- A bank written on one replica is read on another (PostgreSQL).
- Then 256 more, paced so that they are mid-episode, while r2 is sent SIGTERM and killed soon after: the
  episodes on r1 and r3 lose nothing; those on r2 are either scored with the right reward (during the drain
  it still serves them) or fail with a retryable error. New episodes sent to r2 while it drains are refused
  with a retryable DRAINING, which the client retries on another replica.

Needs ``haproxy`` and ``$MEMGYM_TEST_POSTGRES_URL`` (scripts/test provides both); skipped without them unless
``MEMGYM_REPLICAS_REQUIRE=1``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import grpc
import pytest

from conftest import free_port, memgym_bin, wait_port
from memgym import AsyncMemgymClient, MemgymClient, MemgymError
from memgym.errors import from_rpc_error
from memgym.v1 import memgym_pb2 as pb

CONFIG = Path(__file__).resolve().parents[2] / "deploy" / "haproxy.cfg"
REPLICAS = ("r1", "r2", "r3")
QUESTIONS = [f"conv-26:q{i}" for i in range(8)]
EDIT = "Caroline attended an LGBTQ support group on 7 May 2023 and found the transgender stories inspiring."


def _missing() -> str:
    if shutil.which("haproxy") is None:
        return "haproxy is not installed (Debian's haproxy package)"
    if not os.environ.get("MEMGYM_TEST_POSTGRES_URL"):
        return "MEMGYM_TEST_POSTGRES_URL is not set (scripts/postgres.sh start)"
    return ""


@pytest.fixture()
def cluster(tmp_path):
    why = _missing()
    if why:
        if os.environ.get("MEMGYM_REPLICAS_REQUIRE") == "1":
            pytest.fail(why)
        pytest.skip(why)
    procs = {}
    ports = {name: (free_port(), free_port()) for name in REPLICAS}
    env = {"MEMGYM_PROXY_ADDR": f"127.0.0.1:{free_port()}"}
    try:
        for name, (grpc_port, ready_port) in ports.items():
            log = open(tmp_path / f"{name}.log", "wb")
            procs[name] = subprocess.Popen(
                [str(memgym_bin()), "serve", "--replica", name, "--addr", f"127.0.0.1:{grpc_port}",
                 "--metrics-addr", f"127.0.0.1:{ready_port}", "--banks-url", os.environ["MEMGYM_TEST_POSTGRES_URL"],
                 "--drain-secs", "60", "--max-episodes", "4096"],
                stdout=subprocess.DEVNULL, stderr=log,
            )
            env[f"MEMGYM_{name.upper()}"] = f"127.0.0.1:{grpc_port}"
            env[f"MEMGYM_{name.upper()}_READY"] = str(ready_port)
        for name, (grpc_port, ready_port) in ports.items():
            wait_port(grpc_port, procs[name], name)
            wait_port(ready_port, procs[name], name)
        proxy = subprocess.Popen(["haproxy", "-db", "-f", str(CONFIG)], env={**os.environ, **env},
                                 stdout=subprocess.DEVNULL, stderr=open(tmp_path / "haproxy.log", "wb"))
        procs["haproxy"] = proxy
        wait_port(int(env["MEMGYM_PROXY_ADDR"].rsplit(":", 1)[1]), proxy, "haproxy")
        time.sleep(1.5)  # the first health checks (inter 500ms, rise 2)
        yield {"proxy": env["MEMGYM_PROXY_ADDR"], "direct": {n: env[f"MEMGYM_{n.upper()}"] for n in REPLICAS},
               "procs": procs}
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
            p.wait()


def _replica_of(episode_id: str) -> str:
    return episode_id.split(".", 1)[0]


class Lost(Exception):
    """A rollout that failed: the episode (None if it was never created) and the error."""

    def __init__(self, episode_id, error: MemgymError):
        super().__init__(f"{episode_id}: {error}")
        self.episode_id, self.error = episode_id, error


async def _play(client: AsyncMemgymClient, question: str, pause: float = 0.0):
    """One rollout through the proxy: create, three edits and a search, score. Returns (id, creator, scorer,
    response) where creator and scorer are the replicas whose ``memgym-replica`` header answered; raises
    ``Lost`` naming the episode when a call fails."""
    episode_id = None
    try:
        episode_id = (await client.create_episode(question)).episode_id
        for name, args in (("manage_memory", {"operation": "update", "memory_id": "m0000", "content": EDIT}),
                           ("delete_memory", {"memory_id": "m0001"}),
                           ("search_memory", {"query": "support group"})):
            await asyncio.sleep(pause)
            await client.call_tool(episode_id, name, args)
        await asyncio.sleep(pause)
        call = client.env.ScoreEpisode(pb.ScoreEpisodeRequest(episode_id=episode_id),
                                       metadata=(("memgym-episode", episode_id),), timeout=60)
        scorer = dict(await call.initial_metadata()).get("memgym-replica")
        return episode_id, _replica_of(episode_id), scorer, await call
    except grpc.aio.AioRpcError as e:
        raise Lost(episode_id, from_rpc_error(e, method="MemoryEnv/ScoreEpisode", address="proxy")) from None
    except MemgymError as e:
        raise Lost(episode_id, e) from None


def _references(direct: str) -> dict:
    """The reward and final size of each question's script, played on one replica reached directly."""
    refs = {}

    async def run():
        async with AsyncMemgymClient(direct, retries=0) as c:
            for q in QUESTIONS:
                _, _, _, score = await _play(c, q)
                refs[q] = (score.reward, score.final_memory_count, score.initial_memory_count)
    asyncio.run(run())
    return refs


def test_three_replicas_behind_haproxy_with_a_drain_and_a_kill(cluster):
    refs = _references(cluster["direct"]["r1"])
    assert all(final == initial - 1 for _, final, initial in refs.values())

    # A client-chosen id (as the verl and TRL adapters send) goes through the pool, since no backend has its
    # name, and comes back naming its replica; the same request again finds the same episode there.
    with MemgymClient(cluster["proxy"], retries=0) as c:
        chosen = f"job.{uuid.uuid4().hex[:8]}"
        made = c.create_episode(QUESTIONS[0], episode_id=chosen)
        assert made.created and made.episode_id.endswith("." + chosen) and _replica_of(made.episode_id) in REPLICAS
        again = c.create_episode(QUESTIONS[0], episode_id=made.episode_id)
        assert not again.created and again.episode_id == made.episode_id
        assert c.score_episode(made.episode_id).final_memory_count == made.initial_memory_count  # scored where it lives
        c.close_episode(made.episode_id)

    # Banks are shared: written on r1, read on r3.
    bank = f"shared-{uuid.uuid4().hex[:8]}"
    with MemgymClient(cluster["direct"]["r1"], retries=0) as r1, MemgymClient(cluster["direct"]["r3"], retries=0) as r3:
        r1.create_bank(bank)
        r1.add_experience(bank, "Check the session date before answering a when-question.")
        assert [e.text for e in r3.list_experiences(bank).experiences] == ["Check the session date before answering a when-question."]

    async def wave(n: int, pause: float, during=None):
        async with AsyncMemgymClient(cluster["proxy"], retries=8, backoff=0.1, retry_budget=20) as c:
            tasks = [asyncio.ensure_future(_play(c, QUESTIONS[i % len(QUESTIONS)], pause)) for i in range(n)]
            if during is not None:
                await during()
            results = await asyncio.gather(*tasks, return_exceptions=True)
        return [(QUESTIONS[i % len(QUESTIONS)], r) for i, r in enumerate(results)]

    # 256 concurrent episodes, nothing in the way: no failure, each scored where it was created, right rewards.
    first = asyncio.run(wave(256, 0.0))
    failures = [r for _, r in first if isinstance(r, BaseException)]
    assert not failures, failures[:3]
    by_replica = {n: 0 for n in REPLICAS}
    for q, (episode_id, creator, scorer, score) in first:
        assert creator in REPLICAS and scorer == creator, (episode_id, scorer)
        assert (score.reward, score.final_memory_count, score.initial_memory_count) == refs[q], episode_id
        by_replica[creator] += 1
    assert all(v > 0 for v in by_replica.values()), by_replica

    # 256 more, paced; r2 is drained, then killed, while they run.
    r2 = cluster["procs"]["r2"]

    async def drain_then_kill():
        await asyncio.sleep(1.5)
        r2.send_signal(signal.SIGTERM)
        await asyncio.sleep(1.0)
        assert r2.poll() is None, "r2 left while its episodes were open"
        r2.kill()

    # Each rollout takes about 4 s (a second between calls): r2 is killed with its episodes mid-way.
    second = asyncio.run(wave(256, 1.0, drain_then_kill))
    assert r2.wait(timeout=10) == -signal.SIGKILL
    lost, survived = [], {n: 0 for n in REPLICAS}
    for q, r in second:
        if isinstance(r, BaseException):
            assert isinstance(r, Lost), repr(r)
            lost.append(r)
            continue
        episode_id, creator, scorer, score = r
        assert scorer == creator, (episode_id, scorer)
        assert (score.reward, score.final_memory_count, score.initial_memory_count) == refs[q], episode_id
        survived[creator] += 1
    # Only r2's episodes fail, and only with a retryable error; r1's and r3's lose nothing.
    for x in lost:
        assert x.episode_id is not None and _replica_of(x.episode_id) == "r2", str(x)
        assert x.error.retryable or x.error.code == grpc.StatusCode.UNAVAILABLE, (x.error.code, x.error.reason, str(x))
    assert survived["r1"] > 0 and survived["r3"] > 0 and lost, (survived, len(lost))
    print(f"\nsecond wave: scored per replica {survived}, failed on r2 {len(lost)} "
          f"({sorted({(x.error.code.name, x.error.reason) for x in lost})})")


def test_bench_through_the_proxy_against_one_replica(cluster):
    """``memgym bench --addr PROXY --compare-addr R1`` drives both sides without a failed call (its speed is
    reported by scripts/bench-replicas.sh, never asserted)."""
    out = subprocess.run(
        [str(memgym_bin()), "bench", "--addr", cluster["proxy"], "--compare-addr", cluster["direct"]["r1"],
         "--episodes", "24", "--calls", "4", "--embedder-baseline-secs", "0", "--grpc-ceiling-secs", "0", "--json"],
        capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert [s["side"] for s in report["sides"]] == ["direct", "proxy"]
    for side in report["sides"]:
        assert side["failed"] == 0 and side["tool_calls_per_s"] > 0, side
    assert "proxy ÷ direct" in out.stdout
