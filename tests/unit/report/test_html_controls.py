"""Control and bidi characters from data reach neither the terminal nor the HTML report raw: a
NUL is an HTML parse error and a right-to-left override reorders what the reader sees."""

from __future__ import annotations

import pandas as pd

from memprobe_core.highlight import Segment, escape_html, segments_to_html, show_controls
from memprobe_core.report.build import Report
from memprobe_core.report.html import render_html

HOSTILE = "run\x00 \x1b[31mred\u202eevil\u2066x"


def test_show_controls_makes_every_one_visible_and_keeps_tabs_and_newlines():
    assert show_controls(HOSTILE + "\tok\r\nnext") == (
        "run\\x00 \\x1b[31mred\\u202eevil\\u2066x\tok\nnext"
    )
    assert show_controls("a\nb", multiline=False) == "a\\x0ab"


def test_highlighted_and_block_text_in_html_show_controls_as_escapes():
    for html in (segments_to_html([Segment(HOSTILE, True)]), escape_html(HOSTILE)):
        assert "\x00" not in html and "\u202e" not in html and "\x1b" not in html
        assert "\\u202e" in html


def test_the_report_page_title_and_notes_carry_no_raw_control_character():
    empty = pd.DataFrame()
    report = Report(table1=empty, paired=empty, pii=empty, costs=empty)
    report.meta = {"run_id": 7, "title": HOSTILE}
    page = render_html(report)
    for raw in ("\x00", "\x1b", "\u202e", "\u2066"):
        assert raw not in page
    assert "run\\x00" in page  # shown, as text
