"""Background jobs for the dashboard: a worker thread, a lock-protected progress object, one model lock.

The dashboard runs long work (a probe, a comparison, an audit, an NER run) in a worker thread so
the page stays responsive. The thread never touches the UI: it writes into a :class:`Progress`
object under a lock, and the page (a Streamlit fragment that re-runs while the job changes (see ui_common.jobs)) reads a
:meth:`Progress.snapshot` and draws it.

One process-wide :data:`MODEL_LOCK` serializes model jobs across browser sessions: models are
shared (cached once per process), and two jobs generating on one GPU at once would only slow each
other down or run out of memory. A second job waits, and its progress says so and for whom.

This module knows nothing of Streamlit, so it is unit-testable with plain threads.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from memprobe_core.attacks import run_method
from memprobe_core.attacks.events import (
    AttackEvent,
    CandidateScored,
    EventCallback,
    RoundStarted,
    SearchStep,
)
from memprobe_core.attacks.model_set import ModelSet
from memprobe_core.attacks.registry import method_label
from memprobe_core.attacks.result import AttackResult
from memprobe_core.machine_load import LoadSampler, cpu_cores
from memprobe_core.models.live import LiveBatch, LiveTap, watching
from memprobe_core.runs.eta import EtaModel
from memprobe_core.runs.probe import run_probe
from memprobe_core.runs.unit import Runner, UnitOutcome
from memprobe_core.store import Store

logger = logging.getLogger(__name__)

JobState = Literal["waiting", "running", "finished", "cancelled", "failed"]
FINAL_STATES: frozenset[str] = frozenset({"finished", "cancelled", "failed"})


@dataclass(frozen=True)
class Holder:
    """Who holds the model lock: what runs, since when, and for which browser session.

    Attributes:
        what: the job's name as a reader sees it (``"Probe run 5"``).
        since: ``time.time()`` when it took the lock.
        session: the browser session (tab) that started it; never shown, only compared with
            the reader's own (``None``: unknown).
    """

    what: str
    since: float
    session: str | None = None


class ModelLock:
    """A process-wide lock that remembers who holds it, so waiters can say what they wait for."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._meta = threading.Lock()
        self._held: Holder | None = None

    def acquire(self, holder: str, timeout: float, *, session: str | None = None) -> bool:
        """Take the lock for ``holder`` (started from browser ``session``); ``False`` when
        ``timeout`` seconds passed first."""
        if not self._lock.acquire(timeout=timeout):
            return False
        with self._meta:
            self._held = Holder(holder, time.time(), session)
        return True

    def release(self) -> None:
        with self._meta:
            self._held = None
        self._lock.release()

    def holder(self) -> tuple[str | None, float | None]:
        """``(description, since)`` of the current holder, or ``(None, None)`` when free."""
        held = self.held_by()
        return (held.what, held.since) if held is not None else (None, None)

    def held_by(self) -> Holder | None:
        """The current :class:`Holder`, or ``None`` when the lock is free."""
        with self._meta:
            return self._held

    def locked(self) -> bool:
        return self._lock.locked()


def ago(seconds: float) -> str:
    """A duration as "12 s", "2 min", "1 h 5 min" (rounded down; never negative)."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"


def describe_holder(holder: Holder, *, session: str | None, now: float) -> str:
    """The job holding the models in plain words, as seen from browser ``session``:
    "Probe run 5 started 2 min ago in another tab" (no session id is ever shown)."""
    where = ""
    if holder.session is not None and session is not None:
        where = " in this tab" if holder.session == session else " in another tab"
    return f"{holder.what} started {ago(now - holder.since)} ago{where}"


def lock_status(holder: Holder | None, *, session: str | None, now: float) -> str:
    """The sidebar's job status line: whether a job you start now runs at once or waits."""
    if holder is None:
        return "No job is running: a job you start runs at once."
    return f"Busy: {describe_holder(holder, session=session, now=now)}; a new job waits for it."


# Module-level, so every browser session of one Streamlit process shares it (modules are imported
# once per process; pages re-run, imports do not).
MODEL_LOCK = ModelLock()


