"""The openai backend against a real HTTP server on 127.0.0.1: auth, secrets, errors, retries,
bounded and malformed bodies, n, routing. The fleet of servers is in test_models_openai_fleet.py.
"""

from __future__ import annotations

import logging
import socket
import time
import traceback
import tracemalloc

import pytest

from memprobe_core.models import ModelError, load
from memprobe_core.models.fake import FakeGenerator
from memprobe_core.models.openai import OpenAIGenerator
from tests.helpers.openai_server import serve

KEY_ENV = "MEMPROBE_TEST_OPENAI_KEY"


def client(base_url: str, **kwargs) -> OpenAIGenerator:
    kwargs.setdefault("backoff_s", 0.01)
    kwargs.setdefault("timeout_s", 10)
    return OpenAIGenerator("m", base_url=base_url, api_key_env=KEY_ENV, **kwargs)


@pytest.fixture
def echo():
    return FakeGenerator("echo")


def test_key_sent_from_env_and_never_exposed(echo, monkeypatch):
    secret = "sk-test-very-secret"
    with serve(echo, "m", api_key=secret) as srv:
        gen = client(srv.base_url)
        monkeypatch.delenv(KEY_ENV, raising=False)
        with pytest.raises(ModelError, match=f"HTTP 401.*{KEY_ENV}"):
            gen.generate(["a b c"])
        monkeypatch.setenv(KEY_ENV, secret)
        out = gen.generate(["one two three"], max_new_tokens=10)
        assert out[0][0].text == "one two three"
        assert srv.hits[-1]["auth"] == f"Bearer {secret}"
        exposed = repr(gen) + str(gen.manifest()) + str(vars(gen))
        assert secret not in exposed


def test_unknown_model_is_404(echo):
    with serve(echo, "served") as srv:
        gen = OpenAIGenerator("other", base_url=srv.base_url, backoff_s=0.01)
        with pytest.raises(ModelError, match="HTTP 404.*model name"):
            gen.generate(["x"])


def test_429_then_ok(echo):
    with serve(echo, "m", fail_first=[429, 429]) as srv:
        out = client(srv.base_url, max_retries=3).generate(["hello there"], max_new_tokens=5)
        assert out[0][0].text == "hello there"
        assert len(srv.hits) == 3


def test_500_retries_are_bounded(echo):
    with serve(echo, "m", fail_first=[500] * 10) as srv:
        with pytest.raises(ModelError, match="HTTP 500.*2 retries"):
            client(srv.base_url, max_retries=2).generate(["x"])
        assert len(srv.hits) == 3


def test_400_fails_at_once(echo):
    with serve(echo, "m", fail_first=[400]) as srv:
        with pytest.raises(ModelError, match="HTTP 400"):
            client(srv.base_url).generate(["x"])
        assert len(srv.hits) == 1


def test_unreachable_port_fails_fast():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    started = time.perf_counter()
    with pytest.raises(ModelError, match="cannot connect"):
        client(f"http://127.0.0.1:{port}/v1").generate(["x"])
    assert time.perf_counter() - started < 5


def test_timeout_is_an_error_not_a_hang(echo):
    with serve(echo, "m", stall_s=1.5) as srv:
        started = time.perf_counter()
        with pytest.raises(ModelError, match="timed out"):
            client(srv.base_url, timeout_s=0.3, max_retries=1).generate(["x"])
        assert time.perf_counter() - started < 3


def test_server_ignoring_n_is_asked_again():
    sampler = FakeGenerator("attacker")
    request = "Paragraph: one two three four five six seven eight nine ten eleven twelve\nQuestion:"
    with serve(sampler, "m", ignore_n=True) as srv:
        out = client(srv.base_url).generate(
            [request], n=4, max_new_tokens=40, temperature=1.0, seed=3
        )
        assert len(out[0]) == 4
        assert len(srv.hits) == 4
        seeds = [h["payload"]["seed"] for h in srv.hits]
        assert seeds == [3, 4, 5, 6]


def test_routing_chat_and_text(echo):
    with serve(echo, "m") as srv:
        gen = client(srv.base_url)
        gen.generate(["plain words", [{"role": "user", "content": "chat words"}]], max_new_tokens=5)
        paths = sorted(h["path"] for h in srv.hits)
        assert paths == ["/v1/chat/completions", "/v1/completions"]
        as_chat = client(srv.base_url, text_as_chat=True)
        as_chat.generate(["plain words"])
        assert srv.hits[-1]["path"] == "/v1/chat/completions"
        assert srv.hits[-1]["payload"]["messages"] == [{"role": "user", "content": "plain words"}]


