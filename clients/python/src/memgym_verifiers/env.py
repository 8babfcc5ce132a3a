"""``MemgymEnv``: the verifiers ``Env`` of the memgym taskset, one episode per rollout.

verifiers 0.4 resolves a taskset's Env from the taskset package's ``__all__`` (``verifiers.v1.utils.loaders.
environment_class``), as its NeMo Gym and OpenEnv tasksets do; this one is the single-agent env plus the
episode around each agent run: it opens an episode of the task's question over gRPC under a fresh id, runs
the agent on a copy of the task bound to it (whose toolset is the episode's MCP URL, and whose reward scores
it), and closes it afterwards. An episode-level retry (``--env.retries``) runs this again, on a new episode.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import verifiers.v1 as vf

from memgym import AsyncMemgymClient, MemgymError
from memgym_verl.episode import new_episode_id

from .taskset import ADVERSARIAL, MemgymTask

logger = logging.getLogger(__name__)


class MemgymEnvConfig(vf.SingleAgentEnvConfig):
    """The one agent seat (``--env.agent.*``), run as a local subprocess by default: its harness is a chat
    loop that executes nothing (``MemgymHarness``), so it needs no sandbox; verifiers' own default is a Prime
    sandbox (``--env.agent.runtime.type prime``, which then needs memgym's MCP URL reachable from it)."""

    agent: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())


class MemgymEnv(vf.Env[MemgymEnvConfig]):
    """One agent seat; each rollout edits an episode of its own."""

    async def run(self, task: vf.Task, agents: vf.Agents) -> None:
        if not isinstance(task, MemgymTask):
            raise TypeError(f"MemgymEnv runs memgym tasks, got {type(task).__name__}")
        config = task.config
        if config.episode_id:
            raise ValueError("memgym: task.episode_id is set per rollout by MemgymEnv; leave it unset")
        data = task.data
        episode_id = new_episode_id({"question_id": f"vf-{data.question_id}"})
        async with AsyncMemgymClient(config.address, timeout=config.timeout) as client:
            opened = await client.create_episode(
                data.question_id,
                episode_id=episode_id,
                seed=config.seed,
                max_steps=config.max_steps,
                evaluator=config.evaluator,
                include_adversarial=data.category == ADVERSARIAL,
            )
            # On a replica the server prefixes its name ("r1.<id>"): the URL must carry the id it gave.
            episode_id = opened.state.episode_id
            try:
                await agents.agent.run(task.for_episode(episode_id))
            finally:
                if config.close_episodes:
                    await asyncio.shield(_close(client, episode_id))


async def _close(client: AsyncMemgymClient, episode_id: str) -> None:
    """Closes the episode; a failure is logged (the server's reaper ends it later)."""
    with contextlib.suppress(asyncio.CancelledError):
        try:
            await client.close_episode(episode_id)
        except MemgymError as e:
            logger.warning("memgym: closing episode %.60s failed: %s", episode_id, e)
