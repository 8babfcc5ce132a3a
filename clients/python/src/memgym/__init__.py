"""Python client for memgym, the memory-editing RL environment served over gRPC.

Why this package exists: RL trainers (verl and others) drive memgym episodes from Python. It exposes
``MemgymClient`` (blocking) and ``AsyncMemgymClient`` (asyncio), the exceptions ``MemgymError`` and
``MemgymUnavailable``, and the generated messages as ``memgym.pb`` (``memgym.v1.memgym_pb2``).
"""

from memgym.client import (
    DEFAULT_ADDRESS,
    EVALUATORS,
    AsyncMemgymClient,
    MemgymClient,
    message_to_dict,
)
from memgym.errors import MemgymError, MemgymUnavailable
from memgym.v1 import memgym_pb2 as pb

__version__ = "0.1.0"

__all__ = [
    "AsyncMemgymClient",
    "DEFAULT_ADDRESS",
    "EVALUATORS",
    "MemgymClient",
    "MemgymError",
    "MemgymUnavailable",
    "message_to_dict",
    "pb",
]
