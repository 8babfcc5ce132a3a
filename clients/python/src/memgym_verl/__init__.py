"""memgym as a verl environment: the ``MemgymTool`` adapter and the ``compute_score`` reward function.

Why this package exists: verl's multi-turn rollout (``ToolAgentLoop``) calls tools through ``BaseTool``
subclasses and scores trajectories with a ``compute_score`` function. This package plugs memgym into both:

- ``memgym_verl.tool.MemgymTool`` — one class, configured per tool in verl's tool_config YAML; its schema
  comes from the server's ``ListTools``. Imports verl (``verl.tools.base_tool``) — only this module does.
- ``memgym_verl.reward.compute_score`` — scores the trajectory's episode with ``ScoreEpisode``, returns
  ``{"score": reward, **breakdown}`` and closes the episode. Needs no verl.
- ``memgym_verl.episode`` — the single derivation of an episode id from a trajectory, shared by both.

The modules are imported lazily so that ``import memgym_verl.reward`` works without verl installed.
"""

__all__ = ["episode", "reward", "tool"]
