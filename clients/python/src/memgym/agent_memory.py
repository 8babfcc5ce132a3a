"""Drop-in replacement for the agent-memory design's cross-episode agent memory (``training/memory.py``) on a memgym server.

Why this exists: the seed keeps the agent's memory (episode log, scores, mistakes, successes, mistake
cards, ``[WORKS]`` / ``[AVOID]`` rules, consolidated global rules) in a dict it rewrites to a JSON file:
a crash mid-write loses it, a corrupt file is silently reset, and two trainers recording at once lose
episodes. Here the memory lives in a memgym *agent bank* (``memgym.v1.AgentMemory``): every record is
durable before it returns, concurrent records all land, and the prompt block is rendered by the server
byte for byte as the seed renders it. Code written against the seed switches by changing one import::

    from memgym.agent_memory import (
        load_agent_memory,
        save_agent_memory,
        record_episode,
        build_memory_context,
        maybe_consolidate_memory,
    )

    memory = load_agent_memory()                     # bank "agent_memory" (outputs/agent_memory.json)
    context_str = build_memory_context(memory)       # inject into the system prompt
    memory = record_episode(memory, {"task_id": "root_cause_analysis", "score": 0.82, "steps": 7,
                                     "trajectory_summary": "...", "mistakes": [...], "successes": [...]})
    save_agent_memory(memory)                        # optional: the bank is already durable

The functions keep the seed's names, arguments and return values. The ``memory`` they pass around is an
``AgentMemory``: a read-only mapping that carries the bank's name and a client, whose values are read
from the bank's exported seed document, so ``memory["total_episodes"]``, ``memory["global_rules"]`` or
``memory.get("task_rules", {})`` still work.

**Server address.** ``$MEMGYM_ADDRESS`` (read when the module first needs a client), else
``127.0.0.1:50051``. Call ``connect(address)`` (or ``connect(client=...)``) to choose it in code;
``load_agent_memory`` and ``new_agent_memory`` also take ``client=`` for one memory.

**Bank names.** ``load_agent_memory(path)`` uses the bank ``agent_bank_name(path)``: the file name
without its extension, every character outside ``[A-Za-z0-9_.-]`` replaced by ``_``, leading dots
removed, cut to 64 characters, ``"agent_memory"`` when nothing is left; so the default
``outputs/agent_memory.json`` is bank ``agent_memory``. Only the file name counts: ``runs/a/mem.json``
and ``runs/b/mem.json`` share bank ``mem``; pass ``bank=`` to keep them apart.

Where the seed's behaviour is not reproduced exactly, and why:

- **The file is read once, into a new bank.** If the bank does not exist yet (or has never been written)
  and ``path`` is a file, the file is imported (older documents without ``mistake_cards`` load). A bank
  that has been written is newer than any file (every write is durable), so the file is not read again.
- **A file that does not read is an error** (``MemgymError`` INVALID_ARGUMENT naming the field, nothing
  created), where the seed starts from an empty memory and its next save destroys the file.
- **``save_agent_memory`` writes the seed's file** (the bank's exported document, ``indent=2``) to
  ``path`` atomically (temporary file, fsync, ``os.replace``), so tools reading the seed's file keep
  working; ``path=None`` skips the file. The memory itself needs no save.
- **``maybe_consolidate_memory`` ignores ``api_key``**: the server decides (mode AUTO): its LLM when it
  was started with one (``--llm-base-url``), else the heuristic ``[HIGH SCORE x.xx] …`` rules. As in the
  seed, the file at ``path`` is written when a consolidation ran.
- **The mapping is read-only and live.** Each ``memory[key]`` reads the bank again (use
  ``memory.document()`` for one consistent snapshot); assigning to it raises ``TypeError``: change the
  memory through ``record_episode`` / ``maybe_consolidate_memory``. Two ``AgentMemory`` objects on one
  bank (in one process or several) see each other's episodes.
- **``new_agent_memory()`` creates a bank** with a fresh unique name (``agent-memory-<hex>``) on the
  server, since a memory here always lives in a bank; delete it with ``memory.client.delete_bank``.
- **Input fixes made by the server** (the book's "Agent memory"): a non-finite score is INVALID_ARGUMENT on
  ``score`` and nothing is recorded; blank mistakes and successes make no rules (``[WORKS] `` does not
  appear); a ``None`` summary counts as ""; the episode log is kept at 100 entries at every record.
  Here, ``mistakes=None`` counts as no mistakes; an explicit ``score=None`` still raises ``TypeError``
  before anything is sent, as in the seed.
- **The text rule** (the book's "Errors and limits"): control characters other than ``\\n`` and ``\\t`` (ESC,
  NUL, …), bidi overrides/isolates and U+2028/U+2029 are INVALID_ARGUMENT naming the field
  (``mistakes[1]``), and nothing is recorded; a lone surrogate is refused before sending; texts are stored
  NFC and trimmed (``" w"`` and ``"w"`` are one success). A line break is kept in the memory and written
  as ``\\n`` in ``build_memory_context``, so no recorded field can forge the block's headings or rules.
- **Missing and blank values**: ``steps=None`` is logged as 0 (the seed logs ``null``); a ``task_id`` of
  ``None`` or ``""`` is ``"unknown"`` (the seed keeps them as their own keys); card ``worker_id``,
  ``bad_decision`` and ``correct_decision`` of ``""``, ``0`` or ``False`` are ``None`` and numbers become
  strings; ``memory_summary`` lists tasks sorted by id (the seed: first appearance). A negative ``steps``
  raises ``ValueError`` before sending. The book's "Agent memory" lists each difference with its reason.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import uuid
from typing import Any, Dict, Iterator, List, Mapping, Optional, Union

import grpc

from memgym._agent_client import CARD_FIELDS
from memgym.banks import write_atomically
from memgym.client import DEFAULT_ADDRESS, MemgymClient
from memgym.errors import MemgymError
from memgym.v1 import agent_pb2 as apb

logger = logging.getLogger(__name__)

#: The seed's default file; its bank is ``"agent_memory"``.
DEFAULT_PATH = os.path.join("outputs", "agent_memory.json")
#: Environment variable naming the server when ``connect`` was not called.
ADDRESS_ENV = "MEMGYM_ADDRESS"
#: The bank used when the path leaves no usable name.
DEFAULT_BANK = "agent_memory"
# The seed's constants (the server applies them).
MAX_EPISODES_STORED = 100
MAX_RULES_PER_TASK = 10
CONSOLIDATION_EVERY = 20

PathLike = Union[str, "os.PathLike[str]"]

_NOT_BANK_CHARS = re.compile(r"[^A-Za-z0-9_.-]")
_lock = threading.Lock()
_client: Optional[MemgymClient] = None


def connect(
    address: Optional[str] = None, *, client: Optional[MemgymClient] = None, timeout: float = 30.0
) -> MemgymClient:
    """Sets the client the module's functions use from now on and returns it: ``client`` as given, else a
    new ``MemgymClient`` to ``address`` (default ``$MEMGYM_ADDRESS``, else ``127.0.0.1:50051``). Memories
    loaded before keep the client they were loaded with."""
    global _client
    if client is not None and address is not None:
        raise ValueError("pass either address or client, not both")
    if client is None:
        client = MemgymClient(address or os.environ.get(ADDRESS_ENV) or DEFAULT_ADDRESS, timeout)
    with _lock:
        _client = client
    return client


def default_client() -> MemgymClient:
    """The module's client (created on first use from ``$MEMGYM_ADDRESS``, else ``127.0.0.1:50051``)."""
    global _client
    with _lock:
        if _client is None:
            _client = MemgymClient(os.environ.get(ADDRESS_ENV) or DEFAULT_ADDRESS)
        return _client


