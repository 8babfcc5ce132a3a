"""The Python client against the real server: a full episode, dataset calls, errors, retries.

Why this exists: ``memgym.MemgymClient``/``AsyncMemgymClient`` are what trainers build on; these tests
pin the round trip (create, each of the six tools through CallTool, score, close), idempotent create,
and the exception contract (``MemgymError.code``, ``MemgymUnavailable`` naming the address).
"""

from __future__ import annotations

import asyncio
import json
import time

import grpc
import pytest

from memgym import AsyncMemgymClient, MemgymClient, MemgymError, MemgymUnavailable, message_to_dict, pb
from conftest import free_port, running_server


def test_list_tools_gives_six_openai_schemas(client):
    tools = client.list_tools()
    names = [t["function"]["name"] for t in tools]
    assert names == ["search_memory", "manage_memory", "delete_memory", "sample_memory", "merge_memory", "split_memory"]
    for t in tools:
        assert t["type"] == "function"
        params = t["function"]["parameters"]
        assert params["additionalProperties"] is False  # memgym refuses an unknown argument
        for prop in params["properties"].values():
            # verl's property schema keeps type, description and enum; the rest are the validation's bounds.
            assert {"type", "description"} <= set(prop) <= {"type", "description", "enum", "minimum", "maximum", "items", "minItems", "maxItems"}
    by_name = {t["function"]["name"]: t["function"]["parameters"]["properties"] for t in tools}
    assert (by_name["search_memory"]["top_k"]["minimum"], by_name["search_memory"]["top_k"]["maximum"]) == (1, 50)
    assert by_name["merge_memory"]["memory_ids"] == {
        "type": "array", "description": "List of 2-5 ids.", "items": {"type": "string"}, "minItems": 2, "maxItems": 5,
    }  # fmt: skip


def test_dataset_calls(client):
    page = client.list_questions(conversation_id="conv-26", page_size=3)
    assert page.total == 199 and len(page.questions) == 3 and page.next_page_token
    assert page.questions[0].id == "conv-26:q0" and page.questions[0].answer == "7 May 2023"
    train = client.list_questions(split="train", page_size=1)
    assert train.questions[0].split == pb.SPLIT_TRAIN
    assert len(client.list_conversations().conversations) == 10


def test_full_episode_round_trip(client):
    ep = client.create_episode("conv-26:q0", episode_id="py-round-trip", seed=7, evaluator="answer-phrase")
    assert ep.created and ep.episode_id == "py-round-trip" and ep.initial_memory_count == 184
    again = client.create_episode("conv-26:q0", episode_id="py-round-trip", seed=7)
    assert not again.created  # idempotent (answer-phrase is the server's default evaluator)

    text, resp = client.call_tool("py-round-trip", "search_memory", {"query": "LGBTQ support group", "top_k": 3})
    assert text.startswith("[m0000 ") and resp.WhichOneof("result") == "search" and len(resp.search.results) == 3
    text, resp = client.call_tool(
        "py-round-trip",
        "manage_memory",
        json.dumps(
            {
                "operation": "update",
                "memory_id": "m0000",
                "content": "Caroline attended an LGBTQ support group on 7 May 2023 and found the transgender stories inspiring.",
            }
        ),
    )
    assert resp.manage.memory.id == "m0000" and list(resp.manage.memory.evidence) == ["D1:3"]
    text, resp = client.call_tool("py-round-trip", "split_memory", {"memory_id": "m0000", "split_criteria": "thematic"})
    assert resp.split.removed_id == "m0000" and len(resp.split.parts) == 2
    text, resp = client.call_tool(
        "py-round-trip", "merge_memory", {"memory_ids": ["m0082", "m0083"], "strategy": "concatenate"}
    )
    assert list(resp.merge.removed_ids) == ["m0082", "m0083"]
    text, resp = client.call_tool("py-round-trip", "sample_memory", {"k": 3, "strategy": "diverse"})
    assert len(resp.sample.memories) == 3
    text, resp = client.call_tool("py-round-trip", "delete_memory", {"memory_id": "m0057", "reason": "off topic"})
    assert list(resp.delete.deleted_ids) == ["m0057"] and resp.delete.step.step == 6
    # Per-step metrics for a trainer's logs: the delete took one memory away at step 6.
    assert resp.metrics["steps_used"] == 6 and resp.metrics["memories_delta"] == -1 and resp.metrics["tool_ms"] > 0

    state = client.get_episode("py-round-trip", include_trace=True)
    assert state.state.steps_used == 6 and len(state.trace) == 6
    mems = client.list_memories("py-round-trip", page_size=500)
    assert mems.total == state.state.memory_count == len(mems.memories)

    score = client.score_episode("py-round-trip")
    assert score.p_old == 0 and score.p_new == 1 and score.reward > 0.9
    assert set(score.metrics) == {"score_ms", "memories", "memories_delta", "retrieved_overlap", "retrieved_changed"}
    assert client.score_episode("py-round-trip").reward == score.reward  # idempotent
    d = message_to_dict(score)
    assert d["reward"] == score.reward and "f1_old" not in d  # unset optionals are left out
    closed = client.close_episode("py-round-trip")
    assert closed.state.scored
    with pytest.raises(MemgymError) as err:
        client.get_episode("py-round-trip")  # the server remembers ended ids: a clear error, not "unknown"
    assert err.value.code == grpc.StatusCode.FAILED_PRECONDITION and "closed" in err.value.details


