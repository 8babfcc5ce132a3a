"""A policy behind an OpenAI-compatible ``/v1/chat/completions`` (plain JSON or an SSE stream), for driving
an agent harness from a test:

- ``ScriptedPolicy``: deterministic; each reply is the next step of a script chosen by how many tool results
  the conversation already holds.

It records every request it gets (the messages and the tools the harness offered), so a test can check
what the policy was shown and what the tools answered.

Only the standard library: it runs in any of the protocols tier's venvs.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional


class _ChatServer:
    """An OpenAI-compatible chat endpoint on a free loopback port whose replies ``reply`` makes;
    ``base_url`` is ``http://127.0.0.1:PORT/v1``."""

    def __init__(self) -> None:
        self.requests: List[Dict[str, Any]] = []
        self._lock = threading.Lock()
        policy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                with policy._lock:
                    policy.requests.append(body)
                try:
                    message = policy.reply(body)
                except OSError as e:
                    self._send(502, {"error": {"message": f"upstream: {e}"}})
                    return
                if body.get("stream"):
                    self._stream(body, message)
                else:
                    finish = "tool_calls" if message.get("tool_calls") else "stop"
                    self._send(200, _completion(body, message, finish))

            def _send(self, status: int, payload: Dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, body: Dict[str, Any], message: Dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.end_headers()
                delta: Dict[str, Any] = {"role": "assistant", "content": message.get("content")}
                if message.get("tool_calls"):
                    delta["tool_calls"] = [dict(call, index=i) for i, call in enumerate(message["tool_calls"])]
                finish = "tool_calls" if message.get("tool_calls") else "stop"
                chunks = [
                    _chunk(body, [{"index": 0, "delta": delta, "finish_reason": None}]),
                    _chunk(body, [{"index": 0, "delta": {}, "finish_reason": finish}]),
                    dict(_chunk(body, []), usage=_USAGE),
                ]
                for chunk in chunks:
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def reply(self, body: Dict[str, Any]) -> Dict[str, Any]:
        """The assistant message answering the request ``body``."""
        raise NotImplementedError

    def tool_results(self) -> List[str]:
        """The tool results of the longest conversation received, in order (what the tools answered)."""
        if not self.requests:
            return []
        last = max(self.requests, key=lambda r: len(r.get("messages") or []))
        return [_text(m.get("content")) for m in last.get("messages") or [] if m.get("role") == "tool"]

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()


class ScriptedPolicy(_ChatServer):
    """``steps``: the tool calls to make, one per turn (``{"name": ..., "arguments": {...}}``), then ``final``
    as plain text."""

    def __init__(self, steps: List[Dict[str, Any]], final: str = "The memory is ready."):
        super().__init__()
        self.steps = steps
        self.final = final

    def reply(self, body: Dict[str, Any]) -> Dict[str, Any]:
        """The next message of the script: the n-th tool call after n tool results, then the final text."""
        done = sum(1 for m in body.get("messages") or [] if m.get("role") == "tool")
        if done < len(self.steps):
            step = self.steps[done]
            call = {"id": f"call_{done}", "type": "function",
                    "function": {"name": step["name"], "arguments": json.dumps(step["arguments"])}}  # fmt: skip
            return {"role": "assistant", "content": None, "tool_calls": [call]}
        return {"role": "assistant", "content": self.final}


_USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


def _chunk(body: Dict[str, Any], choices: List[Dict[str, Any]]) -> Dict[str, Any]:
    return {"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 0,
            "model": body.get("model") or "scripted", "choices": choices}  # fmt: skip


def _completion(body: Dict[str, Any], message: Dict[str, Any], finish: str) -> Dict[str, Any]:
    return {"id": "chatcmpl-scripted", "object": "chat.completion", "created": 0, "model": body.get("model") or "scripted",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": _USAGE}  # fmt: skip


def _text(content: Optional[Any]) -> str:
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""
