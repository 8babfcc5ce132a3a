"""Where a rollout's tools live: memgym's per-episode MCP endpoint, ``{mcp_url}/episodes/{episode_id}``.

verifiers 0.4 hands an external toolset's URL to the policy's harness bare: no header, no per-rollout state
(``verifiers.v1.mcp.launch.serve_tools``). memgym's MCP face therefore serves each episode at a URL of its
own, bound to that episode: the six memory tools with no ``episode_id`` argument, and none of the episode
tools (create, fork, score, close), so the policy cannot open another question, score or end its episode.
"""

from __future__ import annotations

from urllib.parse import quote, urlsplit


def episode_url(mcp_url: str, episode_id: str) -> str:
    """The per-episode endpoint of ``episode_id`` under the MCP endpoint ``mcp_url`` (``http://host:port/mcp``).

    Raises:
        ValueError: ``mcp_url`` is not an ``http(s)`` URL whose path ends in ``/mcp``, or the id is empty.
    """
    parts = urlsplit(mcp_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"memgym: mcp_url must be an http(s) URL, got {mcp_url!r:.80}")
    if not parts.path.rstrip("/").endswith("/mcp") or parts.query or parts.fragment:
        raise ValueError(f"memgym: mcp_url must name the MCP endpoint (path ending in /mcp, no query), got {mcp_url!r:.80}")
    if not episode_id:
        raise ValueError("memgym: episode_id is empty")
    return f"{mcp_url.rstrip('/')}/episodes/{quote(episode_id, safe='')}"
