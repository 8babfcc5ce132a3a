"""The Banks calls of the Python client and the designs' drop-ins (``memgym.banks``) against the real server.

Why this exists: a trainer keeps its Training-Free GRPO experience library in a memgym bank through
``MemgymClient`` / ``AsyncMemgymClient`` or, switching one import, through ``ExperienceManager`` and
``SemanticMemoryManager``. These tests pin every Banks call, the error codes as the client surfaces them
(NOT_FOUND, ALREADY_EXISTS, INVALID_ARGUMENT naming the field, ABORTED, RESOURCE_EXHAUSTED,
FAILED_PRECONDITION), which calls are retried, and the drop-ins over them. The design documents' own usage examples are in
``test_bank_designs.py``, which shares this module's fixtures. One server (with its
own fresh banks directory) serves the module; each test uses its own banks.
"""

from __future__ import annotations

import asyncio
import json
import re
import statistics
import time

import grpc
import pytest

from memgym import (
    AsyncMemgymClient,
    ExperienceManager,
    MemgymClient,
    MemgymError,
    MemgymUnavailable,
    SemanticMemoryManager,
    banks_pb,
    message_to_dict,
)
from conftest import free_port, running_server

EQUATIONS = "When solving equations, verify solutions by substitution."
OPTIMIZATION = "For optimization, check boundary conditions first."
PROBABILITY = "In probability, use conditional probability when dependent."


@pytest.fixture(scope="module")
def address():
    """One real server for the module, with a fresh banks directory (conftest adds --banks-dir)."""
    with running_server() as addr:
        yield addr


@pytest.fixture(scope="module")
def bc(address):
    with MemgymClient(address, timeout=30.0) as c:
        yield c


def raises_code(code: grpc.StatusCode, fn, *args, **kwargs) -> MemgymError:
    with pytest.raises(MemgymError) as err:
        fn(*args, **kwargs)
    assert err.value.code == code, err.value
    return err.value


def ids_and_texts(client: MemgymClient, bank: str) -> dict:
    return {e.id: e.text for e in client.iter_experiences(bank)}


# -- client calls -----------------------------------------------------------------------------------


def test_bank_lifecycle_and_its_errors(bc):
    bank = bc.create_bank("life", kind="experience", max_size=7)
    assert (bank.name, bank.kind, bank.version, bank.size, bank.next_id, bank.epoch, bank.max_size) == (
        "life", banks_pb.BANK_KIND_EXPERIENCE, 0, 0, 0, 0, 7
    )
    assert bank.embedder.name and bank.embedder.dim == 384 and bank.embedder.fingerprint
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", bank.created_at)
    assert bc.get_bank("life") == bank
    assert bc.create_bank("life", if_not_exists=True, max_size=99).max_size == 7  # the existing bank, unchanged
    err = raises_code(grpc.StatusCode.ALREADY_EXISTS, bc.create_bank, "life")
    assert '"life"' in err.details and err.method == "Banks/CreateBank" and err.address == bc.address
    err = raises_code(grpc.StatusCode.INVALID_ARGUMENT, bc.create_bank, "no spaces")
    assert err.details.startswith("invalid argument name:")
    assert bc.create_bank("life-default").max_size == 100  # the semantic-memory design's experience_max_size
    assert {"life", "life-default"} <= {b.name for b in bc.list_banks().banks}

    bc.add_experience("life", EQUATIONS)
    err = raises_code(grpc.StatusCode.ABORTED, bc.delete_bank, "life", expected_version=0)
    assert "version 1" in err.details
    assert bc.get_bank("life").size == 1  # a refused write changes nothing
    assert isinstance(bc.delete_bank("life", expected_version=1), banks_pb.DeleteBankResponse)
    raises_code(grpc.StatusCode.NOT_FOUND, bc.get_bank, "life")
    raises_code(grpc.StatusCode.NOT_FOUND, bc.delete_bank, "life")
    assert "life" not in {b.name for b in bc.list_banks().banks}
    with pytest.raises(ValueError):
        bc.create_bank("x", kind="semantic")


