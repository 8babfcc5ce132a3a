"""``MemgymTool``: verl ``BaseTool`` adapter for the six memgym tools.

Why this exists: verl's ``ToolAgentLoop`` drives tools through ``BaseTool`` (create → execute → release
around every call, ``calc_reward`` never called). This adapter maps that onto one memgym episode per
trajectory (``memgym_verl.episode``). It needs verl >= 0.7.1 (``MIN_VERL``), the first release whose loop
passes ``create_kwargs`` to ``create`` and ``agent_data`` to ``execute`` *and* returns
``agent_data.extra_fields`` with the trajectory's output. Older verls are refused by name: at import when
``verl.tools.schemas`` has no ``ToolResponse`` (0.5), in the constructor by ``verl.__version__``, and in
``execute`` when a call brings no ``agent_data``.

- ``create`` only remembers the row's ``create_kwargs`` for this instance (no RPC);
- ``execute``: the trajectory's first call makes its episode id, opens the episode (``CreateEpisode``)
  and records the id and the address in ``agent_data.extra_fields``; every call then runs ``CallTool``
  (one RPC per call after the first). Calls of one trajectory running in parallel
  (``max_parallel_calls`` > 1) share the one opening;
- ``release`` forgets the instance and never closes the episode (``MemgymAgentLoop`` scores and closes
  it when the trajectory ends);
- ``calc_reward`` returns 0.0: the episode reward is scored once, at the end.

**Output length.** verl cuts a tool response longer than ``max_tool_response_length`` characters on the
``tool_response_truncate_side`` — and ``right`` keeps the tail in 0.7.1 but the head from 0.8.0, which would
drop the best search hits. The tool therefore fits its own text: with ``max_response_chars`` set (by
``MemgymAgentLoop`` from verl's ``max_tool_response_length``, or in the tool config) it keeps whole result
lines from the top and ends with a ``(+N more lines)`` note, never longer than the limit, so verl's
truncation never fires (``fit_text``).

Errors the *policy* caused (bad arguments, unknown memory id, a memory that cannot be split, budget
spent: INVALID_ARGUMENT / NOT_FOUND / FAILED_PRECONDITION / OUT_OF_RANGE) come back as the tool's text,
``"Error: ..."``, so the model sees what was wrong and the call costs no step — the same way verl itself
answers an unknown tool name or undecodable JSON. Infrastructure failures (server down, deadline, a
misconfigured dataset row) raise ``MemgymError``; verl logs them and shows the model
``"Error executing tool ..."``, and ``MemgymAgentLoop`` fails the trajectory when it scores.

YAML (one entry per tool; ``tool_schema`` may be omitted — it is fetched from the server's ``ListTools``):

    tools:
      - class_name: memgym_verl.tool.MemgymTool
        config: {type: native, address: "127.0.0.1:50051", tool_name: search_memory, timeout: 30}
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from typing import Any, Dict, Optional, Tuple
from uuid import uuid4

import grpc
import verl

from memgym import MemgymError
from memgym_verl import MIN_VERL, check_verl_version
from memgym_verl.episode import (
    ADDRESS_KEY,
    EPISODE_ID_KEY,
    async_client,
    open_episode,
    resolve_address,
    row_create_kwargs,
    sync_client,
)

try:
    from verl.tools.base_tool import BaseTool
    from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
except ImportError as err:  # verl 0.5 has no ToolResponse
    raise ImportError(f"memgym_verl needs verl >= {MIN_VERL}, found {getattr(verl, '__version__', '?')}: {err}") from err


#: Status codes that mean "the call was wrong", shown to the model as text instead of raised.
POLICY_ERRORS = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.OUT_OF_RANGE,
    }
)

OLD_VERL_CALL = (
    f"memgym_verl needs verl >= {MIN_VERL}: this verl called execute() without agent_data, so MemgymTool "
    "cannot keep the trajectory's episode"
)


def fit_text(text: str, max_chars: Optional[int]) -> str:
    """``text`` cut to at most ``max_chars`` characters at line boundaries (see the module doc).

    Keeps whole lines from the top and appends ``(+N more lines)``; a first line that alone is too long is
    cut at a word boundary and ends with ``…``. ``None`` or a non-positive limit keeps the text whole.
    """
    if not max_chars or max_chars <= 0 or len(text) <= max_chars:
        return text
    lines = text.split("\n")
    kept: list = []
    used = 0
    for i, line in enumerate(lines):
        rest = len(lines) - i - 1
        note = f"\n(+{rest} more lines)" if rest else ""
        need = used + (1 if kept else 0) + len(line)
        if need + len(note) > max_chars:
            break
        kept.append(line)
        used = need
    if kept:
        return "\n".join(kept) + f"\n(+{len(lines) - len(kept)} more lines)"
    # The first line alone is too long: its head, cut at a word boundary.
    note = f"\n(+{len(lines) - 1} more lines)" if len(lines) > 1 else ""
    room = max_chars - len(note) - 1  # 1 for "…"
    if room < 1:
        return text[: max_chars - 1] + "…"
    head = lines[0][:room]
    cut = head.rfind(" ")
    if cut > room // 2:
        head = head[:cut]
    return head + "…" + note


_schema_lock = threading.Lock()
_schemas: Dict[str, Dict[str, Any]] = {}

# agent_data → the task opening its trajectory's episode (shared by parallel calls of one turn).
_opening: "weakref.WeakKeyDictionary[Any, asyncio.Future]" = weakref.WeakKeyDictionary()


def server_tool_schema(address: str, tool_name: str, timeout: float = 30.0) -> Dict[str, Any]:
    """The OpenAI schema of ``tool_name`` from the server's ``ListTools`` (fetched once per address)."""
    with _schema_lock:
        if address not in _schemas:
            _schemas[address] = {s["function"]["name"]: s for s in sync_client(address, timeout).list_tools()}
        schemas = _schemas[address]
    if tool_name not in schemas:
        raise ValueError(f"memgym server at {address} has no tool {tool_name!r}; it offers {sorted(schemas)}")
    return schemas[tool_name]


