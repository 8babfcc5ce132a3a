#!/usr/bin/env python3
"""A small OpenAI-compatible chat-completions server around one GGUF model, on CPU, for tests and for anyone
who wants a local LLM endpoint without a GPU (memgym itself talks to any OpenAI-compatible endpoint: vLLM,
SGLang, a llama.cpp server, OpenAI).

Why not `cyllama server`: it ignores the model's chat template and keeps the KV cache between requests, so a
reply depends on the request before it. This server renders the chat template stored in the GGUF (Jinja, as
transformers does), clears the KV cache before every request, and samples with the request's own settings.

Runtime: cyllama (a prebuilt llama.cpp wheel from PyPI; `scripts/install-llm.sh` installs it and a model).

    python scripts/llm-server.py --model model.gguf [--host 127.0.0.1] [--port 0] [--threads N]

It prints one line to stdout when it listens, then serves until killed:

    memgym-llm-server: listening on http://127.0.0.1:PORT/v1 model=NAME

- POST /v1/chat/completions: `messages` (system/user/assistant; `content` a string or a list of text parts),
  `temperature` (0 = greedy; default 1), `top_p`, `max_tokens` / `max_completion_tokens` (default: the rest of
  the context), `stop` (a string or up to 4), `seed` (for temperature > 0), `n` = 1, no streaming. The reply
  carries `choices[0].message.content`, `finish_reason` (`stop` or `length`) and `usage`.
- GET /v1/models, GET /health, and GET /stats: completions `active` (received, not yet answered) and served
  (`requests`, tokens, seconds generating), for tests and measurements.
- Bad requests get HTTP 400 with an OpenAI-style `{"error": {"message", "type", "param", "code"}}`.

One request generates at a time (llama.cpp contexts are not thread-safe); others wait their turn.
`--exit-with-stdin` exits when stdin closes, so a test harness that dies never leaves the server behind.
`--log-requests FILE` appends one JSON line per completion (messages, reply, finish reason, tokens, seconds):
what a measurement needs to see the model's real replies. It holds memory contents; keep it private.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cyllama._vendor.jinja2.sandbox import ImmutableSandboxedEnvironment
from cyllama.llama import llama_cpp as L

MAX_STOP = 4
MAX_BODY = 8 << 20


class BadRequest(Exception):
    """A request the server refuses (HTTP 400)."""

    def __init__(self, message: str, param: str | None = None, code: str = "invalid_value"):
        super().__init__(message)
        self.param = param
        self.code = code


class Model:
    """One GGUF model and one llama.cpp context, used by one request at a time."""

    def __init__(self, path: str, n_ctx: int, threads: int, name: str | None):
        L.disable_logging()
        L.ggml_backend_load_all()
        params = L.LlamaModelParams()
        params.n_gpu_layers = 0
        self.model = L.LlamaModel(path, params)
        self.vocab = self.model.get_vocab()
        ctx_params = L.LlamaContextParams()
        ctx_params.n_ctx = n_ctx
        ctx_params.n_batch = min(n_ctx, 2048)
        ctx_params.n_threads = threads
        ctx_params.n_threads_batch = threads
        ctx_params.no_perf = True
        self.ctx = L.LlamaContext(self.model, ctx_params)
        self.n_ctx = n_ctx
        self.n_batch = ctx_params.n_batch
        self.name = name or self.model.meta_val_str("general.name") or os.path.basename(path)
        template = self.model.get_default_chat_template()
        if not template:
            raise SystemExit(f"{path} has no chat template in its GGUF metadata")
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.filters["tojson"] = lambda v, **kw: json.dumps(v, ensure_ascii=False, **kw)
        env.globals["raise_exception"] = _raise
        self.template = env.from_string(template)
        self.lock = threading.Lock()  # the context: one generation at a time
        self.stats_lock = threading.Lock()
        self.stats = {"active": 0, "requests": 0, "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0}
        self.log = None

    def piece(self, token: int, special: bool) -> str:
        try:
            return self.vocab.token_to_piece(token, special=special)
        except UnicodeDecodeError:
            return ""

    def render(self, messages: list[dict]) -> str:
        bos = self.vocab.token_bos()
        eos = self.vocab.token_eos()
        return self.template.render(
            messages=messages,
            add_generation_prompt=True,
            bos_token=self.piece(bos, True) if bos >= 0 else "",
            eos_token=self.piece(eos, True) if eos >= 0 else "",
        )

    def complete(self, prompt: str, max_tokens: int | None, temperature: float, top_p: float, seed: int | None, stop: list[str]):
        """(text, finish_reason, prompt_tokens, completion_tokens, seconds generating)."""
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
            return self.generate(tokens, limit, temperature, top_p, seed, stop)
        finally:
            self.count(active=-1)

    def count(self, **deltas) -> None:
        with self.stats_lock:
            for key, delta in deltas.items():
                self.stats[key] += delta

    def generate(self, tokens: list[int], limit: int, temperature: float, top_p: float, seed: int | None, stop: list[str]):
        with self.lock:
            started = time.monotonic()
            self.ctx.kv_cache_clear()
            sampler = L.LlamaSampler(L.LlamaSamplerChainParams())
            if temperature == 0.0:
                sampler.add_greedy()
            else:
                sampler.add_top_p(top_p, 1)
                sampler.add_temp(temperature)
                sampler.add_dist(seed if seed is not None else int.from_bytes(os.urandom(4), "little"))
            for i in range(0, len(tokens), self.n_batch):
                self.ctx.decode(L.llama_batch_get_one(tokens[i : i + self.n_batch], i))
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
                self.ctx.decode(L.llama_batch_get_one([token], len(tokens) + len(out) - 1))
            elapsed = time.monotonic() - started
        self.count(requests=1, prompt_tokens=len(tokens), completion_tokens=len(out), seconds=elapsed)
        return text, finish, len(tokens), len(out), elapsed

    def record(self, entry: dict) -> None:
        if self.log is not None:
            with self.stats_lock:
                self.log.write(json.dumps(entry, ensure_ascii=False) + "\n")
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


def _messages(body: dict) -> list[dict]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list", "messages")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant", "developer"):
            raise BadRequest(f"messages[{i}].role must be system, user, assistant or developer", f"messages[{i}].role")
        content = m.get("content")
        if isinstance(content, list):
            parts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
            if len(parts) != len(content) or not all(isinstance(t, str) for t in parts):
                raise BadRequest(f"messages[{i}].content parts must all be text", f"messages[{i}].content")
            content = "".join(parts)
        if not isinstance(content, str):
            raise BadRequest(f"messages[{i}].content must be a string or a list of text parts", f"messages[{i}].content")
        role = "system" if m["role"] == "developer" else m["role"]
        out.append({"role": role, "content": content})
    return out


def _request(body: dict):
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    if body.get("stream"):
        raise BadRequest("streaming is not supported by this server", "stream", "unsupported_value")
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
    return {
        "messages": _messages(body),
        "max_tokens": _number(body, key, None, 1, 1 << 20, integer=True),
        "temperature": _number(body, "temperature", 1.0, 0.0, 2.0),
        "top_p": _number(body, "top_p", 1.0, 0.0, 1.0),
        "seed": _number(body, "seed", None, 0, (1 << 32) - 1, integer=True),
        "stop": stop,
    }


class Handler(BaseHTTPRequestHandler):
    server_version = "memgym-llm-server/1"
    protocol_version = "HTTP/1.1"
    model: Model

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
            req = _request(body)
            prompt = self.model.render(req["messages"])
            text, finish, n_prompt, n_out, seconds = self.model.complete(
                prompt, req["max_tokens"], req["temperature"], req["top_p"], req["seed"], req["stop"]
            )
            self.model.record(
                {"messages": req["messages"], "max_tokens": req["max_tokens"], "temperature": req["temperature"],
                 "reply": text, "finish_reason": finish, "prompt_tokens": n_prompt, "completion_tokens": n_out,
                 "seconds": round(seconds, 3)}
            )
        except BadRequest as e:
            return self.error(400, str(e), e.param, e.code)
        except Exception as e:  # a runtime failure: the client may retry
            return self.error(500, f"generation failed: {type(e).__name__}: {e}", kind="server_error")
        self.send_json(
            200,
            {
                "id": "chatcmpl-" + uuid.uuid4().hex,
                "object": "chat.completion",
                "created": int(time.time()),
                "model": self.model.name,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
                "usage": {"prompt_tokens": n_prompt, "completion_tokens": n_out, "total_tokens": n_prompt + n_out},
            },
        )


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
    args = p.parse_args()
    Handler.model = Model(args.model, args.ctx, args.threads, args.model_name)
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
