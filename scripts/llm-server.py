#!/usr/bin/env python3
"""A small OpenAI-compatible chat-completions server around one GGUF model, on CPU, for tests and for anyone
who wants a local LLM endpoint without a GPU (memgym itself talks to any OpenAI-compatible endpoint: vLLM,
SGLang, a llama.cpp server, OpenAI).

Why not `cyllama server`: it ignores the model's chat template and keeps the KV cache between requests, so a
reply depends on the request before it. This server renders the chat template stored in the GGUF (Jinja, as
transformers does) and samples with the request's own settings. Of the previous request it keeps only the
KV cache of the longest token prefix the new prompt shares with the last prompt (a multi-turn conversation
resends its system prompt, tools and turns), in whole 64-token chunks, removes the rest and decodes the new
suffix, always including the last prompt token. A reply does not depend on earlier requests: every prompt,
cached or not, is decoded in the same position-aligned chunks (see PROMPT_CHUNK), so a reused prefix holds
the bits a cold prefill computes and greedy replies are the same with and without the cache (checked with
this build's CPU kernels; a backend that rounds differently by batch would leave floating-point effects of
batch boundaries, no more). `--no-prompt-cache` clears the KV cache before every request.

Runtime: cyllama (a prebuilt llama.cpp wheel from PyPI; `scripts/install-llm.sh` installs it and a model).

    python scripts/llm-server.py --model model.gguf [--host 127.0.0.1] [--port 0] [--threads N]

It prints one line to stdout when it listens, then serves until killed:

    memgym-llm-server: listening on http://127.0.0.1:PORT/v1 model=NAME

- POST /v1/chat/completions: `messages` (system/user/assistant/tool; `content` a string or a list of text
  parts), `temperature` (0 = greedy; default 1), `top_p`, `max_tokens` / `max_completion_tokens` (default: the
  rest of the context), `stop` (a string or up to 4), `seed` (for temperature > 0), `n` = 1, `stream` (the
  finished reply as OpenAI's server-sent events: one chunk whose delta is the whole message, one with the
  finish reason, one with the usage when `stream_options.include_usage`, then `[DONE]`; generation is not
  incremental, so nothing arrives earlier). The reply carries `choices[0].message.content`, `finish_reason` (`stop`, `length` or `tool_calls`) and `usage`
  (with `prompt_tokens_details.cached_tokens`, the prompt tokens reused from the KV cache).
- Tools (OpenAI function calling, as llama.cpp's server and vLLM's `hermes` parser serve them): `tools` (a list
  of `{"type": "function", "function": {"name", "description", "parameters", "strict"}}`, names distinct).
  Assistant messages may carry `tool_calls` (their `arguments` a JSON string, as OpenAI sends them; the
  template gets the parsed object) with `content` null or empty, and `tool` messages answer them (`content`,
  `tool_call_id`, optional `name`). The tools are rendered by the model's own chat template. When tools were
  given, the reply is read for `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks (the
  Hermes/Qwen convention): if every block holds a JSON object with a string `name` and an object `arguments`,
  each becomes a `tool_calls` entry (`arguments` a compact JSON string), `content` is the text outside the
  blocks (null when empty) and `finish_reason` is `tool_calls`. If any block does not parse, lacks either
  field, or is left unclosed (a reply cut by `max_tokens`), there are no `tool_calls` and `content` is the
  reply verbatim, as vLLM's hermes parser does when it fails: the server reports what the model wrote and does
  no lenient reading of its own (see `split_tool_calls`).
- Decoding controls (OpenAI's, as vLLM and SGLang honour them), by a llama.cpp grammar built from the request
  (scripts/llm_grammar.py says which JSON Schema it reads; grammars are cached by a hash of what they are built
  from):
  - `tool_choice`: `"required"` forces one or more `<tool_call>` blocks of the listed tools, their arguments
    valid against each tool's schema (objects closed unless the schema opens them; a `strict` function's
    schema may not open them; integers and numbers within their bounds; enums; array sizes); a named function
    (`{"type": "function", "function": {"name": ...}}`) forces calls of that one; `"auto"` (the default) leaves
    the reply free, as vLLM and SGLang do, or with `--auto-tool-grammar lazy` constrains the rest of a call
    once the model has written `<tool_call>` (llama.cpp's lazy grammar); `"none"` renders no tools.
  - `parallel_tool_calls` (default true): false allows exactly one call under `required` or a named function.
  - `response_format`: `{"type": "json_object"}` (any JSON object) or `{"type": "json_schema", "json_schema":
    {"name", "schema", "strict"}}` (a document valid against the schema); `text` is the default. Under
    `required` or a named function the reply is calls, so the format is not applied; under `auto` with tools
    the reply is either the document or calls.
  - A schema no grammar is built for (`pattern`, `format`, `$ref`, a fractional number bound, ...) is HTTP 400
    with code `unsupported_schema` and `param` naming the keyword (`tools[0].function.parameters.properties.
    when.format`). A grammar costs sampling time: every token is checked against it over the whole vocabulary
    (scripts/llm-constraint-cost.py measures it).
- GET /v1/models, GET /health, and GET /stats: completions `active` (received, not yet answered) and served
  (`requests`, tokens, `cached_tokens` reused, seconds generating), for tests and measurements.
- Bad requests get HTTP 400 with an OpenAI-style `{"error": {"message", "type", "param", "code"}}`, `param`
  naming the field (e.g. `tools[2].function.name`, `messages[3].tool_calls[0].function.arguments`).

One request generates at a time (llama.cpp contexts are not thread-safe); others wait their turn.
`--exit-with-stdin` exits when stdin closes, so a test harness that dies never leaves the server behind.
`--log-requests FILE` appends one JSON line per completion (messages, number of tools, reply, parsed tool
calls, finish reason, tokens, cached tokens, seconds, and `constraint`: the tool choice, `parallel_tool_calls`,
the response format, whether the grammar was lazy and whether it started, and the grammar's hash): what a
measurement needs to see the model's real replies. It holds memory contents; keep it private.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.dont_write_bytecode = True  # no __pycache__ in scripts/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llm_grammar  # noqa: E402  (the grammar builder, beside this file)

MAX_STOP = 4
MAX_BODY = 8 << 20
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # OpenAI's rule for function names
TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"
# Prompts are decoded in chunks of this many tokens aligned to absolute positions (0-63, 64-127, ...), with
# or without the prompt cache, and only whole chunks are reused. ggml's CPU kernels round the same way for
# the same shapes, so a chunk's keys and values, and the logits after it, are bit-identical whatever was
# decoded before: a reused prefix equals a cold prefill (a prefix cut at any token, or decoded with a
# reply's one-token steps, would differ in the last bits and can flip a greedy reply). 64 costs about 6 %
# of prefill speed against 512-token batches on two cores and re-decodes 32 tokens on average.
PROMPT_CHUNK = 64

# The llama.cpp bindings, imported when a model is loaded (Model.__init__): the request checks and
# split_tool_calls import without cyllama, so the tests' own Python can import this file.
L = None


class BadRequest(Exception):
    """A request the server refuses (HTTP 400)."""

    def __init__(self, message: str, param: str | None = None, code: str = "invalid_value"):
        super().__init__(message)
        self.param = param
        self.code = code


class Model:
    """One GGUF model and one llama.cpp context, used by one request at a time."""

    def __init__(self, path: str, n_ctx: int, threads: int, name: str | None, prompt_cache: bool = True):
        global L
        from cyllama._vendor.jinja2.sandbox import ImmutableSandboxedEnvironment
        from cyllama.llama import llama_cpp

        L = llama_cpp
        L.disable_logging()
        L.ggml_backend_load_all()
        params = L.LlamaModelParams()
        params.n_gpu_layers = 0
        self.model = L.LlamaModel(path, params)
        self.vocab = self.model.get_vocab()
        ctx_params = L.LlamaContextParams()
        ctx_params.n_ctx = n_ctx
        ctx_params.n_batch = ctx_params.n_ubatch = PROMPT_CHUNK
        ctx_params.n_threads = threads
        ctx_params.n_threads_batch = threads
        ctx_params.no_perf = True
        self.ctx = L.LlamaContext(self.model, ctx_params)
        self.n_ctx = n_ctx
        self.name = name or self.model.meta_val_str("general.name") or os.path.basename(path)
        template = self.model.get_default_chat_template()
        if not template:
            raise SystemExit(f"{path} has no chat template in its GGUF metadata")
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.filters["tojson"] = lambda v, **kw: json.dumps(v, ensure_ascii=False, **kw)
        env.globals["raise_exception"] = _raise
        self.template = env.from_string(template)
        self.lock = threading.Lock()  # the context: one generation at a time
        self.prompt_cache = prompt_cache
        # The prompt tokens of the whole chunks the KV cache holds, at positions 0..len-1 (a multiple of
        # PROMPT_CHUNK); whatever the cache holds beyond them (a partial chunk, a reply) is never reused.
        self.cached: list[int] = []
        self.stats_lock = threading.Lock()
        self.stats = {"active": 0, "requests": 0, "prompt_tokens": 0, "cached_tokens": 0, "completion_tokens": 0, "seconds": 0.0}
        self.log = None

    def piece(self, token: int, special: bool) -> str:
        try:
            return self.vocab.token_to_piece(token, special=special)
        except UnicodeDecodeError:
            return ""

    def render(self, messages: list[dict], tools: list[dict] | None = None) -> str:
        bos = self.vocab.token_bos()
        eos = self.vocab.token_eos()
        return self.template.render(
            messages=messages,
            tools=tools or None,
            add_generation_prompt=True,
            bos_token=self.piece(bos, True) if bos >= 0 else "",
            eos_token=self.piece(eos, True) if eos >= 0 else "",
        )

    def complete(self, prompt: str, max_tokens: int | None, temperature: float, top_p: float, seed: int | None, stop: list[str],
                 constraint: dict | None = None):
        """(text, finish_reason, prompt_tokens, cached prompt tokens, completion_tokens, seconds generating,
        whether a lazy grammar was triggered)."""
        tokens = self.vocab.tokenize(prompt, add_special=True, parse_special=True)
        room = self.n_ctx - len(tokens)
        if room <= 0:
            raise BadRequest(
                f"the prompt is {len(tokens)} tokens; this server's context is {self.n_ctx} (--ctx)",
                "messages",
                "context_length_exceeded",
            )
        limit = room if max_tokens is None else min(max_tokens, room)
        self.count(active=1)
        try:
            return self.generate(tokens, limit, temperature, top_p, seed, stop, constraint or {})
        finally:
            self.count(active=-1)

    def count(self, **deltas) -> None:
        with self.stats_lock:
            for key, delta in deltas.items():
                self.stats[key] += delta

    def reuse(self, tokens: list[int]) -> int:
        """Keeps in the KV cache the whole chunks `tokens` shares with the last prompt, but never the last
        prompt token (its logits must be fresh), removes everything after them, and returns their length."""
        n = 0
        if self.prompt_cache:
            limit = min(len(self.cached), len(tokens) - 1)
            while n < limit and self.cached[n] == tokens[n]:
                n += 1
            n -= n % PROMPT_CHUNK
        if n == 0 or not self.ctx.memory_seq_rm(-1, n, -1) or self.ctx.memory_seq_pos_max(0) != n - 1:
            self.ctx.kv_cache_clear()
            n = 0
        del self.cached[n:]
        return n

    def sampler(self, temperature: float, top_p: float, seed: int | None, grammar: str | None):
        """A sampler chain: the grammar first (when given: every token it forbids is masked out of all 152k before
        anything else sees the logits), then greedy, or nucleus, temperature and a seeded draw."""
        sampler = L.LlamaSampler(L.LlamaSamplerChainParams())
        if grammar is not None:
            sampler.add_grammar(self.vocab, grammar, "root")
        if temperature == 0.0:
            sampler.add_greedy()
        else:
            sampler.add_top_p(top_p, 1)
            sampler.add_temp(temperature)
            sampler.add_dist(seed if seed is not None else int.from_bytes(os.urandom(4), "little"))
        return sampler

    def generate(self, tokens: list[int], limit: int, temperature: float, top_p: float, seed: int | None, stop: list[str], constraint: dict):
        lazy = constraint.get("lazy", False)
        with self.lock:
            started = time.monotonic()
            # A lazy grammar starts once the model has written `<tool_call>` on its own (llama.cpp's server does
            # the same with a trigger word); until then the reply is free.
            sampler = self.sampler(temperature, top_p, seed, None if lazy else constraint.get("grammar"))
            triggered = False
            reused = self.reuse(tokens)
            for i in range(reused, len(tokens), PROMPT_CHUNK):  # reused is a multiple of PROMPT_CHUNK
                chunk = tokens[i : i + PROMPT_CHUNK]
                self.ctx.decode(L.llama_batch_get_one(chunk, i))
                if len(chunk) == PROMPT_CHUNK:  # only after it succeeded: a failed decode's leftovers go next time
                    self.cached.extend(chunk)
            out: list[int] = []
            text, finish = "", "length"
            while len(out) < limit:
                token = sampler.sample(self.ctx, -1)
                if self.vocab.is_eog(token):
                    finish = "stop"
                    break
                out.append(token)
                text = self.vocab.detokenize(out, remove_special=False, unparse_special=False)
                cut = min((p for p in (text.find(s) for s in stop) if p >= 0), default=-1)
                if cut >= 0:
                    text, finish = text[:cut], "stop"
                    break
                if lazy and not triggered and text.endswith(llm_grammar.TOOL_CALL_OPEN):
                    # The trigger ends on this token's boundary (Qwen writes `<tool_call>` as one token); a token
                    # running past it would leave the rest of the reply free, as it is before a trigger.
                    triggered = True
                    draw = None if seed is None else (seed + 1) % (1 << 32)
                    sampler = self.sampler(temperature, top_p, draw, constraint["grammar"])
                self.ctx.decode(L.llama_batch_get_one([token], len(tokens) + len(out) - 1))
            elapsed = time.monotonic() - started
        self.count(requests=1, prompt_tokens=len(tokens), cached_tokens=reused, completion_tokens=len(out), seconds=elapsed)
        return text, finish, len(tokens), reused, len(out), elapsed, triggered

    def record(self, entry: dict) -> None:
        if self.log is not None:
            # A reply may hold a lone surrogate (a `\ud83c` escape the model wrote inside a call's JSON): valid
            # JSON, not encodable as UTF-8, so it is written as its escape rather than failing the request.
            line = json.dumps(entry, ensure_ascii=False).encode("utf-8", "backslashreplace").decode("utf-8")
            with self.stats_lock:
                self.log.write(line + "\n")
                self.log.flush()


def _raise(message):
    raise BadRequest(f"the chat template refused the messages: {message}", "messages")


def _number(body: dict, key: str, default, lo: float, hi: float, integer: bool = False):
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not float(value).is_integer()):
        raise BadRequest(f"{key} must be {'an integer' if integer else 'a number'}", key)
    if not (lo <= value <= hi):
        raise BadRequest(f"{key} must be between {lo:g} and {hi:g}", key)
    return int(value) if integer else float(value)


def _text(content, where: str) -> str:
    """A message's content: a string, or a list of text parts joined."""
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        if len(parts) != len(content) or not all(isinstance(t, str) for t in parts):
            raise BadRequest(f"{where} parts must all be text", where)
        content = "".join(parts)
    if not isinstance(content, str):
        raise BadRequest(f"{where} must be a string or a list of text parts", where)
    return content


