"""Every HTML writer of memprobe puts text from a user, a document or a model through the one
escaping function, ``memprobe_core.highlight.escape_html``: no control or reordering character
and no markup of the text reaches the page raw (a U+202E in a document would reverse the display
of the report after it; an ESC or BEL is a terminal's, not a page's).

By category: each public function that returns or writes HTML is fed the same hostile texts;
and the source is scanned so that a new writer cannot escape on its own (``html.escape``) or
render a template without the shared ``finalize``.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pandas as pd
import pytest

from memprobe_core.documents import extraction_map as xm
from memprobe_core.documents import map_run
from memprobe_core.documents.continuation import ContinuationOptions, Turn
from memprobe_core.documents.continuation_report import continuation_html
from memprobe_core.documents.continuation_run import StoredContinuation
from memprobe_core.documents.map_report import map_html, text_spans, text_view_html
from memprobe_core.documents.nv_recall import NvRecallOptions, nv_recall
from memprobe_core.documents.windows import MapOptions
from memprobe_core.highlight import Segment, escape_html, segments_to_html
from memprobe_core.release.diff import diff_runs
from memprobe_core.release.render import diff_html
from memprobe_core.report.build import Report
from memprobe_core.report.figures import escape_label
from memprobe_core.report.html import render_html
from memprobe_core.store import Store
from tests.unit.release.conftest import add_run

ROOT = Path(__file__).resolve().parents[2]

# The characters no page may carry raw: bidi override and isolates, ESC, BEL, NUL, C1 controls
# (NEL, the one-byte CSI), DEL, the line separator; and a script tag.
RAW = ["\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\x1b", "\x07", "\x00", "\x85", "\x9b"]
RAW += ["\x7f", "\u2028"]
HOSTILE = "doc\u202eevil\u2066a\u2067b\u2068c\u2069 \x1b[31mred\x07\x00 \x85\x9b\x7f\u2028 "
HOSTILE += "<script>alert(1)</script>"


def _clean(page: str) -> None:
    for char in RAW:
        assert char not in page, f"raw {char!r} in the page"
    assert "<script>" not in page.lower() and "<script" not in page.lower()
    assert "\\u202e" in page and "\\x1b" in page  # shown, as escapes


def _stored_map() -> map_run.StoredMap:
    text = " ".join([HOSTILE] * 4)
    starts = [m.start() for m in re.finditer(r"\S+", text)]
    scores = [
        xm.WindowScore(
            index=k,
            start=k * 2,
            suffix_start=k * 2 + 2,
            suffix_tokens=2,
            match_tokens=2 if k == 0 else 1,
            extractable=k == 0,
            greedy_ids=(),
            pz={},
        )
        for k in range(3)
    ]
    stored = map_run.StoredMap(
        run_id=1,
        status="done",
        name=HOSTILE,
        victim=HOSTILE,
        text=text,
        document_tokens=len(starts),
        options=MapOptions(2, 2, 2),
        pz=map_run.PzSetting(),
        scores=scores,
        texts={k: map_run.WindowText(HOSTILE, HOSTILE, HOSTILE) for k in range(3)},
        windows_total=3,
        errors=0,
    )
    return dataclasses.replace(stored, token_starts=tuple(starts))


def _stored_continuation() -> StoredContinuation:
    text = " ".join(f"{HOSTILE} w{k}" for k in range(40))
    turns = [
        Turn(index=0, phase=1, attempt=0, request_text=HOSTILE, output=HOSTILE, refused=True),
        Turn(index=1, phase=2, attempt=1, request_text=HOSTILE, output=text, success=True),
    ]
    options = NvRecallOptions(min_words_1=1, min_words_2=1)
    return StoredContinuation(
        run_id=2,
        status="finished",
        name=HOSTILE,
        victim=HOSTILE,
        text=text,
        options=ContinuationOptions(),
        turns=turns,
        stop_reason="drift",
        generated_text=text,
        score=nv_recall(text, text, options),
    )


def _diff_page(tmp_path: Path) -> str:
    path = tmp_path / "runs.sqlite"
    units = [(f"s{k}", "member" if k % 2 else "nonmember", 0.1 * k, k > 5, 1.0) for k in range(10)]
    a = add_run(path, HOSTILE, units)
    b = add_run(path, HOSTILE + "b", [(s, lab, 1 - m, e, x) for s, lab, m, e, x in units])
    return diff_html(diff_runs(Store(path), a, b, resamples=100))


def _report_page() -> str:
    empty = pd.DataFrame()
    report = Report(table1=empty, paired=empty, pii=empty, costs=empty)
    report.meta = {"run_id": 7, "title": HOSTILE}
    return render_html(report)


# Every public function of memprobe that returns HTML (the dashboard's st.html blocks are built
# from these: segments_to_html, escape_html, text_view_html).
WRITERS = {
    "highlight.escape_html": lambda tmp: escape_html(HOSTILE),
    "highlight.segments_to_html": lambda tmp: segments_to_html(
        [Segment(HOSTILE, True), Segment(HOSTILE, False)]
    ),
    "report.figures.escape_label": lambda tmp: escape_label(HOSTILE),
    "report.html.render_html": lambda tmp: _report_page(),
    "release.render.diff_html": _diff_page,
    "documents.map_report.text_view_html": lambda tmp: str(
        text_view_html(text_spans(_stored_map()) or [])
    ),
    "documents.map_report.map_html": lambda tmp: map_html(_stored_map()),
    "documents.continuation_report.continuation_html": lambda tmp: continuation_html(
        _stored_continuation()
    ),
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_every_html_writer_shows_controls_as_escapes_and_markup_as_text(writer, tmp_path):
    _clean(WRITERS[writer](tmp_path))


def test_the_map_shows_the_hostile_document_in_its_text_view_and_tables() -> None:
    page = map_html(_stored_map())
    # The text view, the table of windows written back and the partial runs all hold it.
    assert page.count(escape_html(HOSTILE)) >= 3 + 3


# Where HTML is written: the only html.escape is escape_html's, and every jinja2 environment
# renders through the shared finalize.
_SOURCES = [
    p for folder in ("memprobe_core", "ui_common", "pages") for p in (ROOT / folder).rglob("*.py")
] + [ROOT / "app.py"]


def test_no_html_writer_escapes_on_its_own() -> None:
    found = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in _SOURCES
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\bhtml\.escape\(|\bmarkupsafe\.escape\(|(?<![.\w])escape\(", line)
        and p.name != "highlight.py"
    ]
    assert found == [], "escape through memprobe_core.highlight.escape_html:\n" + "\n".join(found)


def test_every_template_environment_uses_the_shared_finalize() -> None:
    found = [
        f"{p.relative_to(ROOT)}"
        for p in _SOURCES
        for text in [p.read_text(encoding="utf-8")]
        for match in re.finditer(r"\bEnvironment\(", text)
        if "finalize=jinja_finalize" not in text[match.start() : match.start() + 300]
    ]
    assert found == [], "give jinja2.Environment finalize=jinja_finalize:\n" + "\n".join(found)
