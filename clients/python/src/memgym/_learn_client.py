"""The ``Learn`` RPCs (``memgym.v1.Learn``, ``proto/memgym/v1/learn.proto``) as client methods.

Why this exists: Training-Free GRPO learns by letting an LLM read groups of rollouts and edit an
experience library (the Training-Free GRPO design's ``SemanticExtractor``). memgym runs those stages on the server, with the
server's LLM endpoint (``memgym serve --llm-base-url URL --llm-model NAME``), and applies the plan to a
bank at the version it read. A trainer needs those calls on the same channel as the bank calls, with
the same deadline and error mapping. They live here, as two mixins (blocking and asyncio) over one set
of request builders, like ``memgym._agent_client``, so the two clients cannot drift apart.

Each method is named after its RPC in snake_case and returns the response message
(``memgym.v1.learn_pb2``). A trajectory may be a ``memgym.learn.Trajectory`` (or any object with
``query``, ``output``, ``reward`` and optionally ``groundtruth`` and ``summary`` attributes), a dict
with those keys, or a ``learn_pb2.Trajectory``; ``None`` for ``groundtruth`` / ``summary`` leaves the
field unset. ``groups`` is a list of groups, each a list of trajectories (or a ``TrajectoryGroup``).

Errors are ``memgym.MemgymError`` with the gRPC code: INVALID_ARGUMENT naming the field
(``groups[0].trajectories[1].reward``), FAILED_PRECONDITION when the server has no LLM endpoint,
NOT_FOUND for an unknown bank, ABORTED when the bank changed between the read and the write (or
``expected_version`` is stale), UNAVAILABLE / DEADLINE_EXCEEDED for the LLM's own failures in the stage
RPCs. Inside ``learn_from_group`` a failed stage never fails the call: the group's ``skipped`` or the
response's ``fallback`` says why.

**Nothing here is retried**: every call costs LLM requests, and ``LearnFromGroup`` writes the bank.
Each method takes ``timeout=`` (seconds) to override the client's deadline for that call, since one
call makes many LLM requests (on a CPU model, minutes).
"""

from __future__ import annotations

import json
from typing import Any, Mapping, NamedTuple, Optional, Sequence, Union

from memgym._requests import msg, pick
from memgym.v1 import learn_pb2 as lpb

#: Values of ``variation=`` (names as in learn.proto, lower case).
VARIATION_RULES = {
    "spread": lpb.VARIATION_RULE_SPREAD,
    "mean_between": lpb.VARIATION_RULE_MEAN_BETWEEN,
}
#: Values of ``mode=`` (names as in learn.proto, lower case).
LEARN_MODES = {
    "three_stage": lpb.LEARN_MODE_THREE_STAGE,
    "four_stage": lpb.LEARN_MODE_FOUR_STAGE,
}

#: One rollout: a ``learn_pb2.Trajectory``, a dict, or an object with the fields as attributes.
TrajectoryLike = Any
#: One group's operations for ``consolidate_operations``: JSON text, or a list of operation dicts.
GroupOperations = Union[str, Sequence[Mapping[str, Any]]]

_FIELDS = ("query", "output", "reward", "groundtruth", "summary")


def variation_rule(value: Union[None, int, str]) -> int:
    """``None`` (the server's default, SPREAD), ``"spread"``, ``"mean_between"`` or the enum value."""
    return pick(value, VARIATION_RULES, ("variation_rule_",), "variation rule")


def learn_mode(value: Union[None, int, str]) -> int:
    """``None`` (the server's default, THREE_STAGE), ``"three_stage"``, ``"four_stage"`` or the enum value."""
    return pick(value, LEARN_MODES, ("learn_mode_",), "learn mode")


def trajectory_message(t: TrajectoryLike) -> lpb.Trajectory:
    """A trajectory as ``learn_pb2.Trajectory``; ``reward`` is sent as ``float(reward)`` (the server
    checks it is in [0, 1]), ``None`` for ``groundtruth`` / ``summary`` leaves them unset."""
    if isinstance(t, lpb.Trajectory):
        return t
    if isinstance(t, Mapping):
        get = t.get
    elif all(hasattr(t, f) for f in ("query", "output", "reward")):
        def get(name: str, default: Any = None) -> Any:
            return getattr(t, name, default)
    else:
        raise TypeError(f"a trajectory must be a Trajectory, a dict or learn_pb2.Trajectory, not {type(t).__name__}")
    reward = get("reward")
    if reward is None:
        raise TypeError("a trajectory needs a reward")
    msg = lpb.Trajectory(query=str(get("query") or ""), output=str(get("output") or ""), reward=float(reward))
    for name in ("groundtruth", "summary"):
        value = get(name)
        if value is not None:
            setattr(msg, name, str(value))
    return msg


