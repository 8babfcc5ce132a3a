#!/usr/bin/env bash
# GRPO on memgym with verl's multi-turn agent loop (memgym_agent: verl's ToolAgentLoop that scores each
# trajectory's episode when it ends; hermes tool calls; async rollout).
#
# Prerequisites (README.md beside this file): verl >= 0.7.1 with its GPU stack (for 0.9.x also its
# verl-core extra: the default v1 trainer needs TransferQueue); memgym-client in the same Python
# (`pip install ./clients/python`); a memgym server (`memgym serve --addr 0.0.0.0:50051`); train/test
# parquet files from `memgym dataset verl`. Settings shared with the DAPO script: memgym_common.sh.
# Extra arguments are passed to verl as Hydra overrides; logs go to the console (add e.g.
# 'trainer.logger=["console","wandb"]').
set -euo pipefail
# shellcheck source=memgym_common.sh
source "$(dirname "$0")/memgym_common.sh"

python3 -m verl.trainer.main_ppo \
  "${COMMON[@]}" \
  actor_rollout_ref.actor.use_kl_loss=True \
  actor_rollout_ref.actor.kl_loss_coef=0.001 \
  actor_rollout_ref.actor.kl_loss_type=low_var_kl \
  reward.reward_manager.name=naive \
  trainer.experiment_name=grpo-locomo \
  "$@"
