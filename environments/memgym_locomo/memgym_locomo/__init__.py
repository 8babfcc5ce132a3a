"""memgym-locomo: memgym_verifiers under the Environments Hub id ``memgym-locomo`` (``vf-eval memgym-locomo``).

verifiers 0.4 imports a taskset id as a module and takes the ``Taskset``, ``Env`` and ``Harness``
subclasses its ``__all__`` names (``verifiers.v1.utils.loaders``): this module's are memgym_verifiers'.
"""

from memgym_verifiers import *  # noqa: F401,F403
from memgym_verifiers import __all__  # noqa: F401
