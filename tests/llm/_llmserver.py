"""A real HTTP server on 127.0.0.1 that speaks llama.cpp and OpenAI-compatible protocols.

It records every request (method, path, JSON body) and answers with a canned completion
that mentions a file and a symbol. Knobs make it misbehave: sleep, malformed JSON, a huge
reply, an HTTP error, slots that refuse save/restore.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANSWER = ("## Connect retries forever without a deadline\n\n"
          "In `src/app.py`, `app.Client.connect` loops without a timeout. See also "
          "docs/nothing-here.md and /etc/passwd.\n")


@dataclass
class Behaviour:
    """How the fake server answers."""

    protocol: str = "llama"          # llama: /props + /completion; openai: /v1/models + chat
    slots: bool = False              # /props reports total_slots; /slots actions work
    slot_actions_ok: bool = True     # False: /slots/... answers 501
    sleep: float = 0.0               # seconds before answering a completion
    completion_body: bytes | None = None  # raw reply of a completion (malformed, huge)
    completion_status: int = 200
    answer: str = ANSWER
    model_path: str | None = None    # reported by /props, as llama-server does
    n_ctx: int = 4096                # the context size /props reports
    reply_model: str | None = "fake-llama"  # the "model" of a /completion reply (None: absent)
    requests: list[dict[str, Any]] = field(default_factory=list)

    def paths(self) -> list[str]:
        return [f"{r['method']} {r['path']}" for r in self.requests]


def _handler(b: Behaviour) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, body: Any, raw: bytes | None = None) -> None:
            data = raw if raw is not None else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            try:
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def _record(self, body: Any) -> None:
            b.requests.append({"method": self.command, "path": self.path, "body": body})

        def do_GET(self) -> None:
            self._record(None)
            if self.path == "/props" and b.protocol == "llama":
                props: dict[str, Any] = {"default_generation_settings": {"n_ctx": b.n_ctx}}
                if b.slots:
                    props["total_slots"] = 1
                if b.model_path is not None:
                    props["model_path"] = b.model_path
                self._send(200, props)
            elif self.path == "/v1/models" and b.protocol == "openai":
                self._send(200, {"object": "list", "data": [{"id": "fake-model"}]})
            else:
                self._send(404, {"error": "not found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"null")
            self._record(body)
            if self.path.startswith("/slots/"):
                if b.slots and b.slot_actions_ok:
                    self._send(200, {"id_slot": 0, "filename": body.get("filename")})
                else:
                    self._send(501, {"error": "This server does not support slots action"})
                return
            if b.sleep:
                time.sleep(b.sleep)
            if self.path == "/completion" and b.protocol == "llama":
                reply = {"content": b.answer, "tokens_cached": 7, "tokens_evaluated": 42,
                         "tokens_predicted": 21}
                if b.reply_model is not None:
                    reply["model"] = b.reply_model
            elif self.path == "/v1/chat/completions" and b.protocol == "openai":
                reply = {"model": "fake-model",
                         "choices": [{"message": {"role": "assistant", "content": b.answer}}],
                         "usage": {"prompt_tokens": 40, "completion_tokens": 20}}
            else:
                self._send(404, {"error": "not found"})
                return
            self._send(b.completion_status, reply, b.completion_body)

    return Handler


@contextmanager
def serve(behaviour: Behaviour) -> Iterator[str]:
    """Run the server in a thread; yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(behaviour))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def dead_port() -> int:
    """A port on 127.0.0.1 where nothing listens (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
