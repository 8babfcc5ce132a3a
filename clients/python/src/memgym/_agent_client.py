"""The ``AgentMemory`` RPCs (``memgym.v1.AgentMemory``, ``proto/memgym/v1/agent.proto``) as client methods.

Why this exists: the agent-memory design's cross-episode agent memory (record each finished episode, inject the
"## MEMORY FROM PAST EPISODES" block into the next episode's prompt, consolidate every 20 episodes) is
served by memgym on "agent banks". A trainer needs those calls on the same channel as the episode and
bank calls, with the same deadline, retry policy and error mapping. They live here, as two mixins
(blocking and asyncio) over one set of request builders, like the ``Banks`` calls in
``memgym._banks_client``, so the two clients cannot drift apart.

Each method is named after its RPC in snake_case (``GetAgentSummary`` is ``get_agent_summary``), takes
the request's fields as keyword arguments (``None`` leaves an ``optional`` field unset, so the server's
default applies) and returns the response message (``memgym.v1.agent_pb2``). Errors are
``memgym.MemgymError`` with the gRPC code: NOT_FOUND for an unknown bank, FAILED_PRECONDITION for a bank
of another kind, INVALID_ARGUMENT naming the field, ABORTED for a stale ``expected_version``, DATA_LOSS
for a stored memory that does not read. Retries on ``UNAVAILABLE`` only where a repeat changes nothing:

- reads are retried: ``BuildMemoryContext``, ``GetAgentSummary``, ``ExportAgentMemory``;
- ``create_agent_bank`` (``Banks.CreateBank`` with kind AGENT) is retried only with ``if_not_exists``;
- writes are sent once: ``RecordEpisode`` (a repeat would log the episode twice), ``MaybeConsolidate``
  and ``ImportAgentMemory`` (every write moves the bank's ``version``).
"""

from __future__ import annotations

import json
from typing import Any, Mapping, NamedTuple, Optional, Sequence, Union

from memgym._requests import msg, pick
from memgym.v1 import agent_pb2 as apb
from memgym.v1 import banks_pb2 as bpb

#: Modes accepted by ``maybe_consolidate(mode=...)`` (names as in agent.proto, lower case).
CONSOLIDATION_MODES = {
    "auto": apb.CONSOLIDATION_MODE_AUTO,
    "heuristic": apb.CONSOLIDATION_MODE_HEURISTIC,
    "llm": apb.CONSOLIDATION_MODE_LLM,
}

#: The fields of a mistake card (``MistakeCardInput``), as the agent-memory design's card dicts name them.
CARD_FIELDS = ("mistake_type", "task_id", "worker_id", "bad_decision", "correct_decision", "evidence", "lesson")

#: A mistake card: a ``MistakeCardInput`` or a dict with (some of) ``CARD_FIELDS``.
MistakeCard = Union[apb.MistakeCardInput, Mapping[str, Any]]


def _mode(value: Union[None, int, str]) -> int:
    return pick(value, CONSOLIDATION_MODES, ("consolidation-mode-",), "consolidation mode", apb.CONSOLIDATION_MODE_AUTO)


def mistake_card(card: MistakeCard) -> apb.MistakeCardInput:
    """A card as ``MistakeCardInput``. From a dict, as the agent-memory design reads one: a missing or falsy value
    (``None``, ``""``, ``0``) is absent, so the server's default applies (type "unknown_mistake", the
    episode's task, lesson "Avoid repeating this failure."); any other value is sent as ``str(value)``;
    keys other than ``CARD_FIELDS`` are ignored, as the seed ignores them."""
    if isinstance(card, apb.MistakeCardInput):
        return card
    if not isinstance(card, Mapping):
        raise TypeError(f"a mistake card must be a dict or MistakeCardInput, not {type(card).__name__}")
    return apb.MistakeCardInput(**{f: str(card[f]) for f in CARD_FIELDS if card.get(f)})


class _Plan(NamedTuple):
    """One call: the service and RPC, its request, and whether a retry is safe."""

    service: str
    rpc: str
    request: Any
    idempotent: bool


def _create_agent_bank(name: str, if_not_exists: bool) -> _Plan:
    req = bpb.CreateBankRequest(name=name, kind=bpb.BANK_KIND_AGENT, if_not_exists=bool(if_not_exists))
    return _Plan("Banks", "CreateBank", req, bool(if_not_exists))


def _record(
    bank: str,
    task_id: Optional[str],
    score: Optional[float],
    steps: Optional[int],
    trajectory_summary: str,
    mistakes: Sequence[str],
    successes: Sequence[str],
    mistake_cards: Sequence[MistakeCard],
    expected_version: Optional[int],
) -> _Plan:
    req = msg(
        apb.RecordEpisodeRequest,
        bank=bank,
        task_id=task_id,
        score=float(score) if score is not None else None,
        steps=int(steps) if steps is not None else None,
        trajectory_summary=trajectory_summary or "",
        mistakes=list(mistakes or ()),
        successes=list(successes or ()),
        mistake_cards=[mistake_card(c) for c in mistake_cards or ()],
        expected_version=expected_version,
    )
    return _Plan("AgentMemory", "RecordEpisode", req, False)


