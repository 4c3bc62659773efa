"""One POST to one server of the ``openai`` backend: bounded read, retries, one clean error.

The body is read as a stream and never past ``max_response_bytes`` (a 200 MB completion must
not take gigabytes of RAM). The cap bounds the *decoded* size, and decoding is bounded too: the
gzip/deflate ``Content-Encoding`` layers are undone here, a step of at most 64 KiB at a time, so a
1 KB reply that inflates to gigabytes (``gzip, gzip``) is refused after about the cap; more than
two stacked codings, or one other than gzip/deflate/identity, is refused before decoding.

Each attempt has one total deadline of ``timeout_s`` covering connect, sending, the status line
and headers, and the body: every socket read and write is given only the time left (a server
trickling its headers one byte a second must not hang an audit). 429, 5xx, timeouts and dropped
connections are retried with exponential backoff, so one call lasts at most
``(max_retries + 1) * timeout_s`` plus the backoff (at most ``MAX_BACKOFF_S`` * 1.1 per retry),
plus name resolution, which no socket timeout bounds. When the retries are used up, or the server
refuses the connection, ``ServerDown`` says that another server of a fleet may still answer.
Every message is passed through ``redact`` before it is raised or logged.
"""

from __future__ import annotations

import logging
import random
import ssl
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import httpcore
import httpx

from memprobe_core.models.base import ModelError
from memprobe_core.models.openai.parse import decode_json

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
MAX_BACKOFF_S = 8.0
# An error body is only read for its first words: past this it is cut, not refused.
ERROR_BODY_BYTES = 64 * 1024
# What of an error body goes into the message.
ERROR_DETAIL_CHARS = 300
# Content codings undone here, as zlib ``wbits``; None: nothing to undo.
CODINGS: dict[str, int | None] = {
    "identity": None,
    "gzip": 16 + zlib.MAX_WBITS,
    "x-gzip": 16 + zlib.MAX_WBITS,
    "deflate": zlib.MAX_WBITS,
}
# More stacked gzip/deflate layers than this is refused: no honest server needs them.
MAX_CODINGS = 2
# What we ask for: only codings we can undo in bounded steps (httpx would also ask for br/zstd
# when their packages are installed).
ACCEPT_ENCODING = "gzip, deflate"
# The most one decompression step may produce.
INFLATE_STEP = 64 * 1024

# The end of the attempt running in this thread (time.monotonic()); None outside an attempt.
_DEADLINE: ContextVar[float | None] = ContextVar("memprobe_http_deadline", default=None)


class ServerDown(ModelError):
    """This server did not answer (refused, or failed past its retries); another one may."""


class ResponseTooLarge(ModelError):
    """The response body passed ``max_response_bytes``."""


@dataclass(frozen=True)
class HttpSettings:
    """How one request is sent (see ``OpenAIGenerator`` for each field)."""

    timeout_s: float
    max_retries: int
    backoff_s: float
    max_response_bytes: int
    api_key_env: str


