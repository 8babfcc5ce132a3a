"""One memgym episode through the openreward SDK's client (``pip install openreward==0.1.167``), over the Open
Reward Standard (HTTP + SSE).

Start the server with its ORS face, then run this script:

    cargo run --release -- serve --ors-addr 127.0.0.1:8002
    python examples/protocols/ors_episode.py http://127.0.0.1:8002

The environment is ``memgym``; its tasks are the questions of the splits ``train`` and ``test``; a session
is one episode. The six memory tools answer with ``reward=None, finished=False``; ``submit`` scores the
episode and answers with the reward and ``finished=True``. Leaving the session closes the episode.
"""

import os
import sys

# The SDK checks PyPI for a newer release on start; a self-hosted server needs no network.
os.environ.setdefault("OPENREWARD_DISABLE_UPDATE_CHECK", "1")

from openreward import OpenReward  # noqa: E402
from openreward.api.errors import ToolCallError  # noqa: E402


def main(url: str) -> float:
    client = OpenReward(api_key=os.environ.get("MEMGYM_API_KEY", ""))
    env = client.environments.get("memgym", base_url=url)
    print("splits:", env.list_splits(), "| test tasks:", env.num_tasks("test"))
    print("tools:", ", ".join(t.name for t in env.list_tools()))
    task = env.get_task("test", 0)
    with env.session(task=task) as session:
        print("question:", task.task_spec["question"])
        hits = session.call_tool("search_memory", {"query": task.task_spec["question"], "top_k": 3})
        print(hits.blocks[0].text.splitlines()[0], "| reward:", hits.reward, "| finished:", hits.finished)
        try:
            session.call_tool("delete_memory", {"memory_id": "m9999"})
        except ToolCallError as e:
            print("refused:", e.reason, "-", e.detail)
        # The first test task asks when Caroline went to the LGBTQ support group: state it, dated.
        session.call_tool(
            "manage_memory",
            {"operation": "create", "content": "Caroline went to the LGBTQ support group on 7 May 2023.", "speaker": "Caroline"},
        )
        scored = session.call_tool("submit", {})
        print(scored.blocks[0].text)
        print("reward:", scored.reward, "| finished:", scored.finished, "| episode:", scored.metadata["episode_id"])
        try:
            session.call_tool("submit", {})
        except ToolCallError as e:
            print("again:", e.reason)
    client.close()
    return scored.reward


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8002")
