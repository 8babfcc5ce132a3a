"""The episode's MCP endpoint as a verifiers toolset. memgym serves it, so the toolset is external: its
config carries the URL (``ToolsetConfig.url``), verifiers launches nothing and hands the URL to the
harness bare. Its tools keep their own names (``TOOL_PREFIX = None``: ``search_memory``, not
``memgym_search_memory``), the names memgym's system prompt uses."""

from __future__ import annotations

import verifiers.v1 as vf


class MemgymToolset(vf.Toolset[vf.ToolsetConfig]):
    """memgym's per-episode MCP endpoint (``/mcp/episodes/{episode_id}``); never launched by verifiers."""

    TOOL_PREFIX = None

    def register(self, mcp) -> None:  # pragma: no cover - an external toolset is never served here
        raise RuntimeError("memgym's tools are served by the memgym server; set this toolset's url")
