"""Scoring a trajectory's memgym episode: the one core the agent loop and the reward functions share.

Why this exists: a trajectory's reward is what its edited memory lets a reader answer, which only the
server knows (``ScoreEpisode``). The episode must be scored once, at the end of the trajectory, and
then freed (``CloseEpisode``). ``memgym_verl.agent_loop.MemgymAgentLoop`` does that for every
trajectory, whatever reward manager verl is configured with; the functions below are the same
protocol for callers outside that loop.

- ``score_and_close_async`` / ``score_and_close``: ``ScoreEpisode`` then ``CloseEpisode``; returns the
  breakdown as ``{"memgym_reward": …, "memgym_p_old": …, …}`` (``BREAKDOWN_KEYS``). Every key carries the
  ``memgym_`` prefix: verl's validation already records each score under ``reward`` and then appends
  every key of the reward dict, so an unprefixed ``reward`` key doubles that list and fails verl's
  length check.
- ``compute_score`` / ``compute_score_async`` / ``compute_score_batch`` — verl reward-function
  signatures, for custom loops that use ``MemgymTool`` without ``MemgymAgentLoop``: the episode id comes
  from ``extra_info["memgym_episode_id"]``, which only verl's ``naive`` manager passes on (it merges the
  loop's ``extra_fields`` into ``extra_info``; ``dapo``, ``gdpo`` and the reward-model path do not).
  They return ``{"score": reward, **breakdown}``.

Nothing here ever scores a silent 0. A sample without an episode raises ``EpisodeMissing`` naming the
cause; a closed, reaped or unknown episode raises the server's error (``MemgymError``:
FAILED_PRECONDITION "… was reaped after … idle at step k", NOT_FOUND); an unreachable server raises
``MemgymUnavailable``.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import grpc

from memgym import MemgymError
from memgym_verl.episode import ADDRESS_KEY, EPISODE_ID_KEY, async_client, resolve_address, sync_client

#: The numeric ``ScoreEpisodeResponse`` fields of the breakdown, in order.
SCORE_FIELDS = (
    "reward",
    "p_old",
    "p_new",
    "performance_delta",
    "size_factor",
    "density_factor",
    "change_factor",
    "memory_efficiency",
    "growth",
    "evidence_recall_old",
    "evidence_recall_new",
    "initial_memory_count",
    "final_memory_count",
    "steps_used",
    "others_term",
    "words_added",
    "words_removed",
)

#: The other questions' aggregate (``ScoreEpisodeResponse.others``, set by the whole-memory formulas): the
#: breakdown carries each as ``memgym_others_<name>`` (0 when the formula does not score them).
OTHERS_FIELDS = ("count", "rescored", "improved", "damaged", "mean_delta", "destroyed", "displaced")

#: The prefix of every key memgym adds to verl's reward_extra_info (see the module doc).
PREFIX = "memgym_"

#: The breakdown keys: ``memgym_reward``, ``memgym_p_old``, …
BREAKDOWN_KEYS = tuple(PREFIX + name for name in SCORE_FIELDS) + tuple(PREFIX + "others_" + name for name in OTHERS_FIELDS)

#: The breakdown key holding the reward.
REWARD_KEY = PREFIX + "reward"

#: ``compute_score_batch``'s default number of samples scored at once (kwarg ``memgym_concurrency``).
DEFAULT_CONCURRENCY = 64

MISSING_HELP = (
    "memgym_agent (the MemgymAgentLoop, registered through actor_rollout_ref.rollout.agent."
    "agent_loop_config_path=examples/verl/memgym_agent_loop.yaml, and the dataset's agent_name) scores every "
    "trajectory itself with any reward manager; a reward function sees the episode only through the naive "
    "manager, which passes the loop's extra_fields on (dapo, gdpo and the reward-model path drop them)"
)


class EpisodeMissing(RuntimeError):
    """A sample reached a memgym reward function without its episode id."""


def breakdown(resp: Any) -> Dict[str, float]:
    """A ``ScoreEpisodeResponse`` as ``{"memgym_reward": …, …}`` (every ``BREAKDOWN_KEYS`` key, floats)."""
    out = {PREFIX + name: float(getattr(resp, name)) for name in SCORE_FIELDS}
    others = resp.others if resp.HasField("others") else None
    for name in OTHERS_FIELDS:
        out[PREFIX + "others_" + name] = float(getattr(others, name)) if others is not None else 0.0
    return out


def _closed_quietly(err: MemgymError) -> bool:
    """A close that found the episode already gone (a retried or racing close) is not an error."""
    return err.code == grpc.StatusCode.NOT_FOUND


async def score_and_close_async(address: str, episode_id: str) -> Dict[str, float]:
    """``ScoreEpisode`` then ``CloseEpisode`` on the running event loop's client; returns ``breakdown``."""
    client = async_client(address)
    result = breakdown(await client.score_episode(episode_id))
    try:
        await client.close_episode(episode_id)
    except MemgymError as err:
        if not _closed_quietly(err):
            raise
    return result