def test_many_requests_keep_order_under_concurrency(echo):
    with serve(echo, "m") as srv:
        requests = [f"request number {i}" for i in range(12)]
        out = client(srv.base_url, max_concurrency=4).generate(requests, max_new_tokens=5)
        assert [row[0].text for row in out] == requests


def test_base_url_without_path_gets_v1_and_bad_url_rejected(echo):
    with serve(echo, "m") as srv:
        root = srv.base_url.removesuffix("/v1")
        gen = client(root)
        assert gen.base_url == srv.base_url
        assert gen.generate(["ok then"])[0][0].text == "ok then"
    with pytest.raises(ModelError, match="not an http"):
        client("localhost:8000")


# --- secrets ------------------------------------------------------------------------------------
KEYS = ["sk-proj-AbCdEf0123456789xyz", "plain-secret-42xyzzy"]


def _everything_raised(info: pytest.ExceptionInfo) -> str:
    return "".join(traceback.format_exception(info.type, info.value, info.tb))


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("status", [400, 401, 500])
def test_key_echoed_by_the_server_never_leaves_the_backend(echo, monkeypatch, caplog, key, status):
    caplog.set_level(logging.DEBUG)  # httpx's and httpcore's own debug lines too
    monkeypatch.setenv(KEY_ENV, key)
    # Two servers, so a 500 also goes through the fleet's "server is down (<error>)" log line.
    with serve(echo, "m", echo_auth=status) as one, serve(echo, "m", echo_auth=status) as two:
        gen = client(f"{one.base_url},{two.base_url}", max_retries=1)
        with pytest.raises(ModelError) as info:
            gen.generate(["x"])
    assert one.hits[0]["auth"] == f"Bearer {key}" or two.hits[0]["auth"] == f"Bearer {key}"
    message = str(info.value)
    assert f"HTTP {status}" in message and "[redacted]" in message
    assert key not in _everything_raised(info)
    logs = "\n".join(r.getMessage() for r in caplog.records)
    assert key not in logs
    if status == 500:
        assert "is down" in logs and "[redacted]" in logs  # the log did carry the body, redacted


def test_key_echoed_into_a_completion_is_removed(echo, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEYS[1])
    with serve(echo, "m", echo_auth=200) as srv:
        out = client(srv.base_url).generate(["one two", [{"role": "user", "content": "three"}]])
    assert out[0][0].text == "one two [redacted]"
    assert out[1][0].text.endswith("three Assistant: [redacted]")


def test_url_password_is_kept_out_of_manifest_and_errors():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    gen = client(f"http://bob:hunter2pw@127.0.0.1:{port}/v1")
    assert "hunter2pw" not in repr(gen) + str(gen.manifest()) + gen.base_url
    with pytest.raises(ModelError, match="cannot connect") as info:
        gen.generate(["x"])
    assert "hunter2pw" not in _everything_raised(info)


# --- bounded responses ----------------------------------------------------------------------------
@pytest.mark.parametrize("declared", [False, True], ids=["streamed", "content-length"])
def test_huge_body_is_refused_without_reading_it_all(echo, declared):
    cap, size = 2**20, 64 * 2**20
    with serve(echo, "m", huge_body=size, huge_declared=declared) as srv:
        gen = client(srv.base_url, max_response_bytes=cap)
        tracemalloc.start()
        try:
            with pytest.raises(
                ModelError, match="larger than max_response_bytes=1,048,576"
            ) as info:
                gen.generate(["x"])
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        sent = srv.bytes_sent
    assert srv.base_url in str(info.value)
    assert peak < 8 * cap, f"reading a refused body took {peak:,} bytes"
    assert sent < size, "the client read the whole body instead of stopping at the cap"


def test_max_response_bytes_reaches_the_backend_and_is_validated(echo):
    with serve(echo, "m") as srv:
        gen = load("openai:m", base_url=srv.base_url, max_response_bytes=4096)
        assert gen.settings.max_response_bytes == 4096
        assert gen.generate(["short answer"])[0][0].text == "short answer"
        with pytest.raises(ModelError, match="max_response_bytes=4,096"):
            gen.generate(["eight words of text to say each time"], n=100)  # ~10 KB of choices


