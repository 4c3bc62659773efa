"""Reports: Table 1 means and BCa intervals, paired gains with tests, PII and cost totals, rendering."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from memprobe_core.report.build import (
    bootstrap_ci,
    build_report,
    paired_improvement,
    report_to_dict,
    table1,
)
from memprobe_core.report.formatting import SMALL_N_MARK
from memprobe_core.report.text import render_text
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
            rows.append(
                dict.fromkeys(RESULT_COLUMNS)
                | {
                    "run_id": 1,
                    "snippet_id": f"s{i}",
                    "domain": "legal" if i < 2 else "code",
                    "method": method,
                    "method_label": method,
                    "length": 200,
                    "mem": mem,
                    "lcs_p": 0.05 * i,
                    "dis": 0.5 if method == "interactive" else None,
                    "objective": mem / 2,
                    "alpha": 0.4,
                    "victim_queries": 1 if method != "interactive" else 73,
                    "attacker_queries": 0 if method != "interactive" else 4,
                    "generated_tokens": 134 * (1 if method != "interactive" else 73),
                    "seconds": 2.0 if method != "interactive" else 60.0,
                    "pii_truth": 2,
                    "pii_copied": 1 if method == "interactive" else 0,
                    "pii_invented": 1,
                    "victim": "gemma",
                    "rouge_variant": "recall",
                }
            )
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def test_bootstrap_ci_is_seeded_bca() -> None:
    values = np.array([0.1, 0.4, 0.2, 0.9, 0.5, 0.3])
    lo, hi = bootstrap_ci(values, seed=3)
    assert lo < values.mean() < hi
    assert (lo, hi) == bootstrap_ci(values, seed=3)  # reproducible
    assert values.min() <= lo and hi <= values.max()
    # It is scipy's BCa with 5,000 resamples (not the percentile interval it replaced).
    ref = stats.bootstrap(
        (values,), np.mean, n_resamples=5000, method="BCa", rng=np.random.default_rng(3)
    ).confidence_interval
    assert (lo, hi) == pytest.approx((ref.low, ref.high))
    pct = stats.bootstrap(
        (values,), np.mean, n_resamples=5000, method="percentile", rng=np.random.default_rng(3)
    ).confidence_interval
    assert (lo, hi) != pytest.approx((pct.low, pct.high), abs=1e-3)


@pytest.mark.parametrize("sample", [[0.7], [0.7, 0.7, 0.7], [0.0] * 12, [np.nan, 0.2], []])
def test_degenerate_samples_give_the_point_without_an_interval(sample) -> None:
    assert all(math.isnan(x) for x in bootstrap_ci(sample))


@pytest.mark.parametrize("resamples", [0, 99, 100_001, -5, True, 1.5, "5000"])
def test_resamples_out_of_range_raise_a_clear_value_error(resamples) -> None:
    with pytest.raises(ValueError, match=r"whole number from 100 to 100000 \(got .*\); give 5000"):
        bootstrap_ci([0.1, 0.2, 0.4], resamples=resamples)
    with pytest.raises(ValueError, match="resamples"):
        build_report(results(), resamples=resamples)
    with pytest.raises(ValueError, match="resamples"):  # even when there is nothing to resample
        table1(pd.DataFrame(columns=RESULT_COLUMNS), resamples=resamples)


def test_resamples_at_the_bounds_are_accepted() -> None:
    for resamples in (100, 100_000):
        lo, hi = bootstrap_ci([0.1, 0.2, 0.4, 0.3], resamples=resamples)
        assert lo < hi


def test_table1_means_by_method_domain_length():
    t1 = table1(results())
    row = t1[(t1.method == "interactive") & (t1.domain == "code")].iloc[0]
    assert row["n"] == 2 and row["mem"] == pytest.approx(0.65)
    assert row["mem_lo"] == pytest.approx(0.4) and row["mem_hi"] == pytest.approx(0.9)
    pooled = t1[(t1.method == "ps_base") & (t1.domain == "all")].iloc[0]
    assert pooled["n"] == 4 and pooled["mem"] == pytest.approx(0.25)
    assert row["small_n"] and pooled["small_n"]
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


def test_small_n_flag_starts_below_ten_snippets() -> None:
    def frame(n: int) -> pd.DataFrame:
        rows = [
            dict.fromkeys(RESULT_COLUMNS)
            | {
                "snippet_id": f"s{i}",
                "domain": "code",
                "method": method,
                "length": 200,
                "mem": 0.1 * (i % 7) + (0.05 if method == "interactive" else 0.0),
                "lcs_p": 0.1,
                "objective": 0.1,
            }
            for i in range(n)
            for method in ("ps_inst", "interactive")
        ]
        return pd.DataFrame(rows, columns=RESULT_COLUMNS)

    assert table1(frame(9))["small_n"].tolist() == [True, True]
    assert table1(frame(10))["small_n"].tolist() == [False, False]
    assert paired_improvement(frame(9))["small_n"].all()
    assert not paired_improvement(frame(10))["small_n"].any()


def test_paired_rows_carry_a_test_and_holm_over_distinct_comparisons() -> None:
    paired = paired_improvement(results()).set_index(["method", "baseline"])
    over_inst = paired.loc[("interactive", "ps_inst")]
    # 3 wins, 1 tie (dropped): exact sign test, p = 2 × 0.5^3.
    assert (over_inst["test"], over_inst["p_value"]) == ("sign", pytest.approx(0.25))
    # Family: {Ours vs Inst, Ours vs Base, Base vs Inst} — the mirrored "Inst over Base" row is
    # the same hypothesis and counts once (m = 3, not 4): sorted .25, .25, 1 → .75, .75, 1.
    assert over_inst["p_holm"] == pytest.approx(0.75)
    assert paired.loc[("interactive", "ps_base"), "p_holm"] == pytest.approx(0.75)
    assert (
        paired.loc[("ps_base", "ps_inst"), "p_holm"] == paired.loc[("ps_inst", "ps_base"), "p_holm"]
    )
    assert paired.loc[("ps_base", "ps_inst"), "p_holm"] == 1.0


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
    errors = pd.DataFrame(
        [
            {
                "snippet_id": "s9",
                "method": "ps_inst",
                "length": 500,
                "attempts": 1,
                "error": "DataError: too short",
            }
        ]
    )
    report = build_report(results(), errors=errors, meta={"run_id": 4, "title": "demo"})
    text = render_text(report)
    assert "Run 4 — demo" in text and "Table 1" in text
    assert "Ours (interactive)" in text and "0.650 [0.400, 0.900]" in text
    assert "+0.300" in text and "3/1/0" in text
    assert "95 % BCa bootstrap CI, 5000 resamples" in text
    assert f"4{SMALL_N_MARK}" in text and f"{SMALL_N_MARK} n < 10" in text  # marked + footnote
    assert "p Holm" in text and " sign " in text and "0.250  0.750" in text
    assert "s9 / ps_inst / 500: DataError: too short" in text
    data = json.loads(json.dumps(report_to_dict(report)))
    assert data["meta"]["run_id"] == 4 and len(data["table1"]) == len(report.table1)
    assert data["table1"][0]["dis"] is None  # NaN → null
    assert data["table1"][0]["small_n"] is True
    assert {"test", "p_value", "p_holm", "small_n"} <= set(data["paired"][0])
    assert data["meta"]["interval"] == "BCa bootstrap 95 %"


def test_render_marks_only_small_cells_and_shows_points_without_intervals() -> None:
    big = pd.concat(
        [results().assign(snippet_id=lambda f, k=k: f["snippet_id"] + f"-{k}") for k in range(5)],
        ignore_index=True,
    )  # n = 10 per domain, 20 pooled
    text = render_text(build_report(big))
    assert " 10 " in text and " 20 " in text and SMALL_N_MARK not in text
    lone = build_report(results()[results()["snippet_id"] == "s0"])  # n = 1 per cell
    assert "0.500 [" not in render_text(lone) and "0.500" in render_text(lone)
    assert "A mean without brackets has no interval" in render_text(lone)


def test_empty_results():
    report = build_report(pd.DataFrame(columns=RESULT_COLUMNS))
    assert report.table1.empty and report.paired.empty
    assert "No finished units yet" in render_text(report)


def test_select_picks_which_mem_table_1_shows_and_names_it() -> None:
    frame = results()
    frame["mem_best"] = frame["mem"] + 0.05  # the trace held a higher Mem than p*'s
    default = build_report(frame, resamples=200)
    best = build_report(frame, resamples=200, select="max_mem")
    pick = lambda r: r.table1.query("method == 'interactive' and domain == 'all'")["mem"].item()
    assert pick(best) == pytest.approx(pick(default) + 0.05)
    assert "argmax O" in default.meta["selection_label"]
    assert "max_mem" in best.meta["selection_label"]
    assert "Mem = highest Mem in the trace" in render_text(best)


def test_the_report_names_each_roles_dtype_and_warns_of_a_bfloat16_victim() -> None:
    from memprobe_core.report.build import dtype_meta

    assert dtype_meta(None) == {}  # a run recorded before per-role dtypes
    float32 = dtype_meta({"victim": "float32", "attacker": "bfloat16"})
    text = render_text(build_report(results(), meta={"run_id": 4, **float32}))
    assert "Dtypes: victim float32, attacker bfloat16" in text
    assert "may differ" not in text
    bf16 = dtype_meta({"victim": "bfloat16", "attacker": "bfloat16"})
    text = render_text(build_report(results(), meta={"run_id": 4, **bf16}))
    assert "The victim ran in bfloat16: its greedy outputs" in text
