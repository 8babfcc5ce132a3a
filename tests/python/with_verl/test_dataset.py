"""Every row of ``memgym dataset verl`` read by verl's own ``RLHFDataset``, as the launch scripts configure it.

Why this exists: the rows must fit the prompt budget the launch scripts set (the prompt is the system and
user messages *plus the six tool schemas*, which verl renders into the system turn), measured by the real
Qwen2.5 tokenizer through verl's own length filter, and every row's ``tools_kwargs`` must open an episode
— category 5 included. A row over the limit would be dropped by ``filter_overlong_prompts`` (or, without
it, cut from the left by the agent loop, losing the system prompt), so the test fails if any row plus the
schemas exceeds the limit a launch script sets, for both scripts.
"""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from with_verl.conftest import compose, launch_overrides

from memgym import MemgymClient
from memgym_verl.agent_loop import AGENT_NAME
from memgym_verl.episode import create_request_kwargs, new_episode_id, row_create_kwargs

SCRIPTS = ["run_grpo_memgym.sh", "run_dapo_memgym.sh"]


def dataset_config(script: str, tmp_path, server_address: str, qwen_path: str):
    overrides = launch_overrides(script, tmp_path, {"MEMGYM_ADDRESS": server_address, "MODEL": qwen_path})
    keep = [o for o in overrides if o.startswith(("data.", "actor_rollout_ref.rollout.multi_turn."))]
    keep = [o for o in keep if not o.startswith(("data.train_files", "data.val_files"))]
    return compose(keep)


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_row_fits_the_scripts_prompt_limit(script, tmp_path, server_address, qwen_path, tokenizer, verl_dataset, monkeypatch):
    from verl.utils.dataset.rl_dataset import RLHFDataset

    monkeypatch.setenv("MEMGYM_ADDRESS", server_address)
    config = dataset_config(script, tmp_path, server_address, qwen_path)
    assert config.data.filter_overlong_prompts is True
    limit = int(config.data.max_prompt_length)
    rows = pq.read_table(verl_dataset).num_rows

    dataset = RLHFDataset(data_files=[str(verl_dataset)], tokenizer=tokenizer, config=config.data, processor=None)
    assert dataset.tool_schemas is not None and len(dataset.tool_schemas) == 6  # verl measured with the schemas
    assert len(dataset) == rows, f"verl's length filter dropped {rows - len(dataset)} of {rows} rows over {limit} tokens"

    # The same measure by hand, for the margin: the longest row, schemas included, and the limit.
    longest = max(
        len(tokenizer.apply_chat_template(list(r["prompt"]), tools=dataset.tool_schemas, add_generation_prompt=True, tokenize=True))
        for r in pq.read_table(verl_dataset).to_pylist()
    )
    assert longest <= limit - 256, f"the longest prompt is {longest} tokens; {script} allows {limit}: keep a margin"


def test_every_row_opens_an_episode(server_address, verl_dataset, qwen_path, tokenizer, tmp_path, monkeypatch):
    from verl.utils.dataset.rl_dataset import RLHFDataset

    monkeypatch.setenv("MEMGYM_ADDRESS", server_address)
    config = dataset_config(SCRIPTS[0], tmp_path, server_address, qwen_path)
    dataset = RLHFDataset(data_files=[str(verl_dataset)], tokenizer=tokenizer, config=config.data, processor=None)
    client = MemgymClient(server_address)
    categories = set()
    for i in range(len(dataset)):
        item = dataset[i]
        assert item["agent_name"] == AGENT_NAME
        create_kwargs = row_create_kwargs(item["tools_kwargs"])
        assert set(item["tools_kwargs"]) == {
            "search_memory", "manage_memory", "delete_memory", "sample_memory", "merge_memory", "split_memory"
        }
        episode_id = new_episode_id(create_kwargs)
        question_id, kwargs = create_request_kwargs(create_kwargs)
        created = client.create_episode(question_id, episode_id=episode_id, **kwargs)
        assert created.episode_id == episode_id and created.question == item["extra_info"]["question"]
        client.close_episode(episode_id)
        categories.add(item["extra_info"]["category"])
    assert categories == {1, 2, 3, 4, 5}