class Transport:
    """Sends POSTs through one shared HTTP client.

    Args:
        client: the connection pool (shared by every thread and server).
        settings: timeouts, retries and limits.
        redact: removes secrets from a message before it is raised or logged.
    """

    def __init__(
        self, client: httpx.Client, settings: HttpSettings, redact: Callable[[str], str]
    ) -> None:
        self.client = client
        self.settings = settings
        self.redact = redact
        if not _arm_deadlines(client):
            log.warning(
                "this httpx version hides its connection pool: timeout_s bounds each read of the "
                "headers, not their total; a server trickling its headers can stall a request"
            )

    def post(
        self, url: str, payload: dict[str, Any], headers: dict[str, str], where: str
    ) -> dict[str, Any]:
        """POST ``payload`` as JSON to ``url`` and return the decoded JSON object.

        Raises:
            ServerDown: refused connection, or 429/5xx/timeouts past ``max_retries``.
            ModelError: any other HTTP error, a body that is too large or not a JSON object.
        """
        retries = self.settings.max_retries
        for attempt in range(retries + 1):
            last = attempt == retries
            try:
                status, response_headers, body = self._exchange(url, payload, headers, where)
            except httpx.ConnectError as exc:
                raise ServerDown(
                    self.redact(
                        f"cannot connect to {where} ({exc}); is the server running and the URL right?"
                    )
                ) from exc
            except httpx.TimeoutException as exc:
                if last:
                    raise ServerDown(
                        self.redact(
                            f"{where} timed out after {self.settings.timeout_s:g} s ({retries + 1} tries); "
                            "raise timeout_s or check the server"
                        )
                    ) from exc
                self._sleep(attempt, None, f"timeout ({type(exc).__name__})", where)
                continue
            except httpx.TransportError as exc:  # connection reset mid-response and the like
                if last:
                    raise ServerDown(self.redact(f"{where}: transport error {exc}")) from exc
                self._sleep(attempt, None, f"transport error ({type(exc).__name__})", where)
                continue
            if status == 200:
                return decode_json(body, where, redact=self.redact)
            if status in RETRY_STATUS and not last:
                self._sleep(attempt, response_headers.get("retry-after"), f"HTTP {status}", where)
                continue
            error = ServerDown if status in RETRY_STATUS else ModelError
            raise error(self.redact(self._http_error(status, body, where)))
        raise AssertionError("unreachable")  # the loop returns or raises

    def _exchange(
        self, url: str, payload: dict[str, Any], headers: dict[str, str], where: str
    ) -> tuple[int, httpx.Headers, bytes]:
        # One deadline for the whole attempt: the network backend of the pool (_DeadlineStream)
        # gives each socket operation only the time left, headers included.
        deadline = time.monotonic() + self.settings.timeout_s
        token = _DEADLINE.set(deadline)
        try:
            headers = {"Accept-Encoding": ACCEPT_ENCODING, **headers}
            with self.client.stream("POST", url, json=payload, headers=headers) as response:
                ok = response.status_code == 200
                limit = self.settings.max_response_bytes if ok else ERROR_BODY_BYTES
                body = self._read_capped(response, limit, refuse=ok, where=where, deadline=deadline)
                return response.status_code, response.headers, body
        finally:
            _DEADLINE.reset(token)

    def _read_capped(
        self, response: httpx.Response, limit: int, *, refuse: bool, where: str, deadline: float
    ) -> bytes:
        """At most ``limit`` decoded bytes of the body: past it, raise (``refuse``) or cut it there.

        A body this cannot decode is a ``ModelError`` (``refuse``), or a placeholder (error bodies,
        so that the status still decides what happens).
        """
        declared = response.headers.get("content-length", "")
        if refuse and declared.isdigit() and int(declared) > limit:
            raise self._too_large(where, f"it announced {int(declared):,} bytes")
        codings = [
            c.strip().lower()
            for c in response.headers.get_list("content-encoding", split_commas=True)
            if c.strip()
        ]
        problem = _codings_problem(codings)
        if problem:
            if refuse:
                raise ModelError(
                    self.redact(
                        f"{where} sent its response with Content-Encoding {', '.join(codings)!r}: "
                        f"{problem}; memprobe undoes at most {MAX_CODINGS} layers of gzip or deflate"
                    )
                )
            return f"(body not read: Content-Encoding {', '.join(codings)!r}, {problem})".encode()
        decoder = _BoundedDecoder(codings, limit)
        try:
            # iter_raw, not iter_bytes: httpx inflates each chunk whole, every layer, before the
            # cap can be checked (a 1 KB "gzip, gzip" chunk became 500 MB in one call).
            for raw in response.iter_raw():
                decoder.feed(raw)
                if time.monotonic() > deadline:  # the backend's deadline, for a client without it
                    raise httpx.ReadTimeout(
                        f"the response took longer than {self.settings.timeout_s:g} s"
                    )
        except _PastLimit as exc:
            if refuse:
                raise self._too_large(where, str(exc)) from None
        except zlib.error as exc:
            if refuse:
                raise ModelError(
                    self.redact(
                        f"{where} sent a body that is not valid {decoder.coding} "
                        f"(Content-Encoding {', '.join(codings)!r}: {exc})"
                    )
                ) from None
        return decoder.body()[:limit]

    def _too_large(self, where: str, seen: str) -> ResponseTooLarge:
        limit = self.settings.max_response_bytes
        return ResponseTooLarge(
            self.redact(
                f"{where} sent a response larger than max_response_bytes={limit:,} ({limit / 2**20:g} MiB; "
                f"{seen}); lower max_new_tokens or n, or raise max_response_bytes"
            )
        )

    def _sleep(self, attempt: int, retry_after: str | None, why: str, where: str) -> None:
        delay = min(MAX_BACKOFF_S, self.settings.backoff_s * (2**attempt)) * (
            1 + 0.1 * random.random()
        )
        if retry_after:
            try:
                delay = min(MAX_BACKOFF_S, max(delay, float(retry_after)))
            except ValueError:  # an HTTP date: keep our own delay
                pass
        log.warning(
            "%s",
            self.redact(
                f"{where}: {why}, retrying in {delay:.1f} s "
                f"(attempt {attempt + 1}/{self.settings.max_retries})"
            ),
        )
        time.sleep(delay)

    def _http_error(self, status: int, body: bytes, where: str) -> str:
        # Redact before cutting: a cut could leave half a key that no pattern recognises.
        text = self.redact(body.decode("utf-8", "replace"))
        detail = " ".join(text.split())[:ERROR_DETAIL_CHARS]
        if status in (401, 403):
            return (
                f"{where} refused the request (HTTP {status}): set a valid key in the "
                f"environment variable {self.settings.api_key_env} ({detail})"
            )
        if status == 404:
            return (
                f"{where}: not found (HTTP 404); check the model name and that base_url "
                f"ends with the API version, e.g. /v1 ({detail})"
            )
        if status in RETRY_STATUS:
            retries = self.settings.max_retries
            return f"{where} kept failing (HTTP {status}) after {retries} retries ({detail})"
        return f"{where} rejected the request (HTTP {status}): {detail}"


