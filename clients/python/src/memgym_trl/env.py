"""``MemgymTRLEnv``: one memgym episode per TRL rollout, the six memgym tools as methods.

What TRL 1.16 does with the class (``trl/trainer/grpo_trainer.py``):

- ``__init__`` builds one instance with **no arguments** and walks
  ``inspect.getmembers(type(instance), predicate=inspect.isfunction)`` (l.679-689): ``reset`` is required,
  ``get_reward`` is optional (a reward column named after the class, weight 1; l.704-728), and **every other
  function whose name does not start with ``_`` is a tool**. So this class has exactly ``reset``,
  ``get_reward`` and the six tools as public functions; everything else is ``_private``.
- Instances are pooled and reused ("construct once, reset often"; l.2343-2358); for each rollout it calls
  ``reset(**row)`` with the whole dataset row (l.2386-2390) and appends a returned string to the last prompt
  message with no separator (l.2391-2398), so ``reset`` returns ``"\\n\\n" + question``.
- A tool call runs ``method(**arguments)``; an exception becomes ``{"error": str(exception)}`` for the model
  (l.1980-1986), and any other result ``str(result)`` (l.2009-2012).

The tool methods' names, parameters (types, enums, the required set) and descriptions are those of the
server's ``ListTools``, written so that ``transformers.utils.get_json_schema`` gives them back (the
protocols test tier checks it against the real server): an optional parameter is ``Optional[...] = None``
(the schema adds ``"nullable": true`` to it) and ``None`` arguments are not sent.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Literal, Mapping, Optional, Tuple

from memgym import MemgymClient, MemgymError
from memgym.client import DEFAULT_ADDRESS
from memgym_verl.episode import new_episode_id, row_create_kwargs

#: The row keys that open an episode (``CreateEpisode``'s fields); any other key of a row is ignored.
ROW_KEYS = ("question_id", "conversation_id", "seed", "max_steps", "evaluator", "include_adversarial")

MemoryType = Literal["episodic", "semantic", "procedural"]


class ToolCallError(Exception):
    """The server refused a tool call; ``str()`` is the server's message, which names the offending field.

    TRL hands ``{"error": str(exception)}`` back to the model, so the message is the server's text alone.

    Attributes:
        code: the gRPC status code (``grpc.StatusCode``), e.g. ``INVALID_ARGUMENT``.
        details: the server's message.
    """

    def __init__(self, code: Any, details: str):
        super().__init__(details)
        self.code = code
        self.details = details


def _first(sources: Tuple[Mapping[str, Any], ...], key: str) -> Any:
    for source in sources:
        value = source.get(key)
        if value is not None and value != "":
            return value
    return None


def _flag(key: str, value: Any) -> bool:
    """A boolean column: a bool, 0/1, or "true"/"false" (any case); anything else is refused by name."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0"):
        return value.strip().lower() in ("true", "1")
    raise ValueError(f"memgym: {key} must be a boolean, got {value!r:.40}")


def row_episode_kwargs(row: Mapping[str, Any]) -> Tuple[str, Dict[str, Any]]:
    """``(question_id, create_episode keyword arguments)`` of a dataset row.

    Each key of ``ROW_KEYS`` is read from the row itself, else from ``row["extra_info"]``, else from
    ``row["extra_info"]["tools_kwargs"][tool]["create_kwargs"]`` (where ``memgym dataset verl`` writes them;
    also a top-level ``tools_kwargs``); ``None`` and ``""`` count as absent. Other keys (``prompt``,
    ``reward_model``, ...) are ignored.

    Args:
        row: one dataset row, as TRL passes it to ``reset``.

    Returns:
        The question id and the other ``ROW_KEYS`` found, with ``seed`` and ``max_steps`` as ``int`` and
        ``include_adversarial`` as ``bool``.

    Raises:
        ValueError: no source has a question id (gRPC ``CreateEpisode`` needs one).
    """
    extra = row.get("extra_info")
    extra = extra if isinstance(extra, Mapping) else {}
    tools_kwargs = extra.get("tools_kwargs") or row.get("tools_kwargs")
    sources = (row, extra, row_create_kwargs(tools_kwargs if isinstance(tools_kwargs, Mapping) else None))
    question_id = _first(sources, "question_id")
    if question_id is None:
        raise ValueError(
            "memgym: the dataset row has no question_id (looked at the row, extra_info and "
            f"extra_info.tools_kwargs.<tool>.create_kwargs; row keys: {sorted(row)}). "
            "Build the dataset with `memgym dataset verl`."
        )
    kwargs: Dict[str, Any] = {}
    for key in ROW_KEYS[1:]:
        value = _first(sources, key)
        if value is None:
            continue
        if key in ("seed", "max_steps"):
            value = int(value)
        elif key == "include_adversarial":
            value = _flag(key, value)
        else:
            value = str(value)
        kwargs[key] = value
    return str(question_id), kwargs


