"""verl reward function for memgym: score the trajectory's episode, then close it.

Why this exists: verl's ``ToolAgentLoop`` never tells a tool that a trajectory ended, and verl scores a
trajectory by calling ``compute_score(data_source, solution_str, ground_truth, extra_info, **kwargs)``
(``custom_reward_function.path`` / ``.name``). That call is the end of the trajectory, so it is where
the episode is scored (``ScoreEpisode``, idempotent) and freed (``CloseEpisode``).

The episode id comes from ``extra_info["memgym_episode_id"]`` (written by ``MemgymTool`` into
``agent_data.extra_fields``, merged into ``extra_info`` by verl ≥ 0.8), else from the row's own
``extra_info`` by the tool's fallback derivation (``memgym_verl.episode``). A trajectory that never
called a tool has no episode: its memory is M₀ unchanged, whose reward is exactly 0, so it scores 0.0
(``memgym_missing`` = 1 marks it).

Returns ``{"score": reward, **breakdown}`` with a fixed set of numeric keys (verl stacks each key across
the batch into ``reward_extra_info``, so every sample must have the same keys).
"""

from __future__ import annotations

import logging
from typing import Any, Dict, Mapping, Optional

import grpc

from memgym import MemgymError
from memgym_verl.episode import (
    ADDRESS_KEY,
    EPISODE_ID_KEY,
    create_kwargs_from_extra_info,
    episode_id_for,
    resolve_address,
    sync_client,
)

logger = logging.getLogger(__name__)

#: The numeric ScoreEpisodeResponse fields reported beside the score.
BREAKDOWN_KEYS = (
    "reward",
    "p_old",
    "p_new",
    "performance_delta",
    "size_factor",
    "density_factor",
    "change_factor",
    "memory_efficiency",
    "evidence_recall_old",
    "evidence_recall_new",
    "initial_memory_count",
    "final_memory_count",
    "steps_used",
)


def episode_id_from_extra_info(extra_info: Optional[Mapping[str, Any]]) -> str:
    """The trajectory's episode id (see the module doc)."""
    extra_info = extra_info or {}
    episode_id = extra_info.get(EPISODE_ID_KEY)
    if episode_id:
        return str(episode_id)
    return episode_id_for(create_kwargs_from_extra_info(extra_info))


def _empty(missing: bool) -> Dict[str, float]:
    out = {key: 0.0 for key in BREAKDOWN_KEYS}
    out["memgym_missing"] = 1.0 if missing else 0.0
    return out


def compute_score(
    data_source: Any = None,
    solution_str: Any = None,
    ground_truth: Any = None,
    extra_info: Optional[Mapping[str, Any]] = None,
    **kwargs: Any,
) -> Dict[str, float]:
    """Scores and closes the trajectory's memgym episode; returns ``{"score": reward, **breakdown}``.

    ``solution_str`` and ``ground_truth`` are not used: the reward is what the edited memory lets a
    reader answer, which only the server knows. Address: ``extra_info["memgym_address"]`` (the tool's),
    else ``$MEMGYM_ADDRESS``, else 127.0.0.1:50051. Server failures raise ``MemgymError`` (a reward of 0
    for an unreachable server would silently poison training).
    """
    extra_info = extra_info or {}
    address = str(extra_info.get(ADDRESS_KEY) or resolve_address())
    episode_id = episode_id_from_extra_info(extra_info)
    client = sync_client(address)
    try:
        resp = client.score_episode(episode_id)
    except MemgymError as err:
        if err.code != grpc.StatusCode.NOT_FOUND:
            raise
        if extra_info.get(EPISODE_ID_KEY):
            # The tool opened it, so it was closed or reaped (idle TTL) before scoring: say so loudly.
            logger.warning("memgym episode %s is gone before scoring (%s); scoring 0", episode_id, err.details)
        out = _empty(missing=True)
        return {"score": 0.0, **out}
    out = _empty(missing=False)
    for key in BREAKDOWN_KEYS:
        out[key] = float(getattr(resp, key))
    try:
        client.close_episode(episode_id)
    except MemgymError as err:
        if err.code != grpc.StatusCode.NOT_FOUND:  # closed concurrently: fine
            raise
    return {"score": float(resp.reward), **out}
