"""The design documents' own usage examples, rewritten as tests, through the drop-ins (``memgym.banks``).

Why this exists: a trainer switches one import to keep its Training-Free GRPO experience library
(``ExperienceManager``) or its semantic memory (``SemanticMemoryManager``) in a memgym bank. The designs'
API references and examples, minus their LLM calls, are the contract those users read; each one is a test
here against the real server. The client calls themselves are pinned in ``test_banks.py``, whose server
fixtures (one server per module, with its own fresh banks directory) this module shares.
"""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path

import grpc
import pytest

from memgym import ExperienceManager, MemgymClient, MemgymError, MemgymUnavailable, SemanticMemoryManager, banks_pb
from memgym.banks import bank_name_for, file_format, write_atomically
from conftest import free_port
from test_banks import EQUATIONS, OPTIMIZATION, PROBABILITY, address, bc  # noqa: F401 (fixtures)


# -- the Training-Free GRPO design: the ExperienceManager API reference, its examples as tests ---------------------------


def test_tfgrpo_design_add_delete_modify(address):
    manager = ExperienceManager(bank="s001-crud", address=address)
    exp_id = manager.add("When solving equations, verify solutions by substitution.")
    assert exp_id == "G0"  # print(exp_id)  # "G0"
    assert manager.delete("G5") is False  # "Returns True if G5 exists": it does not yet
    for i in range(1, 6):
        assert manager.add(f"Experience {i}.") == f"G{i}"
    assert manager.delete("G5") is True and manager.delete("G5") is False
    assert manager.modify("G17", "Updated experience text...") is False  # unknown id
    assert manager.modify("G1", "Updated experience text...") is True
    assert manager.experiences["G1"] == "Updated experience text..."
    assert manager.delete("g1") is False and manager.modify("1", "x") is False  # not the seed's keys
    assert manager.add("After a delete the counter goes on.") == "G6"  # ids are never reused
    assert len(manager) == 6 and manager._next_id == 7
    assert list(manager.experiences) == ["G0", "G1", "G2", "G3", "G4", "G6"]
    with pytest.raises(MemgymError) as err:
        manager.add("")  # the seed would store it; the bank refuses empty texts
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    manager.close()


def test_tfgrpo_design_merge(address):
    manager = ExperienceManager(bank="s001-merge", address=address)
    for i in range(8):
        manager.add(f"Guidance {i} for polynomial equations.")
    new_id = manager.merge(["G1", "G3", "G7"], "Combined guidance for polynomial equations...")
    assert new_id == "G8"  # G1, G3, G7 deleted; new experience created
    assert list(manager.experiences) == ["G0", "G2", "G4", "G5", "G6", "G8"]
    assert manager.experiences["G8"] == "Combined guidance for polynomial equations..."
    with pytest.raises(MemgymError) as err:
        manager.merge(["G1", "G2"], "G1 is gone")
    assert err.value.code == grpc.StatusCode.NOT_FOUND and len(manager) == 6  # nothing changed


