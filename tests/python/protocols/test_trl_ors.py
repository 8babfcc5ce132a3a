"""TRL 1.16.0's own Open Reward Standard integration (``trl.experimental.openreward.OpenRewardSpec``, on the
openreward SDK 0.1.167) against ``memgym serve --ors-addr``, checked against gRPC.

``OpenRewardSpec(url)`` gives the three ``GRPOTrainer`` arguments: ``train_dataset`` (one row per task,
the task spec's keys as columns), ``environment_factory`` (TRL's ``_RolloutEnvironment``: one ORS session
per rollout, one Python method bound per ORS tool from its JSON Schema) and ``reward_funcs`` (the last
non-null reward of each rollout). Here the rollout environment is driven the way GRPOTrainer drives it
(``reset(**row)``, then its tool methods by name with the model's arguments), through one full episode
whose reward is ``ScoreEpisode``'s; then TRL's ``GRPOTrainer`` itself builds and trains one step with the
spec (a one-layer random Qwen2 and the real Qwen2.5 tokenizer, as test_trl_grpo.py does).
"""

from __future__ import annotations

import inspect
import os

import pytest

from memgym import MemgymError
from protocols.conftest import TRANSFORMERS_VERSION, require_package
from protocols.ors_support import OPENREWARD_VERSION, grpc, ors  # noqa: F401  (fixtures)

TRL_VERSION = "1.16.0"
trl = require_package("trl", TRL_VERSION, "trl")
require_package("openreward", OPENREWARD_VERSION, "openreward")
transformers = require_package("transformers", TRANSFORMERS_VERSION, "transformers")
get_json_schema = transformers.utils.get_json_schema
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
from trl.experimental.openreward import OpenRewardSpec  # noqa: E402
from protocols.test_trl_grpo import one_step_args, tiny_policy, tokenizer  # noqa: E402,F401  (tokenizer: a fixture)

TOOLS = ["delete_memory", "manage_memory", "merge_memory", "sample_memory", "search_memory", "split_memory", "submit"]


def trl_tools(env_class):
    """The tool names GRPOTrainer takes from an environment class: its public functions but ``reset``."""
    return sorted(n for n, _ in inspect.getmembers(env_class, predicate=inspect.isfunction) if n != "reset" and not n.startswith("_"))


def test_the_spec_lists_the_tasks_binds_the_tools_and_a_rollout_earns_score_episodes_reward(ors, grpc):
    spec = OpenRewardSpec(ors.url, split="test", num_tasks=4)
    rows = spec.train_dataset
    assert len(rows) == 4 and rows["task_index"] == [0, 1, 2, 3]
    assert {"question_id", "conversation_id", "question", "category", "split"} <= set(rows.column_names)
    assert "answer" not in rows.column_names

    env = spec.environment_factory()
    assert trl_tools(type(env)) == TOOLS
    # The schemas TRL's chat template renders (transformers' get_json_schema of the bound methods).
    served = {t["function"]["name"]: t["function"]["parameters"] for t in grpc.list_tools()}
    for name in TOOLS:
        schema = get_json_schema(getattr(env, name))["function"]
        assert schema["name"] == name
        assert sorted(schema["parameters"].get("properties", {})) == sorted(served.get(name, {}).get("properties", {}))

    row = rows[2]
    prompt = env.reset(**row)
    assert row["question"] in prompt and "memory editing agent" in prompt
    try:
        found = env.search_memory(query=row["question"], top_k=3)
        assert found.startswith("[m") and env.rewards == [None] and env.finished is False
        env.manage_memory(operation="create", content=f"{row['question']} (noted)")
        refused = env.delete_memory(memory_id="m9999")
        assert refused.startswith("Error: input_validation") and "m9999" in refused, refused
        text = env.submit()
        assert text.startswith("Scored: reward") and env.finished is True
        episode_id = env.metadata[-1]["episode_id"]
        scored = grpc.score_episode(episode_id)
        assert env.reward == scored.reward, "the rollout's reward is ScoreEpisode's"
        assert spec.reward_funcs([env]) == [scored.reward]
        state = grpc.get_episode(episode_id).state
        assert (state.question_id, state.steps_used) == (row["question_id"], 2)
        late = env.sample_memory(k=2)
        assert late.startswith("Error: episode_finished"), late
        assert env.reward == scored.reward, "no second reward"
    finally:
        env._close()
    with pytest.raises(MemgymError):
        grpc.get_episode(episode_id)


def test_grpo_trainer_trains_a_step_on_the_spec(tmp_path, tokenizer, ors):
    spec = OpenRewardSpec(ors.url, split="test", num_tasks=2)
    trainer = trl.GRPOTrainer(
        model=tiny_policy(tokenizer),
        processing_class=tokenizer,
        args=one_step_args(tmp_path / "out"),
        train_dataset=spec.train_dataset,
        environment_factory=spec.environment_factory,
        reward_funcs=spec.reward_funcs,
    )
    assert sorted(tool.__name__ for tool in trainer.tools) == TOOLS
    trainer.train()
    envs = trainer.environments
    assert len(envs) == 2
    for env in envs:
        # Each rollout opened its own session (a random policy never submits, so no reward yet).
        assert env._session is not None and env.finished is False and env.reward is None
        env._close()
    assert any("loss" in entry for entry in trainer.state.log_history)
