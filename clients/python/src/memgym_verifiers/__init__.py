"""memgym in verifiers 0.4 (``verifiers.v1``) and prime-rl: the LoCoMo questions as a ``Taskset``, each
rollout on an episode of its own whose six memory tools the policy reaches at memgym's per-episode MCP
endpoint, the reward memgym's ``ScoreEpisode``.

``verifiers`` finds a taskset by importing its id as a module and taking the ``Taskset`` and ``Env``
subclasses its ``__all__`` exports; this package is one (``vf-eval memgym-verifiers``), and the Environments
Hub package ``environments/memgym_locomo`` re-exports it under the id ``memgym-locomo``.

- ``taskset.py``: ``MemgymTaskset`` (questions from the server's Dataset service), ``MemgymTask`` (the
  toolset URL, the freshness check, the ``memgym`` reward), their configs;
- ``env.py``: ``MemgymEnv`` (opens and closes one episode per rollout);
- ``toolset.py``: the per-episode endpoint as an external toolset; ``harness.py``: the default harness
  (verifiers' ``null`` chat loop: the episode's tools and nothing else, not a shell);
- ``endpoint.py``: its URL; ``prompts.py``: the opening messages memgym gives every trainer.

Needs Python 3.11+ and ``verifiers>=0.4,<0.5`` (``pip install 'memgym-client[verifiers]'``).
"""

from __future__ import annotations

from .endpoint import episode_url
from .env import MemgymEnv, MemgymEnvConfig
from .harness import MemgymHarness
from .prompts import SYSTEM_PROMPT, user_prompt
from .taskset import MemgymData, MemgymTask, MemgymTaskConfig, MemgymTaskset, MemgymTasksetConfig
from .toolset import MemgymToolset

__all__ = [
    "MemgymData",
    "MemgymEnv",
    "MemgymEnvConfig",
    "MemgymHarness",
    "MemgymTask",
    "MemgymTaskConfig",
    "MemgymTaskset",
    "MemgymTasksetConfig",
    "MemgymToolset",
    "SYSTEM_PROMPT",
    "episode_url",
    "user_prompt",
]
