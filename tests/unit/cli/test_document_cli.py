"""``memprobe document``: a map scored, stored, shown again and resumed from the command line; bad
documents and window options refused in one line with exit code 2."""

from __future__ import annotations

import json

import pytest

from memprobe_core.cli import main
from memprobe_core.documents import map_run, reading
from memprobe_core.store import Store
from tests.unit.cli.tiny_victim import TEXT

SMALL = ["--prefix-tokens", "8", "--suffix-tokens", "8", "--stride", "8", "--batch-windows", "4"]


@pytest.fixture
def doc(tmp_path):
    path = tmp_path / "book.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


def run(tmp_path, *argv):
    return main(["--store", str(tmp_path / "runs.sqlite"), "document", *argv])


def test_a_map_is_scored_stored_and_shown_again(tmp_path, doc, tiny_models, capsys):
    csv, html = tmp_path / "w.csv", tmp_path / "m.html"
    code = run(
        tmp_path, str(doc), "--victim", "tiny", *SMALL, "--csv", str(csv), "--html", str(html)
    )
    out = capsys.readouterr()
    assert code == 0
    assert out.out.startswith("extraction map of book.txt on tiny (run 1, finished)")
    assert "windows/s" in out.err  # progress
    assert csv.read_text().startswith("window,start_token,")
    assert "Extraction map of book.txt" in html.read_text()
    assert run(tmp_path, "--show", "1", "--json") == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["run_id"] == 1 and shown["status"] == "finished"
    assert shown["options"] == {"prefix_tokens": 8, "suffix_tokens": 8, "stride": 8}
    assert shown["summary"]["windows"] == shown["windows_total"] > 10
    assert shown["pz_scheme"] == "temperature 1, top-k 40"


def test_resume_goes_on_with_the_recorded_victim(tmp_path, doc, tiny, tiny_models, capsys):
    store = Store(tmp_path / "runs.sqlite")
    run_id = map_run.start_map(
        store,
        TEXT,
        tiny,
        name="book.txt",
        victim_name="tiny",
        options=map_run.MapOptions(8, 8, 8, 4),
    )
    assert run(tmp_path, "--resume", str(run_id), "--json") == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["status"] == "finished" and shown["summary"]["windows"] == shown["windows_total"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "give exactly one of"),
        (["--builtin", "apache-2.0", "--show", "1"], "give exactly one of"),
        (["--stride", "9", "--suffix-tokens", "8"], "give at most --suffix-tokens (8)"),
        (["--prefix-tokens", "0"], "--prefix-tokens 0"),
        (["--show", "5"], "run 5 is not in store"),
        (["--stride", "8", "--mode", "continue"], "--stride applies to --mode map"),
        (["--pz-top-k", "5", "--mode", "continue"], "--pz-top-k applies to --mode map"),
        (["--best-of-n", "3"], "--best-of-n applies to --mode continue"),
        (["--show", "1", "--stride", "8"], "--stride does not apply to --show"),
        (["--resume", "1", "--mode", "continue"], "--mode does not apply to --resume"),
        (["--resume", "1", "--victim", "tiny"], "--victim does not apply to --resume"),
        (["--show", "1", "--victim", "tiny"], "--victim does not apply to --show"),
        (["--prefetch-window", "4"], "--prefetch-window does not apply to a map"),
        (["--max-attempts", "2"], "--max-attempts does not apply to a map"),
    ],
)
def test_bad_requests_are_refused_in_one_line(tmp_path, doc, tiny_models, capsys, argv, message):
    if argv[:1] in (
        ["--stride"],
        ["--prefix-tokens"],
        ["--pz-top-k"],
        ["--best-of-n"],
        ["--prefetch-window"],
        ["--max-attempts"],
    ):
        argv = [str(doc), *argv]
    assert run(tmp_path, *argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "holds no words"),
        (b"   \n", "holds no words"),
        (b"text\x00with a NUL", "is binary"),
        (b"caf\xe9 latin-1", "is not UTF-8"),
        (b"too short for a window", "fewer than one window"),
    ],
)
def test_documents_that_cannot_be_mapped_are_refused(
    tmp_path, tiny_models, capsys, content, message
):
    path = tmp_path / "d.txt"
    path.write_bytes(content)
    assert run(tmp_path, str(path), "--victim", "tiny") == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert Store(tmp_path / "runs.sqlite").list_runs() == []  # nothing half-made is stored


def test_an_interrupted_map_says_once_how_to_go_on_in_its_store(
    tmp_path, doc, tiny_models, monkeypatch, capsys
):
    from memprobe_core.cli import documents as cli_documents

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_documents, "run_map", interrupted)
    store = tmp_path / "my runs.sqlite"  # a space: the hint quotes the path
    code = main(["--store", str(store), "document", str(doc), "--victim", "tiny", *SMALL])
    assert code == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        f"interrupted; what was scored is kept: memprobe --store '{store}' document --resume 1"
    )
    assert "interrupted" not in "".join(err[:-1])  # said once, not again by main


def test_a_document_one_byte_over_the_cap_says_so_in_bytes(tmp_path, monkeypatch, capsys):
    # In MiB a file one byte over 32 MiB read "32.0 MiB; capped at 32 MiB".
    monkeypatch.setattr(reading, "MAX_DOCUMENT_BYTES", 2**20)
    path = tmp_path / "big.txt"
    path.write_bytes(b"w " * 2**19 + b"x")
    assert run(tmp_path, str(path)) == 2
    err = capsys.readouterr().err
    assert "is 1,048,577 bytes; documents are capped at 1,048,576 bytes (1 MiB" in err


def test_a_run_that_is_not_a_map_is_refused(tmp_path, capsys):
    Store(tmp_path / "runs.sqlite").create_run("audit", config={"methods": []})
    assert run(tmp_path, "--show", "1") == 2
    assert "not a document's extraction map" in capsys.readouterr().err


def test_an_output_may_not_overwrite_the_document(tmp_path, doc, tiny_models, capsys):
    assert run(tmp_path, str(doc), "--victim", "tiny", *SMALL, "--csv", str(doc)) == 2
    assert doc.read_text() == TEXT
