"""The Learn calls of the Python client and the Training-Free GRPO design's drop-in ``SemanticExtractor`` (``memgym.learn``)
against the real server, its LLM a scripted OpenAI-compatible server on loopback.

Why this exists: a trainer runs Training-Free GRPO's extraction stages on memgym, through
``MemgymClient`` / ``AsyncMemgymClient`` or, switching imports, through ``memgym.learn``. These tests pin
every Learn call (blocking and asyncio) and what it sends (trajectories as dataclasses, dicts or messages;
variation and mode by name), the error codes as the client surfaces them (FAILED_PRECONDITION without an
LLM, INVALID_ARGUMENT naming the field, ABORTED for a stale version), that nothing is retried, that a dry
run leaves the bank as it was, the skips and the consolidation fallback, and the Training-Free GRPO design's own "Complete
Workflow Example" rewritten as a test with a scripted policy. The LLM is a tiny ``http.server`` written
here that answers each stage by the prompt's wording; the real-model tier is ``real_llm/test_learn_real_llm.py``.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List

import grpc
import pytest

from memgym import (
    LEARN_MODES,
    VARIATION_RULES,
    AsyncMemgymClient,
    MemgymClient,
    MemgymError,
    MemgymUnavailable,
    SemanticExtractor,
    Trajectory,
    banks_pb,
    learn_pb,
)
from memgym.banks import ExperienceManager
from conftest import free_port, running_server

SUMMARY = "1. Wrote down the equation.\n2. Checked the discriminant.\n3. Concluded from its sign."
QUERY = "Solve: x^2 + 2x + 5 = 0"
GT = "No real solutions"


def completion(text: str) -> Dict[str, Any]:
    """A chat completion answering ``text`` (the shape of tests/support/fake_openai.rs)."""
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": "fake",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def lesson(task: str) -> str:
    return f"For tasks like '{task}', check the discriminant before answering."


class FakeLLM:
    """An OpenAI-compatible chat server on loopback answering each Learn stage by the prompt's wording.

    ``replies`` overrides a stage's reply ("summary", "extract", "critique", "update", "consolidate");
    ``requests`` lists the stage of every request received.
    """

    def __init__(self) -> None:
        self.replies: Dict[str, str] = {}
        self.requests: List[str] = []
        self.delay = 0.0  # seconds before each answer
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                if self.path != "/v1/chat/completions":
                    self.send_error(404)
                    return
                user = body["messages"][-1]["content"]
                time.sleep(fake.delay)
                data = json.dumps(completion(fake.answer(user))).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def answer(self, user: str) -> str:
        if "Summarise this attempt" in user:
            stage, default = "summary", SUMMARY
        elif "Compare the better attempts" in user:
            task = re.search(r"Task: (.*)", user).group(1)
            stage, default = "extract", json.dumps([{"option": "add", "experience": lesson(task)}])
        elif "In at most five sentences" in user:
            stage, default = "critique", "The better attempts checked the discriminant. Check it first."
        elif "Update the library with this lesson" in user:
            stage, default = "update", json.dumps([{"operation": "ADD", "content": "Check the discriminant first."}])
        elif "Combine them into one final plan" in user:
            # The plan: every proposed operation, once (the proposals are one JSON object a line).
            proposed = [json.loads(line) for line in user.splitlines() if line.startswith("{")]
            stage, default = "consolidate", json.dumps(list({json.dumps(p): p for p in proposed}.values()))
        else:
            stage, default = "other", "unexpected prompt"
        with self.lock:
            self.requests.append(stage)
            return self.replies.get(stage, default)

    def reset(self) -> None:
        with self.lock:
            self.replies.clear()
            self.requests.clear()
            self.delay = 0.0

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def fake_llm():
    fake = FakeLLM()
    yield fake
    fake.close()


@pytest.fixture(scope="module")
def address(fake_llm):
    """One real server for the module whose LLM is the fake (no cache: every stage reaches the fake)."""
    with running_server("--llm-base-url", fake_llm.url, "--llm-model", "fake", "--llm-cache", "0") as addr:
        yield addr


@pytest.fixture
def lc(address, fake_llm):
    fake_llm.reset()
    with MemgymClient(address, timeout=30.0) as c:
        yield c


def group(query: str = QUERY, rewards=(1.0, 0.0)) -> List[Trajectory]:
    return [Trajectory(query, f"attempt scoring {r}", r, GT) for r in rewards]


def new_bank(c: MemgymClient, name: str) -> int:
    c.create_bank(name)
    return c.add_experience(name, "Verify solutions by substitution.").version


def texts(c: MemgymClient, bank: str) -> Dict[str, str]:
    return {e.id: e.text for e in c.iter_experiences(bank)}


# -- the client calls ---------------------------------------------------------------------------


def test_learn_from_group_runs_every_stage_and_applies_the_plan(lc, fake_llm):
    v0 = new_bank(lc, "learn-sync")
    resp = lc.learn_from_group("learn-sync", [group(), group("Solve 2x = 4", (1.0, 1.0))])
    assert isinstance(resp, learn_pb.LearnFromGroupResponse)
    g0, g1 = resp.groups
    assert list(g0.summaries) == [SUMMARY, SUMMARY] and g0.confidence == 1.0 and not g0.skipped
    assert json.loads(g0.operations_json) == [{"option": "add", "experience": lesson(QUERY)}]
    assert g1.skipped == "no reward variation" and not g1.HasField("confidence") and list(g1.summaries) == ["", ""]
    assert [op["experience"] for op in json.loads(resp.plan_json)] == [lesson(QUERY)]
    assert resp.applied and not resp.fallback and resp.version == v0 + 1
    assert [r.status for r in resp.results] == [banks_pb.OPERATION_STATUS_APPLIED]
    assert lesson(QUERY) in texts(lc, "learn-sync").values()
    # Two summaries, one extraction, one consolidation; the group without variation costs nothing.
    assert sorted(fake_llm.requests) == ["consolidate", "extract", "summary", "summary"]


def test_stage_calls(lc, fake_llm):
    t = Trajectory(QUERY, "discriminant -16, no real roots", 1.0, GT)
    assert lc.summarize_trajectory(t).summary == SUMMARY
    assert lc.summarize_trajectory(t, use_groundtruth=False).summary == SUMMARY
    ops = lc.extract_group_operations(group(), "[G0]. Verify solutions by substitution.", max_operations=2)
    assert json.loads(ops.operations_json) == [{"option": "add", "experience": lesson(QUERY)}]
    assert ops.confidence == 1.0 and not ops.skipped and not ops.rejected
    flat = lc.extract_group_operations(group(rewards=(0.0, 0.0)))
    assert (flat.operations_json, flat.skipped) == ("[]", "no reward variation")
    plan = lc.consolidate_operations(
        [[{"option": "add", "experience": "A."}], json.dumps([{"option": "add", "experience": "B."}])], "[G0]. x"
    )
    assert [op["experience"] for op in json.loads(plan.operations_json)] == ["A.", "B."] and not plan.fallback
    assert fake_llm.requests == ["summary", "summary", "extract", "consolidate"]


def test_async_client_learn_calls(address, fake_llm):
    fake_llm.reset()

    async def run():
        async with AsyncMemgymClient(address, timeout=30.0) as c:
            await c.create_bank("learn-async")
            v0 = (await c.add_experience("learn-async", "Verify solutions by substitution.")).version
            resp = await c.learn_from_group("learn-async", [group()], variation="mean_between", mode="three_stage")
            assert resp.applied and resp.version == v0 + 1 and list(resp.groups[0].summaries) == [SUMMARY] * 2
            dry = await c.learn_from_group("learn-async", [group("Solve 3x = 9")], dry_run=True)
            assert not dry.applied and dry.version == v0 + 1 and json.loads(dry.plan_json)
            assert (await c.summarize_trajectory({"query": QUERY, "output": "x", "reward": 0.0})).summary == SUMMARY
            ops = await c.extract_group_operations(group(), "", use_groundtruth=False)
            assert json.loads(ops.operations_json)[0]["option"] == "add"
            plan = await c.consolidate_operations([ops.operations_json], "")
            assert json.loads(plan.operations_json) == json.loads(ops.operations_json)
            with pytest.raises(MemgymError) as err:
                await c.learn_from_group("learn-async", [group()], expected_version=v0)
            assert err.value.code == grpc.StatusCode.ABORTED

    asyncio.run(run())


def test_trajectories_as_dataclasses_dicts_and_messages(lc, fake_llm):
    new_bank(lc, "learn-kinds")
    mixed = [
        Trajectory(QUERY, "right", 1.0, GT, summary="1. Given summary."),
        {"query": QUERY, "output": "wrong", "reward": 0, "groundtruth": GT},
        learn_pb.Trajectory(query=QUERY, output="half", reward=0.5),
    ]
    resp = lc.learn_from_group("learn-kinds", [mixed, learn_pb.TrajectoryGroup(trajectories=[learn_pb.Trajectory(query="q", output="o", reward=1.0)])])
    assert list(resp.groups[0].summaries) == ["1. Given summary.", SUMMARY, SUMMARY]  # a given summary is kept
    assert fake_llm.requests.count("summary") == 2
    assert resp.groups[1].skipped == "no reward variation"
    assert set(VARIATION_RULES) == {"spread", "mean_between"} and set(LEARN_MODES) == {"three_stage", "four_stage"}
    for bad in (lambda: lc.learn_from_group("b", [group()], variation="median"), lambda: lc.learn_from_group("b", [group()], mode="two_stage")):
        with pytest.raises(ValueError):
            bad()
    with pytest.raises(TypeError):
        lc.learn_from_group("b", [["not a trajectory"]])


def test_four_stage_mode(lc, fake_llm):
    new_bank(lc, "learn-four")
    resp = lc.learn_from_group("learn-four", [group()], mode="four_stage", variation=learn_pb.VARIATION_RULE_SPREAD)
    assert resp.groups[0].critique and resp.applied
    assert "Check the discriminant first." in texts(lc, "learn-four").values()
    assert sorted(fake_llm.requests) == ["consolidate", "critique", "summary", "summary", "update"]
    ops = lc.extract_group_operations(group(), "", mode="LEARN_MODE_FOUR_STAGE")
    assert ops.critique and json.loads(ops.operations_json) == [{"option": "add", "experience": "Check the discriminant first."}]


def test_dry_run_leaves_the_bank_unchanged(lc, fake_llm):
    v0 = new_bank(lc, "learn-dry")
    before = lc.export_bank("learn-dry", "memgym").data
    resp = lc.learn_from_group("learn-dry", [group()], dry_run=True)
    assert json.loads(resp.plan_json) and len(resp.results) == 1
    assert not resp.applied and resp.version == v0
    assert lc.export_bank("learn-dry", "memgym").data == before and lc.get_bank("learn-dry").version == v0


def test_failures_inside_learn_from_group_are_reported_not_raised(lc, fake_llm):
    v0 = new_bank(lc, "learn-fail")
    fake_llm.replies["consolidate"] = "I cannot do that."
    resp = lc.learn_from_group("learn-fail", [group(), group("Solve 2x = 4")])
    assert resp.fallback and resp.applied and resp.version == v0 + 1
    assert sorted(op["experience"] for op in json.loads(resp.plan_json)) == sorted([lesson(QUERY), lesson("Solve 2x = 4")])
    fake_llm.replies["extract"] = "no operations here"
    resp = lc.learn_from_group("learn-fail", [group()])
    assert "stage 2" in resp.groups[0].skipped and not resp.applied and resp.plan_json in ("", "[]")
    assert resp.version == v0 + 1
    fake_llm.replies["extract"] = json.dumps([{"option": "modify", "experience": "x"}, {"option": "add", "experience": "Fine."}])
    ops = lc.extract_group_operations(group())
    assert json.loads(ops.operations_json) == [{"option": "add", "experience": "Fine."}]
    assert len(ops.rejected) == 1 and "modified_from" in ops.rejected[0]


def test_without_an_llm_every_call_is_failed_precondition():
    with running_server() as address, MemgymClient(address, timeout=30.0) as c:
        c.create_bank("lib")
        for call in (
            lambda: c.learn_from_group("lib", [group()]),
            lambda: c.summarize_trajectory(group()[0]),
            lambda: c.extract_group_operations(group()),
            lambda: c.consolidate_operations([[{"option": "add", "experience": "A."}]]),
        ):
            with pytest.raises(MemgymError) as err:
                call()
            assert err.value.code == grpc.StatusCode.FAILED_PRECONDITION and "--llm-base-url" in err.value.details
        extractor = SemanticExtractor(None, client=c)
        with pytest.raises(MemgymError) as err:
            extractor.extract_group_advantage(group(), "")
        assert err.value.code == grpc.StatusCode.FAILED_PRECONDITION  # a misconfiguration is not a skipped group
        assert extractor.extract_group_advantage(group(rewards=(1.0, 1.0)), "") == []  # no variation: no LLM needed


def test_invalid_arguments_name_the_field(lc, fake_llm):
    new_bank(lc, "learn-bad")
    bad = [Trajectory(QUERY, "a", 1.0), Trajectory(QUERY, "b", 2.0)]
    for call, field in (
        (lambda: lc.learn_from_group("learn-bad", [bad]), "groups[0].trajectories[1].reward"),
        (lambda: lc.extract_group_operations(bad), "trajectories[1].reward"),
        (lambda: lc.summarize_trajectory(bad[1]), "trajectory.reward"),
        (lambda: lc.learn_from_group("learn-bad", [group()], max_operations=0), "max_operations"),
        (lambda: lc.learn_from_group("learn-bad", []), "groups"),
        (lambda: lc.consolidate_operations(["not json"]), "group_operations_json[0]"),
    ):
        with pytest.raises(MemgymError) as err:
            call()
        assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT and field in err.value.details, err.value.details
    assert fake_llm.requests == []  # refused before any LLM request
    with pytest.raises(MemgymError) as err:
        lc.learn_from_group("no-such-bank", [group()])
    assert err.value.code == grpc.StatusCode.NOT_FOUND


def test_timeout_overrides_the_client_deadline_per_call(lc, fake_llm):
    fake_llm.delay = 1.5
    with pytest.raises(MemgymError) as err:
        lc.summarize_trajectory(group()[0], timeout=0.3)
    assert err.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert lc.summarize_trajectory(group()[0], timeout=20).summary == SUMMARY
    fake_llm.delay = 0.0


def test_learn_calls_are_not_retried():
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    with MemgymClient(address, timeout=2.0, retries=1, backoff=0.5) as down:
        for call, method in (
            (lambda: down.learn_from_group("b", [group()]), "Learn/LearnFromGroup"),
            (lambda: down.summarize_trajectory(group()[0]), "Learn/SummarizeTrajectory"),
            (lambda: down.extract_group_operations(group()), "Learn/ExtractGroupOperations"),
            (lambda: down.consolidate_operations([[]]), "Learn/ConsolidateOperations"),
        ):
            started = time.monotonic()
            with pytest.raises(MemgymUnavailable) as err:
                call()
            assert time.monotonic() - started < 0.5 and err.value.method == method  # sent once, no backoff


# -- memgym.learn: the Training-Free GRPO design's SemanticExtractor ----------------------------------------------------


def test_seed_complete_workflow_example(address, fake_llm, tmp_path):
    """The Training-Free GRPO design's "Complete Workflow Example", with a scripted policy in place of DeepSeek."""
    fake_llm.reset()
    checkpoint = tmp_path / "experiences.json"
    # 1. Initialize components
    experience_manager = ExperienceManager(checkpoint_path=str(checkpoint), address=address)
    llm_client = object()  # the seed's LLMClient: accepted and ignored, the server holds the LLM
    extractor = SemanticExtractor(llm_client, max_operations=3, address=address)
    prompts_seen: List[str] = []

    def generate_with_experiences(query: str, experiences: str, i: int) -> str:  # the scripted policy
        prompts_seen.append(experiences)
        return "No real solutions: the discriminant is negative." if i % 2 == 0 else "x = 1"

    # 2. Training data
    queries = ["Solve: x² + 2x + 5 = 0", "Solve: x² + 4 = 0", "Solve: x² + x + 1 = 0"]
    groundtruths = ["No real solutions"] * 3
    # 3. Training loop (1 epoch)
    for query, gt in zip(queries, groundtruths):
        trajectories = []
        experiences = experience_manager.format_for_prompt()
        for i in range(5):  # G=5
            output = generate_with_experiences(query, experiences, i)
            reward = 1.0 if "no real" in output.lower() else 0.0
            traj = Trajectory(query, output, reward, gt)
            trajectories.append(traj)
        # Stage 1: Summarize
        for traj in trajectories:
            traj.summary = extractor.summarize_trajectory(traj)
        # Stage 2: Extract advantages
        operations = extractor.extract_group_advantage(trajectories, experiences, use_groundtruth=True)
        assert operations == [{"option": "add", "experience": lesson(query)}]
        # Apply operations
        if operations:
            experience_manager.apply_operations(operations)
    # 4. Save
    experience_manager.save(str(tmp_path / "experiences_final.json"))
    assert len(experience_manager) == 3
    assert experience_manager.experiences == {f"G{i}": lesson(q) for i, q in enumerate(queries)}
    assert prompts_seen[5] == "[G0]. " + lesson(queries[0])  # the library reached the next group's prompt
    saved = json.loads((tmp_path / "experiences_final.json").read_text())
    assert saved["experiences"] == experience_manager.experiences and saved["next_id"] == 3
    assert fake_llm.requests == (["summary"] * 5 + ["extract"]) * 3
    extractor.close()
    experience_manager.close()


