"""The Document page's view (and the Runs page's, for document runs): pick a document, map it or
ask for a continuation as a live job, and read a stored run — the map as a grid of windows (click
one to see its true suffix beside greedy decoding's output), nv-recall's blocks, every turn.

Everything from the document or a model is shown escaped: plain-text widgets with control and
bidi characters shown as escapes (``show_controls``), ``md``, or HTML escaped by
:func:`memprobe_core.highlight.escape_html` (``overlap``'s segments too).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd
import streamlit as st

from memprobe_core.cli.common import command_hint
from memprobe_core.documents.builtin import BUILT_IN_DOCUMENTS, builtin_document
from memprobe_core.documents.continuation import ContinuationOptions
from memprobe_core.documents.continuation_report import (
    block_texts,
    continuation_html,
    describe_continuation,
    turns_frame,
)
from memprobe_core.documents.continuation_run import (
    StoredContinuation,
    read_continuation,
    run_continuation_stored,
)
from memprobe_core.documents.extraction_map import MapSummary
from memprobe_core.documents.map_report import (
    TextSpan,
    describe_map,
    log10_text,
    map_frame,
    map_html,
    text_spans,
    text_view_html,
    text_view_legend,
)
from memprobe_core.documents.map_run import (
    PzSetting,
    StoredMap,
    read_map,
    run_map,
    same_document_runs,
)
from memprobe_core.documents.reading import MAX_DOCUMENT_BYTES, document_from_bytes
from memprobe_core.documents.stored import MODES, DocumentRunError, run_mode
from memprobe_core.documents.windows import MapOptions
from memprobe_core.errors import MemprobeError
from memprobe_core.highlight import escape_html, overlap, segments_to_html, show_controls
from memprobe_core.membership.options import MeasureOptions
from memprobe_core.option_fields import options_of
from memprobe_core.runs.roles import ModelNames
from memprobe_core.store import RunRecord, Store
from ui_common import tables
from ui_common.charts import document_map_figure
from ui_common.job_runner import JobFunction, Progress, live_run_ids
from ui_common.option_widgets import option_widget, widget_key
from ui_common.page import keep, md
from ui_common.render import csv_download

_BOX = (
    "border:1px solid #ddd;border-radius:4px;padding:8px;white-space:pre-wrap;"
    "font-family:ui-monospace,monospace;font-size:0.85em"
)
_PZ_OPTIONS = ("pz_temperature", "pz_top_k", "pz_top_p", "discover_p")


# --- inputs -------------------------------------------------------------------------------------


def document_source() -> tuple[str, str] | None:
    """``(text, name)`` of the document picked (a built-in one or an upload), or ``None`` with
    what is missing or wrong shown."""
    kinds = ["builtin", "upload"]
    kind = st.radio(
        "Document",
        kinds,
        horizontal=True,
        key=keep("doc_source", "builtin", kinds),
        format_func={"builtin": "Built-in", "upload": "Upload a file"}.__getitem__,
    )
    if kind == "builtin":
        names = list(BUILT_IN_DOCUMENTS)
        name = st.selectbox(
            "Built-in document",
            names,
            key=keep("doc_builtin", names[0], names),
            format_func=lambda n: BUILT_IN_DOCUMENTS[n].title,
        )
        try:
            text, source = builtin_document(name)
        except MemprobeError as exc:
            st.error(md(str(exc)))
            return None
        st.caption(md(f"{len(text.split()):,} words · {source}"))
        return text, name
    upload = st.file_uploader(
        f"UTF-8 text (.txt, .md), at most {MAX_DOCUMENT_BYTES // 2**20} MiB",
        type=["txt", "md"],
        key="doc_upload",
    )
    if upload is None:
        st.info("Upload a document, or pick the built-in one.")
        return None
    try:
        text = document_from_bytes(upload.getvalue(), upload.name)
    except MemprobeError as exc:
        st.error(md(str(exc)))
        return None
    st.caption(md(f"{upload.name}: {len(text.split()):,} words"))
    return text, upload.name


def _widgets(cls: type, names: tuple[str, ...] | None, prefix: str) -> dict[str, Any]:
    chosen = [o for o in options_of(cls) if o.info.flag and (names is None or o.name in names)]
    columns = st.columns(min(4, max(1, len(chosen))))
    return {
        opt.name: option_widget(columns[i % len(columns)], opt, widget_key(prefix, opt))
        for i, opt in enumerate(chosen)
    }


def map_settings() -> tuple[MapOptions, PzSetting] | None:
    """The map's windows and p_z scheme from the widgets (``None``: a refusal is shown)."""
    values = _widgets(MapOptions, None, "doc")
    with st.expander("p_z sampling scheme"):
        pz_values = _widgets(MeasureOptions, _PZ_OPTIONS, "doc")
    try:
        options = MapOptions(**values)
        measure = MeasureOptions(**pz_values)
    except MemprobeError as exc:
        st.error(md(str(exc)))
        return None
    pz = PzSetting(measure.pz_temperature, measure.pz_top_k, measure.pz_top_p, measure.discover_p)
    return options, pz


