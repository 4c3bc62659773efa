"""memprobe dashboard: the navigation and the home page (what it measures, set-up, recent runs).

Start with ``streamlit run app.py`` (or ``scripts/run.sh``). This script is the entry point: it
registers the pages with ``st.navigation`` (the sidebar lists "Home" first, then the pages in
``pages/``, each at the URL path of its title, e.g. ``/Compare``) and runs the chosen one.
"""

from __future__ import annotations

import datetime as dt

import pandas as pd
import streamlit as st

import ui_common as ui
from ui_common import tables

# (file, title = URL path, icon, what it does): the sidebar's pages and the home page's links.
PAGES = [
    (
        "pages/1_Probe.py",
        "Probe",
        ":material/biotech:",
        "one snippet, watch the attacker's rounds live",
    ),
    ("pages/2_Compare.py", "Compare", ":material/balance:", "all methods on the same snippet"),
    (
        "pages/3_Audit.py",
        "Audit",
        ":material/table_chart:",
        "a dataset × methods × lengths, Table 1",
    ),
    ("pages/4_NER.py", "NER", ":material/label:", "NER memorization: M-MEM, heatmaps"),
    (
        "pages/6_Document.py",
        "Document",
        ":material/menu_book:",
        "a whole document: the map of what comes back, continuation",
    ),
    ("pages/5_Runs.py", "Runs", ":material/history:", "history, replay, CSV export"),
]
SETUP_PLACEHOLDER = "Checking the embedded models and the device…"


def home() -> None:
    """The home page: what memprobe measures, links to the pages, set-up and recent runs."""
    ui.page_setup("Home")
    st.title("memprobe")
    st.markdown(
        "memprobe measures how much of its training data a language model gives back. "
        "It cuts a snippet the model may have seen into a prefix and a true suffix, asks the "
        "model with several prompting methods (prefix–suffix, GCG, Reverse-LM and an attacker "
        "LLM that rewrites its own prompts), and scores **Mem**: the ROUGE-L recall of the true "
        "suffix in the model's answer, while **LCS_P** checks the prompt did not simply give the "
        "suffix away. It also audits NER models: are names seen in training recognised more "
        "confidently (**M-MEM**)?"
    )
    st.subheader("Pages")
    for col, (path, label, icon, what) in zip(st.columns(len(PAGES)), PAGES):
        with col:
            st.page_link(path, label=label, icon=icon)
            st.caption(what)
    left, right = st.columns(2)
    with left:
        st.subheader("Set-up")
        # Drawn at once: the device check imports torch, which takes seconds on a first load.
        setup = st.empty()
        setup.caption(SETUP_PLACEHOLDER)
    with right:
        recent_runs()
    compute, models = ui.device_summary(), ui.embedded_table()
    with setup.container():
        st.write(f"Compute: {compute}")
        tables.show(models)
        if ui.fake_default():
            st.info(
                "MEMPROBE_UI_FAKE=1: the pages default to the fake backend (instant, meaningless "
                "text) for demos and tests."
            )
        else:
            st.caption(
                "The first probe on an embedded model converts it once (about a minute on a "
                "CPU); later runs load the cached copy in seconds."
            )


def recent_runs() -> None:
    """The ten newest runs in the store, with a link to the run history."""
    st.subheader("Recent runs")
    store = ui.get_store()
    if store is None:
        return
    runs = store.list_runs(limit=10)
    if not runs:
        st.info("No run yet. Start with the Probe page: pick a built-in snippet and press Run.")
    else:
        frame = pd.DataFrame(
            [
                {
                    "run": r["id"],
                    "kind": r["kind"],
                    "title": r.get("title", ""),
                    "status": r["status"],
                    "units done": f"{r.get('units_done', 0)}/{r.get('units_total', 0)}",
                    "updated": dt.datetime.fromtimestamp(r["updated"]).strftime("%Y-%m-%d %H:%M"),
                }
                for r in runs
            ]
        )
        tables.show(frame)
        st.page_link("pages/5_Runs.py", label="Open the run history", icon=":material/history:")
    st.caption(ui.md(f"Store: {store.path}"))


navigation = st.navigation(
    [st.Page(home, title="Home", icon=":material/home:", default=True)]
    + [st.Page(path, title=title, icon=icon, url_path=title) for path, title, icon, _ in PAGES]
)
navigation.run()
