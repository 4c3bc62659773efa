"""The rank-based extraction cost (docs/method.md §21) where the pages show p_z: the Compare
page says the bounds in words under p_z (here: why there is none); Table 1's column is
"extraction cost (bits)" and the Audit page says why its cost is a dash for a black-box
victim."""

from __future__ import annotations

import pandas as pd

from memprobe_core.store import Store
from tests.app.conftest import open_page, run_until, saved, texts
from ui_common.audit_view import extraction_cost_note
from ui_common.tables import column_label


def test_compare_says_in_words_why_a_victim_without_scores_has_no_extraction_cost(fake_ui):
    at = open_page("pages/2_Compare.py")
    at.multiselect(key="cmp_methods").set_value(["ps_inst"])
    at.number_input(key="cmp_length").set_value(40)
    at.button(key="cmp_run").click()
    run_until(at, saved)
    (run,) = Store(fake_ui).list_runs()
    (unit,) = Store(fake_ui).units(run["id"])
    assert "extraction_bits" not in unit["verbatim"]  # the fake victim scores no text
    assert "rank-based bound not measured" in texts(at)


def test_table1_names_the_cost_in_words_and_says_why_it_is_a_dash():
    assert column_label("extraction_bits") == "extraction cost (bits)"
    black_box = pd.DataFrame({"pz_zero": [0.0, 0.0], "extraction_bits_units": [0.0, 3.0]})
    note = extraction_cost_note(black_box)
    assert note is not None and "– in 1 of 2 rows with p_z" in note
    assert "returns each token's log-prob, not its rank" in note
    assert extraction_cost_note(black_box.assign(extraction_bits_units=3.0)) is None
    # A run from before the bounds, or with p_z off: nothing to explain.
    assert extraction_cost_note(pd.DataFrame({"pz_zero": [0.0]})) is None
    assert (
        extraction_cost_note(pd.DataFrame({"pz_zero": [None], "extraction_bits_units": [0]}))
        is None
    )
