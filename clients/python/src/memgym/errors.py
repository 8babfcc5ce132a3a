"""Python exceptions for memgym RPC failures.

Why this exists: callers (trainers, the verl adapter) must tell "the policy sent a bad call" from "the
server is not there" or "the server is busy" without knowing gRPC. Every failed RPC becomes a
``MemgymError`` carrying the gRPC status ``code``, the server's message (which names the offending field),
the address, and what the server's status details say (``google.rpc.ErrorInfo`` and ``RetryInfo``): a
stable ``reason`` ("EPISODE_CAP", "INVALID_ARGUMENT", ...), the ``field`` at fault, whether the same
request may succeed if sent again (``retryable``) and after how long (``retry_delay``). A server that
cannot be reached becomes ``MemgymUnavailable`` (retryable), whose message names the address.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

import grpc
from google.rpc import error_details_pb2, status_pb2

#: The trailing metadata key that carries a ``google.rpc.Status`` with the details.
DETAILS_KEY = "grpc-status-details-bin"


class MemgymError(Exception):
    """A memgym RPC failed.

    Attributes:
        code: the ``grpc.StatusCode`` (e.g. ``INVALID_ARGUMENT``, ``NOT_FOUND``).
        details: the server's message.
        method: the RPC, e.g. ``"MemoryEnv/CallTool"``.
        address: the server address the client talks to.
    """

    def __init__(
        self,
        code: grpc.StatusCode,
        details: str,
        *,
        method: str = "",
        address: str = "",
        reason: Optional[str] = None,
        retryable: bool = False,
        field: Optional[str] = None,
        retry_delay: Optional[float] = None,
    ):
        self.code = code
        self.details = details or ""
        self.method = method
        self.address = address
        #: The server's machine-readable reason (the book's "Errors and limits"); None when it sent none.
        self.reason = reason
        #: Whether the same request sent again may succeed (the server was busy, down or slow).
        self.retryable = retryable
        #: The argument at fault, when one is.
        self.field = field
        #: Seconds the server asks to wait before a retry, when it says.
        self.retry_delay = retry_delay
        name = code.name if isinstance(code, grpc.StatusCode) else str(code)
        where = f" ({method} at {address})" if method else (f" (at {address})" if address else "")
        super().__init__(f"{name}: {self.details}{where}")


class MemgymUnavailable(MemgymError):
    """The memgym server at ``address`` could not be reached (or answered UNAVAILABLE after retries)."""

    def __init__(self, details: str, *, method: str = "", address: str = "", **info: Any):
        info.setdefault("retryable", True)
        super().__init__(grpc.StatusCode.UNAVAILABLE, details, method=method, address=address, **info)
        self.args = (f"memgym server at {address} is unavailable ({method}): {self.details}",)

    def __str__(self) -> str:
        return self.args[0]


def status_info(err: Any) -> Tuple[Optional[str], bool, Optional[str], Optional[float]]:
    """``(reason, retryable, field, retry_delay)`` from a grpc error's status details (sync or aio);
    ``(None, False, None, None)`` when it carries none (tonic's own statuses, a dead connection)."""
    metadata = err.trailing_metadata() if hasattr(err, "trailing_metadata") else None
    raw = next((value for key, value in (metadata or ()) if key == DETAILS_KEY), None)
    if not raw:
        return None, False, None, None
    try:
        status = status_pb2.Status.FromString(raw)
    except Exception:  # a malformed trailer is no reason to lose the error itself
        return None, False, None, None
    reason, retryable, field, delay = None, False, None, None
    for any_ in status.details:
        info = error_details_pb2.ErrorInfo()
        retry = error_details_pb2.RetryInfo()
        if any_.Unpack(info):
            reason = info.reason or None
            retryable = info.metadata.get("retryable") == "true"
            field = info.metadata.get("field") or None
        elif any_.Unpack(retry):
            delay = retry.retry_delay.seconds + retry.retry_delay.nanos / 1e9
    return reason, retryable, field, delay


def from_rpc_error(err: grpc.RpcError, *, method: str, address: str) -> MemgymError:
    """Maps a grpc error (sync or aio) to the matching MemgymError, with its status details."""
    code: Optional[grpc.StatusCode] = err.code() if hasattr(err, "code") else None
    details = err.details() if hasattr(err, "details") else str(err)
    if code is None:
        code = grpc.StatusCode.UNKNOWN
    reason, retryable, field, delay = status_info(err)
    info = {"reason": reason, "field": field, "retry_delay": delay}
    if code == grpc.StatusCode.UNAVAILABLE:
        return MemgymUnavailable(details or "", method=method, address=address, **info)
    return MemgymError(code, details or "", method=method, address=address, retryable=retryable, **info)