def test_experience_writes_and_their_errors(bc):
    bc.create_bank("crud")
    w = bc.add_experience("crud", EQUATIONS, confidence=0.9, domain="math", epoch=2)
    assert (w.id, w.version) == ("G0", 1)
    assert (w.experience.text, w.experience.confidence, w.experience.domain, w.experience.created_epoch) == (
        EQUATIONS, 0.9, "math", 2
    )
    w = bc.add_experience("crud", OPTIMIZATION)
    assert (w.id, w.experience.confidence, w.experience.domain, w.experience.created_epoch) == ("G1", 0.5, "general", 0)
    assert not w.experience.HasField("last_used_epoch") and w.experience.usage_count == 0

    w = bc.modify_experience("crud", "G0", "Verify every root by substitution.")
    assert (w.id, w.version, w.experience.confidence, w.experience.domain) == ("G0", 3, 0.9, "math")  # unset fields kept
    w = bc.modify_experience("crud", "G1", OPTIMIZATION, confidence=0.2, domain="opt")
    assert (w.experience.confidence, w.experience.domain) == (0.2, "opt")
    assert bc.get_experience("crud", "G0").text == "Verify every root by substitution."

    w = bc.merge_experiences("crud", ["G0", "G1"], "Verify roots; check boundaries.")
    assert (w.id, w.experience.confidence, w.experience.domain) == ("G2", 0.9, "math")  # highest confidence, first domain
    assert ids_and_texts(bc, "crud") == {"G2": "Verify roots; check boundaries."}
    w = bc.add_experience("crud", PROBABILITY, group_advantages=[-0.4, 0.1, 0.35])
    assert (w.id, w.experience.confidence) == ("G3", pytest.approx(0.75))
    assert bc.add_experience("crud", "Big spread.", group_advantages=[-1.5, 1.5]).experience.confidence == 1.0
    w = bc.delete_experience("crud", "G4")
    assert (w.id, w.version) == ("G4", 8)

    version = bc.get_bank("crud").version
    err = raises_code(grpc.StatusCode.NOT_FOUND, bc.delete_experience, "crud", "G4")  # ids are never reused
    assert err.details.startswith("id: experience G4 not found")
    err = raises_code(grpc.StatusCode.NOT_FOUND, bc.modify_experience, "crud", "G17", "Updated experience text...")
    assert "G17" in err.details
    err = raises_code(grpc.StatusCode.NOT_FOUND, bc.merge_experiences, "crud", ["G2", "G9"], "x")
    assert err.details.startswith("ids[1]: experience G9 not found")
    raises_code(grpc.StatusCode.NOT_FOUND, bc.get_experience, "crud", "G0")
    raises_code(grpc.StatusCode.NOT_FOUND, bc.add_experience, "no-such-bank", "x")
    for call, field in [
        (lambda: bc.add_experience("crud", ""), "text"),
        (lambda: bc.add_experience("crud", "x", confidence=1.5), "confidence"),
        (lambda: bc.get_experience("crud", "bogus"), "id"),
        (lambda: bc.merge_experiences("crud", ["G2"], "x"), "ids"),
    ]:
        err = raises_code(grpc.StatusCode.INVALID_ARGUMENT, call)
        assert err.details.startswith(f"invalid argument {field}:"), err.details
    err = raises_code(grpc.StatusCode.RESOURCE_EXHAUSTED, bc.add_experience, "crud", "x" * 4001)
    assert "4001" in err.details and "4000" in err.details
    err = raises_code(grpc.StatusCode.ABORTED, bc.add_experience, "crud", "late", expected_version=version - 1)
    assert f"version {version}" in err.details
    err = raises_code(grpc.StatusCode.FAILED_PRECONDITION, bc.add_experience, "crud", "flat", group_advantages=[0.5, 0.5])
    assert "no variation" in err.details
    assert bc.get_bank("crud").version == version  # none of the refused writes changed anything
    assert bc.add_experience("crud", "y" * 4000, expected_version=version).id == "G5"  # the cap itself is fine