def _object(value, where: str) -> dict:
    if not isinstance(value, dict):
        raise BadRequest(f"{where} must be an object", where)
    return value


def _tool_calls(calls, where: str) -> list[dict]:
    """An assistant message's `tool_calls`, their `arguments` (a JSON string) parsed to the object the chat
    template renders (Qwen2.5's does `arguments | tojson`: a string would come out quoted)."""
    if not isinstance(calls, list):
        raise BadRequest(f"{where} must be a list", where)
    out = []
    for j, call in enumerate(calls):
        at = f"{where}[{j}]"
        _object(call, at)
        if not isinstance(call.get("id"), str) or not call["id"]:
            raise BadRequest(f"{at}.id must be a non-empty string", f"{at}.id")
        if call.get("type") != "function":
            raise BadRequest(f'{at}.type must be "function"', f"{at}.type")
        function = _object(call.get("function"), f"{at}.function")
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise BadRequest(f"{at}.function.name must be a non-empty string", f"{at}.function.name")
        arguments = function.get("arguments")
        arguments = _json_object(arguments) if isinstance(arguments, str) else None
        if arguments is None:
            raise BadRequest(f"{at}.function.arguments must be a string holding a JSON object", f"{at}.function.arguments")
        out.append({"id": call["id"], "type": "function", "function": {"name": name, "arguments": arguments}})
    return out


