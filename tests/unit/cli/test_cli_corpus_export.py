"""`memprobe corpus members|nonmembers --export FILE`: the two demo sets as JSON Lines that
`memprobe infer` (and the dashboard's uploads) read, and the paths it refuses."""

from __future__ import annotations

import json
import os

import pytest

from memprobe_core.audit import inference_snippets
from memprobe_core.cli import main
from memprobe_core.cli.errors import EXIT_USAGE
from memprobe_core.snippets import nonmembers as nm
from memprobe_core.snippets.corpus import demo_corpus
from memprobe_core.snippets.loaders import LoadSpec, load_snippets


@pytest.fixture
def base(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMPROBE_HOME", str(tmp_path / "home"))
    return ["--store", str(tmp_path / "runs.sqlite"), "corpus"]


def test_both_sets_export_as_jsonl_that_infer_reads(base, tmp_path, capsys):
    nm.build(seed=7, per_domain=5)
    members, nonmembers = tmp_path / "members.jsonl", tmp_path / "nonmembers.jsonl"
    assert main([*base, "members", "--domain", "legal", "--export", str(members)]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""  # no listing: the file is the output
    expected = demo_corpus(domains="legal")
    assert f"{len(expected)} member texts (legal {len(expected)}) written to" in captured.err
    assert main([*base, "nonmembers", "--domain", "legal", "--export", str(nonmembers)]) == 0
    assert "5 non-member texts (legal 5; seed 7) written to" in capsys.readouterr().err

    first = json.loads(members.read_text("utf-8").splitlines()[0])
    assert set(first) == {"id", "text", "domain", "source", "label"}
    # As `memprobe infer` loads them (each file's labels are the set's), and as an audit does.
    suspect = load_snippets(members, LoadSpec(id_column="id", read_labels=False)).snippets
    heldout = load_snippets(nonmembers, LoadSpec(read_labels=False)).snippets
    assert [s.text for s in suspect] == [s.text for s in expected]
    assert [s.id for s in suspect] == [s.id for s in expected]
    assert [s.text for s in heldout] == [s.text for s in nm.generate(7, 5).snippets[:5]]
    assert len(inference_snippets(suspect, heldout)) == len(expected) + 5
    labelled = load_snippets(members).snippets + load_snippets(nonmembers).snippets
    assert {s.label for s in labelled} == {"member", "nonmember"}


def test_an_unwritable_export_path_is_bad_usage(base, tmp_path, capsys):
    missing = tmp_path / "no" / "such" / "folder" / "members.jsonl"
    assert main([*base, "members", "--export", str(missing)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"cannot write --export to {missing}" in err and "does not exist" in err
    assert main([*base, "nonmembers", "--export", str(tmp_path)]) == EXIT_USAGE
    assert "it is a folder; give a file name" in capsys.readouterr().err
    assert not (tmp_path / "home" / nm.FILE_NAME).exists()  # refused before any work


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_folder_is_bad_usage(base, tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        assert main([*base, "members", "--export", str(locked / "m.jsonl")]) == EXIT_USAGE
    finally:
        locked.chmod(0o700)
    assert "cannot be written" in capsys.readouterr().err


def test_export_with_show_is_refused(base, tmp_path, capsys):
    target = tmp_path / "m.jsonl"
    assert main([*base, "--show", "x", "--export", str(target)]) == EXIT_USAGE
    assert "give one of them" in capsys.readouterr().err
    assert not target.exists()


def test_help_documents_export(base, capsys):
    assert main(["corpus", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--export FILE" in text and "memprobe infer" in text
