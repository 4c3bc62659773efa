"""The prior-aware check in the reports (docs/method.md §24): Table 1 counts each method × length
cell's verdicts (text, HTML, JSON), a run of one snippet says each unit's check in words, a run
without ``--pam`` shows "–" or no column, and a run stored before the check still reports."""

from __future__ import annotations

import json

import pandas as pd

from memprobe_core.measuring.prior_aware import COMMON, MEMORISED, NOT_MEMORISED, PAM_KEYS
from memprobe_core.report.build import build_report, report_to_dict, table1
from memprobe_core.report.html import render_html
from memprobe_core.report.pam_cells import PAM_NOTE, pam_cell
from memprobe_core.report.text import render_text
from memprobe_core.store import RESULT_COLUMNS

SOURCE = "7 built-in <b>code</b> snippets"


def checked(verdict: str) -> dict:
    """A unit's ``pam_*`` columns as ``PriorAwareCheck.to_record`` writes them."""
    return {
        "pam_verdict": verdict,
        "pam_log_ratio": 3.5,
        "pam_p": 0.05,
        "pam_own_token_p": 0.9,
        "pam_prior_token_p": 0.1,
        "pam_prefixes": 19,
        "pam_source": SOURCE,
    }


def unit(snippet: str, method: str, label: str, pam: dict, length: int = 100) -> dict:
    return dict.fromkeys(RESULT_COLUMNS) | {
        "run_id": 1,
        "snippet_id": snippet,
        "domain": "code",
        "method": method,
        "method_label": label,
        "length": length,
        "mem": 0.5,
        "lcs_p": 0.1,
        "objective": 0.2,
        "alpha": 0.5,
        "victim_queries": 1,
        "attacker_queries": 0,
        "generated_tokens": 10,
        "seconds": 1.0,
        **pam,
    }


# P-S-Base at 100 tokens: 2 memorised, 1 common, 1 not measured (a black box), 1 without the
# check; P-S-Inst at 100 and P-S-Base at 50: run without --pam.
CELL = [
    checked(MEMORISED),
    checked(COMMON),
    checked(MEMORISED),
    {"pam_not_measured": "the victim exposes no weights"},
    {},
]


def results() -> pd.DataFrame:
    rows = [unit(f"s{i}", "ps_base", "P-S-Base", pam) for i, pam in enumerate(CELL)]
    rows += [unit(f"s{i}", "ps_inst", "P-S-Inst", {}) for i in range(3)]
    rows += [unit(f"s{i}", "ps_base", "P-S-Base", {}, length=50) for i in range(3)]
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def _cell(t1: pd.DataFrame, method: str, length: int) -> pd.Series:
    return t1[(t1["method"] == method) & (t1["length"] == length)].iloc[0]


def test_table1_counts_each_cells_verdicts_over_the_units_measured() -> None:
    t1 = table1(results(), resamples=200)
    cell = _cell(t1, "ps_base", 100)
    assert (cell["pam_units"], cell["pam_memorised"], cell["pam_common"]) == (3, 2, 1)
    assert (cell["pam_not_memorised"], cell["pam_unmeasured_units"]) == (0, 1)
    assert pam_cell(cell) == "2 memorised · 1 common / 3 (1 not measured)"
    without = _cell(t1, "ps_inst", 100)
    assert without["pam_units"] == 0 and pam_cell(without) == "–"


def test_the_verdicts_no_unit_had_are_left_out_of_the_cell() -> None:
    row = {"pam_units": 2, "pam_memorised": 0, "pam_common": 0, "pam_not_memorised": 2}
    assert pam_cell(row) == "2 not memorised / 2"
    assert pam_cell({"pam_units": 0, "pam_unmeasured_units": 4}) == "none measured (4 not measured)"


def _table1_row(text: str, start: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(start))


def test_the_text_report_has_the_column_with_a_dash_for_a_cell_without_the_check() -> None:
    text = render_text(build_report(results(), resamples=200))
    assert "Prior-aware" in _table1_row(text, "  Method")  # the last column: cells end the rows
    assert _table1_row(text, "P-S-Base   code     100").endswith(
        " 2 memorised · 1 common / 3 (1 not measured)"
    )
    assert _table1_row(text, "P-S-Base   code      50").endswith(" –")
    assert _table1_row(text, "P-S-Inst").endswith(" –")
    assert PAM_NOTE in text


def test_the_note_cites_section_24_and_names_each_threshold_with_its_value() -> None:
    assert "docs/method.md §24" in PAM_NOTE
    for value in ("p ≥ 0.5", "rank p ≤ 0.05", "10^1 times"):
        assert value in PAM_NOTE


def test_the_html_report_has_the_column_escaped() -> None:
    html = render_html(build_report(results(), resamples=200))
    assert "Prior-aware check (units)" in html
    assert "2 memorised · 1 common / 3 (1 not measured)" in html
    assert "docs/method.md §24" in html


def test_report_json_gives_the_counts() -> None:
    records = report_to_dict(build_report(results(), resamples=200))["table1"]
    cell = next(r for r in records if r["method"] == "ps_base" and r["length"] == 100)
    assert {k: cell[k] for k in ("pam_units", "pam_memorised", "pam_common")} == {
        "pam_units": 3,
        "pam_memorised": 2,
        "pam_common": 1,
    }
    assert cell["pam_not_memorised"] == 0 and cell["pam_unmeasured_units"] == 1
    json.dumps(records, allow_nan=False)  # counts, never NaN


def test_a_run_of_one_snippet_says_each_units_check_in_words_and_escapes_them() -> None:
    frame = pd.DataFrame(
        [
            unit("s0", "ps_base", "P-S-Base", checked(MEMORISED)),
            unit("s0", "ps_inst", "P-S-Inst", checked(NOT_MEMORISED)),
        ],
        columns=RESULT_COLUMNS,
    )
    report = build_report(frame, resamples=200)
    text = render_text(report)
    assert "P-S-Base @ 100: Prior-aware check: memorised. After its own prefix" in text
    assert "P-S-Inst @ 100: Prior-aware check: not memorised." in text
    assert SOURCE in text  # the terminal escapes when it shows, not the text
    html = render_html(report)
    assert "<b>code</b>" not in html and "&lt;b&gt;code&lt;/b&gt;" in html


def test_a_run_without_pam_shows_no_column_and_no_note() -> None:
    frame = results()
    frame = frame[frame["method"] == "ps_inst"]
    report = build_report(frame, resamples=200)
    assert "Prior-aware" not in render_text(report)
    assert "Prior-aware check" not in render_html(report)
    assert "pam" not in report.meta


def test_a_run_stored_before_the_check_still_reports() -> None:
    old = results().drop(columns=list(PAM_KEYS))
    report = build_report(old, resamples=200)
    assert (report.table1["pam_units"] == 0).all()
    assert "Prior-aware" not in render_text(report)
    assert "Prior-aware check" not in render_html(report)
    assert report_to_dict(report)["table1"][0]["pam_units"] == 0
