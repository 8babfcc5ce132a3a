"""Drop-in replacement for the Training-Free GRPO design's ``SemanticExtractor`` and ``Trajectory`` (``semantic_extractor.py``),
backed by a memgym server's ``Learn`` service.

Why this exists: Training-Free GRPO code written against the Training-Free GRPO design runs the three extraction stages
(summarise each rollout, extract operations from each group's contrast, consolidate them) through an
LLM client of its own. Here the stages run on the memgym server, on the server's LLM endpoint
(``memgym serve --llm-base-url URL --llm-model NAME``), with the server's prompts, parsing, limits,
concurrency and cache; the library is edited by the bank calls (``memgym.banks.ExperienceManager``).
Code written against the seed switches by changing the imports::

    from memgym.banks import ExperienceManager
    from memgym.learn import SemanticExtractor, Trajectory

    experience_manager = ExperienceManager(checkpoint_path="./experiences.json")
    extractor = SemanticExtractor(None, max_operations=3)      # the server holds the LLM endpoint
    experiences = experience_manager.format_for_prompt()
    trajectories = [Trajectory(query, output, reward, gt) for output, reward in rollouts]
    for traj in trajectories:
        traj.summary = extractor.summarize_trajectory(traj)
    operations = extractor.extract_group_advantage(trajectories, experiences, use_groundtruth=True)
    if operations:
        experience_manager.apply_operations(operations)

or does all of it (and the consolidation, and the write at the version read) in one call:
``extractor.learn(experience_manager, [trajectories, ...])``.

**Server address.** As in ``memgym.banks``: ``address=`` (default ``$MEMGYM_ADDRESS``, else
``127.0.0.1:50051``), or ``client=`` to share a ``MemgymClient`` (it is then not closed by ``close``).

Where the seed's behaviour is not reproduced exactly, and why:

- **``llm_client`` is accepted and ignored.** The LLM is the server's (``--llm-base-url``); a server
  without one answers FAILED_PRECONDITION, raised as ``memgym.MemgymError``.
- **Stage failures of extraction and consolidation do not raise** (as the seed's
  ``RobustSemanticExtractor``): ``extract_group_advantage`` returns ``[]`` and says why in
  ``last_skipped``; ``consolidate_batch`` returns the groups' operations flattened (the server's
  fallback) and says why in ``last_fallback``. Errors of the call itself (no LLM endpoint, an invalid
  trajectory, the server unreachable) still raise ``MemgymError``: they are not a group to skip.
  ``summarize_trajectory`` raises on failure (UNAVAILABLE for an unusable reply), as the seed's does.
- **Operations the LLM got wrong are dropped one by one** with their reason (``last_rejected``), instead
  of failing the whole reply; ``{"option": "keep"}`` entries are dropped silently.
- **Rewards must be in [0, 1]** (INVALID_ARGUMENT naming the field), as the seed's ``Trajectory`` documents.
- **``consolidate_batch`` with no operations at all returns ``[]``** without asking the LLM.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Union

from memgym.banks import ADDRESS_ENV, ExperienceManager
from memgym.client import DEFAULT_ADDRESS, MemgymClient
from memgym.v1 import learn_pb2 as lpb

#: The Training-Free GRPO design's ``max_operations`` default.
DEFAULT_MAX_OPERATIONS = 3
#: The deadline of one call when the extractor opens its own client: a call makes one or many LLM
#: requests, and a CPU model answers one in seconds.
DEFAULT_TIMEOUT = 600.0


@dataclass
class Trajectory:
    """Single rollout trajectory (the Training-Free GRPO design's dataclass, field for field)."""

    query: str  # Input query/problem
    output: str  # Model-generated output
    reward: float  # Numerical reward (0-1)
    groundtruth: Optional[str] = None  # Ground truth answer
    summary: Optional[str] = None  # LLM-generated summary


def _operations(text: str) -> List[Dict[str, Any]]:
    ops = json.loads(text or "[]")
    return [dict(op) for op in ops] if isinstance(ops, list) else []


class SemanticExtractor:
    """The Training-Free GRPO design's ``SemanticExtractor`` on a memgym server: the three extraction stages of Training-Free GRPO.

    ``llm_client`` is accepted for the seed's signature and ignored: the stages run on the server's LLM
    endpoint (``memgym serve --llm-base-url URL --llm-model NAME``). ``max_operations`` (1 to 32) caps
    the operations per group. ``variation`` ("spread": the rewards differ, the seed's rule; or
    "mean_between") and ``mode`` ("three_stage", the seed's; or "four_stage") are sent with every
    extraction. ``address`` / ``client`` choose the server as in ``memgym.banks``; ``timeout`` is the
    deadline of each call when this object opens its own client.

    After each call, ``last_skipped`` (why ``extract_group_advantage`` returned no operations, "" when it
    did), ``last_fallback`` (why ``consolidate_batch`` returned the flattened operations, "" otherwise),
    ``last_rejected`` (operations of the LLM's reply that could not be used) and ``last_response`` (the
    server's reply) describe what happened.
    """

    def __init__(
        self,
        llm_client: Any = None,
        max_operations: int = DEFAULT_MAX_OPERATIONS,
        *,
        client: Optional[MemgymClient] = None,
        address: Optional[str] = None,
        timeout: float = DEFAULT_TIMEOUT,
        variation: Union[None, int, str] = None,
        mode: Union[None, int, str] = None,
    ):
        if client is not None and address is not None:
            raise ValueError("pass either address or client, not both")
        self.llm_client = llm_client  # ignored: the server holds the LLM endpoint
        self.max_operations = int(max_operations)
        self.variation = variation
        self.mode = mode
        self._owns_client = client is None
        self.client = (
            client
            if client is not None
            else MemgymClient(address or os.environ.get(ADDRESS_ENV) or DEFAULT_ADDRESS, timeout)
        )
        self.last_skipped = ""
        self.last_fallback = ""
        self.last_rejected: List[str] = []
        self.last_response: Any = None

    # -- the Training-Free GRPO design's API -------------------------------------------------------------------------
    def summarize_trajectory(self, trajectory: Any, use_groundtruth: bool = True) -> str:
        """Stage 1: the trajectory as numbered steps (``MemgymError`` when the LLM fails)."""
        resp = self.client.summarize_trajectory(trajectory, use_groundtruth=bool(use_groundtruth))
        self.last_response = resp
        return resp.summary

    def extract_group_advantage(
        self, trajectories: Sequence[Any], experiences: str, use_groundtruth: bool = True
    ) -> List[Dict[str, Any]]:
        """Stage 2: the group's operations (the Training-Free GRPO design's dicts: ``{"option": "add", "experience": ...}``,
        ``{"option": "modify", "experience": ..., "modified_from": "G17"}``) against ``experiences``
        (``format_for_prompt()``'s text). ``[]`` when the rewards do not vary, or when the stage failed
        (``last_skipped`` says which). The trajectories' ``summary`` fields are shown to the LLM."""
        resp = self.client.extract_group_operations(
            trajectories,
            experiences or "",
            max_operations=self.max_operations,
            use_groundtruth=bool(use_groundtruth),
            variation=self.variation,
            mode=self.mode,
        )
        self.last_response = resp
        self.last_skipped = resp.skipped
        self.last_rejected = list(resp.rejected)
        return [] if resp.skipped else _operations(resp.operations_json)

    def consolidate_batch(self, all_group_operations: Sequence[Sequence[Dict[str, Any]]], experiences: str) -> List[Dict[str, Any]]:
        """Stage 3: every group's operations consolidated against ``experiences`` into the final plan
        (which may also ``merge`` and ``delete``). When the LLM's plan is unusable, the groups' operations
        flattened (``last_fallback`` says why)."""
        groups = [list(g or ()) for g in all_group_operations]
        self.last_fallback, self.last_rejected = "", []
        if not any(groups):
            self.last_response = None
            return []
        resp = self.client.consolidate_operations(groups, experiences or "")
        self.last_response = resp
        self.last_fallback = resp.fallback
        self.last_rejected = list(resp.rejected)
        return _operations(resp.operations_json)

    # -- memgym's one-call version --------------------------------------------------------------
    def learn(
        self,
        bank: Union[str, ExperienceManager],
        groups: Sequence[Sequence[Any]],
        *,
        use_groundtruth: bool = True,
        dry_run: bool = False,
        expected_version: Optional[int] = None,
        **kwargs: Any,
    ) -> lpb.LearnFromGroupResponse:
        """All three stages and the write, in one ``LearnFromGroup`` call: ``groups`` (lists of
        trajectories) teach the experience bank ``bank`` (a name, or an ``ExperienceManager`` whose bank
        is used). The plan is applied at the version read (``MemgymError`` ABORTED if the bank changed
        meanwhile). Summaries the server wrote are copied into ``Trajectory`` objects that had none.
        ``kwargs`` go to ``MemgymClient.learn_from_group`` (``max_operations``, ``variation``, ``mode``
        default to this extractor's)."""
        name = bank.bank if isinstance(bank, ExperienceManager) else bank
        kwargs.setdefault("max_operations", self.max_operations)
        kwargs.setdefault("variation", self.variation)
        kwargs.setdefault("mode", self.mode)
        groups = [list(g) for g in groups]
        resp = self.client.learn_from_group(
            name, groups, use_groundtruth=bool(use_groundtruth), dry_run=dry_run, expected_version=expected_version, **kwargs
        )
        self.last_response = resp
        self.last_fallback = resp.fallback
        self.last_rejected = list(resp.rejected)
        self.last_skipped = ""
        for group, result in zip(groups, resp.groups):
            for t, summary in zip(group, result.summaries):
                if summary and isinstance(t, Trajectory) and t.summary is None:
                    t.summary = summary
        return resp

    # -- housekeeping ---------------------------------------------------------------------------
    def close(self) -> None:
        """Closes the client's channel if this extractor opened it."""
        if self._owns_client and getattr(self, "client", None) is not None:
            self.client.close()

    def __enter__(self) -> "SemanticExtractor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(max_operations={self.max_operations}, address={self.client.address!r})"


__all__ = ["DEFAULT_MAX_OPERATIONS", "SemanticExtractor", "Trajectory"]
