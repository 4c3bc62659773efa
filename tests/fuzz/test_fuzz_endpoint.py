"""Fuzzing the ``openai`` backend with whatever an OpenAI-compatible server might answer.

One raw-socket server for the module writes the reply the test last set: any status, any
Content-Type / Content-Encoding, a body that is JSON of every wrong shape (NaN and Infinity as
JSON tokens and as strings, huge numbers, missing fields), not JSON, not UTF-8, an SSE stream
that stops early, too big, or shorter than it said. Each reply goes through the real httpx
transport of a fresh ``OpenAIGenerator`` (no retries, short timeouts), asked for a completion,
a chat answer and a text's log-probs.

Property: the call returns a well-formed result (texts are ``str``, token counts whole numbers,
log-probs numbers at most 0, −inf included: the membership signals report such a text as "not
measured", ``signals._non_finite``) or raises ``ModelError`` (or a subclass) whose message names
the endpoint; never another exception, never a hang.
"""

from __future__ import annotations

import gzip
import json
import math
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from memprobe_core.models.base import Completion, ModelError, TextLogprobs
from memprobe_core.models.openai import OpenAIGenerator
from tests.faults.helpers import read_request

MODEL = "fuzz-model"
# Small, so "too large" answers stay cheap to draw; the backend's own minimum is 1 KiB.
MAX_RESPONSE_BYTES = 4096
# Long enough for a busy 2-core machine to answer a local request; a hang would pass it.
TIMEOUT_S = 5.0


# --- one server whose next reply the test sets ---------------------------------------------------
class ReplyServer:
    """A socket on 127.0.0.1 that answers every HTTP request with ``reply`` (raw bytes), then
    closes the connection (so a body without Content-Length ends where the bytes end)."""

    def __init__(self) -> None:
        self.reply = b"HTTP/1.1 204 No Content\r\n\r\n"
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}/v1"

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._listener.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn, self.reply), daemon=True).start()

    @staticmethod
    def _answer(conn: socket.socket, reply: bytes) -> None:
        with conn:
            conn.settimeout(TIMEOUT_S)
            try:
                read_request(conn)
                conn.sendall(reply)
                conn.shutdown(socket.SHUT_WR)
            except OSError:  # the client hung up (past its limit): as it should
                pass


@pytest.fixture(scope="module")
def server() -> Iterator[ReplyServer]:
    running = ReplyServer()
    yield running
    running.close()


# --- what a server answers -------------------------------------------------------------------------
@dataclass(frozen=True)
class Answer:
    """One HTTP reply: status, Content-Type, how the body is framed and encoded, the body."""

    status: int
    content_type: str
    body: bytes
    framing: str = "length"  # "length": an honest Content-Length; "close": none; "short": too big
    encoding: str = "identity"  # "gzip": gzipped; "gzip-broken": says gzip, is not; "br": unknown

    def http(self) -> bytes:
        body = self.body
        headers = [f"Content-Type: {self.content_type}", "Connection: close"]
        if self.encoding == "gzip":
            body = gzip.compress(body)
        if self.encoding != "identity":
            headers.append(f"Content-Encoding: {self.encoding.removesuffix('-broken')}")
        if self.framing == "length":
            headers.append(f"Content-Length: {len(body)}")
        elif self.framing == "short":  # the connection closes before the announced end
            headers.append(f"Content-Length: {len(body) + 100}")
        head = f"HTTP/1.1 {self.status} Fuzzed\r\n" + "".join(f"{h}\r\n" for h in headers)
        return head.encode() + b"\r\n" + body


def _json_bytes(value: Any) -> bytes:
    # allow_nan: NaN, Infinity and -Infinity go out as the bare tokens some servers write.
    return json.dumps(value, allow_nan=True).encode()


HUGE_INTS = st.sampled_from([2**63, -(2**63), 10**30, -(10**30), 10**400, -(10**400)])
NON_FINITE_STRINGS = st.sampled_from(["NaN", "Infinity", "-Infinity", "nan", "-inf", "1e999"])
# Any JSON value, of any type a field should not have.
JUNK = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | HUGE_INTS
    | st.floats()
    | st.text(max_size=20)
    | NON_FINITE_STRINGS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
