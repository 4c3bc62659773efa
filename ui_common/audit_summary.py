"""The end of an audit on the Audit page: what it found, in a few lines, and the way to its report.

A finished (or stopped) audit or dataset inference ends with a "Run N is saved" box, as Probe and
Compare do: its units done and failed, Table 1's pooled Mem per method, the membership and
dataset-inference verdicts when the run has them, the HTML report's download and a link to the
Runs page. The figures are the report's (:mod:`memprobe_core.report.build`); the verdicts are
:mod:`memprobe_core.membership.verdict`'s, the ones the Report tab leads with.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from memprobe_core.report import build as report_build
from memprobe_core.report.build import Report
from memprobe_core.report.formatting import SMALL_N_MARK, n_mark, with_ci
from memprobe_core.report.summary import pooled_rows, verdict_lines
from memprobe_core.stats import SMALL_N
from memprobe_core.store import Store
from ui_common.job_runner import Job, ProgressSnapshot
from ui_common.page import md
from ui_common.render import html_report_download

# Session-state slot of the last report built (both the Report tab and the end box read it).
_REPORT_SLOT = "_audit_report_cache"


def cached_report(store: Store, run_id: int, select: str = "objective") -> Report:
    """``report_for_run(store, run_id, select=select)``, built once per state of the run.

    The page draws the same report twice at an audit's end (the Report tab and the end box) and
    on every rerun: the bootstrap costs seconds on a large audit. A unit ending, the status
    changing or any write to the run builds it afresh.
    """
    run = store.get_run(run_id)
    version = (
        str(store.path),
        run_id,
        select,
        run.get("updated"),
        run.get("status"),
        run.get("units_done"),
        run.get("units_error"),
    )
    cached = st.session_state.get(_REPORT_SLOT)
    if cached is None or cached[0] != version:
        cached = (version, report_build.report_for_run(store, run_id, select=select))
        st.session_state[_REPORT_SLOT] = cached
    return cached[1]


def mem_lines(report: Report) -> list[str]:
    """Table 1's Mem per method, all domains pooled (the only domain when there is one), one
    line per length: "Mem, all domains, length 50: P-S-Inst 0.12 [0.05, 0.20] (n 6†), …"."""
    table = report.table1
    if table.empty:
        return []
    pooled = pooled_rows(table)
    lines = []
    for length in sorted(pooled["length"].unique()):
        rows = pooled[pooled["length"] == length]
        domain = (
            "all domains" if (rows["domain"] == "all").all() else ", ".join(rows["domain"].unique())
        )
        parts = [
            f"{row['method_label']} {with_ci(row['mem'], row['mem_lo'], row['mem_hi'])} "
            f"(n {n_mark(row['n'], row['small_n'])})"
            for _, row in rows.iterrows()
            if not pd.isna(row["mem"])
        ]
        if parts:
            lines.append(f"Mem, {domain}, length {length}: " + "; ".join(parts))
    return lines


def headline_lines(report: Report) -> list[str]:
    """What the end box lists: Mem per method and length, then the verdicts."""
    lines = mem_lines(report) + verdict_lines(report)
    if not lines and report.meta.get("units_done", 0) == 0:
        lines.append("No unit finished, so there are no figures.")
    return lines


def after_job(store: Store, job: Job | None, snap: ProgressSnapshot | None) -> None:
    """Below the Audit page's job: its :func:`end_box` once it has ended (nothing before)."""
    if job is None or snap is None or not snap.is_final or job.run_id is None:
        return
    # The Mem the Report tab shows, so both read one report (cached_report).
    end_box(store, job.run_id, st.session_state.get("audit_select", "objective"))


def end_box(store: Store, run_id: int, select: str = "objective") -> None:
    """The box below an audit's progress once its job has ended: "Run N is saved", its units,
    headline figures and verdicts, the HTML report and the Runs page."""
    report = cached_report(store, run_id, select)
    meta: dict[str, Any] = report.meta
    done, failed = int(meta.get("units_done") or 0), int(meta.get("units_error") or 0)
    total, status = int(meta.get("units_total") or 0), meta.get("status", "")
    head = f"Run {run_id} is saved ({status}): {done} of {total} units done, {failed} failed."
    if status == "interrupted":
        head += " Resume it in the first tab, under “Resume an interrupted audit”."
    lines = headline_lines(report)
    text = md(head)
    if lines:
        text += "\n\n" + "\n".join(f"- {md(line)}" for line in lines)
    st.success(text)
    if mem_lines(report):
        mark = f"{SMALL_N_MARK} marks n < {SMALL_N}"
        st.caption(md(f"Mem = {meta.get('selection_label', '')}; {mark}."))
    c1, c2 = st.columns(2)
    with c1:
        html_report_download(store, run_id, report, key=f"audit_end_html_{run_id}")
    with c2:
        st.page_link("pages/5_Runs.py", label="Open it on the Runs page", icon=":material/history:")
    st.caption("The whole report (tables, charts, controls) is in the Report tab above.")
