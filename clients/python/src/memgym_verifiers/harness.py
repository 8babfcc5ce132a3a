"""The taskset's default harness: verifiers' ``null`` harness (a chat loop whose only tools are the MCP
servers it is given), under this package's name. A taskset package that exports a ``Harness`` makes it its
agents' default (``verifiers.v1.utils.loaders.default_harness_id``); without one verifiers picks ``bash``,
which would give the policy a shell on the eval host beside memgym's tools. ``--env.agent.harness.id``
still picks any other harness that speaks MCP."""

from __future__ import annotations

from verifiers.v1.harnesses.null.harness import NullHarness


class MemgymHarness(NullHarness):
    """The null harness (its settings under ``--env.agent.harness.*``): the model, the episode's six tools,
    nothing else."""
