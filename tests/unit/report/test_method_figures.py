"""A method's declared figures reach every view with no other file naming them: the results
frame's columns, Table 1 (frame, text, HTML, JSON), its own report table and its result line
(``MethodSpec.figures``, ``report_table``, ``describe``; docs/adding-a-method.md)."""

from __future__ import annotations

import json
from dataclasses import replace

import pandas as pd
import pytest

from memprobe_core.attacks.figures import Figure, MethodTable, Table1Entry, TableColumn
from memprobe_core.attacks.registry import MethodSpec, describe_result, register, unregister
from memprobe_core.report.build import build_report, report_to_dict, table1_columns
from memprobe_core.report.html import render_html
from memprobe_core.report.text import render_text
from memprobe_core.store.frames import result_columns, result_row


def _totals(results: pd.DataFrame) -> pd.DataFrame:
    rows = results[results["method"] == "toy_fig"]
    if rows.empty:
        return pd.DataFrame(columns=["method", "units", "longest"])
    return pd.DataFrame(
        [{"method": "toy_fig", "units": len(rows), "longest": int(rows["toy_chars"].max())}]
    )


TOY = MethodSpec(
    name="toy_fig",
    label="Toy figures",
    run=lambda *a, **k: None,
    roles=("victim",),
    rank=77,
    figures=(
        Figure(
            "toy_chars",
            "toy characters",
            "int",
            table1=Table1Entry("mean", text="ToyChars", html="Toy chars (mean)", digits=1),
        ),
        Figure("toy_hidden", "hidden", "int", column=False),
    ),
    describe=lambda v: f"Toy: {v['toy_chars']} characters." if "toy_chars" in v else None,
    report_table=MethodTable(
        title="Toy totals",
        text_title="Toy totals per run",
        columns=(TableColumn("units", "n", "units"), TableColumn("longest", "max", "longest")),
        frame_columns=("method", "units", "longest"),
        build=_totals,
    ),
)


@pytest.fixture
def toy():
    register(TOY)
    yield TOY
    unregister(TOY.name)


def _frame(method: str, chars: list[int]) -> pd.DataFrame:
    rows = [
        result_row(
            1,
            {
                "snippet_id": f"s{i}",
                "method": method,
                "length": 40,
                "mem": 0.5,
                "lcs_p": 0.1,
                "dis": 0.0,
                "objective": 0.4,
                "verbatim": {"toy_chars": n, "toy_hidden": 9},
            },
            {},
        )
        for i, n in enumerate(chars)
    ]
    return pd.DataFrame(rows, columns=result_columns())


def test_declared_figures_are_columns_of_the_results_frame_and_table1(toy):
    assert "toy_chars" in result_columns() and "toy_hidden" not in result_columns()
    assert "toy_chars" in table1_columns()
    frame = _frame("toy_fig", [4, 6, 11])
    assert list(frame["toy_chars"]) == [4, 6, 11]
    report = build_report(frame, resamples=200)
    assert report.table1.iloc[0]["toy_chars"] == pytest.approx(7.0)
    text = render_text(report)
    assert "ToyChars" in text and "7.0" in text
    assert "Toy totals per run" in text
    html = render_html(report)
    assert "Toy chars (mean)" in html and "Toy totals" in html
    data = json.loads(json.dumps(report_to_dict(report), allow_nan=False))
    assert data["table1"][0]["toy_chars"] == pytest.approx(7.0)
    assert data["toy_fig"] == [{"method": "toy_fig", "units": 3, "longest": 11}]
    assert describe_result({"toy_chars": 4}) == ["Toy: 4 characters."]


def test_a_run_without_the_method_shows_none_of_its_columns(toy):
    report = build_report(_frame("other", [1, 2]).assign(toy_chars=None), resamples=200)
    assert "ToyChars" not in render_text(report)
    assert "Toy chars (mean)" not in render_html(report)
    assert report.method_tables["toy_fig"].empty
    assert describe_result({}) == []


def test_a_method_table_named_like_a_report_key_is_refused():
    clash = replace(TOY, name="table1", label="Clash", figures=())
    register(clash)
    try:
        with pytest.raises(ValueError, match="named like a report key"):
            report_to_dict(build_report(_frame("table1", [1]), resamples=200))
    finally:
        unregister(clash.name)