def continuation_settings() -> ContinuationOptions | None:
    """The continuation's options from the widgets (``None``: a refusal is shown)."""
    basic = ("opening_words", "heldback_words", "best_of_n", "max_turns", "turn_tokens", "context")
    values = _widgets(ContinuationOptions, basic, "doc")
    with st.expander("More continuation options"):
        rest = tuple(o.name for o in options_of(ContinuationOptions) if o.name not in basic)
        values |= _widgets(ContinuationOptions, rest, "doc")
    try:
        return ContinuationOptions(**values)
    except MemprobeError as exc:
        st.error(md(str(exc)))
        return None


def load_record(choice: Any) -> dict[str, Any]:
    """How a document run started here loads its victim again (a ``ModelNames`` dict, kept in
    the run): its name, backend and endpoint, so `memprobe document --resume RUN` goes where
    the page sent it (never a key: the variable's name only)."""
    name, backend, options = choice.load_call("victim")
    dtype = options.pop("dtype", None)
    names = ModelNames(
        victim=name,
        backend=backend,
        load_options=options,
        dtypes={"victim": dtype} if dtype else {},
    )
    return names.resolved().to_dict()


# --- jobs ---------------------------------------------------------------------------------------


def job(store: Store, run_id: int, mode: str, victim: Any) -> JobFunction:
    """The worker: score the map's pending windows, or ask for the continuation's turns."""

    def map_job(progress: Progress, cancel: threading.Event) -> StoredMap:
        def on_progress(p: Any) -> None:
            progress.set(
                done=p.done,
                total=p.total,
                rate=p.rate or None,
                eta=p.eta_s,
                message=f"{p.done}/{p.total} windows",
            )

        return run_map(store, run_id, victim, on_progress=on_progress, cancel=cancel)

    def continue_job(progress: Progress, cancel: threading.Event) -> StoredContinuation:
        progress.show_eta = False  # turns stop on the victim's answers: no rate predicts it

        def on_progress(p: Any) -> None:
            state = "refused" if p.last.refused else "verbatim" if p.last.success else "no block"
            progress.set(
                done=p.turns,
                total=None,
                message=f"turn {p.turns} (phase {p.last.phase}): {state} · "
                f"{p.generated_tokens:,} of {p.max_tokens:,} tokens",
            )

        return run_continuation_stored(
            store, run_id, victim, on_progress=on_progress, cancel=cancel
        )

    return map_job if mode == "map" else continue_job


# --- a stored run -------------------------------------------------------------------------------


