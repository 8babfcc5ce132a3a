"""The client's sources stay valid Python 3.9, checked statically.

Why this exists: memgym-client says ``requires-python >=3.9`` but only Python 3.11 runs here (no 3.9
interpreter can be installed). ``vermin`` reads the sources and reports every construct (syntax, stdlib
module, function or keyword argument) newer than the target, with annotations evaluated as a 3.9
interpreter would. It covers ``memgym`` and ``memgym_verl`` alike (verl itself needs Python >= 3.10, but
nothing in the adapter's own code does); the generated stubs in ``memgym/v1`` are checked when a build
has written them into the source tree.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "clients" / "python" / "src"


def test_sources_need_no_python_newer_than_3_9():
    vermin = Path(sys.executable).with_name("vermin")  # the console script beside this interpreter
    if not vermin.is_file():
        pytest.skip(f"vermin not installed at {vermin} (tests/python/run.sh installs it)")
    done = subprocess.run(
        [str(vermin), "--target=3.9-", "--violations", "--eval-annotations", "--no-tips", str(SRC)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
