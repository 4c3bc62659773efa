"""Mem's chance level in the reports: Table 1's columns, the text, JSON, CSV and HTML report
(docs/method.md §2, "Chance level of Mem"; the per-unit figures are tested in test_chance.py)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from memprobe_core.chance import CHANCE_EXPLANATION, too_few
from memprobe_core.report.build import TABLE1_COLUMNS, build_report, report_to_dict, table1
from memprobe_core.report.export import read_safe_csv, to_safe_csv
from memprobe_core.report.html_sections import table1_section
from memprobe_core.report.text import render_text
from memprobe_core.store import RESULT_COLUMNS

CHANCE = ["chance_units", "mem_chance", "mem_above_chance", "beats_chance"]
FEW = too_few()


def row(snippet: str, method: str, mem: float | None, chance: tuple | None, **extra) -> dict:
    level, above, beats, note = chance if chance is not None else (None, None, None, None)
    return (
        dict.fromkeys(RESULT_COLUMNS)
        | {
            "run_id": 1,
            "snippet_id": snippet,
            "domain": "legal",
            "method": method,
            "method_label": method,
            "length": 100,
            "mem": mem,
            "lcs_p": 0.0 if mem is not None else None,
            "objective": mem / 2 if mem is not None else None,
            "victim_queries": 1,
            "attacker_queries": 0,
            "generated_tokens": 10,
            "seconds": 1.0,
            "pii_truth": 0,
            "pii_copied": 0,
            "pii_invented": 0,
            "mem_chance": level,
            "mem_above_chance": above,
            "beats_chance": beats,
            "chance_note": note,
        }
        | extra
    )


def results() -> pd.DataFrame:
    rows = [
        # Three units with a chance level (two beat it) and one without (too few others).
        row("s0", "ps_base", 0.40, (0.30, 0.15, True, None)),
        row("s1", "ps_base", 0.20, (0.20, -0.05, False, None)),
        row("s2", "ps_base", 0.55, (0.25, 0.30, True, None)),
        row("s3", "ps_base", 0.90, (None, None, None, FEW)),
        # Signals-only: no Mem, no chance level, no Table 1 row.
        row("s0", "signals", None, None),
        row("s1", "signals", None, None),
    ]
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def test_table1_has_the_chance_columns_over_the_units_with_a_level() -> None:
    t1 = build_report(results(), resamples=200).table1
    assert set(CHANCE) <= set(TABLE1_COLUMNS) and set(CHANCE) <= set(t1.columns)
    assert list(t1["method"]) == ["ps_base"]  # signals-only has no row
    cell = t1.iloc[0]
    assert cell["n"] == 4 and cell["chance_units"] == 3
    assert cell["mem_chance"] == pytest.approx((0.30 + 0.20 + 0.25) / 3)
    assert cell["mem_above_chance"] == pytest.approx((0.15 - 0.05 + 0.30) / 3)
    assert cell["beats_chance"] == pytest.approx(2 / 3)  # not 2/4: s3 has no level


def test_a_cell_without_any_level_shows_none_not_0() -> None:
    frame = results()
    frame[["mem_chance", "mem_above_chance", "beats_chance"]] = None
    cell = table1(frame, resamples=200).iloc[0]
    assert cell["chance_units"] == 0
    assert all(math.isnan(cell[c]) for c in ("mem_chance", "mem_above_chance", "beats_chance"))
    # A frame from before the columns existed: the same.
    old = results().drop(columns=["mem_chance", "mem_above_chance", "beats_chance"])
    assert table1(old, resamples=200).iloc[0]["chance_units"] == 0


def test_the_text_report_shows_the_columns_explains_them_and_says_why_one_is_missing() -> None:
    report = build_report(results(), resamples=200)
    text = render_text(report)
    assert "Chance" in text and "Beats chance" in text and "Mem−chance" in text
    assert "0.67 (3)" in text  # share of the 3 units with a level
    assert "+0.133" in text
    assert "Chance: Mem of the same output against other snippets' suffixes" in text
    assert f"No chance level for 1 unit(s): {FEW} (1)." in text
    # The signals-only rows are not counted as missing a level.
    assert report.meta["chance_undefined"] == {FEW: 1}


def test_json_and_csv_carry_the_columns() -> None:
    report = build_report(results(), resamples=200)
    data = report_to_dict(report)
    assert data["meta"]["chance"] == CHANCE_EXPLANATION
    assert data["table1"][0]["beats_chance"] == pytest.approx(2 / 3)
    assert data["table1"][0]["chance_units"] == 3
    back = read_safe_csv(to_safe_csv(report.table1))
    assert back.loc[0, "mem_chance"] == pytest.approx(0.25)
    assert back.loc[0, "chance_units"] == 3


def test_the_html_table_1_shows_the_columns_and_the_explanation() -> None:
    section = table1_section(build_report(results(), resamples=200), 1)
    table = section.tables[0]
    assert "Beats chance (share, units)" in table.columns
    cells = dict(zip(table.columns, (c.text for c in table.rows[0])))
    assert cells["Beats chance (share, units)"] == "0.67 (3)"
    assert cells["Chance level (mean)"] == "0.250"
    assert cells["Mem − chance mean"] == "+0.133"
    assert any(n.startswith("Chance: Mem of the same output") for n in section.notes)
    assert any("No chance level for 1 unit(s)" in n for n in section.notes)


def test_reports_without_any_level_leave_the_columns_out() -> None:
    frame = results()
    frame[["mem_chance", "mem_above_chance", "beats_chance"]] = None
    report = build_report(frame, resamples=200)
    assert "Beats chance" not in render_text(report)
    assert "Beats chance (share, units)" not in table1_section(report, 1).tables[0].columns
