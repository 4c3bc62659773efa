"""Live jobs on a page: start a worker thread, redraw its progress while it runs, cancel it."""

from __future__ import annotations

from typing import Any

from collections.abc import Callable

import streamlit as st

from ui_common.job_runner import Job, JobFunction, ProgressSnapshot
from ui_common.page import md, session_tag


def current_job(key: str) -> Job | None:
    """The job this session keeps under ``key`` (running or ended), or ``None``."""
    return st.session_state.get(key)


def start_job(key: str, target: JobFunction, what: str, *, run_id: int | None = None,
              **job_options: Any) -> Job:
    """Start ``target`` in a worker thread and keep the job in this session under ``key``.

    ``job_options`` go to :class:`~ui_common.job_runner.Job` (e.g. ``on_cancel_before_start``).
    """
    job = Job(target, name=f"{what} (session {session_tag()})", run_id=run_id,
              **job_options).start()
    st.session_state[key] = job
    return job


def render_status(snap: ProgressSnapshot) -> None:
    """Progress bar, state line, rate and ETA of a job."""
    text = md(snap.message)
    if snap.total:
        st.progress(snap.fraction, text=f"{snap.done} / {snap.total} · {text}")
    else:
        st.progress(0.0 if not snap.is_final else 1.0, text=text)
    parts = [f"state: {snap.state}"]
    if snap.rate:
        # Slow CPU runs: "95 s each" reads better than "0.01 / s".
        parts.append(f"{snap.rate:.2f} / s" if snap.rate >= 1 else f"{1 / snap.rate:.0f} s each")
    if snap.eta is not None and not snap.is_final:
        parts.append(f"about {_seconds(snap.eta)} left")
    st.caption(" · ".join(parts))
    if snap.state == "failed":
        st.error(md(snap.error or "the job failed"))
    elif snap.state == "waiting":
        st.warning(md(snap.message))


def _seconds(value: float) -> str:
    value = int(round(value))
    return f"{value // 60} min {value % 60:02d} s" if value >= 60 else f"{value} s"


@st.fragment(run_every=0.5)
def live_job(key: str, render: Callable[[ProgressSnapshot], None]) -> None:
    """Redraw a running job every 0.5 s; a full rerun when it ends shows the final page."""
    job = current_job(key)
    if job is None:
        return
    snap = job.progress.snapshot()
    if st.button("Cancel", key=f"{key}_cancel", disabled=snap.is_final,
                 help="Stops after the candidate in flight; what was scored is kept."):
        job.cancel()
        snap = job.progress.snapshot()
    render_status(snap)
    render(snap)
    if snap.is_final:
        st.rerun()


def show_job(key: str, render: Callable[[ProgressSnapshot], None]) -> ProgressSnapshot | None:
    """Draw the job under ``key``: live while it runs, once more when it has ended."""
    job = current_job(key)
    if job is None:
        return None
    snap = job.progress.snapshot()
    if snap.is_final:
        render_status(snap)
        render(snap)
    else:
        live_job(key, render)
    return snap


def job_running(key: str) -> bool:
    """Whether the job under ``key`` is still running (a page disables its start button)."""
    job = current_job(key)
    return job is not None and not job.progress.snapshot().is_final