def trajectory_group(group: Union[lpb.TrajectoryGroup, Sequence[TrajectoryLike]]) -> lpb.TrajectoryGroup:
    """One group as ``learn_pb2.TrajectoryGroup``."""
    if isinstance(group, lpb.TrajectoryGroup):
        return group
    if isinstance(group, (str, bytes, Mapping)) or not isinstance(group, Sequence):
        raise TypeError(f"a group must be a list of trajectories, not {type(group).__name__}")
    return lpb.TrajectoryGroup(trajectories=[trajectory_message(t) for t in group])


def group_operations_json(ops: GroupOperations) -> str:
    """One group's operations as the JSON text ConsolidateOperations reads (text is sent as it is)."""
    if isinstance(ops, str):
        return ops
    return json.dumps([dict(op) if isinstance(op, Mapping) else op for op in ops], ensure_ascii=False, default=str)




class _Plan(NamedTuple):
    """One call: the RPC and its request (never retried)."""

    rpc: str
    request: Any


def _learn(
    bank: str,
    groups: Sequence[Any],
    max_operations: Optional[int],
    use_groundtruth: Optional[bool],
    variation: Union[None, int, str],
    mode: Union[None, int, str],
    dry_run: bool,
    expected_version: Optional[int],
) -> _Plan:
    if isinstance(groups, (str, bytes, Mapping)):
        raise TypeError("groups must be a list of groups (each a list of trajectories)")
    req = msg(
        lpb.LearnFromGroupRequest,
        bank=bank,
        groups=[trajectory_group(g) for g in groups],
        max_operations=max_operations,
        use_groundtruth=use_groundtruth,
        variation=variation_rule(variation),
        mode=learn_mode(mode),
        dry_run=bool(dry_run),
        expected_version=expected_version,
    )
    return _Plan("LearnFromGroup", req)


def _summarize(trajectory: TrajectoryLike, use_groundtruth: Optional[bool]) -> _Plan:
    req = msg(lpb.SummarizeTrajectoryRequest, trajectory=trajectory_message(trajectory), use_groundtruth=use_groundtruth)
    return _Plan("SummarizeTrajectory", req)


def _extract(
    trajectories: Sequence[TrajectoryLike],
    experiences: str,
    max_operations: Optional[int],
    use_groundtruth: Optional[bool],
    variation: Union[None, int, str],
    mode: Union[None, int, str],
) -> _Plan:
    req = msg(
        lpb.ExtractGroupOperationsRequest,
        trajectories=list(trajectory_group(trajectories).trajectories),
        experiences=experiences or "",
        max_operations=max_operations,
        use_groundtruth=use_groundtruth,
        variation=variation_rule(variation),
        mode=learn_mode(mode),
    )
    return _Plan("ExtractGroupOperations", req)


def _consolidate(group_operations: Sequence[GroupOperations], experiences: str) -> _Plan:
    if isinstance(group_operations, (str, bytes, Mapping)):
        raise TypeError("group_operations must be a list with one entry (a JSON array or a list of dicts) per group")
    req = lpb.ConsolidateOperationsRequest(
        group_operations_json=[group_operations_json(g) for g in group_operations], experiences=experiences or ""
    )
    return _Plan("ConsolidateOperations", req)


