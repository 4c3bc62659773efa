"""Hostile dataset files through ``memprobe audit`` and the dashboard upload: millions of tiny
rows, one huge CSV field, lone surrogate escapes, a column named twice, codecs that are not text
encodings, and flags that do not apply to what is audited."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from memprobe_core.cli import main
from memprobe_core.snippets import loaders
from memprobe_core.store import Store
from tests.faults.helpers import one_line_error

WORDS = " ".join(f"w{i}" for i in range(60))
# A model name that cannot load: a refusal that came after loading would exit 3, not 2.
NO_MODEL = ["--victim", "no/such-model", "--base", "no/such-model", "--backend", "hf"]
FAKE = ["--methods", "ps_inst", "--lengths", "30", "--backend", "fake"]
FAKE += ["--split-tokenizer", "whitespace"]


def _audit(store: Path, *args: str) -> list[str]:
    return ["--store", str(store), "audit", *args]


def _jsonl(path: Path, texts: list[str]) -> Path:
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), "utf-8")
    return path


def _many_rows(path: Path, count: int, *, long_first: int = 0) -> Path:
    """``count`` tiny JSONL rows (the first ``long_first`` long enough to audit)."""
    with path.open("w", encoding="utf-8") as handle:
        for i in range(count):
            text = f"{WORDS} {i}" if i < long_first else f"r{i}"
            handle.write(f'{{"text": "{text}"}}\n')
    return path


# --- 1. millions of tiny rows ----------------------------------------------------------------


def test_more_rows_than_max_snippets_is_refused_before_a_store_or_a_model(
    tmp_path, store_path, capsys
):
    # The trial's file held 2.1 million rows under --max-bytes: 120 s and 4.78 GB before the
    # first unit. One row past the default bound is enough to be refused, in one line.
    data = _many_rows(tmp_path / "data.jsonl", loaders.MAX_FILE_SNIPPETS + 50)
    started = time.monotonic()
    assert main(_audit(store_path, str(data), *NO_MODEL)) == 2
    elapsed = time.monotonic() - started
    line = one_line_error(capsys.readouterr().err)
    assert line == (
        "memprobe: error: file 'data.jsonl' holds more than 100,000 rows (--max-snippets "
        "100000): audit a part with --limit N, or pass a larger --max-snippets"
    )
    assert not store_path.exists()  # nothing stored, no model loaded (that would exit 3)
    assert elapsed < 60, elapsed  # about 1.5 s here; generous for a busy CI machine


def test_max_snippets_flag_sets_the_bound(tmp_path, store_path, capsys):
    data = _many_rows(tmp_path / "d.jsonl", 12, long_first=12)
    assert main(_audit(store_path, str(data), "--max-snippets", "10", *NO_MODEL)) == 2
    assert "more than 10 rows (--max-snippets 10)" in one_line_error(capsys.readouterr().err)
    assert not store_path.exists()
    assert main(_audit(store_path, str(data), "--max-snippets", "12", *FAKE)) == 0
    with Store(store_path) as store:
        assert len(store.samples(1)) == 12


@pytest.mark.parametrize("value", ["0", "-1", "10000001"])
def test_max_snippets_out_of_range_is_one_line(tmp_path, store_path, capsys, value):
    data = _jsonl(tmp_path / "d.jsonl", [WORDS])
    assert main(_audit(store_path, str(data), "--max-snippets", value, *NO_MODEL)) == 2
    assert one_line_error(capsys.readouterr().err) == (
        f"memprobe: error: --max-snippets {value}: give a whole number from 1 to 10,000,000"
    )
    assert not store_path.exists()


def test_limit_under_the_bound_audits_the_first_rows_of_a_bigger_file(tmp_path, store_path, capsys):
    # Only the rows up to the 3rd snippet are read: the rest of the file (past the bound) is
    # never looked at, so a part of a big file can be audited.
    data = _many_rows(tmp_path / "big.jsonl", loaders.MAX_FILE_SNIPPETS + 50, long_first=3)
    started = time.monotonic()
    assert main(_audit(store_path, str(data), "--limit", "3", *FAKE)) == 0
    assert time.monotonic() - started < 60
    assert "audit run 1: 3 snippet(s)" in capsys.readouterr().err
    with Store(store_path) as store:
        assert [s.id for s in store.samples(1)] == ["big:1", "big:2", "big:3"]


def test_limit_over_the_bound_says_to_raise_max_snippets(tmp_path, store_path, capsys):
    data = _many_rows(tmp_path / "d.jsonl", 30)
    argv = _audit(store_path, str(data), "--max-snippets", "10", "--limit", "20", *NO_MODEL)
    assert main(argv) == 2
    line = one_line_error(capsys.readouterr().err)
    assert "--limit 20 asks for more snippets than that: pass a larger --max-snippets" in line


def test_dashboard_upload_over_the_snippet_bound_is_refused(monkeypatch):
    # The dashboard reads uploads with the same loader and bound; it says so in its own words.
    import ui_common.snippets as ui_snippets

    shown: dict[str, list[str]] = {"error": [], "text": []}
    fake_st = SimpleNamespace(
        error=lambda message: shown["error"].append(str(message)),
        text=lambda message: shown["text"].append(str(message)),
    )
    monkeypatch.setattr(ui_snippets, "st", fake_st)
    monkeypatch.setattr(loaders, "MAX_FILE_SNIPPETS", 1000)  # read at upload time
    data = "".join(f'{{"text": "t{i}"}}\n' for i in range(5000)).encode()
    upload = SimpleNamespace(name="rows.jsonl", size=len(data), getvalue=lambda: data)
    assert ui_snippets.read_upload(upload) is None
    (message,) = shown["error"]
    plain = message.replace("\\", "")  # Markdown escapes undone, as a reader sees it
    assert plain.startswith(
        "rows.jsonl holds more than 1,000 rows; uploads are capped at 1,000 snippets. Upload a "
        "part of the file, or audit it with the `memprobe audit FILE --limit N` command"
    )
    part = b"".join(data.splitlines(keepends=True)[:10])
    small = SimpleNamespace(name="ok.jsonl", size=len(part), getvalue=lambda: part)
    result: Any = ui_snippets.read_upload(small)
    assert result is not None and len(result.snippets) == 10 and not shown["error"][1:]


# --- 2. one long CSV field -------------------------------------------------------------------


def test_a_csv_with_a_250_kb_field_audits_like_the_same_jsonl(tmp_path, store_path, capsys):
    long_text = " ".join(f"long{i}" for i in range(40_000))  # ~270 KB
    texts = [WORDS, long_text, WORDS + " end"]
    jsonl = _jsonl(tmp_path / "rows.jsonl", texts)
    csv_path = tmp_path / "rows.csv"
    csv_path.write_text("text\n" + "".join(f'"{t}"\n' for t in texts), "utf-8")
    for number, path in enumerate([jsonl, csv_path], start=1):
        assert main(_audit(store_path, str(path), *FAKE)) == 0, capsys.readouterr().err
        assert "skipped" not in capsys.readouterr().err
        with Store(store_path) as store:
            assert [len(s.text) for s in store.samples(number)] == [len(t) for t in texts]


# --- 3. a lone surrogate escape ----------------------------------------------------------------


def test_a_lone_surrogate_escape_skips_its_row_naming_file_and_row(tmp_path, store_path, capsys):
    data = tmp_path / "s.jsonl"
    data.write_text(
        json.dumps({"text": WORDS})
        + "\n"
        + '{"text": "broken \\ud800 escape '
        + WORDS
        + '"}\n'
        + json.dumps({"text": WORDS + " last"})
        + "\n",
        "utf-8",
    )
    assert main(_audit(store_path, str(data), *FAKE)) == 0
    err = capsys.readouterr().err
    assert f"{data}: row 2 skipped: text holds a lone surrogate '\\ud800' at character 8" in err
    with Store(store_path) as store:
        assert [s.id for s in store.samples(1)] == ["s:1", "s:3"]
        assert [r["row"] for r in store.get_run(1)["config"]["dataset"]["rejected"]] == [2]


# --- 4. a column named twice -----------------------------------------------------------------


def test_a_csv_header_naming_a_column_twice_is_refused(tmp_path, store_path, capsys):
    data = tmp_path / "dup.csv"
    data.write_text(f"text,text\n{WORDS},other\n", "utf-8")
    assert main(_audit(store_path, str(data), *NO_MODEL)) == 2
    assert one_line_error(capsys.readouterr().err) == (
        "memprobe: error: file 'dup.csv' names column 'text' twice in its header (columns 1 "
        "and 2); rename one so each column has its own name"
    )
    assert not store_path.exists()


# --- 5. a codec that is not a text encoding ----------------------------------------------------


@pytest.mark.parametrize("codec", ["rot13", "base64", "bz2"])
def test_encoding_that_is_not_a_text_encoding_is_one_line(tmp_path, store_path, capsys, codec):
    data = _jsonl(tmp_path / "d.jsonl", [WORDS])
    assert main(_audit(store_path, str(data), "--encoding", codec, *NO_MODEL)) == 2
    assert one_line_error(capsys.readouterr().err) == (
        f"memprobe: error: --encoding {codec!r} is not a text encoding (it does not turn bytes "
        "into text); pass a text encoding, e.g. --encoding 'utf-8', --encoding 'latin-1' or "
        "--encoding 'cp1252'"
    )
    assert not store_path.exists()


# --- 6. flags that do not apply --------------------------------------------------------------


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--text-column", "nosuch"),
        ("--id-column", "id"),
        ("--domain-column", "kind"),
        ("--label-column", "label"),
        ("--txt-mode", "blocks"),
        ("--encoding", "latin-1"),
        ("--max-bytes", "1000"),
        ("--max-snippets", "10"),
    ],
)
def test_dataset_flags_with_corpus_are_refused(store_path, capsys, flag, value):
    assert main(_audit(store_path, "--corpus", flag, value, *NO_MODEL)) == 2
    assert one_line_error(capsys.readouterr().err) == (
        f"memprobe: error: {flag} applies to a dataset file, not to --corpus (the built-in "
        "corpus has its own texts, ids, domains and labels): leave it out"
    )
    assert not store_path.exists()


def test_domain_with_corpus_points_at_domains(store_path, capsys):
    assert main(_audit(store_path, "--corpus", "--domain", "legal", *NO_MODEL)) == 2
    line = one_line_error(capsys.readouterr().err)
    assert line.startswith("memprobe: error: --domain applies to a dataset file, not to --corpus")
    assert line.endswith("pick the corpus's domains with --domains")


@pytest.mark.parametrize("mode", ["blocks", "file"])
@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_txt_mode_for_a_file_with_rows_is_refused(tmp_path, store_path, capsys, mode, suffix):
    data = tmp_path / f"d{suffix}"
    data.write_text(json.dumps({"text": WORDS}) + "\n" if suffix == ".jsonl" else "text\nx\n")
    assert main(_audit(store_path, str(data), "--txt-mode", mode, *NO_MODEL)) == 2
    assert one_line_error(capsys.readouterr().err) == (
        f"memprobe: error: --txt-mode applies to .txt datasets only; {data} is a {suffix} "
        "dataset with one snippet per row: leave it out"
    )
    assert not store_path.exists()


@pytest.mark.parametrize(
    "flag, value, hint",
    [
        ("--domains", "legal", "a dataset's domains come from --domain-column and --domain"),
        ("--per-domain", "2", "audit the first N snippets with --limit N"),
    ],
)
def test_corpus_flags_with_a_dataset_are_refused(tmp_path, store_path, capsys, flag, value, hint):
    data = _jsonl(tmp_path / "d.jsonl", [WORDS])
    assert main(_audit(store_path, str(data), flag, value, *NO_MODEL)) == 2
    assert one_line_error(capsys.readouterr().err) == (
        f"memprobe: error: {flag} applies to --corpus, not to a dataset file: {hint}"
    )
    assert not store_path.exists()


def test_a_txt_dataset_still_takes_txt_mode_and_encoding(tmp_path, store_path, capsys):
    data = tmp_path / "notes.txt"
    data.write_bytes(f"{WORDS} café\n\n{WORDS} two".encode("latin-1"))
    argv = _audit(store_path, str(data), "--txt-mode", "blocks", "--encoding", "latin-1", *FAKE)
    assert main(argv) == 0, capsys.readouterr().err
    with Store(store_path) as store:
        assert [s.id for s in store.samples(1)] == ["notes:1", "notes:2"]