def agent_bank_name(path: Optional[PathLike]) -> str:
    """The bank a memory file stands for: the file name without its extension, each character a bank name
    cannot hold replaced by ``_``, no leading ``.``, at most 64 characters; ``"agent_memory"`` when there is
    no path or nothing is left (``"outputs/agent_memory.json"`` → ``"agent_memory"``)."""
    if not path:
        return DEFAULT_BANK
    stem = os.path.splitext(os.path.basename(os.fspath(path)))[0]
    return _NOT_BANK_CHARS.sub("_", stem).lstrip(".")[:64] or DEFAULT_BANK


class AgentMemory(Mapping[str, Any]):
    """The seed's ``memory`` dict, on an agent bank: a read-only mapping over the bank's seed document.

    ``bank`` and ``client`` say where the memory lives; ``path`` is the file it was loaded for (or None).
    Each lookup reads the bank (``ExportAgentMemory``); ``document()`` returns one snapshot as a plain dict.
    ``last_record`` and ``last_consolidation`` hold the server's replies to the last ``record_episode`` and
    ``maybe_consolidate_memory`` made through this object.
    """

    def __init__(self, bank: str, client: MemgymClient, path: Optional[PathLike] = None):
        self.bank = bank
        self.client = client
        self.path = os.fspath(path) if path else None
        self.last_record: Optional[apb.RecordEpisodeResponse] = None
        self.last_consolidation: Optional[apb.MaybeConsolidateResponse] = None

    def document(self) -> Dict[str, Any]:
        """The memory now, as the agent-memory design's document (a new dict; changing it changes nothing on the server)."""
        return json.loads(self.client.export_agent_memory(self.bank).data)

    @property
    def version(self) -> int:
        """The bank's version (every write increments it)."""
        return self.client.get_agent_summary(self.bank).version

    def __getitem__(self, key: str) -> Any:
        return self.document()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.document())

    def __len__(self) -> int:
        return len(self.document())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, AgentMemory):
            return (self.bank, self.client.address) == (other.bank, other.client.address)
        if isinstance(other, Mapping):
            return self.document() == dict(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"AgentMemory(bank={self.bank!r}, address={self.client.address!r})"


def _memory(memory: Any) -> AgentMemory:
    if not isinstance(memory, AgentMemory):
        raise TypeError(
            f"expected the AgentMemory returned by memgym.agent_memory.load_agent_memory / new_agent_memory, "
            f"not {type(memory).__name__} (a seed memory dict can be loaded with client.import_agent_memory)"
        )
    return memory


def new_agent_memory(*, bank: Optional[str] = None, client: Optional[MemgymClient] = None) -> AgentMemory:
    """A fresh, empty memory: a new agent bank (``bank``, default ``agent-memory-<16 hex>``).

    ALREADY_EXISTS when ``bank`` names an existing bank: a new memory is always empty.
    """
    c = client if client is not None else default_client()
    name = bank or f"agent-memory-{uuid.uuid4().hex[:16]}"
    c.create_agent_bank(name)
    return AgentMemory(name, c)


def load_agent_memory(
    path: Optional[PathLike] = DEFAULT_PATH, *, bank: Optional[str] = None, client: Optional[MemgymClient] = None
) -> AgentMemory:
    """The memory of bank ``bank`` (default ``agent_bank_name(path)``), created if missing.

    When the bank does not exist yet, or has never been written, and ``path`` is a file, the file (seed
    003's document) is imported into it once; a bank that has been written is not touched by the file.
    Raises ``MemgymError``: FAILED_PRECONDITION for a bank of another kind, INVALID_ARGUMENT for a file
    that does not read.
    """
    c = client if client is not None else default_client()
    name = bank or agent_bank_name(path)
    try:
        version: Optional[int] = c.get_agent_summary(name).version
    except MemgymError as err:
        if err.code != grpc.StatusCode.NOT_FOUND:
            raise
        version = None
    if not version and path and os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            data = f.read()
        try:
            c.import_agent_memory(name, data)
            logger.info("Imported %s into agent bank %s", os.fspath(path), name)
        except MemgymError as err:
            # Another process wrote the bank since we looked: its memory wins. (A bank of another kind is
            # FAILED_PRECONDITION too; the summary below raises it.)
            if err.code != grpc.StatusCode.FAILED_PRECONDITION:
                raise
            c.get_agent_summary(name)
    elif version is None:
        c.create_agent_bank(name, if_not_exists=True)
    memory = AgentMemory(name, c, path)
    if logger.isEnabledFor(logging.INFO):
        s = c.get_agent_summary(name)
        logger.info("Loaded memory: %d episodes, %d global rules (bank %s)", s.total_episodes, s.global_rules, name)
    return memory


def save_agent_memory(memory: AgentMemory, path: Optional[PathLike] = DEFAULT_PATH) -> None:
    """Writes the memory to ``path`` as the agent-memory design's JSON file (``indent=2``), atomically; ``path=None`` writes
    nothing. The bank needs no save: every record is durable on the server before it returns."""
    memory = _memory(memory)
    if not path:
        return
    write_atomically(path, json.dumps(memory.document(), indent=2))
    logger.debug("Saved memory of bank %s to %s", memory.bank, os.fspath(path))


def _texts(items: Any) -> List[str]:
    """The seed's mistakes / successes: falsy items skipped (the seed keeps them out of its lists)."""
    return [str(item) for item in items or () if item]


def record_episode(memory: AgentMemory, episode_data: Mapping[str, Any]) -> AgentMemory:
    """Records a completed episode into the memory (durable on return) and returns the memory.

    ``episode_data`` keys, as in the seed: ``task_id`` (default "unknown"), ``score`` (0.0–1.0, default
    0.0), ``steps`` (default 0), ``trajectory_summary``, ``mistakes``, ``successes``, ``mistake_cards``
    (dicts with ``mistake_type``, ``task_id``, ``worker_id``, ``bad_decision``, ``correct_decision``,
    ``evidence``, ``lesson``; anything not a dict is skipped, as the seed skips it). The server's reply
    (rules added, card results) is ``memory.last_record``.
    """
    memory = _memory(memory)
    score: Optional[float] = None
    if "score" in episode_data:
        score = float(episode_data["score"])  # None raises TypeError before anything is sent, as in the seed
    task_id = episode_data.get("task_id")
    steps = episode_data.get("steps")
    cards = [
        {k: card.get(k) for k in CARD_FIELDS} if isinstance(card, Mapping) else card
        for card in episode_data.get("mistake_cards") or ()
        if isinstance(card, (Mapping, apb.MistakeCardInput))
    ]
    memory.last_record = memory.client.record_episode(
        memory.bank,
        task_id=str(task_id) if task_id is not None else None,
        score=score,
        steps=int(steps) if steps is not None else None,
        trajectory_summary=str(episode_data.get("trajectory_summary") or ""),
        mistakes=_texts(episode_data.get("mistakes")),
        successes=_texts(episode_data.get("successes")),
        mistake_cards=cards,
    )
    return memory


def build_memory_context(
    memory: AgentMemory, task_id: Optional[str] = None, max_rules: int = 5, max_recent: int = 3
) -> str:
    """The "## MEMORY FROM PAST EPISODES" block for the top of the system prompt ("" with nothing to say),
    byte for byte as the seed builds it. ``max_rules`` / ``max_recent`` of 0 mean all (the seed's ``[-0:]``);
    negative values raise ``ValueError``."""
    memory = _memory(memory)
    if max_rules < 0 or max_recent < 0:
        raise ValueError("max_rules and max_recent must be >= 0")
    resp = memory.client.build_memory_context(
        memory.bank, task_id or None, max_rules=int(max_rules), max_recent=int(max_recent)
    )
    return resp.context


def maybe_consolidate_memory(
    memory: AgentMemory, api_key: Optional[str] = None, path: Optional[PathLike] = DEFAULT_PATH
) -> AgentMemory:
    """Every 20 episodes, distils the episode log into global rules; returns the memory.

    ``api_key`` is ignored: the server holds the LLM endpoint and decides (mode AUTO: its LLM when it has
    one, else the heuristic ``[HIGH SCORE x.xx] summary`` rules). When a consolidation ran, the memory is
    also written to ``path`` as the seed does (``save_agent_memory``; ``path=None`` skips it). The server's
    reply is ``memory.last_consolidation``; an LLM reply without rules changes nothing and is logged.
    """
    memory = _memory(memory)
    resp = memory.client.maybe_consolidate(memory.bank, mode="auto")
    memory.last_consolidation = resp
    if resp.error:
        logger.warning("Consolidation of bank %s: %s", memory.bank, resp.error)
    if resp.ran:
        logger.info("%s consolidation of bank %s: %d new global rules", resp.mode, memory.bank, len(resp.rules_added))
        save_agent_memory(memory, path)
    return memory


def memory_summary(memory: AgentMemory) -> Dict[str, Any]:
    """The seed's summary: ``total_episodes``, ``global_rules`` (count), ``task_rules`` (count per task),
    ``mistakes_stored``, ``mistake_cards_stored``, ``top_mistake_cards`` (5) and ``scores_by_task`` (mean,
    3 decimals)."""
    s = _memory(memory).client.get_agent_summary(memory.bank)
    return {
        "total_episodes": s.total_episodes,
        "global_rules": s.global_rules,
        "task_rules": {k: s.task_rules[k] for k in sorted(s.task_rules)},
        "mistakes_stored": s.mistakes_stored,
        "mistake_cards_stored": s.mistake_cards_stored,
        "top_mistake_cards": [
            {"mistake_type": c.mistake_type, "task_id": c.task_id, "seen_count": c.seen_count}
            for c in s.top_mistake_cards
        ],
        "scores_by_task": {k: s.scores_by_task[k] for k in sorted(s.scores_by_task)},
    }


__all__ = [
    "ADDRESS_ENV",
    "AgentMemory",
    "CONSOLIDATION_EVERY",
    "DEFAULT_BANK",
    "DEFAULT_PATH",
    "MAX_EPISODES_STORED",
    "MAX_RULES_PER_TASK",
    "agent_bank_name",
    "build_memory_context",
    "connect",
    "default_client",
    "load_agent_memory",
    "maybe_consolidate_memory",
    "memory_summary",
    "new_agent_memory",
    "record_episode",
    "save_agent_memory",
]
