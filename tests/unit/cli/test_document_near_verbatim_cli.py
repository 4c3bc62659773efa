"""``memprobe document``'s near-verbatim lower bound (docs/method.md §22): ``--json`` gives the
document's bound and its window, the text its bracket, ``--near-verbatim-windows 0`` measures
none, and bad values of the three flags exit 2 naming the flag; on a tiny random model."""

from __future__ import annotations

import json

import pytest

from memprobe_core.cli import main
from memprobe_core.documents.map_near_verbatim import AFTER_WINDOWS
from memprobe_core.store import Store
from tests.unit.cli.tiny_victim import TEXT

SMALL = ["--prefix-tokens", "8", "--suffix-tokens", "8", "--stride", "8", "--pz-top-k", "0"]


@pytest.fixture
def doc(tmp_path):
    path = tmp_path / "book.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


def document(tmp_path, *argv):
    return main(["--store", str(tmp_path / "runs.sqlite"), "document", *argv])


def test_json_gives_the_documents_bound_and_window_and_show_gives_it_again(
    tmp_path, doc, tiny_models, capsys
):
    flags = ["--near-verbatim-windows", "2", "--near-verbatim-edits", "1"]
    assert document(tmp_path, str(doc), "--victim", "tiny", *SMALL, *flags, "--json") == 0
    out = capsys.readouterr()
    shown = json.loads(out.out)
    assert out.err.index(AFTER_WINDOWS) > out.err.index("windows/s")  # said after the last one
    windows = shown["near_verbatim_windows"]
    assert len(windows) == 2 and {w["near_verbatim_edits"] for w in windows} == {1}
    best = max(windows, key=lambda w: w["near_verbatim_log10_lower"])
    assert shown["near_verbatim_log10_lower"] == best["near_verbatim_log10_lower"]
    assert shown["near_verbatim_window"] == best["window"]
    assert best["near_verbatim_log10_lower"] >= best["log10_p_z"]
    assert document(tmp_path, "--show", "1") == 0  # stored: shown again without a search
    out = capsys.readouterr().out
    assert "Extraction risk (temperature 1): at least" in out and "within 1 edit;" in out
    assert f"window {best['window']} (suffix tokens" in out


def test_zero_windows_measures_none(tmp_path, doc, tiny_models, capsys):
    argv = [str(doc), "--victim", "tiny", *SMALL, "--near-verbatim-windows", "0", "--json"]
    assert document(tmp_path, *argv) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["near_verbatim_windows"] == [] and shown["near_verbatim_log10_lower"] is None


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--near-verbatim-windows", "-1"),
        ("--near-verbatim-windows", "1001"),
        ("--near-verbatim-beams", "0"),
        ("--near-verbatim-edits", "1.5"),
    ],
)
def test_bad_values_exit_2_naming_the_flag(tmp_path, doc, tiny_models, capsys, flag, value):
    assert document(tmp_path, str(doc), "--victim", "tiny", flag, value) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"memprobe: error: {flag} {value}: give ")
    stored = tmp_path / "runs.sqlite"
    assert not stored.exists() or Store(stored).list_runs() == []  # a refusal leaves no run


def test_the_flags_do_not_apply_to_resume_or_continue(tmp_path, doc, capsys):
    assert document(tmp_path, "--resume", "1", "--near-verbatim-windows", "2") == 2
    assert "--near-verbatim-windows does not apply to --resume" in capsys.readouterr().err
    argv = [str(doc), "--mode", "continue", "--victim", "tiny", "--near-verbatim-beams", "5"]
    assert document(tmp_path, *argv) == 2
    assert "--near-verbatim-beams applies to --mode map" in capsys.readouterr().err