def _messages(body: dict) -> list[dict]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list", "messages")
    out = []
    for i, m in enumerate(messages):
        at = f"messages[{i}]"
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant", "developer", "tool"):
            raise BadRequest(f"{at}.role must be system, user, assistant, developer or tool", f"{at}.role")
        role = "system" if m["role"] == "developer" else m["role"]
        if role == "assistant" and m.get("tool_calls"):  # null or [] means none
            calls = _tool_calls(m["tool_calls"], f"{at}.tool_calls")
            content = "" if m.get("content") is None else _text(m["content"], f"{at}.content")
            out.append({"role": role, "content": content, "tool_calls": calls})
            continue
        if role == "assistant" and m.get("tool_calls") is not None and not isinstance(m["tool_calls"], list):
            raise BadRequest(f"{at}.tool_calls must be a list", f"{at}.tool_calls")
        message = {"role": role, "content": _text(m.get("content"), f"{at}.content")}
        if role == "tool":
            if not isinstance(m.get("tool_call_id"), str) or not m["tool_call_id"]:
                raise BadRequest(f"{at}.tool_call_id must be a non-empty string", f"{at}.tool_call_id")
            message["tool_call_id"] = m["tool_call_id"]
            if m.get("name") is not None:
                if not isinstance(m["name"], str):
                    raise BadRequest(f"{at}.name must be a string", f"{at}.name")
                message["name"] = m["name"]
        out.append(message)
    return out


