"""Audit and Runs pages: "Download HTML report" (built on click) and the Audit page's ROC curves."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import memprobe_core.report.build as report_module
from memprobe_core.store import Store
from tests.app.conftest import open_page
from tests.helpers.labelled_run import SCRIPT, labelled_run, with_membership


@pytest.fixture
def labelled() -> int:
    """A labelled run in the page's store."""
    return labelled_run(Path(os.environ["MEMPROBE_STORE"]))[1]


@pytest.fixture
def known_membership(monkeypatch) -> None:
    """Reports carry hand-made membership / ROC frames (known AUROCs, a label with markup)."""
    real = report_module.report_for_run
    monkeypatch.setattr(
        report_module, "report_for_run", lambda *a, **k: with_membership(real(*a, **k))
    )


@pytest.fixture(autouse=True)
def deferred(monkeypatch) -> dict[str, object]:
    """Deferred download callables by file id (AppTest's runtime is gone once a run ends)."""
    from streamlit.runtime.media_file_manager import MediaFileManager

    seen: dict[str, object] = {}
    real = MediaFileManager.add_deferred

    def add_deferred(self, data, *args, **kwargs):
        file_id = real(self, data, *args, **kwargs)
        seen[file_id] = data
        return file_id

    monkeypatch.setattr(MediaFileManager, "add_deferred", add_deferred)
    return seen


def downloaded(button, deferred) -> str:
    """Run a deferred download button's callable as a click would; the file's text."""
    assert button.proto.deferred_file_id, "the HTML is built on click, not on every redraw"
    return deferred[button.proto.deferred_file_id]()


def html_button(at):
    (button,) = [b for b in at.get("download_button") if b.proto.label == "Download HTML report"]
    return button


def test_audit_page_draws_the_roc_curves_of_a_labelled_run(labelled) -> None:
    at = open_page("pages/3_Audit.py")
    roc = [c for c in at.get("plotly_chart") if "ROC, length 40" in str(c.proto.spec)]
    assert len(roc) == 1
    spec = json.loads(roc[0].proto.spec)
    assert {t["name"] for t in spec["data"]} == {
        "P-S-Base (AUROC 1.000)",
        "P-S-Inst (AUROC 1.000)",
        "Ours (interactive) (AUROC 1.000)",
        "chance",
    }


def test_audit_page_offers_the_html_report_with_the_membership_table(
    labelled, known_membership, deferred
) -> None:
    at = open_page("pages/3_Audit.py")
    charts = [str(c.proto.spec) for c in at.get("plotly_chart")]
    assert any("ROC, length 40" in spec for spec in charts)
    membership = [df.value for df in at.dataframe if "AUROC [95 % CI]" in df.value.columns]
    aurocs = [cell.split(" ")[0] for cell in membership[0]["AUROC [95 % CI]"]]
    assert aurocs == ["0.750", "1.000"]
    button = html_button(at)
    text = downloaded(button, deferred)
    assert text.startswith("<!DOCTYPE html>")
    assert "<h2>Membership</h2>" in text and SCRIPT not in text


def test_audit_page_html_keeps_the_mem_selection_shown(labelled, deferred) -> None:
    at = open_page("pages/3_Audit.py")
    at.radio(key="audit_select").set_value("max_mem").run()
    assert "highest Mem in the trace" in downloaded(html_button(at), deferred)


def test_runs_page_offers_the_html_report_of_the_selected_run(labelled, deferred) -> None:
    store = Store(os.environ["MEMPROBE_STORE"])
    other = store.create_run("probe", title="no units")  # listed first, newest
    at = open_page("pages/5_Runs.py")
    assert at.selectbox(key="runs_open").value == other
    assert not [b for b in at.get("download_button") if b.proto.label == "Download HTML report"]
    at.selectbox(key="runs_open").set_value(labelled).run()
    assert at.selectbox(key="runs_open").value == labelled
    text = downloaded(html_button(at), deferred)
    assert f"run {labelled}: labelled" in text
    assert store.get_run(labelled)["status"] == "finished"
