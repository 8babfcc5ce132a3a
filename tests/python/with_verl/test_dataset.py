"""Every row of ``memgym dataset verl`` read by verl's own ``RLHFDataset``, as the launch scripts configure it.

Why this exists: the rows must fit the prompt budget the launch scripts set (the prompt is the system and
user messages *plus the six tool schemas*, which verl renders into the system turn), measured by the real
Qwen2.5 tokenizer through verl's own length filter, and every row's ``tools_kwargs`` must open an episode
— category 5 included. A row over the limit would be dropped by ``filter_overlong_prompts`` (or, without
it, cut from the left by the agent loop, losing the system prompt), so the test fails if any row plus the
schemas exceeds the limit a launch script sets (both scripts share their data settings; checked here).
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from with_verl.conftest import compose, launch_overrides

from memgym import MemgymClient
from memgym_verl.agent_loop import AGENT_NAME
from memgym_verl.episode import create_request_kwargs, new_episode_id, row_create_kwargs

SCRIPTS = ["run_grpo_memgym.sh", "run_dapo_memgym.sh"]
TOOLS = {"search_memory", "manage_memory", "delete_memory", "sample_memory", "merge_memory", "split_memory"}


@pytest.fixture(scope="module")
def data_configs(tmp_path_factory, server_address, qwen_path):
    """Each launch script's ``data.*`` and multi-turn settings, composed onto verl's config."""
    configs = {}
    for script in SCRIPTS:
        overrides = launch_overrides(script, tmp_path_factory.mktemp(script), {"MODEL": qwen_path})
        keep = [o for o in overrides if o.startswith(("data.", "actor_rollout_ref.rollout.multi_turn."))]
        configs[script] = compose([o for o in keep if not o.startswith(("data.train_files", "data.val_files"))])
    return configs


@pytest.fixture(scope="module")
def dataset(data_configs, server_address, tokenizer, verl_dataset):
    """verl's ``RLHFDataset`` over every row, with the scripts' tool config and length filter."""
    from verl.utils.dataset.rl_dataset import RLHFDataset

    before = os.environ.get("MEMGYM_ADDRESS")
    os.environ["MEMGYM_ADDRESS"] = server_address  # the tool config's address: the schemas come from ListTools
    try:
        return RLHFDataset(data_files=[str(verl_dataset)], tokenizer=tokenizer, config=data_configs[SCRIPTS[0]].data, processor=None)
    finally:
        if before is None:
            del os.environ["MEMGYM_ADDRESS"]
        else:
            os.environ["MEMGYM_ADDRESS"] = before


def test_every_row_fits_the_scripts_prompt_limit(data_configs, dataset, tokenizer, verl_dataset, server_address, monkeypatch):
    monkeypatch.setenv("MEMGYM_ADDRESS", server_address)
    limits = {s: (int(c.data.max_prompt_length), c.data.filter_overlong_prompts) for s, c in data_configs.items()}
    assert len(set(limits.values())) == 1 and list(limits.values())[0][1] is True, limits
    limit = limits[SCRIPTS[0]][0]
    rows = pq.read_table(verl_dataset).to_pylist()

    assert dataset.tool_schemas is not None and len(dataset.tool_schemas) == 6  # verl measured with the schemas
    assert len(dataset) == len(rows), f"verl's length filter dropped {len(rows) - len(dataset)} of {len(rows)} rows over {limit} tokens"

    # The same measure by hand, for the margin: the longest row, schemas included, and the limit.
    def tokens(row) -> int:
        text = tokenizer.apply_chat_template(list(row["prompt"]), tools=dataset.tool_schemas, add_generation_prompt=True, tokenize=False)
        return len(tokenizer.encode(text, add_special_tokens=False))

    lengths = [tokens(r) for r in rows]
    longest = max(lengths)
    assert 1000 < longest <= limit - 256, f"the longest prompt is {longest} tokens; the scripts allow {limit}: keep a margin"

    # verl's filter is live and counts the schemas: at one token less than the longest row, it drops exactly
    # the longest rows (checked on the 8 longest and 8 shortest rows, to keep it quick).
    import pyarrow as pa
    from verl.utils.dataset.rl_dataset import RLHFDataset

    order = sorted(range(len(rows)), key=lengths.__getitem__)
    sample = [rows[i] for i in order[:8] + order[-8:]]
    path = Path(dataset.original_data_files[0]).with_name("extremes.parquet")
    pq.write_table(pa.Table.from_pylist(sample), path)
    tight = data_configs[SCRIPTS[0]].data.copy()
    tight.max_prompt_length = longest - 1
    kept = len(RLHFDataset(data_files=[str(path)], tokenizer=tokenizer, config=tight, processor=None))
    assert len(sample) - kept == lengths.count(longest)


def test_every_row_opens_an_episode(dataset, server_address):
    client = MemgymClient(server_address)
    categories = set()
    for i in range(len(dataset)):
        item = dataset[i]
        assert item["agent_name"] == AGENT_NAME and set(item["tools_kwargs"]) == TOOLS
        create_kwargs = row_create_kwargs(item["tools_kwargs"])
        assert create_kwargs["include_adversarial"] == (item["extra_info"]["category"] == 5)
        episode_id = new_episode_id(create_kwargs)
        question_id, kwargs = create_request_kwargs(create_kwargs)
        created = client.create_episode(question_id, episode_id=episode_id, **kwargs)
        assert created.episode_id == episode_id and created.question == item["extra_info"]["question"]
        client.close_episode(episode_id)
        categories.add(item["extra_info"]["category"])
    assert categories == {1, 2, 3, 4, 5}