def test_semantic_extractor_skips_fallbacks_and_learn(lc, fake_llm):
    extractor = SemanticExtractor(max_operations=2, client=lc)
    assert extractor.summarize_trajectory(Trajectory(QUERY, "x", 1.0)) == SUMMARY
    assert extractor.extract_group_advantage(group(rewards=(1.0, 1.0, 1.0)), "") == []
    assert extractor.last_skipped == "no reward variation"
    fake_llm.replies["extract"] = "Sorry, no JSON today."
    assert extractor.extract_group_advantage(group(), "") == []  # like RobustSemanticExtractor
    assert extractor.last_skipped.startswith("stage 2")
    del fake_llm.replies["extract"]
    ops = extractor.extract_group_advantage(group(), "[G0]. Verify.")
    assert ops == [{"option": "add", "experience": lesson(QUERY)}] and extractor.last_skipped == ""
    # consolidate_batch: the plan; the flattened groups when the LLM's plan is unusable; [] for nothing.
    all_ops = [ops, [{"option": "modify", "experience": "Verify twice.", "modified_from": "G0"}]]
    plan = extractor.consolidate_batch(all_ops, "[G0]. Verify.")
    assert plan == [ops[0], {"option": "modify", "modified_from": "G0", "experience": "Verify twice."}] and not extractor.last_fallback
    fake_llm.replies["consolidate"] = "I cannot do that."
    assert extractor.consolidate_batch(all_ops, "[G0]. Verify.") == plan and extractor.last_fallback
    requests = len(fake_llm.requests)
    assert extractor.consolidate_batch([[], []], "") == [] and len(fake_llm.requests) == requests
    del fake_llm.replies["consolidate"]
    # learn(): the three stages and the write in one call, on an ExperienceManager or a bank name.
    manager = ExperienceManager(bank="learn-dropin", client=lc)
    trajectories = group()
    resp = extractor.learn(manager, [trajectories])
    assert resp.applied and manager.experiences == {"G0": lesson(QUERY)}
    assert [t.summary for t in trajectories] == [SUMMARY, SUMMARY]  # the server's summaries copied back
    resp = extractor.learn("learn-dropin", [group("Solve 2x = 4")], dry_run=True)
    assert not resp.applied and len(manager) == 1
    assert extractor.client is lc
    extractor.close()  # a shared client stays open
    assert lc.get_bank("learn-dropin").size == 1


def test_semantic_extractor_finds_the_server_like_the_banks(address, fake_llm, monkeypatch):
    fake_llm.reset()
    monkeypatch.setenv("MEMGYM_ADDRESS", address)
    with SemanticExtractor() as extractor:
        assert extractor.client.address == address and extractor.max_operations == 3
        assert extractor.summarize_trajectory({"query": "q", "output": "o", "reward": 1}) == SUMMARY
    with pytest.raises(ValueError):
        SemanticExtractor(client=MemgymClient(address), address=address)
