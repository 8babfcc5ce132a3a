"""Test stand-in for the ``verl`` package: only ``verl.tools.base_tool`` and ``verl.tools.schemas``.

Why this exists: importing the real ``verl.tools.base_tool`` (verl 0.9.1 from PyPI, installed with
``--no-deps``) runs ``verl/__init__.py``, which imports ``verl.protocol`` and with it numpy, torch, ray
and tensordict — several GB of dependencies for two small interface modules. The memgym adapter's tests
therefore run against these verbatim copies of verl 0.9.1's ``BaseTool`` and tool schemas (Apache-2.0,
headers kept), with ``rollout_trace_op`` reduced to a no-op. ``tests/python/conftest.py`` uses the real
verl instead whenever it imports.
"""
