"""Audit page, "Dataset inference" tab: two uploads start a stored inference run; its report view
shows the test, the control and the weights, every text as text."""

from __future__ import annotations

import json
import os

import pandas as pd
from streamlit.testing.v1 import AppTest

from memprobe_core.highlight import markdown_escape
from memprobe_core.membership.blind import BlindBaseline
from memprobe_core.membership.inference import DatasetInference, WelchOutcome
from memprobe_core.report.build import Report
from memprobe_core.store import Store
from tests.app.conftest import open_page, run_until, texts


def _jsonl(texts_: list[str]) -> bytes:
    return "".join(json.dumps({"text": t}) + "\n" for t in texts_).encode()


def test_two_uploads_start_a_dataset_inference_run() -> None:
    at = open_page("pages/3_Audit.py")
    # Long enough for the page's shortest length (50 tokens of the fake victim's words).
    suspect = _jsonl(
        [f"Permission is hereby granted number {i} to any person " * 8 for i in range(5)]
    )
    heldout = _jsonl([f"The keeper counted {i} gulls before the storm came " * 8 for i in range(5)])
    at.file_uploader(key="infer_suspect").set_value(("sus.jsonl", suspect, "application/json"))
    at.file_uploader(key="infer_heldout").set_value(("held.jsonl", heldout, "application/json"))
    at.run()
    assert "5 texts (0 rows skipped)" in texts(at)
    at.multiselect(key="infer_lengths").set_value([50])
    at.button(key="infer_start").click()
    run_until(at, lambda a: "state: finished" in texts(a), timeout=120)
    store = Store(os.environ["MEMPROBE_STORE"])
    (run,) = store.list_runs()
    assert run["config"]["methods"] == ["signals"]
    assert run["config"]["dataset"]["inference"]["suspect"] == "sus.jsonl"
    labels = [s.label for s in store.samples(run["id"])]
    assert labels == ["member"] * 5 + ["nonmember"] * 5


def _view() -> None:
    import streamlit as st

    from ui_common.audit_view import inference_view

    inference_view(st.session_state["report"])


def test_the_inference_view_shows_the_verdict_control_and_weights() -> None:
    outcome = WelchOutcome(4.2, 30.5, 1e-4, True, (20, 20), (20, 20), 0.8, 0.2)
    control = WelchOutcome(3.0, 18.0, 0.004, True, (10, 10), (10, 10), 0.6, 0.1)
    one = DatasetInference(
        length=64,
        n_suspect=40,
        n_heldout=40,
        significance=0.05,
        seed=0,
        features=("loss", "min_k"),
        weights={"loss": 0.3, "min_k": 0.0},
        test=outcome,
        control=control,
        note="<b>markup</b> *not* :red[styled]",
    )
    empty = pd.DataFrame()
    report = Report(table1=empty, paired=empty, pii=empty, costs=empty, dataset_inference=[one])
    at = AppTest.from_function(_view, default_timeout=30)
    at.session_state["report"] = report
    at.run()
    assert not at.exception, at.exception
    shown = texts(at)
    # The control rejects too, so the verdict is not "evidence", and it says why first.
    assert at.warning[0].value.startswith(
        markdown_escape("Length 64: inconclusive: the random-split control rejects too")
    )
    assert "evidence that the suspect set was used in training" not in shown
    assert "p = 0.0001 < 0.05, 20 vs 20 texts tested" in shown
    assert "<b>markup</b> *not* :red[styled]" in shown  # escaped, shown as typed
    frames = [d.value for d in at.dataframe]
    assert list(frames[1]["signal"]) == ["Loss", "Min-K%"]  # labels, not field names
    assert frames[0]["p-value"].tolist() == ["<0.001", "0.004"]  # a small p is not 0.000


def _issue_report(blind_auroc: float, blind_lo: float | None = None) -> Report:
    """The issue's run: 20 vs 20 texts tested, p = 0.022, beside a blind baseline."""
    outcome = WelchOutcome(2.1, 37.0, 0.022, True, (20, 20), (20, 20), 0.6, 0.4)
    one = DatasetInference(
        length=64, n_suspect=40, n_heldout=40, significance=0.05, seed=0, test=outcome
    )
    figures = {"auroc": blind_auroc}
    if blind_lo is not None:
        figures |= {"auroc_lo": blind_lo, "auroc_hi": 0.8}
    blind = BlindBaseline(n_members=40, n_nonmembers=40, folds=5, seed=0, figures=figures)
    empty = pd.DataFrame()
    return Report(
        table1=empty,
        paired=empty,
        pii=empty,
        costs=empty,
        dataset_inference=[one],
        blind_baseline=blind,
    )


def _shown(report: Report) -> AppTest:
    at = AppTest.from_function(_view, default_timeout=30)
    at.session_state["report"] = report
    at.run()
    assert not at.exception, at.exception
    return at


def test_the_headline_is_the_verdict_not_evidence_when_the_blind_baseline_separates() -> None:
    at = _shown(_issue_report(1.0))
    (headline,) = at.warning
    assert headline.value.startswith(
        markdown_escape(
            "Length 64: inconclusive: the sets differ without the model (blind baseline AUROC 1.00)"
        )
    )
    assert "evidence that the suspect set was used" not in texts(at)
    assert "the test alone: p = 0.022 < 0.05, 20 vs 20 texts tested" in texts(at)
    # The same test beside a blind baseline at chance is evidence, with p and n in the headline.
    (headline,) = _shown(_issue_report(0.55, 0.3)).warning
    assert headline.value.startswith(
        markdown_escape(
            "Length 64: evidence that the suspect set was used in training: p = 0.022 < 0.05, "
            "20 vs 20 texts tested"
        )
    )