def _tools(body: dict) -> tuple[list[dict], list[dict]]:
    """The tools as given, checked: (as the chat template renders them, as the grammar builder reads them: with
    each function's `strict`)."""
    if body.get("parallel_tool_calls") is not None and not isinstance(body["parallel_tool_calls"], bool):
        raise BadRequest("parallel_tool_calls must be a boolean", "parallel_tool_calls")
    tools = body.get("tools")
    if tools is None:
        return [], []
    if not isinstance(tools, list):
        raise BadRequest("tools must be a list", "tools")
    out, full, seen = [], [], set()
    for i, tool in enumerate(tools):
        at = f"tools[{i}]"
        _object(tool, at)
        if tool.get("type") != "function":
            raise BadRequest(f'{at}.type must be "function"', f"{at}.type")
        function = _object(tool.get("function"), f"{at}.function")
        name = function.get("name")
        if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
            raise BadRequest(f"{at}.function.name must be 1 to 64 letters, digits, underscores or dashes", f"{at}.function.name")
        if name in seen:
            raise BadRequest(f"{at}.function.name {name!r} names an earlier tool too", f"{at}.function.name")
        seen.add(name)
        rendered = {"name": name}
        if function.get("description") is not None:
            if not isinstance(function["description"], str):
                raise BadRequest(f"{at}.function.description must be a string", f"{at}.function.description")
            rendered["description"] = function["description"]
        if function.get("parameters") is not None:
            rendered["parameters"] = _object(function["parameters"], f"{at}.function.parameters")
        if function.get("strict") is not None and not isinstance(function["strict"], bool):
            raise BadRequest(f"{at}.function.strict must be a boolean", f"{at}.function.strict")
        out.append({"type": "function", "function": rendered})
        full.append({"type": "function", "function": {**rendered, "strict": function.get("strict") is True}})
    return out, full