@pytest.mark.parametrize(
    "option, value",
    [
        ("max_response_bytes", 10),
        ("max_response_bytes", 2**40),
        ("max_concurrency", 0),
        ("max_concurrency", 10**9),
        ("max_retries", -1),
        ("timeout_s", 0),
        ("cooloff_s", -1),
    ],
)
def test_number_options_out_of_range_are_refused(option, value):
    with pytest.raises(ModelError, match=f"{option}={value} is out of range: use"):
        client("http://127.0.0.1:1/v1", **{option: value})


@pytest.mark.parametrize("option", ["prompt_logprobs", "text_as_chat", "chat_template"])
def test_on_off_options_must_be_booleans(option):
    with pytest.raises(ModelError, match=f"{option}='false' is not an on/off value"):
        client("http://127.0.0.1:1/v1", **{option: "false"})
    assert client("http://127.0.0.1:1/v1", **{option: False}).model_id == "m"


def test_trickling_body_times_out_instead_of_hanging(echo):
    with serve(echo, "m", trickle_s=0.05) as srv, pytest.raises(ModelError, match="timed out"):
        client(srv.base_url, timeout_s=0.4, max_retries=0).generate(["x"])


# --- malformed bodies ------------------------------------------------------------------------------
MALFORMED = [
    ("choices-string", b'{"choices": "oops"}', "text", "'choices' of type str"),
    ("top-level-list", b'[{"text": "a"}]', "text", "JSON list where an object"),
    ("choices-null", b'{"choices": null}', "text", "'choices' of type NoneType"),
    ("choices-missing", b'{"id": "x"}', "text", "'choices' of type NoneType"),
    (
        "no-text",
        b'{"choices": [{"index": 0, "finish_reason": "stop"}]}',
        "text",
        "choice 0 has no 'text'",
    ),
    ("text-not-string", b'{"choices": [{"text": 5}]}', "text", "'text' of type int"),
    ("choice-not-object", b'{"choices": ["a"]}', "text", "choice 0 is a str"),
    ("no-message", b'{"choices": [{"text": "a"}]}', "chat", "choice 0 has no 'message' object"),
    (
        "message-string",
        b'{"choices": [{"message": "a"}]}',
        "chat",
        "choice 0 has no 'message' object",
    ),
    (
        "no-content",
        b'{"choices": [{"message": {"role": "assistant"}}]}',
        "chat",
        "no 'message.content'",
    ),
    ("html", b"<html>502 Bad Gateway</html>", "text", "not JSON: '<html>502 Bad Gateway</html>'"),
    ("not-utf8", b"\xff\xfe\x00garbage", "text", "not JSON"),
    (
        "error-object",
        b'{"error": {"message": "overloaded"}}',
        "text",
        "answered with an error.*overloaded",
    ),
    ("empty-choices", b'{"choices": []}', "text", "returned no choices"),
]


@pytest.mark.parametrize(
    "body, kind, expected", [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED]
)
def test_malformed_body_is_a_model_error_naming_endpoint_and_fault(echo, body, kind, expected):
    request = "x" if kind == "text" else [{"role": "user", "content": "x"}]
    # never AttributeError/KeyError/TypeError
    with serve(echo, "m", raw_body=body) as srv, pytest.raises(ModelError, match=expected) as info:
        client(srv.base_url).generate([request])
    assert f"endpoint {srv.base_url}" in str(info.value)


def test_odd_but_usable_bodies_are_read(echo):
    body = (
        b'{"choices": [{"text": "b", "index": 1, "finish_reason": "stop"}, '
        b'{"text": "a", "index": 0, "finish_reason": "stop"}, {"text": "c", "index": "2"}],'
        b' "usage": "n/a"}'
    )
    with serve(echo, "m", raw_body=body) as srv:
        out = client(srv.base_url).generate(["x"], n=3)
    assert [c.text for c in out[0]] == [
        "a",
        "b",
        "c",
    ]  # index order; a non-int index keeps its place
    refusal = b'{"choices": [{"message": {"role": "assistant", "content": null, "refusal": "no"}}]}'
    with serve(echo, "m", raw_body=refusal) as srv:
        out = client(srv.base_url).generate([[{"role": "user", "content": "x"}]])
    assert out[0][0].text == ""


def test_an_answer_with_a_number_longer_than_python_reads_is_a_model_error_naming_it():
    from memprobe_core.models.openai.parse import decode_json

    body = b'{"id": "c1", "created": ' + b"9" * 5000 + b', "choices": []}'
    with pytest.raises(ModelError, match=r"^http://h/v1 answered with a number of more digits"):
        decode_json(body, "http://h/v1")
