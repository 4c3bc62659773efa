"""Runs: every run in the store; replay one round by round; compare two runs or two models
(paired, ``memprobe diff``); export safe CSV."""

from __future__ import annotations

import streamlit as st

import ui_common as ui
from ui_common import diff_view, runs_view, tables

ui.page_setup("Runs")
st.title("Runs")

store = ui.get_store()
if store is None:
    st.stop()
runs = store.list_runs()
if not runs:
    st.info(
        "The store has no run yet. Run a probe (Probe page), a comparison (Compare) or an "
        "audit (Audit); each is saved here as it goes."
    )
    st.caption(ui.md(f"Store: {store.path}"))
    st.stop()

listing = runs_view.runs_table(runs)
tables.show(listing, height=min(400, 40 + 35 * len(listing)))
by_id = {r["id"]: r for r in runs}
# Document runs (maps, continuations) have no methods' scores to compare: the compare tabs
# leave them out; opening one shows its map or turns.
attack_runs = {i: r for i, r in by_id.items() if r["kind"] != "document"}

tab_open, tab_compare, tab_models = st.tabs(
    ["Open a run", "Compare two runs", "Compare two models"]
)
with tab_open:
    run_id = st.selectbox(
        "Run", list(by_id), format_func=lambda i: runs_view.run_label(by_id[i]), key="runs_open"
    )
    runs_view.open_run(store, run_id)
with tab_compare:
    runs_view.compare_runs(store, attack_runs)
with tab_models:
    diff_view.compare_models(store, attack_runs)
