"""The HTML report's figures are the same whichever process builds them.

The dashboard imports Streamlit, which makes its own plotly template the process default; that
template's colours are placeholders only Streamlit's front end replaces, so the report the
dashboard downloaded drew every trace black and clipped its tick labels (issue 37).
"""

from __future__ import annotations

import json
import re

import plotly.io as pio
import pytest

from memprobe_core.report.build import report_for_run
from memprobe_core.report.html import render_html
from tests.helpers.labelled_run import labelled_run, with_membership

# Streamlit's template, registered by importing the chart element (as the dashboard does).
pytest.importorskip("streamlit.elements.plotly_chart")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return labelled_run(tmp_path_factory.mktemp("template") / "runs.sqlite")


def _figures(page: str) -> list[dict]:
    blocks = re.findall(r'<script type="application/json"[^>]*>(.*?)</script>', page, re.S)
    return [json.loads(b) for b in blocks if '"layout"' in b]


def _render(run, default_template: str) -> str:
    store, run_id = run
    previous = pio.templates.default
    pio.templates.default = default_template
    try:
        return render_html(with_membership(report_for_run(store, run_id)), store, run_id)
    finally:
        pio.templates.default = previous


def test_figures_are_identical_under_streamlits_default_template(run) -> None:
    in_dashboard = _figures(_render(run, "streamlit"))
    from_cli = _figures(_render(run, "plotly"))
    assert in_dashboard and in_dashboard == from_cli


def test_figures_carry_real_colours_and_automargins(run) -> None:
    for figure in _figures(_render(run, "streamlit")):
        layout = figure["layout"]["template"]["layout"]
        colours = layout["colorway"]
        assert len(set(colours)) >= 10
        assert not any(c.lower().startswith("#0000") for c in colours), colours  # placeholders
        assert layout["yaxis"]["automargin"] and layout["xaxis"]["automargin"]
