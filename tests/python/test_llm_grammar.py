"""scripts/llm_grammar.py (the grammars behind scripts/llm-server.py's `tool_choice`, `parallel_tool_calls` and
`response_format`) and the server's handling of those controls, without the llama.cpp runtime.

Why this exists: a constrained decoder can only write what its grammar allows, so a grammar must allow exactly
the calls and documents the schema allows. Each grammar is read back by tests/python/gbnf.py and checked on
strings: every tool schema memgym serves (fetched from a real server's ListTools), at and beyond every bound,
enum, array size, optional and required field; integer and number ranges on grids; open and strict objects. The
server is driven through its real HTTP handler with a fake model that writes random strings of the request's
grammar. The real-LLM tier (tests/python/real_llm/test_llm_server_controls.py) runs the same controls on the
real model.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import urllib.error
import urllib.request
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from gbnf import Grammar
from llm_server_module import server
from schema_check import valid
from memgym import MemgymClient

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
sys.path.insert(0, str(SCRIPTS))
import llm_grammar as g  # noqa: E402




def block(name: str, args: dict) -> str:
    return f'<tool_call>\n{{"name": {json.dumps(name)}, "arguments": {json.dumps(args)}}}\n</tool_call>'


def ordered(params: dict, args: dict) -> dict:
    """args in the schema's property order (a grammar writes an object's properties in that order, as llama.cpp's
    and xgrammar's do), names the schema does not list last."""
    order = list(params.get("properties", {}))
    return dict(sorted(args.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order)))