def elsewhere_note(runs: list[RunRecord]) -> None:
    """Say which document runs a job of another tab (or of this tab before a reload) works
    on: the job belongs to that tab, and this one follows it under "Open a document run"."""
    live = sorted(r["id"] for r in runs if r["id"] in live_run_ids())
    if live:
        listed = ", ".join(map(str, live))
        st.info(
            f"Document run {listed} is being worked on by a job started in another tab (or "
            'before this page was reloaded): open it under "Open a document run" to follow it.'
        )


def run_state_note(store: Store, run: RunRecord) -> None:
    """Below an opened run that is not finished: who works on it (a job of any tab), or how to
    go on with it."""
    if run["status"] == "finished":
        return
    if run["id"] in live_run_ids():
        st.caption("A job of this dashboard is working on this run; the figures above follow it.")
        return
    st.caption(
        f"This run is {run['status']}. This command goes on with it, with the victim it was "
        "started with:"
    )
    st.code(command_hint(store.path, "document", "--resume", str(run["id"])), language="bash")


def show_run(store: Store, run_id: int, *, key: str) -> None:
    """A stored document run: its figures, its map or turns, downloads."""
    try:
        mode = run_mode(store, run_id)
    except DocumentRunError as exc:
        st.error(md(f"Run {run_id}: {exc}"))
        return
    if mode == "map":
        stored = read_map(store, run_id)
        show_map(stored, key=key)
        _same_document(stored, _control_rows(store, run_id))
    else:
        show_continuation(read_continuation(store, run_id), key=key)


def show_map(stored: StoredMap, *, key: str) -> None:
    figures = _headline(stored)
    notes = {"Median log10 p_z": _median_over(stored.summary)}
    for column, (label, value) in zip(st.columns(len(figures)), figures.items(), strict=True):
        column.metric(
            label,
            value,
            delta=notes.get(label),
            delta_color="off",
            delta_arrow="off",
            help=_HEADLINE_HELP.get(label),
        )
    st.text(show_controls(describe_map(stored)))
    frame = map_frame(stored)
    if frame.empty:
        st.info("No window is scored yet.")
        return
    spans = text_spans(stored)  # once a rerun: the text tab and the report share them
    grid_tab, text_tab = st.tabs(["Windows", "Document text"])
    with grid_tab:
        _window_grid(stored, frame, key=key)
    with text_tab:
        _text_view(stored, spans)
    stem = f"memprobe-run{stored.run_id}"
    _downloads(
        "Windows CSV",
        frame,
        f"{stem}-map.csv",
        lambda: map_html(stored, frame=frame, spans=spans),
        f"{stem}-map.html",
        key,
    )


def _control_rows(store: Store, run_id: int) -> list[dict[str, Any]]:
    """The summary rows of the same document's maps on other victims, newest first."""
    return [
        _control_row(str(store.path), other["id"], other["updated"])
        for other in same_document_runs(store, run_id)
    ]


# Why cached: each row reads a whole map (0.35 s for 4,850 windows, measured) and the page
# reruns on every click; a row is kept while its run's ``updated`` time stays the same.
@st.cache_data(show_spinner=False, max_entries=256)
def _control_row(path: str, run_id: int, updated: float) -> dict[str, Any]:
    return _summary_row(read_map(Store(path), run_id), opened=False)


def _same_document(stored: StoredMap, others: list[dict[str, Any]]) -> None:
    """The opened map beside the store's maps of the same document on other victims."""
    st.subheader("The same document on other victims")
    if not others:
        st.caption(
            "No other victim in this store has mapped this document with these windows. Read "
            "the figures above against a control: map the same document on a model that cannot "
            "have seen it (for the document canary, the embedded base model); what that model "
            "writes back is merely predictable text."
        )
        return
    st.caption(
        "The same windows asked of other victims, newest first. A model that cannot have seen "
        "the document is the control: what it writes back is merely predictable text."
    )
    frame = pd.DataFrame([_summary_row(stored, opened=True), *others])
    tables.show(frame, labels={name: name for name in frame.columns})  # "p_z" kept as is