def test_errors_carry_code_and_message(client):
    client.create_episode("conv-26:q0", episode_id="py-errors")
    with pytest.raises(MemgymError) as err:
        client.call_tool("py-errors", "no_such_tool", {})
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT and "no_such_tool" in err.value.details
    with pytest.raises(MemgymError) as err:
        client.call_tool("py-errors", "search_memory", "{not json")
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT and "arguments_json" in err.value.details
    with pytest.raises(MemgymError) as err:
        client.call_tool("py-errors", "search_memory", {"query": "x", "top_k": 0})
    # The server's status details: a stable reason, the field at fault, not retryable.
    assert (err.value.reason, err.value.field, err.value.retryable, err.value.retry_delay) == ("INVALID_ARGUMENT", "top_k", False, None)
    with pytest.raises(MemgymError) as err:
        client.call_tool("py-errors", "delete_memory", {"memory_id": "m9999"})
    assert err.value.code == grpc.StatusCode.NOT_FOUND and err.value.reason == "MEMORY_NOT_FOUND"
    with pytest.raises(MemgymError) as err:
        client.create_episode("conv-26:q1", episode_id="py-errors")  # same id, other question
    assert err.value.code == grpc.StatusCode.ALREADY_EXISTS
    state = client.get_episode("py-errors").state
    assert state.steps_used == 0 and state.rejected_calls >= 3
    with pytest.raises(ValueError):
        client.create_episode("conv-26:q0", episode_id="py-errors-2", evaluator="bogus")
    client.close_episode("py-errors")


def test_server_down_is_memgym_unavailable_naming_the_address():
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    with MemgymClient(address, timeout=2.0, retries=2, backoff=0.05) as down:
        started = time.monotonic()
        with pytest.raises(MemgymUnavailable) as err:
            down.score_episode("x")  # idempotent: retried twice (0.05 + 0.1 s of backoff)
        assert time.monotonic() - started >= 0.15
        assert address in str(err.value) and err.value.code == grpc.StatusCode.UNAVAILABLE
        assert isinstance(err.value, MemgymError)
        started = time.monotonic()
        with pytest.raises(MemgymUnavailable):
            down.call_tool("x", "search_memory", {"query": "q"})  # carries a call_id: retried like the others
        assert time.monotonic() - started >= 0.15


def test_a_tool_call_sent_again_with_its_call_id_is_applied_once(client):
    """A retry after a lost reply: the same call_id gets the first response, and the memory changes once."""
    ep = client.create_episode("conv-26:q0", episode_id="py-once")
    note = {"operation": "create", "content": "Caroline keeps a garden journal."}
    first_text, first = client.call_tool(ep.episode_id, "manage_memory", note, call_id="retry-1")
    again_text, again = client.call_tool(ep.episode_id, "manage_memory", note, call_id="retry-1")
    assert (again_text, again.manage) == (first_text, first.manage)
    state = client.get_episode(ep.episode_id).state
    assert (state.steps_used, state.memory_count) == (1, ep.initial_memory_count + 1)
    with pytest.raises(MemgymError) as err:
        client.call_tool(ep.episode_id, "search_memory", {"query": "garden"}, call_id="retry-1")
    assert (err.value.code, err.value.field) == (grpc.StatusCode.INVALID_ARGUMENT, "call_id")
    client.call_tool(ep.episode_id, "search_memory", {"query": "garden"})  # a fresh id each time by default
    client.call_tool(ep.episode_id, "search_memory", {"query": "garden"})
    assert client.get_episode(ep.episode_id).state.steps_used == 3
    client.close_episode(ep.episode_id)


