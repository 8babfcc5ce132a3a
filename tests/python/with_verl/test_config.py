"""The launch scripts' overrides pass verl's own validation, in main_ppo's order, for GRPO and DAPO.

Why this exists: a launch script that verl refuses fails before the first step (the old script set no
micro-batch sizes and verl's ``ActorConfig`` refused it). This runs the real scripts (a shim ``python3``
captures the trainer's arguments), composes the overrides onto verl's own ``ppo_trainer`` config with
Hydra, and calls the same verl functions ``verl.trainer.main_ppo`` calls before it starts Ray workers —
per release:

- 0.7.1 / 0.8.0: ``auto_set_device``, ``migrate_legacy_reward_impl``, resolve, ``validate_config``;
- 0.9.0 / 0.9.1: ``auto_set_device``, ``validate_config`` (driver), then for the default v1 trainer
  resolve and construct ``get_trainer_cls(trainer.v1.trainer_mode)(config)`` (its group-filter checks).

Then what the workers build first from the same config: the rollout ``RolloutConfig`` and the configured
reward manager (``dapo``'s constructor checks its overlong buffer). No GPU, Ray or model download is
needed; the GPU count only enters the arithmetic.
"""

from __future__ import annotations

import importlib

import pytest

from with_verl.conftest import compose, launch_overrides, release

from memgym_verl.agent_loop import AGENT_NAME, OverlongPenalty


def main_ppo_validation(overrides):
    """verl's own pre-Ray validation of ``python3 -m verl.trainer.main_ppo OVERRIDES``; returns the config."""
    from omegaconf import OmegaConf

    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config
    from verl.utils.device import auto_set_device

    main_ppo = importlib.import_module("verl.trainer.main_ppo")
    cfg = compose(overrides)
    auto_set_device(cfg)

    def validate():
        validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))

    if hasattr(main_ppo, "migrate_legacy_reward_impl"):  # 0.7.1, 0.8.0
        cfg = main_ppo.migrate_legacy_reward_impl(cfg)
        OmegaConf.resolve(cfg)
        validate()
        return cfg
    validate()  # 0.9.x: on the driver, before ray.init
    if cfg.trainer.get("use_v1", False):
        from verl.trainer.ppo.v1 import get_trainer_cls

        cfg.transfer_queue.enable = True
        OmegaConf.resolve(cfg)
        get_trainer_cls(cfg.trainer.v1.trainer_mode)(config=cfg)  # constructor only: its checks, no workers
    else:
        OmegaConf.resolve(cfg)
        validate()
    return cfg


def worker_configs(cfg):
    """What the rollout and reward workers build first: the RolloutConfig and the reward manager."""
    from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls
    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.config import RolloutConfig

    omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout, dataclass_type=RolloutConfig)
    get_reward_manager_cls(cfg.reward.reward_manager.name)(cfg, None, None)


@pytest.mark.parametrize("script", ["run_grpo_memgym.sh", "run_dapo_memgym.sh"])
def test_the_launch_script_passes_verls_validation(script, tmp_path, verl_version, qwen_path):
    overrides = launch_overrides(script, tmp_path, {"MODEL": qwen_path})
    cfg = main_ppo_validation(overrides)
    worker_configs(cfg)

    rollout = cfg.actor_rollout_ref.rollout
    assert rollout.multi_turn.enable and rollout.agent.default_agent_loop == AGENT_NAME
    assert rollout.agent.agent_loop_config_path.endswith("examples/verl/memgym_agent_loop.yaml")
    assert cfg.data.filter_overlong_prompts is True and cfg.data.max_prompt_length == 2048
    assert list(cfg.trainer.logger) == ["console"]
    assert "tool_response_truncate_side=" not in " ".join(overrides)  # the tool fits its text itself
    if script == "run_dapo_memgym.sh":
        actor = cfg.actor_rollout_ref.actor
        assert (actor.clip_ratio_low, actor.clip_ratio_high, actor.loss_agg_mode) == (0.2, 0.28, "token-mean")
        assert cfg.reward.reward_manager.name == "dapo"
        penalty = OverlongPenalty(cfg)
        assert penalty.enabled and penalty.length == 1024 and penalty.max_resp_len == cfg.data.max_response_length
        dynamic = release(verl_version) >= (0, 9, 0)
        assert bool(cfg.algorithm.get("filter_groups") and cfg.algorithm.filter_groups.enable) == dynamic
        if dynamic:
            assert cfg.trainer.use_v1 and cfg.algorithm.filter_groups.metric == "memgym_reward"
    else:
        assert cfg.reward.reward_manager.name == "naive" and OverlongPenalty(cfg).enabled is False


def test_verl_refuses_a_script_without_micro_batch_sizes(tmp_path, qwen_path):
    """The check is real: the old script's mistake (no micro-batch sizes, no dynamic batching) is refused."""
    overrides = [o for o in launch_overrides("run_grpo_memgym.sh", tmp_path, {"MODEL": qwen_path}) if "micro_batch_size" not in o]
    with pytest.raises(Exception, match="micro_batch_size"):
        main_ppo_validation(overrides)
