"""examples/verl/run_grpo_memgym.sh checked against verl's real config, without a GPU.

Why this exists: the launch script is never run here (verl needs torch, ray and GPUs), and a Hydra
override whose key verl does not have fails only at launch ("Could not override ..."). This test runs the
real script with a shim ``python3`` first on PATH: ``python3 -c ...`` goes to this interpreter (where
memgym-client is installed); ``python3 -m verl.trainer.main_ppo ...`` writes its arguments to a file and
exits 0. Every override key must then be a leaf of verl's own resolved config
(``verl/trainer/config/_generated_ppo_trainer.yaml``, read from the wheel) of the layout's version —
0.5.0 for ``VERL_LAYOUT=0.5``, 0.9.1 for ``VERL_LAYOUT=0.8`` — with no ``+`` (append) overrides, and the
reward function and tool config it names must exist.

Wheels: ``$MEMGYM_VERL_WHEELS`` (default ``~/.cache/memgym/verl-wheels``; tests/python/run.sh fills it
with ``pip download --no-deps``). Without them the config check is skipped.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any, Dict, List

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "verl" / "run_grpo_memgym.sh"
CONFIG_IN_WHEEL = "verl/trainer/config/_generated_ppo_trainer.yaml"

#: VERL_LAYOUT -> (verl version whose config it is checked against, reward function, reward key prefix)
LAYOUTS = {
    "0.8": ("0.9.1", "compute_score_async", "reward.custom_reward_function"),
    "0.5": ("0.5.0", "compute_score_batch", "custom_reward_function"),
}


def wheels_dir() -> Path:
    return Path(os.environ.get("MEMGYM_VERL_WHEELS") or Path.home() / ".cache" / "memgym" / "verl-wheels")


def verl_config(version: str) -> Dict[str, Any]:
    yaml = pytest.importorskip("yaml")  # PyYAML, which omegaconf brings
    wheels = sorted(wheels_dir().glob(f"verl-{version}-*.whl"))
    if not wheels:
        pytest.skip(f"no verl {version} wheel in {wheels_dir()} (tests/python/run.sh downloads it; or set MEMGYM_VERL_WHEELS)")
    with zipfile.ZipFile(wheels[0]) as wheel:
        return yaml.safe_load(wheel.read(CONFIG_IN_WHEEL))


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
    full_env = {k: v for k, v in os.environ.items() if k not in ("VERL_LAYOUT", "VERL_REWARD_KEY_PREFIX")}
    full_env.update(env, PATH=f"{shim_dir}{os.pathsep}{os.environ['PATH']}")
    return subprocess.run(["bash", str(SCRIPT)], env=full_env, capture_output=True, text=True, timeout=60)


def overrides(tmp_path: Path, layout: str) -> Dict[str, str]:
    done = run_script(tmp_path, VERL_LAYOUT=layout)
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


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_every_override_key_exists_in_verls_config(tmp_path, layout):
    version, _, _ = LAYOUTS[layout]
    config = verl_config(version)
    keys = overrides(tmp_path, layout)
    assert not [k for k in keys if k[:1] in "+~"], "append/delete overrides depend on the verl version"
    missing = [k for k in keys if not config_leaf(config, k)]
    assert not missing, f"not settings of verl {version}'s config: {missing}"


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_reward_function_and_tool_config_resolve(tmp_path, layout):
    _, function_name, prefix = LAYOUTS[layout]
    keys = overrides(tmp_path, layout)
    assert keys[f"{prefix}.name"] == function_name
    # Loaded as verl loads it: a module from the file path, then the attribute.
    spec = importlib.util.spec_from_file_location("memgym_reward_under_test", keys[f"{prefix}.path"])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    function = getattr(module, function_name)
    assert inspect.iscoroutinefunction(function) == (layout == "0.8")
    if layout == "0.5":
        assert keys["reward_model.reward_manager"] == "batch"
        assert list(inspect.signature(function).parameters)[:4] == ["data_sources", "solution_strs", "ground_truths", "extra_infos"]
    else:
        assert keys["reward.reward_manager.name"] == "naive"
    assert Path(keys["actor_rollout_ref.rollout.multi_turn.tool_config_path"]).is_file()


def test_unknown_layout_and_the_old_variable_are_refused(tmp_path):
    done = run_script(tmp_path, VERL_LAYOUT="0.7")
    assert done.returncode == 2 and "VERL_LAYOUT must be 0.8" in done.stderr
    done = run_script(tmp_path, VERL_REWARD_KEY_PREFIX="reward.")
    assert done.returncode == 2 and "VERL_LAYOUT" in done.stderr
    assert not (tmp_path / "argv").exists()
