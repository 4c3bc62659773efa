"""Live jobs on a page: start a worker thread, redraw its progress while it runs, cancel it.

A running job is watched by a small fragment that polls its :class:`ProgressSnapshot` and
draws only the progress bar, the state line, the Cancel button and what the job's models are
writing now (``ui_common.live_view``: every row of the batch growing; the poll stays fast
while a batch is written, and only the fragment reruns for it). The page's own view of the
job (tables, charts) is drawn by a full script run, and a full run happens only when the
snapshot changed in a way a reader would see (a row scored, a round started, the job ended).
When nothing changes the poll slows down (0.5 s → 2 s); a job queued behind another's model
lock is polled every 5 s until it starts.

Why: every script run costs the whole process the GIL, and Streamlit used to run a full
``gc.collect(2)`` after each one (about 0.45 s with the embedded models loaded). Redrawing a
probe's table and charts every 0.5 s in every open tab left the generation thread a small
share of the CPU, so a probe watched in the browser ran many times slower than from the CLI
(see ``bench/dashboard.py``). The policy lives in :class:`LiveView`, which knows
nothing of Streamlit and is unit-tested.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Literal

import streamlit as st

from ui_common.job_runner import Job, JobFunction, ProgressSnapshot, live_job_of_run
from ui_common.live_view import render_live, streaming
from ui_common.page import md, session_tag

# Poll intervals (seconds) of the status fragment: fast right after a change, slow when quiet.
FAST_POLL_S = 0.5
SLOW_POLL_S = 2.0
# A job queued behind another one's model lock changes only when it starts: its tab polls this
# slowly from the start (on a 2-core machine, every queued tab's polls take CPU from the job
# that runs). The start is seen within this many seconds.
WAITING_POLL_S = 5.0
# Polls without a change before slowing down (4 × 0.5 s = 2 s of quiet).
QUIET_POLLS = 4
# A page is redrawn at most this often while a job runs (a job that reports many small steps,
# e.g. NER training, would otherwise redraw the page back to back).
MIN_REDRAW_S = 1.0

# ``data`` keys the status fragment draws itself (ui_common.live_view): a change to them needs
# no page redraw (a search's loss per step).
FRAGMENT_DATA = frozenset({"search_losses"})

Action = Literal["redraw", "slow_down", "speed_up", "none"]


def snapshot_version(snap: ProgressSnapshot) -> tuple[Hashable, ...]:
    """What a page draws from a snapshot, reduced to a comparable value.

    The free-text ``message``, the rate/ETA, the batch being written and the ``data`` keys of
    :data:`FRAGMENT_DATA` are left out: the status fragment shows them on every poll, so they
    never need the page to be redrawn. ``data`` values count by identity
    and size: jobs replace a value (``update_data(results=dict(...))``) when it changes.
    """
    data = tuple(
        sorted((str(k), _fingerprint(v)) for k, v in snap.data.items() if k not in FRAGMENT_DATA)
    )
    return (snap.state, snap.done, snap.total, len(snap.items), data, snap.error)


def _fingerprint(value: Any) -> Hashable:
    if isinstance(value, (str, int, float, bool, type(None))):
        return value
    size = len(value) if hasattr(value, "__len__") else None
    return (id(value), size)


@dataclass
class LiveView:
    """When to redraw a running job's page and how often to poll it (no Streamlit here).

    Attributes:
        drawn: the :func:`snapshot_version` the page last drew (``None`` before the first draw).
        drawn_at: ``time.monotonic()`` of that draw.
        interval: the status fragment's poll interval now, seconds.
        quiet: polls in a row that saw no change.
    """

    drawn: tuple[Hashable, ...] | None = None
    drawn_at: float = field(default=float("-inf"))
    interval: float = FAST_POLL_S
    quiet: int = 0

    def drew(self, version: tuple[Hashable, ...], now: float, *, waiting: bool = False) -> None:
        """Record that a full run drew ``version`` of the job (quiet polls count from here).

        ``waiting``: the job waits for the model lock; it is polled at ``WAITING_POLL_S``
        until it starts (a change of state, which redraws and polls fast again).
        """
        self.drawn, self.drawn_at, self.quiet = version, now, 0
        if waiting:
            self.interval = WAITING_POLL_S

    def poll(
        self, version: tuple[Hashable, ...], *, final: bool, now: float, streaming: bool = False
    ) -> Action:
        """Decide what one poll does.

        ``streaming``: a batch is being written (the fragment itself draws its rows, so this
        needs no page redraw, only fast polls).

        Returns:
            ``"redraw"``: the page shows an older version; rerun it (the poll speeds up again).
            ``"slow_down"``: quiet for a while; ``interval`` grew and a rerun applies it.
            ``"speed_up"``: a batch started being written while polls were slow; ``interval``
            is fast again and a rerun applies it.
            ``"none"``: nothing to do (also while a change waits out ``MIN_REDRAW_S``).
        """
        if version != self.drawn:
            self.quiet = 0
            if final or now - self.drawn_at >= MIN_REDRAW_S:
                self.interval = FAST_POLL_S
                return "redraw"
            return "none"
        if streaming:
            self.quiet = 0
            if self.interval > FAST_POLL_S:
                self.interval = FAST_POLL_S
                return "speed_up"
            return "none"
        self.quiet += 1
        if self.quiet >= QUIET_POLLS and self.interval < SLOW_POLL_S:
            self.interval = min(SLOW_POLL_S, self.interval * 4)
            self.quiet = 0
            return "slow_down"
        return "none"


def current_job(key: str) -> Job | None:
    """The job this session keeps under ``key`` (running or ended), or ``None``."""
    return st.session_state.get(key)


def start_job(
    key: str, target: JobFunction, what: str, *, run_id: int | None = None, **job_options: Any
) -> Job:
    """Start ``target`` in a worker thread and keep the job in this session under ``key``.

    ``job_options`` go to :class:`~ui_common.job_runner.Job` (e.g. ``on_cancel_before_start``).
    """
    # ``what`` names the job to every tab ("Audit run 3"); the session only tells this tab's
    # jobs from others' (it is never shown).
    job = Job(target, name=what, run_id=run_id, session=session_tag(), **job_options).start()
    st.session_state[key] = job
    st.session_state.pop(_view_key(key), None)  # a new job starts with a fresh live view
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
    parts.extend(_eta_words(snap))
    st.caption(" · ".join(parts))
    if snap.state == "failed":
        st.error(md(snap.error or "the job failed"))
    elif snap.state == "waiting":
        st.warning(md(snap.message))


def _eta_words(snap: ProgressSnapshot) -> list[str]:
    """The time left as the status line says it (nothing once the job has ended)."""
    if snap.is_final or snap.state != "running":
        return []
    if snap.eta_overrun:
        return ["taking longer than estimated; a new estimate comes with the next step"]
    if snap.eta is None:
        return []
    words = f"about {_seconds(snap.eta)} left"
    if snap.eta_revisions:
        words += " (revised: the first estimate ran out)"
    if snap.eta_rough:
        words += " (rough: a method that has not started yet is costed like those measured)"
    return [words]


def _seconds(value: float) -> str:
    value = round(value)
    return f"{value // 60} min {value % 60:02d} s" if value >= 60 else f"{value} s"


def _view_key(key: str) -> str:
    return f"{key}__live_view"


def live_view(key: str) -> LiveView:
    """This session's :class:`LiveView` of the job under ``key`` (created on first use)."""
    view = st.session_state.get(_view_key(key))
    if view is None:
        view = st.session_state[_view_key(key)] = LiveView()
    return view