class MemgymTRLEnv:
    """A memgym episode as a TRL environment: ``GRPOTrainer(environment_factory=MemgymTRLEnv)``.

    Constructible with no arguments (the server address is ``$MEMGYM_ADDRESS``, else 127.0.0.1:50051);
    for other settings pass ``functools.partial(MemgymTRLEnv, address=..., max_steps=...)`` as the factory.
    Each instance holds one gRPC connection and at most one open episode: ``reset`` closes the previous one
    and opens the row's. Public methods: ``reset``, ``get_reward`` and the six tools.

    Attributes:
        address: the memgym server address.
        episode_id: the open episode's id (None before the first ``reset``).
        question: the open episode's question (None before the first ``reset``).
        step_metrics: each tool call's ``CallToolResponse.metrics`` of the open episode, in order (emptied
            by ``reset``), for a callback or reward function that logs env metrics (TRL has no channel
            for them).
        score_metrics: ``ScoreEpisodeResponse.metrics`` once ``get_reward`` has scored the episode.
    """

    def __init__(
        self,
        address: Optional[str] = None,
        *,
        timeout: float = 30.0,
        max_steps: Optional[int] = None,
        evaluator: Optional[str] = None,
    ):
        """Connects to the server (the channel is opened lazily by gRPC; no RPC is made here).

        Args:
            address: host:port of ``memgym serve``; default ``$MEMGYM_ADDRESS``, else 127.0.0.1:50051.
            timeout: deadline of every RPC, in seconds.
            max_steps: the step budget of episodes whose row does not set one (default: the server's).
            evaluator: the evaluator of episodes whose row does not set one (default: the server's):
                "answer-phrase", "answer-recall", "llm-f1" or "llm-judge".
        """
        self.address = address or os.environ.get("MEMGYM_ADDRESS") or DEFAULT_ADDRESS
        self.episode_id: Optional[str] = None
        self.question: Optional[str] = None
        self.step_metrics: List[Dict[str, float]] = []
        self.score_metrics: Dict[str, float] = {}
        self._defaults: Dict[str, Any] = {}
        if max_steps is not None:
            self._defaults["max_steps"] = int(max_steps)
        if evaluator is not None:
            self._defaults["evaluator"] = evaluator
        self._client: Optional[MemgymClient] = MemgymClient(self.address, timeout=timeout)

    # -- the TRL protocol ----------------------------------------------------------------------
    def reset(self, **row: Any) -> str:
        """Closes the previous episode (if any) and opens one for the dataset row.

        Args:
            **row: the dataset row; see ``row_episode_kwargs`` for the keys read (a question id is
                required).

        Returns:
            ``"\\n\\n"`` followed by the episode's question (TRL appends it to the prompt's last message).
        """
        question_id, kwargs = row_episode_kwargs(row)
        self._close_episode()
        kwargs = {**self._defaults, **kwargs}
        episode_id = new_episode_id({"question_id": question_id})
        created = self._rpc().create_episode(question_id, episode_id=episode_id, **kwargs)
        # The server's id: the same, or behind a proxy of replicas, the id with its replica's name in front.
        self.episode_id = created.episode_id or episode_id
        self.question = created.question
        self.step_metrics, self.score_metrics = [], {}
        return "\n\n" + created.question

    def get_reward(self) -> float:
        """The episode's reward: ``ScoreEpisode`` (idempotent; the first call finalises the episode).

        Returns:
            The reward of the open episode.
        """
        if self.episode_id is None:
            raise RuntimeError("MemgymTRLEnv.get_reward before reset: no episode is open")
        scored = self._rpc().score_episode(self.episode_id)
        self.score_metrics = dict(scored.metrics)
        return float(scored.reward)

    # -- the six tools (names, parameters and descriptions of the server's ListTools) ---------------
    def search_memory(
        self,
        query: str,
        top_k: Optional[int] = None,
        memory_type: Optional[MemoryType] = None,
        speaker: Optional[str] = None,
        session: Optional[int] = None,
        threshold: Optional[float] = None,
    ) -> str:
        """Search memories by meaning. Returns lines [id score] text (evidence), best first. Filters are optional.

        Args:
            query: What to look for.
            top_k: Results, 1-50 (default 5).
            memory_type: Only this type.
            speaker: Only this speaker.
            session: Only this session number.
            threshold: Minimum similarity, 0-1.
        """
        return self._tool(
            "search_memory",
            query=query,
            top_k=top_k,
            memory_type=memory_type,
            speaker=speaker,
            session=session,
            threshold=threshold,
        )

    def manage_memory(
        self,
        operation: Literal["create", "update"],
        content: str,
        memory_id: Optional[str] = None,
        memory_type: Optional[MemoryType] = None,
        speaker: Optional[str] = None,
        source: Optional[str] = None,
    ) -> str:
        """Create a memory, or update the text of one (its id and evidence stay).

        Args:
            operation: create or update.
            content: The memory text.
            memory_id: The memory to update, as a search or sample result showed it.
            memory_type: Type (create: default semantic).
            speaker: Who it is about.
            source: Where it comes from.
        """
        return self._tool(
            "manage_memory",
            operation=operation,
            content=content,
            memory_id=memory_id,
            memory_type=memory_type,
            speaker=speaker,
            source=source,
        )

    def delete_memory(
        self, memory_id: Optional[str] = None, memory_ids: Optional[List[str]] = None, reason: Optional[str] = None
    ) -> str:
        """Delete memory_id or memory_ids; nothing is deleted if any id is unknown.

        Args:
            memory_id: Id, as a search or sample result showed it.
            memory_ids: List of ids.
            reason: Why.
        """
        return self._tool("delete_memory", memory_id=memory_id, memory_ids=memory_ids, reason=reason)

    def sample_memory(
        self,
        k: Optional[int] = None,
        strategy: Optional[Literal["random", "diverse", "recent"]] = None,
        memory_type: Optional[MemoryType] = None,
    ) -> str:
        """Show k memories: random, diverse (spread by meaning) or recent.

        Args:
            k: 1-50 (default 3).
            strategy: Default random.
            memory_type: Only this type.
        """
        return self._tool("sample_memory", k=k, strategy=strategy, memory_type=memory_type)

    def merge_memory(
        self,
        memory_ids: List[str],
        strategy: Literal["summarize", "concatenate", "extract_common"],
        content: Optional[str] = None,
    ) -> str:
        """Merge 2-5 memories into one that keeps their evidence; the originals are removed.

        Args:
            memory_ids: List of 2-5 ids.
            strategy: summarize: the sentences covering the content; concatenate: all distinct sentences;
                extract_common: what all share.
            content: Merged text (overrides the strategy).
        """
        return self._tool("merge_memory", memory_ids=memory_ids, strategy=strategy, content=content)

    def split_memory(
        self,
        memory_id: str,
        split_criteria: Literal["temporal", "thematic", "speaker"],
        max_parts: Optional[int] = None,
        parts: Optional[List[str]] = None,
    ) -> str:
        """Split one memory into 2..max_parts focused memories that keep its evidence.

        Args:
            memory_id: Id, as a search or sample result showed it.
            split_criteria: At time expressions, by topic, or by person.
            max_parts: 2-5 (default 3).
            parts: Part texts to use instead (list).
        """
        return self._tool(
            "split_memory", memory_id=memory_id, split_criteria=split_criteria, max_parts=max_parts, parts=parts
        )

    # -- helpers (private: TRL would expose any public function as a tool) ----------------------
    def _rpc(self) -> MemgymClient:
        if self._client is None:
            raise RuntimeError("MemgymTRLEnv is closed")
        return self._client

    def _tool(self, name: str, **arguments: Any) -> str:
        """Calls tool ``name`` of the open episode with the non-None ``arguments``; returns the compact text."""
        if self.episode_id is None:
            raise RuntimeError(f"{name} before reset: no episode is open")
        try:
            text, resp = self._rpc().call_tool(
                self.episode_id, name, {k: v for k, v in arguments.items() if v is not None}
            )
        except MemgymError as err:
            raise ToolCallError(err.code, err.details) from None
        self.step_metrics.append(dict(resp.metrics))
        return text

    def _close_episode(self) -> None:
        """Closes the open episode, if any (an episode the server already ended or reaped is fine)."""
        episode_id, self.episode_id, self.question = self.episode_id, None, None
        if episode_id is None or self._client is None:
            return
        try:
            self._client.close_episode(episode_id)
        except MemgymError:
            pass

    def _close(self) -> None:
        """Closes the open episode and the connection; the instance is unusable afterwards."""
        try:
            self._close_episode()
        finally:
            client, self._client = self._client, None
            if client is not None:
                client.close()

    def __enter__(self) -> "MemgymTRLEnv":
        return self

    def __exit__(self, *exc: Any) -> None:
        self._close()

    def __del__(self) -> None:
        try:
            self._close()
        except Exception:  # interpreter shutdown: the modules may be gone already
            pass

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.address!r}, episode_id={self.episode_id!r})"
