"""Hostile HTTP servers against the ``openai`` backend: stacked-compression bombs, trickled headers.

Each server is a raw socket on 127.0.0.1 that writes a fixed reply, optionally paced byte by
byte, so the faults are exactly the bytes a hostile server would send; every server stops when
its ``with`` block ends (or when the client hangs up).
"""

from __future__ import annotations

import gzip
import socket
import struct
import threading
import time
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from memprobe_core.models import ModelError
from memprobe_core.models.openai import OpenAIGenerator
from tests.faults.helpers import read_request

OK_BODY = b'{"choices": [{"text": "hello", "index": 0, "finish_reason": "stop"}]}'
MIB = 2**20
BOMB_SIZE = 512 * MIB  # what every bomb expands to
MEMORY_BOUND = 64 * MIB  # the client's traced peak while refusing one (its cap is 8 MiB)


# --- a server that writes raw bytes ---------------------------------------------------------------
@contextmanager
def raw_server(reply: bytes, *, pace: Callable[[int], float] = lambda i: 0.0) -> Iterator[str]:
    """Answer every request with ``reply``, sleeping ``pace(i)`` before writing byte ``i``.

    Yields the /v1 base URL. Bytes paced 0 go out together, at once.
    """
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    stop = threading.Event()
    handlers: list[threading.Thread] = []

    def handle(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            try:
                if not read_request(conn):
                    return
                i = 0
                while i < len(reply) and not stop.is_set():
                    j = i
                    while j < len(reply) and not pace(j):  # the unpaced run, at once
                        j += 1
                    conn.sendall(reply[i:j])
                    if j < len(reply):
                        stop.wait(pace(j))
                        conn.sendall(reply[j : j + 1])
                    i = j + 1
            except OSError:  # the client hung up, as it should
                pass

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            thread = threading.Thread(target=handle, args=(conn,), daemon=True)
            thread.start()
            handlers.append(thread)

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        stop.set()
        acceptor.join(5)
        listener.close()
        for thread in handlers:
            thread.join(5)


def http_reply(body: bytes, *, encoding: str | None = None, status: str = "200 OK") -> bytes:
    head = [f"HTTP/1.1 {status}", "Content-Type: application/json", f"Content-Length: {len(body)}"]
    if encoding is not None:
        head.append(f"Content-Encoding: {encoding}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def client(base_url: str, **kwargs: object) -> OpenAIGenerator:
    kwargs = {"backoff_s": 0.05, "prompt_logprobs": False, **kwargs}
    return OpenAIGenerator("m", base_url=base_url, api_key_env="MEMPROBE_TEST_NO_KEY", **kwargs)  # type: ignore[arg-type]


# --- bombs ----------------------------------------------------------------------------------------
def _compressor(coding: str) -> zlib._Compress:
    wbits = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}[coding]
    return zlib.compressobj(9, zlib.DEFLATED, wbits)


def encode(data: bytes, codings: list[str]) -> bytes:
    """``data`` under ``Content-Encoding: <codings joined>`` (the first listed applied first)."""
    for coding in codings:
        c = _compressor(coding)
        data = c.compress(data) + c.flush()
    return data


_RAW: list[tuple[bytes, int, int]] = []  # one raw deflate stream of the bomb, its crc32, adler32


def _raw_bomb() -> tuple[bytes, int, int]:
    """``BOMB_SIZE`` spaces (valid JSON whitespace) as one raw deflate stream, built in steps."""
    if not _RAW:
        c, block = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS), b" " * MIB
        parts, crc, adler = [], 0, 1
        for _ in range(BOMB_SIZE // MIB):
            parts.append(c.compress(block))
            crc, adler = zlib.crc32(block, crc), zlib.adler32(block, adler)
        _RAW.append((b"".join(parts) + c.flush(), crc, adler))
    return _RAW[0]


def bomb(codings: list[str]) -> bytes:
    """``BOMB_SIZE`` bytes of spaces under ``codings`` (the same deflate stream, wrapped)."""
    raw, crc, adler = _raw_bomb()
    if codings[0] == "gzip":
        inner = (
            b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
            + raw
            + struct.pack("<II", crc, BOMB_SIZE % 2**32)
        )
    else:
        inner = b"\x78\x9c" + raw + struct.pack(">I", adler)
    return encode(inner, codings[1:])


def _peak_of(call: Callable[[], object]) -> tuple[BaseException | None, int]:
    tracemalloc.start()
    try:
        try:
            call()
        except Exception as exc:  # returned for the caller to check
            return exc, tracemalloc.get_traced_memory()[1]
        return None, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    "codings",
    [["gzip", "gzip"], ["deflate", "gzip"], ["gzip", "deflate"], ["gzip"]],
    ids=lambda c: "+".join(c),
)
def test_compression_bomb_is_refused_with_bounded_memory(codings):
    payload = bomb(codings)
    assert len(payload) < 600 * 1024  # a small reply...
    with raw_server(http_reply(payload, encoding=", ".join(codings))) as url:
        gen = client(url)  # default cap: 8 MiB
        error, peak = _peak_of(lambda: gen.generate(["x"]))
        gen.close()
    assert isinstance(error, ModelError), error
    assert "larger than max_response_bytes=8,388,608" in str(error)
    assert url in str(error)
    assert peak < MEMORY_BOUND, f"refusing a {', '.join(codings)} bomb took {peak:,} bytes"


