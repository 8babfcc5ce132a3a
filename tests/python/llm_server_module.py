"""scripts/llm-server.py loaded once as a module, for the tests that drive its request checks, its handler and
its parser without running it as a program (it imports the llama.cpp runtime only when a model is loaded),
leaving no __pycache__ in scripts/."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SERVER = Path(__file__).resolve().parents[2] / "scripts" / "llm-server.py"


def _load():
    spec = importlib.util.spec_from_file_location("memgym_llm_server", SERVER)
    module = importlib.util.module_from_spec(spec)
    dont_write, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = dont_write
    return module


server = _load()
