"""Tests of memgym's OpenEnv, MCP and TRL surfaces with the released clients (see conftest.py); a package so
its conftest does not shadow the parent's."""