@pytest.mark.parametrize(
    "encoding, named",
    [("gzip, gzip, gzip", "3 stacked"), ("br", "'br'"), ("gzip, compress", "'compress'")],
)
def test_too_many_or_unknown_encodings_are_refused_before_decoding(encoding, named):
    codings = [c.strip() for c in encoding.split(",")]
    payload = bomb(codings) if set(codings) == {"gzip"} else b"\x0b\x02\x80junk"
    with raw_server(http_reply(payload, encoding=encoding)) as url:
        gen = client(url)
        error, peak = _peak_of(lambda: gen.generate(["x"]))
        gen.close()
    assert isinstance(error, ModelError), error
    message = str(error)
    assert url in message and f"Content-Encoding {encoding!r}" in message and named in message
    assert peak < MEMORY_BOUND, f"refusing {encoding} took {peak:,} bytes"


def test_bomb_in_an_error_body_is_cut_not_decoded_whole():
    # Error bodies are read for their first words only: a bomb there is cut, and the status wins.
    reply = http_reply(bomb(["gzip", "gzip"]), encoding="gzip, gzip", status="400 Bad Request")
    with raw_server(reply) as url:
        gen = client(url)
        error, peak = _peak_of(lambda: gen.generate(["x"]))
        gen.close()
    assert isinstance(error, ModelError) and "rejected the request (HTTP 400)" in str(error)
    assert peak < MEMORY_BOUND, f"cutting an error-body bomb took {peak:,} bytes"


@pytest.mark.parametrize(
    "encoding", ["gzip", "deflate", "gzip, gzip", "deflate, gzip", "identity", "GZip , identity"]
)
def test_honest_compressed_replies_still_work(encoding):
    codings = [c.strip().lower() for c in encoding.split(",") if c.strip().lower() != "identity"]
    with raw_server(http_reply(encode(OK_BODY, codings), encoding=encoding)) as url:
        gen = client(url)
        assert gen.generate(["x"])[0][0].text == "hello"
        gen.close()


def test_raw_deflate_without_zlib_header_still_works():
    # Some servers send "deflate" as a bare deflate stream; httpx accepts it, so do we.
    c = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    with raw_server(http_reply(c.compress(OK_BODY) + c.flush(), encoding="deflate")) as url:
        gen = client(url)
        assert gen.generate(["x"])[0][0].text == "hello"
        gen.close()


def test_corrupt_gzip_is_a_model_error_naming_the_server():
    with raw_server(http_reply(gzip.compress(OK_BODY)[:12] + b"not gzip", encoding="gzip")) as url:
        gen = client(url)
        with pytest.raises(ModelError, match="not valid gzip") as info:
            gen.generate(["x"])
        gen.close()
    assert url in str(info.value)


# --- trickles -------------------------------------------------------------------------------------
HEAD = http_reply(OK_BODY)
HEAD_LEN = HEAD.index(b"\r\n\r\n") + 4


@pytest.mark.parametrize(
    "pace",
    [
        pytest.param(lambda i: 1.0, id="headers-1-byte-per-s"),
        pytest.param(lambda i: 0.3, id="headers-1-byte-per-0.3s"),
        pytest.param(lambda i: 0.0 if i < 9 else 0.5, id="status-line-fast-then-stall"),
        pytest.param(lambda i: 0.0 if i < HEAD_LEN else 1.0, id="body-1-byte-per-s"),
    ],
)
@pytest.mark.parametrize("retries", [0, 1])
def test_trickling_server_times_out_within_the_total_deadline(pace, retries):
    timeout_s, backoff_s = 1.0, 0.05
    with raw_server(HEAD, pace=pace) as url:
        gen = client(url, timeout_s=timeout_s, max_retries=retries, backoff_s=backoff_s)
        start = time.monotonic()
        with pytest.raises(ModelError, match="timed out") as info:
            gen.generate(["x"])
        elapsed = time.monotonic() - start
        gen.close()
    assert url in str(info.value)
    # A bound against a hang, not a benchmark: generous for a busy machine.
    bound = timeout_s * (retries + 1) + backoff_s * 1.1 * retries + 3.0
    assert elapsed < bound, f"took {elapsed:.1f} s (bound {bound:.1f} s)"


def test_a_slow_but_honest_server_within_the_deadline_still_answers():
    with raw_server(HEAD, pace=lambda i: 0.002) as url:  # ~0.3 s for the whole reply
        gen = client(url, timeout_s=5, max_retries=0)
        assert gen.generate(["x"])[0][0].text == "hello"
        gen.close()