def examples(schema) -> tuple[list, list]:
    """(valid values, invalid values) of one property schema: its bounds, one past them, its enum and outside it,
    wrong types."""
    ok, bad = [], []
    if "enum" in schema:
        return list(schema["enum"]), ["NOT-A-LISTED-VALUE", 3]
    t = schema.get("type")
    if t == "integer":
        lo, hi = schema.get("minimum", -7), schema.get("maximum", 123456)
        ok += [lo, hi, (lo + hi) // 2]
        bad += ["5", 2.5, True]
        bad += [lo - 1] if "minimum" in schema else []
        bad += [hi + 1] if "maximum" in schema else []
    elif t == "number":
        lo, hi = schema.get("minimum", -2), schema.get("maximum", 7)
        ok += [lo, hi, (lo + hi) / 2]
        bad += ["0.5", True]
        bad += [lo - 0.5] if "minimum" in schema else []
        bad += [hi + 0.25] if "maximum" in schema else []
    elif t == "string":
        ok += ["", "plain", 'with "quotes" and \\ and \n newline', "ünïcode ✓"]
        bad += [5, None, ["x"]]
    elif t == "array":
        item = schema.get("items", True)
        first = examples(item)[0][0] if item not in (True, {}) else "x"
        lo, hi = schema.get("minItems", 0), schema.get("maxItems", 3)
        ok += [[first] * lo, [first] * hi]
        bad += ["not a list"]
        bad += [[first] * (lo - 1)] if lo > 0 else []
        bad += [[first] * (hi + 1)] if "maxItems" in schema else []
        bad += [[first, 5]] if item not in (True, {}) and item.get("type") == "string" else []
    elif t == "boolean":
        ok, bad = [True, False], ["true", 1]
    return ok, bad


@pytest.fixture(scope="module")
def memgym_tools(server_address):
    with MemgymClient(server_address, timeout=10.0) as c:
        return c.list_tools()


def test_every_tool_schema_memgym_serves_gets_a_grammar_of_exactly_its_valid_calls(memgym_tools):
    text, _ = g.grammar(memgym_tools, None, parallel=True)
    grammar = Grammar(text)
    seen = set()
    for tool in memgym_tools:
        f = tool["function"]
        params = f["parameters"]
        props, required = params["properties"], params.get("required", [])
        base = {}
        for name in required:
            base[name] = examples(props[name])[0][0]
        base = ordered(params, base)
        assert grammar.matches(block(f["name"], base)), (f["name"], base)
        for name, schema in props.items():
            seen.add("enum" if "enum" in schema else schema.get("type"))
            seen |= {"integer range"} if "minimum" in schema and schema.get("type") == "integer" else set()
            seen |= {"optional"} if name not in required else set()
            ok, bad = examples(schema)
            for v in ok:
                args = {**base, name: v}
                assert valid(params, args), args
                assert grammar.matches(block(f["name"], ordered(params, args))), (f["name"], name, v)
            for v in bad:
                args = {**base, name: v}
                assert not valid(params, args), args
                assert not grammar.matches(block(f["name"], ordered(params, args))), (f["name"], name, v)
        for name in required:
            args = {k: v for k, v in base.items() if k != name}
            assert not grammar.matches(block(f["name"], args)), f"{f['name']} without its required {name}"
        closed = params.get("additionalProperties", False) is False
        assert grammar.matches(block(f["name"], {**base, "not_an_argument": 1})) != closed, f["name"]
    # The served schemas have what the grammar must handle: enums, bounded integers, arrays, optional fields.
    assert {"enum", "integer range", "array", "optional", "string"} <= seen, seen
    # One call or several (parallel_tool_calls), never a call of a tool not given, never text around them.
    one = block(memgym_tools[0]["function"]["name"], {k: examples(memgym_tools[0]["function"]["parameters"]["properties"][k])[0][0] for k in memgym_tools[0]["function"]["parameters"].get("required", [])})
    assert grammar.matches(one + "\n" + one)
    assert not grammar.matches("Sure. " + one)
    assert not grammar.matches(block("update_memory", {}))
    single = Grammar(g.grammar(memgym_tools, None, parallel=False)[0])
    assert single.matches(one) and not single.matches(one + "\n" + one)
    other = memgym_tools[1]["function"]["name"]
    named = Grammar(g.grammar(memgym_tools, [other], parallel=True)[0])
    assert not named.matches(one)


def test_random_strings_of_a_tool_grammar_are_valid_calls(memgym_tools):
    """The fake model's draws, read by the server's own parser: every draw is calls of the given tools with
    arguments valid against their schemas."""
    grammar = Grammar(g.grammar(memgym_tools, None, parallel=True)[0])
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in memgym_tools}
    rng = random.Random(7)
    names = set()
    for _ in range(300):
        text = grammar.sample(rng)
        assert grammar.matches(text)
        content, calls = server.split_tool_calls(text)
        assert content is None and calls, text
        for call in calls:
            args = json.loads(call["arguments"])
            assert valid(schemas[call["name"]], args), (call, text)
            names.add(call["name"])
    assert names == set(schemas), "every tool drawn"


def test_integer_ranges_match_exactly_the_integers_in_range():
    rng = random.Random(3)
    pairs = [(0, 0), (1, 50), (2, 5), (-30, 1234), (-999, -100), (7, 7), (0, 10**15 - 1), (-(10**15) + 1, 10)]
    pairs += [tuple(sorted((rng.randint(-5000, 5000), rng.randint(-5000, 5000)))) for _ in range(25)]
    for lo, hi in pairs:
        grammar = Grammar(f"root ::= {g.integer_range(lo, hi)}\n")
        probes = {lo - 1, lo, lo + 1, hi - 1, hi, hi + 1, 0, -1, 1, 10, 99, 100, -10}
        probes |= {rng.randint(lo - 100, hi + 100) for _ in range(60)}
        for x in probes:
            assert grammar.matches(str(x)) == (lo <= x <= hi), (lo, hi, x)
        assert not grammar.matches("01") and not grammar.matches("-0") and not grammar.matches("+1")