def _tool_choice(body: dict, names: list[str]) -> tuple[str, str | None]:
    """`tool_choice` as (mode, the named function or None); mode is none, auto, required or named."""
    choice = body.get("tool_choice")
    if choice is None:
        return "auto", None
    if choice in ("none", "auto", "required"):
        if choice == "required" and not names:
            raise BadRequest('tool_choice "required" needs tools', "tool_choice")
        return choice, None
    if not isinstance(choice, dict):
        raise BadRequest('tool_choice must be "none", "auto", "required" or {"type": "function", "function": {"name": ...}}', "tool_choice")
    if choice.get("type") != "function":
        raise BadRequest('tool_choice.type must be "function"', "tool_choice.type")
    function = _object(choice.get("function"), "tool_choice.function")
    name = function.get("name")
    if not isinstance(name, str) or name not in names:
        shown = name[:64] if isinstance(name, str) else name
        raise BadRequest(f"tool_choice.function.name {shown!r} is not one of the request's tools", "tool_choice.function.name")
    return "named", name


def _response_format(body: dict):
    """`response_format` as None (text) or (schema or None, strict): `json_object` is (None, False)."""
    rf = body.get("response_format")
    if rf is None:
        return None
    _object(rf, "response_format")
    kind = rf.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return (None, False)
    if kind != "json_schema":
        raise BadRequest('response_format.type must be "text", "json_object" or "json_schema"', "response_format.type")
    spec = _object(rf.get("json_schema"), "response_format.json_schema")
    if not isinstance(spec.get("name"), str) or not TOOL_NAME.fullmatch(spec["name"]):
        raise BadRequest("response_format.json_schema.name must be 1 to 64 letters, digits, underscores or dashes", "response_format.json_schema.name")
    if spec.get("strict") is not None and not isinstance(spec["strict"], bool):
        raise BadRequest("response_format.json_schema.strict must be a boolean", "response_format.json_schema.strict")
    schema = spec.get("schema", {})
    if schema is not True:
        _object(schema, "response_format.json_schema.schema")
    return (schema, spec.get("strict") is True)


