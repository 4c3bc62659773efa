"""Audit page, "Dataset inference" tab: two uploads start a stored inference run; its report view
shows the test, the control and the weights, every text as text."""

from __future__ import annotations

import json
import os

from streamlit.testing.v1 import AppTest

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
    empty = __import__("pandas").DataFrame()
    report = Report(table1=empty, paired=empty, pii=empty, costs=empty, dataset_inference=[one])
    at = AppTest.from_function(_view, default_timeout=30)
    at.session_state["report"] = report
    at.run()
    assert not at.exception, at.exception
    shown = texts(at)
    assert "evidence that the suspect set was used in training" in shown
    assert "the random-split control rejects too" in shown
    assert "<b>markup</b> *not* :red[styled]" in shown  # escaped, shown as typed
    frames = [d.value for d in at.dataframe]
    assert list(frames[1]["signal"]) == ["loss", "min_k"]
    assert frames[0]["p-value"].tolist() == [1e-4, 0.004]
