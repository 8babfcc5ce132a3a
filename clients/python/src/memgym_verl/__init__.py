"""memgym as a verl environment: the tool adapter, the agent loop and the scoring core.

Why this package exists: verl's multi-turn rollout calls tools through ``BaseTool`` subclasses and lets an
agent loop set each trajectory's reward. This package plugs memgym into both (examples/verl/README.md):

- ``memgym_verl.tool.MemgymTool`` — one class, configured per tool in verl's tool_config YAML; its schema
  comes from the server's ``ListTools``; one episode per trajectory. Imports verl.
- ``memgym_verl.agent_loop.MemgymAgentLoop`` — agent loop ``memgym_agent``: verl's ``ToolAgentLoop`` that
  scores and closes the trajectory's episode when it ends and sets its reward, whatever the reward manager.
  Imports verl.
- ``memgym_verl.reward`` — the scoring core (``ScoreEpisode`` + ``CloseEpisode`` → the ``memgym_*``
  breakdown) and reward functions for custom loops. Needs no verl.
- ``memgym_verl.episode`` — the episode id of a trajectory, the row's create arguments, the clients.
- ``MIN_VERL`` / ``check_verl_version`` here: the oldest supported verl (needs no verl).

The submodules are not imported here, so ``import memgym_verl.reward`` works without verl installed.
"""

import re
from typing import Optional, Tuple

__all__ = ["MIN_VERL", "agent_loop", "check_verl_version", "episode", "release", "reward", "tool"]

#: The oldest verl whose ToolAgentLoop passes the tool create_kwargs and agent_data and returns the
#: trajectory's extra_fields in its output.
MIN_VERL = "0.7.1"


def release(version: str) -> Optional[Tuple[int, int, int]]:
    """``(major, minor, patch)`` of a version string such as ``0.9.1`` or ``0.10.0.dev0``; None if unparsable."""
    match = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", version)
    return (int(match[1]), int(match[2]), int(match[3] or 0)) if match else None


def check_verl_version(version: Optional[str]) -> None:
    """Raises ``RuntimeError`` for a verl older than ``MIN_VERL``; an unknown or unparsable version passes."""
    found = release(str(version or ""))
    if found is not None and found < release(MIN_VERL):
        raise RuntimeError(
            f"memgym_verl needs verl >= {MIN_VERL}, found {version}: older ToolAgentLoops pass no "
            "create_kwargs (0.5) or no agent_data (0.6) to the tool, or drop its extra_fields from the "
            "trajectory's output (0.7.0), so episodes cannot be kept per trajectory and scored"
        )