def _constraint(body: dict, full: list[dict], auto_grammar: str) -> dict:
    """What decoding is constrained to: {"tool_choice", "parallel_tool_calls", "response_format", "grammar"
    (GBNF or None), "lazy" (whether the grammar starts at a `<tool_call>` the model writes), "hash"}."""
    mode, name = _tool_choice(body, [t["function"]["name"] for t in full])
    parallel = body.get("parallel_tool_calls") is not False
    doc = _response_format(body)
    forced = mode in ("required", "named")
    if forced:
        doc = None  # the reply is tool calls: a response format has nothing to shape
    # Under auto: the server's lazy grammar when nothing else constrains the reply; with a response format, the
    # document or calls (not lazy).
    lazy = mode == "auto" and bool(full) and doc is None and auto_grammar == "lazy"
    tools = full if forced or (mode == "auto" and full and (doc is not None or lazy)) else None
    out = {"tool_choice": name or mode, "parallel_tool_calls": parallel, "response_format": None, "grammar": None, "lazy": lazy, "hash": None}
    if doc is not None:
        out["response_format"] = "json_object" if doc[0] is None else "json_schema"
    if tools is None and doc is None:
        return out
    try:
        gbnf, key = llm_grammar.grammar(tools, [name] if name else None, parallel, lazy, doc)
    except llm_grammar.SchemaError as e:
        raise BadRequest(f"no grammar can be built: {e}", e.path, "unsupported_schema") from None
    out.update(grammar=gbnf, hash=key)
    return out


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _json_object(text: str) -> dict | None:
    """`text` as a JSON object (NaN and Infinity refused: they are not JSON), or None."""
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _parse_call(body: str) -> dict | None:
    """One <tool_call> block's body as {"name", "arguments": compact JSON string}, or None."""
    value = _json_object(body)
    if value is None or not isinstance(value.get("name"), str) or not value["name"]:
        return None
    if not isinstance(value.get("arguments"), dict):
        return None
    return {"name": value["name"], "arguments": json.dumps(value["arguments"], ensure_ascii=False, separators=(",", ":"))}


