"""Throughput of the ``openai`` backend over 1 server vs a fleet of 4, side by side in one run.

Each server is a local fake OpenAI-compatible endpoint on 127.0.0.1 (no model): it answers one
request at a time after a fixed latency, as a GPU-bound server busy with one batch would. The
same requests go through ``load("openai:…", base_url=…)`` first with one server, then with
``--servers`` of them; the ratio of requests/s is the speed-up of the fleet (4.0 is linear).
Run: ``python bench/fleet.py [--requests 120] [--latency-ms 50] [--servers 4]`` (~10 s).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memprobe_core.models import clear_cache, load


class _SlowServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, latency_s: float) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.latency_s = latency_s
        self.busy = threading.Lock()  # one request at a time, like one GPU
        self.answered = 0


class _Handler(BaseHTTPRequestHandler):
    server: _SlowServer

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        payload = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        with self.server.busy:
            time.sleep(self.server.latency_s)
            self.server.answered += 1
        text = str(payload.get("prompt", ""))[-40:]
        body = json.dumps(
            {
                "choices": [{"index": 0, "text": text, "finish_reason": "stop"}],
                "usage": {"completion_tokens": 8},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@contextmanager
def _servers(count: int, latency_s: float) -> Iterator[list[_SlowServer]]:
    with ExitStack() as stack:
        servers = []
        for _ in range(count):
            server = _SlowServer(latency_s)
            threading.Thread(
                target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
            ).start()
            stack.callback(server.server_close)
            stack.callback(server.shutdown)
            servers.append(server)
        yield servers


def _throughput(servers: list[_SlowServer], requests: list[str], concurrency: int) -> float:
    """Requests per second through the backend, after one warm-up request per server."""
    urls = [f"http://127.0.0.1:{s.server_address[1]}/v1" for s in servers]
    clear_cache()
    gen = load("openai:bench", base_url=urls, max_concurrency=concurrency, max_retries=0)
    gen.generate(requests[: len(servers)], max_new_tokens=8)  # open the connections
    started = time.perf_counter()
    out = gen.generate(requests, max_new_tokens=8)
    seconds = time.perf_counter() - started
    assert len(out) == len(requests)
    return len(requests) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=120)
    parser.add_argument("--latency-ms", type=float, default=50.0, help="per request, per server")
    parser.add_argument("--servers", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=4, help="max_concurrency (per server)")
    args = parser.parse_args()
    requests = [f"request {i}: Licensed under the Apache License" for i in range(args.requests)]
    latency = args.latency_ms / 1000

    with _servers(1, latency) as one:
        single = _throughput(one, requests, args.concurrency)
    with _servers(args.servers, latency) as many:
        fleet = _throughput(many, requests, args.concurrency)
        spread = [s.answered for s in many]
    ideal = 1 / latency
    print(f"{args.requests} requests, {args.latency_ms:g} ms each, one at a time per server")
    print(f"1 server : {single:6.1f} req/s  (ideal {ideal:.1f})")
    print(
        f"{args.servers} servers: {fleet:6.1f} req/s  (ideal {ideal * args.servers:.1f}); "
        f"answered per server {spread}"
    )
    print(f"speed-up: {fleet / single:.2f}x with {args.servers} servers")


if __name__ == "__main__":
    main()