def test_tfgrpo_design_apply_operations_example(address):
    manager = ExperienceManager(bank="s001-ops", address=address)
    for i in range(18):
        manager.add(f"Experience {i}.")
    operations = [
        {"option": "add", "experience": "When solving..."},
        {"option": "modify", "experience": "Updated...", "modified_from": "G17"},
        {"option": "delete", "delete_id": "G5"},
        {"option": "merge", "experience": "Merged...", "merged_from": ["G1", "G3"]},
    ]
    assert manager.apply_operations(operations) is None
    exps = manager.experiences
    assert exps["G18"] == "When solving..." and exps["G17"] == "Updated..." and exps["G19"] == "Merged..."
    assert not {"G1", "G3", "G5"} & set(exps) and len(manager) == 17 and manager.skipped_operations == []

    # Applied again, the ids it names are gone: the add applies, the rest is skipped, nothing raises.
    manager.apply_operations(operations)
    assert manager.experiences["G20"] == "When solving..." and manager.experiences["G17"] == "Updated..."
    assert [r.status for r in manager.skipped_operations] == [banks_pb.OPERATION_STATUS_NOT_FOUND] * 2
    assert [r.index for r in manager.skipped_operations] == [2, 3]
    # Malformed operations and replies never raise.
    manager.apply_operations([{"option": "frob"}, "not an op", {"option": "add"}, {"option": "keep"}, {"experience": "No option: an add."}])
    assert manager.experiences["G21"] == "No option: an add." and len(manager.skipped_operations) == 3
    manager.apply_operations("The model rambled and wrote no JSON at all.")
    manager.apply_operations([])
    manager.apply_operations([{"option": "delete", "delete_id": ["G0"]}])  # an id must be a string or number
    assert len(manager) == 19
    # An LLM reply in upstream's vocabulary, inside a fence.
    manager.apply_operations('```json\n[{"operation": "UPDATE", "id": "G0", "content": "Zero."}, {"operation": "NONE"}]\n```')
    assert manager.experiences["G0"] == "Zero."
    # More operations than one call may carry are sent in batches.
    manager.apply_operations([{"option": "add", "experience": f"bulk {i}"} for i in range(1001)])
    assert len(manager) == 19 + 1001 and manager._next_id == 22 + 1001


def test_tfgrpo_design_format_for_prompt_example(address):
    manager = ExperienceManager(bank="s001-format", address=address)
    assert manager.format_for_prompt() == ""  # an empty library
    for t in [EQUATIONS, OPTIMIZATION, PROBABILITY]:
        manager.add(t)
    experiences_str = manager.format_for_prompt()
    assert experiences_str == (
        "[G0]. When solving equations, verify solutions by substitution.\n"
        "[G1]. For optimization, check boundary conditions first.\n"
        "[G2]. In probability, use conditional probability when dependent."
    )
    query = "Solve: x² + 2x + 5 = 0"
    prompt = f"Helpful experiences:\n{experiences_str}\n\nQuery: {query}"
    assert prompt.splitlines()[1] == f"[G0]. {EQUATIONS}" and prompt.endswith("Query: Solve: x² + 2x + 5 = 0")


def test_tfgrpo_design_save_and_load(address, tmp_path, capsys):
    manager = ExperienceManager(bank="s001-save", address=address)
    for t in [EQUATIONS, OPTIMIZATION, PROBABILITY]:
        manager.add(t)
    manager.delete("G1")
    path = tmp_path / "experiences.json"
    manager.save(str(path))
    assert json.loads(path.read_text()) == {"experiences": {"G0": EQUATIONS, "G2": PROBABILITY}, "next_id": 3}
    assert [p.name for p in tmp_path.iterdir()] == ["experiences.json"]  # no temporary file left

    # Later...
    manager2 = ExperienceManager(bank="s001-save-2", address=address)
    manager2.load(str(path))
    assert len(manager2) == len(manager) == 2
    assert manager2.experiences == manager.experiences and manager2._next_id == 3
    print(f"Library contains {len(manager)} experiences")
    assert capsys.readouterr().out == "Library contains 2 experiences\n"
    assert manager2.add("Next.") == "G3"

    # load replaces the library; the id counter never goes back (the seed would reset it to the file's).
    manager2.load(str(path))
    assert list(manager2.experiences) == ["G0", "G2"] and manager2._next_id == 4
    # upstream's per-step file loads too
    (tmp_path / "step.json").write_text(json.dumps({"G0": "upstream zero", "G1": "upstream one"}))
    manager2.load(str(tmp_path / "step.json"))
    assert manager2.experiences == {"G0": "upstream zero", "G1": "upstream one"}


