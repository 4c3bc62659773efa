"""The self-contained HTML report: sections, escaping, no network, plotly once, CSP, writing."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from html.parser import HTMLParser

import numpy as np
import plotly.graph_objects as go
import pytest
from plotly.offline import get_plotlyjs

from memprobe_core.report.build import build_report, report_for_run
from memprobe_core.report.export import ExportError
from memprobe_core.report.figures import escape_label
from memprobe_core.report.html import html_report_for_run, render_html, write_html
from memprobe_core.report.html_sections import _figure
from tests.helpers.labelled_run import CLOSER, PWN, SCRIPT, labelled_run, with_membership


class Page(HTMLParser):
    """Tags with their attributes, and the text of every <script> element."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._in_script: dict[str, str | None] | None = None
        self._chunks: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._in_script, self._chunks = dict(attrs), []

    def handle_endtag(self, tag):
        if tag == "script" and self._in_script is not None:
            self.scripts.append((self._in_script, "".join(self._chunks)))
            self._in_script = None

    def handle_data(self, data):
        if self._in_script is not None:
            self._chunks.append(data)

    def text_of(self, tag: str) -> list[str]:
        return [a.get("id") or "" for t, a in self.tags if t == tag]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return labelled_run(tmp_path_factory.mktemp("html") / "runs.sqlite")


@pytest.fixture(scope="module")
def page_text(run) -> str:
    store, run_id = run
    return render_html(with_membership(report_for_run(store, run_id)), store, run_id)


def test_every_section_is_there(page_text) -> None:
    ids = Page(page_text).text_of("section")
    assert ids == [
        "summary",  # the answer first: verdicts and headline figures
        "table1",
        "paired",
        "membership",
        "validity",
        "pii",
        "costs",
        "errors",
        "examples",
        "manifest",  # the settings close the report: the answer comes first
    ]
    for heading in (
        "Appendix: run manifest",
        "Table 1",
        "Paired gains",
        "Membership",
        "Failed units",
    ):
        assert f"<h2>{heading}</h2>" in page_text
    # Table 1 with intervals, paired tests, the membership table with intervals.
    assert "0.350 [0.175, 0.575]" in page_text  # Ours, all domains: mean [BCa CI]
    assert "<td>sign</td>" in page_text
    assert "1.000 [0.800, 1.000]" in page_text  # AUROC of Ours with its interval
    assert "TPR @ 0.1 % FPR [95 % CI]" in page_text


def test_manifest_shows_options_and_versions_but_not_the_owner(page_text) -> None:
    assert re.search(r"<td>config\.options\.seed</td><td[^>]*>7</td>", page_text)
    assert re.search(r"<td>versions\.torch</td><td[^>]*>2\.13\.0</td>", page_text)
    assert re.search(r"<td>status</td><td>finished</td>", page_text)
    assert "secret-host" not in page_text and "manifest.owner" not in page_text


def test_snippet_markup_only_appears_escaped(page_text) -> None:
    for evil in (SCRIPT, PWN, CLOSER, "<b>x</b>"):
        assert evil not in page_text
    page = Page(page_text)
    # Only the report's own elements: no <img> and no <b> from a snippet, domain or error
    # (the report bolds each of the 11 finished units' method names, nothing else).
    assert all(t != "img" for t, _ in page.tags)
    assert [t for t, _ in page.tags].count("b") == 11
    # Every script is plotly, the loader or a JSON data block — none from a snippet.
    kinds = [attrs.get("type") for attrs, _ in page.scripts]
    assert kinds.count(None) == 2 and set(kinds) == {None, "application/json"}
    assert len(re.findall(r"<script\b", page_text)) == len(page.scripts)
    assert len(re.findall(r"</script", page_text, re.I)) == len(page.scripts)
    # ... and the text reads as typed (the parser undoes the entities).
    body = page_text.split("<body>", 1)[1]
    assert "s0&lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert "boom &lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;" in body


def test_highlighted_outputs_mark_the_common_subsequence(page_text) -> None:
    marks = re.findall(r"<mark[^>]*>(.*?)</mark>", page_text, re.S)
    assert "the licensee shall keep" in marks
    assert "the notice in every copy" in marks
    # The suffix's <script> stays text inside the true-suffix box.
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page_text
    assert "9 of 17 suffix words in the common subsequence" in page_text


