"""examples/verl/run_grpo_memgym.sh checked against verl's real config, without a GPU.

Why this exists: the launch script is never run here (verl needs torch, ray and GPUs), and a Hydra
override whose key verl does not have fails only at launch ("Could not override ..."). This test runs the
real script with a shim ``python3`` first on PATH: ``python3 -c ...`` goes to this interpreter (where
memgym-client is installed); ``python3 -m verl.trainer.main_ppo ...`` writes its arguments to a file and
exits 0. Every override key must then be a leaf of verl's own resolved config
(``verl/trainer/config/_generated_ppo_trainer.yaml``, read from the wheel) of the oldest supported verl
(0.7.1) and of the newest checked (0.9.1), with no ``+`` (append) overrides, and the reward function and
tool config it names must exist. Without the wheels the config check is skipped (``verl_wheel_file``).
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

from conftest import verl_wheel_file

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "verl" / "run_grpo_memgym.sh"
CONFIG_IN_WHEEL = "verl/trainer/config/_generated_ppo_trainer.yaml"

#: The verl versions whose config the script must fit: memgym_verl.tool.MIN_VERL and the newest checked.
VERSIONS = ("0.7.1", "0.9.1")


def verl_config(version: str) -> Dict[str, Any]:
    yaml = pytest.importorskip("yaml")  # PyYAML, which omegaconf brings
    return yaml.safe_load(verl_wheel_file(version, CONFIG_IN_WHEEL))


def run_script(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """Runs the launch script with the shim python3; the trainer's argv lands in tmp_path/argv (NUL-separated)."""
    shim_dir = tmp_path / "bin"
    shim_dir.mkdir(exist_ok=True)
    shim = shim_dir / "python3"
    shim.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "-m" ] && [ "$2" = "verl.trainer.main_ppo" ]; then\n'
        f"  shift 2; printf '%s\\0' \"$@\" > '{tmp_path / 'argv'}'; exit 0\n"
        "fi\n"
        f'exec "{sys.executable}" "$@"\n'
    )
    shim.chmod(0o755)
    full_env = {k: v for k, v in os.environ.items() if k != "VERL_REWARD_KEY_PREFIX"}
    full_env.update(env, PATH=f"{shim_dir}{os.pathsep}{os.environ['PATH']}")
    return subprocess.run(["bash", str(SCRIPT)], env=full_env, capture_output=True, text=True, timeout=60)


def overrides(tmp_path: Path) -> Dict[str, str]:
    done = run_script(tmp_path)
    assert done.returncode == 0, done.stderr
    argv: List[str] = (tmp_path / "argv").read_text().split("\0")[:-1]
    assert all("=" in arg for arg in argv), argv
    pairs = [arg.split("=", 1) for arg in argv]
    assert len({k for k, _ in pairs}) == len(pairs), "a key is set twice"
    return dict(pairs)


def config_leaf(config: Dict[str, Any], key: str) -> bool:
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return not isinstance(node, dict)  # a scalar override cannot replace a whole section


def test_min_verl_is_the_oldest_config_checked():
    from memgym_verl.tool import MIN_VERL

    assert VERSIONS[0] == MIN_VERL


@pytest.mark.parametrize("version", VERSIONS)
def test_every_override_key_exists_in_verls_config(tmp_path, version):
    config = verl_config(version)
    keys = overrides(tmp_path)
    assert not [k for k in keys if k[:1] in "+~"], "append/delete overrides depend on the verl version"
    missing = [k for k in keys if not config_leaf(config, k)]
    assert not missing, f"not settings of verl {version}'s config: {missing}"


def test_reward_function_and_tool_config_resolve(tmp_path):
    keys = overrides(tmp_path)
    assert keys["reward.reward_manager.name"] == "naive"
    assert keys["reward.custom_reward_function.name"] == "compute_score_async"
    # Loaded as verl loads it: a module from the file path, then the attribute.
    spec = importlib.util.spec_from_file_location("memgym_reward_under_test", keys["reward.custom_reward_function.path"])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert inspect.iscoroutinefunction(module.compute_score_async)
    assert Path(keys["actor_rollout_ref.rollout.multi_turn.tool_config_path"]).is_file()


def test_the_old_reward_prefix_variable_is_refused(tmp_path):
    done = run_script(tmp_path, VERL_REWARD_KEY_PREFIX="")
    assert done.returncode == 2 and "verl >= 0.7.1" in done.stderr
    assert not (tmp_path / "argv").exists()