class MemgymTool(BaseTool):
    """One memgym tool (``config["tool_name"]``) as a verl ``BaseTool``.

    Config keys: ``tool_name`` (default: the name in ``tool_schema``), ``address`` (default
    ``$MEMGYM_ADDRESS`` or 127.0.0.1:50051), ``timeout`` seconds per RPC (30), ``max_response_chars``
    (default none; ``MemgymAgentLoop`` sets verl's ``max_tool_response_length``).
    """

    def __init__(self, config: dict, tool_schema: Optional[OpenAIFunctionToolSchema] = None):
        check_verl_version(getattr(verl, "__version__", None))
        config = dict(config or {})
        self.address = resolve_address(config)
        self.timeout = float(config.get("timeout", 30.0))
        limit = config.get("max_response_chars")
        self.max_response_chars: Optional[int] = int(limit) if limit else None
        tool_name = config.get("tool_name") or (tool_schema.function.name if tool_schema else None)
        if not tool_name:
            raise ValueError("MemgymTool needs config.tool_name (or a tool_schema)")
        self.tool_name = str(tool_name)
        if tool_schema is None:
            schema = server_tool_schema(self.address, self.tool_name, self.timeout)
            tool_schema = OpenAIFunctionToolSchema.model_validate(schema)
        elif tool_schema.function.name != self.tool_name:
            raise ValueError(f"tool_schema names {tool_schema.function.name!r} but config.tool_name is {self.tool_name!r}")
        self._instances: Dict[str, Dict[str, Any]] = {}  # instance_id -> the row's create_kwargs
        super().__init__(config, tool_schema)

    def get_openai_tool_schema(self) -> OpenAIFunctionToolSchema:
        return self.tool_schema

    async def create(self, instance_id: Optional[str] = None, **kwargs: Any) -> Tuple[str, ToolResponse]:
        """Remembers the row's ``create_kwargs`` for this instance; no RPC."""
        create_kwargs = kwargs.get("create_kwargs")
        if not isinstance(create_kwargs, dict):
            create_kwargs = {k: v for k, v in kwargs.items() if k != "create_kwargs"}
        if instance_id is None:
            instance_id = str(uuid4())
        self._instances[instance_id] = dict(create_kwargs)
        return instance_id, ToolResponse()

    async def episode_id(self, instance_id: str, agent_data: Any) -> str:
        """The trajectory's episode id, opening the episode on the trajectory's first call.

        Raises ``ValueError`` (``OLD_VERL_CALL``) without ``agent_data``; an opening that failed is retried
        with a fresh id by the next call.
        """
        extra_fields = getattr(agent_data, "extra_fields", None)
        if agent_data is None or not isinstance(extra_fields, dict):
            raise ValueError(OLD_VERL_CALL)
        if extra_fields.get(EPISODE_ID_KEY):
            return str(extra_fields[EPISODE_ID_KEY])
        opening = _opening.get(agent_data)
        if opening is None:
            create_kwargs = self._instances.get(instance_id) or row_create_kwargs(
                getattr(agent_data, "tools_kwargs", None), self.name
            )
            opening = _opening[agent_data] = asyncio.ensure_future(open_episode(self.address, create_kwargs, self.timeout))
        try:
            episode_id = await opening
        except BaseException:
            if _opening.get(agent_data) is opening:
                del _opening[agent_data]
            raise
        extra_fields[EPISODE_ID_KEY] = episode_id
        extra_fields[ADDRESS_KEY] = self.address
        return episode_id

    async def execute(self, instance_id: str, parameters: Any, **kwargs: Any) -> Tuple[ToolResponse, float, dict]:
        """Runs the tool on the trajectory's episode (opened on its first call)."""
        episode_id = await self.episode_id(instance_id, kwargs.get("agent_data"))
        try:
            text, resp = await async_client(self.address, self.timeout).call_tool(episode_id, self.tool_name, parameters)
        except MemgymError as err:
            if err.code in POLICY_ERRORS:
                return ToolResponse(text=fit_text(f"Error: {err.details}", self.max_response_chars)), 0.0, {}
            raise
        # verl's third element is the tool's metrics: the server's per-step metrics (CallToolResponse.metrics).
        return ToolResponse(text=fit_text(text, self.max_response_chars)), 0.0, dict(resp.metrics)

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        """Always 0.0: the episode is scored once, when the trajectory ends (``MemgymAgentLoop``)."""
        return 0.0

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        """Forgets the instance. Never closes the episode: the next call of the trajectory needs it."""
        self._instances.pop(instance_id, None)
