"""The Probe/Compare membership-signal view in a real Streamlit run: measured by the weights or by
the victim's server, not measured (with the reason), or absent."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest


def _view() -> None:
    import streamlit as st

    from ui_common.render import signals_view

    signals_view(st.session_state["membership"])


def _run(membership):  # type: ignore[no-untyped-def]
    at = AppTest.from_function(_view, default_timeout=30)
    at.session_state["membership"] = membership
    at.run()
    assert not at.exception, at.exception
    return at, " ".join(c.value for c in at.caption)


def test_server_scored_signals_say_so_and_show_their_values():
    at, captions = _run({"loss": 2.5, "min_k": -4.0, "min_k_pp": None, "scored_by": "server"})
    assert "Scored by the victim's server" in captions
    shown = at.dataframe[0].value
    assert list(shown["signal"]) == ["Loss", "Min-K%"]  # Min-K%++ absent, not zero
    assert list(shown["value"]) == [2.5, -4.0]


def test_weight_scored_signals_have_no_server_caption():
    at, captions = _run({"loss": 2.5, "scored_by": "forward"})
    assert "Scored by the victim's server" not in captions
    assert list(at.dataframe[0].value["signal"]) == ["Loss"]


def test_a_server_that_cannot_score_shows_why():
    at, _ = _run({"not_measured": "endpoint x rejected the request (HTTP 400): no echo"})
    row = at.dataframe[0].value.iloc[0]
    assert row["signal"] == "not measured" and "HTTP 400" in row["what"]


def test_no_signals_says_what_they_need():
    at, captions = _run({})
    assert "prompt's log-probs" in captions and len(at.dataframe) == 0
