"""scripts/llm-server.py's decoding controls on the real model: `tool_choice` "required" and a named function,
`parallel_tool_calls`, `response_format` (`json_object`, `json_schema`) and the lazy grammar of "auto".

Why this exists: Qwen2.5-Coder-0.5B wrote 0 strict tool calls in 1,633 unconstrained (the book's Rollouts). With
a grammar built from the request's schemas it must write a call of the listed tools with schema-valid arguments
every time, on memgym's own six tools (fetched from a real memgym server's ListTools), as vLLM and SGLang do
for `tool_choice="required"`. The light tier (tests/python/test_llm_grammar.py) checks the grammars string by
string; this checks that llama.cpp reads them and that the model, constrained, writes what they allow.
"""

from __future__ import annotations

import json

import pytest

from memgym import MemgymClient
from real_llm.conftest import LlmServer
from schema_check import valid

# Ten fixed prompts in the style of an episode's task: a question about the conversation and a memory to improve.
PROMPTS = [
    "Question: When did Caroline go to the LGBTQ support group? Improve the memory so that it can be answered.",
    "Question: What did Melanie paint recently? Find the memories about it and fix them.",
    "Question: Where did Jon open his dance studio? Make the memory answer this.",
    "Question: How many children does Melanie have? Search the memory first.",
    "Question: What is Caroline's identity? Merge duplicate memories about it.",
    "Question: When did Gina lose her job? Update the memory with the date.",
    "Question: What instrument does Melanie play? Sample the memory and tidy it.",
    "Question: Which country is Caroline from? Delete memories that are wrong.",
    "Question: What did John and Maria talk about in session 3? Split long memories.",
    "Question: Who gave Tim a book about dragons? Improve the memory.",
]


@pytest.fixture(scope="module")
def memgym_tools(server_address):
    with MemgymClient(server_address, timeout=10.0) as c:
        return c.list_tools()


def ask(llm, prompt: str, tools, seed: int, max_tokens: int = 160, **controls) -> dict:
    status, body = llm.post({"messages": [{"role": "system", "content": "You edit a memory with tools."}, {"role": "user", "content": prompt}],
                             "tools": tools, "temperature": 0.7, "seed": seed, "max_tokens": max_tokens, **controls})
    assert status == 200, body
    return body["choices"][0]


def check_calls(choice: dict, tools, names=None) -> list[dict]:
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    message = choice["message"]
    assert choice["finish_reason"] == "tool_calls" and message.get("tool_calls"), choice
    calls = []
    for call in message["tool_calls"]:
        name, args = call["function"]["name"], json.loads(call["function"]["arguments"])
        assert name in (names or schemas), call
        assert valid(schemas[name], args), call
        calls.append({"name": name, "arguments": args})
    return calls


def test_required_gives_a_schema_valid_call_ten_times_in_ten(llm, memgym_tools):
    calls = []
    for seed, prompt in enumerate(PROMPTS):
        calls += check_calls(ask(llm, prompt, memgym_tools, seed, tool_choice="required"), memgym_tools)
    assert len(calls) >= 10
    logged = [e["constraint"] for e in llm.requests()[-10:]]
    assert all(c["tool_choice"] == "required" and c["hash"] == logged[0]["hash"] for c in logged), logged


def test_a_named_function_without_parallel_calls_gives_exactly_that_call(llm, memgym_tools):
    for seed in range(3):
        choice = ask(llm, PROMPTS[4], memgym_tools, seed, tool_choice={"type": "function", "function": {"name": "merge_memory"}}, parallel_tool_calls=False)
        assert [c["name"] for c in check_calls(choice, memgym_tools, ["merge_memory"])] == ["merge_memory"]


def test_json_schema_and_json_object_replies_are_valid_json(llm):
    schema = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 80}, "year": {"type": "integer", "minimum": 1900, "maximum": 2100},
              "confident": {"type": "boolean"}}, "required": ["answer", "year", "confident"], "additionalProperties": False}
    fmt = {"type": "json_schema", "json_schema": {"name": "dated_answer", "schema": schema, "strict": True}}
    for seed, question in enumerate(["When did the Berlin wall fall?", "When was Python first released?", "When did Caroline move?"]):
        status, body = llm.post({"messages": [{"role": "user", "content": question}], "response_format": fmt, "temperature": 0.7, "seed": seed, "max_tokens": 120})
        assert status == 200, body
        choice = body["choices"][0]
        assert choice["finish_reason"] == "stop", choice
        assert valid(schema, json.loads(choice["message"]["content"])), choice
    # json_object bounds nothing but the syntax: a long object is cut by max_tokens like any reply, so the prompt
    # asks for a short one and the budget is generous.
    ask_short = "Reply with a JSON object whose only key is capital, for France."
    status, body = llm.post({"messages": [{"role": "user", "content": ask_short}], "response_format": {"type": "json_object"}, "temperature": 0, "max_tokens": 200})
    assert status == 200 and body["choices"][0]["finish_reason"] == "stop", body
    assert isinstance(json.loads(body["choices"][0]["message"]["content"]), dict)


@pytest.fixture
def lazy_llm(llm_env, tmp_path):
    server = LlmServer(*llm_env, tmp_path, extra=("--auto-tool-grammar", "lazy")).start()
    yield server
    server.kill()


def test_auto_with_the_lazy_grammar_answers_in_text_or_in_valid_calls(lazy_llm, memgym_tools):
    """The model chooses; once it writes `<tool_call>`, the rest of the call is constrained (llama.cpp's lazy
    grammar). Either way the reply keeps the contract, and the log says whether the grammar started."""
    for seed in range(2):
        choice = ask(lazy_llm, PROMPTS[seed], memgym_tools, seed, max_tokens=80)
        logged = lazy_llm.requests()[-1]["constraint"]
        assert logged["lazy"] and logged["tool_choice"] == "auto"
        if logged["triggered"]:
            assert choice["finish_reason"] in ("tool_calls", "length"), choice
            if choice["finish_reason"] == "tool_calls":
                check_calls(choice, memgym_tools)
        else:
            assert "tool_calls" not in choice["message"] and "<tool_call>" not in (choice["message"]["content"] or ""), choice
