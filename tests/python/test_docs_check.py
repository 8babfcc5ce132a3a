"""scripts/docs-check.py's own rules: heading ids, link finding, output matching and substitution.

Why this exists: the checker decides whether the documentation passes; its pure parts are tested here so
that a bug in it cannot pass broken docs. The whole checker runs at the end of the test command.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("docs_check", ROOT / "scripts" / "docs-check.py")
dc = importlib.util.module_from_spec(_spec)
sys.modules["docs_check"] = dc
_spec.loader.exec_module(dc)


def test_heading_ids_follow_mdbook(tmp_path):
    assert dc.slug("Measured: Qwen2.5-Coder-0.5B-Instruct on 100 test questions × G = 4") == (
        "measured-qwen25-coder-05b-instruct-on-100-test-questions--g--4"
    )
    assert dc.slug("Reward sanity check (`memgym eval`)") == "reward-sanity-check-memgym-eval"
    assert dc.slug("[Linked](x.md) heading") == "linked-heading"
    page = tmp_path / "p.md"
    page.write_text("# Title\n\n## Same\n\n## Same\n\n```sh\n# not a heading\n```\n", encoding="utf-8")
    assert dc.heading_ids(page) == {"title", "same", "same-1"}


def test_links_are_found_outside_code_only():
    line = "see [a](b.md#c) and `[not](a-link.md)` and ![img](i.png) and [web](https://x.y)"
    assert dc.LINK.findall(dc.strip_code_spans(line)) == ["b.md#c", "https://x.y"]


def test_output_matching_in_order_with_skips():
    actual = "a\n  b  \nc\nd\n"
    assert dc.output_matches("a\n...\nd", actual) is None
    assert dc.output_matches("b\nc", actual) is None
    assert dc.output_matches("c\nb", actual) == "b", "order matters"
    assert dc.output_matches("e", actual) == "e"


def test_substitution_runs_the_binary_under_test_on_the_checkers_server():
    addrs = {"127.0.0.1:50051": "127.0.0.1:9", "127.0.0.1:8000": "127.0.0.1:10", "127.0.0.1:8001": "127.0.0.1:11"}
    code = "cargo run --release -- serve --openenv-addr 127.0.0.1:8000\nmemgym dataset stats\ngrpcurl -plaintext 127.0.0.1:50051 list"
    out = dc.substitute(code, "/bin/memgym", "/bin/grpcurl", addrs)
    assert out == "/bin/memgym serve --openenv-addr 127.0.0.1:10\n/bin/memgym dataset stats\n/bin/grpcurl -plaintext 127.0.0.1:9 list"


def test_every_runnable_block_of_the_docs_is_run_or_has_a_reason():
    blocks = dc.collect_blocks()
    assert len(blocks) >= 30
    assert all(b.reason for b in blocks if b.marker == "not run")
    assert sum(b.marker != "not run" for b in blocks) >= 20
