"""memgym as a verl environment: the ``MemgymTool`` adapter and the reward functions.

Why this package exists: verl's multi-turn rollout (``ToolAgentLoop``) calls tools through ``BaseTool``
subclasses and scores trajectories with a custom reward function. This package plugs memgym into both:

- ``memgym_verl.tool.MemgymTool`` — one class, configured per tool in verl's tool_config YAML; its schema
  comes from the server's ``ListTools``. Imports verl (``verl.tools.base_tool``) — only this module does.
- ``memgym_verl.reward`` — scores the trajectory's episode with ``ScoreEpisode``, returns
  ``{"score": reward, **breakdown}`` and closes the episode; one core, three entry points by verl
  version: ``compute_score`` (any reward manager, one sample), ``compute_score_batch`` (verl 0.5–0.7's
  ``batch`` manager, the batch scored concurrently) and ``compute_score_async`` (verl ≥ 0.8's reward
  loop). Needs no verl.
- ``memgym_verl.episode`` — the single derivation of an episode id from a trajectory, shared by both.

The modules are imported lazily so that ``import memgym_verl.reward`` works without verl installed.
"""

__all__ = ["episode", "reward", "tool"]