class LearnMixin:
    """The ``Learn`` calls of ``MemgymClient`` (blocking). Needs ``self._call`` and the stub ``self.learn``."""

    learn: Any
    _call: Any

    def _learn(self, plan: _Plan, timeout: Optional[float]) -> Any:
        rpc = getattr(self.learn, plan.rpc)
        return self._call(f"Learn/{plan.rpc}", rpc, plan.request, idempotent=False, timeout=timeout, retry=False)

    def learn_from_group(
        self,
        bank: str,
        groups: Sequence[Any],
        *,
        max_operations: Optional[int] = None,
        use_groundtruth: Optional[bool] = None,
        variation: Union[None, int, str] = None,
        mode: Union[None, int, str] = None,
        dry_run: bool = False,
        expected_version: Optional[int] = None,
        timeout: Optional[float] = None,
    ) -> lpb.LearnFromGroupResponse:
        """The Training-Free GRPO design's three stages on ``groups`` and the plan applied to the experience bank ``bank``.

        Summarises every trajectory without a ``summary`` (of the groups with reward variation), extracts
        at most ``max_operations`` (default 3, 1 to 32) operations per such group against the library as
        read, consolidates them into one plan and applies it at the version read (ABORTED if the bank
        changed meanwhile; nothing is overwritten). ``use_groundtruth`` defaults to True; ``variation``:
        "spread" (default: the rewards differ) or "mean_between" (0 < mean < 1); ``mode``: "three_stage"
        (default) or "four_stage" (a critique, then a per-group update). ``dry_run`` returns the plan
        without writing. The reply has one ``groups`` entry per group (``summaries``, ``operations_json``,
        ``rejected``, ``confidence``, ``skipped``), the ``plan_json``, ``fallback`` (when the consolidation
        failed and the plan is the groups' operations flattened), the per-operation ``results``,
        ``applied`` and the bank's ``version``. Never retried.
        """
        plan = _learn(bank, groups, max_operations, use_groundtruth, variation, mode, dry_run, expected_version)
        return self._learn(plan, timeout)

    def summarize_trajectory(
        self, trajectory: TrajectoryLike, *, use_groundtruth: Optional[bool] = None, timeout: Optional[float] = None
    ) -> lpb.SummarizeTrajectoryResponse:
        """Stage 1: ``.summary`` is the trajectory as numbered steps. An unusable reply is UNAVAILABLE (as
        the LLM's other failures). Never retried."""
        return self._learn(_summarize(trajectory, use_groundtruth), timeout)

    def extract_group_operations(
        self,
        trajectories: Sequence[TrajectoryLike],
        experiences: str = "",
        *,
        max_operations: Optional[int] = None,
        use_groundtruth: Optional[bool] = None,
        variation: Union[None, int, str] = None,
        mode: Union[None, int, str] = None,
        timeout: Optional[float] = None,
    ) -> lpb.ExtractGroupOperationsResponse:
        """Stage 2 on one group against ``experiences`` (the Training-Free GRPO design's ``"[G0]. text"`` lines, as
        ``format_for_prompt`` renders them). ``.operations_json`` is a JSON array in the Training-Free GRPO design's vocabulary
        ("[]" with ``.skipped`` "no reward variation" when the rewards do not vary: no LLM call is made);
        ``.rejected`` explains each unusable operation of the reply; an unusable reply is ``.skipped``.
        Trajectories without a summary are shown as "(no summary)". Never retried."""
        return self._learn(_extract(trajectories, experiences, max_operations, use_groundtruth, variation, mode), timeout)

    def consolidate_operations(
        self, group_operations: Sequence[GroupOperations], experiences: str = "", *, timeout: Optional[float] = None
    ) -> lpb.ConsolidateOperationsResponse:
        """Stage 3: each group's operations (a JSON array, or a list of dicts, per group) consolidated
        against ``experiences`` into ``.operations_json``. When the LLM's plan is unusable, ``.fallback``
        says why and the plan is the groups' operations flattened (the Training-Free GRPO design's fallback). Never retried."""
        return self._learn(_consolidate(group_operations, experiences), timeout)


class AsyncLearnMixin:
    """The ``Learn`` calls of ``AsyncMemgymClient``, as coroutines; see ``LearnMixin`` for each."""

    learn: Any
    _call: Any

    async def _learn(self, plan: _Plan, timeout: Optional[float]) -> Any:
        rpc = getattr(self.learn, plan.rpc)
        return await self._call(f"Learn/{plan.rpc}", rpc, plan.request, idempotent=False, timeout=timeout, retry=False)

    async def learn_from_group(
        self,
        bank: str,
        groups: Sequence[Any],
        *,
        max_operations: Optional[int] = None,
        use_groundtruth: Optional[bool] = None,
        variation: Union[None, int, str] = None,
        mode: Union[None, int, str] = None,
        dry_run: bool = False,
        expected_version: Optional[int] = None,
        timeout: Optional[float] = None,
    ) -> lpb.LearnFromGroupResponse:
        """See ``MemgymClient.learn_from_group`` (never retried)."""
        plan = _learn(bank, groups, max_operations, use_groundtruth, variation, mode, dry_run, expected_version)
        return await self._learn(plan, timeout)

    async def summarize_trajectory(
        self, trajectory: TrajectoryLike, *, use_groundtruth: Optional[bool] = None, timeout: Optional[float] = None
    ) -> lpb.SummarizeTrajectoryResponse:
        """See ``MemgymClient.summarize_trajectory`` (never retried)."""
        return await self._learn(_summarize(trajectory, use_groundtruth), timeout)

    async def extract_group_operations(
        self,
        trajectories: Sequence[TrajectoryLike],
        experiences: str = "",
        *,
        max_operations: Optional[int] = None,
        use_groundtruth: Optional[bool] = None,
        variation: Union[None, int, str] = None,
        mode: Union[None, int, str] = None,
        timeout: Optional[float] = None,
    ) -> lpb.ExtractGroupOperationsResponse:
        """See ``MemgymClient.extract_group_operations`` (never retried)."""
        return await self._learn(
            _extract(trajectories, experiences, max_operations, use_groundtruth, variation, mode), timeout
        )

    async def consolidate_operations(
        self, group_operations: Sequence[GroupOperations], experiences: str = "", *, timeout: Optional[float] = None
    ) -> lpb.ConsolidateOperationsResponse:
        """See ``MemgymClient.consolidate_operations`` (never retried)."""
        return await self._learn(_consolidate(group_operations, experiences), timeout)
