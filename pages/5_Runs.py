"""Runs: every run in the store; replay one round by round; compare two; export safe CSV."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import streamlit as st

import ui_common as ui
from memprobe_core.attacks.registry import method_label
from memprobe_core.config import ScoringConfig
from memprobe_core.report.build import report_for_run
from ui_common import charts

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


def _when(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


listing = pd.DataFrame(
    [
        {
            "run": r["id"],
            "kind": r["kind"],
            "title": r.get("title", ""),
            "status": r["status"],
            "units done": r.get("units_done", 0),
            "units failed": r.get("units_error", 0),
            "units": r.get("units_total", 0),
            "created": _when(r["created"]),
            "updated": _when(r["updated"]),
        }
        for r in runs
    ]
)
st.dataframe(listing, hide_index=True, width="stretch", height=min(400, 40 + 35 * len(listing)))
by_id = {r["id"]: r for r in runs}


def run_label(run_id: int) -> str:
    r = by_id[run_id]
    return f"#{run_id} · {r['kind']} · {r.get('title') or 'untitled'} · {r['status']}"


tab_open, tab_compare = st.tabs(["Open a run", "Compare two runs"])

with tab_open:
    run_id = st.selectbox("Run", list(by_id), format_func=run_label, key="runs_open")
    run = store.get_run(run_id)
    units = store.units(run_id)
    c1, c2, c3 = st.columns(3)
    c1.metric("Status", run["status"])
    c2.metric("Units done", f"{run['units_done']} / {run['units_total']}")
    c3.metric("Units failed", run["units_error"])
    with st.expander("Configuration and manifest"):
        st.json({"config": run["config"], "manifest": run["manifest"]}, expanded=False)

    results = store.results_frame(run_id)
    candidates = store.candidates_frame(run_id)

    st.subheader("Export")
    e1, e2, e3 = st.columns(3)
    with e1:
        if not results.empty:
            report = report_for_run(store, run_id)
            ui.csv_download(
                "Report (Table 1) CSV",
                report.table1,
                f"memprobe-run{run_id}-report.csv",
                key="dl_report",
            )
            ui.html_report_download(store, run_id, report, key="dl_html")
        else:
            st.caption("No finished unit yet: no report to export.")
    with e2:
        if not results.empty:
            ui.csv_download(
                "Results CSV", results, f"memprobe-run{run_id}-results.csv", key="dl_results"
            )
    with e3:
        if not candidates.empty:
            ui.csv_download(
                "Raw candidates CSV",
                candidates,
                f"memprobe-run{run_id}-candidates.csv",
                key="dl_candidates",
            )
        else:
            st.caption("No candidate recorded in this run.")
    st.caption(
        "CSV cells that a spreadsheet would run as a formula (=, +, -, @ …) are neutralized."
    )

    if not units:
        st.info("This run has no unit of work.")
    else:
        st.subheader("Units")
        unit_rows = pd.DataFrame(
            [
                {
                    "snippet": u["snippet_id"],
                    "method": method_label(u["method"]),
                    "length": u["length"],
                    "status": u["status"],
                    "attempts": u["attempts"],
                    "seconds": u["seconds"],
                    "error": u["error"] or "",
                }
                for u in units
            ]
        )
        st.dataframe(unit_rows, hide_index=True, width="stretch")

        st.subheader("Replay")
        keys = [u["key"] for u in units]
        unit = st.selectbox(
            "Unit",
            range(len(keys)),
            key=f"runs_unit_{run_id}",
            format_func=lambda i: (
                f"{keys[i].snippet_id} · {method_label(keys[i].method)} · {keys[i].length}"
            ),
        )
        key = keys[unit or 0]
        frame = charts.candidate_rows(store.candidates(run_id, key))
        if frame.empty:
            st.info(
                "No candidate of this unit was recorded (it has not started, or it failed "
                "before scoring one)."
            )
        else:
            last_round = int(frame["round"].max())
            upto = last_round
            if last_round > 0:
                upto = st.slider(
                    "Show rounds up to", 0, last_round, last_round, key=f"runs_upto_{run_id}_{unit}"
                )
            shown = charts.candidate_rows(
                r for r in store.candidates(run_id, key) if r["round"] <= upto
            )
            result = store.result(run_id, key)
            manifest = result.manifest if result is not None else {}
            scoring = manifest.get("scoring")
            split_info = {
                **(manifest.get("split") or {}),
                "scoring": ScoringConfig(**scoring) if scoring else None,
            }
            ui.probe_view(shown, split_info, result)
            if split_info.get("suffix") is None:
                st.caption(
                    "The overlap view needs the unit's split: it is kept with every "
                    "finished unit (units of older versions have none)."
                )

with tab_compare:
    if len(by_id) < 2:
        st.info("Compare needs two runs in the store.")
    else:
        ids = list(by_id)
        a, b = st.columns(2)
        run_a = a.selectbox("Run A", ids, index=0, format_func=run_label, key="runs_cmp_a")
        run_b = b.selectbox("Run B", ids, index=1, format_func=run_label, key="runs_cmp_b")
        frames = []
        for rid in (run_a, run_b):
            res = store.results_frame(rid)
            if not res.empty:
                frames.append(res.assign(run=f"#{rid}"))
        if len(frames) < 2:
            st.info("Both runs need at least one finished unit to compare.")
        else:
            both = pd.concat(frames, ignore_index=True)
            summary = both.groupby(["run", "method"], as_index=False)[
                ["mem", "lcs_p", "dis", "objective"]
            ].mean(numeric_only=True)
            summary["method"] = summary["method"].map(lambda m: method_label(m))
            st.dataframe(summary, hide_index=True, width="stretch")
            import plotly.express as px

            fig = px.bar(
                summary,
                x="method",
                y="mem",
                color="run",
                barmode="group",
                title="Mean Mem by method, run A vs run B",
            )
            fig.update_layout(height=360)
            st.plotly_chart(fig, width="stretch")