def _job_status(key: str) -> None:
    """The status fragment's body: Cancel, progress; a full rerun when the page is out of date."""
    job = current_job(key)
    if job is None:
        return
    snap = job.progress.snapshot()
    if st.button(
        "Cancel",
        key=f"{key}_cancel",
        disabled=snap.is_final,
        help="Stops after the candidate in flight; what was scored is kept.",
    ):
        job.cancel()
        snap = job.progress.snapshot()
    render_status(snap)
    _poll(key, snap)


def _poll(key: str, snap: ProgressSnapshot) -> None:
    """Draw what the job's models are writing now; rerun the whole page when it is out of date."""
    render_live(None if snap.is_final else snap.live, snap.data.get("search_losses"))
    action = live_view(key).poll(
        snapshot_version(snap),
        final=snap.is_final,
        now=time.monotonic(),
        streaming=not snap.is_final and streaming(snap.live),
    )
    if action != "none":
        st.rerun()  # the whole page: it draws the new rows and declares the new poll interval


def live_job(
    key: str, render: Callable[[ProgressSnapshot], None], snap: ProgressSnapshot | None = None
) -> None:
    """Draw a running job: a polling status fragment, then ``render`` of ``snap``.

    ``render`` runs only in full script runs, which the fragment asks for when the snapshot
    changed (see :class:`LiveView`), so a quiet job costs one small poll every 2 s per tab.
    ``snap`` is the snapshot the caller decided on (default: a fresh one); the page draws
    exactly that one, so a job ending meanwhile is seen by the fragment and redrawn final.
    """
    job = current_job(key)
    if job is None:
        return
    view = live_view(key)
    snap = snap if snap is not None else job.progress.snapshot()
    view.drew(snapshot_version(snap), time.monotonic(), waiting=snap.state == "waiting")
    # The interval is fixed when a fragment is declared, so it is declared anew on each full
    # run; Streamlit's client replaces the timer of the same fragment when the interval differs.
    st.fragment(run_every=view.interval)(_job_status)(key)
    render(snap)


