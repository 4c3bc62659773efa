"""The report's leakage figures (docs/method.md §14–§16): Table 1's probabilistic-extraction
columns (the median log10 p_z and n at p over units with p_z > 0, the share with p_z = 0) and
ACR columns, and the divergence totals, in the frame, the text report, the HTML and the JSON."""

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


def with_method(frame: pd.DataFrame, method: str, **columns) -> pd.DataFrame:
    return frame.assign(method=method, method_label=method, **columns)


def test_table1_has_the_median_acr_of_found_prompts_and_the_memorized_share():
    frame = with_method(
        results(),
        "acr",
        acr=[2.5, None, 0.8, 4.0, None],
        acr_memorized=[True, False, False, True, None],  # the last unit: not an acr result
    )
    row = table1(frame, resamples=500).iloc[0]
    assert row["acr"] == pytest.approx(2.5)  # median of 2.5, 0.8, 4.0
    assert row["acr_memorized"] == pytest.approx(2 / 4)
    text = render_text(build_report(frame, resamples=500))
    assert "ACR>1" in text and "2.50" in text
    assert "ACR (median, found)" in render_html(build_report(frame, resamples=500))
    assert "ACR" not in render_text(build_report(results(), resamples=500))


def test_divergence_totals_add_up_per_method_and_length():
    frame = with_method(
        results(),
        "divergence",
        divergence_spans=[0, 2, 1, 0, None],
        divergence_own_spans=[0, 1, 0, 0, None],
        divergence_longest=[0, 70, 52, 0, None],
        divergence_tokens=[0, 130, 52, 0, None],
        divergence_min_tokens=[50, 50, 50, 50, None],
        divergence_samples=[4, 4, 4, 4, None],
        divergence_generated_tokens=[1000, 1024, 990, 1024, None],
        # units 1 and 2 both gave back s1's passage at 10: one distinct span
        divergence_matches=[[], [["s1", 10, 70], ["s3", 0, 60]], [["s1", 10, 70]], [], None],
    )
    report = build_report(frame, resamples=500)
    (row,) = report.method_tables["divergence"].to_dict(orient="records")
    assert (row["units"], row["samples"], row["generated_tokens"]) == (4, 16, 4038)
    assert (row["spans"], row["own_spans"], row["matched_tokens"]) == (3, 1, 182)
    assert (row["longest"], row["units_with_span"], row["min_tokens"]) == (70, 2, "50")
    assert (row["distinct_spans"], row["snippets_given_back"]) == (2, 2)
    assert "Divergence: verbatim spans" in render_text(report)
    assert "units with a span" in render_html(report)
    data = json.loads(json.dumps(report_to_dict(report), allow_nan=False))
    assert data["divergence"][0]["spans"] == 3
    assert build_report(results(), resamples=500).method_tables["divergence"].empty


def test_the_lines_shown_for_a_result_name_each_outcome():
    from memprobe_core.attacks.registry import describe_result
    from memprobe_core.report.leakage import describe

    found = describe(
        {"acr_memorized": True, "acr": 2.5, "acr_prompt_tokens": 4, "acr_target_tokens": 10}
    )
    assert found == [
        "Adversarial compression: a 4-token prompt reproduces the 10-token target exactly: "
        "ACR 2.50, memorized (ACR > 1)."
    ]
    (missed,) = describe(
        {"acr_memorized": False, "acr": None, "acr_bound": 0.5, "acr_target_tokens": 10}
    )
    assert "no prompt reproduced the 10-token target" in missed and "ACR < 0.50" in missed
    divergence = {
        "divergence_spans": 2,
        "divergence_min_tokens": 50,
        "divergence_samples": 4,
        "divergence_generated_tokens": 1000,
        "divergence_longest": 70,
        "divergence_own_spans": 1,
    }
    (line,) = describe_result(divergence)
    assert "2 verbatim span(s) of at least 50 tokens" in line and "longest 70" in line
    pz = {
        "pz_scheme": "greedy",
        "log10_p_z": 0.0,
        "pz_tokens": 3,
        "discover_p": 0.5,
        "log10_n_at_p": 0.0,
    }
    assert describe(pz)[-1].startswith("Probabilistic extraction (greedy): log10 p_z = 0.00")
    assert describe_result(pz) == [] and describe({}) == []
