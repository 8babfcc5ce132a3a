#!/usr/bin/env bash
# GRPO on memgym with verl's multi-turn ToolAgentLoop (async rollout, hermes tool calls).
#
# Prerequisites (see README.md beside this file): verl installed with its GPU stack; memgym-client
# installed in the same Python (`pip install ./clients/python`); a memgym server running
# (`memgym serve --addr 0.0.0.0:50051`); train/test parquet files from `memgym dataset verl`.
#
# Environment: MEMGYM_ADDRESS (127.0.0.1:50051), MODEL (Qwen/Qwen2.5-3B-Instruct), DATA_DIR (.),
# N_GPUS (8), ROLLOUT (sglang|vllm, default vllm). Extra arguments are passed to verl as Hydra overrides.
#
# Needs verl >= 0.7.1 (the oldest whose tool loop and reward loop carry the episode id from the tool to
# the reward function). Its reward keys are reward.*: reward.custom_reward_function = compute_score_async,
# awaited per sample by the reward loop's naive manager. Every key set here is a setting of verl 0.7.1's
# and 0.9.1's own _generated_ppo_trainer.yaml (tests/python/test_launch_script.py).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
export MEMGYM_ADDRESS=${MEMGYM_ADDRESS:-127.0.0.1:50051}
MODEL=${MODEL:-Qwen/Qwen2.5-3B-Instruct}
DATA_DIR=${DATA_DIR:-.}
N_GPUS=${N_GPUS:-8}
ROLLOUT=${ROLLOUT:-vllm}
if [ -n "${VERL_REWARD_KEY_PREFIX+set}" ]; then
  echo "VERL_REWARD_KEY_PREFIX is gone: the script needs verl >= 0.7.1, whose reward keys are always reward.*" >&2
  exit 2
fi
REWARD_FILE=$(python3 -c 'import memgym_verl.reward as r; print(r.__file__)')

python3 -m verl.trainer.main_ppo \
  algorithm.adv_estimator=grpo \
  algorithm.use_kl_in_reward=False \
  data.train_files="$DATA_DIR/train.parquet" \
  data.val_files="$DATA_DIR/test.parquet" \
  data.return_raw_chat=True \
  data.train_batch_size=64 \
  data.max_prompt_length=2048 \
  data.filter_overlong_prompts=True \
  data.max_response_length=8192 \
  actor_rollout_ref.model.path="$MODEL" \
  actor_rollout_ref.actor.optim.lr=1e-6 \
  actor_rollout_ref.actor.ppo_mini_batch_size=64 \
  actor_rollout_ref.actor.use_kl_loss=True \
  actor_rollout_ref.actor.kl_loss_coef=0.001 \
  actor_rollout_ref.actor.kl_loss_type=low_var_kl \
  actor_rollout_ref.rollout.name="$ROLLOUT" \
  actor_rollout_ref.rollout.mode=async \
  actor_rollout_ref.rollout.n=8 \
  actor_rollout_ref.rollout.multi_turn.enable=True \
  actor_rollout_ref.rollout.multi_turn.format=hermes \
  actor_rollout_ref.rollout.multi_turn.max_assistant_turns=30 \
  actor_rollout_ref.rollout.multi_turn.max_parallel_calls=1 \
  actor_rollout_ref.rollout.multi_turn.max_tool_response_length=1024 \
  actor_rollout_ref.rollout.multi_turn.tool_config_path="$HERE/memgym_tool_config.yaml" \
  actor_rollout_ref.rollout.agent.agent_loop_config_path="$HERE/memgym_agent_loop.yaml" \
  reward.reward_manager.name=naive \
  reward.custom_reward_function.path="$REWARD_FILE" \
  reward.custom_reward_function.name=compute_score_async \
  trainer.n_gpus_per_node="$N_GPUS" \
  trainer.nnodes=1 \
  trainer.project_name=memgym \
  trainer.experiment_name=grpo-locomo \
  trainer.total_epochs=1 \
  trainer.test_freq=25 \
  "$@"
