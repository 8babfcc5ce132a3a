"""memgym in verifiers 0.4.0 (``verifiers.v1``), driven by verifiers' own eval entry point, ``vf-eval``,
against the real memgym server: the Environments Hub package ``environments/memgym_locomo`` (id
``memgym-locomo``) over ``memgym_verifiers``.

The policy is ``ScriptedPolicy``, an OpenAI-compatible endpoint that answers with a fixed list of tool calls,
so every run is the same; verifiers' interception server sits between it and verifiers' own ``null`` chat
harness (the taskset's default), which reaches memgym's tools at the rollout's per-episode MCP URL with
verifiers' pinned MCP client (mcp 2.0.0). Each rollout's episode is read and scored over gRPC on the same
server, and the reward verifiers recorded compared with gRPC ``ScoreEpisode``'s.

``test_a_real_model_plays_one_episode`` repeats the run with the model at ``$MEMGYM_LLM_URL`` (e.g.
http://127.0.0.1:8092/v1 for scripts/llm-server.py, which answers the streamed requests verifiers' harness
sends), and skips when the variable is unset or nothing answers there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any, Dict, List

import pytest

from conftest import memgym_bin
from memgym import MemgymError, message_to_dict
from protocols.conftest import require_package
from protocols.scripted_policy import ScriptedPolicy

VERIFIERS_VERSION = "0.4.0"
require_package("verifiers", VERIFIERS_VERSION, "verifiers")

import memgym_verifiers  # noqa: E402
from memgym_verifiers import SYSTEM_PROMPT, user_prompt  # noqa: E402

TOOLS = ["search_memory", "manage_memory", "delete_memory", "sample_memory", "merge_memory", "split_memory"]
QUESTION = "conv-26:q0"
NOTE = "Caroline went to an LGBTQ support group on 7 May 2023."
STEPS: List[Dict[str, Any]] = [
    {"name": "search_memory", "arguments": {"query": "LGBTQ support group", "top_k": 3}},
    {"name": "manage_memory", "arguments": {"operation": "create", "content": NOTE}},
    # Not among the policy's tools: the harness refuses it, nothing reaches memgym.
    {"name": "score_episode", "arguments": {}},
]


def vf_eval(servers, policy_url: str, out: Path, *extra: str, model: str = "scripted", timeout: float = 600):
    """Runs ``vf-eval memgym-locomo`` on question ``QUESTION`` and returns its one trace, read from the run's
    ``traces.jsonl`` by verifiers' own ``Episode`` model."""
    from verifiers.v1.episode import Episode

    bin_dir = Path(sys.executable).parent
    env = dict(os.environ, POLICY_API_KEY="scripted", PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    mcp = f"{servers.mcp}/mcp"
    command = [
        str(bin_dir / "vf-eval"), "memgym-locomo", "-m", model, "-n", "1", "--no-push", "--no-rich", "-o", str(out),
        "--client.base-url", policy_url, "--client.api-key-var", "POLICY_API_KEY",
        "--env.taskset.split", "all", "--select.include.ids", json.dumps([QUESTION]),
        "--env.taskset.task.address", servers.grpc, "--env.taskset.task.mcp-url", mcp,
        "--env.taskset.task.seed", "7", *extra,
    ]  # fmt: skip
    done = subprocess.run(command, env=env, cwd=out.parent, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"vf-eval failed ({done.returncode}):\n{done.stderr[-4000:]}"
    lines = [line for f in out.glob("*/traces.jsonl") for line in f.read_text().splitlines() if line.strip()]
    assert len(lines) == 1, f"one episode, got {len(lines)}:\n{done.stderr[-2000:]}"
    episode = Episode.model_validate_json(lines[0])
    assert len(episode.traces) == 1 and episode.ok, (episode.errors, [t.errors for t in episode.traces])
    return episode.traces[0]


def test_the_hub_package_is_what_verifiers_loads():
    import verifiers.v1 as vf
    from verifiers.v1.utils.loaders import default_harness_id, environment_class, harness_class, taskset_class

    assert taskset_class("memgym-locomo") is memgym_verifiers.MemgymTaskset
    assert environment_class("memgym-locomo") is memgym_verifiers.MemgymEnv
    assert harness_class(default_harness_id("memgym-locomo")) is memgym_verifiers.MemgymHarness
    assert not memgym_verifiers.MemgymHarness.EXECUTES_CODE, "the policy gets memgym's tools, not a shell"
    config = memgym_verifiers.MemgymEnvConfig(taskset=memgym_verifiers.MemgymTasksetConfig(id="memgym-locomo"))
    env = vf.load_environment(config)
    assert isinstance(env, memgym_verifiers.MemgymEnv)
    assert config.agent.runtime.type == "subprocess"
    # The Hub's conventional entry point builds the same env, its keys going to the taskset and its task.
    import memgym_locomo

    loaded = memgym_locomo.load_environment(split="train", address="127.0.0.1:1")
    assert isinstance(loaded, memgym_verifiers.MemgymEnv)
    assert (loaded.config.taskset.split, loaded.config.taskset.task.address) == ("train", "127.0.0.1:1")
    with pytest.raises(Exception, match="no_such_key"):
        memgym_locomo.load_environment(no_such_key=1)


def test_tasks_are_the_servers_questions_without_their_answers(servers, grpc_client):
    taskset = memgym_verifiers.MemgymTaskset(
        memgym_verifiers.MemgymTasksetConfig(
            id="memgym-locomo", split="test", task=memgym_verifiers.MemgymTaskConfig(address=servers.grpc)
        )
    )
    tasks = list(taskset)
    expected, token = [], ""
    while True:
        page = grpc_client.list_questions(split="test", page_size=1000, page_token=token)
        expected += [q for q in page.questions if q.category != 5]
        token = page.next_page_token
        if not token:
            break
    assert [t.key for t in tasks] == [q.id for q in expected] and tasks
    for task, q in zip(tasks, expected):
        assert task.data.prompt == user_prompt(q.question) and task.data.system_prompt == SYSTEM_PROMPT
        assert (task.data.split, task.data.category, task.data.conversation_id) == ("test", q.category, q.conversation_id)
        assert not {"answer", "adversarial_answer", "corrected_answer"} & set(task.data.model_dump())
        if len(q.answer) > 12 and q.answer not in q.question:
            assert q.answer not in task.data.model_dump_json(), "the gold answer is never in the traced task data"
    with pytest.raises(ValueError, match="split"):
        list(memgym_verifiers.MemgymTaskset(memgym_verifiers.MemgymTasksetConfig(split="validation")))


def test_the_prompts_are_the_ones_memgym_gives_verl(tmp_path):
    pyarrow = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "verl.parquet"
    subprocess.run([str(memgym_bin()), "dataset", "verl", "--split", "test", "--out", str(out)], check=True, capture_output=True)
    row = pyarrow.read_table(out).slice(0, 1).to_pylist()[0]
    system, user = row["prompt"]
    assert system == {"role": "system", "content": SYSTEM_PROMPT}
    assert user == {"role": "user", "content": user_prompt(row["extra_info"]["question"])}


def test_vf_eval_plays_one_episode_and_its_reward_is_score_episodes(servers, grpc_client, tmp_path):
    with ScriptedPolicy(STEPS) as policy:
        trace = vf_eval(servers, policy.base_url, tmp_path / "out", "--env.taskset.task.close-episodes", "false")
    assert trace.ok and not trace.errors, trace.errors
    episode_id = trace.info["memgym_episode_id"]
    assert episode_id.startswith("vf-conv-26:q0-")

    # What the policy was shown: memgym's prompts and the six tools, without episode_id, nothing else.
    first = policy.requests[0]
    assert first["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert first["messages"][1]["content"] == user_prompt(grpc_client.get_episode(episode_id).state.question)
    offered = {t["function"]["name"]: t["function"]["parameters"] for t in first["tools"]}
    assert sorted(offered) == sorted(TOOLS)
    served = {t["function"]["name"]: t["function"]["parameters"] for t in grpc_client.list_tools()}
    assert offered == served, "ListTools' schemas, with no episode_id: the URL names the episode"

    # What the tools answered: the same text as gRPC on a twin episode; score_episode was not reachable.
    results = policy.tool_results()
    assert len(results) == 3, results
    twin = f"{episode_id}-twin"
    grpc_client.create_episode(QUESTION, episode_id=twin, seed=7)
    twin_text, _ = grpc_client.call_tool(twin, "search_memory", STEPS[0]["arguments"])
    assert results[0] == twin_text
    assert results[1].startswith("created [m") and NOTE in results[1]
    assert "score_episode" in results[2] and "Caroline" not in results[2], results[2]
    grpc_client.close_episode(twin)

    # The episode: two steps, scored once, by the task's reward; ScoreEpisode (idempotent) gives the same.
    state = grpc_client.get_episode(episode_id).state
    assert (state.question_id, state.steps_used, state.scored, state.seed) == (QUESTION, 2, True, 7)
    scored = grpc_client.score_episode(episode_id)
    assert trace.reward == scored.reward and {k: r.score for k, r in trace.rewards.items()} == {"memgym": scored.reward}
    breakdown = dict(message_to_dict(scored), evaluator=scored.evaluator)
    assert trace.info["memgym"] == dict(breakdown, episode_id=episode_id)
    assert trace.metrics == memgym_verifiers.taskset.breakdown_metrics(breakdown)
    assert scored.final_memory_count == scored.initial_memory_count + 1
    grpc_client.close_episode(episode_id)


def test_each_rollout_gets_a_new_episode_closed_after_it(servers, grpc_client, tmp_path):
    with ScriptedPolicy(STEPS[:1]) as policy:
        first = vf_eval(servers, policy.base_url, tmp_path / "a")
        second = vf_eval(servers, policy.base_url, tmp_path / "b")
    ids = [t.info["memgym_episode_id"] for t in (first, second)]
    assert ids[0] != ids[1]
    for trace, episode_id in zip((first, second), ids):
        assert trace.ok and trace.info["memgym"]["steps_used"] == 1
        with pytest.raises(MemgymError) as refused:
            grpc_client.get_episode(episode_id)
        assert "closed" in str(refused.value), refused.value


def _llm_up(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/models", timeout=3) as resp:
            return resp.status == 200
    except OSError:
        return False


def test_a_real_model_plays_one_episode(servers, grpc_client, tmp_path):
    url = os.environ.get("MEMGYM_LLM_URL", "")
    if not url:
        pytest.skip("set MEMGYM_LLM_URL to an OpenAI-compatible endpoint (one that streams, as verifiers asks)")
    if not _llm_up(url):
        pytest.skip(f"no OpenAI-compatible endpoint at {url}")
    with urllib.request.urlopen(f"{url.rstrip('/')}/models", timeout=3) as resp:
        model = json.load(resp)["data"][0]["id"]
    trace = vf_eval(
        servers, url, tmp_path / "out", "--env.taskset.task.close-episodes", "false",
        "--env.taskset.task.max-steps", "4", "--env.agent.max-turns", "6", "--sampling.temperature", "0",
        model=model, timeout=900,
    )  # fmt: skip
    assert trace.ok, trace.errors
    episode_id = trace.info["memgym_episode_id"]
    scored = grpc_client.score_episode(episode_id)
    assert trace.reward == scored.reward
    assert trace.info["memgym"]["steps_used"] == grpc_client.get_episode(episode_id).state.steps_used
    grpc_client.close_episode(episode_id)
