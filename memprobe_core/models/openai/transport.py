"""One POST to one server of the ``openai`` backend: bounded read, retries, one clean error.

The body is read as a stream and never past ``max_response_bytes`` (a 200 MB completion must
not take gigabytes of RAM), and must arrive within ``timeout_s`` once the headers are in (a
server trickling one byte a minute must not hang an audit). 429, 5xx, timeouts and dropped
connections are retried with exponential backoff; when the retries are used up, or the server
refuses the connection, ``ServerDown`` says that another server of a fleet may still answer.
Every message is passed through ``redact`` before it is raised or logged.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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
        with self.client.stream("POST", url, json=payload, headers=headers) as response:
            ok = response.status_code == 200
            limit = self.settings.max_response_bytes if ok else ERROR_BODY_BYTES
            body = self._read_capped(response, limit, refuse=ok, where=where)
            return response.status_code, response.headers, body

    def _read_capped(
        self, response: httpx.Response, limit: int, *, refuse: bool, where: str
    ) -> bytes:
        """At most ``limit`` bytes of the body: past it, raise (``refuse``) or cut it there."""
        declared = response.headers.get("content-length", "")
        if refuse and declared.isdigit() and int(declared) > limit:
            raise self._too_large(where, f"it announced {int(declared):,} bytes")
        deadline = time.monotonic() + self.settings.timeout_s
        chunks: list[bytes] = []
        size = 0
        # iter_bytes decodes gzip/deflate as it goes, so the cap bounds the decoded size.
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > limit:
                if refuse:
                    raise self._too_large(where, f"more than {limit:,} bytes arrived")
                chunks.append(chunk[: limit - (size - len(chunk))])
                break
            chunks.append(chunk)
            if time.monotonic() > deadline:
                raise httpx.ReadTimeout(f"the body took longer than {self.settings.timeout_s:g} s")
        return b"".join(chunks)

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