def test_tfgrpo_design_save_is_atomic(address, tmp_path, monkeypatch):
    manager = ExperienceManager(bank="s001-atomic", address=address)
    manager.add(EQUATIONS)
    path = tmp_path / "sub" / "lib.json"  # the directory is created
    manager.save(str(path))
    before = path.read_text()
    os.chmod(path, 0o640)
    manager.add(OPTIMIZATION)

    def crash(src, dst):
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        manager.save(str(path))
    assert path.read_text() == before and [p.name for p in path.parent.iterdir()] == ["lib.json"]
    monkeypatch.undo()
    manager.save(str(path))
    assert json.loads(path.read_text())["next_id"] == 2 and (path.stat().st_mode & 0o777) == 0o640  # mode kept
    write_atomically(tmp_path / "plain.txt", "x")
    assert (tmp_path / "plain.txt").read_text() == "x"


def test_tfgrpo_design_checkpoint_is_loaded_if_it_exists(address, tmp_path):
    path = tmp_path / "run 1.ckpt.json"
    path.write_text(json.dumps({"experiences": {"G0": EQUATIONS, "G4": OPTIMIZATION}, "next_id": 42}))
    manager = ExperienceManager(checkpoint_path=str(path), address=address)
    assert manager.bank == "run_1.ckpt"  # the sanitised stem of the path
    assert manager.experiences == {"G0": EQUATIONS, "G4": OPTIMIZATION} and manager._next_id == 42
    assert manager.add("New.") == "G42"
    # The bank now holds the newer library: the file is not read again.
    again = ExperienceManager(checkpoint_path=str(path), address=address)
    assert len(again) == 3 and again.experiences["G42"] == "New."
    missing = ExperienceManager(checkpoint_path=str(tmp_path / "absent.json"), address=address)
    assert missing.bank == "absent" and len(missing) == 0
    for m in (manager, again, missing):
        m.close()


def test_tfgrpo_design_complete_workflow(address, tmp_path, capsys):
    """The Training-Free GRPO design's complete workflow with the model and the LLM replaced by fixed outputs."""
    # 1. Initialize components (no LLM client, extractor or model adapter: fixed stand-ins below)
    experience_manager = ExperienceManager(checkpoint_path=str(tmp_path / "workflow.json"), address=address)
    outputs = {
        "Solve: x² + 2x + 5 = 0": ["discriminant -16: no real solutions", "x = -1", "No real roots", "x = 2", "x = 1"],
        "Solve: x² + 4 = 0": ["x = 2", "x = -2", "x = 4", "x = 0", "x = 1"],  # no variation: no operations
        "Solve: x² + x + 1 = 0": ["no real solutions", "No real solutions exist", "x = 1", "x = -1", "x = 0"],
    }
    operations_for = {
        "Solve: x² + 2x + 5 = 0": [{"option": "add", "experience": "For quadratic equations, check the discriminant first."}],
        "Solve: x² + x + 1 = 0": [
            {"option": "modify", "experience": "For quadratics, a negative discriminant means no real roots.", "modified_from": "G0"},
            {"option": "add", "experience": "Report 'no real solutions' explicitly."},
        ],
    }
    prompts_seen = []

    def extract_group_advantage(trajectories, experiences):  # stands in for the LLM's stage 2
        rewards = [r for _, _, r in trajectories]
        if max(rewards) == min(rewards):
            return []  # no variation (all correct or all wrong)
        return operations_for[trajectories[0][0]]

    # 2. Training data; 3. Training loop (1 epoch)
    for query in outputs:
        trajectories = []
        experiences = experience_manager.format_for_prompt()
        prompts_seen.append(experiences)
        for output in outputs[query]:  # G=5
            reward = 1.0 if "no real" in output.lower() else 0.0
            trajectories.append((query, output, reward))
        operations = extract_group_advantage(trajectories, experiences)
        if operations:
            experience_manager.apply_operations(operations)

    # 4. Save
    experience_manager.save(str(tmp_path / "experiences_final.json"))
    print(f"Final library size: {len(experience_manager)}")
    assert capsys.readouterr().out == "Final library size: 2\n"
    assert prompts_seen == ["", "[G0]. For quadratic equations, check the discriminant first.", "[G0]. For quadratic equations, check the discriminant first."]
    assert json.loads((tmp_path / "experiences_final.json").read_text()) == {
        "experiences": {
            "G0": "For quadratics, a negative discriminant means no real roots.",
            "G1": "Report 'no real solutions' explicitly.",
        },
        "next_id": 2,
    }


