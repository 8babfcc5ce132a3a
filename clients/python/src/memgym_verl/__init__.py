"""memgym as a verl environment: the ``MemgymTool`` adapter and the reward functions.

Why this package exists: verl's multi-turn rollout (``ToolAgentLoop``) calls tools through ``BaseTool``
subclasses and scores trajectories with a custom reward function. This package plugs memgym into both:

- ``memgym_verl.tool.MemgymTool`` — one class, configured per tool in verl's tool_config YAML; its schema
  comes from the server's ``ListTools``. Needs verl ≥ 0.7.1 (``MIN_VERL``). Imports verl
  (``verl.tools.base_tool``) — only this module does.
- ``memgym_verl.reward`` — scores the trajectory's episode with ``ScoreEpisode``, returns
  ``{"score": reward, **breakdown}`` and closes the episode; one core, three entry points:
  ``compute_score_async`` (verl ≥ 0.7.1's reward loop awaits it per sample), ``compute_score`` (one
  sample, blocking) and ``compute_score_batch`` (one call per batch, for custom loops and verl's legacy
  ``batch`` manager, which no supported verl uses). Needs no verl.
- ``memgym_verl.episode`` — the single derivation of an episode id from a trajectory, shared by both.

The modules are imported lazily so that ``import memgym_verl.reward`` works without verl installed.
"""

__all__ = ["MIN_VERL", "episode", "reward", "tool"]

#: The oldest verl whose ToolAgentLoop and reward loop carry a trajectory's episode from tool to reward.
MIN_VERL = "0.7.1"