def test_number_ranges_allow_fractions_up_to_a_whole_bound():
    candidates = ["0", "1", "1.0", "1.000", "1.01", "0.5", "0.999", "2", "-0.5", "-1", "-3", "-3.0", "-3.5", "2.5",
                  "10", "9.75", "5", "4.99", "1e0", "01", ".5", "0."]
    for lo, hi in [(0, 1), (-3, 2), (5, 10), (None, 0), (1, None), (-3, -1)]:
        schema = {"type": "number", **({"minimum": lo} if lo is not None else {}), **({"maximum": hi} if hi is not None else {})}
        grammar = Grammar(g.grammar(None, doc=(schema, False))[0])
        for c in candidates:
            wellformed = c not in ("1e0", "01", ".5", "0.")
            inside = wellformed and (lo is None or float(c) >= lo) and (hi is None or float(c) <= hi)
            assert grammar.matches(c) == inside, (lo, hi, c)


def test_json_object_and_json_schema_documents():
    any_object = Grammar(g.grammar(None, doc=(None, False))[0])
    for text, ok in [('{"a": [1, {"b": null}], "c": "d"}', True), ("{}", True), ("[1]", False), ('"x"', False), ("{", False)]:
        assert any_object.matches(text) == ok, text
    schema = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 5}, "confidence": {"type": "number", "minimum": 0, "maximum": 1},
              "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2}, "note": {"type": ["string", "null"]}}, "required": ["answer"]}
    grammar = Grammar(g.grammar(None, doc=(schema, True))[0])
    rng = random.Random(5)
    for _ in range(200):
        doc = json.loads(grammar.sample(rng))
        assert valid(schema, doc), doc
    for doc in [{"answer": "yes"}, {"answer": "", "confidence": 1, "tags": ["b", "a"], "note": None}]:
        assert grammar.matches(json.dumps(doc)), doc
    for doc in [{}, {"answer": "toolong"}, {"answer": "y", "confidence": 1.5}, {"answer": "y", "tags": ["c"]}, {"answer": "y", "other": 1}]:
        assert not grammar.matches(json.dumps(doc)), doc


def test_open_objects_and_strict():
    open_schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": True}
    grammar = Grammar(g.grammar(None, doc=(open_schema, False))[0])
    assert grammar.matches('{"a": 1, "b": [true]}') and grammar.matches('{"z": "x"}') and grammar.matches('{"a": 1}')
    typed = {"type": "object", "additionalProperties": {"type": "integer", "maximum": 3}}
    grammar = Grammar(g.grammar(None, doc=(typed, False))[0])
    assert grammar.matches('{"x": 3, "y": 1}') and not grammar.matches('{"x": 4}')
    closed = {"type": "object", "properties": {"a": {"type": "integer"}}}
    assert not Grammar(g.grammar(None, doc=(closed, False))[0]).matches('{"a": 1, "b": 2}'), "absent additionalProperties: closed"
    with pytest.raises(g.SchemaError) as e:
        g.grammar(None, doc=(open_schema, True))
    assert e.value.path == "response_format.json_schema.schema.additionalProperties"
    tool = {"type": "function", "function": {"name": "f", "strict": True, "parameters": {"type": "object", "properties": {"x": {"type": "object", "additionalProperties": True}}}}}
    with pytest.raises(g.SchemaError) as e:
        g.grammar([tool], None, True)
    assert e.value.path == "tools[0].function.parameters.properties.x.additionalProperties"


@pytest.mark.parametrize(
    "schema,path",
    [
        ({"type": "string", "pattern": "^a"}, "S.pattern"),
        ({"type": "object", "properties": {"when": {"type": "string", "format": "date"}}}, "S.properties.when.format"),
        ({"$ref": "#/$defs/x"}, "S.$ref"),
        ({"allOf": [{"type": "string"}]}, "S.allOf"),
        ({"type": "number", "maximum": 0.5}, "S.maximum"),
        ({"type": "string", "maxLength": 100000}, "S.maxLength"),
        ({"type": "integer", "minimum": 5, "maximum": 4}, "S"),
        ({"type": "date"}, "S.type"),
        ({"anyOf": [{"type": "string"}, {"type": "string", "pattern": "x"}]}, "S.anyOf[1].pattern"),
    ],
)
def test_a_schema_no_grammar_is_built_for_names_its_field(schema, path):
    with pytest.raises(g.SchemaError) as e:
        g.grammar(None, doc=(schema, False))
    assert e.value.path == path.replace("S", "response_format.json_schema.schema", 1)