@dataclass
class ProgressSnapshot:
    """A consistent, private copy of a job's progress at one moment (safe to read without a lock).

    Attributes:
        state: ``waiting`` (for the model lock), ``running``, ``finished``, ``cancelled``, ``failed``.
        message: one line for the user (what is happening now).
        done / total: units of work finished and planned (``total`` may be ``None``).
        rate: units per second since the job started running (``None`` before the first unit).
        eta: estimated seconds left (``None`` when unknown).
        eta_rough / eta_overrun / eta_revisions: the ETA borrows the cost of a method not
            measured yet / the estimate ran out with work left / estimates made afresh after
            running out (:class:`~memprobe_core.runs.eta.EtaReading`).
        items: rows appended by the job (e.g. scored candidates), in order.
        data: free-form fields the job set (e.g. the current best prompt).
        result: what the job function returned (once ``finished`` or ``cancelled``).
        error: ``"Type: message"`` when ``failed``.
        started / finished: wall-clock times (``time.time()``).
        live: the batch the job's models are writing now, as last published
            (:mod:`memprobe_core.models.live`; ``None`` before the first generate call).
    """

    state: str
    message: str
    done: int
    total: int | None
    rate: float | None
    eta: float | None
    items: list[Any]
    data: dict[str, Any]
    result: Any
    error: str | None
    started: float
    finished: float | None
    eta_rough: bool = False
    eta_overrun: bool = False
    eta_revisions: int = 0
    live: LiveBatch | None = None

    @property
    def is_final(self) -> bool:
        return self.state in FINAL_STATES

    @property
    def fraction(self) -> float:
        """Share of the work done, in [0, 1] (0 when the total is unknown)."""
        if not self.total:
            return 0.0
        return max(0.0, min(1.0, self.done / self.total))


@dataclass
class Progress:
    """Progress of one job, written by the worker thread and read by the page, under one lock."""

    state: str = "waiting"
    message: str = "starting…"
    done: int = 0
    total: int | None = None
    items: list[Any] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    result: Any = None
    error: str | None = None
    started: float = field(default_factory=time.time)
    running_since: float | None = None
    finished: float | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    # Rate and ETA come from the core when it knows better (audits report their own); else ours.
    _rate: float | None = None
    _eta: float | None = None
    # A model of the remaining work (probes and comparisons); wins over the rate-based ETA.
    eta_model: EtaModel | None = None
    # The cores other processes keep busy, read at each event and poll for the ETA model
    # (made with ``cores``: then it follows the load; see memprobe_core.runs.eta, "Load").
    load: LoadSampler = field(default_factory=LoadSampler, repr=False)
    # Where the job's decoding publishes what it is writing (the job runs inside watching(live)).
    live: LiveTap = field(default_factory=LiveTap)
    # False: no ETA at all (a job whose stages differ too much in cost for one rate, e.g. the NER
    # audit's first-use training beside its scoring; its message shows the stage's steps).
    show_eta: bool = True

    def set(self, **fields: Any) -> None:
        """Update any of ``state``, ``message``, ``done``, ``total``, ``rate``, ``eta``."""
        with self._lock:
            for key, value in fields.items():
                if key in ("rate", "eta"):
                    setattr(self, f"_{key}", value)
                elif key in ("state", "message", "done", "total"):
                    setattr(self, key, value)
                else:
                    raise KeyError(
                        f"Progress has no field {key!r}; use update_data() for free fields"
                    )
            if fields.get("state") == "running" and self.running_since is None:
                self.running_since = time.time()

    def advance(self, n: int = 1, message: str | None = None) -> None:
        """Count ``n`` more units done (and optionally say what is happening)."""
        with self._lock:
            self.done += n
            if message is not None:
                self.message = message

    def add_item(self, item: Any) -> None:
        """Append one row (e.g. a scored candidate) for the page to show."""
        with self._lock:
            self.items.append(item)

    def snapshot_data(self, key: str) -> Any:
        """One ``data`` value as it is now (``None`` when unset)."""
        with self._lock:
            return self.data.get(key)

    def update_data(self, **values: Any) -> None:
        """Set free-form fields (e.g. ``best_prompt=…``)."""
        with self._lock:
            self.data.update(values)

    def finish(self, result: Any, state: JobState = "finished", message: str = "done") -> None:
        with self._lock:
            self.result, self.state, self.message = result, state, message
            self.finished = time.time()

    def fail(self, error: str) -> None:
        with self._lock:
            self.error, self.state = error, "failed"
            self.message = f"failed: {error}"
            self.finished = time.time()

    def track(self, update: Callable[[EtaModel, float], None]) -> None:
        """Apply ``update(model, now)`` to the ETA model under the lock (no-op without one)."""
        with self._lock:
            if self.eta_model is not None:
                now = time.time()
                self.eta_model.observe_load(now, self.load.sample())
                update(self.eta_model, now)

    def snapshot(self) -> ProgressSnapshot:
        """A deep copy of the current state, taken under the lock."""
        with self._lock:
            rate, eta = self._rate, self._eta
            rough = overrun = False
            revisions = 0
            if rate is None and self.running_since is not None and self.done > 0:
                elapsed = (self.finished or time.time()) - self.running_since
                rate = self.done / elapsed if elapsed > 0 else None
            if not self.show_eta:
                eta = None
            elif self.eta_model is not None and self.state == "running":
                now = time.time()
                self.eta_model.observe_load(now, self.load.sample())
                reading = self.eta_model.reading(now)
                eta, rough, overrun = reading.seconds, reading.rough, reading.overrun
                revisions = reading.revisions
            elif eta is None and rate and self.total is not None and self.state == "running":
                eta = max(0.0, (self.total - self.done) / rate)
            return ProgressSnapshot(
                state=self.state,
                message=self.message,
                done=self.done,
                total=self.total,
                rate=rate,
                eta=eta,
                # Items are appended whole and never changed afterwards: a shallow list copy is
                # enough and keeps a 10k-row audit cheap to snapshot every half second.
                items=list(self.items),
                data=copy.copy(self.data),
                result=self.result,
                error=self.error,
                started=self.started,
                finished=self.finished,
                eta_rough=rough,
                eta_overrun=overrun,
                eta_revisions=revisions,
                # Published batches are never changed: no copy needed.
                live=self.live.snapshot(),
            )


