"""`memgym dataset verl` output as verl reads it: Parquet through pyarrow, `extra_info` a dict (not a JSON
string), and rows the adapter can open episodes from on the real server."""

import subprocess

import pyarrow.parquet as pq

from conftest import memgym_bin
from memgym_verl.episode import create_request_kwargs, row_create_kwargs


def test_rows_are_verl_rows_and_open_episodes(tmp_path, client):
    out = tmp_path / "test.parquet"
    done = subprocess.run([str(memgym_bin()), "dataset", "verl", "--split", "test", "--out", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    # A training export leaves out the LoCoMo audit's 32 score-corrupting test questions by default.
    assert "379 rows" in done.stdout
    rows = pq.read_table(out).to_pylist()
    assert len(rows) == 379 and {r["extra_info"]["gold_status"] for r in rows} == {"ok", "wrong-citation"}
    every = tmp_path / "all.parquet"
    done = subprocess.run([str(memgym_bin()), "dataset", "verl", "--split", "test", "--gold", "original", "--out", str(every)], capture_output=True, text=True)
    assert done.returncode == 0 and "411 rows" in done.stdout, done.stderr
    assert sum(r["extra_info"]["gold_status"] == "flagged" for r in pq.read_table(every).to_pylist()) == 32
    row = rows[0]
    assert row["agent_name"] == "memgym_agent" and row["data_source"] == "memgym/locomo"
    assert [m["role"] for m in row["prompt"]] == ["system", "user"]
    extra = row["extra_info"]
    assert isinstance(extra, dict) and extra["index"] == 0 and extra["need_tools_kwargs"] is True
    assert set(extra["tools_kwargs"]) == {"search_memory", "manage_memory", "delete_memory", "sample_memory", "merge_memory", "split_memory"}
    assert row["reward_model"]["ground_truth"] == "7 May 2023"

    question_id, kwargs = create_request_kwargs(row_create_kwargs(extra["tools_kwargs"]))
    assert kwargs == {"conversation_id": "conv-26", "include_adversarial": False}
    assert question_id == extra["question_id"] == "conv-26:q0"
    created = client.create_episode(question_id=question_id, episode_id="verl-row-0", **kwargs)
    assert created is not None
    client.close_episode("verl-row-0")


def test_bad_split_is_a_clear_error(tmp_path):
    done = subprocess.run([str(memgym_bin()), "dataset", "verl", "--split", "dev", "--out", str(tmp_path / "x.parquet")], capture_output=True, text=True)
    assert done.returncode != 0
    assert "--split" in done.stderr
