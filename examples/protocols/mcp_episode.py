"""One memgym episode through the official MCP Python SDK (``pip install mcp==2.3.0``).

Start the server with its MCP face, then run this script:

    cargo run --release -- serve --mcp-addr 127.0.0.1:8001
    python examples/protocols/mcp_episode.py http://127.0.0.1:8001/mcp [auto|legacy]

``auto`` (the SDK's default) discovers the stateless 2026-07-28 protocol; ``legacy`` uses the initialize
handshake (2025-11-25). The memory tools take the ``episode_id`` that ``create_episode`` returns.
"""

import asyncio
import sys

from mcp.client.client import Client


async def main(url: str, mode: str) -> float:
    async with Client(url, mode=mode) as mcp:
        print("protocol:", mcp.protocol_version)
        tools = await mcp.list_tools()
        print("tools:", ", ".join(t.name for t in tools.tools))
        opened = await mcp.call_tool("create_episode", {"question_id": "conv-26:q3", "seed": 1})
        episode = opened.structured_content["episode_id"]
        print("question:", opened.structured_content["question"])
        hits = await mcp.call_tool("search_memory", {"episode_id": episode, "query": "What did Caroline research?"})
        print(hits.content[0].text.splitlines()[0])
        refused = await mcp.call_tool("delete_memory", {"episode_id": episode, "memory_id": "m9999"})
        print("refused:", refused.is_error, refused.content[0].text)
        await mcp.call_tool(
            "manage_memory",
            {"episode_id": episode, "operation": "create", "content": "Caroline researched adoption agencies.", "speaker": "Caroline"},
        )
        scored = await mcp.call_tool("score_episode", {"episode_id": episode})
        print("reward:", scored.structured_content["reward"])
        await mcp.call_tool("close_episode", {"episode_id": episode})
        return scored.structured_content["reward"]


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8001/mcp", sys.argv[2] if len(sys.argv) > 2 else "auto"))