def test_grammars_are_cached_by_what_they_are_built_from(memgym_tools):
    g._grammar.cache_clear()
    first = g.grammar(memgym_tools, None, True)
    again = g.grammar(json.loads(json.dumps(memgym_tools)), None, True)
    assert again == first and g._grammar.cache_info().hits == 1
    assert g.grammar(memgym_tools, None, False)[1] != first[1]
    assert g.grammar(memgym_tools[:5], None, True)[1] != first[1]


TOOLS = [
    {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "integer", "minimum": 1, "maximum": 9}}, "required": ["q"]}}},
    {"type": "function", "function": {"name": "stop", "parameters": {"type": "object", "properties": {}}}},
]


@pytest.mark.parametrize(
    "extra,param",
    [
        ({"tool_choice": "required", "tools": None}, "tool_choice"),
        ({"tool_choice": "always"}, "tool_choice"),
        ({"tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice.function.name"),
        ({"tool_choice": {"type": "tool", "function": {"name": "lookup"}}}, "tool_choice.type"),
        ({"parallel_tool_calls": "yes"}, "parallel_tool_calls"),
        ({"response_format": {"type": "xml"}}, "response_format.type"),
        ({"response_format": {"type": "json_schema"}}, "response_format.json_schema"),
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "string", "format": "uuid"}}}}, "response_format.json_schema.schema.format"),
        ({"tool_choice": "required", "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}}}}]},
         "tools[0].function.parameters.properties.a.pattern"),
        ({"tools": TOOLS + [TOOLS[0]]}, "tools[2].function.name"),
    ],
)
def test_a_bad_control_is_refused_naming_its_field(extra, param):
    body = {"messages": [{"role": "user", "content": "hi"}], "tools": TOOLS, **extra}
    if body["tools"] is None:
        del body["tools"]
    with pytest.raises(server.BadRequest) as e:
        server._request(body)
    assert e.value.param == param, str(e.value)


def test_each_tool_choice_picks_its_constraint():
    body = {"messages": [{"role": "user", "content": "hi"}], "tools": TOOLS}
    auto = server._request(body)["constraint"]
    assert (auto["tool_choice"], auto["grammar"], auto["lazy"]) == ("auto", None, False), "auto is free by default, as vLLM's"
    lazy = server._request(body, "lazy")["constraint"]
    assert lazy["lazy"] and lazy["grammar"].startswith('root ::= "\\n" call')
    none = server._request({**body, "tool_choice": "none"})
    assert none["tools"] == [] and none["constraint"]["grammar"] is None
    required = server._request({**body, "tool_choice": "required", "parallel_tool_calls": False})
    assert required["constraint"]["tool_choice"] == "required" and not required["constraint"]["parallel_tool_calls"]
    assert len(required["tools"]) == 2, "the template still shows every tool"
    named = server._request({**body, "tool_choice": {"type": "function", "function": {"name": "stop"}}})["constraint"]
    assert named["tool_choice"] == "stop" and "call-lookup" not in named["grammar"]
    doc = server._request({**body, "tool_choice": "none", "response_format": {"type": "json_object"}})["constraint"]
    assert doc["response_format"] == "json_object" and doc["grammar"] and not doc["lazy"]