def score_and_close(address: str, episode_id: str) -> Dict[str, float]:
    """``score_and_close_async`` with the process's blocking client."""
    client = sync_client(address)
    result = breakdown(client.score_episode(episode_id))
    try:
        client.close_episode(episode_id)
    except MemgymError as err:
        if not _closed_quietly(err):
            raise
    return result


def _target(extra_info: Optional[Mapping[str, Any]]) -> Tuple[str, str]:
    """``(address, episode id)`` of a sample, or ``EpisodeMissing`` naming the cause."""
    extra_info = extra_info or {}
    episode_id = extra_info.get(EPISODE_ID_KEY)
    if not episode_id:
        raise EpisodeMissing(f"memgym: extra_info has no {EPISODE_ID_KEY!r}, so there is no episode to score; {MISSING_HELP}")
    return str(extra_info.get(ADDRESS_KEY) or resolve_address()), str(episode_id)


def _scored(result: Dict[str, float]) -> Dict[str, float]:
    return {"score": result[REWARD_KEY], **result}


def compute_score(
    data_source: Any = None,
    solution_str: Any = None,
    ground_truth: Any = None,
    extra_info: Optional[Mapping[str, Any]] = None,
    **kwargs: Any,
) -> Dict[str, float]:
    """Scores and closes the sample's episode; returns ``{"score": reward, **breakdown}`` (module doc).

    ``solution_str`` and ``ground_truth`` are not used. Address: ``extra_info["memgym_address"]`` (the
    tool's), else ``$MEMGYM_ADDRESS``, else 127.0.0.1:50051.
    """
    address, episode_id = _target(extra_info)
    return _scored(score_and_close(address, episode_id))


async def compute_score_async(
    data_source: Any = None,
    solution_str: Any = None,
    ground_truth: Any = None,
    extra_info: Optional[Mapping[str, Any]] = None,
    **kwargs: Any,
) -> Dict[str, float]:
    """``compute_score`` as a coroutine (verl's reward loop awaits it per sample, concurrently)."""
    address, episode_id = _target(extra_info)
    return _scored(await score_and_close_async(address, episode_id))


def compute_score_batch(
    data_sources: Sequence[Any],
    solution_strs: Sequence[Any],
    ground_truths: Sequence[Any],
    extra_infos: Optional[Sequence[Optional[Mapping[str, Any]]]] = None,
    **kwargs: Any,
) -> List[Dict[str, float]]:
    """``compute_score`` for a whole batch, for custom loops (and verl's legacy ``batch`` manager).

    Scores the samples concurrently on at most ``memgym_concurrency`` threads (default 64) sharing the
    process's ``MemgymClient``; one result per sample, in input order. The first failure raises (samples
    not yet started are cancelled).
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
    targets = [_target(extra_info) for extra_info in extra_infos]  # every sample checked before any RPC
    pool = ThreadPoolExecutor(max_workers=min(concurrency, n), thread_name_prefix="memgym-score")
    try:
        return [_scored(r) for r in pool.map(lambda t: score_and_close(*t), targets)]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
