"""The LoCoMo questions as a verifiers 0.4 (``verifiers.v1``) taskset: one task per question, one memgym
episode per rollout, the reward the server's ``ScoreEpisode``.

How verifiers 0.4 runs a task (``verifiers/v1/rollout.py``, ``task.py``, ``mcp/launch.py``):

- ``Taskset.load`` yields the tasks; their ``TaskData`` (prompt, system prompt, ids) is traced, so it holds
  the question and never the gold answer.
- One ``Task`` object serves every rollout of its question (``-r N`` plans N slots on the same task), and
  ``Task.toolsets(config)`` is a classmethod of the task's config alone. So the episode cannot live on the
  task: ``MemgymEnv`` (``env.py``) opens it and hands the rollout a copy whose config names it
  (``MemgymTaskConfig.episode_id``); ``toolsets`` turns that into the episode's own MCP URL.
- A toolset whose config has a ``url`` is external: nothing is launched, and the harness gets the URL bare.
- After the agent stops, the task's ``@vf.reward`` methods run: ``memgym`` asks ``ScoreEpisode`` over gRPC
  and records its breakdown as the trace's metrics and ``trace.info["memgym"]``.

The policy's tools are the six memory tools at ``/mcp/episodes/{episode_id}``; it holds no way to open,
score or close an episode, so it cannot pick an easier question or score early. Scoring is gRPC, from the
task, with the episode id the env chose.
"""

from __future__ import annotations

import os
from typing import Dict, Iterator, List, Optional

import verifiers.v1 as vf
from pydantic import Field

from memgym import AsyncMemgymClient, MemgymClient, message_to_dict, pb
from memgym.client import DEFAULT_ADDRESS

from .endpoint import episode_url
from .prompts import SYSTEM_PROMPT, user_prompt

#: The MCP face ``memgym serve --mcp-addr 127.0.0.1:8001`` serves (the book's examples).
DEFAULT_MCP_URL = "http://127.0.0.1:8001/mcp"

#: LoCoMo's adversarial category: CreateEpisode refuses it unless ``include_adversarial`` is set.
ADVERSARIAL = 5

#: QuestionRecord.split's names.
SPLITS = {pb.SPLIT_TRAIN: "train", pb.SPLIT_TEST: "test"}

#: Breakdown fields recorded as metrics (numbers only; ``reward`` is the reward itself).
_NOT_METRICS = {"reward", "evaluator"}


class MemgymData(vf.TaskData):
    """One LoCoMo question. The gold answer is not here: task data is written to every trace."""

    question_id: str
    """``conv-26:q17``."""
    conversation_id: str
    split: str
    """``train`` or ``test`` (MemUpdate's seed-42 split of the ten conversations)."""
    category: int
    """LoCoMo's category: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial."""


class MemgymTaskConfig(vf.TaskConfig):
    """Per-rollout knobs, under ``--env.taskset.task.*``."""

    address: str = Field(default_factory=lambda: os.environ.get("MEMGYM_ADDRESS") or DEFAULT_ADDRESS)
    """memgym's gRPC address (``$MEMGYM_ADDRESS``, else 127.0.0.1:50051): episodes are opened, scored and
    closed here."""
    mcp_url: str = Field(default_factory=lambda: os.environ.get("MEMGYM_MCP_URL") or DEFAULT_MCP_URL)
    """The same server's MCP endpoint (``memgym serve --mcp-addr``), as the policy's harness reaches it
    (``$MEMGYM_MCP_URL``, else http://127.0.0.1:8001/mcp). Each rollout's tools are at
    ``{mcp_url}/episodes/{episode_id}``."""
    max_steps: Optional[int] = Field(None, ge=1)
    """The episode's tool-call budget (unset: the server's default, 30)."""
    seed: Optional[int] = Field(None, ge=0)
    """The episode's seed (sample_memory's random strategy); unset: the server's."""
    evaluator: Optional[str] = None
    """answer-phrase, answer-recall, llm-f1 or llm-judge (unset: the server's default)."""
    timeout: float = Field(120.0, gt=0)
    """Seconds per gRPC call (scoring with an LLM evaluator can take a while)."""
    close_episodes: bool = True
    """Close each episode once its rollout is scored (``false`` keeps it for inspection over gRPC until the
    server's reaper ends it)."""
    episode_id: Optional[str] = None
    """Set by ``MemgymEnv`` on each rollout's copy of the task: the episode its tools are bound to. Not a
    user setting."""


