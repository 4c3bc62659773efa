"""Whole documents: how much of a book, a report or a licence the victim writes back.

Two modes (docs/method.md §19, §20): the **extraction map** (every window's greedy match and p_z
by teacher forcing, white-box victims) and **continuation** (an opening probe, Best-of-N where a
chat model refuses, then "Continue" turn after turn, scored with nv-recall; any victim). Both are
stored window by window or turn by turn, resumable, and listed on the Runs page.
"""

from __future__ import annotations

import streamlit as st

import ui_common as ui
from memprobe_core.documents.continuation_run import start_continuation
from memprobe_core.documents.map_run import start_map
from memprobe_core.documents.stored import MODES
from memprobe_core.errors import MemprobeError
from ui_common import document_view

JOB = "document_job"

ui.page_setup("Document")
st.title("Whole documents")
st.caption(
    "How much of a long text does the victim write back, and where? The map asks every window "
    "of the document (50 tokens of prompt, 50 to write back) by teacher forcing; a continuation "
    "asks the model to go on writing the document and scores what it wrote with nv-recall."
)
found = ui.get_store()
if found is None:
    st.stop()
store = found
models = ui.model_sidebar(("victim",))

tab_new, tab_open = st.tabs(["Audit a document", "Open a document run"])
with tab_new:
    source = document_view.document_source()
    modes = list(MODES)
    mode = st.radio(
        "Mode",
        modes,
        horizontal=True,
        key=ui.keep("doc_mode", "map", modes),
        format_func=lambda m: {
            "map": "Extraction map (white-box)",
            "continue": "Continuation (any model)",
        }[m],
    )
    settings = (
        document_view.map_settings() if mode == "map" else document_view.continuation_settings()
    )
    document_view.estimate_caption(store, source, mode, settings, models["victim"])
    busy = ui.job_running(JOB)
    start = st.button(
        "Map the document" if mode == "map" else "Ask for the document",
        type="primary",
        disabled=busy or source is None or settings is None,
        key="doc_run",
    )
    if start and source is not None and settings is not None:
        victim = ui.load_model(models["victim"], "victim")
        if victim is not None:
            text, name = source
            label = models["victim"].label
            try:
                if mode == "map":
                    options, pz = settings  # type: ignore[misc]
                    run_id = start_map(
                        store,
                        text,
                        victim,
                        name=name,
                        victim_name=label,
                        options=options,
                        pz=pz,
                        models=document_view.load_record(models["victim"]),
                    )
                else:
                    run_id = start_continuation(
                        store,
                        text,
                        victim,
                        name=name,
                        victim_name=label,
                        options=settings,  # type: ignore[arg-type]
                        models=document_view.load_record(models["victim"]),
                    )
            except MemprobeError as exc:
                st.error(ui.md(str(exc)))
            else:
                st.session_state["doc_run_id"] = run_id
                ui.start_job(
                    JOB,
                    document_view.job(store, run_id, mode, victim),
                    f"Document run {run_id}",
                    run_id=run_id,
                )
    seen = ui.job_snapshot(JOB)
    shown = ui.show_job(
        JOB,
        lambda snap: (
            document_view.show_run(store, st.session_state["doc_run_id"], key="doc_new")
            if snap.is_final and "doc_run_id" in st.session_state
            else None
        ),
        seen=seen,
    )
    runs = store.list_runs(kind="document")
    if shown is None:
        document_view.elsewhere_note(runs)
        st.info(
            "Pick a document, a victim (sidebar) and a mode, then start; the estimate above "
            "the button is of this machine, from this victim's earlier runs in the store."
        )

with tab_open:
    if not runs:
        st.info("No document run in the store yet.")
    else:
        by_id = {r["id"]: r for r in runs}
        opened = st.selectbox(
            "Document run",
            list(by_id),
            format_func=lambda i: document_view.run_label(by_id[i]),
            key="doc_open",
        )
        ui.watch_run(opened)  # a job of another tab (or of this one before a reload) on it
        document_view.show_run(store, opened, key="doc_open")
        document_view.run_state_note(store, by_id[opened])
