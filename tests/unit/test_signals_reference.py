"""One snippet's membership signals say what they are read against (issue 52): which way means
member, relative to a non-member, and that the reference values come from a labelled audit."""

from __future__ import annotations

import re

from streamlit.testing.v1 import AppTest


def _view() -> None:
    from ui_common.render import signals_view

    signals_view({"loss": 2.31, "min_k": 4.02})


def test_the_signal_table_names_its_reference_and_direction() -> None:
    from ui_common.render import SIGNAL_REFERENCE

    at = AppTest.from_function(_view, default_timeout=120).run()
    assert not at.exception
    table = at.dataframe[0].value
    column = "a member's value is"
    assert dict(zip(table["signal"], table[column])) == {
        "Loss": "lower than a non-member's",
        "Min-K%": "higher than a non-member's",
    }
    captions = re.sub(r"\\(.)", r"\1", " ".join(c.value for c in at.caption))
    assert SIGNAL_REFERENCE in captions
    assert "No reference point here" in SIGNAL_REFERENCE and "non-members" in SIGNAL_REFERENCE
