"""Result views of ui_common.render that are plain functions (pages test the rest)."""

from __future__ import annotations

from ui_common.render import verbatim_caption


def test_the_caption_says_yes_no_or_not_measured():
    line = verbatim_caption(
        {"extract_k": 50, "extractable": True, "span_tokens": 7, "span_chars": 30}
    )
    assert "first 50 victim tokens reproduced exactly: **yes**" in line
    assert "span 7 victim tokens (30 characters)" in line
    assert "**no**" in verbatim_caption({"extract_k": 3, "extractable": False})
    assert "not measured" in verbatim_caption({})


def test_the_pz_caption_names_the_scheme_and_each_outcome():
    from ui_common.render import pz_caption

    measured = {
        "log10_p_z": -3.25,
        "pz_tokens": 34,
        "discover_p": 0.5,
        "log10_n_at_p": 3.0,
        "pz_scheme": "temperature 1, top-k 40",
    }
    line = pz_caption(measured)
    assert "(temperature 1, top-k 40)" in line and "-3.25" in line and "n = 1000" in line
    zero = pz_caption({"pz_scheme": "greedy", "log10_p_z": None, "pz_outside_support": 2})
    assert "p_z = 0" in zero and "2 suffix token(s)" in zero
    why = pz_caption({"pz_scheme": "greedy", "pz_not_measured": "no log-probs"})
    assert why.endswith("not measured: no log-probs")
    assert pz_caption({}) == "Probabilistic extraction: not measured."
