"""``memgym serve --metrics-addr``, scraped and read by the Prometheus project's own Python parser.

Why this exists: memgym writes no exposition text itself (metrics-exporter-prometheus does); this checks
that what it serves is what Prometheus reads — every family with its type and help, histograms with their
buckets — after real traffic from the Python client.
"""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from conftest import free_port, running_server
from memgym import MemgymClient, MemgymError


def test_prometheus_reads_what_memgym_serves():
    port = free_port()
    with running_server("--metrics-addr", f"127.0.0.1:{port}") as address, MemgymClient(address) as c:
        c.create_episode("conv-26:q0", episode_id="prom-1")
        c.call_tool("prom-1", "search_memory", {"query": "support group"})
        try:
            c.call_tool("prom-1", "delete_memory", {"memory_id": "m9999"})
        except MemgymError:
            pass
        c.score_episode("prom-1")
        c.close_episode("prom-1")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            text = resp.read().decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    types = {name: f.type for name, f in families.items()}
    assert types["memgym_requests"] == "counter" and types["memgym_request_duration_seconds"] == "histogram"
    assert types["memgym_episodes_open"] == "gauge" and types["memgym_reward"] == "histogram"
    assert all(f.documentation for f in families.values()), "every family has its help"
    calls = {(s.labels["method"], s.labels["code"]): s.value for s in families["memgym_requests"].samples if s.name.endswith("_total")}
    assert calls[("/memgym.v1.MemoryEnv/CallTool", "ok")] == 1 and calls[("/memgym.v1.MemoryEnv/CallTool", "not_found")] == 1
    buckets = [s for s in families["memgym_reward"].samples if s.name == "memgym_reward_bucket"]
    assert buckets and buckets[-1].labels["le"] == "+Inf" and buckets[-1].value == 1
    events = {s.labels["event"]: s.value for s in families["memgym_episode_events"].samples if s.name.endswith("_total")}
    assert events["created"] == events["scored"] == events["closed"] == 1
