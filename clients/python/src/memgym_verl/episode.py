"""One trajectory ↔ one memgym episode: the id derivation and the per-process clients.

Why this exists: verl's ``ToolAgentLoop`` runs create → execute → release around *every* tool call, on
a fresh ``instance_id`` each time, and never tells a tool that a trajectory ended. Episode state must
therefore live on the server, under an id that every call of the same trajectory — and the reward
function after it — can compute on its own:

- **base** = ``create_kwargs["episode_id"]`` if the dataset row sets one, else the LoCoMo
  ``question_id`` (``memgym dataset verl`` puts ``conversation_id`` and ``question_id`` in every tool's
  ``create_kwargs``).
- **trajectory key** = ``agent_data.request_id`` (verl ≥ 0.7 passes ``agent_data`` to ``execute``; one
  uuid per trajectory, so the ``rollout.n`` GRPO samples of one prompt get distinct episodes), or the
  ``instance_id`` when a caller created the tool with a trajectory id (``create(id, **create_kwargs)``).
- **episode id** = ``"{base}-{sha1(base, key)[:16]}"``, or just ``base`` without a key.

The tool records the id (and the server address) in ``agent_data.extra_fields``; verl ≥ 0.7.1 hands
those to its reward loop, which merges them into ``extra_info`` before ``compute_score``: that is how
the reward function finds it. A caller that passes no ``agent_data`` and no trajectory id (a custom loop)
gets ``base`` alone, which the reward function derives from the row too; every sample of one row then
shares one episode, so such a loop needs one sample per row, each with its own ``episode_id``.

Clients: one channel per process and address (``MemgymClient``) and one per (address, event loop) for
asyncio (``AsyncMemgymClient``; a ``grpc.aio`` channel is bound to its loop).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import threading
from typing import Any, Dict, Mapping, Optional, Tuple

from memgym import AsyncMemgymClient, MemgymClient
from memgym.client import DEFAULT_ADDRESS

#: Keys written into ``agent_data.extra_fields`` (and so into the reward function's ``extra_info``).
EPISODE_ID_KEY = "memgym_episode_id"
ADDRESS_KEY = "memgym_address"

#: ``create_kwargs`` keys forwarded to ``CreateEpisode``.
CREATE_KEYS = ("conversation_id", "seed", "max_steps", "evaluator", "include_adversarial")

_ID_CHARS = re.compile(r"[^A-Za-z0-9._:-]")
_MAX_ID = 128


def resolve_address(config: Optional[Mapping[str, Any]] = None) -> str:
    """Server address: ``config["address"]``, else ``$MEMGYM_ADDRESS``, else 127.0.0.1:50051."""
    if config and config.get("address"):
        return str(config["address"])
    return os.environ.get("MEMGYM_ADDRESS") or DEFAULT_ADDRESS


def _clean(text: str) -> str:
    return _ID_CHARS.sub("_", text)


def episode_base(create_kwargs: Mapping[str, Any]) -> str:
    """The readable part of the id: the row's ``episode_id``, else its ``question_id``."""
    base = create_kwargs.get("episode_id") or create_kwargs.get("question_id")
    if not base:
        raise ValueError(
            "memgym: create_kwargs need a question_id (or an episode_id); got "
            f"{sorted(create_kwargs)}. Build the dataset with `memgym dataset verl`."
        )
    return _clean(str(base))


def episode_id_for(create_kwargs: Mapping[str, Any], trajectory_key: Optional[str] = None) -> str:
    """The deterministic episode id of one trajectory (see the module doc)."""
    base = episode_base(create_kwargs)
    if not trajectory_key:
        return base[:_MAX_ID]
    digest = hashlib.sha1(f"{base}\0{trajectory_key}".encode()).hexdigest()[:16]
    return f"{base[: _MAX_ID - 17]}-{digest}"


def create_kwargs_from_extra_info(extra_info: Mapping[str, Any]) -> Dict[str, Any]:
    """The ``create_kwargs`` a dataset row gives its tools, read back from the row's ``extra_info``."""
    tools_kwargs = extra_info.get("tools_kwargs") or {}
    if isinstance(tools_kwargs, Mapping):
        for per_tool in tools_kwargs.values():
            if isinstance(per_tool, Mapping) and isinstance(per_tool.get("create_kwargs"), Mapping):
                if per_tool["create_kwargs"]:
                    return dict(per_tool["create_kwargs"])
    return {k: extra_info[k] for k in ("episode_id", "question_id", "conversation_id") if extra_info.get(k)}


def create_request_kwargs(create_kwargs: Mapping[str, Any]) -> Tuple[str, Dict[str, Any]]:
    """``(question_id, keyword arguments)`` for ``create_episode`` from a row's ``create_kwargs``."""
    kwargs = {k: create_kwargs[k] for k in CREATE_KEYS if create_kwargs.get(k) is not None}
    return str(create_kwargs.get("question_id") or ""), kwargs


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