# -- the semantic-memory design: SemanticMemoryManager, its examples as tests ------------------------------------------


def test_semantic_design_basic_usage(address, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MEMGYM_ADDRESS", address)  # no address argument: the environment names the server
    # Initialize
    manager = SemanticMemoryManager(checkpoint_path=str(tmp_path / "experiences.json"), max_size=100)
    assert manager.bank == "experiences" and manager.max_size == 100 and manager.client.address == address
    # Add experiences
    exp_id = manager.add_experience("When solving equations, verify by substitution", confidence=0.85, domain="math", epoch=0)
    assert exp_id == "G0"
    # Retrieve relevant
    results = manager.retrieve_relevant("How to solve?", top_k=5)
    assert len(results) == 1
    for exp_id, similarity, text in results:
        print(f"[{exp_id}] ({similarity:.2f}): {text}")
    (sim,) = [s for _, s, _ in results]
    assert isinstance(sim, float) and 0.0 < sim < 1.0
    # Get statistics
    stats = manager.get_memory_stats()
    print(f"Total: {stats['total_experiences']}")
    print(f"Avg confidence: {stats['avg_confidence']:.2f}")
    print(f"Domains: {stats['domains']}")
    assert capsys.readouterr().out.splitlines() == [
        f"[G0] ({sim:.2f}): When solving equations, verify by substitution",
        "Total: 1",
        "Avg confidence: 0.85",
        "Domains: {'math': 1}",
    ]
    assert (stats["total_usage"], stats["used_experiences"], stats["epoch"], stats["max_size"]) == (1, 1, 0, 100)
    assert manager.client.get_experience("experiences", "G0").usage_count == 1  # retrieval counts usage


def test_semantic_design_retrieval_filters_and_prompt(address):
    manager = SemanticMemoryManager(max_size=100, bank="s000-retrieve", address=address)
    manager.add_experience(EQUATIONS, 0.9, "math")
    manager.add_experience("Write unit tests before refactoring code.", 0.6, "coding")
    manager.add_experience("When solving inequalities, flip the sign on negative factors.", 0.7, "math")
    hits = manager.retrieve_relevant("solving equations", top_k=5)
    assert [h[0] for h in hits][:2] == ["G0", "G2"] and hits[0][2] == EQUATIONS
    assert all(a[1] >= b[1] for a, b in zip(hits, hits[1:]))  # best first
    assert [h[0] for h in manager.retrieve_relevant("solving equations", domain_filter="coding")] == ["G1"]
    assert [h[0] for h in manager.retrieve_relevant("solving equations", min_similarity=0.5)] == ["G0"]
    assert manager.retrieve_relevant("solving equations", top_k=0) == []
    assert manager.format_for_prompt(query="solving equations", top_k=1) == f"[G0]. {EQUATIONS}"
    assert manager.format_for_prompt() == (
        f"[G0]. {EQUATIONS}\n[G1]. Write unit tests before refactoring code.\n"
        "[G2]. When solving inequalities, flip the sign on negative factors."
    )
    assert manager.format_for_prompt(domain_filter="math") == (
        f"[G0]. {EQUATIONS}\n[G2]. When solving inequalities, flip the sign on negative factors."
    )
    assert manager.format_for_prompt(query="solving", domain_filter="coding") == "[G1]. Write unit tests before refactoring code."
    assert manager.format_for_prompt(query="solving", top_k=0) == ""
    with pytest.raises(MemgymError) as err:
        manager.compress_memory(strategy="random")
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT and "strategy" in err.value.details


def test_semantic_design_edge_cases(address):
    manager = SemanticMemoryManager(max_size=2, bank="s000-edges", address=address)
    # Empty library
    assert manager.retrieve_relevant("anything") == [] and manager.format_for_prompt("anything") == ""
    assert manager.compress_memory() == 0 and manager.merge_similar() == 0 and len(manager) == 0
    stats = manager.get_memory_stats()
    assert (stats["total_experiences"], stats["avg_confidence"], stats["domains"]) == (0, 0.0, {})
    # A single experience; a text with no tokens embeds to the zero vector: similarity 0, never NaN
    manager.add_experience("...", confidence=2.5)  # confidence is clipped into [0, 1]
    (hit,) = manager.retrieve_relevant("solve equations")
    assert hit == ("G0", 0.0, "...")
    assert manager.client.get_experience(manager.bank, "G0").confidence == 1.0
    assert manager.add_experience("Negative spread.", confidence=-0.3) == "G1"
    assert manager.client.get_experience(manager.bank, "G1").confidence == 0.0
    with pytest.raises(ValueError):
        manager.add_experience("nan", confidence=float("nan"))
    with pytest.raises(ValueError):
        SemanticMemoryManager(max_size=-1, bank="s000-never", address=address)


def test_semantic_design_continuous_learning_loop(address, tmp_path, capsys):
    manager = SemanticMemoryManager(max_size=4, bank="s000-loop", address=address)
    domains = ["math", "coding"]
    skipped = 0
    for epoch in range(3):
        manager.set_epoch(epoch)
        for b in range(3):
            batch = {"query": f"problem {b} of epoch {epoch}", "domain": domains[b % 2]}
            # Generate rollouts with current experiences
            context = manager.format_for_prompt(query=batch["query"], top_k=10)
            assert context.count("\n") + 1 == min(len(manager), 10) if context else len(manager) == 0
            advantages = [0.0, 0.0, 0.0, 0.0] if b == 2 else [-0.5 - 0.1 * b, 0.0, 0.25, 0.5 + 0.1 * epoch]
            # Extract and add new experiences
            if statistics.pstdev(advantages) > 0:  # Skip homogeneous groups
                experience = f"Lesson {b} learned in epoch {epoch}: handle case {b * 10 + epoch} carefully."
                manager.add_experience(
                    text=experience,
                    confidence=max(advantages) - min(advantages),
                    domain=batch["domain"],
                    epoch=epoch,
                )
            else:
                skipped += 1
        # Compress if needed
        if len(manager) > manager.max_size:
            removed = manager.compress_memory(strategy="hybrid")
            assert removed == 2 and len(manager) == 4
        # Save checkpoint
        manager.save(str(tmp_path / "checkpoints" / f"epoch_{epoch}.json"))
        # Log statistics
        stats = manager.get_memory_stats()
        print(f"Epoch {epoch}: {stats['total_experiences']} experiences")
    assert skipped == 3
    assert capsys.readouterr().out.splitlines() == ["Epoch 0: 2 experiences", "Epoch 1: 4 experiences", "Epoch 2: 4 experiences"]
    files = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert files == ["epoch_0.json", "epoch_1.json", "epoch_2.json"]
    last = json.loads((tmp_path / "checkpoints" / "epoch_2.json").read_text())
    assert (last["format"], last["epoch"], last["next_id"], len(last["experiences"])) == ("memgym-bank", 2, 6, 4)
    first = json.loads((tmp_path / "checkpoints" / "epoch_0.json").read_text())
    assert [(e["id"], e["created_epoch"], e["domain"], e["confidence"]) for e in first["experiences"]] == [
        ("G0", 0, "math", 1.0),
        ("G1", 0, "coding", pytest.approx(1.0)),
    ]
    stats = manager.get_memory_stats()
    assert stats["epoch"] == 2 and manager.current_epoch == 2 and stats["total_usage"] > 0
    assert set(stats["domains"]) <= {"math", "coding"} and sum(stats["domains"].values()) == 4

    # Reload a checkpoint into a fresh manager: every field comes back.
    again = SemanticMemoryManager(str(tmp_path / "checkpoints" / "epoch_0.json"), max_size=4, bank="s000-loop-reload", address=address)
    assert again.experiences == {e["id"]: e["text"] for e in first["experiences"]} and again.current_epoch == 0
    assert again.client.get_experience(again.bank, "G1").domain == "coding"


def test_semantic_design_compression_strategies_and_merge_similar(address):
    for strategy in ("diversity", "importance", "temporal", "hybrid"):
        manager = SemanticMemoryManager(max_size=3, bank=f"s000-{strategy}", address=address, decay=0.2, kmeans_seed=1)
        for i in range(6):
            manager.add_experience(f"Distinct lesson {i} on subject {chr(65 + i)} number {i * 13}", confidence=0.1 + 0.15 * i, epoch=i)
        assert manager.compress_memory(strategy=strategy) == 3 and len(manager) == 3
        assert manager.compress_memory(max_size=5, strategy=strategy) == 0
        if strategy == "importance":
            assert sorted(manager.experiences) == ["G3", "G4", "G5"]  # the highest confidences stay
    manager = SemanticMemoryManager(bank="s000-dups", address=address)
    manager.add_experience("Always check the discriminant before solving a quadratic equation.", 0.6, "math")
    manager.add_experience("Always check the discriminant first before solving any quadratic equation.", 0.8, "math")
    manager.add_experience("Draw a diagram for geometry problems.", 0.5, "math")
    assert manager.merge_similar() == 0  # cosine 0.89 on the server's hash embedder: below the default 0.9
    assert manager.merge_similar(threshold=0.85) == 2 and len(manager) == 2
    assert sorted(manager.experiences) == ["G2", "G3"]
    with pytest.raises(MemgymError) as err:
        manager.merge_similar(use_llm=True)  # this server has no LLM
    assert err.value.code == grpc.StatusCode.FAILED_PRECONDITION


def test_semantic_design_migration_guide(address, tmp_path):
    # Before:
    manager = ExperienceManager(bank="s000-before", address=address)
    exp_id = manager.add("Experience text")
    assert exp_id == "G0"
    # After:
    manager = SemanticMemoryManager(max_size=100, bank="s000-after", address=address)
    exp_id = manager.add_experience(text="Experience text", confidence=0.8, domain="general", epoch=0)
    assert exp_id == "G0"
    e = manager.client.get_experience("s000-after", "G0")
    assert (e.text, e.confidence, e.domain, e.created_epoch) == ("Experience text", 0.8, "general", 0)
    # Backward compatibility: the basic API still works on the semantic manager ...
    assert manager.add("Plain add.") == "G1" and manager.modify("G1", "Plain modify.") is True
    assert manager.merge(["G0", "G1"], "Merged.") == "G2" and manager.delete("G2") is True and len(manager) == 0
    # ... and old checkpoints work, their embeddings generated on load.
    old = ExperienceManager(bank="s000-old", address=address)
    old.add(EQUATIONS)
    old.add(OPTIMIZATION)
    old.save(str(tmp_path / "old.json"))
    migrated = SemanticMemoryManager(checkpoint_path=str(tmp_path / "old.json"), max_size=100, address=address)
    assert migrated.bank == "old" and migrated.experiences == old.experiences and migrated._next_id == 2
    assert migrated.retrieve_relevant("solving equations", top_k=1)[0][0] == "G0"
    stats = migrated.get_memory_stats()
    assert (stats["total_experiences"], stats["avg_confidence"], stats["domains"]) == (2, 0.5, {"general": 2})
    # The semantic manager's own file keeps every field.
    migrated.set_epoch(4)
    migrated.modify("G1", "Check boundaries.")
    migrated.save(str(tmp_path / "semantic.json"))
    copy = SemanticMemoryManager(max_size=100, bank="s000-copy", address=address)
    copy.load(str(tmp_path / "semantic.json"))
    a, b = (m.client.get_experience(m.bank, "G0") for m in (migrated, copy))
    assert a == b and a.usage_count == 1 and a.last_used_epoch == 0
    assert copy.current_epoch == 4 and copy.experiences == migrated.experiences


def test_drop_in_helpers_and_construction(address):
    assert bank_name_for(None) == "experiences" and bank_name_for("./experiences.json") == "experiences"
    assert bank_name_for("/x/.hidden.json") == "hidden" and bank_name_for("/x/über lib.json") == "_ber_lib"
    assert bank_name_for(Path("/a/" + "n" * 80 + ".json")) == "n" * 64 and bank_name_for("/x/#.json") == "_"
    assert file_format('{"format": "memgym-bank", "experiences": []}') == banks_pb.BANK_FORMAT_MEMGYM_JSON
    assert file_format('{"experiences": {}, "next_id": 0}') == banks_pb.BANK_FORMAT_SEED_JSON
    assert file_format('{"G0": "x"}') == banks_pb.BANK_FORMAT_UPSTREAM_JSON
    assert file_format("not json") == banks_pb.BANK_FORMAT_SEED_JSON
    with MemgymClient(address) as shared:
        m = ExperienceManager(bank="s-shared", client=shared)
        m.add("x")
        m.close()  # a shared client stays open
        assert shared.get_bank("s-shared").size == 1
        with pytest.raises(ValueError):
            ExperienceManager(bank="s-shared", client=shared, address=address)
    with ExperienceManager(bank="s-ctx", address=address) as m:
        assert repr(m) == f"ExperienceManager(bank='s-ctx', address='{address}')"
    with pytest.raises(MemgymUnavailable):
        ExperienceManager(bank="x", address=f"127.0.0.1:{free_port()}")


def test_refusals_leave_nothing_and_merges_keep_usage(bc, address, tmp_path):
    """Issue 26 through the drop-ins and the client: strict JSON, the text rule, refusals without a trace,
    merges that keep their sources' usage."""
    # A seed file with a repeated key: the drop-in refuses it and leaves no bank behind.
    path = tmp_path / "dup_lib.json"
    path.write_text('{"experiences": {"G0": "a", "G0": "b"}, "next_id": 1}', encoding="utf-8")
    with pytest.raises(MemgymError) as err:
        ExperienceManager(str(path), address=address)
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT and 'key "G0" appears twice' in err.value.details
    assert "dup_lib" not in [b.name for b in bc.list_banks().banks]
    # Operations: strict JSON, the text rule; a refused batch changes nothing.
    bc.create_bank("rule")
    for ops, want in [
        ('[{"option":"add","experience":"a","experience":"b"}]', 'key "experience" appears twice'),
        ('[{"option":"add","experience":"x\\u202ey"}]', "operations[0].experience: holds U+202E"),
    ]:
        with pytest.raises(MemgymError) as err:
            bc.apply_operations("rule", ops)
        assert want in err.value.details
    with pytest.raises(MemgymError) as err:
        bc.add_experience("rule", "x\ud800")
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT and "text: holds a lone surrogate" in err.value.details
    assert bc.get_bank("rule").version == 0
    # Compress with max_size 0 is refused, not "empty the bank".
    bc.add_experience("rule", "verify by substitution")
    with pytest.raises(MemgymError) as err:
        bc.compress("rule", max_size=0)
    assert "max_size: must be at least 1" in err.value.details and bc.get_bank("rule").size == 1
    # A merge keeps its sources' usage (the semantic-memory design sums it).
    bc.add_experience("rule", "check the units")
    for q in ["verify by substitution", "verify by substitution", "check the units"]:
        bc.retrieve("rule", q, top_k=1)
    merged = bc.merge_experiences("rule", ["G0", "G1"], "verify and check units")
    assert bc.get_experience("rule", merged.id).usage_count == 3
