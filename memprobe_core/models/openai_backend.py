"""The ``openai`` backend: any OpenAI-compatible HTTP endpoint (vLLM, llama.cpp server, OpenAI …).

Black-box only (no tokenizer, no gradients). Chats go to ``/chat/completions``, plain texts to
``/completions`` (or as a one-message chat with ``text_as_chat=True``). ``n`` samples are asked
for in one request; a server that returns fewer is asked again for the rest. Requests run in a
thread pool (``max_concurrency``); 429, 5xx and timeouts are retried with exponential backoff a
bounded number of times; 401/403/404 and refused connections fail at once with a clear error.

The API key is read from the environment variable named by ``api_key_env`` at each request; it is
never stored on the object, logged, or written to a manifest.
"""

from __future__ import annotations

import logging
import os
import random
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlparse

from memprobe_core.models.base import (
    Completion,
    Generator,
    LoadOptions,
    ModelError,
    Request,
)

log = logging.getLogger("memprobe")

DEFAULT_BASE_URL = "https://api.openai.com/v1"
RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
MAX_BACKOFF_S = 8.0


class OpenAIGenerator(Generator):
    """A model behind an OpenAI-compatible endpoint.

    Args:
        model: the model name the server knows.
        base_url: endpoint root including the version (``http://127.0.0.1:8000/v1``); a URL
            with no path gets ``/v1``.
        api_key_env: environment variable holding the key (unset: no Authorization header).
        timeout_s: per-request timeout (connect, read, write).
        max_concurrency: requests in flight at once.
        max_retries: retries after a 429/5xx/timeout before giving up.
        backoff_s: first retry delay (doubles each retry, capped at 8 s).
        text_as_chat: send plain-text requests as a one-message chat.
        chat_template: what ``has_chat_template`` reports (the server applies its own template).
    """

    backend = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str = DEFAULT_BASE_URL,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 60.0,
        max_concurrency: int = 8,
        max_retries: int = 4,
        backoff_s: float = 0.5,
        text_as_chat: bool = False,
        chat_template: bool = True,
    ) -> None:
        super().__init__()
        import httpx

        if not model:
            raise ModelError("the openai backend needs a model name (e.g. openai:gpt-4o-mini)")
        if max_concurrency < 1 or max_retries < 0 or timeout_s <= 0:
            raise ModelError(
                f"max_concurrency={max_concurrency}, max_retries={max_retries}, timeout_s={timeout_s}:"
                " use max_concurrency >= 1, max_retries >= 0 and a positive timeout"
            )
        self.model_id = model
        self.base_url = _normalize_url(base_url)
        self.api_key_env = api_key_env
        self.timeout_s = timeout_s
        self.max_concurrency = max_concurrency
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.text_as_chat = text_as_chat
        self._chat_template = chat_template
        self._client = httpx.Client(timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0)))

    @property
    def has_chat_template(self) -> bool:
        return self._chat_template

    def manifest(self) -> dict[str, Any]:
        return {"model_id": self.model_id, "backend": self.backend, "base_url": self.base_url}

    def __repr__(self) -> str:
        return f"OpenAIGenerator({self.model_id!r}, base_url={self.base_url!r})"

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    # --- generation ---------------------------------------------------------------------------
    def _generate(
        self,
        requests: list[Request],
        *,
        n: int,
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        seed: int | None,
    ) -> list[list[Completion]]:
        def one(request: Request) -> list[Completion]:
            return self._complete(request, n, max_new_tokens, temperature, top_p, seed)

        if len(requests) == 1:
            return [one(requests[0])]
        with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(requests))) as pool:
            return list(pool.map(one, requests))

    def _complete(
        self, request: Request, n: int, max_new_tokens: int, temperature: float, top_p: float, seed: int | None
    ) -> list[Completion]:
        chat = not isinstance(request, str) or self.text_as_chat
        messages = request if not isinstance(request, str) else [{"role": "user", "content": request}]
        out: list[Completion] = []
        attempt = 0
        # Servers that ignore `n` return one choice per call: ask again for the rest, each time
        # with a shifted seed so the extra samples differ yet stay reproducible.
        while len(out) < n:
            want = n - len(out)
            payload: dict[str, Any] = {
                "model": self.model_id,
                "n": want,
                "max_tokens": max_new_tokens,
                "temperature": temperature,
                "top_p": top_p,
            }
            if seed is not None:
                payload["seed"] = seed + attempt
            if chat:
                payload["messages"] = messages
            else:
                payload["prompt"] = request
            body = self._post("/chat/completions" if chat else "/completions", payload)
            got = _parse(body, chat, max_new_tokens)
            if not got:
                raise ModelError(f"{self._where()} returned no choices; check that the model serves this API")
            out.extend(got[:want])
            attempt += 1
        return out

    def _post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        import httpx

        url = self.base_url + path
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env, "") if self.api_key_env else ""
        if key:
            headers["Authorization"] = f"Bearer {key}"
        for attempt in range(self.max_retries + 1):
            last = attempt == self.max_retries
            try:
                response = self._client.post(url, json=payload, headers=headers)
            except httpx.ConnectError as exc:
                raise ModelError(
                    f"cannot connect to {self.base_url} ({exc}); is the server running and the URL right?"
                ) from exc
            except httpx.TimeoutException as exc:
                if last:
                    raise ModelError(
                        f"{self._where()} timed out after {self.timeout_s:.0f} s ({self.max_retries + 1} "
                        "tries); raise timeout_s or check the server"
                    ) from exc
                self._sleep(attempt, None, f"timeout ({type(exc).__name__})")
                continue
            except httpx.TransportError as exc:  # connection reset mid-response and the like
                if last:
                    raise ModelError(f"{self._where()}: transport error {exc}") from exc
                self._sleep(attempt, None, f"transport error ({type(exc).__name__})")
                continue
            status = response.status_code
            if status == 200:
                try:
                    return response.json()
                except ValueError as exc:
                    raise ModelError(f"{self._where()} answered with invalid JSON: {response.text[:200]!r}") from exc
            if status in RETRY_STATUS and not last:
                self._sleep(attempt, response.headers.get("retry-after"), f"HTTP {status}")
                continue
            raise ModelError(self._http_error(status, response.text))
        raise AssertionError("unreachable")  # the loop returns or raises

    def _sleep(self, attempt: int, retry_after: str | None, why: str) -> None:
        delay = min(MAX_BACKOFF_S, self.backoff_s * (2**attempt)) * (1 + 0.1 * random.random())
        if retry_after:
            try:
                delay = min(MAX_BACKOFF_S, max(delay, float(retry_after)))
            except ValueError:  # an HTTP date: keep our own delay
                pass
        log.warning("%s: %s, retrying in %.1f s (attempt %d/%d)", self._where(), why, delay,
                    attempt + 1, self.max_retries)
        time.sleep(delay)

    def _where(self) -> str:
        return f"endpoint {self.base_url} (model {self.model_id!r})"

    def _http_error(self, status: int, text: str) -> str:
        detail = text.strip().replace("\n", " ")[:300]
        if status in (401, 403):
            return (
                f"{self._where()} refused the request (HTTP {status}): set a valid key in the "
                f"environment variable {self.api_key_env} ({detail})"
            )
        if status == 404:
            return (
                f"{self._where()}: not found (HTTP 404); check the model name and that base_url "
                f"ends with the API version, e.g. /v1 ({detail})"
            )
        if status in RETRY_STATUS:
            return f"{self._where()} kept failing (HTTP {status}) after {self.max_retries} retries ({detail})"
        return f"{self._where()} rejected the request (HTTP {status}): {detail}"


