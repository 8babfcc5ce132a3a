"""memgym as a TRL environment: ``GRPOTrainer(environment_factory=MemgymTRLEnv)``.

Why this package exists: TRL's ``GRPOTrainer`` (trl >= 1.8) runs multi-turn tool-calling rollouts against
an *environment class*: it builds instances with no arguments, calls ``reset(**row)`` with each dataset row,
turns every other public method into a tool (its JSON schema comes from
``transformers.utils.get_json_schema``, i.e. from the type hints and the Google-style docstring) and reads
the rollout's reward from ``get_reward()``. ``memgym_trl.env.MemgymTRLEnv`` is that class for memgym: one
gRPC connection per instance, one memgym episode per rollout, the six tools with exactly the server's
``ListTools`` names and parameters, and the episode's ``ScoreEpisode`` reward.

Needs neither trl nor transformers to import (only ``memgym``); see clients/python/README.md, "TRL".
"""

from memgym_trl.env import ROW_KEYS, MemgymTRLEnv, ToolCallError, row_episode_kwargs

__all__ = ["MemgymTRLEnv", "ROW_KEYS", "ToolCallError", "row_episode_kwargs"]
