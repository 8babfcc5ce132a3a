"""What one verifiers rollout on memgym-locomo does, step by step, without a model
(``pip install './clients/python[verifiers]'``: verifiers 0.4, which brings mcp 2.0.0).

Start the server with its MCP face, then run this script:

    cargo run --release -- serve --mcp-addr 127.0.0.1:8001
    python examples/protocols/verifiers_episode.py 127.0.0.1:50051 http://127.0.0.1:8001/mcp

It loads the taskset's first test question, opens an episode of it as ``MemgymEnv`` does, and talks to the
episode's own MCP URL with the client verifiers' harness uses: the six tools with no ``episode_id``, and no
way to score or close. Then it scores the episode over gRPC, as the task's ``memgym`` reward does.
"""

import asyncio
import sys

from mcp import Client

from memgym import MemgymClient
from memgym_verifiers import MemgymTaskConfig, MemgymTaskset, MemgymTasksetConfig, episode_url


async def tools_of(url: str) -> None:
    async with Client(url) as mcp:
        tools = (await mcp.list_tools()).tools
        print("tools:", ", ".join(t.name for t in tools))
        print("episode_id asked:", any("episode_id" in t.input_schema.get("properties", {}) for t in tools))
        hits = await mcp.call_tool("search_memory", {"query": "LGBTQ support group", "top_k": 2})
        print(hits.content[0].text.splitlines()[0])
        made = await mcp.call_tool("manage_memory", {"operation": "create", "content": "Caroline went to an LGBTQ support group on 7 May 2023."})
        print(made.content[0].text)


def main(address: str, mcp_url: str) -> None:
    config = MemgymTasksetConfig(id="memgym-locomo", split="test", task=MemgymTaskConfig(address=address, mcp_url=mcp_url))
    task = next(iter(MemgymTaskset(config).include(ids=["conv-26:q0"])))
    print("task:", task.key, "|", task.data.prompt.splitlines()[0])
    with MemgymClient(address) as grpc:
        episode = grpc.create_episode(task.data.question_id, seed=7).state.episode_id
        url = episode_url(mcp_url, episode)
        print("toolset url:", url)
        asyncio.run(tools_of(url))
        scored = grpc.score_episode(episode)
        print(f"reward: {scored.reward:.4f} (performance_delta {scored.performance_delta:.2f}, steps {scored.steps_used})")
        grpc.close_episode(episode)


if __name__ == "__main__":
    main(*sys.argv[1:3])
