"""A real OpenAI-compatible HTTP server on 127.0.0.1 serving one of our Generators (tests only).

Speaks ``POST /v1/completions`` and ``POST /v1/chat/completions`` with the fields the ``openai``
backend sends (model, prompt/messages, n, max_tokens, temperature, top_p, seed), and can be told
to misbehave: require a key, fail with scripted statuses first, ignore ``n``, or stall.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from memprobe_core.models.base import Generator


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, generator: Generator, model_name: str, **behaviour: Any) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.generator = generator
        self.model_name = model_name
        self.api_key: str | None = behaviour.get("api_key")
        self.script: list[int] = list(behaviour.get("fail_first", []))
        self.ignore_n: bool = behaviour.get("ignore_n", False)
        self.stall_s: float = behaviour.get("stall_s", 0.0)
        self.hits: list[dict[str, Any]] = []
        self.lock = threading.Lock()


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *args: Any) -> None:  # keep test output quiet
        pass

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if status == 429:
            self.send_header("Retry-After", "0")
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        server = self.server
        length = int(self.headers.get("Content-Length", "0"))
        payload = json.loads(self.rfile.read(length) or b"{}")
        with server.lock:
            server.hits.append({"path": self.path, "payload": payload,
                                "auth": self.headers.get("Authorization")})
            scripted = server.script.pop(0) if server.script else None
        if server.stall_s:
            import time

            time.sleep(server.stall_s)
        if scripted is not None:
            self._send(scripted, {"error": {"message": f"scripted failure {scripted}"}})
            return
        if server.api_key and self.headers.get("Authorization") != f"Bearer {server.api_key}":
            self._send(401, {"error": {"message": "invalid api key"}})
            return
        chat = self.path == "/v1/chat/completions"
        if self.path not in ("/v1/completions", "/v1/chat/completions"):
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        if payload.get("model") != server.model_name:
            self._send(404, {"error": {"message": f"model {payload.get('model')!r} does not exist"}})
            return
        request = payload["messages"] if chat else payload["prompt"]
        n = 1 if server.ignore_n else int(payload.get("n", 1))
        rows = server.generator.generate(
            [request], n=n, max_new_tokens=int(payload.get("max_tokens", 16)),
            temperature=float(payload.get("temperature", 1.0)), top_p=float(payload.get("top_p", 1.0)),
            seed=payload.get("seed"),
        )[0]
        choices = []
        for i, c in enumerate(rows):
            choice: dict[str, Any] = {"index": i, "finish_reason": c.finish_reason}
            if chat:
                choice["message"] = {"role": "assistant", "content": c.text}
            else:
                choice["text"] = c.text
            choices.append(choice)
        usage = {"completion_tokens": sum(c.num_tokens for c in rows)}
        self._send(200, {"object": "chat.completion" if chat else "text_completion",
                         "model": server.model_name, "choices": choices, "usage": usage})


@contextmanager
def serve(generator: Generator, model_name: str = "served-model", **behaviour: Any) -> Iterator[_Server]:
    """Run the server in a thread for the ``with`` block; ``server.base_url`` is its /v1 root.

    Args:
        generator: answers the requests.
        model_name: the only model name the server accepts (others get 404).
        **behaviour: ``api_key`` (required Bearer key), ``fail_first`` (statuses returned
            before serving normally), ``ignore_n`` (always one choice), ``stall_s`` (delay).
    """
    server = _Server(generator, model_name, **behaviour)
    server.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