def test_apply_operations_in_both_vocabularies(bc):
    bc.create_bank("ops")
    for t in ["one", "two", "three"]:
        bc.add_experience("ops", t)
    resp = bc.apply_operations(
        "ops",
        [
            {"option": "add", "experience": "four", "reason": "the LLM explains"},
            {"option": "modify", "experience": "ONE", "modified_from": "G0"},
            {"option": "keep"},
            {"operation": "DELETE", "id": "G1"},
        ],
    )
    assert resp.applied == 3 and resp.version == 4
    got = [(r.index, r.kind, r.status, r.id, list(r.ignored_keys)) for r in resp.results]
    assert got == [
        (0, "add", banks_pb.OPERATION_STATUS_APPLIED, "G3", ["reason"]),
        (1, "modify", banks_pb.OPERATION_STATUS_APPLIED, "G0", []),
        (2, "keep", banks_pb.OPERATION_STATUS_KEPT, "", []),
        (3, "delete", banks_pb.OPERATION_STATUS_APPLIED, "G1", []),
    ]
    reply = 'Here are my edits:\n```json\n[{"option": "merge", "experience": "ONE and three", "merged_from": ["G0", "G2"]}]\n```'
    resp = bc.apply_operations("ops", reply)  # an LLM reply as text
    assert resp.results[0].id == "G4" and list(resp.results[0].removed_ids) == ["G0", "G2"]
    assert ids_and_texts(bc, "ops") == {"G3": "four", "G4": "ONE and three"}

    version = bc.get_bank("ops").version
    bad = [{"option": "add", "experience": "five"}, {"option": "delete", "delete_id": "G0"}]
    err = raises_code(grpc.StatusCode.NOT_FOUND, bc.apply_operations, "ops", bad)  # atomic by default
    assert err.details.startswith("operations[1].delete_id:")
    err = raises_code(grpc.StatusCode.INVALID_ARGUMENT, bc.apply_operations, "ops", [{"option": "frob"}])
    assert "operations[0].option" in err.details
    err = raises_code(grpc.StatusCode.ABORTED, bc.apply_operations, "ops", bad[:1], expected_version=version - 1)
    dry = bc.apply_operations("ops", bad, partial=True, dry_run=True)
    assert (dry.applied, dry.version) == (0, version)
    assert bc.get_bank("ops").version == version
    part = bc.apply_operations("ops", bad, partial=True)
    assert part.applied == 1 and [r.status for r in part.results] == [
        banks_pb.OPERATION_STATUS_APPLIED,
        banks_pb.OPERATION_STATUS_NOT_FOUND,
    ]
    assert part.results[1].message.startswith("operations[1].delete_id:")
    assert ids_and_texts(bc, "ops") == {"G3": "four", "G4": "ONE and three", "G5": "five"}
    assert bc.apply_operations("ops", {"operations": [{"operation": "NONE"}]}).results[0].kind == "keep"


def test_list_and_iterate_experiences(bc):
    bc.create_bank("pages")
    for i in range(25):
        bc.add_experience("pages", f"experience number {i}", domain="even" if i % 2 == 0 else "odd")
    page = bc.list_experiences("pages", page_size=10)
    assert page.total == 25 and len(page.experiences) == 10 and page.next_page_token
    assert [e.id for e in page.experiences] == [f"G{i}" for i in range(10)]
    page2 = bc.list_experiences("pages", page_size=10, page_token=page.next_page_token)
    assert page2.experiences[0].id == "G10"
    assert [e.id for e in bc.iter_experiences("pages", page_size=7)] == [f"G{i}" for i in range(25)]
    odd = list(bc.iter_experiences("pages", domain="odd", page_size=5))
    assert [e.id for e in odd] == [f"G{i}" for i in range(1, 25, 2)] and {e.domain for e in odd} == {"odd"}
    assert bc.list_experiences("pages", domain="odd").total == 12
    err = raises_code(grpc.StatusCode.INVALID_ARGUMENT, bc.list_experiences, "pages", page_size=5000)
    assert "page_size" in err.details
    raises_code(grpc.StatusCode.NOT_FOUND, lambda: list(bc.iter_experiences("no-such-bank")))


