"""Fixtures of the real-LLM tier: a real instruction-tuned model served on loopback by scripts/llm-server.py,
and the real memgym server talking to it.

Why this exists: every LLM path of memgym (the llm-f1 and llm-judge evaluators, --llm-edit merge and split)
is unit-tested against scripted replies; this tier shows that a real model's replies parse, score and
survive the edit checks, and that failures of a real endpoint map to the right status codes.

The model comes from scripts/install-llm.sh, which prints MEMGYM_LOCAL_LLM_PYTHON, MEMGYM_LOCAL_LLM_GGUF and
MEMGYM_LOCAL_LLM_NAME (tests/python/run.sh exports them). Without them the tier is skipped, or fails when
MEMGYM_REQUIRE_LLM=1 (run.sh sets it, so CI never skips it silently).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Optional

import pytest

ROOT = Path(__file__).resolve().parents[3]
SERVER = ROOT / "scripts" / "llm-server.py"
# Generous per-attempt timeout for memgym's LLM client: the model answers one request at a time on CPU
# (about 2 s for a QA request, 5-30 s for an edit), and a machine may be twice as slow as this one.
LLM_TIMEOUT_MS = "180000"


def _require(name: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        message = f"{name} is not set: run `eval \"$(scripts/install-llm.sh)\"` (tests/python/run.sh does)"
        if os.environ.get("MEMGYM_REQUIRE_LLM") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return value


class LlmServer:
    """One scripts/llm-server.py process: start, stats, kill, restart on the same port. `extra`: more flags."""

    def __init__(self, python: str, gguf: str, model: str, log_dir: Path, extra: tuple[str, ...] = ()):
        self.python, self.gguf, self.model = python, gguf, model
        self.extra = tuple(extra)
        self.log_dir = log_dir
        self.proc: Optional[subprocess.Popen] = None
        self.port = 0
        self.url = ""
        self.log_file = log_dir / "requests.jsonl"

    def start(self) -> "LlmServer":
        cmd = [self.python, str(SERVER), "--model", self.gguf, "--model-name", self.model, "--port", str(self.port), "--exit-with-stdin"]
        cmd += ["--log-requests", str(self.log_file), *self.extra]
        with open(self.log_dir / "stderr.log", "ab") as stderr:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True)
        line = self.proc.stdout.readline()  # printed once the model is loaded and the socket listens
        match = re.search(r"listening on (http://127\.0\.0\.1:(\d+)/v1)", line)
        if not match:
            self.proc.kill()
            pytest.fail(f"llm-server did not start: {line!r}; {(self.log_dir / 'stderr.log').read_text()[-2000:]}")
        self.url, self.port = match.group(1), int(match.group(2))
        return self

    def get(self, path: str) -> dict:
        with urllib.request.urlopen(self.url.removesuffix("/v1") + path, timeout=30) as r:
            return json.loads(r.read())

    def post(self, body: dict) -> tuple[int, dict]:
        req = urllib.request.Request(self.url + "/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=300) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def stats(self) -> dict:
        return self.get("/stats")

    def wait_active(self, n: int = 1, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while self.stats()["active"] < n:
            if time.monotonic() > deadline:
                pytest.fail(f"no request reached the LLM server in {timeout} s")
            time.sleep(0.02)

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def requests(self) -> list[dict]:
        """Every completion logged so far (messages and reply), oldest first."""
        return [json.loads(line) for line in self.log_file.read_text().splitlines()] if self.log_file.exists() else []


@pytest.fixture(scope="session")
def llm_env() -> tuple[str, str, str]:
    return _require("MEMGYM_LOCAL_LLM_PYTHON"), _require("MEMGYM_LOCAL_LLM_GGUF"), _require("MEMGYM_LOCAL_LLM_NAME")


@pytest.fixture(scope="session")
def llm(llm_env, tmp_path_factory):
    """The shared real-LLM server."""
    server = LlmServer(*llm_env, tmp_path_factory.mktemp("llm")).start()
    yield server
    server.kill()


@pytest.fixture
def own_llm(llm_env, tmp_path):
    """A real-LLM server of the test's own (it may be killed)."""
    server = LlmServer(*llm_env, tmp_path).start()
    yield server
    server.kill()


@pytest.fixture
def llm_no_prompt_cache(llm_env, tmp_path):
    """A real-LLM server of the test's own with --no-prompt-cache: every prompt prefilled from scratch."""
    server = LlmServer(*llm_env, tmp_path, extra=("--no-prompt-cache",)).start()
    yield server
    server.kill()


def memgym_flags(llm: LlmServer, *extra: str) -> list[str]:
    """`memgym serve` flags for an LLM endpoint at `llm`."""
    return ["--llm-base-url", llm.url, "--llm-model", llm.model, "--llm-timeout-ms", LLM_TIMEOUT_MS, *extra]


