#!/usr/bin/env python3
"""What a decoding constraint costs on scripts/llm-server.py: completion tokens per second with no constraint and
under each control (`tool_choice` "required", a named function, `response_format` `json_object` and
`json_schema`), on the same prompts and seeds, against a running server.

    python3 scripts/llm-constraint-cost.py --url http://127.0.0.1:PORT/v1 --tools tools.json [--rounds 3]

`tools.json` is a list of OpenAI tool schemas, e.g. memgym's six (`grpcurl -plaintext ADDR
memgym.v1.MemoryEnv/ListTools | python3 -c 'import json,sys; print(json.load(sys.stdin)["toolsJson"])'`).
The server must serve nothing else meanwhile. Each request's time is the server's own generation time (from
`/stats`: prefill of the prompt's uncached part, then decoding), so HTTP is not counted. One warm-up request
per control fills the prompt cache first; the rate is the median over `--rounds` rounds of the prompts.
Prints a table and, with `--json`, one JSON object as the last line. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import urllib.request

PROMPTS = [
    "Question: When did Caroline go to the LGBTQ support group? Improve the memory so that it can be answered.",
    "Question: What did Melanie paint recently? Find the memories about it and fix them.",
    "Question: Where did Jon open his dance studio? Make the memory answer this.",
    "Question: How many children does Melanie have? Search the memory first.",
]
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 80}, "evidence": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
          "year": {"type": "integer", "minimum": 1900, "maximum": 2100}}, "required": ["answer", "evidence", "year"], "additionalProperties": False}


def controls(tools: list[dict]) -> dict[str, dict]:
    first = tools[0]["function"]["name"]
    return {
        "none (auto)": {"tools": tools, "tool_choice": "auto"},
        "required": {"tools": tools, "tool_choice": "required"},
        f"named ({first})": {"tools": tools, "tool_choice": {"type": "function", "function": {"name": first}}},
        "text, no tools": {},
        "json_object": {"response_format": {"type": "json_object"}},
        "json_schema": {"response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA, "strict": True}}},
    }


def call(url: str, path: str, body: dict | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url.removesuffix("/v1") + path if body is None else url + path, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def one(url: str, prompt: str, seed: int, extra: dict, max_tokens: int) -> tuple[int, float]:
    """(completion tokens, server seconds) of one request."""
    before = call(url, "/stats")
    body = {"messages": [{"role": "system", "content": "You edit a memory with tools."}, {"role": "user", "content": prompt}],
            "temperature": 0.7, "seed": seed, "max_tokens": max_tokens, **extra}
    call(url, "/chat/completions", body)
    after = call(url, "/stats")
    return after["completion_tokens"] - before["completion_tokens"], after["seconds"] - before["seconds"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", required=True, help="the server's base URL, e.g. http://127.0.0.1:8080/v1")
    p.add_argument("--tools", required=True, help="a JSON file holding a list of OpenAI tool schemas")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--max-tokens", type=int, default=96)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    with open(a.tools, encoding="utf-8") as f:
        tools = json.load(f)
    rows = []
    print(f"{'control':<28} {'tokens':>7} {'seconds':>8} {'tokens/s':>9} {'ms/token':>9}", file=sys.stderr if a.json else sys.stdout)
    for name, extra in controls(tools).items():
        one(a.url, PROMPTS[0], 0, extra, 8)  # warm-up: the prompt cache holds the shared prefix
        rates, tokens, seconds = [], 0, 0.0
        for r in range(a.rounds):
            n_round, s_round = 0, 0.0
            for i, prompt in enumerate(PROMPTS):
                n, s = one(a.url, prompt, 100 * r + i, extra, a.max_tokens)
                n_round, s_round = n_round + n, s_round + s
            rates.append(n_round / s_round if s_round else 0.0)
            tokens, seconds = tokens + n_round, seconds + s_round
        rate = statistics.median(rates)
        rows.append({"control": name, "tokens": tokens, "seconds": round(seconds, 2), "tokens_per_s": round(rate, 2), "rates": [round(x, 2) for x in rates]})
        line = f"{name:<28} {tokens:>7} {seconds:>8.1f} {rate:>9.2f} {1000 / rate if rate else 0:>9.1f}"
        print(line, file=sys.stderr if a.json else sys.stdout, flush=True)
    if a.json:
        print(json.dumps({"rows": rows, "rounds": a.rounds, "max_tokens": a.max_tokens}))


if __name__ == "__main__":
    main()