def split_tool_calls(text: str) -> tuple[str | None, list[dict]]:
    """A reply's `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks (the Hermes/Qwen convention
    that llama.cpp's server and vLLM's `hermes` parser read) as (content, calls), each call
    {"name", "arguments"} with the arguments as compact JSON.

    All or nothing: when every block's body is a JSON object with a non-empty string `name` and an object
    `arguments`, content is the text outside the blocks (each piece stripped, joined by newlines; None when
    empty). When there is no block, or any block does not parse, lacks either field, or is not closed (a reply
    cut by max_tokens), there are no calls and content is `text` unchanged, as vLLM's hermes parser does when
    it fails. Nothing else is read leniently (bare JSON, arguments given as a string): the reply is what the
    model wrote, and a client that reads more does so on its own account.
    """
    outside, calls, pos = [], [], 0
    while True:
        start = text.find(TOOL_CALL_OPEN, pos)
        if start < 0:
            outside.append(text[pos:])
            break
        end = text.find(TOOL_CALL_CLOSE, start + len(TOOL_CALL_OPEN))
        call = None if end < 0 else _parse_call(text[start + len(TOOL_CALL_OPEN) : end])
        if call is None:
            return text, []
        outside.append(text[pos:start])
        calls.append(call)
        pos = end + len(TOOL_CALL_CLOSE)
    if not calls:
        return text, []
    content = "\n".join(piece.strip() for piece in outside if piece.strip())
    return content or None, calls


def _request(body: dict, auto_grammar: str = "off"):
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise BadRequest("stream must be a boolean", "stream")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict) or not isinstance(options.get("include_usage", False), bool):
        raise BadRequest("stream_options must be an object whose include_usage is a boolean", "stream_options")
    if _number(body, "n", 1, 1, 1, integer=True) != 1:
        raise BadRequest("n must be 1", "n")
    stop = body.get("stop")
    if stop is None:
        stop = []
    elif isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or len(stop) > MAX_STOP or not all(isinstance(s, str) and s for s in stop):
        raise BadRequest(f"stop must be a non-empty string or a list of at most {MAX_STOP}", "stop")
    key = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    messages = _messages(body)
    tools, full = _tools(body)
    constraint = _constraint(body, full, auto_grammar)
    return {
        "messages": messages,
        "tools": [] if constraint["tool_choice"] == "none" else tools,
        "constraint": constraint,
        "max_tokens": _number(body, key, None, 1, 1 << 20, integer=True),
        "temperature": _number(body, "temperature", 1.0, 0.0, 2.0),
        "top_p": _number(body, "top_p", 1.0, 0.0, 1.0),
        "seed": _number(body, "seed", None, 0, (1 << 32) - 1, integer=True),
        "stop": stop,
        "stream": stream,
        "include_usage": stream and options.get("include_usage", False),
    }


