"""Reports: Table 1 means and bootstrap intervals, paired gains, PII and cost totals, rendering."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from memprobe_core.audit.report import (
    bootstrap_ci,
    build_report,
    paired_improvement,
    render_text,
    report_to_dict,
    table1,
)
from memprobe_core.store import RESULT_COLUMNS

MEM = {  # method -> mem per snippet s0..s3 (legal s0, s1; code s2, s3)
    "ps_base": [0.10, 0.20, 0.30, 0.40],
    "ps_inst": [0.20, 0.20, 0.10, 0.30],
    "interactive": [0.50, 0.20, 0.40, 0.90],
}


def results() -> pd.DataFrame:
    rows = []
    for method, values in MEM.items():
        for i, mem in enumerate(values):
            rows.append(dict.fromkeys(RESULT_COLUMNS) | {
                "run_id": 1, "snippet_id": f"s{i}", "domain": "legal" if i < 2 else "code",
                "method": method, "method_label": method, "length": 200, "mem": mem,
                "lcs_p": 0.05 * i, "dis": 0.5 if method == "interactive" else None,
                "objective": mem / 2, "alpha": 0.4, "victim_queries": 1 if method != "interactive"
                else 73, "attacker_queries": 0 if method != "interactive" else 4,
                "generated_tokens": 134 * (1 if method != "interactive" else 73),
                "seconds": 2.0 if method != "interactive" else 60.0,
                "pii_truth": 2, "pii_copied": 1 if method == "interactive" else 0,
                "pii_invented": 1, "victim": "gemma", "rouge_variant": "recall",
            })
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def test_bootstrap_ci_is_seeded_and_sane():
    values = np.array([0.1, 0.4, 0.2, 0.9, 0.5, 0.3])
    lo, hi = bootstrap_ci(values, seed=3)
    assert lo < values.mean() < hi
    assert (lo, hi) == bootstrap_ci(values, seed=3)  # reproducible
    assert values.min() <= lo and hi <= values.max()
    assert bootstrap_ci([0.7, 0.7, 0.7]) == pytest.approx((0.7, 0.7))
    assert all(math.isnan(x) for x in bootstrap_ci([0.7]))
    assert all(math.isnan(x) for x in bootstrap_ci([np.nan, 0.2]))  # NaNs dropped first


def test_table1_means_by_method_domain_length():
    t1 = table1(results())
    row = t1[(t1.method == "interactive") & (t1.domain == "code")].iloc[0]
    assert row["n"] == 2 and row["mem"] == pytest.approx(0.65)
    assert row["mem_lo"] == pytest.approx(0.4) and row["mem_hi"] == pytest.approx(0.9)
    pooled = t1[(t1.method == "ps_base") & (t1.domain == "all")].iloc[0]
    assert pooled["n"] == 4 and pooled["mem"] == pytest.approx(0.25)
    assert math.isnan(pooled["dis"])  # prefix-suffix has no Dis
    assert t1[(t1.method == "interactive") & (t1.domain == "all")].iloc[0]["dis"] == 0.5
    # Paper order: P-S-Base, P-S-Inst, …, Ours; per method the domains, then the pooled row.
    assert list(dict.fromkeys(t1["method"])) == ["ps_base", "ps_inst", "interactive"]
    assert list(t1[t1.method == "ps_base"]["domain"]) == ["code", "legal", "all"]


def test_paired_improvement_counts_wins_ties_losses():
    paired = paired_improvement(results())
    over_inst = paired[(paired.method == "interactive") & (paired.baseline == "ps_inst")].iloc[0]
    diffs = np.array(MEM["interactive"]) - np.array(MEM["ps_inst"])  # .3 0 .3 .6
    assert over_inst["mean_diff"] == pytest.approx(diffs.mean())
    assert (over_inst["wins"], over_inst["ties"], over_inst["losses"]) == (3, 1, 0)
    assert over_inst["n_pairs"] == 4 and over_inst["lo"] <= over_inst["mean_diff"]
    base_over_inst = paired[(paired.method == "ps_base") & (paired.baseline == "ps_inst")].iloc[0]
    assert (base_over_inst["wins"], base_over_inst["ties"], base_over_inst["losses"]) == (2, 1, 1)
    assert set(paired["baseline"]) == {"ps_inst", "ps_base"}
    # Only snippets present for both are paired.
    partial = results()
    partial = partial[~((partial.method == "ps_inst") & (partial.snippet_id == "s3"))]
    row = paired_improvement(partial)
    assert row[(row.method == "interactive") & (row.baseline == "ps_inst")].iloc[0]["n_pairs"] == 3


def test_pii_and_costs_per_method():
    report = build_report(results())
    pii = report.pii.set_index("method")
    assert pii.loc["interactive", ["truth", "copied", "invented"]].tolist() == [8, 4, 4]
    assert pii.loc["interactive", "copied_share"] == 0.5
    assert pii.loc["ps_base", "copied_share"] == 0.0
    costs = report.costs.set_index("method")
    assert costs.loc["interactive", "victim_queries"] == 292
    assert costs.loc["interactive", "queries_per_unit"] == 77
    assert costs.loc["ps_inst", "seconds_per_unit"] == 2.0


def test_render_and_json():
    errors = pd.DataFrame([{"snippet_id": "s9", "method": "ps_inst", "length": 500,
                            "attempts": 1, "error": "DataError: too short"}])
    report = build_report(results(), errors=errors, meta={"run_id": 4, "title": "demo"})
    text = render_text(report)
    assert "Run 4 — demo" in text and "Table 1" in text
    assert "Ours (interactive)" in text and "0.650 [0.400, 0.900]" in text
    assert "+0.300" in text and "3/1/0" in text
    assert "s9 / ps_inst / 500: DataError: too short" in text
    data = json.loads(json.dumps(report_to_dict(report)))
    assert data["meta"]["run_id"] == 4 and len(data["table1"]) == len(report.table1)
    assert data["table1"][0]["dis"] is None  # NaN → null


def test_empty_results():
    report = build_report(pd.DataFrame(columns=RESULT_COLUMNS))
    assert report.table1.empty and report.paired.empty
    assert "No finished units yet" in render_text(report)
