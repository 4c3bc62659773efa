"""The openai backend against a real HTTP server on 127.0.0.1: auth, errors, retries, n, routing."""

from __future__ import annotations

import socket
import time

import pytest

from memprobe_core.models import ModelError
from memprobe_core.models.fake import FakeGenerator
from memprobe_core.models.openai_backend import OpenAIGenerator
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
        out = client(srv.base_url).generate([request], n=4, max_new_tokens=40, temperature=1.0, seed=3)
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
