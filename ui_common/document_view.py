"""The Document page's view (and the Runs page's, for document runs): pick a document, map it or
ask for a continuation as a live job, and read a stored run — the map as a grid of windows (click
one to see its true suffix beside greedy decoding's output), nv-recall's blocks, every turn.

Everything from the document or a model is shown escaped: plain-text widgets with control and
bidi characters shown as escapes (``show_controls``), ``md``, or HTML escaped by
:func:`memprobe_core.highlight.escape_html` (``overlap``'s segments too).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import pandas as pd
import streamlit as st

from memprobe_core.cli.common import command_hint
from memprobe_core.documents.builtin import BUILT_IN_DOCUMENTS, builtin_document
from memprobe_core.documents.continuation import ContinuationOptions, Turn
from memprobe_core.documents.continuation_report import (
    PASSAGE_MIN_WORDS,
    block_texts,
    continuation_html,
    describe_continuation,
    expected_text,
    turns_frame,
)
from memprobe_core.documents.continuation_run import (
    StoredContinuation,
    read_continuation,
    run_continuation_stored,
)
from memprobe_core.documents.estimate import (
    continuation_token_seconds,
    describe_estimate,
    document_tokens,
    earlier_runs,
    estimate_continuation,
    estimate_map,
    map_window_seconds,
    most_tokens,
    window_count,
)
from memprobe_core.documents.extraction_map import WindowScore
from memprobe_core.documents.map_near_verbatim import AFTER_WINDOWS
from memprobe_core.documents.map_report import (
    PART_WORDS,
    WHOLE_WORDS,
    CostSpan,
    TextSpan,
    bracket_line,
    cost_headline,
    cost_spans,
    cost_view_html,
    cost_view_legend,
    cost_window_tokens,
    describe_map,
    log10_text,
    map_frame,
    map_html,
    text_spans,
    text_view_html,
    text_view_legend,
    written_back,
    written_back_legend,
)
from memprobe_core.documents.map_run import (
    BatchScorer,
    PzSetting,
    StoredMap,
    local_scorer,
    map_config,
    read_map,
    run_map,
    same_document_runs,
)
from memprobe_core.documents.reading import MAX_DOCUMENT_BYTES, document_from_bytes
from memprobe_core.documents.stored import MODES, DocumentRunError, run_mode
from memprobe_core.documents.windows import MapOptions, Window
from memprobe_core.errors import MemprobeError
from memprobe_core.highlight import escape_html, overlap, segments_to_html, show_controls
from memprobe_core.machine_load import cpu_cores, free_cores
from memprobe_core.membership.options import MeasureOptions
from memprobe_core.option_fields import options_of
from memprobe_core.runs.roles import ModelNames
from memprobe_core.store import RunRecord, Store
from ui_common import tables
from ui_common.charts import document_map_figure
from ui_common.job_runner import JobFunction, Progress, live_run_ids
from ui_common.models import has_gpu, is_loaded
from ui_common.option_widgets import option_widget, widget_key
from ui_common.page import keep, md
from ui_common.presets import run_size_radio
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


# The continuation's run sizes: budgets a CPU gets through in minutes, and the paper's (the
# CLI's defaults: 50 turns, 200,000 tokens, hours on a CPU). Quick is the page's first size
# where torch finds no GPU (docs/options.md, "Dashboard run sizes").
CONTINUATION_SIZES: dict[str, dict[str, int]] = {
    "quick": {"max_turns": 3, "turn_tokens": 256, "max_tokens": 2_000},
    "paper": {
        name: options_field.default
        for options_field in options_of(ContinuationOptions)
        if (name := options_field.name) in ("max_turns", "turn_tokens", "max_tokens")
    },
}
SIZE_LABELS = {
    "quick": "Quick (CPU): 3 turns × 256 tokens, 2,000 tokens in all",
    "paper": "Paper's budgets: 50 turns × 512 tokens, 200,000 tokens in all",
}
_SIZE_KEY = "doc_cont_size"


def _size_keys() -> dict[str, str]:
    return {
        o.name: widget_key("doc", o)
        for o in options_of(ContinuationOptions)
        if o.name in CONTINUATION_SIZES["quick"]
    }


def _apply_size() -> None:
    """The size radio's callback: its budgets into the option boxes (changeable after)."""
    size = st.session_state.get(_SIZE_KEY, "quick")
    for name, key in _size_keys().items():
        st.session_state[key] = CONTINUATION_SIZES[size][name]