def watch_run(run_id: int) -> bool:
    """Follow store run ``run_id`` while a job of this process started in another tab (or in
    this tab before a reload) works on it: its progress line, and a full rerun when it changes,
    polled as a tab's own job is (:class:`LiveView`). ``False``: no such job (none works on the
    run, or it is this tab's own, which its page already draws live).

    Why: a job belongs to the browser session that started it; without this, a reloaded or
    second tab showed a running run frozen at the moment it was opened.
    """
    job = live_job_of_run(run_id)
    if job is None or job.session == session_tag():
        return False
    key = f"watch_run_{run_id}"
    snap = job.progress.snapshot()
    view = live_view(key)
    view.drew(snapshot_version(snap), time.monotonic(), waiting=snap.state == "waiting")
    st.fragment(run_every=view.interval)(_watched_status)(run_id, key)
    return True


def _watched_status(run_id: int, key: str) -> None:
    """The watching fragment's body: the other tab's job's progress; a full rerun when the
    page is out of date, or when the job has ended (the page then reads the finished run)."""
    job = live_job_of_run(run_id)
    if job is None:
        st.rerun()
        return
    snap = job.progress.snapshot()
    render_status(snap)
    _poll(key, snap)


def job_snapshot(key: str) -> ProgressSnapshot | None:
    """The job under ``key`` as it is now (``None``: no job); a page that draws the job's run
    above :func:`show_job` takes it first and passes it there as ``seen``."""
    job = current_job(key)
    return job.progress.snapshot() if job is not None else None


def show_job(
    key: str,
    render: Callable[[ProgressSnapshot], None],
    *,
    seen: ProgressSnapshot | Literal["unset"] | None = "unset",
) -> ProgressSnapshot | None:
    """Draw the job under ``key``: live while it runs, once more when it has ended.

    ``seen``: the :func:`job_snapshot` the page took before drawing what it reads of the job's
    run from the store (a run picker's status, a report). When the job ended since, the page
    above shows it running (and no poll is left to redraw it), so the whole page is run again.
    """
    job = current_job(key)
    if job is None:
        return None
    snap = job.progress.snapshot()
    # The page saw no job, this job running, or another job (a new one started since).
    if snap.is_final and not isinstance(seen, str) and not _saw_end(seen, snap):
        st.rerun()
    if snap.is_final:
        render_status(snap)
        render(snap)
    else:
        live_job(key, render, snap)
    return snap


def _saw_end(seen: ProgressSnapshot | None, snap: ProgressSnapshot) -> bool:
    """Whether ``seen`` is the ended job ``snap`` (``started`` tells two jobs apart)."""
    return seen is not None and seen.is_final and seen.started == snap.started


def job_running(key: str) -> bool:
    """Whether the job under ``key`` is still running (a page disables its start button)."""
    job = current_job(key)
    return job is not None and not job.progress.snapshot().is_final
