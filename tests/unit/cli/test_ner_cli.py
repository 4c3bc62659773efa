"""`memprobe ner` on a tiny saved BERT token classifier: report, JSON, CSV, errors, exit codes."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from memprobe_core.cli import main
from tests.helpers.ner_models import tiny_ner


def parse(argv: list[str]) -> list[str]:
    return ["ner", *argv]


def run_ner_command(argv: list[str]) -> int:
    """``memprobe ner …`` through the command's real entry point (its one exit-code map)."""
    return main(argv)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ner")
    ner = tiny_ner()
    ner.model.save_pretrained(folder / "model")
    ner.tokenizer.save_pretrained(folder / "model")
    (folder / "in.txt").write_text("john smithson\nanna lee\nkim park\n=cmd\n", encoding="utf-8")
    (folder / "out.csv").write_text(
        "name\nmaria\npark kim\nlee anna\nsmithson john\n", encoding="utf-8"
    )
    (folder / "prompts.txt").write_text(
        "did {name} visit paris ?\n{name} said hello .\ntell {name} to call !\n", encoding="utf-8"
    )
    return folder


def test_json_summary_and_csv_exports(setup, capsys) -> None:
    args = parse(
        [
            "--model",
            str(setup / "model"),
            "--in-names",
            str(setup / "in.txt"),
            "--out-names",
            str(setup / "out.csv"),
            "--prompts",
            str(setup / "prompts.txt"),
            "--metric",
            "all_pairs",
            "--device",
            "cpu",
            "--json",
            "--dev-fraction",
            "0.5",
            "--csv",
            str(setup / "scores.csv"),
            "--names-csv",
            str(setup / "names.csv"),
        ]
    )
    assert run_ner_command(args) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["prompts"] == 3 and summary["pairs"] == 4 and summary["metric"] == "all_pairs"
    assert 0 <= summary["m_mem_worst"] <= summary["m_mem_mean"] <= summary["m_mem_best"] <= 1
    assert "dev_test_tau" in summary and summary["ensembles"]
    scores = pd.read_csv(setup / "scores.csv")
    assert len(scores) == 3 and scores["rank"].min() == 1
    names = pd.read_csv(setup / "names.csv")
    assert len(names) == 12 and set(names.columns) >= {"name_in", "name_out", "conf_in", "conf_out"}
    assert "'=cmd" in set(names["name_in"])  # formula-looking names are neutralised in CSV


def test_text_report_with_templates(setup, capsys) -> None:
    args = parse(
        [
            "--model",
            str(setup / "model"),
            "--in-names",
            str(setup / "in.txt"),
            "--out-names",
            str(setup / "out.csv"),
            "--templates",
            "8",
            "--device",
            "cpu",
            "--top",
            "2",
        ]
    )
    assert run_ner_command(args) == 0
    out = capsys.readouterr().out
    assert (
        "8 prompts × 4 pairs" in out and "best prompts:" in out and "M-MEM by prompt type:" in out
    )


def test_usage_errors_exit_2(setup, capsys) -> None:
    no_names = parse(["--model", str(setup / "model"), "--templates", "2"])
    assert run_ner_command(no_names) == 2
    assert "no built-in name lists" in (err := capsys.readouterr().err) and "--in-names" in err
    (setup / "bad.txt").write_text("no slot\n", encoding="utf-8")
    bad = parse(
        [
            "--model",
            str(setup / "model"),
            "--in-names",
            str(setup / "in.txt"),
            "--out-names",
            str(setup / "out.csv"),
            "--prompts",
            str(setup / "bad.txt"),
        ]
    )
    assert run_ner_command(bad) == 2
    assert "prompt 0 has no name slots" in capsys.readouterr().err


def test_missing_model_exits_3(setup, capsys) -> None:
    args = parse(
        [
            "--model",
            str(setup / "nope"),
            "--in-names",
            str(setup / "in.txt"),
            "--out-names",
            str(setup / "out.csv"),
            "--templates",
            "2",
            "--device",
            "cpu",
        ]
    )
    assert run_ner_command(args) == 3
    assert "could not load" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flag", "value"), [("--batch-size", "0"), ("--dev-fraction", "1.5"), ("--pairs", "1000000000")]
)
def test_bad_sizes_are_refused_before_the_model_loads(setup, capsys, flag, value) -> None:
    # The model folder does not exist: a check made after loading would exit 3, not 2.
    args = parse(
        [
            "--model",
            str(setup / "nope"),
            "--in-names",
            str(setup / "in.txt"),
            "--out-names",
            str(setup / "out.csv"),
            flag,
            value,
        ]
    )
    assert run_ner_command(args) == 2
    assert flag in capsys.readouterr().err
