"""Python client for memgym, the memory-editing RL environment served over gRPC.

Why this package exists: RL trainers (verl and others) drive memgym episodes, and keep experience
libraries and cross-episode agent memories in memgym banks, from Python. It exposes ``MemgymClient``
(blocking) and ``AsyncMemgymClient`` (asyncio), the exceptions ``MemgymError`` and ``MemgymUnavailable``,
the generated messages as ``memgym.pb`` (``memgym.v1.memgym_pb2``), ``memgym.banks_pb``
(``memgym.v1.banks_pb2``), ``memgym.agent_pb`` (``memgym.v1.agent_pb2``) and ``memgym.learn_pb``
(``memgym.v1.learn_pb2``), the seeds' ``ExperienceManager`` / ``SemanticMemoryManager`` on a bank
(``memgym.banks``), the agent-memory design's agent memory functions on an agent bank (``memgym.agent_memory``, whose
memory object is ``AgentMemory``), and the Training-Free GRPO design's ``SemanticExtractor`` / ``Trajectory`` on the server's
``Learn`` service (``memgym.learn``).
"""

from memgym.client import (
    DEFAULT_ADDRESS,
    EVALUATORS,
    AsyncMemgymClient,
    MemgymClient,
    message_to_dict,
)
from memgym._agent_client import CONSOLIDATION_MODES
from memgym._banks_client import BANK_FORMATS, BANK_KINDS
from memgym._learn_client import LEARN_MODES, VARIATION_RULES
from memgym.agent_memory import AgentMemory
from memgym.banks import ExperienceManager, SemanticMemoryManager
from memgym.errors import MemgymError, MemgymUnavailable
from memgym.learn import SemanticExtractor, Trajectory
from memgym.v1 import agent_pb2 as agent_pb
from memgym.v1 import banks_pb2 as banks_pb
from memgym.v1 import learn_pb2 as learn_pb
from memgym.v1 import memgym_pb2 as pb

__version__ = "0.1.0"

__all__ = [
    "AgentMemory",
    "AsyncMemgymClient",
    "BANK_FORMATS",
    "BANK_KINDS",
    "CONSOLIDATION_MODES",
    "DEFAULT_ADDRESS",
    "EVALUATORS",
    "ExperienceManager",
    "LEARN_MODES",
    "MemgymClient",
    "MemgymError",
    "MemgymUnavailable",
    "SemanticExtractor",
    "SemanticMemoryManager",
    "Trajectory",
    "VARIATION_RULES",
    "agent_pb",
    "banks_pb",
    "learn_pb",
    "message_to_dict",
    "pb",
]
