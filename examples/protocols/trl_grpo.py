"""GRPO with TRL's own trainer on memgym episodes (trl >= 1.8; needs a GPU and a tool-calling model).

    cargo run --release -- serve &                                   # gRPC on 127.0.0.1:50051
    cargo run --release -- dataset verl --split train --out train.parquet
    pip install ./clients/python "trl==1.16.0" "transformers==5.23.0"
    python examples/protocols/trl_grpo.py --model Qwen/Qwen2.5-1.5B-Instruct --data train.parquet

``MemgymTRLEnv`` is the environment class: TRL builds a pool of them, calls ``reset(**row)`` per rollout
(the row's question id opens the episode), exposes the six memory tools to the model, and takes each
rollout's reward from ``get_reward()`` (ScoreEpisode). The verl export is TRL's dataset as it is: its
``prompt`` column is chat messages and ``extra_info`` carries the question id. (The protocols test tier runs
one step of this trainer on CPU with a tiny random model, tests/python/protocols/test_trl_grpo.py.)
"""

import argparse
import functools

from datasets import load_dataset
from trl import GRPOConfig, GRPOTrainer

from memgym_trl import MemgymTRLEnv


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="a chat model whose template supports tool calls")
    p.add_argument("--data", required=True, help="the `memgym dataset verl` Parquet file")
    p.add_argument("--address", default="127.0.0.1:50051", help="memgym's gRPC address")
    p.add_argument("--max-steps", type=int, default=30, help="tool calls per episode")
    p.add_argument("--output-dir", default="memgym-trl-grpo")
    return p.parse_args(argv)


def grpo_config(a: argparse.Namespace, **overrides) -> GRPOConfig:
    """GRPO: groups of 8 rollouts per question, up to --max-steps tool calls each."""
    settings = dict(
        output_dir=a.output_dir,
        num_generations=8,
        per_device_train_batch_size=8,
        max_completion_length=1024,
        max_tool_calling_iterations=a.max_steps,
        logging_steps=1,
    )
    settings.update(overrides)
    return GRPOConfig(**settings)


def environment_factory(a: argparse.Namespace):
    """What TRL calls (with no arguments) for each environment instance it pools."""
    return functools.partial(MemgymTRLEnv, address=a.address, max_steps=a.max_steps)


def main() -> None:
    a = parse_args()
    dataset = load_dataset("parquet", data_files=a.data, split="train")
    trainer = GRPOTrainer(model=a.model, args=grpo_config(a), train_dataset=dataset, environment_factory=environment_factory(a))
    trainer.train()  # no reward_funcs: get_reward is the reward


if __name__ == "__main__":
    main()
