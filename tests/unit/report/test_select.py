"""The report's selection rule: which Mem Table 1 shows (``--select``)."""

from __future__ import annotations

import pandas as pd
import pytest

from memprobe_core.config import SELECTIONS
from memprobe_core.errors import UsageError
from memprobe_core.report.select import (
    SELECTION_COLUMNS,
    SELECTION_LABELS,
    apply_selection,
)


def frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "method": ["interactive", "ps_inst", "interactive"],
            "mem": [0.4, 0.3, 0.5],
            "mem_best": [0.9, 0.35, None],  # the last: a result stored before schema v3
            "mem_reference": [0.6, None, None],
        }
    )


@pytest.mark.parametrize(
    "select, expected, fallback",
    [
        ("objective", [0.4, 0.3, 0.5], [False, False, False]),
        ("max_mem", [0.9, 0.35, 0.5], [False, False, True]),
        ("reference", [0.6, 0.3, 0.5], [False, True, True]),
    ],
)
def test_apply_selection_picks_the_named_mem(select, expected, fallback):
    out = apply_selection(frame(), select)
    assert out["mem"].tolist() == expected
    assert out["selection_fallback"].tolist() == fallback
    assert out["mem_objective"].tolist() == [0.4, 0.3, 0.5]
    assert set(out["selection"]) == {select} and out.attrs["selection"] == select
    assert out.attrs["selection_label"] == SELECTION_LABELS[select]


def test_apply_selection_leaves_its_input_alone_and_refuses_unknown_rules():
    original = frame()
    apply_selection(original, "max_mem")
    assert original["mem"].tolist() == [0.4, 0.3, 0.5]
    with pytest.raises(UsageError, match="select='best': unknown; use one of objective"):
        apply_selection(original, "best")
    assert set(SELECTION_COLUMNS) == set(SELECTIONS) == set(SELECTION_LABELS)


def test_a_frame_without_the_columns_falls_back_to_mem():
    out = apply_selection(pd.DataFrame({"mem": [0.2]}), "reference")
    assert out["mem"].tolist() == [0.2] and out["selection_fallback"].tolist() == [True]
    empty = apply_selection(pd.DataFrame({"mem": [], "mem_best": []}), "max_mem")
    assert len(empty) == 0 and empty.attrs["selection"] == "max_mem"