def _parse(body: dict[str, Any], chat: bool, max_new_tokens: int) -> list[Completion]:
    choices = sorted(body.get("choices") or [], key=lambda c: c.get("index", 0))
    texts, reasons = [], []
    for choice in choices:
        text = (choice.get("message") or {}).get("content") if chat else choice.get("text")
        texts.append(text or "")
        reasons.append("length" if choice.get("finish_reason") == "length" else "stop")
    total = (body.get("usage") or {}).get("completion_tokens")
    counts = _split_tokens(total, texts, reasons, max_new_tokens)
    return [Completion(t, c, r) for t, c, r in zip(texts, counts, reasons)]


def _split_tokens(total: int | None, texts: list[str], reasons: list[str], max_new_tokens: int) -> list[int]:
    """Per-choice token counts from the one total the API reports.

    A choice cut by length used exactly ``max_new_tokens``; the rest of the total is shared by
    the stopped choices in proportion to their text length. Without usage figures, whitespace
    words stand in for tokens.
    """
    if total is None:
        return [max_new_tokens if r == "length" else min(len(t.split()), max_new_tokens)
                for t, r in zip(texts, reasons)]
    counts = [max_new_tokens if r == "length" else 0 for r in reasons]
    stopped = [i for i, r in enumerate(reasons) if r == "stop"]
    rest = max(0, total - sum(counts))
    if stopped:
        weights = [max(1, len(texts[i])) for i in stopped]
        for i, w in zip(stopped, weights):
            counts[i] = min(max_new_tokens, rest * w // sum(weights))
        # the rounding remainder goes to the first stopped choices, one token each
        leftover = rest - sum(counts[i] for i in stopped)
        for i in stopped:
            if leftover <= 0:
                break
            if counts[i] < max_new_tokens:
                counts[i] += 1
                leftover -= 1
    return counts


def _normalize_url(base_url: str) -> str:
    url = base_url.strip().rstrip("/")
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ModelError(f"base_url {base_url!r} is not an http(s) URL; e.g. http://127.0.0.1:8000/v1")
    if parsed.path in ("", "/"):
        url += "/v1"
    return url


def load_openai(name: str, options: LoadOptions) -> OpenAIGenerator:
    """Build an OpenAI-compatible client (the ``openai`` backend's entry point).

    ``name`` is the model name, optionally prefixed ``openai:``. Extras: ``max_retries``,
    ``backoff_s``, ``text_as_chat``, ``chat_template``.
    """
    known = {"max_retries", "backoff_s", "text_as_chat", "chat_template"}
    unknown = set(options.extra) - known
    if unknown:
        raise ModelError(f"the openai backend does not know option(s) {sorted(unknown)}; known: {sorted(known)}")
    model = name.removeprefix("openai:")
    return OpenAIGenerator(
        model,
        base_url=options.base_url or DEFAULT_BASE_URL,
        api_key_env=options.api_key_env,
        timeout_s=options.timeout_s,
        max_concurrency=options.max_concurrency,
        **options.extra,
    )
