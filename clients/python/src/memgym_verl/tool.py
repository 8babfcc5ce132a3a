"""``MemgymTool``: verl ``BaseTool`` adapter for the six memgym tools.

Why this exists: verl's ``ToolAgentLoop`` drives tools through ``BaseTool`` (create → execute → release
around every call, ``calc_reward`` never called). This adapter maps that onto memgym's idempotent
episodes (see ``memgym_verl.episode`` for the id derivation). It needs verl >= 0.7.1 (``MIN_VERL``), the
first release whose loop passes ``create_kwargs`` to ``create``, ``agent_data`` to ``execute`` *and*
hands ``agent_data.extra_fields`` on to the reward function (0.7.0 drops them, so every sample would score
0). Older verls are refused by name: at import when ``verl.tools.schemas`` has no ``ToolResponse`` (0.5),
in the constructor by ``verl.__version__``, and in ``execute`` when a call names no question at all (a
loop calling like 0.5's) instead of failing on a missing question id.

- ``create`` only remembers the row's ``create_kwargs`` for this instance (no RPC);
- ``execute`` derives the trajectory's episode id, calls ``CreateEpisode`` (idempotent: the first call
  of a trajectory opens the episode, later ones return it), then ``CallTool``; it records the id and the
  address in ``agent_data.extra_fields`` for the reward function;
- ``release`` forgets the instance and never closes the episode (the reward function does);
- ``calc_reward`` returns 0.0: the episode reward comes from ``memgym_verl.reward.compute_score``.

Errors the *policy* caused (bad arguments, unknown memory id, a memory that cannot be split, budget
spent: INVALID_ARGUMENT / NOT_FOUND / FAILED_PRECONDITION / OUT_OF_RANGE) come back as the tool's text,
``"Error: ..."``, so the model sees what was wrong and the call costs no step — the same way verl itself
answers an unknown tool name or undecodable JSON. Infrastructure failures (server down, deadline, a
misconfigured dataset row) raise ``MemgymError``; verl logs them and shows the model
``"Error executing tool ..."``.

YAML (one entry per tool; ``tool_schema`` may be omitted — it is fetched from the server's ``ListTools``):

    tools:
      - class_name: memgym_verl.tool.MemgymTool
        config: {type: native, address: "127.0.0.1:50051", tool_name: search_memory, timeout: 30}
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any, Dict, Optional, Tuple
from uuid import uuid4

import grpc
import verl

from memgym import MemgymError
from memgym_verl import MIN_VERL
from memgym_verl.episode import (
    ADDRESS_KEY,
    EPISODE_ID_KEY,
    async_client,
    create_request_kwargs,
    episode_id_for,
    resolve_address,
    sync_client,
)

try:
    from verl.tools.base_tool import BaseTool
    from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
except ImportError as err:  # verl 0.5 has no ToolResponse
    raise ImportError(f"memgym_verl needs verl >= {MIN_VERL}, found {getattr(verl, '__version__', '?')}: {err}") from err


logger = logging.getLogger(__name__)

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
    f"memgym_verl needs verl >= {MIN_VERL}: this verl called create() without create_kwargs and execute() "
    "without agent_data, so MemgymTool cannot tell which question (or trajectory) the call is for"
)


def _release(version: str) -> Optional[Tuple[int, int, int]]:
    match = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", version)
    return (int(match[1]), int(match[2]), int(match[3] or 0)) if match else None


def check_verl_version(version: Optional[str]) -> None:
    """Raises ``RuntimeError`` for a verl older than ``MIN_VERL``; an unknown or unparsable version passes."""
    found = _release(str(version or ""))
    if found is not None and found < _release(MIN_VERL):
        raise RuntimeError(
            f"memgym_verl needs verl >= {MIN_VERL}, found {version}: older ToolAgentLoops pass no "
            "create_kwargs (0.5) or no agent_data (0.6) to the tool, or drop its extra_fields before the reward "
            "function (0.7.0), so episodes cannot be kept per trajectory and scored"
        )


_schema_lock = threading.Lock()
_schemas: Dict[str, Dict[str, Any]] = {}


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
    ``$MEMGYM_ADDRESS`` or 127.0.0.1:50051), ``timeout`` seconds per RPC (30).
    """

    def __init__(self, config: dict, tool_schema: Optional[OpenAIFunctionToolSchema] = None):
        check_verl_version(getattr(verl, "__version__", None))
        config = dict(config or {})
        self.address = resolve_address(config)
        self.timeout = float(config.get("timeout", 30.0))
        tool_name = config.get("tool_name") or (tool_schema.function.name if tool_schema else None)
        if not tool_name:
            raise ValueError("MemgymTool needs config.tool_name (or a tool_schema)")
        self.tool_name = str(tool_name)
        if tool_schema is None:
            schema = server_tool_schema(self.address, self.tool_name, self.timeout)
            tool_schema = OpenAIFunctionToolSchema.model_validate(schema)
        elif tool_schema.function.name != self.tool_name:
            raise ValueError(f"tool_schema names {tool_schema.function.name!r} but config.tool_name is {self.tool_name!r}")
        # instance_id -> (create_kwargs, trajectory key or None)
        self._instances: Dict[str, Tuple[Dict[str, Any], Optional[str]]] = {}
        self._warned_row_keyed = False
        super().__init__(config, tool_schema)

    def get_openai_tool_schema(self) -> OpenAIFunctionToolSchema:
        return self.tool_schema

    async def create(self, instance_id: Optional[str] = None, **kwargs: Any) -> Tuple[str, ToolResponse]:
        """Remembers the row's create_kwargs for this instance; no RPC.

        verl's agent loop calls ``create(create_kwargs={...})`` (no id: one instance per call); a caller that
        passes ``create(trajectory_id, **create_kwargs)`` (verl < 0.7's SGLang rollout did) keys the
        episode on that id.
        """
        create_kwargs = kwargs.get("create_kwargs")
        if not isinstance(create_kwargs, dict):
            create_kwargs = {k: v for k, v in kwargs.items() if k != "create_kwargs"}
        trajectory_key = instance_id  # only the per-trajectory path passes one
        if instance_id is None:
            instance_id = str(uuid4())
        self._instances[instance_id] = (dict(create_kwargs), trajectory_key)
        return instance_id, ToolResponse()

    def episode_id(self, instance_id: str, agent_data: Any = None) -> Tuple[str, Dict[str, Any]]:
        """``(episode id, create_kwargs)`` for this call's trajectory.

        Raises ``ValueError`` (``OLD_VERL_CALL``) when neither ``create`` nor ``execute`` said which row
        the call belongs to. Without ``agent_data`` or a trajectory id the episode is keyed by the row alone
        (warned once): every sample of one prompt then shares one episode.
        """
        create_kwargs, key = self._instances.get(instance_id, ({}, None))
        if agent_data is None:
            if not create_kwargs:
                raise ValueError(OLD_VERL_CALL)
            if key is None and not self._warned_row_keyed:
                self._warned_row_keyed = True
                logger.warning("%s: execute() got no agent_data; episodes are keyed by the row alone", self.name)
            return episode_id_for(create_kwargs, key), create_kwargs
        if not create_kwargs:
            tools_kwargs = getattr(agent_data, "tools_kwargs", None) or {}
            create_kwargs = dict((tools_kwargs.get(self.name) or {}).get("create_kwargs") or {})
        return episode_id_for(create_kwargs, getattr(agent_data, "request_id", None) or key), create_kwargs

    async def execute(self, instance_id: str, parameters: Any, **kwargs: Any) -> Tuple[ToolResponse, float, dict]:
        """Opens (idempotently) the trajectory's episode and runs the tool on it."""
        agent_data = kwargs.get("agent_data")
        episode_id, create_kwargs = self.episode_id(instance_id, agent_data)
        question_id, create_args = create_request_kwargs(create_kwargs)
        client = async_client(self.address, self.timeout)
        await client.create_episode(question_id, episode_id=episode_id, **create_args)
        extra_fields = getattr(agent_data, "extra_fields", None)
        if isinstance(extra_fields, dict):
            extra_fields[EPISODE_ID_KEY] = episode_id
            extra_fields[ADDRESS_KEY] = self.address
        try:
            text, _ = await client.call_tool(episode_id, self.tool_name, parameters)
        except MemgymError as err:
            if err.code in POLICY_ERRORS:
                return ToolResponse(text=f"Error: {err.details}"), 0.0, {}
            raise
        return ToolResponse(text=text), 0.0, {}

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        """Always 0.0: the episode is scored once, by ``memgym_verl.reward.compute_score``."""
        return 0.0

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        """Forgets the instance. Never closes the episode: the next call of the trajectory needs it."""
        self._instances.pop(instance_id, None)