class MemgymTask(vf.Task[MemgymData, vf.State, MemgymTaskConfig]):
    """One question; each rollout edits its own episode of it through the per-episode MCP endpoint."""

    @property
    def key(self) -> str:
        """The LoCoMo question id: stable across runs, unique within the taskset."""
        return self.data.question_id

    def for_episode(self, episode_id: str) -> "MemgymTask":
        """A copy of this task for one rollout, bound to ``episode_id`` (the shared task is unchanged)."""
        clone = self.with_data()
        clone.config = self.config.model_copy(update={"episode_id": episode_id})
        return clone

    @classmethod
    def toolsets(cls, config: MemgymTaskConfig) -> List[vf.Toolset]:
        """The episode's MCP endpoint as an external toolset. Without an episode (verifiers sizing its
        placement from the class) the URL names the placeholder episode ``unbound``, which no server holds;
        ``setup`` refuses such a rollout before its tools are served."""
        from .toolset import MemgymToolset

        url = episode_url(config.mcp_url, config.episode_id or "unbound")
        return [MemgymToolset(vf.ToolsetConfig(url=url))]

    async def setup(self, trace: vf.Trace) -> None:
        """Checks that this rollout has an episode of its own, fresh: opened for it by ``MemgymEnv`` and not
        yet used (a retried rollout would otherwise continue an edited memory)."""
        episode_id = self.config.episode_id
        if not episode_id:
            raise ValueError(
                "memgym: this rollout has no episode: run the taskset with its own Env (MemgymEnv, the default "
                "for this taskset; do not pair it with --env.id), which opens one episode per rollout"
            )
        async with AsyncMemgymClient(self.config.address, timeout=self.config.timeout) as client:
            state = (await client.get_episode(episode_id)).state
        if state.steps_used or state.scored:
            raise ValueError(
                f"memgym: episode {episode_id!r:.60} is not fresh ({state.steps_used} steps used, scored: "
                f"{state.scored}): a retried rollout cannot reuse its episode; retry whole episodes "
                "(--env.retries) instead of agent runs"
            )
        trace.info["memgym_episode_id"] = episode_id

    @vf.reward(weight=1.0)
    async def memgym(self, trace: vf.Trace) -> float:
        """ScoreEpisode's reward for this rollout's episode; its breakdown goes to the trace's metrics."""
        episode_id = self.config.episode_id
        if not episode_id:
            raise ValueError("memgym: this rollout has no episode to score (see MemgymTask.setup)")
        async with AsyncMemgymClient(self.config.address, timeout=self.config.timeout) as client:
            scored = await client.score_episode(episode_id)
        breakdown = message_to_dict(scored)
        breakdown["evaluator"] = scored.evaluator
        trace.info["memgym"] = {"episode_id": episode_id, **breakdown}
        for key, value in breakdown_metrics(breakdown).items():
            trace.record_metric(key, value)
        return float(scored.reward)


class MemgymTasksetConfig(vf.TasksetConfig):
    """Which questions load, under ``--env.taskset.*``."""

    split: Optional[str] = "test"
    """``train``, ``test``, or ``all``."""
    conversation_id: str = ""
    """Only this conversation (``conv-26``); empty for all."""
    category: int = Field(0, ge=0, le=5)
    """Only this LoCoMo category; 0 for every category but the adversarial one (5) unless
    ``include_adversarial``."""
    include_adversarial: bool = False
    """Also load category-5 questions (their episodes are opened with ``include_adversarial``)."""
    task: MemgymTaskConfig = MemgymTaskConfig()


class MemgymTaskset(vf.Taskset[MemgymTask, MemgymTasksetConfig]):
    """LoCoMo's questions, listed by the server's ``Dataset`` service (so they match what it can open)."""

    def load(self) -> Iterator[MemgymTask]:
        config = self.config
        split = None if config.split in (None, "", "all") else config.split
        if split not in (None, "train", "test"):
            raise ValueError(f"memgym: split must be train, test or all, got {config.split!r:.40}")
        found = False
        with MemgymClient(config.task.address, timeout=config.task.timeout) as client:
            token = ""
            while True:
                page = client.list_questions(
                    conversation_id=config.conversation_id, split=split, category=config.category, page_size=1000,
                    page_token=token,
                )  # fmt: skip
                for q in page.questions:
                    if q.category == ADVERSARIAL and not config.include_adversarial:
                        continue
                    found = True
                    yield MemgymTask(
                        MemgymData(
                            id=q.id,
                            name=q.id,
                            prompt=user_prompt(q.question),
                            system_prompt=SYSTEM_PROMPT,
                            question_id=q.id,
                            conversation_id=q.conversation_id,
                            split=SPLITS.get(q.split, ""),
                            category=q.category,
                        ),
                        config.task,
                    )
                token = page.next_page_token
                if not token:
                    break
        if not found:
            raise ValueError(
                f"memgym: no question matches split={config.split!r:.20}, conversation_id="
                f"{config.conversation_id!r:.40}, category={config.category}"
            )


def breakdown_metrics(breakdown: Dict[str, object]) -> Dict[str, float]:
    """The numeric fields of a ScoreEpisode breakdown, as ``memgym`` records them (``memgym_<field>``)."""
    return {
        f"memgym_{k}": float(v)
        for k, v in breakdown.items()
        if k not in _NOT_METRICS and isinstance(v, (bool, int, float))
    }