def test_format_retrieve_epoch_and_stats(bc):
    bc.create_bank("sem")
    for t in [EQUATIONS, OPTIMIZATION, PROBABILITY]:
        bc.add_experience("sem", t, domain="math")
    bc.add_experience("sem", "Read the docstring before calling an API.", domain="coding", confidence=0.9)
    every = bc.format_for_prompt("sem")
    assert every.text == (
        f"[G0]. {EQUATIONS}\n[G1]. {OPTIMIZATION}\n[G2]. {PROBABILITY}\n[G3]. Read the docstring before calling an API."
    )
    assert list(every.ids) == ["G0", "G1", "G2", "G3"]
    assert bc.get_stats("sem").total_usage == 0  # listing the library counts no usage

    bc.set_epoch("sem", 3)
    hits = bc.retrieve("sem", "how to solve equations", top_k=2, domain="math")
    assert [h.id for h in hits.hits] == ["G0", "G2"] and hits.path == "exact"
    assert hits.hits[0].similarity > hits.hits[1].similarity > 0 and hits.hits[0].text == EQUATIONS
    assert hits.hits[0].experience.usage_count == 0  # the hit shows the experience as it was before this retrieval
    used = bc.get_experience("sem", "G0")
    assert used.usage_count == 1 and used.last_used_epoch == 3
    quiet = bc.retrieve("sem", "how to solve equations", top_k=1, read_only=True)
    assert quiet.hits[0].id == "G0" and quiet.hits[0].experience.usage_count == 1
    assert bc.get_experience("sem", "G0").usage_count == 1  # read_only: not counted
    assert [h.id for h in bc.retrieve("sem", "how to solve equations", min_similarity=0.3, read_only=True).hits] == ["G0"]
    prompt = bc.format_for_prompt("sem", "how to solve equations", top_k=1, system="You are a math tutor.")
    assert prompt.text == f"You are a math tutor.\n\n# Learned Experiences\n[G0]. {EQUATIONS}" and list(prompt.ids) == ["G0"]
    assert bc.format_for_prompt("sem", "zzzz qqqq", min_similarity=0.99, system="S", read_only=True).text == "S"

    stats = bc.get_stats("sem")
    assert (stats.total_experiences, stats.total_usage, stats.used_experiences, stats.epoch, stats.max_size) == (4, 3, 2, 3, 100)
    assert stats.avg_confidence == pytest.approx(0.6) and dict(stats.domains) == {"math": 3, "coding": 1}
    assert message_to_dict(stats)["domains"] == {"math": 3, "coding": 1}  # map fields become dicts
    assert bc.add_experience("sem", "Stamped with the epoch.").experience.created_epoch == 3
    assert bc.get_experience("sem", "G0").usage_count == 2
    assert bc.set_epoch("sem", 4).id == "" and bc.get_bank("sem").epoch == 4


def test_compress_and_merge_similar(bc):
    bc.create_bank("squeeze", max_size=3)
    for i, c in enumerate([0.1, 0.9, 0.5, 0.7, 0.3]):
        bc.add_experience("squeeze", f"distinct lesson about topic {i} and nothing else {i * 7}", confidence=c)
    version = bc.get_bank("squeeze").version
    dry = bc.compress("squeeze", strategy="importance", dry_run=True)
    assert list(dry.removed_ids) == ["G0", "G4"] and dry.remaining == 3 and dry.version == version  # what would be left; nothing removed yet
    done = bc.compress("squeeze", strategy="importance")  # max_size: the bank's 3
    assert list(done.removed_ids) == ["G0", "G4"] and done.remaining == 3
    assert sorted(ids_and_texts(bc, "squeeze")) == ["G1", "G2", "G3"]
    assert bc.compress("squeeze", max_size=2, strategy="temporal", decay=0.5).remaining == 2
    assert bc.compress("squeeze", max_size=1, strategy="diversity", seed=3).remaining == 1
    assert bc.compress("squeeze", max_size=1).removed_ids == []  # nothing over the size: nothing removed
    err = raises_code(grpc.StatusCode.INVALID_ARGUMENT, bc.compress, "squeeze", strategy="random")
    assert err.details.startswith("invalid argument strategy:")
    err = raises_code(grpc.StatusCode.INVALID_ARGUMENT, bc.compress, "squeeze", decay=-1.0)
    assert err.details.startswith("invalid argument decay:")

    bc.create_bank("dups")
    bc.add_experience("dups", "Always check the discriminant before solving a quadratic equation.")
    bc.add_experience("dups", "Always check the discriminant before solving a quadratic equation!")
    bc.add_experience("dups", "Draw a diagram for geometry problems.")
    dry = bc.merge_similar("dups", threshold=0.9, dry_run=True)
    assert dry.merged == 0 and [list(g.source_ids) for g in dry.groups] == [["G0", "G1"]] and dry.groups[0].new_id == ""
    merged = bc.merge_similar("dups")
    assert merged.merged == 2 and merged.groups[0].new_id == "G3"
    assert sorted(ids_and_texts(bc, "dups")) == ["G2", "G3"]
    err = raises_code(grpc.StatusCode.FAILED_PRECONDITION, bc.merge_similar, "dups", use_llm=True)
    assert "--llm-base-url" in err.details  # this server has no LLM


