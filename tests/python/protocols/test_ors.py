"""The Open Reward Standard face (``memgym serve --ors-addr``) driven by the released ``openreward`` SDK's own
client (0.1.167: ``OpenReward().environments.get(name, base_url=...)``, its sessions, its SSE reader and
retries) against the real binary, and checked against gRPC: the splits and tasks are the dataset's, a full
episode's ``submit`` reward is ``ScoreEpisode``'s for the same episode, the reward is given once, and the
SDK's ``X-API-Key`` header passes ``--api-key-file``.
"""

from __future__ import annotations

import pytest

from memgym import MemgymError
from protocols.ors_support import OPENREWARD_VERSION, grpc, ors, ors_env, ors_server  # noqa: F401  (fixtures)
from protocols.conftest import require_package

openreward = require_package("openreward", OPENREWARD_VERSION, "openreward")
from openreward.api.errors import ToolCallError  # noqa: E402
from openreward.api._session.http import AuthenticationError  # noqa: E402

TOOLS = ["search_memory", "manage_memory", "delete_memory", "sample_memory", "merge_memory", "split_memory", "submit"]


@pytest.fixture(scope="module")
def environment(ors):
    client = openreward.OpenReward(api_key="")
    yield client.environments.get("memgym", base_url=ors.url)
    client.close()


def questions(grpc, split):
    """The split's questions over gRPC, without category 5 (the ORS tasks)."""
    out, token = [], ""
    while True:
        page = grpc.list_questions(split=split, page_size=1000, page_token=token)
        out.extend(q for q in page.questions if q.category != 5)
        token = page.next_page_token
        if not token:
            return out


def test_splits_tasks_and_tools_are_the_datasets(environment, grpc):
    assert environment.list_splits() == ["train", "test"]
    for split in ("train", "test"):
        expected = questions(grpc, split)
        assert environment.num_tasks(split) == len(expected)
        tasks = environment.list_tasks(split)
        assert [t.task_spec["question_id"] for t in tasks] == [q.id for q in expected]
        assert tasks[3].task_spec == environment.get_task(split, 3).task_spec
        assert tasks[3].task_spec["question"] == expected[3].question
        assert "answer" not in tasks[3].task_spec, "a task never carries its gold answer"
    assert [t.task_spec for t in environment.get_task_range("test", -2)] == [t.task_spec for t in environment.list_tasks("test")[-2:]]
    tools = environment.list_tools()
    assert [t.name for t in tools] == TOOLS
    served = {t["function"]["name"]: t["function"] for t in grpc.list_tools()}
    for t in tools[:6]:
        assert (t.description, t.input_schema) == (served[t.name]["description"], served[t.name]["parameters"])
    openai_tools = environment.list_tools(format="openai")
    assert [t["name"] for t in openai_tools] == TOOLS, "the SDK converts the schemas for a provider"


def test_a_full_episode_is_rewarded_as_score_episode_scores_it(environment, grpc):
    task = environment.get_task("test", 2)
    spec = task.task_spec
    with environment.session(task=task) as session:
        prompt = "\n".join(b.text for b in session.get_prompt())
        assert spec["question"] in prompt and "memory editing agent" in prompt
        messages = session.get_messages()
        assert [m.role for m in messages] == ["system", "user"]
        assert [t.name for t in session.list_tools()] == TOOLS

        found = session.call_tool("search_memory", {"query": spec["question"], "top_k": 3})
        assert (found.reward, found.finished) == (None, False)
        assert found.blocks[0].text.startswith("[m") and found.metadata["tool"] == "search_memory"
        first = found.metadata["results"][0]["memory"]["id"]
        made = session.call_tool("manage_memory", {"operation": "create", "content": f"{spec['question']} (noted)", "speaker": "note"})
        assert "created" in made.blocks[0].text and made.metadata["step"]["step"] == 2
        with pytest.raises(ToolCallError) as bad:
            session.call_tool("delete_memory", {"memory_id": "m9999"})
        assert bad.value.reason == "input_validation" and "m9999" in bad.value.detail
        with pytest.raises(ToolCallError) as unknown:
            session.call_tool("teleport_memory", {})
        assert unknown.value.reason == "not_found"
        gone = session.call_tool("delete_memory", {"memory_id": first, "reason": "test"})
        assert first in gone.blocks[0].text

        submitted = session.call_tool("submit", {})
        assert submitted.finished is True and submitted.blocks[0].text.startswith("Scored: reward")
        episode_id = submitted.metadata["episode_id"]
        scored = grpc.score_episode(episode_id)
        assert submitted.reward == scored.reward, "the reward is ScoreEpisode's, to the last bit"
        assert submitted.metadata["score"]["p_new"] == scored.p_new
        state = grpc.get_episode(episode_id).state
        # Three edits made steps; the refused delete counted as a rejection (an unknown tool never reached it).
        assert (state.question_id, state.steps_used, state.rejected_calls, state.scored) == (spec["question_id"], 3, 1, True)

        # The reward is given once: submit again, or any tool after it, is refused.
        for name, args in [("submit", {}), ("sample_memory", {"k": 2})]:
            with pytest.raises(ToolCallError) as late:
                session.call_tool(name, args)
            assert late.value.reason == "episode_finished", name
        assert grpc.get_episode(episode_id).state.steps_used == 3
    # Leaving the session deletes it, which closes its episode.
    with pytest.raises(MemgymError) as closed:
        grpc.get_episode(episode_id)
    assert "closed" in closed.value.details


def test_sessions_by_split_and_index_are_isolated(environment, grpc):
    with environment.session(split="train", index=0) as a, environment.session(split="train", index=0) as b:
        a.call_tool("delete_memory", {"memory_id": "m0000"})
        sample = b.call_tool("search_memory", {"query": "anything", "top_k": 1})
        scored_b = b.call_tool("submit", {})
        scored_a = a.call_tool("submit", {})
        id_a, id_b = scored_a.metadata["episode_id"], scored_b.metadata["episode_id"]
        assert id_a != id_b
        assert grpc.get_episode(id_a).state.memory_count + 1 == grpc.get_episode(id_b).state.memory_count
        assert (scored_a.reward, scored_b.reward) == (grpc.score_episode(id_a).reward, grpc.score_episode(id_b).reward)
        assert sample.finished is False


def test_the_sdks_api_key_header_passes_the_key_file(tmp_path):
    key = "ors-test-key-0123456789"
    (tmp_path / "keys").write_text(f"{key}\n")
    with ors_server("--api-key-file", str(tmp_path / "keys")) as server, ors_env(server.url):
        keyless = openreward.OpenReward(api_key="").environments.get("memgym", base_url=server.url)
        with pytest.raises(AuthenticationError):
            keyless.list_splits()
        client = openreward.OpenReward(api_key=key)
        env = client.environments.get("memgym", base_url=server.url)
        with env.session(split="test", index=0) as session:
            out = session.call_tool("submit", {})
            assert out.finished and isinstance(out.reward, float)
        client.close()