def _window_grid(stored: StoredMap, frame: pd.DataFrame, *, key: str) -> None:
    """The map as a grid of windows; a click (or the box) shows one window's texts."""
    event = st.plotly_chart(
        document_map_figure(frame, title=f"{stored.name} on {stored.victim}"),
        on_select="rerun",
        selection_mode="points",
        key=f"{key}_grid",
    )
    picked = _clicked_window(event)
    windows = frame["window"].tolist()
    choice_key = f"{key}_window"
    if picked is not None and picked in windows:
        st.session_state[choice_key] = picked
    default = int(frame.loc[frame["match_tokens"].idxmax(), "window"])
    window = st.selectbox(
        "Window (or click one on the map)",
        windows,
        key=keep(choice_key, default, windows),
        format_func=lambda w: f"window {w}",
    )
    _window_view(frame[frame["window"] == window].iloc[0])
    with st.expander("Every window"):
        tables.show(frame.drop(columns=["prefix", "true_suffix", "greedy_output"]))


# The page shows this many characters of the document coloured (the HTML report holds all):
# a browser keeps a few hundred thousand styled characters responsive, not a whole book.
TEXT_VIEW_CHARS = 200_000


def _headline(stored: StoredMap) -> dict[str, str]:
    """A map's four headline figures by label: the metrics above it and the control table's
    columns, so the two read alike."""
    s = stored.summary
    return {
        "Windows written back": f"{s.extractable:,} / {s.windows:,}",
        "Document written back": f"{s.extracted_share:.1%}",
        "Longest stretch": f"{s.longest_stretch:,} tokens",
        "Median log10 p_z": "–" if s.median_log10_p_z is None else log10_text(s.median_log10_p_z),
    }


def _median_over(s: MapSummary) -> str:
    """The windows the median p_z is over: "-8.36" over 1 of 45 windows is one window's figure,
    and read alone it looked like the whole map's."""
    over = round((1 - s.pz_zero_share) * s.windows)
    return f"over {over:,} of {s.windows:,} windows (p_z > 0)"


_HEADLINE_HELP = {
    "Median log10 p_z": "over windows with p_z > 0, under the run's sampling scheme; the text "
    "below says how many windows have p_z = 0"
}


def _summary_row(stored: StoredMap, *, opened: bool) -> dict[str, Any]:
    return {
        "run": stored.run_id,
        "victim": stored.victim + (" (opened)" if opened else ""),
        "status": stored.status,
        **_headline(stored),
        "Median over": _median_over(stored.summary).removeprefix("over "),
    }


def _text_view(stored: StoredMap, spans: list[TextSpan] | None) -> None:
    if spans is None:
        st.info(
            "This run has no token offsets (its tokenizer gives none, or the run is older than "
            "the text view), so the document cannot be coloured here; the Windows tab holds "
            "every window."
        )
        return
    shown: list[TextSpan] = []
    chars = 0
    for span in spans:
        if chars >= TEXT_VIEW_CHARS:
            break
        shown.append(span)
        chars += len(span.text)
    st.html(f"<p>{text_view_legend()}</p>")
    if chars < len(stored.text):
        st.caption(
            f"The first {chars:,} of {len(stored.text):,} characters; the HTML report below "
            "colours the whole document."
        )
    st.html(f'<div style="{_BOX};max-height:36em;overflow:auto">{text_view_html(shown)}</div>')


def _clicked_window(event: Any) -> int | None:
    try:
        points = event.selection.points
    except AttributeError:
        return None
    if not points:
        return None
    data = points[0].get("customdata")
    if isinstance(data, list):
        data = data[0] if data else None
    return int(data) if data is not None else None