def continuation_size(*, gpu: bool) -> str:
    """The run-size radio; its first value is Quick without a GPU, and on the first draw its
    budgets fill the option boxes. Returns the size chosen."""
    sizes = list(CONTINUATION_SIZES)
    first = _SIZE_KEY not in st.session_state
    size = run_size_radio(
        keep(_SIZE_KEY, "paper" if gpu else "quick", sizes),
        SIZE_LABELS,
        lambda _chosen: _apply_size(),
        help_text="Fills in the budgets below (each can still be changed). A continuation "
        "stops earlier when the victim refuses, drifts away from the document or writes THE END.",
    )
    if first:
        _apply_size()
    return str(size)


def continuation_settings() -> ContinuationOptions | None:
    """The continuation's options from the widgets (``None``: a refusal is shown)."""
    continuation_size(gpu=has_gpu())
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


@st.cache_data(ttl=15, show_spinner=False)
def _free_cores() -> float:
    """Cores free of other work now (a 0.2 s measurement, kept 15 s: the page reruns often)."""
    return free_cores()


@st.cache_data(show_spinner=False, max_entries=64)
def _earlier(path: str, victim: str, mode: str, stamp: tuple[Any, ...]) -> list[dict[str, Any]]:
    """:func:`earlier_runs`, read again only when the store's document runs change (``stamp``:
    their ids and ``updated`` times)."""
    return earlier_runs(Store(path), victim=victim, mode=mode)


def estimate_caption(
    store: Store,
    source: tuple[str, str] | None,
    mode: str,
    settings: Any,
    choice: Any,
) -> None:
    """Before Run: how long the run should take on this machine, from this victim's earlier
    runs in the store (else a rough figure), model loading and the current load included."""
    if source is None or settings is None or not choice.name:
        return
    text = source[0]
    victim = choice.label
    stamp = tuple((r["id"], r["updated"]) for r in store.list_runs(kind="document"))
    runs = _earlier(str(store.path), victim, mode, stamp)
    cores, free = cpu_cores(), _free_cores()
    loaded = is_loaded(choice, "victim")
    if mode == "map":
        options = settings[0]
        tokens, exact = document_tokens(runs, text)
        windows = window_count(tokens, options)
        if not windows:
            return
        e = estimate_map(
            map_window_seconds(runs),
            windows=windows,
            options=options,
            model_loaded=loaded,
            cores=cores,
            free=free,
        )
        what = f"{'' if exact else 'about '}{windows:,} windows"
        first = f"the first {min(windows, options.batch_windows)} windows (one batch) show"
        source_text = f"{victim}'s {_count(e.measured_from, 'earlier window')} in this store"
    else:
        e = estimate_continuation(
            continuation_token_seconds(runs),
            options=settings,
            model_loaded=loaded,
            cores=cores,
            free=free,
        )
        what = f"at most {most_tokens(settings):,} tokens"
        first = "the opening answer shows"
        source_text = f"{victim}'s {_count(e.measured_from, 'earlier turn')} in this store"
    st.caption(
        md(describe_estimate(e, what=what, first=first, source=source_text, cores=cores, free=free))
    )


def _count(n: int, thing: str) -> str:
    """``"1 earlier turn"``, ``"3 earlier turns"``."""
    return f"{n:,} {thing}" + ("" if n == 1 else "s")


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
        config = map_config(store, run_id)
        total = len(store.units(run_id))
        progress.set(
            total=total,
            message=f"tokenizing the document ({config['document']['tokens']:,} tokens) and "
            "reading the run",
        )
        scorer = _announcing_scorer(
            local_scorer(victim, config["document"]["text"], PzSetting(**config["pz"])),
            progress,
            done=total - len(store.units(run_id, status="pending")),
            total=total,
        )

        def on_progress(p: Any) -> None:
            progress.set(
                done=p.done,
                total=p.total,
                rate=p.rate or None,
                eta=p.eta_s,
                message=f"{p.done}/{p.total} windows"
                + (f" · {AFTER_WINDOWS}" if p.done == p.total else ""),
            )

        return run_map(store, run_id, victim, on_progress=on_progress, cancel=cancel, scorer=scorer)

    def continue_job(progress: Progress, cancel: threading.Event) -> StoredContinuation:
        progress.show_eta = False  # turns stop on the victim's answers: no rate predicts it
        done = len(store.units(run_id, status="done"))
        progress.set(
            message="asking for the opening (phase 1): the answer shows when the victim has "
            "written it"
            if not done
            else f"replaying the {done} stored turn(s), then asking for the next"
        )

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


