"""Result views of ui_common.render that are plain functions (pages test the rest)."""

from __future__ import annotations

from ui_common.render import verbatim_caption


def test_the_caption_says_yes_no_or_not_measured():
    line = verbatim_caption(
        {"extract_k": 50, "extractable": True, "span_tokens": 7, "span_chars": 30}
    )
    assert "first 50 suffix tokens reproduced exactly: **yes**" in line and "7 tokens" in line
    assert "**no**" in verbatim_caption({"extract_k": 3, "extractable": False})
    assert "not measured" in verbatim_caption({})
