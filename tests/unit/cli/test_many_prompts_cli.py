"""``memprobe probe --json`` of the attacker loop carries its many-prompt robustness
(``eliciting_prompts``, ``eliciting_threshold``; docs/method.md §23), and the text output says it."""

from __future__ import annotations

import csv
import json

import pytest

import memprobe_core.models as models_pkg
from memprobe_core.cli import main
from memprobe_core.models.base import ModelError
from tests.helpers.scripted_models import (
    PREFIX_WORDS,
    SUFFIX_WORDS,
    counting_victim,
    question_attacker,
)

# 18 words at the default prefix ratio: the 6 prefix words, then the 12 suffix words.
TEXT = " ".join(PREFIX_WORDS + SUFFIX_WORDS)


@pytest.fixture
def scripted_models(monkeypatch):
    """The victim answers "ask number K" with the first K suffix words; the attacker writes such
    questions with K drawn from its seeded generator."""
    made = {"test-victim": counting_victim, "test-attacker": question_attacker}

    def load(name, *, backend=None, **options):
        if name not in made:
            raise ModelError(f"model {name!r} is unknown")
        return made[name]()

    monkeypatch.setattr(models_pkg, "load", load, raising=False)


def probe(tmp_path, *extra):
    return main(
        [
            "--store",
            str(tmp_path / "runs.sqlite"),
            "probe",
            TEXT,
            "--method",
            "interactive",
            "--length",
            "18",
            "--rounds",
            "2",
            "--n",
            "5",
            "--seed",
            "3",
            "--victim",
            "test-victim",
            "--attacker",
            "test-attacker",
            *extra,
        ]
    )


def test_probe_json_carries_the_distinct_eliciting_prompts(tmp_path, scripted_models, capsys):
    assert probe(tmp_path, "--json") == 0
    result = json.loads(capsys.readouterr().out)
    # Mem = K/12 and LCS_P = 0 for "ask number K": a prompt elicits iff K ≥ 6.
    asked = {int(c["prompt"].split()[-1]) for c in result["trace"] if c["prompt"]}
    eliciting = {k for k in asked if k >= 6}
    assert eliciting and eliciting != asked
    assert result["verbatim"]["eliciting_prompts"] == len(eliciting)
    assert result["verbatim"]["eliciting_threshold"] == 0.5


def test_probe_text_output_names_the_count(tmp_path, scripted_models, capsys):
    assert probe(tmp_path, "--json") == 0
    count = json.loads(capsys.readouterr().out)["verbatim"]["eliciting_prompts"]
    assert probe(tmp_path) == 0  # the same seed: the same prompts
    shown = f"Many-prompt robustness: {count} distinct prompts elicited the suffix"
    assert shown in capsys.readouterr().out


def test_the_runs_report_carries_it_in_table_1_and_the_csv(tmp_path, scripted_models, capsys):
    assert probe(tmp_path, "--json") == 0
    result = json.loads(capsys.readouterr().out)
    store = ["--store", str(tmp_path / "runs.sqlite")]
    assert main([*store, "report", str(result["run_id"]), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["table1"]
    assert row["eliciting_prompts"] == result["verbatim"]["eliciting_prompts"]
    # The per-unit CSV has the count and its threshold.
    csv_path = tmp_path / "units.csv"
    assert main([*store, "report", str(result["run_id"]), "--csv", str(csv_path)]) == 0
    with csv_path.open(encoding="utf-8", newline="") as handle:
        (shown,) = csv.DictReader(handle)
    assert int(shown["eliciting_prompts"]) == result["verbatim"]["eliciting_prompts"]
    assert float(shown["eliciting_threshold"]) == 0.5
