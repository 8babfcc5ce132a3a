"""Python exceptions for memgym RPC failures.

Why this exists: callers (trainers, the verl adapter) must tell "the policy sent a bad call" from "the
server is not there" without knowing gRPC. Every failed RPC becomes a ``MemgymError`` carrying the gRPC
status ``code``, the server's message (which names the offending field) and the address; a server that
cannot be reached becomes ``MemgymUnavailable``, whose message names the address.
"""

from __future__ import annotations

from typing import Optional

import grpc


class MemgymError(Exception):
    """A memgym RPC failed.

    Attributes:
        code: the ``grpc.StatusCode`` (e.g. ``INVALID_ARGUMENT``, ``NOT_FOUND``).
        details: the server's message.
        method: the RPC, e.g. ``"MemoryEnv/CallTool"``.
        address: the server address the client talks to.
    """

    def __init__(self, code: grpc.StatusCode, details: str, *, method: str = "", address: str = ""):
        self.code = code
        self.details = details or ""
        self.method = method
        self.address = address
        name = code.name if isinstance(code, grpc.StatusCode) else str(code)
        where = f" ({method} at {address})" if method else (f" (at {address})" if address else "")
        super().__init__(f"{name}: {self.details}{where}")


class MemgymUnavailable(MemgymError):
    """The memgym server at ``address`` could not be reached (or answered UNAVAILABLE after retries)."""

    def __init__(self, details: str, *, method: str = "", address: str = ""):
        super().__init__(grpc.StatusCode.UNAVAILABLE, details, method=method, address=address)
        self.args = (f"memgym server at {address} is unavailable ({method}): {self.details}",)

    def __str__(self) -> str:
        return self.args[0]


def from_rpc_error(err: grpc.RpcError, *, method: str, address: str) -> MemgymError:
    """Maps a grpc error (sync or aio) to the matching MemgymError."""
    code: Optional[grpc.StatusCode] = err.code() if hasattr(err, "code") else None
    details = err.details() if hasattr(err, "details") else str(err)
    if code is None:
        code = grpc.StatusCode.UNKNOWN
    if code == grpc.StatusCode.UNAVAILABLE:
        return MemgymUnavailable(details or "", method=method, address=address)
    return MemgymError(code, details or "", method=method, address=address)
