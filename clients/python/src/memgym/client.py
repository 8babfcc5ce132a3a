"""Sync and asyncio clients for the memgym gRPC server (services ``MemoryEnv``, ``Dataset``, ``Banks``,
``AgentMemory`` and ``Learn``).

Why this exists: trainers talk to memgym from Python. These clients give them one channel per client,
a deadline on every call, retries only where they are safe, and Python exceptions instead of raw gRPC
errors:

- **Deadline**: every RPC gets ``timeout`` seconds (per attempt); the ``Learn`` calls take ``timeout=`` to
  override it per call.
- **Retries**, with exponential backoff (``backoff``, doubled each time, or the server's ``RetryInfo`` delay
  when longer), at most ``retries`` times and ``retry_budget`` seconds of waiting per call:
  - a refusal the server marks **retryable** (``MemgymError.retryable``: the open-episode cap, an
    embedder, LLM endpoint or database that failed or timed out). Every memgym refusal leaves nothing
    behind, so such a request is sent again whatever it is, tool calls included;
  - ``UNAVAILABLE`` with no server details (restarting, connection refused or dropped), only for
    idempotent RPCs: ``CreateEpisode`` *with* a client-chosen ``episode_id``, ``ScoreEpisode``,
    ``GetEpisode``, ``ListMemories``, ``ListTools``, ``CloseEpisode``, the ``Dataset`` RPCs, the reads
    of ``Banks`` and ``AgentMemory``, and ``call_tool``, which sends a ``call_id`` so that the server
    applies a repeated call once. A bank write, or a call on the raw typed tool stubs, whose connection
    dropped may have been applied, so it is not sent again.
  The ``Learn`` calls (``memgym._learn_client``) are never retried: each costs LLM requests and
  ``LearnFromGroup`` writes.
- **Errors**: ``MemgymError`` (``.code``, ``.details``, and the server's ``.reason``, ``.retryable``,
  ``.field`` and ``.retry_delay``); ``MemgymUnavailable`` names the address.

Results are the protobuf messages themselves (``memgym.v1.memgym_pb2``, ``banks_pb2``, ``agent_pb2``,
``learn_pb2``), typed
by the generated ``.pyi``; ``message_to_dict`` turns one into plain Python values.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import grpc

from memgym._agent_client import AgentMixin, AsyncAgentMixin
from memgym._banks_client import AsyncBanksMixin, BanksMixin
from memgym._learn_client import AsyncLearnMixin, LearnMixin
from memgym.errors import MemgymError, from_rpc_error
from memgym.v1 import agent_pb2_grpc, banks_pb2_grpc, learn_pb2_grpc
from memgym.v1 import memgym_pb2 as pb
from memgym.v1 import memgym_pb2_grpc as pb_grpc

DEFAULT_ADDRESS = "127.0.0.1:50051"
#: The request header naming the episode of a call; a proxy routes by the replica the id names.
EPISODE_HEADER = "memgym-episode"

#: Evaluator names accepted by ``create_episode(evaluator=...)``, as the server's CLI spells them.
EVALUATORS = {
    "answer-phrase": pb.EVALUATOR_ANSWER_PHRASE,
    "answer-recall": pb.EVALUATOR_ANSWER_RECALL,
    "llm-f1": pb.EVALUATOR_LLM_F1,
    "llm-judge": pb.EVALUATOR_LLM_JUDGE,
}
SPLITS = {"train": pb.SPLIT_TRAIN, "test": pb.SPLIT_TEST}
MEMORY_TYPES = {
    "episodic": pb.MEMORY_TYPE_EPISODIC,
    "semantic": pb.MEMORY_TYPE_SEMANTIC,
    "procedural": pb.MEMORY_TYPE_PROCEDURAL,
}

Arguments = Union[Mapping[str, Any], str]


def _enum(value: Union[None, int, str], names: Mapping[str, int], what: str) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    key = value.strip().lower().replace("_", "-")
    if key in names:
        return names[key]
    raise ValueError(f"unknown {what} {value!r}; expected one of {sorted(names)}")


def _memory_type(value: Union[None, int, str]) -> int:
    if isinstance(value, str):
        value = value.strip().lower()
    return _enum(value, MEMORY_TYPES, "memory type")


def _is_repeated(field: Any) -> bool:
    is_repeated = getattr(field, "is_repeated", None)  # protobuf >= 5.29; `label` is deprecated there
    return bool(is_repeated) if is_repeated is not None else field.label == field.LABEL_REPEATED


def message_to_dict(msg: Any) -> Dict[str, Any]:
    """A protobuf message as a dict keyed by the .proto field names, every field present.

    Unset ``optional`` fields and unset sub-messages are left out; enums stay numbers; a map field is a
    dict (``BankStats.domains``). (Written by hand because protobuf's ``MessageToDict`` renamed its
    "include defaults" flag across versions.)
    """
    out: Dict[str, Any] = {}
    for field in msg.DESCRIPTOR.fields:
        value = getattr(msg, field.name)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            nested = field.message_type.fields_by_name["value"].message_type is not None
            out[field.name] = {k: message_to_dict(v) if nested else v for k, v in value.items()}
        elif _is_repeated(field):
            out[field.name] = [message_to_dict(v) for v in value] if field.message_type else list(value)
        elif field.message_type is not None or field.has_presence:
            if msg.HasField(field.name):
                out[field.name] = message_to_dict(value) if field.message_type else value
        else:
            out[field.name] = value
    return out


def _arguments_json(arguments: Arguments) -> str:
    if isinstance(arguments, str):
        return arguments
    return json.dumps(dict(arguments), ensure_ascii=False)


def _memories_request(
    episode_id: str, page_size: int, page_token: str, memory_type: Union[None, int, str]
) -> pb.ListMemoriesRequest:
    """The ListMemories request both clients send."""
    return pb.ListMemoriesRequest(
        episode_id=episode_id, page_size=page_size, page_token=page_token, memory_type=_memory_type(memory_type)
    )


def _questions_request(
    conversation_id: str, split: Union[None, int, str], category: int, page_size: int, page_token: str
) -> pb.ListQuestionsRequest:
    """The ListQuestions request both clients send."""
    return pb.ListQuestionsRequest(
        conversation_id=conversation_id,
        split=_enum(split, SPLITS, "split"),
        category=category,
        page_size=page_size,
        page_token=page_token,
    )


def _call_tool_request(episode_id: str, name: str, arguments: Arguments, call_id: Optional[str]) -> pb.CallToolRequest:
    """A CallTool request with its idempotency key (a fresh one unless given)."""
    return pb.CallToolRequest(
        episode_id=episode_id, tool_name=name, arguments_json=_arguments_json(arguments), call_id=call_id or uuid.uuid4().hex
    )


def _fork_request(
    episode_id: str, count: int, fork_ids: Optional[Sequence[str]], seeds: Optional[Sequence[int]]
) -> pb.ForkEpisodeRequest:
    return pb.ForkEpisodeRequest(episode_id=episode_id, count=int(count), fork_ids=list(fork_ids or ()), seeds=list(seeds or ()))


def _create_request(
    question_id: str = "",
    *,
    episode_id: str = "",
    conversation_id: str = "",
    seed: Optional[int] = None,
    max_steps: Optional[int] = None,
    evaluator: Union[None, int, str] = None,
    include_adversarial: bool = False,
    custom: Optional[pb.CustomEpisode] = None,
) -> pb.CreateEpisodeRequest:
    req = pb.CreateEpisodeRequest(
        episode_id=episode_id or "",
        conversation_id=conversation_id or "",
        question_id=question_id or "",
        include_adversarial=bool(include_adversarial),
        evaluator=_enum(evaluator, EVALUATORS, "evaluator"),
    )
    if seed is not None:
        req.seed = int(seed)
    if max_steps is not None:
        req.max_steps = int(max_steps)
    if custom is not None:
        req.custom.CopyFrom(custom)
    return req


def _tools_from_response(resp: pb.ListToolsResponse) -> List[Dict[str, Any]]:
    return [json.loads(t.schema_json) for t in resp.tools]


class _Base:
    """Shared settings: address, deadline, retry policy."""

    def __init__(
        self,
        address: str = DEFAULT_ADDRESS,
        timeout: float = 30.0,
        *,
        retries: int = 3,
        backoff: float = 0.2,
        retry_budget: float = 30.0,
        max_message_mb: int = 32,
        api_key: Optional[str] = None,
        root_certificates: Optional[bytes] = None,
        tls: bool = False,
    ):
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self.address = address
        self.timeout = float(timeout)
        self.retries = max(0, int(retries))
        self.backoff = float(backoff)
        #: Seconds of waiting between retries one call may spend in all.
        self.retry_budget = max(0.0, float(retry_budget))
        self._options = [
            ("grpc.max_receive_message_length", max_message_mb * 1024 * 1024),
            ("grpc.max_send_message_length", max_message_mb * 1024 * 1024),
        ]
        #: ``api_key`` (default ``$MEMGYM_API_KEY``) goes with every call as ``authorization: Bearer KEY``.
        key = api_key if api_key is not None else os.environ.get("MEMGYM_API_KEY")
        self._metadata = (("authorization", f"Bearer {key}"),) if key else None
        #: TLS when ``tls`` or ``root_certificates`` (PEM of the CA to trust; default: the system's roots).
        self._credentials = grpc.ssl_channel_credentials(root_certificates) if (tls or root_certificates) else None

    def _metadata_for(self, request: Any) -> Optional[Tuple[Tuple[str, str], ...]]:
        """The call's metadata: the API key, and for a call on an episode its id as ``memgym-episode``, the
        header a proxy in front of several replicas routes by (the id names its replica)."""
        episode_id = getattr(request, "episode_id", "")
        if not episode_id:
            return self._metadata
        return (self._metadata or ()) + ((EPISODE_HEADER, episode_id),)

    def _delay(self, attempt: int) -> float:
        return self.backoff * (2**attempt)

    def _retry_after(self, err: MemgymError, idempotent: bool, attempt: int, waited: float) -> Optional[float]:
        """How long to wait before sending the request again, or None to give up.

        A refusal the server marks retryable (its status details: the server was busy, down or slow; the
        request changed nothing) is sent again, idempotent or not; UNAVAILABLE without details (the server
        was not reached) only for an idempotent request. The wait is the larger of the exponential backoff
        and the server's RetryInfo, within ``retries`` attempts and ``retry_budget`` seconds of waiting.
        """
        unreached = err.code == grpc.StatusCode.UNAVAILABLE and err.reason is None
        if attempt >= self.retries or not ((err.retryable and not unreached) or (idempotent and unreached)):
            return None
        delay = max(self._delay(attempt), err.retry_delay or 0.0)
        return delay if waited + delay <= self.retry_budget else None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.address!r}, timeout={self.timeout})"


class MemgymClient(BanksMixin, AgentMixin, LearnMixin, _Base):
    """Blocking client. Thread-safe (one HTTP/2 channel shared by all threads).

    >>> with MemgymClient("127.0.0.1:50051") as c:
    ...     ep = c.create_episode("conv-26:q0", episode_id="demo-1", seed=7)
    ...     text, resp = c.call_tool("demo-1", "search_memory", {"query": "support group"})
    ...     score = c.score_episode("demo-1")
    ...     c.close_episode("demo-1")
    ...     bank = c.create_bank("math", if_not_exists=True)            # the Banks calls: memgym._banks_client
    ...     c.add_experience("math", "Verify solutions by substitution.").id
    'G0'
    >>> with MemgymClient("127.0.0.1:50051") as c:                   # the AgentMemory calls: memgym._agent_client
    ...     _ = c.create_agent_bank("agent", if_not_exists=True)
    ...     c.record_episode("agent", task_id="triage", score=0.9, successes=["Read the logs first"]).rules_added
    ['[WORKS] Read the logs first']
    """

    def __init__(self, address: str = DEFAULT_ADDRESS, timeout: float = 30.0, **kwargs: Any):
        super().__init__(address, timeout, **kwargs)
        self._channel = (
            grpc.secure_channel(address, self._credentials, options=self._options)
            if self._credentials
            else grpc.insecure_channel(address, options=self._options)
        )
        #: Raw stubs (``env``, ``dataset``, ``banks``, ``agent``, ``learn``), for the typed tool RPCs (Search,
        #: Manage, ...) and anything not wrapped here.
        self.env = pb_grpc.MemoryEnvStub(self._channel)
        self.dataset = pb_grpc.DatasetStub(self._channel)
        self.banks = banks_pb2_grpc.BanksStub(self._channel)
        self.agent = agent_pb2_grpc.AgentMemoryStub(self._channel)
        self.learn = learn_pb2_grpc.LearnStub(self._channel)

    # -- plumbing -----------------------------------------------------------------------------
    def _call(
        self, method: str, rpc: Any, request: Any, *, idempotent: bool, timeout: Optional[float] = None, retry: bool = True
    ) -> Any:
        attempt, waited = 0, 0.0
        while True:
            try:
                return rpc(request, timeout=self.timeout if timeout is None else timeout, metadata=self._metadata_for(request))
            except grpc.RpcError as err:
                error = from_rpc_error(err, method=method, address=self.address)
                delay = self._retry_after(error, idempotent, attempt, waited) if retry else None
                if delay is None:
                    raise error from None
                time.sleep(delay)
                attempt, waited = attempt + 1, waited + delay

    def close(self) -> None:
        """Closes the channel."""
        self._channel.close()

    def __enter__(self) -> "MemgymClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- episodes -----------------------------------------------------------------------------
    def create_episode(self, question_id: str = "", **kwargs: Any) -> pb.CreateEpisodeResponse:
        """Opens an episode (idempotent, and retried, when ``episode_id`` is given).

        Keyword arguments: ``episode_id``, ``conversation_id``, ``seed``, ``max_steps``, ``evaluator``
        ("answer-phrase" | "answer-recall" | "llm-f1" | "llm-judge" or the enum), ``include_adversarial``, ``custom``
        (a ``pb.CustomEpisode``).
        """
        req = _create_request(question_id, **kwargs)
        return self._call("MemoryEnv/CreateEpisode", self.env.CreateEpisode, req, idempotent=bool(req.episode_id))

    def call_tool(
        self, episode_id: str, name: str, arguments: Arguments, call_id: Optional[str] = None
    ) -> Tuple[str, pb.CallToolResponse]:
        """Calls one of the six tools with LLM-style arguments (dict or JSON text).

        Every call carries a ``call_id`` (a fresh one unless given): the server applies a call once per id
        and answers a repeat with the first response, so a call whose connection was lost is retried like
        an idempotent one without editing the memory twice.

        Returns ``(text, response)``: the text for the LLM and the full typed response.
        """
        req = _call_tool_request(episode_id, name, arguments, call_id)
        resp = self._call("MemoryEnv/CallTool", self.env.CallTool, req, idempotent=True)
        return resp.text, resp

    def list_tools(self) -> List[Dict[str, Any]]:
        """The six OpenAI function schemas ``{"type": "function", "function": {...}}``."""
        resp = self._call("MemoryEnv/ListTools", self.env.ListTools, pb.ListToolsRequest(), idempotent=True)
        return _tools_from_response(resp)

    def get_episode(self, episode_id: str, include_trace: bool = False) -> pb.GetEpisodeResponse:
        """Episode state (and the trace of tool calls on request)."""
        req = pb.GetEpisodeRequest(episode_id=episode_id, include_trace=include_trace)
        return self._call("MemoryEnv/GetEpisode", self.env.GetEpisode, req, idempotent=True)

    def list_memories(
        self, episode_id: str, page_size: int = 0, page_token: str = "", memory_type: Union[None, int, str] = None
    ) -> pb.ListMemoriesResponse:
        """One page of the episode's current memories."""
        req = _memories_request(episode_id, page_size, page_token, memory_type)
        return self._call("MemoryEnv/ListMemories", self.env.ListMemories, req, idempotent=True)

    def score_episode(self, episode_id: str) -> pb.ScoreEpisodeResponse:
        """Scores (and finalises) the episode; idempotent."""
        req = pb.ScoreEpisodeRequest(episode_id=episode_id)
        return self._call("MemoryEnv/ScoreEpisode", self.env.ScoreEpisode, req, idempotent=True)

    def fork_episode(
        self, episode_id: str, count: int = 0, *, fork_ids: Optional[Sequence[str]] = None, seeds: Optional[Sequence[int]] = None
    ) -> List[pb.EpisodeState]:
        """Copies a live, unscored episode into ``count`` independent forks (its memory, steps used, budget and
        trace; each scores against the parent's ``p_old``). ``fork_ids`` and ``seeds`` name each fork's id and
        seed (default: fresh ids, the parent's seed). All or none are opened; never retried (a retry would
        open more forks). Returns the forks' states in order."""
        req = _fork_request(episode_id, count, fork_ids, seeds)
        return list(self._call("MemoryEnv/ForkEpisode", self.env.ForkEpisode, req, idempotent=False).forks)

    def close_episode(self, episode_id: str) -> pb.CloseEpisodeResponse:
        """Frees the episode. Closing an ended episode again is OK (``state`` unset); its id is not reused."""
        req = pb.CloseEpisodeRequest(episode_id=episode_id)
        return self._call("MemoryEnv/CloseEpisode", self.env.CloseEpisode, req, idempotent=True)

    # -- dataset ------------------------------------------------------------------------------
    def list_conversations(self) -> pb.ListConversationsResponse:
        """Every conversation with its counts and split."""
        return self._call(
            "Dataset/ListConversations", self.dataset.ListConversations, pb.ListConversationsRequest(), idempotent=True
        )

    def list_questions(
        self,
        conversation_id: str = "",
        split: Union[None, int, str] = None,
        category: int = 0,
        page_size: int = 0,
        page_token: str = "",
    ) -> pb.ListQuestionsResponse:
        """One page of LoCoMo questions (``split``: "train" | "test" | None)."""
        req = _questions_request(conversation_id, split, category, page_size, page_token)
        return self._call("Dataset/ListQuestions", self.dataset.ListQuestions, req, idempotent=True)