def test_import_and_export_in_three_formats(bc):
    seed = {"experiences": {"G0": EQUATIONS, "G3": OPTIMIZATION}, "next_id": 7}
    imp = bc.import_bank("imported", "seed", seed)  # creates the bank
    assert (imp.imported, imp.next_id) == (2, 7)
    assert json.loads(bc.export_bank("imported", "seed").data) == seed
    assert json.loads(bc.export_bank("imported", banks_pb.BANK_FORMAT_UPSTREAM_JSON).data) == seed["experiences"]
    assert bc.add_experience("imported", PROBABILITY).id == "G7"  # the file's counter is kept
    err = raises_code(grpc.StatusCode.FAILED_PRECONDITION, bc.import_bank, "imported", "seed", seed)
    assert "replace" in err.details
    imp = bc.import_bank("imported", "upstream", json.dumps({"G1": "only one"}), replace=True)
    assert (imp.imported, imp.next_id) == (1, 8)  # the counter never goes back
    assert ids_and_texts(bc, "imported") == {"G1": "only one"}

    bc.set_epoch("imported", 5)
    bc.modify_experience("imported", "G1", "only one, edited", confidence=0.8, domain="misc")
    bc.retrieve("imported", "only one")
    mine = json.loads(bc.export_bank("imported", "memgym").data)
    assert (mine["format"], mine["name"], mine["next_id"], mine["epoch"], mine["max_size"]) == ("memgym-bank", "imported", 8, 5, 100)
    assert mine["experiences"] == [
        {"id": "G1", "text": "only one, edited", "confidence": 0.8, "domain": "misc", "created_epoch": 0, "usage_count": 1, "last_used_epoch": 5}
    ]
    imp = bc.import_bank("copy", "memgym-json", json.dumps(mine))
    assert (imp.imported, imp.next_id) == (1, 8)
    copy = bc.get_experience("copy", "G1")
    assert (copy.confidence, copy.domain, copy.usage_count, copy.last_used_epoch) == (0.8, "misc", 1, 5)
    assert bc.get_bank("copy").epoch == 5

    err = raises_code(grpc.StatusCode.INVALID_ARGUMENT, bc.import_bank, "bad", "seed", '{"experiences": 3}')
    assert err.details.startswith("invalid argument data.experiences:")
    err = raises_code(grpc.StatusCode.INVALID_ARGUMENT, bc.export_bank, "copy", 0)
    assert err.details.startswith("invalid argument format:")
    raises_code(grpc.StatusCode.NOT_FOUND, bc.export_bank, "no-such-bank", "seed")
    with pytest.raises(ValueError):
        bc.export_bank("copy", "yaml")


def test_a_large_library_is_streamed(bc, address, monkeypatch):
    # Over STREAM_IMPORT_OVER bytes, import_bank sends ImportBankStream chunks; made small here, with chunks that
    # end inside characters, the server must put the same file back together.
    from memgym import _banks_client

    monkeypatch.setattr(_banks_client, "STREAM_IMPORT_OVER", 64)
    monkeypatch.setattr(_banks_client, "IMPORT_CHUNK_BYTES", 7)
    lib = {f"G{i}": f"Expérience numéro {i} — vérifier la solution ✓" for i in range(40)}
    plan = _banks_client._import("streamed", "upstream", lib, False, None)
    assert plan.rpc == "ImportBankStream" and len(plan.request) > 100
    assert plan.request[0].bank == "streamed" and all(not c.bank for c in plan.request[1:])
    assert bc.import_bank("streamed", "upstream", lib).imported == 40
    assert json.loads(bc.export_bank("streamed", "upstream").data) == lib
    # The same one write as ImportBank: a second import without replace is refused, with replace it lands.
    raises_code(grpc.StatusCode.FAILED_PRECONDITION, bc.import_bank, "streamed", "upstream", lib)
    assert bc.import_bank("streamed", "upstream", lib, replace=True, expected_version=bc.get_bank("streamed").version).imported == 40

    async def run():
        async with AsyncMemgymClient(address, timeout=30.0) as c:
            assert (await c.import_bank("streamed-async", "upstream", lib)).imported == 40

    asyncio.run(run())
    assert ids_and_texts(bc, "streamed-async") == lib

    # Only the first message names the bank; a stream with no message, or bytes that are not UTF-8, is refused.
    def stream(*chunks):
        return bc.banks.ImportBankStream(iter(chunks), timeout=10)

    upstream = banks_pb.BANK_FORMAT_UPSTREAM_JSON
    cases = [
        ([banks_pb.ImportBankChunk(bank="one", format=upstream, data=b"{"), banks_pb.ImportBankChunk(bank="two", data=b"}")], "bank"),
        ([banks_pb.ImportBankChunk(bank="one", format=upstream, data=b'{"G0": "\xe2\x82"}')], "data"),
        ([], "bank"),
    ]
    for chunks, field in cases:
        with pytest.raises(grpc.RpcError) as err:
            stream(*chunks)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and field in err.value.details(), err.value
    raises_code(grpc.StatusCode.NOT_FOUND, bc.get_bank, "one")  # nothing was written


