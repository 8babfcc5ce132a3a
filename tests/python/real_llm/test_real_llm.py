"""The real-LLM tier: memgym's LLM evaluators and LLM edits against a real model (Qwen2.5-Coder-0.5B-Instruct on
CPU, served by scripts/llm-server.py), through the real gRPC server and client.

Why this exists: a scripted chat server checks requests, retries and errors, but cannot show that a real
model's replies parse, score and survive the edit checks. No assertion here depends on one model's wording:
they hold for any reasonable instruction-tuned model (replies parse; breakdowns carry the model, the answers
and F1; an LLM-written memory keeps the provenance rules, or the call falls back with its note).
"""

from __future__ import annotations

import json
import math
import re
import threading
import urllib.request

import pytest

from conftest import running_server
from memgym import MemgymClient, MemgymError, pb
from real_llm.conftest import memgym_flags

# One question of the test split per category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop,
# 5 adversarial), picked from the dataset at run time: the first of each category in conv-26.
CATEGORIES = (1, 2, 3, 4, 5)


def questions(client: MemgymClient) -> dict[int, pb.QuestionRecord]:
    found = {}
    for category in CATEGORIES:
        page = client.list_questions(conversation_id="conv-26", category=category, page_size=1)
        assert page.questions, f"conv-26 has no category {category} question"
        found[category] = page.questions[0]
    return found


def oracle_text(q: pb.QuestionRecord) -> str:
    """The memory the oracle agent of `memgym eval` writes: the question with its answer (abstention on category 5)."""
    return f"{q.question} {q.answer if q.category != 5 else 'Not mentioned in the conversation.'}"


def check_breakdown(score: pb.ScoreEpisodeResponse, model: str, evaluator: str) -> None:
    assert score.evaluator == evaluator and score.llm_model == model
    for name in ("p_old", "p_new", "reward", "performance_delta", "memory_efficiency"):
        assert math.isfinite(getattr(score, name)), name
    assert score.answer_old.strip() and score.answer_new.strip(), "the model's answers are reported"
    assert score.answer_old == score.answer_old.strip() and score.answer_new == score.answer_new.strip()
    assert len(score.answer_old) < 400 and len(score.answer_new) < 400, "a short-answer prompt gets a short answer"
    assert score.HasField("f1_old") and score.HasField("f1_new")
    assert 0.0 <= score.f1_old <= 1.0 and 0.0 <= score.f1_new <= 1.0
    if evaluator == "llm-f1":
        assert not score.HasField("judge_old") and not score.HasField("judge_new")
        assert (score.p_old, score.p_new) == (score.f1_old, score.f1_new)
    else:
        assert score.judge_old in (0.0, 1.0) and score.judge_new in (0.0, 1.0)
        assert score.p_old == pytest.approx((score.f1_old + score.judge_old) / 2)
        assert score.p_new == pytest.approx((score.f1_new + score.judge_new) / 2)
    assert score.performance_delta == pytest.approx(score.p_new - score.p_old)
    assert score.reward_formula == "whole-memory" and score.context == "budget"
    # The other questions are scored offline by default (no --others-llm), and their term is in the reward.
    assert score.HasField("others") and score.others.evaluator == "answer-phrase" and score.others.llm_scored == 0
    assert score.others.count > 0 and score.words_initial > 0
    words = (score.words_added + score.words_removed) / score.words_initial
    assert score.reward == pytest.approx(score.performance_delta + score.others_term - words)


