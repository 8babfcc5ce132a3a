"""scripts/llm-server.py's OpenAI function calling and its prompt cache, against the real model.

Why this exists: `memgym rollout` sends the OpenAI `tools` parameter and reads `tool_calls`, as it would from
vLLM or llama.cpp's server; this local server must speak that contract, render the tools with the model's own
chat template, and read `<tool_call>` blocks exactly (no lenient reading: the client counts its own). A
0.5B model may or may not write the tags, so the live tests check the contract of whatever it wrote, and the
parser is tested on its own, on hand-written replies, where it is deterministic. The prompt cache (a
multi-turn rollout resends a long shared prefix) must make replies faster, never different: a greedy reply
equals a cold server's, token for token.
"""

from __future__ import annotations

import json
import threading
import urllib.request
from http.server import ThreadingHTTPServer

import pytest

from llm_server_module import server as SERVER_MODULE


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "add_numbers",
            "description": "Add two integers.",
            "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]},
        },
    },
]
NAMES = {t["function"]["name"] for t in TOOLS}


split_tool_calls = SERVER_MODULE.split_tool_calls


def check_reply(body: dict) -> dict:
    """The completion's one choice, checked against the server's contract for a request with tools."""
    choice = body["choices"][0]
    message = choice["message"]
    assert message["role"] == "assistant"
    if "tool_calls" in message:
        assert choice["finish_reason"] == "tool_calls"
        assert message["tool_calls"], message
        assert message["content"] is None or (isinstance(message["content"], str) and message["content"] == message["content"].strip() and message["content"])
        for call in message["tool_calls"]:
            assert call["id"].startswith("call_") and call["type"] == "function"
            assert call["function"]["name"] in NAMES, call
            assert isinstance(json.loads(call["function"]["arguments"]), dict), call
    else:
        assert choice["finish_reason"] in ("stop", "length")
        assert isinstance(message["content"], str)
        assert split_tool_calls(message["content"]) == (message["content"], []), "the server left a parseable call unread"
    usage = body["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert 0 <= usage["prompt_tokens_details"]["cached_tokens"] < usage["prompt_tokens"]
    return choice


def comparable(choice: dict) -> dict:
    """A choice without the random call ids."""
    message = dict(choice["message"])
    if "tool_calls" in message:
        message["tool_calls"] = [c["function"] for c in message["tool_calls"]]
    return {"message": message, "finish_reason": choice["finish_reason"]}


# --- the parser, on hand-written replies -------------------------------------------------------------------

CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
WEATHER = {"name": "get_weather", "arguments": '{"city":"Paris"}'}


def test_one_call():
    assert split_tool_calls(CALL) == (None, [WEATHER])


def test_two_calls_in_order_with_compact_arguments():
    text = CALL + '\n<tool_call>\n{"name": "add_numbers", "arguments": {"a": 2, "b": 3}}\n</tool_call>'
    assert split_tool_calls(text) == (None, [WEATHER, {"name": "add_numbers", "arguments": '{"a":2,"b":3}'}])


def test_text_around_calls_is_the_content():
    text = "Let me look that up.\n" + CALL + "\n\nThen I will answer.  "
    assert split_tool_calls(text) == ("Let me look that up.\nThen I will answer.", [WEATHER])


def test_arguments_keep_non_ascii_and_nesting():
    text = '<tool_call>{"name": "f", "arguments": {"city": "Zürich", "opts": {"units": ["c"]}}}</tool_call>'
    assert split_tool_calls(text) == (None, [{"name": "f", "arguments": '{"city":"Zürich","opts":{"units":["c"]}}'}])


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}\n</tool_call>',  # malformed JSON
        '<tool_call>\n{"name": "get_weather"}\n</tool_call>',  # no arguments
        '<tool_call>\n{"arguments": {"city": "Paris"}}\n</tool_call>',  # no name
        '<tool_call>{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}</tool_call>',  # arguments a string
        '<tool_call>{"name": "", "arguments": {}}</tool_call>',  # empty name
        '<tool_call>["get_weather", {"city": "Paris"}]</tool_call>',  # not an object
        '<tool_call>{"name": "f", "arguments": {"x": NaN}}</tool_call>',  # not JSON
        'Sure.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Pa',  # unclosed: cut by max_tokens
        CALL + "\n<tool_call>\n{broken}\n</tool_call>",  # one good block, one bad: all or nothing
        CALL + "\n<tool_call>\n",  # a good block, then an unclosed one
    ],
)
def test_a_block_that_does_not_parse_leaves_the_reply_as_content(text):
    assert split_tool_calls(text) == (text, [])


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "get_weather", "arguments": {"city": "Paris"}}',  # bare JSON: no lenient reading
        '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```',
        "  It is sunny.\n",  # plain text, whitespace kept
        "",
    ],
)
def test_no_block_no_calls(text):
    assert split_tool_calls(text) == (text, [])


