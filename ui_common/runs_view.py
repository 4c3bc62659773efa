"""The Runs page's views: the run listing, one run opened (exports, units, replay), two compared.

Every function draws with Streamlit and reads the store; nothing here computes a score (the
report comes from :func:`memprobe_core.report.build.report_for_run`, the figures from
:mod:`ui_common.charts`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import streamlit as st

from memprobe_core.attacks.registry import extracts, method_label
from memprobe_core.audit.inference import short_numbers
from memprobe_core.config import ScoringConfig
from memprobe_core.documents.stored import units_text
from memprobe_core.report import build as report_build
from memprobe_core.report.export import readable_export
from memprobe_core.store import Store
from memprobe_core.store.frames import results_table
from ui_common import charts, document_view, tables
from ui_common.page import md
from ui_common.render import csv_download, html_report_download, probe_view, stored_unit_chance


def _when(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def runs_table(runs: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per run: id, kind, title, status, unit counts, created and updated times."""
    return pd.DataFrame(
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


def run_label(run: Mapping[str, Any]) -> str:
    """``#id · kind · title · status``: a run as a select box shows it (long numbers in the
    title, e.g. a 20-digit seed of a run stored before titles were shortened, cut short)."""
    title = short_numbers(run.get("title") or "untitled")
    return f"#{run['id']} · {run['kind']} · {title} · {run['status']}"


def open_run(store: Store, run_id: int) -> None:
    """Status, configuration, exports, the units and the replay of one of the run's units (a
    document run: its map or its turns, as the Document page shows them)."""
    run = store.get_run(run_id)
    if run["kind"] == "document":
        c1, c2 = st.columns(2)
        c1.metric("Status", run["status"])
        c2.metric("Units done", units_text(run))
        document_view.show_run(store, run_id, key="runs_doc")
        return
    units = store.units(run_id)
    c1, c2, c3 = st.columns(3)
    c1.metric("Status", run["status"])
    c2.metric("Units done", f"{run['units_done']} / {run['units_total']}")
    c3.metric("Units failed", run["units_error"])
    with st.expander("Configuration and manifest"):
        st.json({"config": run["config"], "manifest": run["manifest"]}, expanded=False)
    exports(store, run_id)
    if not units:
        st.info("This run has no unit of work.")
        return
    results_section(store, run_id)
    st.subheader("Units")
    unit_rows = pd.DataFrame(
        [
            {
                "snippet": u["snippet_id"],
                "method": u["method"],
                "length": u["length"],
                "status": u["status"],
                "attempts": u["attempts"],
                "seconds": u["seconds"],
                "error": u["error"] or "",
            }
            for u in units
        ]
    )
    tables.show(unit_rows)
    replay(store, run_id, [u["key"] for u in units])


def results_section(store: Store, run_id: int) -> None:
    """The run's finished units as the Compare page shows a comparison (one table builder,
    :func:`memprobe_core.store.frames.results_table`, over the store's results frame): scores,
    the methods' own figures, costs and PII counts."""
    table = results_table(store.results_frame(run_id))
    if table.empty:
        return
    st.subheader("Results")
    tables.show(shown_results(table))


def shown_results(table: pd.DataFrame, *, drop: Sequence[str] = ()) -> pd.DataFrame:
    """A :func:`results_table` as the pages show it (Runs, Compare): each method by its label,
    the status only where a row is a cancelled method's partial best, ``drop`` left out."""
    shown = table.drop(columns=["method", *drop])
    if (shown["status"] == "finished").all():
        shown = shown.drop(columns=["status"])
    return shown.rename(columns={"method_label": "method"})


def exports(store: Store, run_id: int) -> None:
    """The run's report (CSV and HTML), results and raw candidates as downloads."""
    results = store.results_frame(run_id)
    candidates = store.candidates_frame(run_id)
    st.subheader("Export")
    e1, e2, e3 = st.columns(3)
    with e1:
        if not results.empty:
            report = report_build.report_for_run(store, run_id)
            csv_download(
                "Report (Table 1) CSV",
                report.table1,
                f"memprobe-run{run_id}-report.csv",
                key="dl_report",
            )
            html_report_download(store, run_id, report, key="dl_html")
        else:
            st.caption("No finished unit yet: no report to export.")
    with e2:
        if not results.empty:
            csv_download(
                "Results CSV",
                readable_export(results),
                f"memprobe-run{run_id}-results.csv",
                key="dl_results",
            )
    with e3:
        if not candidates.empty:
            csv_download(
                "Raw candidates CSV",
                readable_export(candidates),
                f"memprobe-run{run_id}-candidates.csv",
                key="dl_candidates",
            )
        else:
            st.caption("No candidate recorded in this run.")
    st.caption(
        "CSV cells that a spreadsheet would run as a formula (=, +, -, @ …) are neutralized. "
        "Results and candidates: times in ISO 8601 (UTC), each row with its prefix and true "
        "suffix, and columns empty in every row left out."
    )


def _no_candidates_reason(result: Any, method: str) -> str:
    """Why a unit has no candidate to replay, in the unit's own terms."""
    if result is not None and not extracts(method):
        return (
            f"{method_label(method)} asks the victim for no continuation: it measures membership "
            "signals, so there is no candidate to replay (its values are in the run's report)."
        )
    if result is not None:
        return "This unit finished without recording candidates (its result is in the report)."
    return "No candidate of this unit was recorded: it has not run yet, or it failed."


def replay(store: Store, run_id: int, keys: list[Any]) -> None:
    """One unit's candidates round by round (a slider), with the probe view of the rounds shown."""
    st.subheader("Replay")
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
        st.info(_no_candidates_reason(store.result(run_id, key), key.method))
        return
    last_round = int(frame["round"].max())
    upto = last_round
    if last_round > 0:
        upto = st.slider(
            "Show rounds up to", 0, last_round, last_round, key=f"runs_upto_{run_id}_{unit}"
        )
    shown = charts.candidate_rows(r for r in store.candidates(run_id, key) if r["round"] <= upto)
    result = store.result(run_id, key)
    manifest = result.manifest if result is not None else {}
    scoring = manifest.get("scoring")
    split_info = {
        **(manifest.get("split") or {}),
        "scoring": ScoringConfig(**scoring) if scoring else None,
    }
    probe_view(shown, split_info, result, stored_chance=stored_unit_chance(store, run_id, result))
    if split_info.get("suffix") is None:
        st.caption(
            "The overlap view needs the unit's split: it is kept with every "
            "finished unit (units of older versions have none)."
        )


COMPARED_SCORES = ["mem", "lcs_p", "dis", "objective"]


def compared_scores(results: pd.DataFrame) -> pd.DataFrame:
    """Mean score per run and method, over the methods that extract (the rows with a Mem).

    A signals-only method measures no Mem, LCS_P or objective (its cells are empty, not 0), so
    its rows are left out; the frame is empty when neither run has an extracting method.
    """
    extracting = results[pd.to_numeric(results["mem"], errors="coerce").notna()]
    if extracting.empty:
        return pd.DataFrame(columns=["run", "method", *COMPARED_SCORES])
    numeric = extracting.assign(
        **{c: pd.to_numeric(extracting[c], errors="coerce") for c in COMPARED_SCORES}
    )
    summary = numeric.groupby(["run", "method"], as_index=False)[COMPARED_SCORES].mean()
    summary["method"] = summary["method"].map(method_label)
    return summary


def _victims(results: pd.DataFrame) -> str:
    names = sorted({str(v) for v in results["victim"].dropna().unique() if str(v)})
    return ", ".join(names) or "unknown"


def compare_runs(store: Store, by_id: Mapping[int, Mapping[str, Any]]) -> None:
    """Two runs picked side by side: mean scores per method and a bar chart of Mem."""
    if len(by_id) < 2:
        st.info(
            "Compare needs two audit or probe runs in the store; document runs have no "
            'methods to compare (open one under "Open a run", or read maps of one document '
            "side by side on the Document page)."
        )
        return
    ids = list(by_id)
    a, b = st.columns(2)
    label = {i: run_label(by_id[i]) for i in ids}
    run_a = a.selectbox("Run A", ids, index=0, format_func=label.__getitem__, key="runs_cmp_a")
    run_b = b.selectbox("Run B", ids, index=1, format_func=label.__getitem__, key="runs_cmp_b")
    frames = {rid: store.results_frame(rid) for rid in (run_a, run_b)}
    if any(frame.empty for frame in frames.values()):
        st.info("Both runs need at least one finished unit to compare.")
        return
    victims = {rid: _victims(frame) for rid, frame in frames.items()}
    if victims[run_a] != victims[run_b]:
        st.warning(
            md(
                f"The two runs attacked different victims (#{run_a}: {victims[run_a]}; "
                f"#{run_b}: {victims[run_b]}): their scores measure different models, "
                "not different methods."
            )
        )
    both = pd.concat([f.assign(run=f"#{rid}") for rid, f in frames.items()], ignore_index=True)
    summary = compared_scores(both)
    if summary.empty:
        st.info(
            "Neither run has an extraction method (a signals-only audit or a dataset inference "
            "measures membership signals, not Mem): open each run for its report."
        )
        return
    missing = sorted({f"#{rid}" for rid in frames} - set(summary["run"]))
    if missing:
        st.caption(
            f"Run {', '.join(missing)} has no extraction method (signals only): only the other "
            "run's scores are shown."
        )
    tables.show(summary, tips={"run": "A run, by its number in the store."})
    st.plotly_chart(charts.run_comparison_bars(summary), width="stretch")
