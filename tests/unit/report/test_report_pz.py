"""Table 1's probabilistic-extraction columns (docs/method.md §14): the median log10 p_z and n at
p over units with p_z > 0, the share with p_z = 0, in the frame, the text report and the HTML."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from memprobe_core.report.build import build_report, report_to_dict, table1
from memprobe_core.report.formatting import power_of_ten
from memprobe_core.report.html import render_html
from memprobe_core.report.text import render_text
from memprobe_core.store import RESULT_COLUMNS

# (log10 p_z, log10 n at p, tokens outside the scheme's support) per unit; None, 0: not measured
UNITS = [(-2.0, 2.5, 0), (-8.0, 7.8, 0), (-4.0, 3.6, 0), (None, None, 2), (None, None, None)]


def results() -> pd.DataFrame:
    rows = []
    for i, (log10_p_z, log10_n, outside) in enumerate(UNITS):
        rows.append(
            dict.fromkeys(RESULT_COLUMNS)
            | {
                "run_id": 1,
                "snippet_id": f"s{i}",
                "domain": "code",
                "method": "ps_base",
                "method_label": "P-S-Base",
                "length": 100,
                "mem": 0.5,
                "lcs_p": 0.1,
                "objective": 0.2,
                "alpha": 1.0,
                "victim_queries": 1,
                "attacker_queries": 0,
                "generated_tokens": 10,
                "seconds": 1.0,
                "pii_truth": 0,
                "pii_copied": 0,
                "pii_invented": 0,
                "log10_p_z": log10_p_z,
                "log10_n_at_p": log10_n,
                "pz_outside_support": outside,
                "pz_scheme": None if outside is None else "temperature 1, top-k 40",
                "discover_p": None if outside is None else 0.5,
            }
        )
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def test_table1_has_the_median_over_positive_p_z_and_the_share_of_zero():
    row = table1(results(), resamples=500).iloc[0]
    assert row["log10_p_z"] == pytest.approx(-4.0)  # median of -2, -8, -4
    assert row["log10_n_at_p"] == pytest.approx(3.6)
    assert row["pz_zero"] == pytest.approx(1 / 4)  # 4 units measured, one with p_z = 0


def test_a_run_without_p_z_has_nan_columns_and_no_report_columns():
    frame = results().assign(log10_p_z=None, log10_n_at_p=None, pz_outside_support=None)
    row = table1(frame, resamples=500).iloc[0]
    assert math.isnan(row["log10_p_z"]) and math.isnan(row["pz_zero"])
    assert "log10 p_z" not in render_text(build_report(frame, resamples=500))


def test_text_and_html_reports_show_the_columns_and_the_scheme():
    report = build_report(results(), resamples=500)
    text = render_text(report)
    assert "log10 p_z" in text and "n at p=0.5" in text and "-4.0" in text
    assert "p_z under temperature 1, top-k 40" in text
    html = render_html(report)
    assert "log10 p_z (median)" in html and "3981" in html  # 10^3.6
    json.loads(json.dumps(report_to_dict(report), allow_nan=False))  # no inf/NaN in the JSON


@pytest.mark.parametrize(
    ("log10_n", "shown"),
    [(0.0, "1"), (2.5, "316"), (7.8, "6.3e+07"), (412.3, "10^412"), (None, "–")],
)
def test_a_count_given_by_its_log10_reads_at_any_size(log10_n, shown):
    assert power_of_ten(log10_n) == shown
