"""Python client for memgym, the memory-editing RL environment served over gRPC.

Why this package exists: RL trainers (verl and others) drive memgym episodes, and keep experience
libraries in memgym banks, from Python. It exposes ``MemgymClient`` (blocking) and ``AsyncMemgymClient``
(asyncio), the exceptions ``MemgymError`` and ``MemgymUnavailable``, the generated messages as
``memgym.pb`` (``memgym.v1.memgym_pb2``) and ``memgym.banks_pb`` (``memgym.v1.banks_pb2``), and the
seeds' ``ExperienceManager`` / ``SemanticMemoryManager`` on a bank (``memgym.banks``).
"""

from memgym.client import (
    DEFAULT_ADDRESS,
    EVALUATORS,
    AsyncMemgymClient,
    MemgymClient,
    message_to_dict,
)
from memgym._banks_client import BANK_FORMATS, BANK_KINDS
from memgym.banks import ExperienceManager, SemanticMemoryManager
from memgym.errors import MemgymError, MemgymUnavailable
from memgym.v1 import banks_pb2 as banks_pb
from memgym.v1 import memgym_pb2 as pb

__version__ = "0.1.0"

__all__ = [
    "AsyncMemgymClient",
    "BANK_FORMATS",
    "BANK_KINDS",
    "DEFAULT_ADDRESS",
    "EVALUATORS",
    "ExperienceManager",
    "MemgymClient",
    "MemgymError",
    "MemgymUnavailable",
    "SemanticMemoryManager",
    "banks_pb",
    "message_to_dict",
    "pb",
]
