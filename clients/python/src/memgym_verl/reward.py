"""verl reward functions for memgym: score the trajectory's episode, then close it.

Why this exists: verl's ``ToolAgentLoop`` never tells a tool that a trajectory ended, and verl scores
trajectories through a custom reward function (``reward.custom_reward_function.path`` / ``.name``). That
call is the end of the trajectory, so it is where the episode is scored (``ScoreEpisode``, idempotent)
and freed (``CloseEpisode``). Three entry points sharing one core:

- ``async def compute_score_async(...)`` — for verl ≥ 0.7.1's reward loop (the only reward path of its
  trainer), which awaits a coroutine function per sample, samples concurrently, on the per-loop
  ``AsyncMemgymClient``.
- ``compute_score(data_source, solution_str, ground_truth, extra_info)`` — one sample, blocking (the
  reward loop runs a plain function in its thread pool).
- ``compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos)`` — one call per batch,
  the samples scored concurrently on a thread pool (``memgym_concurrency`` threads, default 64), results
  in input order. For custom loops and verl's legacy ``batch`` manager (``reward_model.reward_manager=
  batch``, verl ≤ 0.7.0), which no supported verl uses: from 0.7.1 the trainer scores only through the
  reward loop, whose registry has no ``batch`` manager, and the legacy managers pass the dataset's
  ``extra_info`` alone, without the tool's ``memgym_episode_id``.

The episode id comes from ``extra_info["memgym_episode_id"]`` (written by ``MemgymTool`` into
``agent_data.extra_fields``, merged into ``extra_info`` by verl ≥ 0.7.1's reward loop), else from the
row's own ``extra_info`` by the tool's fallback derivation (``memgym_verl.episode``). A trajectory that never
called a tool has no episode: its memory is M₀ unchanged, whose reward is exactly 0, so it scores 0.0
(``memgym_missing`` = 1 marks it).

Each sample's result is ``{"score": reward, **breakdown}`` with a fixed set of numeric keys (verl stacks
each key across the batch into ``reward_extra_info``, so every sample must have the same keys). Server
failures raise ``MemgymError`` (``MemgymUnavailable`` names the address): a reward of 0 for an
unreachable server would silently poison training.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import grpc

from memgym import MemgymError
from memgym_verl.episode import (
    ADDRESS_KEY,
    EPISODE_ID_KEY,
    async_client,
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

#: ``compute_score_batch``'s default number of samples scored at once (kwarg ``memgym_concurrency``).
DEFAULT_CONCURRENCY = 64


def episode_id_from_extra_info(extra_info: Optional[Mapping[str, Any]]) -> str:
    """The trajectory's episode id (see the module doc)."""
    extra_info = extra_info or {}
    episode_id = extra_info.get(EPISODE_ID_KEY)
    if episode_id:
        return str(episode_id)
    return episode_id_for(create_kwargs_from_extra_info(extra_info))


def _empty(missing: bool) -> Dict[str, float]:
    out = {"score": 0.0, **{key: 0.0 for key in BREAKDOWN_KEYS}}
    out["memgym_missing"] = 1.0 if missing else 0.0
    return out


def _target(extra_info: Mapping[str, Any]) -> Tuple[str, str]:
    """``(server address, episode id)`` of a sample: the tool's address, else ``$MEMGYM_ADDRESS``."""
    return str(extra_info.get(ADDRESS_KEY) or resolve_address()), episode_id_from_extra_info(extra_info)


def _fill(out: Dict[str, float], resp: Any) -> None:
    """Writes a ``ScoreEpisodeResponse`` into a result made by ``_empty``."""
    for key in BREAKDOWN_KEYS:
        out[key] = float(getattr(resp, key))
    out["score"] = float(resp.reward)


@contextmanager
def _unless_gone() -> Iterator[None]:
    """Lets NOT_FOUND pass silently (a close racing another close); every other error raises."""
    try:
        yield
    except MemgymError as err:
        if err.code != grpc.StatusCode.NOT_FOUND:
            raise