def test_the_server_speaks_openai_chat_completions(llm):
    models = llm.get("/v1/models")
    assert [m["id"] for m in models["data"]] == [llm.model]
    body = {"messages": [{"role": "user", "content": "Name three colours."}], "temperature": 0, "max_tokens": 3, "seed": 1}
    status, reply = llm.post(body)
    assert status == 200 and reply["model"] == llm.model
    (choice,) = reply["choices"]
    assert choice["finish_reason"] == "length" and choice["message"]["role"] == "assistant"
    assert reply["usage"]["completion_tokens"] == 3 and reply["usage"]["prompt_tokens"] > 5
    # Temperature 0 is deterministic and the KV cache does not leak between requests.
    llm.post({"messages": [{"role": "user", "content": "Say something else entirely."}], "temperature": 0, "max_tokens": 8})
    assert llm.post(body)[1]["choices"][0]["message"]["content"] == choice["message"]["content"]
    # Streamed (as verifiers' harness and most agent frameworks ask), the same reply arrives as chunks.
    ask = urllib.request.Request(
        llm.url + "/chat/completions", data=json.dumps({**body, "stream": True}).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(ask, timeout=300) as r:
        assert r.headers.get("Content-Type") == "text/event-stream"
        events = [line[len(b"data: "):] for line in r.read().split(b"\n") if line.startswith(b"data: ")]
    assert events[-1] == b"[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["content"] == choice["message"]["content"]
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    # A seeded sample is reproducible; stop sequences cut the text.
    sampled = {**body, "temperature": 0.9, "max_tokens": 12, "seed": 7}
    assert llm.post(sampled)[1]["choices"][0]["message"] == llm.post(sampled)[1]["choices"][0]["message"]
    status, counted = llm.post({"messages": [{"role": "user", "content": "Count from 1 to 9, comma separated."}], "temperature": 0, "max_tokens": 40, "stop": ["5"]})
    assert status == 200 and "5" not in counted["choices"][0]["message"]["content"] and counted["choices"][0]["finish_reason"] == "stop"
    # Bad requests are 400 naming the field.
    for bad, param in [({"messages": []}, "messages"), ({**body, "temperature": -1}, "temperature"), ({**body, "stream": "yes"}, "stream"), ({**body, "stop": 5}, "stop")]:
        status, err = llm.post(bad)
        assert status == 400 and err["error"]["param"] == param, (bad, err)


@pytest.mark.parametrize("evaluator", ["llm-f1", "llm-judge"])
def test_score_episode_with_a_real_model_across_categories(llm, evaluator):
    with running_server(*memgym_flags(llm)) as address, MemgymClient(address, timeout=600) as client:
        for category, q in questions(client).items():
            episode = f"real-{evaluator}-{category}"
            client.create_episode(q.id, episode_id=episode, evaluator=evaluator, include_adversarial=category == 5)
            client.call_tool(episode, "manage_memory", {"operation": "create", "content": oracle_text(q)})
            score = client.score_episode(episode)
            check_breakdown(score, llm.model, evaluator)
            if category == 5:
                # The two-option prompt: a bare option letter is mapped back to the option's text.
                for answer in (score.answer_old, score.answer_new):
                    assert not re.fullmatch(r"\(?[abAB]\)?\.?", answer), answer
            client.close_episode(episode)


def test_p_old_is_asked_once_per_question_and_equal_states_share_answers(llm):
    with running_server(*memgym_flags(llm)) as address, MemgymClient(address, timeout=600) as client:
        q = questions(client)[4]
        before = llm.stats()["requests"]
        # A GRPO group of four no-op episodes on one question, scored at the same moment: M₀'s prompt once.
        ids = [f"group-{i}" for i in range(4)]
        for i in ids:
            client.create_episode(q.id, episode_id=i, evaluator="llm-f1", seed=3)
        scores: dict[str, pb.ScoreEpisodeResponse] = {}
        threads = [threading.Thread(target=lambda i=i: scores.__setitem__(i, client.score_episode(i))) for i in ids]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert llm.stats()["requests"] - before == 1
        assert {s.reward for s in scores.values()} == {0.0} and len({s.answer_old for s in scores.values()}) == 1
        # Two different edits: one request each for p_new, none for p_old.
        for n, text in enumerate([oracle_text(q), f"{q.question} Nobody knows."]):
            client.create_episode(q.id, episode_id=f"edit-{n}", evaluator="llm-f1", seed=3)
            client.call_tool(f"edit-{n}", "manage_memory", {"operation": "create", "content": text})
            check_breakdown(client.score_episode(f"edit-{n}"), llm.model, "llm-f1")
        assert llm.stats()["requests"] - before == 3


def provenance(memories: list[pb.Memory]) -> tuple[set[str], set[str]]:
    """(evidence union, speakers) of `memories`."""
    return {e for m in memories for e in m.evidence}, {m.speaker for m in memories}


def edit_requests(llm) -> int:
    """Edit requests the model has answered (the edit prompts have a system message)."""
    return sum(1 for r in llm.requests() if r["messages"][0]["role"] == "system")


def check_note(text: str, llm, fallback: str) -> bool:
    """True when the tool text says the model's text was used, False when it says why it fell back."""
    if text.endswith(f"note: text written by the LLM ({llm.model})"):
        return True
    match = re.search(rf"note: (.+); used the offline {fallback} instead$", text)
    assert match, text
    assert "LLM endpoint" not in match.group(1), f"the endpoint failed, the model was not heard: {text}"
    return False


def test_llm_edit_merges_and_splits_through_grpc(llm):
    with running_server(*memgym_flags(llm, "--llm-edit")) as address, MemgymClient(address, timeout=600) as client:
        client.create_episode("conv-26:q0", episode_id="edits", max_steps=10)
        memories = {m.id: m for m in client.list_memories("edits", page_size=500).memories}
        outcomes = []
        merges = [("summarize", ["m0000", "m0002"]), ("extract_common", ["m0004", "m0006"])]
        joined_ids = ["m0008", "m0010"]
        touched = {i for _, ids in merges for i in ids} | set(joined_ids)
        for strategy, ids in merges:
            sources = [memories[i] for i in ids]
            asked = edit_requests(llm)
            text, resp = client.call_tool("edits", "merge_memory", {"memory_ids": ids, "strategy": strategy})
            assert edit_requests(llm) == asked + 1, "every LLM merge asks the model once"
            merged = resp.merge.memory
            assert sorted(resp.merge.removed_ids) == sorted(ids)
            evidence, speakers = provenance(sources)
            assert set(merged.evidence) == evidence, "a merged memory points back to every source"
            assert merged.speaker == (speakers.pop() if len(speakers) == 1 else "")
            assert merged.text.strip() and len(merged.text) <= 2000
            outcomes.append((strategy, check_note(text, llm, f"{strategy} strategy")))
        # Splits: a two-sentence memory made by an offline concatenation (a clear case), and the longest memory.
        _, resp = client.call_tool("edits", "merge_memory", {"memory_ids": joined_ids, "strategy": "concatenate"})
        joined = resp.merge.memory
        longest = max((m for m in memories.values() if m.id not in touched), key=lambda m: len(m.text))
        for original, criteria in [(joined, "temporal"), (longest, "thematic")]:
            asked = edit_requests(llm)
            try:
                text, resp = client.call_tool("edits", "split_memory", {"memory_id": original.id, "split_criteria": criteria})
            except MemgymError as e:  # the model's parts were unusable and the offline splitter found no cut either
                assert e.code.name == "FAILED_PRECONDITION", e
                outcomes.append((criteria, None))
                continue
            finally:
                assert edit_requests(llm) == asked + 1, "every LLM split asks the model once"
            parts = resp.split.parts
            assert 2 <= len(parts) <= 3 and resp.split.removed_id == original.id
            for part in parts:
                assert list(part.evidence) == list(original.evidence) and part.speaker == original.speaker
                assert part.session_date == original.session_date and part.text.strip() and len(part.text) <= 2000
            outcomes.append((criteria, check_note(text, llm, f"{criteria} split")))
        # Which edits used the model's text depends on the model; the rules above hold either way.
        print("LLM edits (True: the model's text, False: offline fallback, None: refused):", outcomes)
        trace = [t.tool_name for t in client.get_episode("edits", include_trace=True).trace]
        assert trace[:3] == ["merge_memory"] * 3


def test_a_slow_model_is_deadline_exceeded_and_changes_nothing(llm):
    flags = ["--llm-base-url", llm.url, "--llm-model", llm.model, "--llm-timeout-ms", "150", "--llm-max-retries", "1"]
    with running_server(*flags) as address, MemgymClient(address, timeout=600) as client:
        client.create_episode("conv-26:q0", episode_id="slow", evaluator="llm-f1")
        with pytest.raises(MemgymError) as err:
            client.score_episode("slow")
        assert err.value.code.name == "DEADLINE_EXCEEDED" and "did not answer in time" in err.value.details
        state = client.get_episode("slow").state
        assert not state.scored and not state.done


def test_a_model_server_killed_mid_request_is_unavailable_and_the_episode_scores_after_a_restart(own_llm):
    with running_server(*memgym_flags(own_llm, "--llm-max-retries", "2")) as address, MemgymClient(address, timeout=600, retries=0) as client:
        client.create_episode("conv-26:q0", episode_id="killed", evaluator="llm-f1")
        outcome: dict = {}

        def score():
            try:
                outcome["score"] = client.score_episode("killed")
            except MemgymError as e:
                outcome["error"] = e

        t = threading.Thread(target=score)
        t.start()
        own_llm.wait_active()
        own_llm.kill()
        t.join(timeout=300)
        assert "error" in outcome, outcome
        assert outcome["error"].code.name == "UNAVAILABLE" and "LLM endpoint failed" in outcome["error"].details
        assert not client.get_episode("killed").state.scored
        # The failure was not cached: once the model is back on the same port the episode scores.
        own_llm.start()
        score = client.score_episode("killed")
        check_breakdown(score, own_llm.model, "llm-f1")
        assert score.reward == 0.0


def test_bank_merge_similar_asks_the_real_model_once_per_group(llm):
    """MergeSimilar(use_llm) on a bank: one request per group of near-duplicates (a dry run asks too, and the
    write that follows reuses the cached reply); the new experience holds the
    model's text (or the offline text with a note saying why), the group's highest confidence, and replaces its
    sources in one write."""
    with running_server(*memgym_flags(llm)) as address, MemgymClient(address, timeout=600) as client:
        client.create_bank("dups")
        client.add_experience("dups", "Always check the discriminant before solving a quadratic equation.", confidence=0.4)
        client.add_experience("dups", "Always check the discriminant before solving a quadratic equation!", confidence=0.8)
        client.add_experience("dups", "Draw a diagram for geometry problems.")
        asked = edit_requests(llm)
        dry = client.merge_similar("dups", use_llm=True, dry_run=True)
        assert edit_requests(llm) == asked + 1 and dry.merged == 0 and dry.groups[0].new_id == ""
        resp = client.merge_similar("dups", use_llm=True)
        assert edit_requests(llm) == asked + 1, "the same request again is answered from memgym's LLM cache"
        assert [(g.text, g.note) for g in resp.groups] == [(g.text, g.note) for g in dry.groups], "the dry run showed it"
        assert resp.merged == 2 and [list(g.source_ids) for g in resp.groups] == [["G0", "G1"]]
        group = resp.groups[0]
        assert group.new_id == "G3" and group.text.strip() and len(group.text) <= 4000
        if group.note:  # the model answered, but its text failed the merge checks
            assert group.note.startswith("the LLM reply was unusable") and group.note.endswith("merged offline (summarize)"), group.note
        kept = {e.id: e for e in client.list_experiences("dups").experiences}
        assert sorted(kept) == ["G2", "G3"] and kept["G3"].text == group.text
        assert kept["G3"].confidence == pytest.approx(0.8)
        print("bank merge by the model:", "offline fallback: " + group.note if group.note else repr(group.text))


def test_agent_memory_consolidation_asks_the_real_model(llm):
    """MaybeConsolidate in LLM mode on an agent bank: the model is asked once; either its rules are merged as
    ``[CONSOLIDATED] …`` global rules and the counter advances, or its reply gave no rules, nothing changed and
    the response says why."""
    with running_server(*memgym_flags(llm)) as address, MemgymClient(address, timeout=600) as client:
        client.create_agent_bank("agent")
        for i in range(20):
            client.record_episode(
                "agent", task_id="qa", score=0.9 if i % 2 else 0.3, steps=3,
                trajectory_summary=f"run {i}: searched the memory, then answered" if i % 2 else f"run {i}: guessed without searching",
            )
        asked = len(llm.requests())
        before = client.get_agent_summary("agent")
        resp = client.maybe_consolidate("agent", mode="llm")
        assert len(llm.requests()) == asked + 1, "one request"
        after = client.get_agent_summary("agent")
        if resp.ran:
            assert resp.mode == "llm" and resp.last_consolidated_at == 20 and resp.rules_added
            assert all(r.startswith("[CONSOLIDATED] ") for r in resp.rules_added)
            assert after.version == before.version + 1 and after.global_rules == len(resp.rules_added)
        else:
            assert resp.error and not resp.HasField("last_consolidated_at"), resp
            assert after.version == before.version and after.global_rules == 0
        print("agent consolidation by the model:", list(resp.rules_added) or resp.error)
