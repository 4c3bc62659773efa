"""The audit report as ONE self-contained HTML file an auditor can hand over and open offline.

:func:`render_html` draws a :class:`~memprobe_core.report.build.Report` (and, given the store,
the run's manifest and per-unit prompts and outputs) as a page with: the manifest (models,
options, seed, versions, status), Table 1 with intervals, per-domain charts, paired gains with
their tests, the membership AUROC / TPR table and ROC curves (labelled runs), PII, costs, failed
units and, per (snippet, length), each method's chosen prompt and output with the common
subsequence behind Mem highlighted.

Safety, because snippets, outputs, ids and model names are anyone's text:

- Every text goes through Jinja2 with autoescaping; the only markup passed through is built by
  :func:`memprobe_core.highlight.segments_to_html` (which escapes every piece of text) or is
  plotly's own JavaScript.
- Figure labels go through :func:`~memprobe_core.report.figures.escape_label`; each figure's JSON
  sits in a ``<script type="application/json">`` data block, and plotly's encoder writes ``<``,
  ``>`` and ``/`` as ``\\u`` escapes, so a snippet holding ``</script>`` cannot close the block.
- A Content-Security-Policy ``<meta>`` lets only the two scripts of the report run (by their
  SHA-256) and forbids every network load (``default-src 'none'``): no CDN, font or image fetch.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import logging
from pathlib import Path
from typing import Any

import pandas as pd
from jinja2 import Environment
from markupsafe import Markup

from memprobe_core.attacks.registry import extracts, method_tables
from memprobe_core.highlight import jinja_finalize
from memprobe_core.report import html_sections as parts
from memprobe_core.report.build import Report, report_for_run
from memprobe_core.report.export import write_output
from memprobe_core.report.html_sections import Section
from memprobe_core.report.html_template import LOADER_JS, STYLE, TEMPLATE
from memprobe_core.report.summary import summary_lines

__all__ = ["DEFAULT_MAX_EXAMPLES", "html_report_for_run", "render_html", "write_html"]

log = logging.getLogger(__name__)

# (snippet, length) groups shown with their prompts and outputs; a large audit's file stays
# a few MB (the results CSV has every unit).
DEFAULT_MAX_EXAMPLES = 200


# --- the page -------------------------------------------------------------------------------


def _sha256(script: str) -> str:
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode()}'"


def _csp(scripts: list[str]) -> str:
    """No network, no plugin, no form; only the given inline scripts run (by their hash)."""
    allowed = " ".join(_sha256(s) for s in scripts) or "'none'"
    return (
        f"default-src 'none'; script-src {allowed}; style-src 'unsafe-inline'; "
        "img-src data:; font-src data:; connect-src 'none'; base-uri 'none'; form-action 'none'"
    )


def _rows(frame: pd.DataFrame | None) -> bool:
    return isinstance(frame, pd.DataFrame) and not frame.empty


def _sections(
    report: Report,
    run: dict[str, Any] | None,
    units: list[dict[str, Any]],
    labels: dict[str, str | None],
    max_examples: int,
) -> list[Section]:
    # The answer first (results, then their controls); the run's settings close the report.
    sections: list[Section] = []
    summary = summary_lines(report)
    if summary:
        sections.append(Section("summary", "Summary", notes=summary))
    if report.dataset_inference:
        sections.append(parts.inference_section(report))
    if report.table1.empty:
        empty = (
            "No finished unit yet."
            if report.costs.empty
            else "Signals only: no extraction method ran, so there is no Table 1."
        )
        sections.append(Section("table1", "Table 1", notes=[empty]))
    else:
        sections.append(parts.table1_section(report, first_figure=1))
    n_figures = len(sections[-1].figures)
    # A labelled run whose table is empty (no non-member, no score) still gets its section:
    # the note saying why is what the reader needs.
    labelled = not report.membership.empty or bool(report.meta.get("membership_note"))
    optional = (
        (_rows(report.paired), parts.paired_section),
        (labelled, lambda r: parts.membership_section(r, n_figures + 1)),
        (report.blind_baseline is not None, parts.validity_section),
        *(
            (
                _rows(report.method_tables.get(name)),
                lambda r, n=name, t=table: parts.method_table_section(n, t, r.method_tables[n]),
            )
            for name, table in method_tables()
        ),
        (_rows(report.pii), parts.pii_section),
        (_rows(report.costs), parts.cost_section),
        (_rows(report.errors), parts.errors_section),
    )
    sections += [build(report) for shown, build in optional if shown]
    # A signals-only unit has no prompt or output to show.
    answered = [u for u in units if extracts(u["method"])]
    if answered:
        sections.append(parts.examples_section(answered, labels, max_examples))
    sections.append(parts.manifest_section(report, run, units))
    return sections


def render_html(
    report: Report,
    store: Any = None,
    run_id: int | None = None,
    *,
    max_examples: int = DEFAULT_MAX_EXAMPLES,
) -> str:
    """The report as one self-contained HTML page (plotly's JS embedded once; no network).

    Args:
        report: from :func:`~memprobe_core.report.build.report_for_run` (or ``build_report``).
        store: a ``memprobe_core.store.Store``; with it the page also shows the run's manifest
            and each method's prompt and output per (snippet, length). ``None``: tables and
            charts only.
        run_id: the run in ``store`` (default: ``report.meta["run_id"]``).
        max_examples: at most this many (snippet, length) pairs of prompts and outputs.

    Returns:
        The HTML text (UTF-8 when written; a few MB, most of it plotly.js).
    """
    from plotly.offline import get_plotlyjs

    from memprobe_core import __version__

    run, units, labels = None, [], {}
    run_id = run_id if run_id is not None else report.meta.get("run_id")
    if store is not None and run_id is not None:
        run = store.get_run(run_id)
        units = store.units(run_id, status="done")
        labels = {s.id: s.label for s in store.samples(run_id)}
    sections = _sections(report, run, units, labels, max_examples)
    has_figures = any(s.figures for s in sections)
    plotly_js = get_plotlyjs() if has_figures else ""
    meta = report.meta
    title = f"memprobe audit report — run {meta.get('run_id', '?')}"
    if meta.get("title"):
        title += f": {meta['title']}"
    # Every plain text shown (ids, titles, file names, notes) has its control and bidi
    # characters made visible before autoescaping: a NUL or a right-to-left override from a
    # dataset would otherwise reach the page (markup we built, Markup, passes as it is).
    env = Environment(autoescape=True, keep_trailing_newline=True, finalize=jinja_finalize)
    page = env.from_string(TEMPLATE).render(
        title=title,
        version=__version__,
        generated=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        csp=_csp([plotly_js, LOADER_JS] if has_figures else []),
        style=Markup(STYLE),
        plotly_js=Markup(plotly_js),
        loader_js=Markup(LOADER_JS),
        sections=sections,
    )
    log.info("HTML report of run %s: %d sections, %d bytes", run_id, len(sections), len(page))
    return page


def html_report_for_run(store: Any, run_id: int, **report_kwargs: Any) -> str:
    """:func:`render_html` of ``report_for_run(store, run_id, **report_kwargs)``."""
    return render_html(report_for_run(store, run_id, **report_kwargs), store, run_id)


def write_html(text: str, path: str | Path) -> Path:
    """Write the HTML report to ``path`` (replacing an existing file) and return the path.

    Raises:
        ExportError: the folder does not exist or cannot be written, or ``path`` is a folder
            (the message names the path and what to do; ``memprobe`` exits with 2).
    """
    return write_output(text.encode("utf-8"), path, "the HTML report")
