#!/usr/bin/env bash
# DAPO on memgym with verl's multi-turn agent loop (memgym_agent), with DAPO's four settings as verl names them:
#   - clip-higher: actor.clip_ratio_low=0.2, actor.clip_ratio_high=0.28 (and dual-clip clip_ratio_c=10);
#   - token-level loss: actor.loss_agg_mode=token-mean; no KL loss;
#   - overlong reward shaping: reward.reward_manager.name=dapo with reward.reward_kwargs.overlong_buffer_cfg
#     (a 1024-token buffer before RESPONSE_LENGTH, penalty factor 1). memgym_agent applies the same penalty
#     verl's DAPO manager would (memgym_overlong_penalty), since it sets the reward itself;
#   - dynamic sampling (drop groups whose rewards are all equal): algorithm.filter_groups on memgym_reward.
#     Only verl >= 0.9.0's v1 trainer implements it (trainer.use_v1=True, needs verl's verl-core extra);
#     on 0.7.1 and 0.8.0 no trainer reads filter_groups, so this script runs without it and says so.
# Prerequisites and environment: as run_grpo_memgym.sh (memgym_common.sh). Extra arguments go to verl.
set -euo pipefail
# shellcheck source=memgym_common.sh
source "$(dirname "$0")/memgym_common.sh"

DAPO=(
  actor_rollout_ref.actor.use_kl_loss=False
  actor_rollout_ref.actor.kl_loss_coef=0.0
  actor_rollout_ref.actor.entropy_coeff=0
  actor_rollout_ref.actor.clip_ratio_low=0.2
  actor_rollout_ref.actor.clip_ratio_high=0.28
  actor_rollout_ref.actor.clip_ratio_c=10.0
  actor_rollout_ref.actor.loss_agg_mode=token-mean
  reward.reward_manager.name=dapo
  +reward.reward_kwargs.max_resp_len="$RESPONSE_LENGTH"
  +reward.reward_kwargs.overlong_buffer_cfg.enable=True
  +reward.reward_kwargs.overlong_buffer_cfg.len=1024
  +reward.reward_kwargs.overlong_buffer_cfg.penalty_factor=1.0
  +reward.reward_kwargs.overlong_buffer_cfg.log=True
  trainer.experiment_name=dapo-locomo
)
if [ "$VERL_V1" = 1 ]; then
  DAPO+=(
    trainer.use_v1=True
    algorithm.filter_groups.enable=True
    algorithm.filter_groups.metric=memgym_reward
  )
else
  echo "verl $VERL_VERSION has no dynamic sampling (algorithm.filter_groups needs verl >= 0.9.0's v1 trainer): DAPO runs without it" >&2
fi

python3 -m verl.trainer.main_ppo "${COMMON[@]}" "${DAPO[@]}" "$@"