# --- the HTTP handler around the parser, with a scripted model -----------------------------------------------
# Qwen2.5-Coder-0.5B answers a tools request with bare JSON, never <tool_call> tags (greedy and sampled), so
# the live tests below cannot reach the reply's tool_calls branch: here the server's own handler answers with
# a model whose text is scripted.


class ScriptedModel:
    """Stands in for llm-server.py's Model: renders nothing, "generates" the given text."""

    name = "scripted"

    def __init__(self, text: str, finish: str):
        self.text, self.finish = text, finish
        self.tools = self.logged = None

    def render(self, messages, tools=None):
        self.tools = tools
        return "prompt"

    def complete(self, prompt, max_tokens, temperature, top_p, seed, stop, constraint=None):
        return self.text, self.finish, 300, 192, 20, 0.01, False  # text, finish, prompt, cached, completion, seconds, triggered

    def record(self, entry):
        self.logged = entry


def scripted_post(text: str, body: dict, finish: str = "stop") -> tuple[dict, ScriptedModel]:
    raw, _, model = scripted_exchange(text, body, finish)
    return json.loads(raw), model


def scripted_exchange(text: str, body: dict, finish: str = "stop") -> tuple[bytes, str, ScriptedModel]:
    """The handler's raw answer to ``body`` and its content type, with a model that "generates" ``text``."""
    model = ScriptedModel(text, finish)
    handler = type("ScriptedHandler", (SERVER_MODULE.Handler,), {"model": model, "log_message": lambda *a: None})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = "http://127.0.0.1:%d/v1/chat/completions" % server.server_address[1]
        req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.read(), r.headers.get("Content-Type"), model
    finally:
        server.shutdown()
        server.server_close()


ASK = {"messages": [{"role": "user", "content": "Weather in Paris, and 2 + 3?"}], "tools": TOOLS}


def test_reply_with_tool_call_blocks_becomes_tool_calls():
    text = "I will call two tools.\n" + CALL + '\n<tool_call>\n{"name": "add_numbers", "arguments": {"a": 2, "b": 3}}\n</tool_call>'
    body, model = scripted_post(text, ASK)
    assert model.tools == TOOLS  # validated, then handed to the chat template as sent
    choice = check_reply(body)
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "I will call two tools."
    assert [c["function"] for c in choice["message"]["tool_calls"]] == [WEATHER, {"name": "add_numbers", "arguments": '{"a":2,"b":3}'}]
    ids = [c["id"] for c in choice["message"]["tool_calls"]]
    assert len(set(ids)) == 2
    assert body["usage"] == {"prompt_tokens": 300, "completion_tokens": 20, "total_tokens": 320, "prompt_tokens_details": {"cached_tokens": 192}}
    assert model.logged["tools"] == 2 and model.logged["tool_calls"] == [c["function"] for c in choice["message"]["tool_calls"]]
    assert model.logged["reply"] == text and model.logged["cached_tokens"] == 192


def test_reply_cut_inside_a_block_stays_content():
    text = CALL + '\n<tool_call>\n{"name": "add_numbers", "argu'
    body, _ = scripted_post(text, ASK, finish="length")
    choice = check_reply(body)
    assert choice == {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}