# --- bounded decoding of Content-Encoding ----------------------------------------------------------
def _codings_problem(codings: list[str]) -> str:
    """Why the body under ``codings`` is not decoded here ('' when it is)."""
    unknown = [c for c in codings if c not in CODINGS]
    if unknown:
        return f"{unknown[0]!r} is not a coding memprobe asked for"
    layers = [c for c in codings if CODINGS[c] is not None]
    if len(layers) > MAX_CODINGS:
        return f"{len(layers)} stacked compressions (a compression bomb?)"
    return ""


class _PastLimit(Exception):
    """The decoded body (or one of its inner layers) passed its limit."""


class _Inflate:
    """One gzip or deflate layer, whose output comes at most ``INFLATE_STEP`` bytes at a time."""

    def __init__(self, coding: str, wbits: int) -> None:
        self.coding = coding
        self.size = 0  # bytes produced so far
        self._wbits = wbits
        self._z = zlib.decompressobj(wbits)
        self._fed = False

    def pieces(self, data: bytes) -> Iterator[bytes]:
        while not self._z.eof:
            try:
                piece = self._z.decompress(data, INFLATE_STEP)
            except zlib.error:
                # "deflate" sent without its zlib header: httpx accepts that, so do we.
                if self._wbits != zlib.MAX_WBITS or self._fed:
                    raise
                self._wbits = -zlib.MAX_WBITS
                self._z = zlib.decompressobj(self._wbits)
                continue
            self._fed = self._fed or bool(data)
            data = self._z.unconsumed_tail
            self.size += len(piece)
            if piece:
                yield piece
            if not data and len(piece) < INFLATE_STEP:  # input used up, nothing left pending
                return


class _BoundedDecoder:
    """Undoes ``codings`` (as listed in Content-Encoding) on a stream, never past ``limit``.

    Hand-written because httpx has no bounded decoder: its decoders inflate each network chunk
    whole, through every layer, and only then hand the result over. Here each layer yields at
    most ``INFLATE_STEP`` bytes before the next is asked, and stops once past its limit, so the
    memory used is about ``limit``, whatever the compression ratio.
    """

    def __init__(self, codings: list[str], limit: int) -> None:
        # Content-Encoding lists codings in the order applied: the last is undone first.
        self._layers = [
            _Inflate(c, wbits) for c in reversed(codings) if (wbits := CODINGS[c]) is not None
        ]
        self._limit = limit
        # An inner layer carries compressed data, a little larger than its content at worst.
        self._inner_limit = limit + limit // 100 + 1024
        self._out: list[bytes] = []
        self._size = 0
        self.coding = "data"  # the layer being undone, for error messages

    def feed(self, data: bytes) -> None:
        """Decode ``data``, the next raw bytes; raises ``_PastLimit`` once past the limit."""
        self._push(0, data)

    def body(self) -> bytes:
        return b"".join(self._out)

    def _push(self, depth: int, data: bytes) -> None:
        if depth == len(self._layers):
            self._out.append(data)
            self._size += len(data)
            if self._size > self._limit:
                what = " once decompressed" if self._layers else ""
                raise _PastLimit(f"more than {self._limit:,} bytes arrived{what}")
            return
        layer = self._layers[depth]
        self.coding = layer.coding
        for piece in layer.pieces(data):
            if depth < len(self._layers) - 1 and layer.size > self._inner_limit:
                raise _PastLimit(
                    f"its {layer.coding} layer alone inflated past {self._inner_limit:,} bytes"
                )
            self._push(depth + 1, piece)
            self.coding = layer.coding


# --- one total deadline per attempt ----------------------------------------------------------------
def _left(timeout: float | None, expired: type[Exception]) -> float | None:
    """``timeout`` cut to the time left of this thread's attempt; raises ``expired`` if none."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise expired("the request passed its total deadline (timeout_s)")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A connection whose every read and write gets at most the time left of the attempt.

    httpx's timeouts are per read: a server sending its headers one byte a second never trips
    them, and httpx has no total timeout. A socket timeout cut to the time left does.
    """

    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        timeout = _left(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    """Opens connections as the wrapped backend does, as ``_DeadlineStream``s."""

    def __init__(self, backend: httpcore.NetworkBackend) -> None:
        self._backend = backend

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        timeout = _left(timeout, httpcore.ConnectTimeout)
        stream = self._backend.connect_tcp(host, port, timeout, local_address, socket_options)
        return _DeadlineStream(stream)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        timeout = _left(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._backend.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


def _arm_deadlines(client: httpx.Client) -> bool:
    """Put ``_DeadlineBackend`` under every connection pool of ``client``; False if none found.

    httpx (0.27, 0.28) takes no network backend, so this reaches its pools (``_transport``, the
    proxy ``_mounts``) by their private names; a pool reads it for each new connection.
    """
    transports = [getattr(client, "_transport", None), *getattr(client, "_mounts", {}).values()]
    armed = False
    for transport in transports:
        pool = getattr(transport, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if isinstance(backend, httpcore.NetworkBackend):
            if not isinstance(backend, _DeadlineBackend):
                pool._network_backend = _DeadlineBackend(backend)  # type: ignore[union-attr]
            armed = armed or transport is transports[0]
    return armed