class Handler(BaseHTTPRequestHandler):
    server_version = "memgym-llm-server/1"
    protocol_version = "HTTP/1.1"
    model: Model
    auto_grammar = "off"  # --auto-tool-grammar

    def log_message(self, fmt, *args):  # one line per request, on stderr, without contents
        sys.stderr.write("memgym-llm-server: %s %s\n" % (self.address_string(), fmt % args))

    def send_json(self, status: int, value) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def error(self, status: int, message: str, param=None, code=None, kind="invalid_request_error") -> None:
        self.send_json(status, {"error": {"message": message, "type": kind, "param": param, "code": code}})

    def route(self) -> str:
        """The request path without query string or trailing slash."""
        return self.path.split("?", 1)[0].rstrip("/")

    def do_GET(self):
        path = self.route()
        if path in ("/v1/models", "/models"):
            self.send_json(200, {"object": "list", "data": [{"id": self.model.name, "object": "model", "created": 0, "owned_by": "local"}]})
        elif path == "/health":
            self.send_json(200, {"status": "ok", "model": self.model.name})
        elif path == "/stats":
            with self.model.stats_lock:
                stats = dict(self.model.stats)
            self.send_json(200, stats)
        else:
            self.error(404, f"no route GET {path}", code="not_found")

    def do_POST(self):
        path = self.route()
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self.close_connection = True
            return self.error(413, f"the body is over {MAX_BODY} bytes")
        raw = self.rfile.read(length)
        if path not in ("/v1/chat/completions", "/chat/completions"):
            return self.error(404, f"no route POST {path}", code="not_found")
        try:
            try:
                body = json.loads(raw)
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                raise BadRequest(f"the body is not JSON: {e}") from None
            req = _request(body, self.auto_grammar)
            prompt = self.model.render(req["messages"], req["tools"])
            constraint = req["constraint"]
            text, finish, n_prompt, n_cached, n_out, seconds, triggered = self.model.complete(
                prompt, req["max_tokens"], req["temperature"], req["top_p"], req["seed"], req["stop"], constraint
            )
            message = {"role": "assistant", "content": text}
            content, calls = split_tool_calls(text) if req["tools"] else (text, [])
            if calls:
                finish = "tool_calls"
                message = {
                    "role": "assistant",
                    "content": content,
                    "tool_calls": [{"id": "call_" + uuid.uuid4().hex[:24], "type": "function", "function": c} for c in calls],
                }
            self.model.record(
                {"messages": req["messages"], "tools": len(req["tools"]), "max_tokens": req["max_tokens"],
                 "temperature": req["temperature"], "reply": text, "tool_calls": calls, "finish_reason": finish,
                 "prompt_tokens": n_prompt, "cached_tokens": n_cached, "completion_tokens": n_out,
                 "seconds": round(seconds, 3),
                 "constraint": {**{k: v for k, v in constraint.items() if k != "grammar"}, "triggered": triggered}}
            )
        except BadRequest as e:
            return self.error(400, str(e), e.param, e.code)
        except Exception as e:  # a runtime failure: the client may retry
            return self.error(500, f"generation failed: {type(e).__name__}: {e}", kind="server_error")
        usage = {
            "prompt_tokens": n_prompt,
            "completion_tokens": n_out,
            "total_tokens": n_prompt + n_out,
            "prompt_tokens_details": {"cached_tokens": n_cached},
        }
        head = {"id": "chatcmpl-" + uuid.uuid4().hex, "created": int(time.time()), "model": self.model.name}
        if req["stream"]:
            return self.send_stream(head, message, finish, usage if req["include_usage"] else None)
        self.send_json(
            200,
            {**head, "object": "chat.completion", "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage},
        )

    def send_stream(self, head: dict, message: dict, finish: str, usage) -> None:
        """The finished reply as OpenAI's stream: one chunk with the whole message as its delta (tool calls
        with their `index`), one with the finish reason, one with the usage when asked, then `[DONE]`. The
        reply is generated first, so nothing arrives before it is whole."""
        delta = {"role": "assistant", "content": message.get("content")}
        if message.get("tool_calls"):
            delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(message["tool_calls"])]
        chunks = [
            {**head, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            {**head, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
        ]
        if usage is not None:
            chunks.append({**head, "object": "chat.completion.chunk", "choices": [], "usage": usage})
        data = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="GGUF file")
    p.add_argument("--model-name", help="the id served by /v1/models and in replies (default: the GGUF's general.name)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--ctx", type=int, default=4096, help="context length in tokens (prompt + reply)")
    p.add_argument("--exit-with-stdin", action="store_true", help="exit when stdin reaches end of file")
    p.add_argument("--log-requests", metavar="FILE", help="append one JSON line per completion (holds memory contents)")
    p.add_argument("--auto-tool-grammar", choices=("off", "lazy"), default="off",
                   help='tool_choice "auto": off leaves the reply free, as vLLM and SGLang do; lazy constrains a call once the model writes <tool_call>, as llama.cpp\'s server does')
    p.add_argument("--no-prompt-cache", action="store_true", help="clear the KV cache before every request instead of reusing the prompt prefix it shares with the last one")
    args = p.parse_args()
    Handler.auto_grammar = args.auto_tool_grammar
    Handler.model = Model(args.model, args.ctx, args.threads, args.model_name, prompt_cache=not args.no_prompt_cache)
    if args.log_requests:
        Handler.model.log = open(args.log_requests, "a", encoding="utf-8")
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    host, port = server.server_address[:2]
    print(f"memgym-llm-server: listening on http://{host}:{port}/v1 model={Handler.model.name}", flush=True)
    if args.exit_with_stdin:
        threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