def _announcing_scorer(
    inner: BatchScorer, progress: Progress, *, done: int, total: int
) -> BatchScorer:
    """``inner``, saying before each batch which windows it scores: a batch's windows land
    together when it ends (16 by default), so the page said only "running" for the whole
    first batch (140 s of a 185 s map on a busy CPU)."""

    def score(
        batches: list[list[Window]],
    ) -> Iterator[tuple[list[Window], list[WindowScore], float]]:
        scored = inner(batches)
        finished = done
        for number, batch in enumerate(batches, 1):
            began = time.strftime("%H:%M:%S")
            progress.set(
                message=f"scoring windows {finished + 1:,}–{finished + len(batch):,} of "
                f"{total:,} (batch {number} of {len(batches)}, begun {began}; its windows "
                "show together when it ends)"
                + (" · the first batch also warms the model up" if number == 1 else "")
            )
            found = next(scored)
            finished += len(found[0])
            yield found

    return score


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
    notes = _headline_notes(stored)
    helps = _headline_help(stored)
    for column, (label, value) in zip(st.columns(len(figures)), figures.items(), strict=True):
        column.metric(
            label,
            value,
            delta=notes.get(label),
            delta_color="off",
            delta_arrow="off",
            help=helps.get(label),
        )
    bracket = bracket_line(stored)
    if bracket:
        # The bracket around the least protected window's p_z (docs/method.md §22), in the
        # probe's words; plain text with controls shown, like the summary below.
        st.text(show_controls(bracket))
    st.html(f"<p>{written_back_legend(written_back(stored))}</p>")
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
        _text_view(stored, spans, key=key)
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
    """A map's headline figures by label: the metrics above it and the control table's
    columns, so the two read alike. Windows written back whole and in part are counted apart,
    in the grid's and the text view's words (:func:`written_back`): "0 / 45 written back" beside
    25 coloured cells read as a map where nothing came back."""
    s = stored.summary
    w = written_back(stored)
    return {
        "Written back whole": f"{w.whole:,} / {w.windows:,}",
        "Written back in part": f"{w.part:,} / {w.windows:,}",
        "Document written back": f"{w.share(w.whole_tokens):.1%}",
        "Longest stretch": f"{s.longest_stretch:,} tokens",
        "Median log10 p_z": "–" if s.median_log10_p_z is None else log10_text(s.median_log10_p_z),
        "Extraction cost b": cost_headline(stored.rank_cost)[0],
    }


def _headline_notes(stored: StoredMap) -> dict[str, str]:
    """The short lines under the headline's figures: what "whole" and "in part" mean in
    tokens, the document's share written back in part, the windows the median is over."""
    w = written_back(stored)
    n = w.suffix_tokens
    return {
        "Written back whole": f"all {n} suffix tokens",
        "Written back in part": f"1 to {n - 1} of {n} tokens" if n > 1 else "–",
        "Document written back": f"+ {w.share(w.part_tokens):.1%} in part",
        "Median log10 p_z": _median_over(stored),
        "Extraction cost b": cost_headline(stored.rank_cost)[1],
    }


def _median_over(stored: StoredMap) -> str:
    """The windows the median p_z is over: "-8.36" over 1 of 45 windows is one window's figure,
    and read alone it looked like the whole map's."""
    s = stored.summary
    over = sum(1 for score in stored.scores if score.pz.get("log10_p_z") is not None)
    if over == 1:
        return "1 window's (p_z > 0)"
    return f"over {over:,} of {s.windows:,} (p_z > 0)"


def _headline_help(stored: StoredMap) -> dict[str, str]:
    n = stored.options.suffix_tokens
    return {
        "Median log10 p_z": "over windows with p_z > 0, under the run's sampling scheme (with "
        "one such window, that window's value); the text below says how many windows have "
        "p_z = 0",
        "Written back whole": f"windows {WHOLE_WORDS}: greedy decoding writes all {n} tokens "
        "of the window's suffix back",
        "Written back in part": f"windows {PART_WORDS}: greedy decoding writes the suffix's "
        f"first tokens back (at least one, fewer than {n}), then leaves the text",
        "Document written back": "the document's tokens inside a whole window's suffix; below, "
        "those greedy decoding writes back only in part (in no whole window)",
        "Extraction cost b": "the rank-based bound of Liu, Evans & Xiong 2026 (docs/method.md "
        "§21), from one teacher-forced pass over the whole document: its cheapest window of l "
        "tokens needs at least 2^b expected tries of any decoding (sampling, beam, any "
        "temperature); the Document text tab colours each token by it",
    }


