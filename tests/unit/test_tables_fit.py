"""Tables fit the page (issue 52): Table 1 and the AUROC table were wider than the page at
1440×900; a wide table is drawn in parts that each fit, led by the row's keys."""

from __future__ import annotations

import numpy as np
import pandas as pd
from streamlit.testing.v1 import AppTest

from ui_common import tables

METHODS = ["P-S-Base", "P-S-Inst", "Ours (interactive)"]


def table1() -> pd.DataFrame:
    """Table 1 as a full audit has it: every figure measured."""
    rng = np.random.default_rng(0)
    rows = []
    for method in ("ps_base", "ps_inst", "interactive"):
        row = {"method": method, "domain": "legal", "length": 200, "n": 12, "small_n": False}
        for name in ("mem", "lcs_p", "dis"):
            value = float(rng.uniform(0.1, 0.9))
            row |= {name: value, f"{name}_lo": value - 0.05, f"{name}_hi": value + 0.05}
        for name in [
            "objective",
            "extractable",
            "match_tokens",
            "span_tokens",
            "log10_p_z",
            "pz_zero",
            "log10_n_at_p",
            "acr",
            "acr_memorized",
            "mem_chance",
            "mem_above_chance",
            "beats_chance",
        ]:
            row[name] = float(rng.uniform(0, 1))
        row["chance_units"] = 12
        rows.append(row)
    return pd.DataFrame(rows)


def membership() -> pd.DataFrame:
    rows = []
    for score in ("loss", "zlib", "min_k"):
        row = {"score": score, "kind": "signal", "length": 200, "n_members": 60}
        row |= {"n_nonmembers": 60, "voided_by": "blind baseline separates the sets"}
        for name in ("auroc", "tpr_at_1", "tpr_at_01"):
            row |= {name: 0.61, f"{name}_lo": 0.512, f"{name}_hi": 0.707}
        rows.append(row)
    return pd.DataFrame(rows)


def test_a_full_table1_is_split_into_parts_that_fit_the_page() -> None:
    shown, _ = tables.for_people(table1())
    whole = sum(tables.column_px(c, shown[c]) for c in shown.columns)
    assert whole > 2 * tables.PAGE_WIDTH_PX  # the table that ran off the page
    parts = tables.fit_columns(shown)
    assert len(parts) > 1
    for part in parts:
        assert part[:4] == ["method", "domain", "length", "n"]  # what each row is
        assert sum(tables.column_px(c, shown[c]) for c in part) <= tables.PAGE_WIDTH_PX
    assert list(dict.fromkeys(c for p in parts for c in p)) == list(shown.columns)  # all, once


def test_the_auroc_table_keeps_voided_by_in_every_part() -> None:
    shown, _ = tables.for_people(membership())
    parts = tables.fit_columns(shown)
    assert len(parts) > 1
    for part in parts:
        assert part[0] == "score" and part[-1] == "voided by"
        assert sum(tables.column_px(c, shown[c]) for c in part) <= tables.PAGE_WIDTH_PX


def test_a_narrow_table_is_one_part() -> None:
    shown, _ = tables.for_people(pd.DataFrame({"method": ["ps_base"], "mem": [0.5]}))
    assert tables.fit_columns(shown) == [list(shown.columns)]


def _page() -> None:
    from tests.unit.test_tables_fit import table1
    from ui_common import tables

    tables.show(table1(), key="t1")


def test_the_page_shows_the_first_part_and_the_rest_on_demand() -> None:
    at = AppTest.from_function(_page, default_timeout=120).run()
    assert not at.exception
    (more,) = at.expander
    assert more.label.startswith("More columns: ")
    shown = [list(d.value.columns) for d in at.dataframe]
    assert len(shown) > 1 and all(cols[:4] == ["method", "domain", "length", "n"] for cols in shown)
    everything = list(tables.for_people(table1())[0].columns)
    assert list(dict.fromkeys(c for cols in shown for c in cols)) == everything
    assert all(c in more.label for c in everything if c not in shown[0])