def test_nothing_is_loaded_from_anywhere(page_text) -> None:
    page = Page(page_text)
    for tag, attrs in page.tags:
        for name in ("src", "href", "action", "data", "poster"):
            value = (attrs.get(name) or "").strip().lower()
            assert not value.startswith(("http:", "https:", "//", "ftp:")), (tag, attrs)
    assert not any(t in ("link", "iframe", "object", "embed", "img") for t, _ in page.tags)
    assert "@import" not in page_text and "url(" not in page_text.split("<script")[0]


def test_csp_forbids_the_network_and_allows_exactly_the_report_scripts(page_text) -> None:
    page = Page(page_text)
    metas = [a for t, a in page.tags if t == "meta" and a.get("http-equiv")]
    assert [t for t, _ in page.tags[:3]] == ["html", "head", "meta"]
    assert metas[0] is page.tags[2][1]  # the first thing in <head>: it covers every script
    csp = dict(
        part.strip().split(" ", 1) for part in metas[0]["content"].split(";") if part.strip()
    )
    assert csp["default-src"] == "'none'" and csp["connect-src"] == "'none'"
    executable = [text for attrs, text in page.scripts if attrs.get("type") is None]
    hashes = {
        f"'sha256-{base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()}'"
        for s in executable
    }
    assert set(csp["script-src"].split()) == hashes


def test_plotly_js_is_embedded_once(page_text) -> None:
    plotly_js = get_plotlyjs()
    assert page_text.count(plotly_js) == 1
    assert page_text.count(plotly_js[:300]) == 1


def test_figures_are_json_data_with_escaped_labels(page_text) -> None:
    blocks = [json.loads(t) for a, t in Page(page_text).scripts if a.get("data-plot")]
    assert len(blocks) == 2  # Mem by domain (one length) and the ROC curves
    names = [trace.get("name", "") for block in blocks for trace in block["data"]]
    assert any(n.startswith(escape_label(f"Min-K% {SCRIPT}")) for n in names)
    domains = {x for trace in blocks[0]["data"] for x in trace["x"]}
    assert domains == {"legal", escape_label("code<b>x</b>")}
    roc = blocks[1]["data"][0]
    assert _values(roc["x"]) == [0.0, 0.0, 0.5, 1.0] and _values(roc["y"]) == [0.0, 0.5, 1.0, 1.0]
    assert "(AUROC 0.750)" in roc["name"]


def _values(array) -> list[float]:
    """A plotly JSON array: a list, or (plotly ≥ 6) a base64 typed array."""
    if isinstance(array, dict):
        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"]).tolist()
    return list(array)


def test_a_raw_script_closer_in_a_figure_cannot_end_its_data_block() -> None:
    # Even a label that skipped escape_label: plotly's JSON writes < > / as \\u escapes.
    fig = go.Figure(go.Bar(x=["</script><script>alert(1)</script>"], y=[1], name="</SCRIPT>"))
    data = str(_figure(fig, 1, "t").json)
    assert "<" not in data and ">" not in data
    assert json.loads(data)["data"][0]["x"] == ["</script><script>alert(1)</script>"]


def test_without_a_store_or_labels_the_page_still_renders(run) -> None:
    store, run_id = run
    report = build_report(store.results_frame(run_id).assign(label=None))  # unlabelled
    text = render_html(report)
    ids = Page(text).text_of("section")
    assert "membership" not in ids and "examples" not in ids
    assert ids[:2] == ["summary", "table1"] and ids[-1] == "manifest"
    assert "No run record was given" in text


def test_a_run_with_no_finished_unit_has_no_script_at_all(tmp_path) -> None:
    from memprobe_core.snippets.split import Snippet
    from memprobe_core.store import Store, UnitKey

    store = Store(tmp_path / "r.sqlite")
    run_id = store.create_run(
        "audit", snippets=[Snippet("a", "x y z")], units=[UnitKey("a", "ps_inst", 10)]
    )
    text = html_report_for_run(store, run_id)
    assert "No finished unit yet." in text
    assert "<script" not in text and "script-src &#39;none&#39;" in text