JobFunction = Callable[[Progress, threading.Event], Any]

# Jobs alive in this process (any browser session), so a page can tell a run that is being
# worked on from one left "running" by a process that died (which can be resumed).
_LIVE: set[Job] = set()
_LIVE_LOCK = threading.Lock()


def live_run_ids() -> set[int]:
    """Store run ids that a job of this process is working on now."""
    with _LIVE_LOCK:
        return {job.run_id for job in _LIVE if job.run_id is not None}


def live_job_of_run(run_id: int) -> Job | None:
    """The job of this process (any tab's) working on store run ``run_id`` now, or ``None``."""
    with _LIVE_LOCK:
        return next((job for job in _LIVE if job.run_id == run_id), None)


class Job:
    """One function run in a daemon thread, optionally holding :data:`MODEL_LOCK` while it runs.

    The function receives the :class:`Progress` to write into and a cancel ``threading.Event`` to
    check between units of work; what it returns becomes ``progress.result``. An exception marks
    the job ``failed`` with its message (and is logged with its traceback).

    Example:
        >>> job = Job(lambda progress, cancel: 42, name="demo", lock=None).start()
        >>> job.join(5)
        >>> job.progress.snapshot().result
        42
    """

    def __init__(
        self,
        target: JobFunction,
        *,
        name: str,
        lock: ModelLock | None = MODEL_LOCK,
        run_id: int | None = None,
        on_cancel_before_start: Callable[[], None] | None = None,
        session: str | None = None,
    ) -> None:
        self.name = name
        self.run_id = run_id
        # The browser session that started it: the lock's waiters say "this tab" or "another tab".
        self.session = session
        # What to do when the job is cancelled before it ran (e.g. mark its run cancelled, so
        # a run recorded for it is not left "running" forever).
        self._on_cancel_before_start = on_cancel_before_start
        self.progress = Progress()
        self.cancel_event = threading.Event()
        self._target = target
        self._lock = lock
        self._thread = threading.Thread(target=self._run, name=f"memprobe-{name}", daemon=True)

    def start(self) -> Job:
        with _LIVE_LOCK:
            _LIVE.add(self)
        if self._lock is not None and self._lock.held_by() is not None:
            # Said at once: the page draws the job right after this, and a queued tab polls
            # only every few seconds, so "starting…" would stand for that long with no reason.
            self._say_waiting()
        self._thread.start()
        return self

    def cancel(self) -> None:
        """Ask the job to stop at its next check (it keeps what it has so far)."""
        self.cancel_event.set()
        self.progress.set(message="cancelling… (stops after the item in flight)")

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        try:
            self._body()
        finally:
            with _LIVE_LOCK:
                _LIVE.discard(self)

    def _body(self) -> None:
        progress = self.progress
        try:
            if self._lock is not None and not self._wait_for_lock():
                if self._on_cancel_before_start is not None:
                    self._on_cancel_before_start()
                progress.finish(None, state="cancelled", message="cancelled while waiting")
                return
            progress.set(state="running", message="running…")
            try:
                with watching(progress.live):  # its models publish what they write
                    result = self._target(progress, self.cancel_event)
            finally:
                if self._lock is not None:
                    self._lock.release()
            if self.cancel_event.is_set():
                progress.finish(result, state="cancelled", message="cancelled; kept what was done")
            else:
                progress.finish(result, state="finished", message="finished")
        except Exception as exc:  # the page shows the message; the log keeps the traceback
            logger.exception("job %s failed", self.name)
            progress.fail(f"{type(exc).__name__}: {exc}")

    def _wait_for_lock(self) -> bool:
        assert self._lock is not None
        while not self._lock.acquire(self.name, timeout=0.25, session=self.session):
            if self.cancel_event.is_set():
                return False
            self._say_waiting()
        return True

    def _say_waiting(self) -> None:
        """Mark the job waiting, naming the job that holds the models."""
        assert self._lock is not None
        held = self._lock.held_by()
        what = (
            describe_holder(held, session=self.session, now=time.time())
            if held is not None
            else "it is ending"
        )
        self.progress.set(
            state="waiting",
            message=f"waiting for another job to finish ({what}); models run one job at a time",
        )


