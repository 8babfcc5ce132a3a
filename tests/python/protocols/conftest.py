"""Fixtures of the protocols tier: the real memgym server with its OpenEnv and MCP listeners, and the
released client packages that talk to them.

Why this exists: memgym's OpenEnv (``--openenv-addr``), MCP (``--mcp-addr``) and TRL surfaces are proven
with the clients their users run, never with hand-written imitations of them. scripts/install-protocols.sh
installs them, pinned, into three venvs (openenv 0.10.0 needs fastmcp 3, which needs mcp < 2, so the mcp
2.3.0 client cannot share its venv):

- ``$MEMGYM_PROTOCOLS_VENV/openenv``: openenv==0.10.0, for test_openenv.py;
- ``$MEMGYM_PROTOCOLS_VENV/mcp``: mcp==2.3.0, for test_mcp.py;
- ``$MEMGYM_PROTOCOLS_VENV/trl``: trl[openreward]==1.16.0, transformers==5.23.0 (``get_json_schema``), torch
  and openreward==0.1.167, for test_trl.py and test_trl_grpo.py (which also needs ``$MEMGYM_QWEN_TOKENIZER``,
  scripts/install-qwen.sh), and test_ors.py and test_trl_ors.py (ORS: ``ors_support.py`` starts the server).

A test module whose client is missing (or another version) is skipped, or fails when
``MEMGYM_PROTOCOLS_REQUIRE=1`` (tests/python/run.sh sets it, so a run never skips it silently).

``protocol_server(*args)`` starts ``memgym serve`` (the parent conftest's ``running_server``) with
``--openenv-addr`` and ``--mcp-addr`` on free loopback ports and waits until ``GET /health`` answers 200 on
the OpenEnv port and the MCP port accepts a TCP connection; ``servers`` is one such server per session.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import socket
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from importlib import metadata
from typing import Iterator

import pytest

from conftest import free_port, running_server

#: The released client versions this tier is written against (scripts/install-protocols.sh pins them).
OPENENV_VERSION = "0.10.0"
MCP_VERSION = "2.3.0"
MCP1_VERSION = "1.30.0"
TRANSFORMERS_VERSION = "5.23.0"


def require_package(distribution: str, version: str, module: str):
    """Imports ``module`` of ``distribution`` at exactly ``version``; skips (or fails, see above) otherwise."""
    try:
        found = metadata.version(distribution)
    except metadata.PackageNotFoundError:
        found = None
    if found != version:
        message = (
            f"{distribution}=={version} is needed (found {found or 'none'}): run the tier through "
            "tests/python/run.sh, or with the venvs of scripts/install-protocols.sh"
        )
        if os.environ.get("MEMGYM_PROTOCOLS_REQUIRE") == "1":
            pytest.fail(message, pytrace=False)
        pytest.skip(message, allow_module_level=True)
    return importlib.import_module(module)


@dataclass(frozen=True)
class Servers:
    """Where one memgym server listens: gRPC ``grpc`` (host:port), OpenEnv ``openenv`` and MCP ``mcp`` (URLs)."""

    grpc: str
    openenv: str
    mcp: str

    @property
    def mcp_url(self) -> str:
        """The streamable-HTTP MCP endpoint."""
        return f"{self.mcp}/mcp"


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1.0) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _tcp_ok(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def protocol_server(*args: str) -> Iterator[Servers]:
    """The real ``memgym serve`` with OpenEnv and MCP listeners on free loopback ports (and ``args``)."""
    openenv_port, mcp_port = free_port(), free_port()
    flags = ("--openenv-addr", f"127.0.0.1:{openenv_port}", "--mcp-addr", f"127.0.0.1:{mcp_port}", *args)
    with running_server(*flags) as grpc_address:
        servers = Servers(grpc_address, f"http://127.0.0.1:{openenv_port}", f"http://127.0.0.1:{mcp_port}")
        deadline = time.monotonic() + 60
        while not (_http_ok(f"{servers.openenv}/health") and _tcp_ok(mcp_port)):
            if time.monotonic() > deadline:
                pytest.fail(f"memgym serve {' '.join(flags)}: GET /health or the MCP port not ready after 60 s")
            time.sleep(0.2)
        yield servers


@pytest.fixture(scope="session")
def servers() -> Iterator[Servers]:
    """One real memgym server with every listener, for the whole session."""
    with protocol_server() as s:
        yield s


@pytest.fixture(scope="session")
def grpc_client(servers):
    """A gRPC ``MemgymClient`` of the ``servers`` fixture's server."""
    from memgym import MemgymClient

    with MemgymClient(servers.grpc, timeout=60.0) as c:
        yield c