def test_examples_are_capped(run) -> None:
    store, run_id = run
    text = render_html(report_for_run(store, run_id), store, run_id, max_examples=2)
    assert text.count("<details") == 2
    assert "The first 2 of 4 (snippet, length) pairs are shown" in text


def test_verbatim_columns_of_table1_are_shown_when_present(run) -> None:
    store, run_id = run
    report = report_for_run(store, run_id)
    report.table1 = report.table1.assign(
        extractable=0.25, extractable_lo=0.1, extractable_hi=0.4, span_tokens=7.0
    )
    report.meta["extract_k"] = 50
    text = render_html(report)
    assert "<th>Extractable (k=50)</th>" in text and "<th>Span (tokens)</th>" in text
    assert "0.250 [0.100, 0.400]" in text and "7.000" in text
    # A run that measured none (older versions): no empty columns.
    report.table1 = report.table1.assign(extractable=float("nan"), span_tokens=float("nan"))
    assert "Extractable" not in render_html(report)


def test_write_html_says_which_path_is_wrong(tmp_path) -> None:
    out = write_html("<p>x</p>", tmp_path / "r.html")
    assert out.read_text(encoding="utf-8") == "<p>x</p>"
    with pytest.raises(ExportError, match="folder .*missing does not exist"):
        write_html("x", tmp_path / "missing" / "r.html")
    with pytest.raises(ExportError, match="it is a folder"):
        write_html("x", tmp_path)


def test_a_labelled_run_without_a_table_says_why(run) -> None:
    store, run_id = run
    # Members only: build_report leaves the table empty and says why in a note.
    results = store.results_frame(run_id)
    report = build_report(results[results["label"] == "member"])
    assert report.membership.empty and report.meta["membership_note"]
    text = render_html(report)
    assert "membership" in Page(text).text_of("section")
    assert "needs at least one of each" in text and "AUROC [95 % CI]" not in text


def test_unreadable_scoring_options_fall_back_to_the_defaults(tmp_path) -> None:
    from memprobe_core.attacks.result import AttackResult
    from memprobe_core.snippets.split import Snippet
    from memprobe_core.store import Store, UnitKey

    store = Store(tmp_path / "r.sqlite")
    unit = UnitKey("a", "ps_inst", 10)
    run_id = store.create_run("probe", snippets=[Snippet("a", "x y")], units=[unit])
    manifest = {"scoring": {"from_a_later_version": 1}, "split": {"suffix": "alpha beta gamma"}}
    result = AttackResult("ps_inst", "a", "unknown", 10, "p", "beta gamma", 0.6, 0, 0.3, 0.5)
    result.manifest = manifest
    store.finish_unit(run_id, unit, result)
    text = html_report_for_run(store, run_id)
    assert re.search(r"<mark[^>]*>beta gamma</mark>", text)
    assert "2 of 3 suffix words" in text


def test_the_membership_build_report_computes_is_shown(run) -> None:
    store, run_id = run
    report = report_for_run(store, run_id)  # members score higher with every method here
    assert set(report.membership["score"]) == {"ps_base", "ps_inst", "interactive"}
    text = render_html(report, store, run_id)
    blocks = [json.loads(t) for a, t in Page(text).scripts if a.get("data-plot")]
    assert len(blocks) == 2  # Mem by domain, ROC at length 40
    assert {t["name"] for t in blocks[1]["data"]} >= {"Ours (interactive) (AUROC 1.000)", "chance"}
    assert "FPR: 1 non-members: the smallest non-zero FPR is 100 %" in text


def test_the_manifest_appendix_shows_only_the_options_of_methods_that_ran() -> None:
    from memprobe_core.report.html_sections import _manifest_rows

    run = {
        "id": 1,
        "kind": "audit",
        "config": {
            "methods": ["interactive", "ps_base"],
            "options": {
                "seed": 7,
                "interactive": {"rounds": 3, "n_candidates": 24},
                "gcg": {"steps": 30, "top_k": 256},
                "reverse": {"max_new_tokens": 64},
            },
        },
    }
    rows = dict(_manifest_rows(run, []))
    assert rows["config.options.interactive"] == "rounds = 3; n_candidates = 24"
    assert rows["config.options.seed"] == 7
    assert "config.options.gcg" not in rows and "config.options.reverse" not in rows