# --- running a probe or comparison with everything recorded --------------------------------------


def recorded_methods_job(
    store: Store,
    run_id: int,
    models: ModelSet,
    *,
    count: Literal["candidates", "units"] = "units",
    runner: Runner = run_method,
    plan: Mapping[str, int] | None = None,
) -> JobFunction:
    """A job function running a recorded probe or comparison (``memprobe_core.runs.probe.run_probe``).

    Progress: ``items`` receives one dict per scored candidate (the candidate's fields plus
    ``method``); ``data`` holds ``results`` ({method: AttackResult}, cancelled partial bests
    included), ``errors`` ({method: message}) and ``round`` (the round in flight); ``done``
    counts candidates or units (``count``), so set ``total`` to match. ``plan`` ({method:
    candidates it will score}) gives the ETA a model of the remaining work
    (:class:`~memprobe_core.runs.eta.EtaModel`); without it the ETA is the plain rate's.

    Returns:
        The job function; its result is ``{method: AttackResult}``. When every unit failed it
        raises, so the job shows ``failed`` with the errors.
    """

    def job(progress: Progress, cancel: threading.Event) -> dict[str, AttackResult]:
        results: dict[str, AttackResult] = {}
        errors: dict[str, str] = {}
        if plan is not None:
            progress.eta_model = EtaModel(plan, cores=cpu_cores())

        def on_unit(outcome: UnitOutcome) -> None:
            progress.track(lambda eta, now: eta.finish(outcome.unit.method, now))
            if outcome.result is not None:
                results[outcome.unit.method] = outcome.result
            if outcome.error is not None:
                errors[outcome.unit.method] = outcome.error
            progress.update_data(results=dict(results), errors=dict(errors))
            if count == "units":
                progress.advance()

        outcomes = run_probe(
            store,
            run_id,
            models,
            cancel=cancel,
            runner=runner,
            on_unit=on_unit,
            on_event=lambda unit: _progress_events(progress, unit.method, count),
        )
        if outcomes and not results:
            raise RuntimeError("; ".join(f"{m}: {e}" for m, e in errors.items()))
        return results

    return job


def _progress_events(progress: Progress, method: str, count: str) -> EventCallback:
    """An event callback that shows one method's events as rows and a status line."""
    label = method_label(method)
    progress.track(lambda eta, now: eta.start(method, now))  # called as the unit starts

    def on_event(event: AttackEvent) -> None:
        if isinstance(event, CandidateScored):
            cand = event.candidate
            progress.track(lambda eta, now: eta.step(method, now))
            progress.add_item({"method": method, **asdict(cand)})
            if count == "candidates":
                progress.advance()
            progress.set(message=f"{label}: round {cand.round}, candidate {cand.index} scored")
        elif isinstance(event, RoundStarted):
            # A round's candidates are answered as one batch: costed as a batch of n, not n
            # candidates one by one (memprobe_core.runs.eta).
            progress.track(lambda eta, now: eta.round_started(method, now, event.n))
            progress.update_data(round=event.round)
            # The event's own size, whatever the method (the CLI's live table says the same).
            what = f"{event.n} candidate" + ("" if event.n == 1 else "s")
            progress.set(message=f"{label}: round {event.round}: generating and scoring {what}…")
        elif isinstance(event, SearchStep):
            # A search's steps are its work until it scores its one candidate.
            progress.track(lambda eta, now: _search_step(eta, method, event.steps, now))
            steps = progress.snapshot_data("search_losses") or ()
            progress.update_data(search_losses=(*steps, (event.step, event.loss, event.step_loss)))
            progress.set(
                message=f"{label}: search step {event.step}/{event.steps}, loss {event.loss:.3f}"
            )

    return on_event


def _search_step(eta: EtaModel, method: str, steps: int, now: float) -> None:
    eta.replan(method, steps + 1)  # the search's steps, then its one scored candidate
    eta.step(method, now)