class AsyncMemgymClient(AsyncBanksMixin, AsyncAgentMixin, AsyncLearnMixin, _Base):
    """asyncio client (``grpc.aio``), same methods as ``MemgymClient`` as coroutines.

    A ``grpc.aio`` channel belongs to the event loop it is used on: create the client inside the loop
    that uses it (``memgym_verl`` caches one per (address, loop)).
    """

    def __init__(self, address: str = DEFAULT_ADDRESS, timeout: float = 30.0, **kwargs: Any):
        super().__init__(address, timeout, **kwargs)
        self._channel = (
            grpc.aio.secure_channel(address, self._credentials, options=self._options)
            if self._credentials
            else grpc.aio.insecure_channel(address, options=self._options)
        )
        self.env = pb_grpc.MemoryEnvStub(self._channel)
        self.dataset = pb_grpc.DatasetStub(self._channel)
        self.banks = banks_pb2_grpc.BanksStub(self._channel)
        self.agent = agent_pb2_grpc.AgentMemoryStub(self._channel)
        self.learn = learn_pb2_grpc.LearnStub(self._channel)

    async def _call(
        self, method: str, rpc: Any, request: Any, *, idempotent: bool, timeout: Optional[float] = None, retry: bool = True
    ) -> Any:
        attempt, waited = 0, 0.0
        while True:
            try:
                return await rpc(request, timeout=self.timeout if timeout is None else timeout, metadata=self._metadata_for(request))
            except grpc.RpcError as err:
                error = from_rpc_error(err, method=method, address=self.address)
                delay = self._retry_after(error, idempotent, attempt, waited) if retry else None
                if delay is None:
                    raise error from None
                await asyncio.sleep(delay)
                attempt, waited = attempt + 1, waited + delay

    async def close(self) -> None:
        """Closes the channel."""
        await self._channel.close()

    async def __aenter__(self) -> "AsyncMemgymClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def create_episode(self, question_id: str = "", **kwargs: Any) -> pb.CreateEpisodeResponse:
        """See ``MemgymClient.create_episode``."""
        req = _create_request(question_id, **kwargs)
        return await self._call(
            "MemoryEnv/CreateEpisode", self.env.CreateEpisode, req, idempotent=bool(req.episode_id)
        )

    async def call_tool(
        self, episode_id: str, name: str, arguments: Arguments, call_id: Optional[str] = None
    ) -> Tuple[str, pb.CallToolResponse]:
        """See ``MemgymClient.call_tool`` (a ``call_id`` with every call, so it is retried safely)."""
        req = _call_tool_request(episode_id, name, arguments, call_id)
        resp = await self._call("MemoryEnv/CallTool", self.env.CallTool, req, idempotent=True)
        return resp.text, resp

    async def list_tools(self) -> List[Dict[str, Any]]:
        """See ``MemgymClient.list_tools``."""
        resp = await self._call("MemoryEnv/ListTools", self.env.ListTools, pb.ListToolsRequest(), idempotent=True)
        return _tools_from_response(resp)

    async def get_episode(self, episode_id: str, include_trace: bool = False) -> pb.GetEpisodeResponse:
        """See ``MemgymClient.get_episode``."""
        req = pb.GetEpisodeRequest(episode_id=episode_id, include_trace=include_trace)
        return await self._call("MemoryEnv/GetEpisode", self.env.GetEpisode, req, idempotent=True)

    async def list_memories(
        self, episode_id: str, page_size: int = 0, page_token: str = "", memory_type: Union[None, int, str] = None
    ) -> pb.ListMemoriesResponse:
        """See ``MemgymClient.list_memories``."""
        req = _memories_request(episode_id, page_size, page_token, memory_type)
        return await self._call("MemoryEnv/ListMemories", self.env.ListMemories, req, idempotent=True)

    async def score_episode(self, episode_id: str) -> pb.ScoreEpisodeResponse:
        """See ``MemgymClient.score_episode``."""
        req = pb.ScoreEpisodeRequest(episode_id=episode_id)
        return await self._call("MemoryEnv/ScoreEpisode", self.env.ScoreEpisode, req, idempotent=True)

    async def fork_episode(
        self, episode_id: str, count: int = 0, *, fork_ids: Optional[Sequence[str]] = None, seeds: Optional[Sequence[int]] = None
    ) -> List[pb.EpisodeState]:
        """See ``MemgymClient.fork_episode``."""
        req = _fork_request(episode_id, count, fork_ids, seeds)
        return list((await self._call("MemoryEnv/ForkEpisode", self.env.ForkEpisode, req, idempotent=False)).forks)

    async def close_episode(self, episode_id: str) -> pb.CloseEpisodeResponse:
        """See ``MemgymClient.close_episode``."""
        req = pb.CloseEpisodeRequest(episode_id=episode_id)
        return await self._call("MemoryEnv/CloseEpisode", self.env.CloseEpisode, req, idempotent=True)

    async def list_conversations(self) -> pb.ListConversationsResponse:
        """See ``MemgymClient.list_conversations``."""
        return await self._call(
            "Dataset/ListConversations", self.dataset.ListConversations, pb.ListConversationsRequest(), idempotent=True
        )

    async def list_questions(
        self,
        conversation_id: str = "",
        split: Union[None, int, str] = None,
        category: int = 0,
        page_size: int = 0,
        page_token: str = "",
    ) -> pb.ListQuestionsResponse:
        """See ``MemgymClient.list_questions``."""
        req = _questions_request(conversation_id, split, category, page_size, page_token)
        return await self._call("Dataset/ListQuestions", self.dataset.ListQuestions, req, idempotent=True)


__all__ = [
    "AsyncMemgymClient",
    "DEFAULT_ADDRESS",
    "EVALUATORS",
    "MemgymClient",
    "MemgymError",
    "message_to_dict",
    "pb",
]