def test_without_tools_blocks_are_not_read():
    body, model = scripted_post(CALL, {**ASK, "tool_choice": "none"})
    assert model.tools == []
    assert body["choices"][0] == {"index": 0, "message": {"role": "assistant", "content": CALL}, "finish_reason": "stop"}


def stream_chunks(raw: bytes) -> list:
    """The ``data:`` payloads of a server-sent-events body, the last of which must be ``[DONE]``."""
    events = [line[len(b"data: "):] for line in raw.split(b"\n") if line.startswith(b"data: ")]
    assert events and events[-1] == b"[DONE]", raw
    return [json.loads(e) for e in events[:-1]]


def test_a_streamed_reply_is_the_same_message_as_chunks():
    text = "I will call one tool.\n" + CALL
    plain, _ = scripted_post(text, ASK)
    raw, kind, _ = scripted_exchange(text, {**ASK, "stream": True, "stream_options": {"include_usage": True}})
    assert kind == "text/event-stream"
    chunks = stream_chunks(raw)
    assert [c["object"] for c in chunks] == ["chat.completion.chunk"] * 3
    delta = chunks[0]["choices"][0]["delta"]
    message = plain["choices"][0]["message"]
    assert (delta["role"], delta["content"]) == ("assistant", message["content"])
    assert [{k: v for k, v in c.items() if k not in ("index", "id")} for c in delta["tool_calls"]] == [
        {k: v for k, v in c.items() if k != "id"} for c in message["tool_calls"]
    ]
    assert [c["index"] for c in delta["tool_calls"]] == [0]
    assert chunks[1]["choices"] == [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]
    assert chunks[2]["choices"] == [] and chunks[2]["usage"] == plain["usage"]
    # Without include_usage: the message and the finish, no usage chunk.
    raw, _, _ = scripted_exchange("Paris.", {"messages": ASK["messages"], "stream": True})
    chunks = stream_chunks(raw)
    assert len(chunks) == 2 and chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": "Paris."}
    assert chunks[1]["choices"][0]["finish_reason"] == "stop"


# --- the live server -----------------------------------------------------------------------------------------


def test_tools_request_is_rendered_and_answered_in_the_contract(llm):
    messages = [{"role": "user", "content": "What is the weather in Paris? Call the get_weather tool."}]
    status, body = llm.post({"messages": messages, "tools": TOOLS, "tool_choice": "auto", "parallel_tool_calls": True, "temperature": 0, "max_tokens": 40})
    assert status == 200, body
    choice = check_reply(body)
    logged = llm.requests()[-1]
    assert logged["tools"] == 2
    assert logged["tool_calls"] == [c["function"] for c in choice["message"].get("tool_calls", [])]
    # tool_choice "none" renders no tools: the prompt is the bare conversation
    status, bare = llm.post({"messages": messages, "tools": TOOLS, "tool_choice": "none", "temperature": 0, "max_tokens": 1})
    assert status == 200, bare
    assert "tool_calls" not in bare["choices"][0]["message"]
    assert bare["usage"]["prompt_tokens"] + 100 < body["usage"]["prompt_tokens"]


def test_multi_turn_with_tool_calls_and_tool_results(llm):
    messages = [
        {"role": "system", "content": "You answer questions about the weather."},
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": '{"sky": "clear", "celsius": 18}'},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_2", "type": "function", "function": {"name": "add_numbers", "arguments": '{"a": 18, "b": 2}'}}]},
        {"role": "tool", "tool_call_id": "call_2", "content": "20"},
    ]
    status, body = llm.post({"messages": messages, "tools": TOOLS, "temperature": 0, "max_tokens": 24})
    assert status == 200, body
    check_reply(body)
    logged = llm.requests()[-1]["messages"]
    # the template was given the arguments as objects (Qwen2.5's renders them with tojson)
    assert logged[2]["tool_calls"][0]["function"]["arguments"] == {"city": "Paris"}
    assert logged[3] == {"role": "tool", "content": '{"sky": "clear", "celsius": 18}', "tool_call_id": "call_1", "name": "get_weather"}


