"""``memprobe report RUN --html``: the file, and the exit codes of a bad path or run."""

from __future__ import annotations

from memprobe_core.cli import main
from tests.helpers.labelled_run import SCRIPT, labelled_run


def test_report_html_writes_one_self_contained_file(tmp_path, capsys) -> None:
    store, run_id = labelled_run(tmp_path / "runs.sqlite")
    out = tmp_path / "report.html"
    code = main(["--store", str(store.path), "report", str(run_id), "--html", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    text = out.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and "<h2>Table 1</h2>" in text
    assert SCRIPT not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert f"wrote {out}" in captured.err
    assert "Table 1" in captured.out  # the terminal report is still printed


def test_report_html_takes_the_report_options(tmp_path, capsys) -> None:
    store, run_id = labelled_run(tmp_path / "runs.sqlite")
    out = tmp_path / "report.html"
    argv = ["--store", str(store.path), "report", str(run_id), "--html", str(out)]
    assert main([*argv, "--select", "max_mem", "--resamples", "200", "--ci-seed", "3"]) == 0
    text = out.read_text(encoding="utf-8")
    assert "highest Mem in the trace" in text
    assert "200 resamples, seed 3" in text


def test_unwritable_html_path_is_bad_usage(tmp_path, capsys) -> None:
    store, run_id = labelled_run(tmp_path / "runs.sqlite")
    code = main(
        [
            "--store",
            str(store.path),
            "report",
            str(run_id),
            "--html",
            str(tmp_path / "no" / "r.html"),
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "cannot write --html to" in err and "does not exist" in err  # checked before the work
    code = main(["--store", str(store.path), "report", str(run_id), "--html", str(tmp_path)])
    assert code == 2 and "it is a folder" in capsys.readouterr().err


def test_unknown_run_is_bad_usage(tmp_path, capsys) -> None:
    store, _ = labelled_run(tmp_path / "runs.sqlite")
    code = main(["--store", str(store.path), "report", "99", "--html", str(tmp_path / "r.html")])
    assert code == 2
    assert "run 99 is not in store" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()
