"""The prior-aware check (docs/method.md §24) in the Audit page's Table 1: one column of verdicts
in words ("2 memorised · 1 common / 3"), the report's own cell, instead of five count columns;
none at all for a run without ``--pam``."""

from __future__ import annotations

import pandas as pd
from streamlit.testing.v1 import AppTest

from memprobe_core.report.pam_cells import PAM_COLUMNS
from ui_common.tables import column_label

CHECKED = {
    "method": ["verbatim", "verbatim"],
    "pam_units": [3, 0],
    "pam_memorised": [2, 0],
    "pam_common": [1, 0],
    "pam_not_memorised": [0, 0],
    "pam_unmeasured_units": [0, 2],
}


def _audit_table() -> None:
    import pandas as pd
    import streamlit as st

    from memprobe_core.report.pam_cells import with_pam_cell
    from ui_common import tables

    tables.show(with_pam_cell(pd.DataFrame(st.session_state["t1"])))


def _shown(t1: dict) -> pd.DataFrame:
    at = AppTest.from_function(_audit_table, default_timeout=30)
    at.session_state["t1"] = t1
    at.run()
    assert not at.exception, at.exception
    (frame,) = [df.value for df in at.dataframe]
    return frame


def test_the_check_is_one_column_of_verdicts_in_words():
    frame = _shown(CHECKED)
    assert "prior-aware check (units)" in frame.columns
    assert not {column_label(c) for c in PAM_COLUMNS} & set(frame.columns)
    assert list(frame["prior-aware check (units)"]) == [
        "2 memorised · 1 common / 3",
        "none measured (2 not measured)",
    ]


def test_a_run_without_the_check_shows_no_column():
    zeros = {k: ([0, 0] if k != "method" else v) for k, v in CHECKED.items()}
    frame = _shown(zeros)
    assert not any("prior-aware" in c for c in frame.columns)
    assert not {column_label(c) for c in PAM_COLUMNS} & set(frame.columns)
