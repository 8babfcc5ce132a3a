"""``MemgymAgentLoop``: verl's tool agent loop that scores each trajectory's memgym episode when it ends.

Why this exists: verl's ``ToolAgentLoop`` has no end-of-trajectory hook for tools, and only verl's
``naive``, ``limited`` and ``remote`` reward managers hand the loop's ``extra_fields`` (where the tool
keeps the episode id) to a reward function; ``dapo``, ``gdpo`` and the reward-model path do not, so a
reward function alone would score those samples without their episode. verl's agent loops may instead
compute the reward themselves: an ``AgentLoopOutput.reward_score`` set by the loop becomes the sample's
``rm_scores`` in every release from 0.7.1 to 0.9.1, and the reward manager is not asked again. This
loop does that:

1. runs verl's own ``ToolAgentLoop`` unchanged (the tools are ``memgym_verl.tool.MemgymTool``; the loop
   tells them verl's ``max_tool_response_length`` so their text always fits it);
2. when the trajectory ends, scores and closes its episode (``ScoreEpisode``, ``CloseEpisode``). A
   trajectory that called no tool opens its row's episode first, so it too gets the server's score
   (exactly 0: its memory is M₀) and the full breakdown;
3. sets ``reward_score`` and ``extra_fields["reward_extra_info"]`` (the ``memgym_*`` breakdown, the same
   keys for every trajectory), and always writes ``memgym_episode_id`` and ``memgym_address`` into
   ``extra_fields``, so every worker's outputs have the same keys and concatenate.

With ``reward.reward_manager.name=dapo`` and DAPO's overlong buffer enabled
(``reward.reward_kwargs.overlong_buffer_cfg``), the loop adds the same overlong penalty verl's DAPO
manager would (``memgym_overlong_penalty``); otherwise that key is 0.

A trajectory whose episode cannot be scored (closed or reaped on the way, unknown, server down) raises
``MemgymError`` naming the episode and the cause: there is no silent 0.

Register it with ``actor_rollout_ref.rollout.agent.agent_loop_config_path`` pointing at
``examples/verl/memgym_agent_loop.yaml`` (name ``memgym_agent``, the ``agent_name`` that
``memgym dataset verl`` writes).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from memgym import MemgymError, MemgymUnavailable
from memgym_verl.episode import ADDRESS_KEY, EPISODE_ID_KEY, open_episode, row_create_kwargs
from memgym_verl.reward import PREFIX, REWARD_KEY, score_and_close_async
from memgym_verl.tool import MemgymTool

from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop

#: The ``agent_name`` this loop is registered under (examples/verl/memgym_agent_loop.yaml).
AGENT_NAME = "memgym_agent"

#: The breakdown key of DAPO's overlong penalty (0 unless DAPO's overlong buffer is on).
OVERLONG_KEY = PREFIX + "overlong_penalty"

#: The key under which verl's worker looks for a loop's own reward breakdown.
REWARD_EXTRA_INFO = "reward_extra_info"


def _get(config: Any, path: str) -> Any:
    """``config.a.b.c`` for a dotted path, or None where any part is missing (DictConfig or dict)."""
    node = config
    for part in path.split("."):
        if node is None:
            return None
        try:
            node = node.get(part) if hasattr(node, "get") else getattr(node, part, None)
        except Exception:  # a missing key in a struct DictConfig
            return None
    return node


class OverlongPenalty:
    """DAPO's overlong reward shaping, read from verl's own config keys.

    Enabled when the reward manager is ``dapo`` and ``reward_kwargs.overlong_buffer_cfg.enable`` is true
    (under ``reward.*`` from 0.8, or the legacy ``reward_model.*``). With ``len`` = the buffer length and
    ``max_resp_len`` the response budget, a response of L tokens gets
    ``min(0, -(L - (max_resp_len - len)) / len × penalty_factor)``.
    """

    def __init__(self, config: Any):
        name = _get(config, "reward.reward_manager.name") or _get(config, "reward_model.reward_manager")
        kwargs = _get(config, "reward.reward_kwargs") or _get(config, "reward_model.reward_kwargs") or {}
        buffer = _get(kwargs, "overlong_buffer_cfg")
        self.enabled = bool(name == "dapo" and buffer is not None and _get(buffer, "enable"))
        self.length = int(_get(buffer, "len") or 0) if self.enabled else 0
        self.factor = float(_get(buffer, "penalty_factor") or 0.0) if self.enabled else 0.0
        self.max_resp_len = int(_get(kwargs, "max_resp_len") or 0) if self.enabled else 0
        if self.enabled and not (0 < self.length <= self.max_resp_len):
            raise ValueError(
                "memgym_agent: DAPO's overlong buffer needs 0 < reward_kwargs.overlong_buffer_cfg.len <= "
                f"reward_kwargs.max_resp_len, got len={self.length}, max_resp_len={self.max_resp_len}"
            )

    def __call__(self, response_length: int) -> float:
        if not self.enabled:
            return 0.0
        exceed = response_length - (self.max_resp_len - self.length)
        return min(-exceed / self.length * self.factor, 0.0)


class MemgymAgentLoop(ToolAgentLoop):
    """verl's ``ToolAgentLoop`` plus the memgym episode's score at the end (module doc)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.memgym_tools = [tool for tool in self.tools.values() if isinstance(tool, MemgymTool)]
        if not self.memgym_tools:
            raise ValueError(
                "memgym_agent needs the memgym tools: set actor_rollout_ref.rollout.multi_turn.tool_config_path "
                "to examples/verl/memgym_tool_config.yaml"
            )
        for tool in self.memgym_tools:
            tool.max_response_chars = self.max_tool_response_length
        self.overlong = OverlongPenalty(self.config)

    async def run(self, sampling_params: Dict[str, Any], **kwargs: Any):
        output = await super().run(sampling_params, **kwargs)
        extra_fields = output.extra_fields
        episode_id: Optional[str] = extra_fields.get(EPISODE_ID_KEY)
        address = str(extra_fields.get(ADDRESS_KEY) or self.memgym_tools[0].address)
        if not episode_id:  # no tool call: open the row's episode (its memory is M₀) to score it too
            episode_id = await open_episode(address, row_create_kwargs(kwargs.get("tools_kwargs")))
        extra_fields[EPISODE_ID_KEY] = episode_id
        extra_fields[ADDRESS_KEY] = address
        try:
            result = await score_and_close_async(address, episode_id)
        except MemgymUnavailable:
            raise  # names the address already
        except MemgymError as err:
            raise MemgymError(
                err.code,
                f"memgym_agent: the trajectory's episode {episode_id!r} could not be scored: {err.details}",
                method=err.method,
                address=err.address,
            ) from err
        result[OVERLONG_KEY] = self.overlong(len(output.response_ids))
        output.reward_score = result[REWARD_KEY] + result[OVERLONG_KEY]
        extra_fields[REWARD_EXTRA_INFO] = result
        return output