def _context(bank: str, task_id: Optional[str], max_rules: Optional[int], max_recent: Optional[int]) -> _Plan:
    req = msg(apb.BuildMemoryContextRequest, bank=bank, task_id=task_id, max_rules=max_rules, max_recent=max_recent)
    return _Plan("AgentMemory", "BuildMemoryContext", req, True)


def _consolidate(bank: str, mode: Union[None, int, str], force: bool, expected_version: Optional[int]) -> _Plan:
    req = msg(
        apb.MaybeConsolidateRequest, bank=bank, mode=_mode(mode), force=bool(force), expected_version=expected_version
    )
    return _Plan("AgentMemory", "MaybeConsolidate", req, False)


def _import(bank: str, data: Union[str, Mapping[str, Any]], replace: bool, expected_version: Optional[int]) -> _Plan:
    text = data if isinstance(data, str) else json.dumps(dict(data), ensure_ascii=False)
    req = msg(
        apb.ImportAgentMemoryRequest, bank=bank, data=text, replace=bool(replace), expected_version=expected_version
    )
    return _Plan("AgentMemory", "ImportAgentMemory", req, False)


def _summary(bank: str) -> _Plan:
    return _Plan("AgentMemory", "GetAgentSummary", apb.GetAgentSummaryRequest(bank=bank), True)


def _export(bank: str) -> _Plan:
    return _Plan("AgentMemory", "ExportAgentMemory", apb.ExportAgentMemoryRequest(bank=bank), True)


def _stub(client: Any, service: str) -> Any:
    return client.agent if service == "AgentMemory" else client.banks


class AgentMixin:
    """The ``AgentMemory`` calls of ``MemgymClient`` (blocking). Needs ``self._call`` and the stubs
    ``self.agent`` and ``self.banks``."""

    agent: Any
    banks: Any
    _call: Any

    def _agent(self, plan: _Plan) -> Any:
        rpc = getattr(_stub(self, plan.service), plan.rpc)
        return self._call(f"{plan.service}/{plan.rpc}", rpc, plan.request, idempotent=plan.idempotent)

    def create_agent_bank(self, name: str, *, if_not_exists: bool = False) -> bpb.Bank:
        """Creates an agent bank (``Banks.CreateBank`` with kind AGENT) holding an empty memory.

        ALREADY_EXISTS for a taken name unless ``if_not_exists`` (then the existing bank is returned, and
        the call is retried: a repeat cannot create twice); FAILED_PRECONDITION when ``if_not_exists``
        meets a bank of another kind. Names: 1..64 of ``[A-Za-z0-9_.-]``, not starting with ``.``.
        """
        return self._agent(_create_agent_bank(name, if_not_exists))

    def record_episode(
        self,
        bank: str,
        *,
        task_id: Optional[str] = None,
        score: Optional[float] = None,
        steps: Optional[int] = None,
        trajectory_summary: str = "",
        mistakes: Sequence[str] = (),
        successes: Sequence[str] = (),
        mistake_cards: Sequence[MistakeCard] = (),
        expected_version: Optional[int] = None,
    ) -> apb.RecordEpisodeResponse:
        """The agent-memory design's ``record_episode``: logs a finished episode; never retried (a repeat would log it twice).

        ``task_id`` defaults to "unknown", ``score`` to 0.0 (it must be finite: INVALID_ARGUMENT on
        ``score`` otherwise), ``steps`` to 0. Successes become ``[WORKS] …`` rules at score >= 0.85,
        mistakes ``[AVOID] …`` rules below 0.50; blank ones are ignored. ``mistake_cards`` are
        ``MistakeCardInput`` messages or the seed's card dicts (see ``mistake_card``). The reply has the
        bank's new ``version``, ``total_episodes``, the ``rules_added`` and one ``cards`` result per card.
        """
        return self._agent(
            _record(
                bank, task_id, score, steps, trajectory_summary, mistakes, successes, mistake_cards, expected_version
            )
        )

    def build_memory_context(
        self,
        bank: str,
        task_id: Optional[str] = None,
        *,
        max_rules: Optional[int] = None,
        max_recent: Optional[int] = None,
    ) -> apb.BuildMemoryContextResponse:
        """The agent-memory design's ``build_memory_context``: ``.context`` is the "## MEMORY FROM PAST EPISODES" block,
        byte for byte as the seed renders it ("" when there is nothing to say).

        ``max_rules`` defaults to 5 and ``max_recent`` to 3; 0 means all, as the seed's ``[-0:]`` does.
        """
        return self._agent(_context(bank, task_id, max_rules, max_recent))

    def maybe_consolidate(
        self,
        bank: str,
        *,
        mode: Union[None, int, str] = None,
        force: bool = False,
        expected_version: Optional[int] = None,
    ) -> apb.MaybeConsolidateResponse:
        """The agent-memory design's ``maybe_consolidate_memory``: when 20 episodes came since the last consolidation (or
        with ``force``), turns the episode log into global rules; ``.ran`` says whether it did.

        ``mode``: "auto" (default: the server's LLM when it has one, else the heuristic's
        ``[HIGH SCORE x.xx] …`` rules), "heuristic", or "llm" (FAILED_PRECONDITION on a server without an
        LLM). An LLM reply without rules changes nothing and is reported in ``.error``. Never retried.
        """
        return self._agent(_consolidate(bank, mode, force, expected_version))

    def get_agent_summary(self, bank: str) -> apb.AgentSummary:
        """The agent-memory design's ``memory_summary`` (plus ``episodes_by_task`` and the bank's ``version``)."""
        return self._agent(_summary(bank))

    def import_agent_memory(
        self,
        bank: str,
        data: Union[str, Mapping[str, Any]],
        *,
        replace: bool = False,
        expected_version: Optional[int] = None,
    ) -> apb.ImportAgentMemoryResponse:
        """Loads the agent-memory design's document (``agent_memory.json`` text, or the dict) into ``bank``, creating it.

        Missing keys take their defaults (older documents without ``mistake_cards`` load). A bank that
        already holds a memory is FAILED_PRECONDITION unless ``replace``; a document that does not read
        is INVALID_ARGUMENT naming the field. Never retried.
        """
        return self._agent(_import(bank, data, replace, expected_version))

    def export_agent_memory(self, bank: str) -> apb.ExportAgentMemoryResponse:
        """The bank's memory as the agent-memory design's JSON document (``.data``)."""
        return self._agent(_export(bank))


