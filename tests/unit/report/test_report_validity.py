"""A labelled audit's validity controls in the report: the Report fields, text, JSON, HTML, CLI."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest

from memprobe_core.cli import main
from memprobe_core.cli.output import OUTPUT_FLAGS, terminal_json
from memprobe_core.membership.blind import (
    BLIND_WARNING,
    CONTROLS_COLUMNS,
    RANDOM_SPLIT_COLUMNS,
    RANDOM_SPLIT_OK,
    BlindBaseline,
)
from memprobe_core.report.build import build_report, report_for_run, report_to_dict
from memprobe_core.report.export import read_safe_csv
from memprobe_core.report.html import render_html
from memprobe_core.report.text import render_text
from memprobe_core.snippets.split import MEMBER, NONMEMBER
from memprobe_core.store import RESULT_COLUMNS
from tests.helpers.labelled_run import SCRIPT, labelled_run

N = 12  # snippets per class


def _results(*, labelled: bool = True) -> pd.DataFrame:
    """``N`` members and ``N`` non-members, loss a little lower for members (noisy)."""
    rng = np.random.default_rng(0)
    rows = []
    for cls, label, centre in (("m", MEMBER, 2.0), ("n", NONMEMBER, 2.4)):
        for i in range(N):
            rows.append(
                dict.fromkeys(RESULT_COLUMNS)
                | {
                    "run_id": 1,
                    "snippet_id": f"{cls}{i:02d}",
                    "domain": "legal",
                    "method": "ps_base",
                    "method_label": "P-S-Base",
                    "length": 100,
                    "mem": float(rng.uniform()),
                    "lcs_p": 0.1,
                    "objective": 0.2,
                    "alpha": 1.0,
                    "victim_queries": 1,
                    "attacker_queries": 0,
                    "generated_tokens": 10,
                    "seconds": 1.0,
                    "pii_truth": 0,
                    "pii_copied": 0,
                    "pii_invented": 0,
                    "label": label if labelled else None,
                    "signal_loss": float(rng.normal(centre, 0.5)),
                }
            )
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def _texts() -> dict[str, str]:
    """Members read like a licence, non-members like generated prose: told apart by words."""
    rng = np.random.default_rng(1)
    licence = [
        "licence",
        "grant",
        "copyright",
        "permission",
        "warranty",
        "liability",
        "notice",
        "software",
    ]
    prose = ["river", "mountain", "village", "morning", "garden", "window", "letter", "journey"]
    texts = {}
    for cls, words in (("m", licence), ("n", prose)):
        for i in range(N):
            texts[f"{cls}{i:02d}"] = " ".join(rng.choice(words, 60))
    return texts


@pytest.fixture(scope="module")
def report():
    return build_report(_results(), resamples=500, seed=0, texts=_texts())


def test_a_labelled_report_carries_both_controls(report) -> None:
    blind = report.blind_baseline
    assert isinstance(blind, BlindBaseline)
    assert (blind.n_members, blind.n_nonmembers, blind.folds) == (N, N, 5)
    assert blind.figure("auroc") == pytest.approx(1.0)
    assert blind.warning is not None and BLIND_WARNING in blind.warning
    assert list(report.random_split.columns) == RANDOM_SPLIT_COLUMNS
    assert {"loss", "ps_base"} <= set(report.random_split["score"])


def test_the_controls_are_deterministic_given_the_seed(report) -> None:
    again = build_report(_results(), resamples=500, seed=0, texts=_texts())
    assert again.blind_baseline is not None and report.blind_baseline is not None
    assert again.blind_baseline.to_dict() == report.blind_baseline.to_dict()
    pd.testing.assert_frame_equal(again.random_split, report.random_split)


def test_the_text_report_shows_the_warning(report) -> None:
    text = render_text(report)
    assert "Validity controls (labelled audit)" in text
    assert "Blind baseline — a classifier on the snippet texts alone" in text
    assert (
        "WARNING: a classifier on the texts alone, never the model, separates" in text
        and BLIND_WARNING in text
    )
    assert "Random-split control — the members alone" in text
    assert RANDOM_SPLIT_OK in text


def test_json_has_the_blind_baseline_and_the_random_split(report) -> None:
    data = json.loads(terminal_json(report_to_dict(report)))
    blind = data["blind_baseline"]
    assert blind["auroc"] == pytest.approx(1.0) and BLIND_WARNING in blind["warning"]
    assert blind["folds"] == 5 and blind["auroc_lo"] is None  # perfect: no interval
    assert len(data["random_split"]) == len(report.random_split)
    assert set(data["random_split"][0]) == set(RANDOM_SPLIT_COLUMNS)


def test_an_unlabelled_report_has_no_controls() -> None:
    report = build_report(_results(labelled=False), resamples=200, texts=_texts())
    assert report.blind_baseline is None and report.random_split.empty
    data = report_to_dict(report)
    assert data["blind_baseline"] is None and data["random_split"] == []
    assert "Validity controls" not in render_text(report)
    assert 'id="validity"' not in render_html(report)


def test_without_texts_the_report_says_the_baseline_was_not_run() -> None:
    report = build_report(_results(), resamples=200)
    assert report.blind_baseline is not None and report.blind_baseline.folds == 0
    assert math.isnan(report.blind_baseline.figure("auroc"))
    assert "not run: the snippet texts were not given" in render_text(report)


def test_report_for_run_reads_the_texts_of_a_labelled_run(tmp_path) -> None:
    store, run_id = labelled_run(tmp_path / "runs.sqlite")
    report = report_for_run(store, run_id, resamples=200)
    blind = report.blind_baseline
    # Two members, two non-members, every text the same: two folds and no separation.
    assert blind is not None and blind.note is None and blind.folds == 2
    assert blind.figure("auroc") == pytest.approx(0.5) and blind.warning is None
    assert report.random_split.empty  # two members: too few to halve
    assert "it needs at least 4 members" in render_text(report)


def test_the_html_report_shows_the_controls_escaped(report) -> None:
    text = render_html(report)
    assert '<section id="validity">' in text and "<h2>Validity controls</h2>" in text
    assert (
        '<p class="warn">Blind baseline: a classifier on the texts alone, never the model' in text
    )
    assert "Random-split control" in text and "half A / half B" in text
    # A warning is text: markup in it (from a score label) shows as typed.
    marked = BlindBaseline(n_members=N, n_nonmembers=N, folds=5, seed=0, warning=f"best {SCRIPT}")
    text = render_html(dataclasses.replace(report, blind_baseline=marked))
    assert SCRIPT not in text and "best &lt;script&gt;alert(1)&lt;/script&gt;" in text


def test_report_writes_the_controls_as_csv(tmp_path, capsys) -> None:
    assert OUTPUT_FLAGS["controls_csv"] == "--controls-csv"
    _, run_id = labelled_run(tmp_path / "runs.sqlite")
    out = tmp_path / "controls.csv"
    args = ["--store", str(tmp_path / "runs.sqlite"), "report", str(run_id)]
    code = main([*args, "--resamples", "200", "--controls-csv", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert f"wrote {out}" in captured.err and "Validity controls" in captured.out
    frame = read_safe_csv(out, text_columns=["control", "score", "score_label", "kind"])
    assert list(frame.columns) == CONTROLS_COLUMNS
    assert list(frame["control"]) == ["blind_baseline"]
    assert main([*args, "--resamples", "200", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["blind_baseline"]["folds"] == 2 and data["random_split"] == []
