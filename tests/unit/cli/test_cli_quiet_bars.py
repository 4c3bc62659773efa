"""The CLI keeps the hub's and transformers' progress bars off stderr unless --verbose."""

from __future__ import annotations

import importlib

import pytest
import transformers
from transformers.utils import logging as hf_logging

from tests.helpers.tiny_models import tiny_causal_lm

# The package's __init__ exports the function main(); the module is imported by its path.
cli_main = importlib.import_module("memprobe_core.cli.main")


@pytest.fixture
def saved_model(tmp_path):
    model, _ = tiny_causal_lm()
    model.save_pretrained(tmp_path)
    return tmp_path


@pytest.fixture(autouse=True)
def bars_restored():
    yield
    hf_logging.enable_progress_bar()


def _load_stderr(path, capfd) -> str:
    capfd.readouterr()
    transformers.AutoModelForCausalLM.from_pretrained(path)
    return capfd.readouterr().err


def test_loading_a_model_prints_no_bar_after_the_cli_quiets_them(saved_model, capfd, monkeypatch):
    monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS", raising=False)
    hf_logging.enable_progress_bar()
    assert "Loading weights" in _load_stderr(saved_model, capfd)  # the bar this is about
    cli_main._quiet_library_bars()
    assert "Loading weights" not in _load_stderr(saved_model, capfd)


def test_a_user_who_asks_for_the_bars_keeps_them(saved_model, capfd, monkeypatch):
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "0")
    hf_logging.enable_progress_bar()
    cli_main._quiet_library_bars()
    assert "Loading weights" in _load_stderr(saved_model, capfd)


def test_verbose_runs_keep_the_bars(monkeypatch):
    calls = []
    monkeypatch.setattr(cli_main, "_quiet_library_bars", lambda: calls.append("quiet"))
    for argv, expected in ((["corpus"], ["quiet"]), (["--verbose", "corpus"], [])):
        calls.clear()
        assert cli_main.main(argv) == 0
        assert calls == expected, argv