def _summary_row(stored: StoredMap, *, opened: bool) -> dict[str, Any]:
    return {
        "run": stored.run_id,
        "victim": stored.victim + (" (opened)" if opened else ""),
        "status": stored.status,
        **_headline(stored),
        "Document in part": _headline_notes(stored)["Document written back"].removeprefix("+ "),
        "Median over": _median_over(stored).removeprefix("over "),
    }


# The text tab's two colourings: the map's (what greedy decoding writes back, window by window)
# and the paper's own view (each token's cheapest window by the rank-based bound, §21).
COLOUR_BY_MAP = "What greedy decoding writes back (the map)"
COLOUR_BY_COST = "Extraction cost b (the cheapest window holding each token)"


def _text_view(stored: StoredMap, spans: list[TextSpan] | None, *, key: str) -> None:
    if spans is None:
        st.info(
            "This run has no token offsets (its tokenizer gives none, or the run is older than "
            "the text view), so the document cannot be coloured here; the Windows tab holds "
            "every window."
        )
        return
    colour_by = st.radio(
        "Colour the text by",
        [COLOUR_BY_MAP, COLOUR_BY_COST],
        horizontal=True,
        key=f"{key}_colour_by",
        help="b (Liu, Evans & Xiong 2026; docs/method.md §21): from the one teacher-forced "
        "pass over the whole document made when the map finished, each token's smallest b over "
        "the windows of l tokens that hold it; no decoding extracts that window in fewer than "
        "2^b expected tries",
    )
    if colour_by == COLOUR_BY_COST:
        _cost_view(stored)
        return
    shown = _first_chars(spans)
    st.html(f"<p>{text_view_legend()}</p>")
    _shown_caption(stored, shown)
    st.html(f'<div style="{_BOX};max-height:36em;overflow:auto">{text_view_html(shown)}</div>')


def _cost_view(stored: StoredMap) -> None:
    """The text coloured by each token's minimum b, or why it cannot be."""
    costs = cost_spans(stored)
    if costs is None:
        st.info(
            "No per-token extraction cost is stored for this run: it is made once every window "
            "is scored, and runs recorded before memprobe kept it have none (map the document "
            "again to get it)."
        )
        return
    shown = _first_chars(costs)
    st.html(f"<p>{cost_view_legend(cost_window_tokens(stored))}</p>")
    _shown_caption(stored, shown)
    st.html(f'<div style="{_BOX};max-height:36em;overflow:auto">{cost_view_html(shown)}</div>')


_Span = TypeVar("_Span", TextSpan, CostSpan)


def _first_chars(spans: Sequence[_Span]) -> list[_Span]:
    """The spans up to :data:`TEXT_VIEW_CHARS` characters (the page's limit)."""
    shown: list[_Span] = []
    chars = 0
    for span in spans:
        if chars >= TEXT_VIEW_CHARS:
            break
        shown.append(span)
        chars += len(span.text)
    return shown


def _shown_caption(stored: StoredMap, shown: Sequence[TextSpan | CostSpan]) -> None:
    chars = sum(len(span.text) for span in shown)
    if chars < len(stored.text):
        st.caption(
            f"The first {chars:,} of {len(stored.text):,} characters; the HTML report below "
            "colours the whole document."
        )


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
    _answer_view(stored, stored.turns[turn_ids.index(picked)], refused=bool(row["refused"]))
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


def _answer_view(stored: StoredContinuation, turn: Turn, *, refused: bool) -> None:
    """A turn's answer beside the document's words it should reproduce (phase 1: the held-back
    words; phase 2: the passage of its longest verbatim run), the words the two share marked
    as the probe's overlap view marks them; every character escaped."""
    answer = "Answer" + (" (refused)" if refused else "")
    expected = expected_text(stored, turn)
    if expected is None:
        st.caption(
            f"{answer}. No run of {PASSAGE_MIN_WORDS} or more of its words is in the document: "
            "no passage of it to set beside the answer."
        )
        st.html(f'<div style="{_BOX}">{escape_html(turn.output)}</div>')
        return
    ov = overlap(turn.output, expected.text, None)
    st.caption(
        f"{answer} beside the {expected.label}; the words they share in order "
        f"(their longest common subsequence) are marked: {ov.lcs_tokens:,} of "
        f"{ov.suffix_tokens:,} words."
    )
    left, right = st.columns(2)
    with left:
        st.html(
            f"<div><b>{escape_html(answer.lower())}</b></div>"
            f'<div style="{_BOX}">{segments_to_html(ov.output_segments)}</div>'
        )
    with right:
        st.html(
            f"<div><b>{escape_html(expected.label)}</b></div>"
            f'<div style="{_BOX}">{segments_to_html(ov.suffix_segments)}</div>'
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
