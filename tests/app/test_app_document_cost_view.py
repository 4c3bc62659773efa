"""The Document page's text tab coloured by extraction cost (docs/method.md §21): a radio beside
the map's colouring; each token's minimum b over the windows holding it, from the run's stored
rank-cost pass, with its legend in words; every character of the document escaped."""

from __future__ import annotations

import html
import math
import os
import re

from memprobe_core.documents import map_run
from memprobe_core.documents.map_report import COST_BANDS, cost_spans
from memprobe_core.store import Store
from tests.app.conftest import open_page
from tests.app.test_app_document import DOCUMENT, stored_map
from ui_common.document_view import COLOUR_BY_COST, COLOUR_BY_MAP


def _text_tab_html(at) -> list[str]:
    tabs = {t.label: t for t in at.tabs}
    return [b.proto.body for b in tabs["Document text"].get("html")]


def _document_view(bodies: list[str]) -> str:
    (view,) = [body for body in bodies if "white-space:pre-wrap" in body and "title=" in body]
    return view


def test_the_text_tab_colours_each_token_by_its_cheapest_window_on_request() -> None:
    run_id = stored_map()
    at = open_page("pages/6_Document.py")
    assert not at.exception and not at.error, [e.value for e in at.error]
    radio = at.radio(key="doc_open_colour_by")
    assert radio.value == COLOUR_BY_MAP  # the map's view first, as before
    assert "window 0: " in _document_view(_text_tab_html(at))
    radio.set_value(COLOUR_BY_COST).run()
    assert not at.exception and not at.error
    bodies = _text_tab_html(at)
    view = _document_view(bodies)
    # The characters are the document's, escaped; no raw markup reaches the page.
    shown = html.unescape(re.sub(r"<[^>]+>", "", view))
    assert shown == DOCUMENT and "<img" not in view and "&lt;" in view
    # Each span's hover gives its b, the one the stored pass gives its tokens.
    stored = map_run.read_map(Store(os.environ["MEMPROBE_STORE"]), run_id)
    spans = cost_spans(stored)
    assert spans is not None
    titles = re.findall(r'title="([^"]*)"', view)
    assert len(titles) == len(spans)
    for title, span in zip(titles, spans, strict=True):
        if math.isfinite(span.bits):
            assert html.unescape(title).startswith(f"b = {span.bits:.1f} bits")
    cheapest = min(s.bits for s in spans)
    assert cheapest == round(stored.rank_cost["extraction_bits"], 1)
    # The legend names every band in words, and l.
    legend = " ".join(html.unescape(b) for b in bodies)
    assert all(words in legend for _, words in COST_BANDS)
    assert f"windows of {stored.rank_cost['window_tokens']} tokens" in legend


def test_the_headline_gives_the_documents_b_in_words_rounded_down() -> None:
    run_id = stored_map()
    at = open_page("pages/6_Document.py")
    stored = map_run.read_map(Store(os.environ["MEMPROBE_STORE"]), run_id)
    shown = math.floor(stored.rank_cost["extraction_bits"] * 10) / 10
    metrics = {m.label: m for m in at.metric}
    assert metrics["Extraction cost b"].value == f"{shown:.1f} bits"
    assert (
        metrics["Extraction cost b"].proto.delta
        == f"no decoding needs fewer than 2^{shown:.1f} tries"
    )


def test_a_run_without_a_per_token_record_says_so() -> None:
    run_id = stored_map()
    store = Store(os.environ["MEMPROBE_STORE"])
    config = store.get_run(run_id)["config"]
    del config["rank_cost"]["token_log2_bounds"]  # as a run recorded before memprobe kept it
    store.update_run(run_id, config=config)
    at = open_page("pages/6_Document.py")
    at.radio(key="doc_open_colour_by").set_value(COLOUR_BY_COST).run()
    assert not at.exception
    assert any("No per-token extraction cost is stored" in i.value for i in at.info)
