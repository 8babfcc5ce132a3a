"""The real ``memgym serve --ors-addr`` (the ``ors`` and ``grpc`` fixtures) for the Open Reward Standard tests (test_ors.py with the openreward
SDK's client, test_trl_ors.py with ``trl.experimental.openreward``), and the SDK's pinned version.

The SDK builds its session URL from the platform URL by adding a ``sessions.`` subdomain unless
``OPENREWARD_SESSION_URL`` names it, and checks PyPI for a newer release unless
``OPENREWARD_DISABLE_UPDATE_CHECK`` is set: ``ors_env`` sets both (no network beyond loopback).
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from typing import Iterator

import pytest

from conftest import free_port, running_server
from memgym import MemgymClient
from protocols.conftest import _http_ok

#: The openreward SDK the tests run (scripts/install-protocols.sh pins it in the trl venv).
OPENREWARD_VERSION = "0.1.167"


@dataclass(frozen=True)
class OrsServer:
    """One memgym server: gRPC ``grpc`` (host:port) and the ORS endpoint ``url``."""

    grpc: str
    url: str


@contextlib.contextmanager
def ors_server(*args: str) -> Iterator[OrsServer]:
    """``memgym serve --ors-addr 127.0.0.1:PORT ARGS...``, ready when ``GET /health`` answers 200."""
    port = free_port()
    with running_server("--ors-addr", f"127.0.0.1:{port}", *args) as grpc_address:
        server = OrsServer(grpc_address, f"http://127.0.0.1:{port}")
        deadline = time.monotonic() + 60
        while not _http_ok(f"{server.url}/health"):
            if time.monotonic() > deadline:
                pytest.fail(f"memgym serve --ors-addr: GET /health not ready after 60 s")
            time.sleep(0.2)
        yield server


@contextlib.contextmanager
def ors_env(url: str) -> Iterator[None]:
    """The SDK's environment variables for a self-hosted ORS server at ``url``."""
    saved = {k: os.environ.get(k) for k in ("OPENREWARD_SESSION_URL", "OPENREWARD_DISABLE_UPDATE_CHECK", "TRL_EXPERIMENTAL_SILENCE")}
    os.environ.update({"OPENREWARD_SESSION_URL": url, "OPENREWARD_DISABLE_UPDATE_CHECK": "1", "TRL_EXPERIMENTAL_SILENCE": "1"})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="module")
def ors() -> Iterator[OrsServer]:
    """One ORS server per test module, with the SDK's environment variables set."""
    with ors_server() as server, ors_env(server.url):
        yield server


@pytest.fixture(scope="module")
def grpc(ors):
    """A gRPC ``MemgymClient`` of the ``ors`` fixture's server."""
    with MemgymClient(ors.grpc, timeout=60.0) as c:
        yield c
