"""The extraction-risk bracket in the reports (docs/method.md §14): Table 1's cells summarise
the bounds around p_z, the text and HTML reports say them in words, a probe's terminal output
says its unit's."""

from __future__ import annotations

import io
import json
import math

import pandas as pd
import pytest

from memprobe_core.attacks.result import AttackResult
from memprobe_core.cli.output import print_result
from memprobe_core.report.build import build_report, report_to_dict, table1
from memprobe_core.report.html import render_html
from memprobe_core.report.text import render_text
from memprobe_core.store import RESULT_COLUMNS

SCHEME = "temperature 1, top-k 40 <&>"
# (log10 p_z, near-verbatim log10 lower bound, extraction bits) per unit; the last unit is a
# black-box victim's: neither bound measured.
UNITS = [(-6.0, -4.0, 20.0), (-8.0, -5.0, 12.5), (-7.0, None, 30.0), (-9.0, "nm", "nm")]


def results(domain: str = "code") -> pd.DataFrame:
    rows = []
    for i, (log10_p_z, lower, bits) in enumerate(UNITS):
        unmeasured = lower == "nm"
        rows.append(
            dict.fromkeys(RESULT_COLUMNS)
            | {
                "run_id": 1,
                "snippet_id": f"s{i}",
                "domain": domain,
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
                "log10_p_z": log10_p_z,
                "log10_n_at_p": -log10_p_z,
                "pz_outside_support": 0,
                "pz_scheme": SCHEME,
                "discover_p": 0.5,
                "near_verbatim_log10_lower": None if unmeasured else lower,
                "near_verbatim_edits": None if unmeasured else 5,
                "near_verbatim_not_measured": "black box" if unmeasured else None,
                "extraction_bits": None if unmeasured else bits,
                "extraction_window_tokens": None if unmeasured else 30,
                "extraction_not_measured": "no ranks" if unmeasured else None,
            }
        )
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def test_table1_summarises_each_bound_over_the_units_that_measured_it() -> None:
    row = table1(results(), resamples=200).iloc[0]
    # A null lower bound beside its budget is a bound of 0: measured, left out of the median.
    assert row["near_verbatim_units"] == 3 and row["near_verbatim_log10_lower"] == -4.5
    assert row["near_verbatim_edits"] == 5
    assert row["extraction_bits_units"] == 3 and row["extraction_bits"] == 20.0
    assert row["extraction_bits_min"] == 12.5


def test_the_text_report_says_each_cells_bracket() -> None:
    text = render_text(build_report(results(), resamples=200))
    assert f"Extraction risk bracket under {SCHEME}" in text
    assert (
        "P-S-Base · code @ 100: at least 1 in 31623 samples writes it within 5 edits; exactly "
        "1 in 3.2e+07 writes it verbatim; no decoding needs fewer than 2^20 tries; the least "
        "protected unit: 2^12.5 tries"
    ) in text


def test_the_html_report_says_it_escaped() -> None:
    report = build_report(results(domain="<i>code</i>"), resamples=200)
    html = render_html(report)
    assert "<h3>Extraction risk bracket</h3>" in html
    assert "&lt;i&gt;code&lt;/i&gt;" in html and "<i>code</i>" not in html
    assert "at least 1 in 31623 samples writes it within 5 edits" in html
    assert "temperature 1, top-k 40 &lt;&amp;&gt;" in html
    cell = json.loads(json.dumps(report_to_dict(report), allow_nan=False))["table1"][0]
    assert (cell["extraction_bits_min"], cell["near_verbatim_units"]) == (12.5, 3)


def test_a_run_from_before_the_bounds_shows_no_bracket() -> None:
    frame = results().assign(
        near_verbatim_log10_lower=None,
        near_verbatim_edits=None,
        near_verbatim_not_measured=None,
        extraction_bits=None,
        extraction_window_tokens=None,
        extraction_not_measured=None,
    )
    row = table1(frame, resamples=200).iloc[0]
    assert row["extraction_bits_units"] == 0 and math.isnan(row["extraction_bits"])
    report = build_report(frame, resamples=200)
    assert "Extraction risk bracket" not in render_text(report)
    assert "Extraction risk bracket" not in render_html(report)


def test_a_cell_whose_units_measured_one_bound_says_the_other_is_not_measured() -> None:
    frame = results().assign(
        near_verbatim_log10_lower=None, near_verbatim_edits=None, near_verbatim_not_measured=None
    )
    text = render_text(build_report(frame, resamples=200))
    assert "P-S-Base · code @ 100: near-verbatim lower bound not measured; exactly" in text


@pytest.mark.parametrize(
    ("verbatim", "shown"),
    [
        (
            {"pz_scheme": "plain", "log10_p_z": -3.0, "extraction_bits": 9.0},
            "Extraction risk (plain): near-verbatim lower bound not measured; exactly 1 in 1000 "
            "writes it verbatim; no decoding needs fewer than 2^9 tries.",
        ),
        ({"pz_scheme": "plain", "log10_p_z": -3.0}, None),  # a run from before the bounds
    ],
)
def test_a_probe_prints_its_units_bracket(verbatim, shown) -> None:
    result = AttackResult(
        method="ps_base",
        snippet_id="s",
        domain="code",
        length=40,
        prompt="p",
        output="o",
        mem=0.1,
        lcs_p=0.0,
        objective=0.1,
        alpha=1.0,
        verbatim=verbatim,
    )
    out = io.StringIO()
    print_result(1, result, out)
    lines = out.getvalue().splitlines()
    bracket = [line for line in lines if line.startswith("Extraction risk")]
    assert bracket == ([shown] if shown else [])
