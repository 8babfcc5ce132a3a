"""The Containerfile, built with podman and started, then used over gRPC from the host.

Why this exists: the image is how many operators run memgym. This builds it from the committed Containerfile
(the binary under test as ``prebuilt/memgym``, stripped; a Debian 12 base made by scripts/container-base.sh,
since no image registry is reachable here), starts it, and checks what the Containerfile promises:
- it runs as the non-root user 10001;
- its health check (``memgym health``) reports healthy;
- it serves the embedded data set (an episode is created and scored from the host);
- its banks live in the ``/var/lib/memgym`` volume.
The image's size is printed (the book's "Operations → Container" gives a release build's).

Needs podman, runc and debootstrap (Debian's packages; scripts/test installs them) and root for debootstrap;
skipped without them unless ``MEMGYM_CONTAINER_REQUIRE=1``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from conftest import free_port, memgym_bin
from memgym import MemgymClient

ROOT = Path(__file__).resolve().parents[2]
# This machine's sandbox refuses podman's default rlimits and crun's cgroup handling: runc and explicit
# limits work here, and are harmless elsewhere.
RUN_FLAGS = ["--runtime", "runc", "--ulimit", "nofile=4096:4096", "--ulimit", "nproc=1024:1024"]


def _podman(*args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout)
    if check:
        assert out.returncode == 0, f"podman {' '.join(args[:3])}: {out.stderr[-2000:]}"
    return out


@pytest.fixture()
def image(tmp_path):
    missing = [t for t in ("podman", "runc", "debootstrap") if shutil.which(t) is None]
    if missing or os.geteuid() != 0:
        why = f"needs {', '.join(missing) or 'root'} (Debian's packages)"
        if os.environ.get("MEMGYM_CONTAINER_REQUIRE") == "1":
            pytest.fail(why)
        pytest.skip(why)
    base = subprocess.run([str(ROOT / "scripts" / "container-base.sh")], capture_output=True, text=True, timeout=900)
    assert base.returncode == 0, base.stderr[-2000:]
    base_image = base.stdout.strip().splitlines()[-1]
    context = tmp_path / "context"
    (context / "prebuilt").mkdir(parents=True)
    binary = context / "prebuilt" / "memgym"
    stripped = subprocess.run(["strip", "-o", str(binary), str(memgym_bin())], capture_output=True)
    if stripped.returncode != 0:
        shutil.copy2(memgym_bin(), binary)
    tag = f"localhost/memgym-test:{uuid.uuid4().hex[:8]}"
    _podman("build", "--quiet", "--format", "docker", *RUN_FLAGS, "--build-arg", f"BUILDER={base_image}",
            "--build-arg", f"RUNTIME={base_image}", "-f", str(ROOT / "Containerfile"), "-t", tag, str(context))
    try:
        yield tag
    finally:
        _podman("rmi", "-f", tag, check=False)


def test_the_image_runs_as_non_root_healthy_and_serves(image):
    size = int(_podman("image", "inspect", "--format", "{{.Size}}", image).stdout.strip())
    print(f"\nimage {image}: {size / 1e6:.0f} MB (a stripped debug build of the binary)")
    assert _podman("image", "inspect", "--format", "{{.Config.User}}", image).stdout.strip() == "10001:10001"
    port = free_port()
    addr = f"127.0.0.1:{port}"
    name = f"memgym-test-{uuid.uuid4().hex[:8]}"
    _podman("run", "-d", "--name", name, *RUN_FLAGS, "--network", "host", "-e", f"MEMGYM_ADDR={addr}",
            "-e", f"MEMGYM_HEALTH_ADDR={addr}", image)
    try:
        deadline = time.monotonic() + 180
        while _podman("healthcheck", "run", name, check=False).returncode != 0:
            running = _podman("inspect", "--format", "{{.State.Running}}", name).stdout.strip()
            assert running == "true", _podman("logs", name, check=False).stderr[-2000:]
            assert time.monotonic() < deadline, "the container never turned healthy"
            time.sleep(1)
        assert _podman("inspect", "--format", "{{.State.Health.Status}}", name).stdout.strip() == "healthy"
        assert _podman("exec", name, "id", "-u").stdout.strip() == "10001"
        with MemgymClient(addr, retries=0) as c:
            created = c.create_episode("conv-26:q0", episode_id="in-a-container")
            assert created.initial_memory_count > 0
            assert c.score_episode(created.episode_id).evaluator
            c.create_bank("container-bank")
            c.add_experience("container-bank", "Banks persist in the image's volume.")
        files = _podman("exec", name, "ls", "-R", "/var/lib/memgym").stdout
        assert "banks.db" in files, files
    finally:
        _podman("rm", "-f", name, check=False)