class AsyncAgentMixin:
    """The ``AgentMemory`` calls of ``AsyncMemgymClient``, as coroutines; see ``AgentMixin`` for each."""

    agent: Any
    banks: Any
    _call: Any

    async def _agent(self, plan: _Plan) -> Any:
        rpc = getattr(_stub(self, plan.service), plan.rpc)
        return await self._call(f"{plan.service}/{plan.rpc}", rpc, plan.request, idempotent=plan.idempotent)

    async def create_agent_bank(self, name: str, *, if_not_exists: bool = False) -> bpb.Bank:
        """See ``MemgymClient.create_agent_bank``."""
        return await self._agent(_create_agent_bank(name, if_not_exists))

    async def record_episode(
        self,
        bank: str,
        *,
        task_id: Optional[str] = None,
        score: Optional[float] = None,
        steps: Optional[int] = None,
        trajectory_summary: str = "",
        mistakes: Sequence[str] = (),
        successes: Sequence[str] = (),
        mistake_cards: Sequence[MistakeCard] = (),
        expected_version: Optional[int] = None,
    ) -> apb.RecordEpisodeResponse:
        """See ``MemgymClient.record_episode`` (never retried)."""
        return await self._agent(
            _record(
                bank, task_id, score, steps, trajectory_summary, mistakes, successes, mistake_cards, expected_version
            )
        )

    async def build_memory_context(
        self,
        bank: str,
        task_id: Optional[str] = None,
        *,
        max_rules: Optional[int] = None,
        max_recent: Optional[int] = None,
    ) -> apb.BuildMemoryContextResponse:
        """See ``MemgymClient.build_memory_context``."""
        return await self._agent(_context(bank, task_id, max_rules, max_recent))

    async def maybe_consolidate(
        self,
        bank: str,
        *,
        mode: Union[None, int, str] = None,
        force: bool = False,
        expected_version: Optional[int] = None,
    ) -> apb.MaybeConsolidateResponse:
        """See ``MemgymClient.maybe_consolidate`` (never retried)."""
        return await self._agent(_consolidate(bank, mode, force, expected_version))

    async def get_agent_summary(self, bank: str) -> apb.AgentSummary:
        """See ``MemgymClient.get_agent_summary``."""
        return await self._agent(_summary(bank))

    async def import_agent_memory(
        self,
        bank: str,
        data: Union[str, Mapping[str, Any]],
        *,
        replace: bool = False,
        expected_version: Optional[int] = None,
    ) -> apb.ImportAgentMemoryResponse:
        """See ``MemgymClient.import_agent_memory`` (never retried)."""
        return await self._agent(_import(bank, data, replace, expected_version))

    async def export_agent_memory(self, bank: str) -> apb.ExportAgentMemoryResponse:
        """See ``MemgymClient.export_agent_memory``."""
        return await self._agent(_export(bank))