LOGPROB = (
    st.floats(max_value=0.0)
    | st.floats()
    | st.none()
    | HUGE_INTS
    | st.integers(-10, 1)
    | NON_FINITE_STRINGS
    | st.booleans()
)
OFFSET = (
    st.integers(0, 40) | st.integers() | HUGE_INTS | st.none() | st.floats() | st.text(max_size=3)
)


def _maybe_list(element: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A list of ``element`` (the right shape) or junk (a wrong one)."""
    return st.lists(element, max_size=6) | JUNK


LOGPROBS_OBJECT = st.fixed_dictionaries(
    {},
    optional={
        "tokens": _maybe_list(st.text(max_size=4) | JUNK),
        "token_logprobs": _maybe_list(LOGPROB),
        "text_offset": _maybe_list(OFFSET),
        "top_logprobs": JUNK,
    },
)
MESSAGE = st.fixed_dictionaries({}, optional={"role": JUNK, "content": st.text(max_size=20) | JUNK})
CHOICE = st.fixed_dictionaries(
    {},
    optional={
        "text": st.text(max_size=20) | JUNK,
        "message": MESSAGE | JUNK,
        "index": st.integers(-2, 4) | JUNK,
        "finish_reason": st.sampled_from(["stop", "length"]) | JUNK,
        "logprobs": LOGPROBS_OBJECT | JUNK,
    },
)
USAGE = st.fixed_dictionaries(
    {},
    optional={
        "prompt_tokens": st.integers(-2, 8) | JUNK,
        "completion_tokens": st.integers(-2, 8) | JUNK,
        "total_tokens": JUNK,
    },
)
ANSWER_OBJECT = st.fixed_dictionaries(
    {},
    optional={
        "choices": st.lists(CHOICE | JUNK, max_size=3) | JUNK,
        "usage": USAGE | JUNK,
        "error": JUNK,
        "object": JUNK,
    },
)


@st.composite
def _echo_answer(draw: st.DrawFn) -> dict[str, Any]:
    """An echo answer of the right shape whose log-probs may be anything (the junk above rarely
    reaches them: it needs aligned lists of two entries or more)."""
    size = draw(st.integers(2, 6))
    tokens = draw(st.lists(st.text(min_size=1, max_size=3), min_size=size, max_size=size))
    values = draw(st.lists(LOGPROB, min_size=size, max_size=size))
    starts = [sum(map(len, tokens[:i])) for i in range(size)]
    logprobs = {"tokens": tokens, "token_logprobs": values, "text_offset": starts}
    answer: dict[str, Any] = {
        "choices": [{"index": 0, "text": "".join(tokens), "logprobs": logprobs}]
    }
    if draw(st.booleans()):
        answer["usage"] = draw(USAGE)
    return answer


@st.composite
def _broken_json(draw: st.DrawFn) -> bytes:
    """A JSON answer cut short, or with stray bytes in it."""
    whole = _json_bytes(draw(ANSWER_OBJECT))
    cut = draw(st.integers(0, max(0, len(whole) - 1)))
    return whole[:cut] + draw(st.sampled_from([b"", b"\xff\xfe", b"}", b"\x00", b"\xed\xa0\x80"]))


@st.composite
def _sse_stream(draw: st.DrawFn) -> bytes:
    """What a streaming server sends (``data:`` events), maybe stopping early or holding junk.

    The backend never asks for a stream (no ``"stream": true``): a server that streams anyway
    must be refused as a body that is not JSON, never half-read as one."""
    events = draw(st.lists(ANSWER_OBJECT.map(_json_bytes) | st.binary(max_size=20), max_size=3))
    end = draw(st.sampled_from([b"data: [DONE]\n\n", b"", b"data: {"]))
    return b"".join(b"data: " + e + b"\n\n" for e in events) + end


BODY = st.one_of(
    ANSWER_OBJECT.map(_json_bytes),
    _echo_answer().map(_json_bytes),
    JUNK.map(_json_bytes),
    _broken_json(),
    _sse_stream(),
    st.binary(max_size=64),
    st.sampled_from(
        [b"", b"null", b"NaN", b"[]", b"{}", b"\xff\xfe{\x00}\x00", b"<html>502</html>"]
    ),
    st.integers(1, 10_000).map(lambda depth: b"[" * depth),  # deep nesting
    st.integers(1, 10_000).map(lambda depth: b'{"choices": ' + b"[" * depth),
    st.integers(MAX_RESPONSE_BYTES, 3 * MAX_RESPONSE_BYTES).map(
        lambda size: _json_bytes({"choices": [{"text": "x" * size, "index": 0}]})
    ),
)
STATUS = st.sampled_from(
    [200, 200, 200, 201, 204, 301, 400, 401, 403, 404, 413, 422, 429, 500, 502, 503]
) | st.integers(200, 599)
ANSWERS = st.builds(
    Answer,
    status=STATUS,
    content_type=st.sampled_from(
        ["application/json", "text/html", "text/event-stream", "application/octet-stream", ""]
    ),
    body=BODY,
    framing=st.sampled_from(["length", "length", "close", "short"]),
    encoding=st.sampled_from(["identity", "identity", "gzip", "gzip-broken", "br"]),
)


# Kept failures: the parts of an answer that once broke the backend.
ECHO_WITH_HUGE_INT = _json_bytes(
    {
        "choices": [
            {
                "index": 0,
                "text": "000",
                "logprobs": {
                    "tokens": ["0", "0", "0"],
                    "token_logprobs": [0.0, 10**400, 0.0],
                    "text_offset": [0, 1, 2],
                },
            }
        ]
    }
)


# --- the property ------------------------------------------------------------------------------------
def _client(server: ReplyServer) -> OpenAIGenerator:
    """A fresh backend (no remembered refusal, no server set aside) that never retries."""
    return OpenAIGenerator(
        MODEL,
        base_url=server.base_url,
        api_key_env="",
        timeout_s=TIMEOUT_S,
        max_retries=0,
        backoff_s=0.0,
        cooloff_s=0.0,
        max_response_bytes=MAX_RESPONSE_BYTES,
    )


def _check_completions(rows: list[list[Completion]]) -> None:
    (row,) = rows
    assert len(row) == 1  # n=1 was asked for
    for completion in row:
        assert isinstance(completion.text, str)
        assert isinstance(completion.num_tokens, int) and completion.num_tokens >= 0
        assert completion.finish_reason in ("stop", "length")


def _check_logprobs(rows: list[TextLogprobs]) -> None:
    (scored,) = rows
    assert len(scored.log_probs) == len(scored.offsets) > 0
    for value in scored.log_probs:
        # -inf is allowed: the signals turn it into "not measured" (signals._non_finite).
        assert isinstance(value, float) and not math.isnan(value) and value <= 1e-6, value
    for offset in scored.offsets:
        assert isinstance(offset, int) and offset >= 0


ASKS = {
    "completion": lambda gen: _check_completions(gen.generate(["a prompt"], max_new_tokens=8)),
    "chat": lambda gen: _check_completions(
        gen.generate([[{"role": "user", "content": "hi"}]], max_new_tokens=8)
    ),
    "logprobs": lambda gen: _check_logprobs(gen.text_logprobs(["ab cd"])),
}


@given(answer=ANSWERS, ask=st.sampled_from(sorted(ASKS)))
# Found by fuzzing: JSON nested deeper than the parser's stack escaped as RecursionError.
@example(answer=Answer(200, "application/json", b"[" * 1981), ask="chat")
# Found by fuzzing: an integer log-prob past a float's range escaped as OverflowError.
@example(answer=Answer(200, "application/json", ECHO_WITH_HUGE_INT), ask="logprobs")
def test_any_answer_is_a_result_or_a_model_error_naming_the_endpoint(server, answer, ask):
    server.reply = answer.http()
    gen = _client(server)
    started = time.monotonic()
    try:
        ASKS[ask](gen)
    except ModelError as exc:
        assert server.base_url in str(exc), str(exc)
    finally:
        gen.close()
    # One try (no retries), bounded by timeout_s: a reply that stalls the client shows here.
    assert time.monotonic() - started < 2 * TIMEOUT_S