class FakeModel(server.Model):
    """The server's Model with generation replaced: it writes a random string of the request's grammar (a
    lazy grammar after a `<tool_call>` it writes first), or fixed text when nothing constrains it."""

    def __init__(self):  # no llama.cpp: only what the handler and record() use
        self.name, self.log, self.stats_lock = "fake", None, threading.Lock()
        self.stats = {"active": 0, "requests": 0, "prompt_tokens": 0, "cached_tokens": 0, "completion_tokens": 0, "seconds": 0.0}
        self.rng = random.Random(11)

    def render(self, messages, tools=None):
        return json.dumps([messages, tools])

    def complete(self, prompt, max_tokens, temperature, top_p, seed, stop, constraint=None):
        grammar, lazy = constraint.get("grammar"), constraint.get("lazy")
        if grammar is None:
            text = "I would rather answer in words."
        elif lazy:
            text = "Let me look.<tool_call>" + Grammar(grammar).sample(self.rng)
        else:
            text = Grammar(grammar).sample(self.rng)
        return text, "stop", 10, 0, len(text), 0.01, bool(lazy)


@pytest.fixture
def fake_server(tmp_path):
    model = FakeModel()
    model.log = open(tmp_path / "requests.jsonl", "a", encoding="utf-8")
    handler = type("FakeHandler", (server.Handler,), {"model": model, "auto_grammar": "lazy"})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", tmp_path / "requests.jsonl"
    httpd.shutdown()
    model.log.close()


def post(url: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(url + "/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def test_the_server_returns_constrained_replies_and_logs_their_constraint(fake_server, memgym_tools):
    url, log = fake_server
    messages = [{"role": "user", "content": "Improve the memory."}]
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in memgym_tools}
    for _ in range(5):
        status, r = post(url, {"messages": messages, "tools": memgym_tools, "tool_choice": "required"})
        assert status == 200, r
        choice = r["choices"][0]
        assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
        for call in choice["message"]["tool_calls"]:
            assert valid(schemas[call["function"]["name"]], json.loads(call["function"]["arguments"])), call
    status, r = post(url, {"messages": messages, "tools": memgym_tools, "parallel_tool_calls": False,
                           "tool_choice": {"type": "function", "function": {"name": "merge_memory"}}})
    calls = r["choices"][0]["message"]["tool_calls"]
    assert status == 200 and [c["function"]["name"] for c in calls] == ["merge_memory"]
    status, r = post(url, {"messages": messages, "tools": memgym_tools})  # auto, the server's lazy grammar
    assert status == 200 and r["choices"][0]["message"]["content"] == "Let me look." and r["choices"][0]["message"]["tool_calls"]
    schema = {"type": "object", "properties": {"answer": {"type": "string"}, "year": {"type": "integer", "minimum": 1900, "maximum": 2100}}, "required": ["answer", "year"]}
    status, r = post(url, {"messages": messages, "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": True}}})
    assert status == 200 and valid(schema, json.loads(r["choices"][0]["message"]["content"])), r
    status, r = post(url, {"messages": messages, "tools": memgym_tools, "tool_choice": "required", "response_format": {"type": "xml"}})
    assert status == 400 and r["error"]["param"] == "response_format.type", r
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["constraint"]["tool_choice"] for e in entries] == ["required"] * 5 + ["merge_memory", "auto", "auto"]
    assert entries[5]["constraint"]["parallel_tool_calls"] is False and entries[6]["constraint"]["lazy"] and entries[6]["constraint"]["triggered"]
    assert entries[7]["constraint"]["response_format"] == "json_schema"
    assert all(len(e["constraint"]["hash"]) == 16 for e in entries) and "grammar" not in entries[0]["constraint"]


def test_a_reply_with_a_lone_surrogate_is_logged_not_failed(tmp_path):
    """JSON lets a call's string hold `\\ud83c` alone (a grammar allows any `\\uXXXX`): the request log writes its
    escape instead of failing the request on UTF-8 encoding."""
    model = FakeModel()
    with open(tmp_path / "log.jsonl", "a", encoding="utf-8") as model.log:
        _, calls = server.split_tool_calls(block("lookup", {"q": "x"}).replace('"x"', '"\\ud83c"'))
        model.record({"tool_calls": calls})
    logged = json.loads((tmp_path / "log.jsonl").read_text(encoding="utf-8"))
    assert logged["tool_calls"][0]["arguments"] == '{"q":"\ud83c"}', "the escape reads back as the reply held it"
