"""A real OpenAI-compatible HTTP server on 127.0.0.1 serving one of our Generators (tests only).

Speaks ``POST /v1/completions`` and ``POST /v1/chat/completions`` with the fields the ``openai``
backend sends (model, prompt/messages, n, max_tokens, temperature, top_p, seed, and vLLM's extra
``top_k``, unless told to reject it as OpenAI's own API does), and can be told
to misbehave: require a key, fail with scripted statuses first, ignore ``n``, stall, echo the
key it was sent, answer a raw or a huge body, or die after some answers (``kill``).
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
        self.echo_auth: int | None = behaviour.get("echo_auth")
        self.raw_body: bytes | None = behaviour.get("raw_body")
        self.huge_body: int = behaviour.get("huge_body", 0)
        self.huge_declared: bool = behaviour.get("huge_declared", False)
        self.die_after: int | None = behaviour.get("die_after")
        self.trickle_s: float = behaviour.get("trickle_s", 0.0)
        self.echo: str = behaviour.get("echo", "vllm")
        self.logprob_at: dict[int, float] = behaviour.get("logprob_at", {})
        self.reject_top_k: bool = behaviour.get("reject_top_k", False)
        self.hits: list[dict[str, Any]] = []
        self.answered = 0  # 200 answers written in full (counted as the body goes out)
        self.bytes_sent = 0  # body bytes of huge_body answers written before the client left
        self.dead = False
        self.lock = threading.Lock()

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that hang up (on purpose, in these tests) are not errors worth a traceback

    def kill(self) -> None:
        """Die like a crashed process: drop requests in flight, refuse new connections."""
        self.dead = True
        # shutdown() waits for serve_forever, so it must run off the handler threads.
        threading.Thread(target=self._stop, daemon=True).start()

    def _stop(self) -> None:
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *args: Any) -> None:  # keep test output quiet
        pass

    def _send(self, status: int, body: dict[str, Any] | bytes) -> None:
        if self.server.dead:  # a dead server answers nothing: the client sees a dropped connection
            self.close_connection = True
            return
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if status == 429:
            self.send_header("Retry-After", "0")
        self.end_headers()
        if status != 200:
            self.wfile.write(data)
            return
        # Counted before the body goes out, so a client that has read its answer always sees it
        # counted (counting after the write raced the client's next assertion on a busy CI
        # machine); uncounted again when the write fails because the client hung up.
        with self.server.lock:
            self.server.answered += 1
        try:
            self.wfile.write(data)
        except OSError:
            with self.server.lock:
                self.server.answered -= 1
            raise
        with self.server.lock:
            die_after = self.server.die_after
            if die_after is not None and self.server.answered >= die_after and not self.server.dead:
                self.server.kill()

    def _send_huge(self) -> None:
        """Stream ``huge_body`` bytes of a never-ending JSON string, 64 KiB at a time."""
        server = self.server
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if server.huge_declared:
            self.send_header("Content-Length", str(server.huge_body))
        self.end_headers()
        chunk = b"x" * 65536
        sent = 0
        try:
            while sent < server.huge_body:
                piece = chunk[: server.huge_body - sent]
                self.wfile.write(piece)
                sent += len(piece)
        except OSError:  # the client hung up, as it should past its limit
            pass
        finally:
            with server.lock:
                server.bytes_sent += sent

    def _send_trickle(self) -> None:
        """A 200 body that never ends: one byte every ``trickle_s`` until the client hangs up."""
        import time

        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        try:
            self.wfile.write(b'{"choices": [')
            while not self.server.dead:
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(self.server.trickle_s)
        except OSError:
            pass

    def do_POST(self) -> None:
        server = self.server
        length = int(self.headers.get("Content-Length", "0"))
        payload = json.loads(self.rfile.read(length) or b"{}")
        with server.lock:
            server.hits.append(
                {"path": self.path, "payload": payload, "auth": self.headers.get("Authorization")}
            )
            scripted = server.script.pop(0) if server.script else None
        if server.stall_s:
            import time

            time.sleep(server.stall_s)
        if scripted is not None:
            self._send(scripted, {"error": {"message": f"scripted failure {scripted}"}})
            return
        if server.huge_body:
            self._send_huge()
            return
        if server.trickle_s:
            self._send_trickle()
            return
        if server.raw_body is not None:
            self._send(200, server.raw_body)
            return
        auth = self.headers.get("Authorization") or ""
        if server.echo_auth and server.echo_auth != 200:
            # A careless server quoting the request back: header and bare key, as text and JSON.
            self._send(
                server.echo_auth,
                {
                    "error": {
                        "message": f"bad request: you sent Authorization: {auth}; key {auth.removeprefix('Bearer ')}",
                        "headers": {"authorization": auth},
                    }
                },
            )
            return
        if server.api_key and self.headers.get("Authorization") != f"Bearer {server.api_key}":
            self._send(401, {"error": {"message": "invalid api key"}})
            return
        chat = self.path == "/v1/chat/completions"
        if self.path not in ("/v1/completions", "/v1/chat/completions"):
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        if payload.get("model") != server.model_name:
            self._send(
                404, {"error": {"message": f"model {payload.get('model')!r} does not exist"}}
            )
            return
        if not chat and payload.get("echo"):
            self._answer_echo(payload)
            return
        if server.reject_top_k and "top_k" in payload:  # OpenAI's own words for a foreign field
            self._send(400, {"error": {"message": "Unrecognized request argument supplied: top_k"}})
            return
        request = payload["messages"] if chat else payload["prompt"]
        n = 1 if server.ignore_n else int(payload.get("n", 1))
        rows = server.generator.generate(
            [request],
            n=n,
            max_new_tokens=int(payload.get("max_tokens", 16)),
            temperature=float(payload.get("temperature", 1.0)),
            top_p=float(payload.get("top_p", 1.0)),
            seed=payload.get("seed"),
            top_k=int(payload.get("top_k", 0)),
        )[0]
        choices = []
        for i, c in enumerate(rows):
            choice: dict[str, Any] = {"index": i, "finish_reason": c.finish_reason}
            if server.echo_auth == 200:
                c = type(c)(
                    f"{c.text} {auth.removeprefix('Bearer ')}", c.num_tokens, c.finish_reason
                )
            if chat:
                choice["message"] = {"role": "assistant", "content": c.text}
            else:
                choice["text"] = c.text
            choices.append(choice)
        usage = {"completion_tokens": sum(c.num_tokens for c in rows)}
        self._send(
            200,
            {
                "object": "chat.completion" if chat else "text_completion",
                "model": server.model_name,
                "choices": choices,
                "usage": usage,
            },
        )

    def _answer_echo(self, payload: dict[str, Any]) -> None:
        """``echo`` + ``logprobs``: the prompt's token log-probs, as the server's ``echo`` style."""
        style = self.server.echo
        if style == "reject" or not hasattr(self.server.generator, "torch_model"):
            self._send(400, {"error": {"message": "echo is not supported with this model"}})
            return
        tokens, values, offsets, n_prompt = echo_logprobs(self.server.generator, payload["prompt"])
        for position, value in self.server.logprob_at.items():  # e.g. -inf, sent as -Infinity
            values[position] = value
        if style == "ignore":  # answers the generated token only (llama.cpp's behaviour)
            tokens, values, offsets = tokens[n_prompt:], values[n_prompt:], [0]
        logprobs: dict[str, Any] = {"tokens": tokens, "token_logprobs": values}
        usage: dict[str, Any] = {"completion_tokens": 1}
        if style == "vllm":
            logprobs["text_offset"] = offsets
            usage["prompt_tokens"] = n_prompt
        text = payload["prompt"] + tokens[-1]
        choice = {"index": 0, "text": text, "logprobs": logprobs, "finish_reason": "length"}
        self._send(200, {"object": "text_completion", "choices": [choice], "usage": usage})


def echo_logprobs(generator: Any, text: str) -> tuple[list[str], list[Any], list[int], int]:
    """What a vLLM server answers for ``echo`` on ``text``, computed with plain transformers.

    The prompt tokenized as vLLM does (``tokenizer(text)``: a BOS in front only when the
    tokenizer adds one, its text counted in the offsets); the first entry ``null``, each other
    prompt token's log-prob, then one greedy token. Returns (token texts, log-probs, text
    offsets, prompt entries).
    """
    import torch

    tok, model = generator.tokenizer, generator.torch_model
    ids = list(tok.encode(text))
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), dim=-1)
    values: list[Any] = [None] + [float(logp[t - 1, ids[t]]) for t in range(1, len(ids))]
    nxt = int(logp[-1].argmax())
    values.append(float(logp[-1, nxt]))
    tokens = [tok.decode([i]) for i in [*ids, nxt]]
    offsets, at = [], 0
    for token in tokens:
        offsets.append(at)
        at += len(token)
    return tokens, values, offsets, len(ids)


@contextmanager
def serve(
    generator: Generator, model_name: str = "served-model", **behaviour: Any
) -> Iterator[_Server]:
    """Run the server in a thread for the ``with`` block; ``server.base_url`` is its /v1 root.

    Args:
        generator: answers the requests.
        model_name: the only model name the server accepts (others get 404).
        **behaviour: ``api_key`` (required Bearer key), ``fail_first`` (statuses returned
            before serving normally), ``ignore_n`` (always one choice), ``stall_s`` (delay),
            ``echo_auth`` (a status: answer it with the Authorization header and key quoted in
            the error body; 200: append the key to every completion), ``raw_body`` (bytes sent
            as every 200 body), ``huge_body`` (a 200 body of that many bytes, streamed, with a
            Content-Length when ``huge_declared``), ``trickle_s`` (a body that never ends, one
            byte per that many seconds), ``die_after`` (``kill`` after that many
            200 answers), ``echo`` (how ``/completions`` with ``echo`` is answered when the
            generator is white-box: ``"vllm"`` with BOS, offsets and usage, ``"bare"``
            without offsets or usage, ``"ignore"`` the generated token only, ``"reject"`` 400),
            ``logprob_at`` (``{position: value}`` put into every echoed prompt's log-probs,
            e.g. ``-inf``, which ``json.dumps`` writes as ``-Infinity``), ``reject_top_k`` (a 400
            for a request carrying ``top_k``, as OpenAI's own API answers a field outside it).
    """
    server = _Server(generator, model_name, **behaviour)
    server.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"  # type: ignore[attr-defined]
    # A short poll makes shutdown() quick: every test starts and stops servers.
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield server
    finally:
        server.dead = True
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
