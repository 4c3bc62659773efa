"""``OpenAIGenerator``: the Generator over one OpenAI-compatible server or a fleet of them.

Chats go to ``/chat/completions``, plain texts to ``/completions`` (or as a one-message chat
with ``text_as_chat=True``). ``n`` samples are asked for in one request; a server that returns
fewer is asked again for the rest. ``top_k`` is not part of the OpenAI API: it is sent as the extra
field ``top_k`` that vLLM, SGLang and llama.cpp servers read, only when sampling with it set; a
call with it to OpenAI's own API is refused before anything is sent, and a server that rejects
it gets an error saying so. Requests run in a thread pool of ``max_concurrency`` per
server; each one goes to the server with the fewest requests in flight. A server that refuses
connections or fails past its retries is set aside for ``cooloff_s`` and the request moves on to
another; the request fails only once every server has failed it.

The API key is read from the environment variable named by ``api_key_env`` at each request; it is
never stored on the object, and it (with anything shaped like a credential) is redacted from
every error and log line, and the key from every returned text, before they leave the backend.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import httpx

from memprobe_core.models.base import (
    Completion,
    Decoding,
    Generator,
    LoadOptions,
    LogprobsUnavailable,
    ModelError,
    Request,
    TextLogprobs,
    check_switches,
)
from memprobe_core.models.openai.echo import echo_payload, parse_echo
from memprobe_core.models.openai.fleet import Fleet, Server
from memprobe_core.models.openai.parse import parse_choices
from memprobe_core.models.openai.transport import HttpSettings, ServerDown, Transport
from memprobe_core.models.urls import base_url_problem
from memprobe_core.secrets import redact_secrets

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MAX_RESPONSE_BYTES = 8 * 2**20
T = TypeVar("T")


class OpenAIGenerator(Generator):
    """A model behind one or several OpenAI-compatible endpoints.

    Args:
        model: the model name the servers know.
        base_url: endpoint root including the version (``http://127.0.0.1:8000/v1``; a URL with
            no path gets ``/v1``), or several for a fleet: a list, or one comma-separated string.
        api_key_env: the NAME of the environment variable holding the key (unset variable, or
            ``""``: no Authorization header); a value that is not a variable name is refused, as
            it is most likely the key itself.
        timeout_s: total time for one try of a request: connect, headers and body together.
        max_concurrency: requests in flight per server.
        max_retries: retries on one server after a 429/5xx/timeout before it counts as down.
        backoff_s: first retry delay (doubles each retry, capped at 8 s).
        max_response_bytes: largest response body read; a larger one is a ``ModelError``.
        cooloff_s: seconds a server that went down is skipped before it is tried again.
        text_as_chat: send plain-text requests as a one-message chat.
        chat_template: what ``has_chat_template`` reports (the server applies its own template).
        prompt_logprobs: ask the server for the log-probs of a snippet's own tokens
            (``/completions`` with ``echo``) so the membership signals are measured; a server
            that cannot is noticed on the first try and not asked again.
    """

    backend = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | list[str] = DEFAULT_BASE_URL,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 60.0,
        max_concurrency: int = 8,
        max_retries: int = 4,
        backoff_s: float = 0.5,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        cooloff_s: float = 30.0,
        text_as_chat: bool = False,
        chat_template: bool = True,
        prompt_logprobs: bool = True,
    ) -> None:
        super().__init__()
        if not model:
            raise ModelError("the openai backend needs a model name (e.g. openai:gpt-4o-mini)")
        _check_numbers(
            max_concurrency=max_concurrency,
            max_retries=max_retries,
            timeout_s=timeout_s,
            cooloff_s=cooloff_s,
            max_response_bytes=max_response_bytes,
        )
        check_switches(
            text_as_chat=text_as_chat, chat_template=chat_template, prompt_logprobs=prompt_logprobs
        )
        _check_key_env(api_key_env)
        self.model_id = model
        self.base_urls = parse_base_urls(base_url)
        self.api_key_env = api_key_env
        self.max_concurrency = max_concurrency
        self.text_as_chat = text_as_chat
        self._chat_template = chat_template
        self.prompt_logprobs = prompt_logprobs
        self._echo_refusal: str | None = None  # why the server cannot score a text, once known
        self.settings = HttpSettings(
            timeout_s, max_retries, backoff_s, max_response_bytes, api_key_env
        )
        self.fleet = Fleet(self.base_urls, max_outstanding=max_concurrency, cooloff_s=cooloff_s)
        # One pool for all threads and servers; sized so every server can hold its share.
        limits = httpx.Limits(max_connections=max_concurrency * len(self.base_urls))
        client = httpx.Client(
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0)), limits=limits
        )
        self._transport = Transport(client, self.settings, self.redact)

    @property
    def base_url(self) -> str:
        """The server URLs, comma-separated (one URL for a single server), passwords removed."""
        return ",".join(_display_url(u) for u in self.base_urls)

    @property
    def has_chat_template(self) -> bool:
        return self._chat_template

    def manifest(self) -> dict[str, Any]:
        return {"model_id": self.model_id, "backend": self.backend, "base_url": self.base_url}

    def __repr__(self) -> str:
        return f"OpenAIGenerator({self.model_id!r}, base_url={self.base_url!r})"

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._transport.client.close()

    def redact(self, text: str) -> str:
        """``text`` without the API key, URL passwords, or anything shaped like a credential."""
        return redact_secrets(text, self._secrets())

    def _secrets(self) -> list[str]:
        secrets = [_api_key(self.api_key_env)]
        secrets += [urlsplit(u).password or "" for u in self.base_urls]
        return [s for s in secrets if s]

    # --- generation ---------------------------------------------------------------------------
    def _generate(
        self,
        requests: list[Request],
        decoding: Decoding,
        references: list[str] | None = None,  # no drafting here: not used
    ) -> list[list[Completion]]:
        self._check_top_k(decoding)

        def one(request: Request) -> list[Completion]:
            return self._complete(request, decoding)

        return self._each(one, requests)

    def _each(self, ask: Callable[[Any], T], items: Sequence[Any]) -> list[T]:
        """``ask`` for every item, in order: concurrently, as many in flight as the fleet holds."""
        if len(items) == 1:
            return [ask(items[0])]
        workers = min(self.max_concurrency * len(self.fleet), len(items))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(ask, items))

    def _complete(self, request: Request, decoding: Decoding) -> list[Completion]:
        chat = not isinstance(request, str) or self.text_as_chat
        messages = (
            request if not isinstance(request, str) else [{"role": "user", "content": request}]
        )
        out: list[Completion] = []
        attempt = 0
        # Servers that ignore `n` return one choice per call: ask again for the rest, each time
        # with a shifted seed so the extra samples differ yet stay reproducible.
        while len(out) < decoding.n:
            want = decoding.n - len(out)
            payload: dict[str, Any] = {
                "model": self.model_id,
                "n": want,
                "max_tokens": decoding.max_new_tokens,
                "temperature": decoding.temperature,
                "top_p": decoding.top_p,
                **_top_k_field(decoding),
            }
            if decoding.seed is not None:
                payload["seed"] = decoding.seed + attempt
            if chat:
                payload["messages"] = messages
            else:
                payload["prompt"] = request
            got = self._ask_with_top_k(chat, payload, decoding.max_new_tokens)
            out.extend(got[:want])
            attempt += 1
        return out

    def _check_top_k(self, decoding: Decoding) -> None:
        """Refuse top-k for OpenAI's own API, which rejects fields outside its spec."""
        if not _top_k_field(decoding):
            return
        hosts = [urlsplit(u).hostname or "" for u in self.base_urls]
        if any(h == "api.openai.com" for h in hosts):
            raise ModelError(
                f"the openai backend cannot send top_k={decoding.top_k} to api.openai.com: "
                "top-k is not part of the OpenAI API; use top_k=0 there, or a server that "
                "reads the extra field top_k (vLLM, SGLang, llama.cpp)"
            )

    def _ask_with_top_k(
        self, chat: bool, payload: dict[str, Any], max_new_tokens: int
    ) -> list[Completion]:
        """``_ask``; a request with ``top_k`` that the server rejects says top_k may be why."""
        try:
            return self._ask(chat, payload, max_new_tokens)
        except ServerDown:
            raise
        except ModelError as exc:
            if "top_k" not in payload:
                raise
            raise ModelError(
                f"{exc}. The request carried top_k={payload['top_k']}, which is not part of the "
                "OpenAI API: if this server does not read it, use top_k=0 with it"
            ) from exc

    def _ask(self, chat: bool, payload: dict[str, Any], max_new_tokens: int) -> list[Completion]:
        """One generation request to the fleet, parsed into completions."""

        def parse(body: dict[str, Any], where: str) -> list[Completion]:
            got = parse_choices(body, chat, max_new_tokens, where, redact=self.redact)
            if not got:
                raise ModelError(
                    f"{where} returned no choices; check that the model serves this API"
                )
            return self._scrub(got)

        return self._post("/chat/completions" if chat else "/completions", payload, parse)

    def _post(
        self, path: str, payload: dict[str, Any], parse: Callable[[dict[str, Any], str], T]
    ) -> T:
        """POST to the fleet: the first server able to answer does, the others are tried after.

        ``parse(body, where)`` turns a 200 body into the result; its errors are the caller's.
        """
        tried: list[str] = []
        last_error: ServerDown | None = None
        while (server := self.fleet.acquire(exclude=tried)) is not None:
            ok = False
            try:
                body = self._transport.post(
                    server.url + path, payload, self._headers(), self._where(server)
                )
                ok = True
            except ServerDown as exc:
                self.fleet.mark_down(server, str(exc))
                tried.append(server.url)
                last_error = exc
                continue
            finally:
                self.fleet.release(server, ok=ok)
            return parse(body, self._where(server))
        assert last_error is not None  # acquire returns None only once every server was tried
        if len(self.fleet) == 1:
            raise last_error  # its message is already redacted; its cause is the HTTP error
        raise ModelError(
            f"all {len(self.fleet)} servers failed this request; the last said: {last_error}"
        ) from last_error

    # --- log-probs of a given text (black-box membership signals) -----------------------------
    @property
    def scores_text(self) -> bool:
        return self.prompt_logprobs and not self.text_as_chat

    def text_logprobs(self, texts: Sequence[str]) -> list[TextLogprobs]:
        """The log-probs of each text's tokens, from ``/completions`` with ``echo`` (see
        :mod:`memprobe_core.models.openai.echo`), one request per text, run concurrently.

        A server that cannot score a text is remembered: it refused the request (any HTTP
        error other than a retried 429/5xx/timeout, e.g. 400 "echo not supported", or 401),
        ignored ``echo``, or answered log-probs of the wrong shape. Later calls raise at once
        instead of asking again for every unit of an audit.

        Raises:
            LogprobsUnavailable: turned off (``prompt_logprobs=False``, ``text_as_chat``) or
                the server cannot score a text; the message says which and why.
            ServerDown: the server did not answer (not remembered: it may come back).
        """
        if not self.scores_text:
            raise LogprobsUnavailable(
                f"{self.model_id!r} is asked for chats only or with prompt_logprobs off; "
                "black-box membership signals are not measured"
            )
        if self._echo_refusal is not None:
            raise LogprobsUnavailable(self._echo_refusal)

        def one(text: str) -> TextLogprobs:
            return self._post(
                "/completions",
                echo_payload(self.model_id, text),
                lambda body, where: parse_echo(body, text, where),
            )

        try:
            return self._each(one, texts)
        except ServerDown:
            raise  # the server may come back: nothing learnt about what it offers
        except ModelError as exc:
            # Refused (4xx) or ignored echo: it will not change during the run.
            self._echo_refusal = self.redact(
                f"the server does not score a given text ({exc}); black-box membership signals "
                "are not measured (start it with prompt-logprob support, e.g. vLLM, or pass "
                "prompt_logprobs=False)"
            )
            raise LogprobsUnavailable(self._echo_refusal) from exc

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        key = _api_key(self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _scrub(self, completions: list[Completion]) -> list[Completion]:
        """Remove the API key from returned texts (a server may echo it into a completion).

        Only the key itself: credential-shaped strings stay, because a model reciting an
        ``sk-…`` key it was trained on is exactly what a memorisation audit must see.
        """
        secrets = self._secrets()
        if not secrets:
            return completions
        return [
            Completion(
                redact_secrets(c.text, secrets, patterns=False), c.num_tokens, c.finish_reason
            )
            for c in completions
        ]

    def _where(self, server: Server) -> str:
        return f"endpoint {_display_url(server.url)} (model {self.model_id!r})"


def _top_k_field(decoding: Decoding) -> dict[str, int]:
    """The extra ``top_k`` field of a request: only when sampling with top-k set, so a request
    without it is plain OpenAI API."""
    return {"top_k": decoding.top_k} if decoding.do_sample and decoding.top_k else {}


def parse_base_urls(base_url: str | list[str] | tuple[str, ...]) -> list[str]:
    """Normalised server URLs from one URL, a comma-separated string or a list.

    Raises:
        ModelError: no URL, a URL that is not http(s), one with a query string or fragment
            (``?…``, ``#…``: an API base URL has none, and a key there would reach manifests)
            or a control character or space (a CR/LF), or one URL given twice.
    """
    raw = base_url.split(",") if isinstance(base_url, str) else list(base_url)
    if not all(isinstance(u, str) for u in raw):
        raise ModelError(
            f"base_url {base_url!r}: give URLs as strings, e.g. http://127.0.0.1:8000/v1"
        )
    urls = [_normalize_url(u) for u in raw if u.strip()]
    if not urls:
        raise ModelError(f"base_url {base_url!r} holds no URL; e.g. http://127.0.0.1:8000/v1")
    seen: set[str] = set()
    for url in urls:
        if url in seen:
            raise ModelError(f"base_url lists {_display_url(url)} twice; list each server once")
        seen.add(url)
    return urls


def _normalize_url(base_url: str) -> str:
    url = base_url.strip().rstrip("/")
    parsed = urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        shown = redact_secrets(base_url)
        raise ModelError(f"base_url {shown!r} is not an http(s) URL; e.g. http://127.0.0.1:8000/v1")
    problem = base_url_problem(url)
    if problem:
        raise ModelError(problem)
    if parsed.path in ("", "/"):
        url += "/v1"
    return url


def _display_url(url: str) -> str:
    """``url`` without its userinfo (``user:password@``), for messages and manifests."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _check_key_env(api_key_env: object) -> None:
    """Refuse an ``api_key_env`` that is not an environment-variable name (``""``: no key).

    The value is not repeated: one that is not a name is most likely the key itself.
    """
    if not isinstance(api_key_env, str) or (
        api_key_env and not _VARIABLE_NAME.fullmatch(api_key_env)
    ):
        raise ModelError(
            "api_key_env is not an environment-variable name; it looks like a key: put the key "
            "in an environment variable and pass that variable's name, e.g. "
            "api_key_env='OPENAI_API_KEY'"
        )


def _api_key(env: str) -> str:
    return os.environ.get(env, "") if env else ""


# (low, high) of each number option: past these a run cannot work or eats the machine.
_BOUNDS: dict[str, tuple[float, float]] = {
    "max_concurrency": (1, 1024),
    "max_retries": (0, 100),
    "timeout_s": (0.001, 24 * 3600),
    "cooloff_s": (0, 24 * 3600),
    "max_response_bytes": (1024, 2**30),
}


def _check_numbers(**values: float) -> None:
    """Refuse a number option outside its range, naming it and the range."""
    for name, value in values.items():
        low, high = _BOUNDS[name]
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not low <= value <= high
        ):
            raise ModelError(f"{name}={value!r} is out of range: use {_num(low)} to {_num(high)}")


def _num(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


# Extras (options outside LoadOptions) the backend accepts.
_EXTRAS = frozenset(
    {"max_retries", "backoff_s", "cooloff_s", "text_as_chat", "chat_template", "prompt_logprobs"}
)


def load_openai(name: str, options: LoadOptions) -> OpenAIGenerator:
    """Build an OpenAI-compatible client (the ``openai`` backend's entry point).

    ``name`` is the model name, optionally prefixed ``openai:``. ``options.base_url`` may list
    several servers (a list, or a comma-separated string). Extras: ``max_retries``,
    ``backoff_s``, ``cooloff_s``, ``text_as_chat``, ``chat_template``, ``prompt_logprobs``.
    """
    unknown = set(options.extra) - _EXTRAS
    if unknown:
        raise ModelError(
            f"the openai backend does not know option(s) {sorted(unknown)}; known: {sorted(_EXTRAS)}"
        )
    model = name.removeprefix("openai:")
    return OpenAIGenerator(
        model,
        base_url=options.base_url or DEFAULT_BASE_URL,
        api_key_env=options.api_key_env,
        timeout_s=options.timeout_s,
        max_concurrency=options.max_concurrency,
        max_response_bytes=options.max_response_bytes,
        **options.extra,
    )