@contextmanager
def _scoring(episode_id: str, extra_info: Mapping[str, Any]) -> Iterator[Dict[str, float]]:
    """The one scoring protocol of every entry point, around the caller's (sync or async) RPCs.

    Yields the result, which the body fills with ``_fill(out, ScoreEpisode)`` before closing the episode
    inside ``_unless_gone()``. A ScoreEpisode NOT_FOUND means the trajectory opened no episode: the result
    stays the zero one with ``memgym_missing`` = 1 (and a warning if the tool had opened it, i.e. it was
    closed or reaped before scoring). Any other error raises.
    """
    out = _empty(missing=False)
    try:
        yield out
    except MemgymError as err:
        if err.code != grpc.StatusCode.NOT_FOUND:
            raise
        if extra_info.get(EPISODE_ID_KEY):
            logger.warning("memgym episode %s is gone before scoring (%s); scoring 0", episode_id, err.details)
        out.update(_empty(missing=True))


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
    else ``$MEMGYM_ADDRESS``, else 127.0.0.1:50051. Server failures raise ``MemgymError``.
    """
    extra_info = extra_info or {}
    address, episode_id = _target(extra_info)
    client = sync_client(address)
    with _scoring(episode_id, extra_info) as out:
        _fill(out, client.score_episode(episode_id))
        with _unless_gone():
            client.close_episode(episode_id)
    return out


async def compute_score_async(
    data_source: Any = None,
    solution_str: Any = None,
    ground_truth: Any = None,
    extra_info: Optional[Mapping[str, Any]] = None,
    **kwargs: Any,
) -> Dict[str, float]:
    """``compute_score`` as a coroutine, for verl ≥ 0.7.1's reward loop (samples awaited concurrently).

    Uses the ``AsyncMemgymClient`` of the running event loop (``memgym_verl.episode.async_client``).
    """
    extra_info = extra_info or {}
    address, episode_id = _target(extra_info)
    client = async_client(address)
    with _scoring(episode_id, extra_info) as out:
        _fill(out, await client.score_episode(episode_id))
        with _unless_gone():
            await client.close_episode(episode_id)
    return out


def compute_score_batch(
    data_sources: Sequence[Any],
    solution_strs: Sequence[Any],
    ground_truths: Sequence[Any],
    extra_infos: Optional[Sequence[Optional[Mapping[str, Any]]]] = None,
    **kwargs: Any,
) -> List[Dict[str, float]]:
    """``compute_score`` for a whole batch: custom loops, verl's legacy ``batch`` manager (module doc).

    Scores every sample concurrently on a thread pool of at most ``memgym_concurrency`` threads (default
    64) sharing the process's ``MemgymClient``; returns one result per sample, in input order. The first
    server failure raises (samples not yet started are cancelled). Other keyword arguments are passed to
    ``compute_score``.
    """
    concurrency = int(kwargs.pop("memgym_concurrency", DEFAULT_CONCURRENCY))
    if concurrency < 1:
        raise ValueError(f"memgym_concurrency must be at least 1, got {concurrency}")
    n = len(solution_strs)
    if extra_infos is None:
        extra_infos = [None] * n
    if not len(data_sources) == len(ground_truths) == len(extra_infos) == n:
        raise ValueError(
            "compute_score_batch needs one data_source, ground_truth and extra_info per solution: got "
            f"{len(data_sources)}, {len(ground_truths)}, {len(extra_infos)} for {n} solutions"
        )
    if n == 0:
        return []

    def score(i: int) -> Dict[str, float]:
        return compute_score(data_sources[i], solution_strs[i], ground_truths[i], extra_infos[i], **kwargs)

    pool = ThreadPoolExecutor(max_workers=min(concurrency, n), thread_name_prefix="memgym-score")
    try:
        return list(pool.map(score, range(n)))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