def test_bank_reads_are_retried_and_writes_are_not():
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    with MemgymClient(address, timeout=2.0, retries=1, backoff=0.5) as down:
        started = time.monotonic()
        with pytest.raises(MemgymUnavailable) as err:
            down.get_stats("b")  # a read: retried once after 0.5 s
        assert time.monotonic() - started >= 0.5 and address in str(err.value)
        assert err.value.method == "Banks/GetStats"
        for write in (
            lambda: down.add_experience("b", "x"),
            lambda: down.apply_operations("b", []),
            lambda: down.create_bank("b"),
            lambda: down.retrieve("b", "q"),  # counts usage: a write of statistics
        ):
            started = time.monotonic()
            with pytest.raises(MemgymUnavailable):
                write()
            assert time.monotonic() - started < 0.5  # sent once, no backoff


def test_async_client_banks(address):
    async def run():
        async with AsyncMemgymClient(address, timeout=10.0) as c:
            bank = await c.create_bank("async", max_size=2)
            assert bank.max_size == 2 and (await c.get_bank("async")).name == "async"
            assert "async" in {b.name for b in (await c.list_banks()).banks}
            assert (await c.add_experience("async", EQUATIONS, domain="math")).id == "G0"
            assert (await c.modify_experience("async", "G0", EQUATIONS, confidence=0.7)).experience.confidence == 0.7
            resp = await c.apply_operations("async", [{"option": "add", "experience": OPTIMIZATION}, {"option": "add", "experience": PROBABILITY}])
            assert resp.applied == 2
            assert (await c.merge_experiences("async", ["G1", "G2"], "Optimise; condition.")).id == "G3"
            assert [e.id async for e in c.iter_experiences("async", page_size=1)] == ["G0", "G3"]
            assert (await c.list_experiences("async")).total == 2
            assert (await c.get_experience("async", "G3")).text == "Optimise; condition."
            await c.set_epoch("async", 1)
            hits = await c.retrieve("async", "solving equations", top_k=1)
            assert hits.hits[0].id == "G0" and (await c.get_experience("async", "G0")).last_used_epoch == 1
            assert (await c.format_for_prompt("async")).text == f"[G0]. {EQUATIONS}\n[G3]. Optimise; condition."
            assert (await c.get_stats("async")).total_usage == 1
            assert (await c.compress("async", max_size=1, strategy="importance")).removed_ids == ["G3"]
            assert (await c.merge_similar("async")).merged == 0
            data = (await c.export_bank("async", "seed")).data
            assert json.loads(data) == {"experiences": {"G0": EQUATIONS}, "next_id": 4}
            assert (await c.import_bank("async-copy", "seed", data)).imported == 1
            assert (await c.delete_experience("async-copy", "G0")).id == "G0"
            await c.delete_bank("async-copy")
            with pytest.raises(MemgymError) as err:
                await c.get_bank("async-copy")
            assert err.value.code == grpc.StatusCode.NOT_FOUND
            with pytest.raises(MemgymError) as err:
                await c.add_experience("async", "z" * 4001)
            assert err.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED

    asyncio.run(run())
