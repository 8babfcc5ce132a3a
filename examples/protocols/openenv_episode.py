"""One memgym episode through OpenEnv's own client (``pip install openenv==0.10.0``).

Start the server with its OpenEnv face, then run this script:

    cargo run --release -- serve --openenv-addr 127.0.0.1:8000
    python examples/protocols/openenv_episode.py http://127.0.0.1:8000

The episode lives on one WebSocket connection (``/ws``): ``reset`` opens it, each ``step`` is an action
(``list_tools``, ``call_tool`` or ``score``), and closing the client closes the episode.
"""

import sys

from openenv.core.generic_client import GenericEnvClient


def main(url: str) -> float:
    with GenericEnvClient(base_url=url).sync() as env:
        first = env.reset(question_id="conv-26:q3", seed=1)
        print("question:", first.observation["question"])
        tools = env.step({"type": "list_tools"}).observation["tools"]
        print("tools:", ", ".join(t["name"] for t in tools))
        hits = env.step({"type": "call_tool", "tool_name": "search_memory", "arguments": {"query": "What did Caroline research?"}})
        print(hits.observation["text"].splitlines()[0])
        env.step(
            {
                "type": "call_tool",
                "tool_name": "manage_memory",
                "arguments": {"operation": "create", "content": "Caroline researched adoption agencies.", "speaker": "Caroline"},
            }
        )
        print("state:", env.state())
        scored = env.step({"type": "score"})
        print(scored.observation["text"])
        return scored.reward


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000")
