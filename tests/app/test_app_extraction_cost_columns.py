"""The rank-based extraction cost (docs/method.md §21) where the pages show p_z: the Compare
page says the bounds in words under p_z (here: why there is none); Table 1's column is
"extraction cost (bits)" and the Audit page says why its cost is a dash for a black-box
victim."""

from __future__ import annotations

import pandas as pd
from streamlit.testing.v1 import AppTest

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


def test_the_probe_page_gives_the_bracket_under_p_z_too(fake_ui):
    """Wherever p_z is shown (the Probe page's measures, the Runs page's replay, Compare) the
    bracket is said beside it: one view, ``pz_view``, draws both."""
    at = open_page("pages/1_Probe.py")
    at.number_input(key="probe_length").set_value(36)
    at.number_input(key="probe_rounds").set_value(1)
    at.number_input(key="probe_n").set_value(2)
    at.button(key="probe_run").click()
    run_until(at, saved)
    assert "rank-based bound not measured" in texts(at)


def _pz_view() -> None:
    import streamlit as st

    from ui_common.render import pz_view

    pz_view(st.session_state["verbatim"])


def test_a_measured_bracket_is_said_in_words_beside_p_z():
    at = AppTest.from_function(_pz_view, default_timeout=30)
    at.session_state["verbatim"] = {
        "log10_p_z": -6.3,
        "pz_scheme": "top-k=40",
        "pz_tokens": 50,
        "near_verbatim_log10_lower": -4.49,
        "near_verbatim_edits": 5,
        "extraction_bits": 12.34,
        "extraction_window_tokens": 32,
    }
    at.run()
    assert not at.exception, at.exception
    shown = " ".join(t.value for t in at.text)
    assert "at least 1 in 30903 samples writes it within 5 edits" in shown
    assert "no decoding needs fewer than 2^12.3 tries" in shown
