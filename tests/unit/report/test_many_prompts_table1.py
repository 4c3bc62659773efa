"""Table 1's many-prompt robustness column (docs/method.md §23): the mean count of eliciting
prompts per unit for the attacker loop, blank ("–", never 0) for methods that write one prompt."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from memprobe_core.report.build import build_report, table1
from memprobe_core.report.formatting import MISSING
from memprobe_core.report.html import render_html
from memprobe_core.report.text import render_text
from memprobe_core.store import RESULT_COLUMNS


def unit(i: int, method: str, label: str, eliciting: int | None) -> dict:
    return dict.fromkeys(RESULT_COLUMNS) | {
        "run_id": 1,
        "snippet_id": f"s{i}",
        "domain": "code",
        "method": method,
        "method_label": label,
        "length": 100,
        "mem": 0.5,
        "lcs_p": 0.1,
        "objective": 0.2,
        "alpha": 0.5,
        "victim_queries": 1,
        "attacker_queries": 0,
        "generated_tokens": 10,
        "seconds": 1.0,
        "pii_truth": 0,
        "pii_copied": 0,
        "pii_invented": 0,
        "eliciting_prompts": eliciting,
        "eliciting_threshold": None if eliciting is None else 0.5,
    }


def results() -> pd.DataFrame:
    rows = [unit(i, "interactive", "Ours (interactive)", n) for i, n in enumerate([0, 3, 9])]
    rows += [unit(i, "ps_base", "P-S-Base", None) for i in range(3)]
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def test_table1_has_the_mean_count_for_the_loop_and_none_for_a_one_prompt_method():
    t1 = table1(results(), resamples=200).set_index("method")
    assert t1.loc["interactive", "eliciting_prompts"] == pytest.approx(4.0)  # (0 + 3 + 9) / 3
    assert math.isnan(t1.loc["ps_base", "eliciting_prompts"])


def test_the_reports_show_the_column_and_leave_other_methods_blank():
    report = build_report(results(), resamples=200)
    lines = render_text(report).splitlines()
    header = next(line for line in lines if "elicit" in line)
    column = header.index("elicit")
    loop = next(line for line in lines if line.strip().startswith("Ours"))
    ps = next(line for line in lines if line.strip().startswith("P-S-Base"))
    assert loop[column:].split()[0] == "4.0"
    assert ps[column:].split()[0] == MISSING
    assert "eliciting prompts (mean per unit)" in render_html(report)


def test_a_run_without_the_loop_shows_no_column():
    frame = results()
    only_ps = frame[frame["method"] == "ps_base"]
    assert "elicit" not in render_text(build_report(only_ps, resamples=200))
