"""pytest fixtures: the real memgym server binary on a free loopback port.

Why this exists: the Python client and the verl adapter are tested against the real server, never a
fake. ``running_server(*args)`` starts ``memgym serve --addr 127.0.0.1:PORT ARGS`` (binary from
``$MEMGYM_BIN``, else ``$CARGO_TARGET_DIR/debug/memgym``, else ``~/.cache/memgym/target/debug/memgym``),
waits until the gRPC health check says SERVING, and stops it (SIGTERM, then SIGKILL); the session fixture
``server_address`` is one such server. Released verl wheels (downloaded by run.sh) are read as text with
``verl_wheel_file``; the tests that run verl's code live in ``with_verl/``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Iterator, Optional

import grpc
import pytest

HERE = Path(__file__).resolve().parent


def pytest_report_header(config):
    return f"memgym binary: {memgym_bin()}"


def memgym_bin() -> Path:
    if os.environ.get("MEMGYM_BIN"):
        return Path(os.environ["MEMGYM_BIN"])
    if os.environ.get("CARGO_TARGET_DIR"):
        return Path(os.environ["CARGO_TARGET_DIR"]) / "debug" / "memgym"
    return Path.home() / ".cache" / "memgym" / "target" / "debug" / "memgym"


def verl_wheels_dir() -> Path:
    return Path(os.environ.get("MEMGYM_VERL_WHEELS") or Path.home() / ".cache" / "memgym" / "verl-wheels")


def verl_wheel_file(version: str, path: str) -> Optional[str]:
    """The text of ``path`` in the verl ``version`` wheel (None if the wheel has no such file).

    Wheels: ``$MEMGYM_VERL_WHEELS`` (default ``~/.cache/memgym/verl-wheels``; run.sh fills it with
    ``pip download --no-deps``). Without the wheel the calling test is skipped.
    """
    wheels = sorted(verl_wheels_dir().glob(f"verl-{version}-*.whl"))
    if not wheels:
        pytest.skip(f"no verl {version} wheel in {verl_wheels_dir()} (tests/python/run.sh downloads it; or set MEMGYM_VERL_WHEELS)")
    with zipfile.ZipFile(wheels[0]) as wheel:
        if path not in wheel.namelist():
            return None
        return wheel.read(path).decode()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, what: str, limit: float = 120.0) -> None:
    """Waits until something listens on 127.0.0.1:``port``; fails if ``proc`` exits or ``limit`` s pass."""
    deadline = time.monotonic() + limit
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            assert proc.poll() is None, f"{what} exited"
            assert time.monotonic() < deadline, f"{what} did not listen"
            time.sleep(0.1)


def _serving(address: str) -> bool:
    from grpc_health.v1 import health_pb2, health_pb2_grpc  # type: ignore

    with grpc.insecure_channel(address) as ch:
        try:
            resp = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=1.0)
        except grpc.RpcError:
            return False
        return resp.status == health_pb2.HealthCheckResponse.SERVING


def _ready(address: str) -> bool:
    try:
        return _serving(address)
    except ImportError:  # grpcio-health-checking not installed: a connectable channel will do
        with grpc.insecure_channel(address) as ch:
            try:
                grpc.channel_ready_future(ch).result(timeout=1.0)
                return True
            except grpc.FutureTimeoutError:
                return False


@contextlib.contextmanager
def running_server(*args: str) -> Iterator[str]:
    """Starts ``memgym serve --addr 127.0.0.1:PORT ARGS...`` (the real binary) and yields its address."""
    binary = memgym_bin()
    if not binary.is_file():
        pytest.fail(f"memgym binary not found at {binary}: build it (cargo build) or set MEMGYM_BIN")
    address = f"127.0.0.1:{free_port()}"
    log = tempfile.NamedTemporaryFile(prefix="memgym-server-", suffix=".log", delete=False)
    # Each server its own banks database (a SQLite banks file has one owner), unless the test picks one.
    banks = [] if any(a in ("--banks-dir", "--banks-url", "--no-banks") for a in args) else ["--banks-dir", tempfile.mkdtemp(prefix="memgym-banks-")]
    proc = subprocess.Popen([str(binary), "serve", "--addr", address, *banks, *args], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while not _ready(address):
            if proc.poll() is not None:
                pytest.fail(f"memgym serve exited with {proc.returncode}: {Path(log.name).read_text()[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"memgym serve not ready at {address} after 120 s: {Path(log.name).read_text()[-3000:]}")
            time.sleep(0.2)
        yield address
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        os.unlink(log.name)


@pytest.fixture(scope="session")
def server_address():
    """Starts the real memgym server and yields its address ("127.0.0.1:PORT")."""
    with running_server() as address:
        yield address


@pytest.fixture(scope="session")
def client(server_address):
    from memgym import MemgymClient

    with MemgymClient(server_address, timeout=30.0) as c:
        yield c


@pytest.fixture(scope="session")
def question(client):
    """A category 1-4 question of conv-26 whose answer has tokens (conv-26:q0, "7 May 2023")."""
    return "conv-26:q0"