def test_async_client_round_trip(server_address):
    async def run():
        async with AsyncMemgymClient(server_address, timeout=10.0) as c:
            assert len(await c.list_tools()) == 6
            ep = await c.create_episode("conv-26:q0", episode_id="py-async", seed=1)
            text, resp = await c.call_tool(ep.episode_id, "sample_memory", {"k": 2, "strategy": "recent"})
            assert len(resp.sample.memories) == 2
            assert (await c.get_episode("py-async")).state.steps_used == 1
            assert (await c.list_questions("conv-26", page_size=1)).total == 199
            score = await c.score_episode("py-async")
            assert score.reward == 0.0  # sampling changes nothing: a no-op episode scores exactly 0
            await c.close_episode("py-async")
            await c.close_episode("py-async")  # closing again (a retried close) succeeds
            with pytest.raises(MemgymError) as err:
                await c.create_episode("conv-26:q0", episode_id="py-async", seed=1)  # ids are not reused
            assert err.value.code == grpc.StatusCode.FAILED_PRECONDITION and "closed" in err.value.details
        down = AsyncMemgymClient(f"127.0.0.1:{free_port()}", timeout=2.0, retries=1, backoff=0.01)
        with pytest.raises(MemgymUnavailable) as err:
            await down.get_episode("x")
        assert down.address in str(err.value)
        await down.close()

    asyncio.run(run())


def test_fork_episode(client):
    """ForkEpisode from Python: the forks hold the parent's edit, diverge independently, and score against
    the parent's p_old; a scored parent is refused."""
    ep = client.create_episode("conv-26:q0", episode_id="py-fork-parent", seed=3)
    client.call_tool(ep.episode_id, "manage_memory", {"operation": "update", "memory_id": "m0000",
                     "content": "Caroline attended an LGBTQ support group on 7 May 2023 and found the transgender stories inspiring."})
    forks = client.fork_episode(ep.episode_id, 2, fork_ids=["py-fork-a", "py-fork-b"], seeds=[7, 8])
    assert [(f.episode_id, f.seed, f.steps_used) for f in forks] == [("py-fork-a", 7, 1), ("py-fork-b", 8, 1)]
    client.call_tool("py-fork-a", "delete_memory", {"memory_id": "m0000"})
    a, b = client.score_episode("py-fork-a"), client.score_episode("py-fork-b")
    assert (a.p_old, b.p_old, b.p_new) == (0.0, 0.0, 1.0) and a.reward < b.reward
    with pytest.raises(MemgymError) as err:
        client.fork_episode("py-fork-b")
    assert err.value.code == grpc.StatusCode.FAILED_PRECONDITION
    for i in (ep.episode_id, "py-fork-a", "py-fork-b"):
        client.close_episode(i)


def test_a_retryable_refusal_is_retried_after_the_servers_delay():
    """The open-episode cap is retryable (RetryInfo: 1 s): a create waits and succeeds once a slot frees;
    with no retry budget it fails at once, saying it was retryable."""
    import threading

    with running_server("--max-episodes", "1") as address, MemgymClient(address, timeout=10.0, backoff=0.05) as c:
        c.create_episode("conv-26:q0", episode_id="cap-1")
        with MemgymClient(address, timeout=10.0, retry_budget=0.0) as impatient:
            with pytest.raises(MemgymError) as err:
                impatient.create_episode("conv-26:q0", episode_id="cap-2")
        assert err.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert (err.value.reason, err.value.retryable, err.value.retry_delay) == ("EPISODE_CAP", True, 1.0)

        async def refused_async():
            async with AsyncMemgymClient(address, timeout=10.0, retry_budget=0.0) as a:
                with pytest.raises(MemgymError) as aerr:
                    await a.create_episode("conv-26:q0", episode_id="cap-3")
                return aerr.value

        aerr = asyncio.run(refused_async())
        assert (aerr.reason, aerr.retryable, aerr.retry_delay) == ("EPISODE_CAP", True, 1.0), "the asyncio client reads the details too"
        threading.Timer(0.3, lambda: c.close_episode("cap-1")).start()
        started = time.monotonic()
        ep = c.create_episode("conv-26:q0", episode_id="cap-2")  # refused, waits 1 s, then created
        assert ep.created and time.monotonic() - started >= 1.0
        # A tool call refused as retryable would be sent again too; a bad one is sent once.
        with pytest.raises(MemgymError) as err:
            c.call_tool("cap-2", "search_memory", {"query": "x", "top_k": 0})
        assert not err.value.retryable and c.get_episode("cap-2").state.rejected_calls == 1
