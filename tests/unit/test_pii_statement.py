"""PII stated on every part, "none" when a part has no item (issue 52): the page's PII view and
the reports' PII section."""

from __future__ import annotations

import re

from streamlit.testing.v1 import AppTest

from memprobe_core.pii import pii_report, pii_statement, totals_statement

SUFFIX = "write to jane@example.com or call the office"


def test_a_report_with_no_copy_and_no_invention_says_none_for_both() -> None:
    pii = pii_report(SUFFIX, "the office is closed").to_dict()
    assert pii_statement(pii) == (
        "PII in the true suffix: 1 (email 1); copied into the output: none; invented by the "
        "output: none."
    )


def test_every_part_is_counted_by_kind() -> None:
    pii = pii_report(SUFFIX, "mail jane@example.com or bob@example.org").to_dict()
    assert pii_statement(pii) == (
        "PII in the true suffix: 1 (email 1); copied into the output: 1 (email 1); invented by "
        "the output: 1 (email 1)."
    )
    assert pii_statement(pii_report("no pii", "none here").to_dict()) == (
        "PII in the true suffix: none; copied into the output: none; invented by the output: none."
    )
    assert pii_statement(None) is None and pii_statement({}) is None


def test_totals_say_none() -> None:
    assert totals_statement(0, 0) == "PII copied into the outputs: none; invented by them: none."
    assert totals_statement(2, 0) == "PII copied into the outputs: 2; invented by them: none."


def _view() -> None:
    from memprobe_core.pii import pii_report
    from ui_common.render import pii_view

    pii_view(pii_report("write to jane@example.com", "the office is closed").to_dict())


def test_the_page_states_copied_and_invented_when_there_are_none() -> None:
    at = AppTest.from_function(_view, default_timeout=120).run()
    assert not at.exception
    shown = re.sub(r"\\(.)", r"\1", " ".join(m.value for m in at.markdown))  # md() escapes
    assert "copied into the output: none; invented by the output: none." in shown
    assert len(at.dataframe) == 1  # the suffix's one item, listed


def test_the_html_and_text_reports_state_the_totals() -> None:
    import pandas as pd

    from memprobe_core.report.build import Report
    from memprobe_core.report.html import render_html
    from memprobe_core.report.text import render_text

    pii = pd.DataFrame(
        [
            {
                "method": "ps_base",
                "method_label": "P-S-Base",
                "units": 2,
                "truth": 1,
                "copied": 0,
                "invented": 0,
                "copied_share": 0.0,
            }
        ]
    )
    empty = pd.DataFrame()
    report = Report(table1=empty, paired=empty, pii=pii, costs=empty)
    report.meta = {"run_id": 1}
    statement = "All methods: PII copied into the outputs: none; invented by them: none."
    assert statement in render_html(report)
    assert statement in render_text(report)
