# shellcheck shell=bash
# Sourced by run_grpo_memgym.sh and run_dapo_memgym.sh: the settings every memgym run on verl shares.
#
# Environment: MEMGYM_ADDRESS (127.0.0.1:50051), MODEL (Qwen/Qwen2.5-3B-Instruct), DATA_DIR (.),
# N_GPUS (8), ROLLOUT (vllm|sglang, default vllm), RESPONSE_LENGTH (8192). Needs verl >= 0.7.1 and
# memgym-client in the python3 on PATH. Sets VERL_VERSION, VERL_V1 (1 for verl >= 0.9.0, whose default
# trainer is the v1 one) and COMMON (the shared Hydra overrides). Every key is a setting of verl's own
# config, validated by verl's code in tests/python/with_verl/test_config.py for 0.7.1, 0.8.0, 0.9.0, 0.9.1.
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export MEMGYM_ADDRESS=${MEMGYM_ADDRESS:-127.0.0.1:50051}
MODEL=${MODEL:-Qwen/Qwen2.5-3B-Instruct}
DATA_DIR=${DATA_DIR:-.}
N_GPUS=${N_GPUS:-8}
ROLLOUT=${ROLLOUT:-vllm}
RESPONSE_LENGTH=${RESPONSE_LENGTH:-8192}

# One python3 start: verl's version (refused below 0.7.1 by memgym_verl itself), whether its default trainer
# is the v1 one (0.9.0 and later), and the reward file.
VERL_INFO=$(python3 - <<'PY'
import verl
import memgym_verl
import memgym_verl.reward as reward
memgym_verl.check_verl_version(verl.__version__)
print(verl.__version__, int((memgym_verl.release(verl.__version__) or (0,)) >= (0, 9, 0)), reward.__file__)
PY
) || {
  echo "memgym needs verl >= 0.7.1 and memgym-client (pip install ./clients/python) in python3: see the error above" >&2
  exit 2
}
read -r VERL_VERSION VERL_V1 REWARD_FILE <<<"$VERL_INFO"

# The prompt (system + user + the six tool schemas) is at most ~1,300 Qwen2.5 tokens; 2048 leaves a margin,
# and verl drops (never cuts) a longer row. The memgym_agent loop scores every trajectory itself (its reward
# reaches every sample whatever the reward manager); the custom reward function is only a safety net that
# raises, naming the cause, if a sample ever reaches the manager without that reward.
COMMON=(
  algorithm.adv_estimator=grpo
  algorithm.use_kl_in_reward=False
  data.train_files="$DATA_DIR/train.parquet"
  data.val_files="$DATA_DIR/test.parquet"
  data.return_raw_chat=True
  data.train_batch_size=64
  data.max_prompt_length=2048
  data.filter_overlong_prompts=True
  data.max_response_length="$RESPONSE_LENGTH"
  actor_rollout_ref.model.path="$MODEL"
  actor_rollout_ref.actor.optim.lr=1e-6
  actor_rollout_ref.actor.ppo_mini_batch_size=64
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4
  actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8
  actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8
  actor_rollout_ref.rollout.name="$ROLLOUT"
  actor_rollout_ref.rollout.mode=async
  actor_rollout_ref.rollout.n=8
  actor_rollout_ref.rollout.multi_turn.enable=True
  actor_rollout_ref.rollout.multi_turn.format=hermes
  actor_rollout_ref.rollout.multi_turn.max_assistant_turns=30
  actor_rollout_ref.rollout.multi_turn.max_parallel_calls=1
  actor_rollout_ref.rollout.multi_turn.max_tool_response_length=1024
  actor_rollout_ref.rollout.multi_turn.tool_config_path="$HERE/memgym_tool_config.yaml"
  actor_rollout_ref.rollout.agent.agent_loop_config_path="$HERE/memgym_agent_loop.yaml"
  actor_rollout_ref.rollout.agent.default_agent_loop=memgym_agent
  reward.custom_reward_function.path="$REWARD_FILE"
  reward.custom_reward_function.name=compute_score_async
  trainer.logger='["console"]'
  trainer.n_gpus_per_node="$N_GPUS"
  trainer.nnodes=1
  trainer.project_name=memgym
  trainer.total_epochs=1
  trainer.test_freq=25
)