USER = [{"role": "user", "content": "Hi"}]
CALL_MESSAGE = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]}


@pytest.mark.parametrize(
    "extra, param, code",
    [
        ({"tools": [TOOLS[0], {"type": "function", "function": {"description": "no name"}}]}, "tools[1].function.name", "invalid_value"),
        ({"tools": [TOOLS[0], TOOLS[1], {"type": "function", "function": {"name": "has space"}}]}, "tools[2].function.name", "invalid_value"),
        ({"tools": [{"type": "retrieval", "function": TOOLS[0]["function"]}]}, "tools[0].type", "invalid_value"),
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": "none"}}]}, "tools[0].function.parameters", "invalid_value"),
        ({"tools": {"get_weather": {}}}, "tools", "invalid_value"),
        ({"tool_choice": "required"}, "tool_choice", "invalid_value"),
        ({"tools": TOOLS, "tool_choice": "always"}, "tool_choice", "invalid_value"),
        ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "get_time"}}}, "tool_choice.function.name", "invalid_value"),
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"d": {"type": "string", "format": "date"}}}}}],
          "tool_choice": "required"}, "tools[0].function.parameters.properties.d.format", "unsupported_schema"),
        ({"tools": TOOLS, "parallel_tool_calls": "yes"}, "parallel_tool_calls", "invalid_value"),
        ({"messages": USER + [CALL_MESSAGE, {"role": "tool", "tool_call_id": "c1"}]}, "messages[2].content", "invalid_value"),
        ({"messages": USER + [CALL_MESSAGE, {"role": "tool", "content": "18 C"}]}, "messages[2].tool_call_id", "invalid_value"),
        ({"messages": USER + [{**CALL_MESSAGE, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{city: Paris}"}}]}]},
         "messages[1].tool_calls[0].function.arguments", "invalid_value"),
        ({"messages": USER + [{**CALL_MESSAGE, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}]},
         "messages[1].tool_calls[0].function.arguments", "invalid_value"),
        ({"messages": USER + [{**CALL_MESSAGE, "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]}]},
         "messages[1].tool_calls[0].id", "invalid_value"),
        ({"messages": USER + [{**CALL_MESSAGE, "tool_calls": {"id": "c1"}}]}, "messages[1].tool_calls", "invalid_value"),
    ],
)
def test_bad_tool_requests_are_refused_naming_the_field(llm, extra, param, code):
    status, body = llm.post({"messages": USER, "max_tokens": 1, **extra})
    assert status == 400, body
    assert body["error"]["param"] == param, body
    assert body["error"]["code"] == code, body


def test_prompt_cache_reuses_the_shared_prefix_and_changes_no_reply(llm, llm_no_prompt_cache):
    first = {"messages": [{"role": "user", "content": "What is the weather in Paris?"}], "tools": TOOLS, "temperature": 0, "max_tokens": 24}
    second = {"messages": [{"role": "user", "content": "Add 2 and 3."}], "tools": TOOLS, "temperature": 0, "max_tokens": 24}
    before = llm.stats()["cached_tokens"]
    status, one = llm.post(first)
    assert status == 200, one
    status, two = llm.post(second)
    assert status == 200, two
    cached = two["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert cached > 0, two["usage"]  # the system prompt and the tools block, in whole chunks
    assert llm.stats()["cached_tokens"] - before == one["usage"]["prompt_tokens_details"]["cached_tokens"] + cached
    # a server that prefills every prompt from scratch gives the same greedy reply, token for token
    status, cold = llm_no_prompt_cache.post(second)
    assert status == 200, cold
    assert cold["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert llm_no_prompt_cache.stats()["cached_tokens"] == 0
    assert comparable(check_reply(cold)) == comparable(check_reply(two))
    assert cold["usage"]["completion_tokens"] == two["usage"]["completion_tokens"]
