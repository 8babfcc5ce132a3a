"""Which verl releases can run memgym_verl, read from their wheels (``memgym_verl.tool.MIN_VERL``).

Why this exists: the adapter keeps one episode per trajectory only if verl's ``ToolAgentLoop`` passes the
row's ``create_kwargs`` to ``tool.create`` and ``agent_data`` (``request_id``, ``tools_kwargs``,
``extra_fields``) to ``tool.execute``, returns ``agent_data.extra_fields`` in its ``AgentLoopOutput``, and
verl's reward loop merges them into ``extra_info`` (else ``compute_score`` cannot find
``memgym_episode_id``). No verl runs here (it needs torch, ray and GPUs), so the released sources are
parsed instead: 0.5.0 (create() without create_kwargs), 0.7.0 (everything but the extra_fields hand-off)
and 0.7.1 (the first with all of it) pin the boundary, 0.9.1 the newest. ``check_verl_version`` must
refuse exactly the releases that lack a piece.
"""

from __future__ import annotations

import ast
from typing import Dict, List

import pytest

from conftest import verl_wheel_file
from memgym_verl import MIN_VERL, check_verl_version

TOOL_LOOP = "verl/experimental/agent_loop/tool_agent_loop.py"
AGENT_LOOP = "verl/experimental/agent_loop/agent_loop.py"
REWARD_LOOP_NAIVE = "verl/experimental/reward_loop/reward_manager/naive.py"

#: version -> what its sources do (the claims of examples/verl/README.md's support matrix).
EXPECTED = {
    "0.5.0": {"create_kwargs": False, "agent_data": False, "extra_fields_out": False, "reward_merges": False},
    "0.7.0": {"create_kwargs": True, "agent_data": True, "extra_fields_out": False, "reward_merges": True},
    "0.7.1": {"create_kwargs": True, "agent_data": True, "extra_fields_out": True, "reward_merges": True},
    "0.9.1": {"create_kwargs": True, "agent_data": True, "extra_fields_out": True, "reward_merges": True},
}


def calls(tree: ast.AST, func: str) -> List[Dict[str, str]]:
    """The keyword arguments (name -> source) of every call of ``func`` (e.g. ``tool.create``)."""
    return [
        {k.arg: ast.unparse(k.value) for k in node.keywords}
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and ast.unparse(node.func) == func
    ]


def agent_data_fields(tree: ast.AST) -> set:
    """The ``self.X`` attributes ``AgentData.__init__`` sets (empty if there is no AgentData)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "AgentData":
            return {
                t.attr
                for n in ast.walk(node)
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AnnAssign) else [])
                if isinstance(t, ast.Attribute) and ast.unparse(t.value) == "self"
            }
    return set()


def facts(version: str) -> Dict[str, bool]:
    tree = ast.parse(verl_wheel_file(version, TOOL_LOOP))
    creates, executes = calls(tree, "tool.create"), calls(tree, "tool.execute")
    assert creates and executes, f"verl {version}: no tool.create/tool.execute call found"
    naive = verl_wheel_file(version, REWARD_LOOP_NAIVE) or ""
    return {
        "create_kwargs": all("create_kwargs" in c for c in creates),
        "agent_data": all(e.get("agent_data") == "agent_data" for e in executes)
        and {"request_id", "tools_kwargs", "extra_fields"} <= agent_data_fields(tree),
        "extra_fields_out": all(o.get("extra_fields") == "agent_data.extra_fields" for o in calls(tree, "AgentLoopOutput")),
        "reward_merges": '"tool_extra_fields": np.array(' in (verl_wheel_file(version, AGENT_LOOP) or "")
        and "extra_info.update(tool_extra_fields.items())" in naive
        and "inspect.iscoroutinefunction(self.compute_score)" in naive,
    }


def release(version: str) -> tuple:
    return tuple(int(part) for part in version.split("."))


@pytest.mark.parametrize("version", sorted(EXPECTED))
def test_what_each_verl_passes_the_tool_and_the_reward(version):
    assert (verl_wheel_file(version, "verl/version/version") or "").strip() == version  # verl.__version__
    assert facts(version) == EXPECTED[version]


@pytest.mark.parametrize("version", sorted(EXPECTED))
def test_min_verl_refuses_exactly_the_releases_missing_a_piece(version):
    supported = all(EXPECTED[version].values())
    assert supported == (release(version) >= release(MIN_VERL))
    if supported:
        check_verl_version(version)
    else:
        with pytest.raises(RuntimeError, match=f"needs verl >= {MIN_VERL}, found {version}"):
            check_verl_version(version)
