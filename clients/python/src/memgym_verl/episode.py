"""One trajectory ↔ one memgym episode: the id, the row's create arguments, and the per-process clients.

Why this exists: verl's ``ToolAgentLoop`` runs create → execute → release around *every* tool call, on a
fresh ``instance_id`` each time, and never tells a tool that a trajectory ended. Episode state therefore
lives on the server, under an id kept where every call of the same trajectory — and the scoring at its
end — can read it: verl's per-trajectory ``agent_data.extra_fields`` (one dict per trajectory, handed to
every ``execute`` and returned in the loop's output).

- The **first** tool call of a trajectory makes the id, ``"{base}-{uuid4 hex[:16]}"`` (``new_episode_id``),
  and stores it as ``extra_fields["memgym_episode_id"]``; later calls read it back. The id never depends
  on verl's ``request_id``, which repeats across steps under ``rollout.full_determinism`` (0.9.1:
  ``det-{priority}``), so two trajectories can never share an episode, and an id is never reused (the
  server refuses a closed or reaped id).
- **base** = the row's ``create_kwargs["episode_id"]`` if it sets one, else its LoCoMo ``question_id``
  (``memgym dataset verl`` puts ``conversation_id``, ``question_id`` and ``include_adversarial`` in every
  tool's ``create_kwargs``), so ids stay readable in logs.

``memgym_verl.agent_loop.MemgymAgentLoop`` scores and closes the episode at the end of the trajectory.

Clients: one channel per process and address (``MemgymClient``) and one per (address, event loop) for
asyncio (``AsyncMemgymClient``; a ``grpc.aio`` channel is bound to its loop).
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
import uuid
from typing import Any, Dict, Mapping, Optional, Tuple

from memgym import AsyncMemgymClient, MemgymClient
from memgym.client import DEFAULT_ADDRESS

#: Keys written into ``agent_data.extra_fields``: the trajectory's episode and the server holding it.
EPISODE_ID_KEY = "memgym_episode_id"
ADDRESS_KEY = "memgym_address"

#: ``create_kwargs`` keys forwarded to ``CreateEpisode``.
CREATE_KEYS = ("conversation_id", "seed", "max_steps", "evaluator", "include_adversarial")

_ID_CHARS = re.compile(r"[^A-Za-z0-9._:-]")
_MAX_ID = 128
_SUFFIX = 17  # "-" + 16 hex digits


def resolve_address(config: Optional[Mapping[str, Any]] = None) -> str:
    """Server address: ``config["address"]``, else ``$MEMGYM_ADDRESS``, else 127.0.0.1:50051."""
    if config and config.get("address"):
        return str(config["address"])
    return os.environ.get("MEMGYM_ADDRESS") or DEFAULT_ADDRESS


def episode_base(create_kwargs: Mapping[str, Any]) -> str:
    """The readable part of the id: the row's ``episode_id``, else its ``question_id``."""
    base = create_kwargs.get("episode_id") or create_kwargs.get("question_id")
    if not base:
        raise ValueError(
            "memgym: create_kwargs need a question_id (or an episode_id); got "
            f"{sorted(create_kwargs)}. Build the dataset with `memgym dataset verl`."
        )
    return _ID_CHARS.sub("_", str(base))[: _MAX_ID - _SUFFIX]


def new_episode_id(create_kwargs: Mapping[str, Any]) -> str:
    """A fresh, never-reused episode id for one trajectory of the row ``create_kwargs``."""
    return f"{episode_base(create_kwargs)}-{uuid.uuid4().hex[:16]}"


def row_create_kwargs(tools_kwargs: Optional[Mapping[str, Any]], tool_name: Optional[str] = None) -> Dict[str, Any]:
    """The ``create_kwargs`` a row gives its tools (``tools_kwargs[tool]["create_kwargs"]``).

    With ``tool_name``, that tool's; otherwise the first non-empty one (every memgym tool gets the same).
    """
    tools_kwargs = tools_kwargs or {}
    if not isinstance(tools_kwargs, Mapping):
        return {}
    names = [tool_name] if tool_name else list(tools_kwargs)
    for name in names:
        per_tool = tools_kwargs.get(name)
        if isinstance(per_tool, Mapping) and isinstance(per_tool.get("create_kwargs"), Mapping):
            if per_tool["create_kwargs"]:
                return dict(per_tool["create_kwargs"])
    return {}


def create_request_kwargs(create_kwargs: Mapping[str, Any]) -> Tuple[str, Dict[str, Any]]:
    """``(question_id, keyword arguments)`` for ``create_episode`` from a row's ``create_kwargs``."""
    kwargs = {k: create_kwargs[k] for k in CREATE_KEYS if create_kwargs.get(k) is not None}
    return str(create_kwargs.get("question_id") or ""), kwargs


async def open_episode(address: str, create_kwargs: Mapping[str, Any], timeout: float = 30.0) -> str:
    """Opens a fresh episode (``new_episode_id``) of the row ``create_kwargs``; returns the id the server
    gave it (the same id, or behind a proxy of replicas that id with the replica's name in front)."""
    episode_id = new_episode_id(create_kwargs)
    question_id, create_args = create_request_kwargs(create_kwargs)
    created = await async_client(address, timeout).create_episode(question_id, episode_id=episode_id, **create_args)
    return created.episode_id or episode_id


_lock = threading.Lock()
_sync_clients: Dict[str, MemgymClient] = {}
_async_clients: Dict[Tuple[str, int], Tuple[asyncio.AbstractEventLoop, AsyncMemgymClient]] = {}


def sync_client(address: str, timeout: float = 30.0) -> MemgymClient:
    """The process's blocking client for ``address`` (created once)."""
    with _lock:
        client = _sync_clients.get(address)
        if client is None:
            client = _sync_clients[address] = MemgymClient(address, timeout=timeout)
        return client


def async_client(address: str, timeout: float = 30.0) -> AsyncMemgymClient:
    """The asyncio client for ``address`` on the running event loop (created once per loop)."""
    loop = asyncio.get_running_loop()
    key = (address, id(loop))
    with _lock:
        # Forget clients of loops that have been closed (their channels died with them).
        for k in [k for k, (lp, _) in _async_clients.items() if lp.is_closed()]:
            del _async_clients[k]
        entry = _async_clients.get(key)
        if entry is None or entry[0] is not loop:
            entry = _async_clients[key] = (loop, AsyncMemgymClient(address, timeout=timeout))
        return entry[1]
