"""Readings of issue 52 outside the Document page: ROC curves drawn on one line made visible,
whose tokenizer made the Compare page's cut, and a sidebar job status line that keeps ticking."""

from __future__ import annotations

import pandas as pd
import pytest

from ui_common import charts, compare_view, page
from ui_common.job_runner import MODEL_LOCK

PERFECT = [(0.0, 0.0), (0.0, 1.0), (1.0, 1.0)]


def roc_frame() -> pd.DataFrame:
    rows = []
    labels = ["Loss", "Zlib", "Min-K%", "<b>Ref</b>", "Mem (P-S-Base)", "Mem (Ours)"]
    for i, label in enumerate(labels):
        for fpr, tpr in PERFECT:
            rows.append((f"s{i}", label, "signal", 200, fpr, tpr))
    for fpr, tpr in [(0.0, 0.0), (0.5, 0.5), (1.0, 1.0)]:
        rows.append(("other", "Other", "signal", 200, fpr, tpr))
    return pd.DataFrame(rows, columns=["score", "score_label", "kind", "length", "fpr", "tpr"])


def test_curves_on_one_line_are_drawn_as_a_stack_and_named_below_the_chart():
    roc = roc_frame()
    assert charts.coinciding_curves(roc, 200) == [
        ["Loss", "Zlib", "Min-K%", "<b>Ref</b>", "Mem (P-S-Base)", "Mem (Ours)"]
    ]
    fig = charts.roc_figure(roc, 200)
    widths = [trace.line.width for trace in fig.data[:6]]
    assert widths == sorted(widths, reverse=True) and len(set(widths)) == 6  # each a band
    assert fig.data[6].line.width is None  # a curve of its own keeps the default
    (note,) = [a.text for a in fig.layout.annotations if "On one line" in a.text]
    assert note.startswith("On one line (6 curves, drawn widest first): Loss, Zlib")
    assert "&lt;b&gt;Ref&lt;/b&gt;" in note and "<b>Ref" not in note  # labels escaped


def test_distinct_curves_are_left_as_the_report_draws_them():
    roc = roc_frame()
    roc = roc[roc["score"].isin(["s0", "other"])]
    assert charts.coinciding_curves(roc, 200) == []
    fig = charts.roc_figure(roc, 200)
    assert not fig.layout.annotations
    assert all(trace.line.width is None for trace in fig.data)


def test_the_compare_cut_says_whose_tokenizer_made_it():
    text = compare_view.cut_owner_text(
        {"tokenizer_name": "google/gemma-3-270m-it", "prefix": "a", "suffix": "b"}
    )
    assert text is not None
    assert "by the victim's tokenizer (google/gemma-3-270m-it, the instruct model's)" in text
    assert "P-S-Base sends this prefix text to the base model" in text
    words = compare_view.cut_owner_text({"tokenizer_name": "whitespace", "prefix": "a"})
    assert words is not None and "on whitespace words" in words
    assert compare_view.cut_owner_text({}) is None


@pytest.fixture
def declared(monkeypatch):
    """The ``run_every`` of each fragment the sidebar status declares."""
    seen: list[float | None] = []

    def fragment(run_every=None):
        seen.append(run_every)
        return lambda body: lambda *a, **k: None

    monkeypatch.setattr(page.st, "fragment", fragment)
    return seen


def test_the_sidebar_status_ticks_while_a_job_holds_the_models(declared):
    page.sidebar_status()
    assert declared == [None]  # no job: drawn once, no timer
    assert MODEL_LOCK.acquire("Document run 3", timeout=1)
    try:
        page.sidebar_status()
    finally:
        MODEL_LOCK.release()
    assert declared == [None, page.STATUS_TICK_S]  # a job: redrawn on a timer, its age counts


def test_compare_credits_no_word_a_methods_own_prompt_handed_the_victim(monkeypatch):
    from types import SimpleNamespace

    calls = []
    monkeypatch.setattr(compare_view, "output_chance", lambda *args: calls.append(args) or "level")
    results = {"ps_inst": SimpleNamespace(output="out", mem=0.2, prompt="Definitions.")}
    assert compare_view.method_chances(results, {"x": 1}) == {"ps_inst": "level"}
    assert calls == [("out", 0.2, {"x": 1}, "Definitions.")]


def test_a_run_stored_with_a_long_seed_in_its_title_is_listed_with_a_short_one():
    from ui_common.runs_view import run_label

    run = {
        "id": 3,
        "kind": "audit",
        "title": "inference seed 8678137284779500208",
        "status": "finished",
    }
    assert run_label(run) == "#3 · audit · inference seed 867813… · finished"


def test_the_html_reports_roc_shows_curves_on_one_line_as_the_page_does():
    from memprobe_core.report.figures import roc_figure as report_roc_figure

    fig = report_roc_figure(roc_frame(), 200)
    assert any("On one line (6 curves" in a.text for a in fig.layout.annotations)
    assert len({trace.line.width for trace in fig.data[:6]}) == 6
