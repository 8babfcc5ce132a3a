"""memgym-locomo: memgym_verifiers under the Environments Hub id ``memgym-locomo`` (``vf-eval memgym-locomo``).

verifiers 0.4 imports a taskset id as a module and takes the ``Taskset``, ``Env`` and ``Harness``
subclasses its ``__all__`` names (``verifiers.v1.utils.loaders``): this module's are memgym_verifiers'.
``load_environment(**kwargs)`` is the Hub's conventional entry point for code that loads an environment by
calling it: it builds the same env verifiers' own loader builds for this id.
"""

from typing import Any

from memgym_verifiers import *  # noqa: F401,F403
from memgym_verifiers import MemgymEnv, MemgymEnvConfig, MemgymTaskConfig, MemgymTasksetConfig
from memgym_verifiers import __all__ as _exports

__all__ = [*_exports, "load_environment"]


def load_environment(**kwargs: Any) -> MemgymEnv:
    """The env for ``memgym-locomo``: keys of ``MemgymTasksetConfig`` (``split``, ``conversation_id``,
    ``category``, ``include_adversarial``) set the taskset, keys of ``MemgymTaskConfig`` (``address``, …) its
    task, e.g. ``load_environment(split="test", address="127.0.0.1:50051")``. An unknown key is refused by
    the configs' own validation."""
    import verifiers.v1 as vf

    taskset_keys = set(MemgymTasksetConfig.model_fields)
    task = {k: kwargs.pop(k) for k in list(kwargs) if k in MemgymTaskConfig.model_fields and k not in taskset_keys}
    config = MemgymEnvConfig(taskset=MemgymTasksetConfig(id="memgym-locomo", task=MemgymTaskConfig(**task), **kwargs))
    return vf.load_environment(config)
