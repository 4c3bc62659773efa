"""Keys where they do not belong: a key given as --api-key-env's variable name, a key in a base
URL's query string or fragment, and the credential shapes ``redact_secrets`` must catch.

Every refusal must happen before a run is recorded, and no message may repeat the value refused.
"""

from __future__ import annotations

import pytest

from memprobe_core.cli import main
from memprobe_core.models import clear_cache, load
from memprobe_core.models.base import ModelError
from memprobe_core.models.openai import OpenAIGenerator, parse_base_urls
from memprobe_core.secrets import REDACTED, redact_secrets
from memprobe_core.store import Store
from tests.faults.helpers import one_line_error
from tests.helpers.openai_server import serve

WORDS = " ".join(f"w{i}" for i in range(60))
KEY = "sk-proj-AbCdEf0123456789XyZ_hostile"
PROBE = ["probe", WORDS, "--method", "ps_inst", "--length", "30", "--split-tokenizer", "whitespace"]


# --- redact_secrets: the shapes of a credential in a URL ------------------------------------------
@pytest.mark.parametrize(
    "text, secret",
    [
        ("http://h:8000/v1?api-key=abc123def", "abc123def"),
        ("http://h:8000/v1?key=abc123def", "abc123def"),
        ("http://h:8000/v1?n=2&token=abc123def", "abc123def"),
        (f"GET /v1 with {KEY} attached", KEY),
        ("sent Bearer abc123def.ghi", "abc123def.ghi"),
        # held out: shapes the fix was not written against
        ("http://h:8000/v1?access_token=abc123def&n=2", "abc123def"),
        ("http://h:8000/v1?apikey=abc123def", "abc123def"),
        ("http://h:8000/v1#key=abc123def", "abc123def"),
        ("http://h:8000/v1#access_token=abc123def&state=x", "abc123def"),
        ("https://bucket/o?X-Amz-Signature=abc123def&X-Amz-Date=1", "abc123def"),
        ("http://h/v1?client_secret=abc123def", "abc123def"),
        ("http://h/v1?password=abc123def", "abc123def"),
    ],
)
def test_url_credential_shapes_are_redacted(text, secret):
    out = redact_secrets(text)
    assert secret not in out and REDACTED in out
    assert out.split(REDACTED)[0] == text.split(secret)[0]  # what came before it is kept


@pytest.mark.parametrize(
    "text",
    [
        "http://h:8000/v1/completions?max_tokens=16&monkey=3&keyboard=1",
        "POST /v1/chat/completions answered 200",
        "the key is in OPENAI_API_KEY",
    ],
)
def test_ordinary_url_parameters_are_kept(text):
    assert redact_secrets(text) == text


# --- 1. the key given where its variable's NAME belongs --------------------------------------------
@pytest.mark.parametrize("value", [KEY, "Bearer abc123", "abc def", "1ABC", "MY-KEY"])
def test_api_key_env_that_is_not_a_variable_name_is_refused(tmp_path, capsys, value):
    store = tmp_path / "runs.sqlite"
    with serve(load("fake:echo"), "served-model") as server:
        clear_cache()
        argv = [
            "--store",
            str(store),
            *PROBE,
            "--victim",
            "served-model",
            "--base-url",
            server.base_url,
            "--api-key-env",
            value,
        ]
        assert main(argv) == 2
        assert server.hits == []  # no request went out keyless
    captured = capsys.readouterr()
    line = one_line_error(captured.err)
    assert "--api-key-env is not a variable name" in line and "OPENAI_API_KEY" in line
    assert value not in captured.err + captured.out
    assert not store.exists()  # refused before a run was recorded


def test_audit_refuses_a_key_as_api_key_env_before_recording(tmp_path, capsys):
    store = tmp_path / "runs.sqlite"
    argv = ["--store", str(store), "audit", "--corpus", "--per-domain", "1", "--methods"]
    argv += ["ps_base", "--lengths", "30", "--victim", "fake", "--base", "fake"]
    assert main([*argv, "--api-key-env", KEY]) == 2
    captured = capsys.readouterr()
    assert KEY not in captured.err + captured.out
    assert not store.exists()


def test_a_variable_name_is_still_accepted(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("MY_ENDPOINT_KEY_2", KEY)
    store = tmp_path / "runs.sqlite"
    with serve(load("fake:echo"), "served-model", api_key=KEY) as server:
        clear_cache()
        argv = ["--store", str(store), *PROBE, "--victim", "served-model"]
        argv += ["--base-url", server.base_url, "--api-key-env", "MY_ENDPOINT_KEY_2"]
        assert main(argv) == 0, capsys.readouterr().err
    assert KEY.encode() not in store.read_bytes()


def test_library_refuses_a_key_as_api_key_env():
    clear_cache()
    with pytest.raises(ModelError) as caught:
        load("openai:m", base_url="http://127.0.0.1:9/v1", api_key_env=KEY)
    assert KEY not in str(caught.value) and "api_key_env" in str(caught.value)
    with pytest.raises(ModelError):
        OpenAIGenerator("m", base_url="http://127.0.0.1:9/v1", api_key_env="not a name")
    # A name, or "" (no key at all), is fine.
    OpenAIGenerator("m", base_url="http://127.0.0.1:9/v1", api_key_env="MY_KEY_1").close()
    OpenAIGenerator("m", base_url="http://127.0.0.1:9/v1", api_key_env="").close()


# --- 2. a key in the base URL's query string or fragment ----------------------------------------
HOSTILE_URLS = [
    f"http://127.0.0.1:9/v1?api-key={KEY}",
    f"http://127.0.0.1:9/v1?key={KEY}",
    f"http://127.0.0.1:9/v1?n=1&token={KEY}",
    # held out
    f"http://127.0.0.1:9/v1?access_token={KEY}",
    f"http://127.0.0.1:9/v1?apikey={KEY}",
    f"http://127.0.0.1:9/v1#key={KEY}",
    f"http://127.0.0.1:8/v1,http://127.0.0.1:9/v1?api-key={KEY}",  # the second of a fleet
]


@pytest.mark.parametrize("url", HOSTILE_URLS)
def test_base_url_with_a_query_or_fragment_is_refused(tmp_path, capsys, url):
    store = tmp_path / "runs.sqlite"
    argv = ["--store", str(store), *PROBE, "--victim", "served-model", "--base-url", url]
    assert main(argv) == 2
    captured = capsys.readouterr()
    line = one_line_error(captured.err)
    assert "--base-url holds a query string or a fragment" in line and "--api-key-env" in line
    assert KEY not in captured.err + captured.out
    assert not store.exists()


@pytest.mark.parametrize("url", HOSTILE_URLS)
def test_library_refuses_a_base_url_with_a_query_or_fragment(url):
    with pytest.raises(ModelError) as caught:
        parse_base_urls(url)
    assert KEY not in str(caught.value) and "query string or a fragment" in str(caught.value)


def test_stored_endpoints_hold_no_query(tmp_path, capsys, monkeypatch):
    # A clean URL is stored as given; the manifest's endpoints come from the same parsed list.
    with serve(load("fake:echo"), "served-model") as server:
        clear_cache()
        store = tmp_path / "runs.sqlite"
        argv = ["--store", str(store), *PROBE, "--victim", "served-model"]
        assert main([*argv, "--base-url", server.base_url]) == 0, capsys.readouterr().err
    with Store(store) as opened:
        config = opened.get_run(1)["config"]
    assert config["models"]["load_options"]["base_url"] == server.base_url
    assert "?" not in str(config) and "#" not in server.base_url