def _window_view(row: pd.Series) -> None:
    matched, total = int(row["match_tokens"]), int(row["suffix_tokens"])
    st.caption(
        md(
            f"Window {row['window']}: tokens {row['suffix_start_token']}–"
            f"{row['suffix_start_token'] + total}; greedy decoding writes {matched} of {total} "
            "suffix tokens back from the start"
            + (" (the whole suffix)." if matched == total else ", then leaves the text.")
        )
    )
    with st.expander("Prefix (the prompt)"):
        st.text(show_controls(str(row["prefix"])))
    ov = overlap(str(row["greedy_output"]), str(row["true_suffix"]), None)
    left, right = st.columns(2)
    with left:
        st.html(
            "<div><b>greedy output (to its first wrong token)</b></div>"
            f'<div style="{_BOX}">{segments_to_html(ov.output_segments)}</div>'
        )
    with right:
        st.html(
            "<div><b>true suffix</b></div>"
            f'<div style="{_BOX}">{segments_to_html(ov.suffix_segments)}</div>'
        )


def show_continuation(stored: StoredContinuation, *, key: str) -> None:
    s = stored.score
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("nv-recall", f"{s.nv_recall:.1%}")
    c2.metric("Blocks", f"{len(s.blocks):,}", help=f"longest {s.longest_block:,} words")
    c3.metric(
        "Answers",
        f"{len(stored.turns):,}",
        help="phase-1 attempts and phase-2 turns (the text below splits them)",
    )
    c4.metric("Queries · tokens", f"{stored.queries} · {stored.generated_tokens:,}")
    st.text(show_controls(describe_continuation(stored)))
    frame = turns_frame(stored)
    if frame.empty:
        st.info("No turn is stored yet.")
        return
    st.subheader("Turns")
    st.caption(
        "Refused: a refusal pattern and nothing reproduced. Success: phase 1 passed, or "
        "the turn added a verbatim block."
    )
    tables.show(frame.drop(columns=["request", "output"]))
    turn_ids = frame["turn"].tolist()
    picked = st.selectbox("Turn", turn_ids, key=keep(f"{key}_turn", turn_ids[0], turn_ids))
    row = frame[frame["turn"] == picked].iloc[0]
    if row["request"]:
        st.caption("Request")
        st.text(show_controls(str(row["request"])))
    st.caption("Answer" + (" (refused)" if row["refused"] else ""))
    st.text(show_controls(str(row["output"])))
    blocks = block_texts(stored)
    st.subheader("nv-recall blocks (longest first)")
    if not blocks:
        st.info("No block of 100 matched words or more: nv-recall counts none.")
    for block in blocks[:10]:
        left, right = st.columns(2)
        left.html(
            f"<div><b>document words {escape_html(block['ref_range'])}</b></div>"
            f'<div style="{_BOX}">{escape_html(block["reference"])}</div>'
        )
        right.html(
            f"<div><b>output words {escape_html(block['gen_range'])} · {block['matched']} "
            f'matched</b></div><div style="{_BOX}">{escape_html(block["generated"])}</div>'
        )
    stem = f"memprobe-run{stored.run_id}"
    _downloads(
        "Turns CSV",
        frame,
        f"{stem}-turns.csv",
        lambda: continuation_html(stored),
        f"{stem}-continuation.html",
        key,
    )


def _downloads(
    csv_label: str,
    frame: pd.DataFrame,
    csv_name: str,
    report: Callable[[], str],
    html_name: str,
    key: str,
) -> None:
    """A run's table as safe CSV and its HTML report, side by side; the report is built when
    its button is pressed (it colours the whole document: seconds for a book), not each rerun."""
    d1, d2 = st.columns(2)
    with d1:
        csv_download(csv_label, frame, csv_name, key=f"{key}_csv")
    with d2:
        st.download_button(
            "HTML report",
            data=lambda: report().encode("utf-8"),
            file_name=html_name,
            mime="text/html",
            key=f"{key}_html",
        )


def run_label(run: Mapping[str, Any]) -> str:
    mode = MODES.get(str(run["config"].get("mode")), "document")
    return f"#{run['id']} · {mode} · {run.get('title') or 'untitled'} · {run['status']}"
