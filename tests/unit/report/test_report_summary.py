"""The answer every report opens with (memprobe_core.report.summary), the same in text, HTML, JSON."""

from __future__ import annotations

import pandas as pd
import pytest

from memprobe_core.report.build import TABLE1_COLUMNS, Report, report_for_run, report_to_dict
from memprobe_core.report.html import render_html
from memprobe_core.report.summary import summary_lines
from memprobe_core.report.text import render_text
from tests.helpers.labelled_run import labelled_run


def _table1(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([{c: r.get(c) for c in TABLE1_COLUMNS} for r in rows])


def _report(table1: pd.DataFrame) -> Report:
    return Report(table1=table1, paired=pd.DataFrame(), pii=pd.DataFrame(), costs=pd.DataFrame())


def test_the_highest_pooled_mem_per_length_with_its_interval_and_chance() -> None:
    common = {"n": 20, "chance_units": 20, "mem_chance": 0.21}
    table1 = _table1(
        [
            {
                **common,
                "method_label": "P-S-Base",
                "domain": "all",
                "length": 100,
                "mem": 0.2,
                "mem_lo": 0.1,
                "mem_hi": 0.3,
                "beats_chance": 0.1,
            },
            {
                **common,
                "method_label": "Ours",
                "domain": "all",
                "length": 100,
                "mem": 0.4,
                "mem_lo": 0.3,
                "mem_hi": 0.5,
                "beats_chance": 0.35,
            },
            {
                **common,
                "method_label": "Ours",
                "domain": "legal",
                "length": 100,
                "mem": 0.9,
                "mem_lo": 0.8,
                "mem_hi": 1.0,
                "beats_chance": 1.0,
            },  # one domain, not pooled
        ]
    )
    (line,) = summary_lines(_report(table1))
    assert line == (
        "Highest Mem at length 100: Ours 0.400 [0.300, 0.500] over 20 snippets; "
        "7 of 20 units beat Mem's chance level (mean level 0.210)"
    )


def test_an_undefined_chance_level_is_said_not_hidden() -> None:
    table1 = _table1(
        [{"method_label": "Ours", "domain": "legal", "length": 40, "mem": 0.3, "n": 1}]
    )
    (line,) = summary_lines(_report(table1))
    assert line.endswith("its chance level is undefined (see Table 1's note)")
    assert "over 1 snippet;" in line


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    store, run_id = labelled_run(tmp_path_factory.mktemp("summary") / "runs.sqlite")
    return store, run_id, report_for_run(store, run_id)


def test_text_html_and_json_open_with_the_same_summary(report) -> None:
    store, run_id, built = report
    lines = summary_lines(built)
    assert lines[0] == "Membership: inconclusive: too few texts (2 vs 2) for this test"
    text = render_text(built)
    assert text.index("Summary") < text.index("Table 1") and lines[1] in text
    page = render_html(built, store, run_id)
    assert page.index('id="summary"') < page.index('id="table1"')
    assert report_to_dict(built)["summary"] == lines
