"""Run an audit's units on a Ray cluster: one actor per worker, the store on the driver.

Each worker is a Ray actor that loads its model set once (``models_factory(config)``, the same
loading as the local path) and runs the units it is given through the one unit runner
(:func:`memprobe_core.runs.unit.run_unit`) against a :class:`RecordingStore`: an in-memory
recorder, because the SQLite store lives on the driver and only the driver writes it. A unit's
scored candidates and its outcome come back to the driver when the unit ends, and the driver
records them with the real store: candidates first, then the unit's end, so a unit is ``done``
only once all of its candidates are committed.

Faults:

- A worker that dies (killed, out of memory, node lost) is replaced by a new actor; its unit
  goes back to ``pending`` and is run again (on whichever worker is free). A unit whose
  workers died ``max_attempts`` times is recorded as failed with the error.
- A worker takes units only once its models are loaded (a slow loader holds no unit back). One
  whose models fail to load takes none: its error is logged and shown in the worker list, and
  the audit goes on on the others, so no unit is failed for a broken node. When no worker can
  load them, the audit stops with a ``ModelError`` giving the load error; its units stay
  ``pending`` (resumable once the models load).
- Ctrl-C on the driver (or the ``cancel`` event) kills the workers and puts the units in
  flight back to ``pending``; ``memprobe resume`` (on Ray or locally) redoes them.

Batched methods (those with a ``prefetch``, e.g. ``--verbatim-only``) run as the local
executor runs them: a worker is given a window of up to ``prefetch_window`` such units, computes
their batched passes with the first unit's call (:func:`~memprobe_core.runs.unit.prefetch_units`),
then runs them one unit per call as before, so each unit is still recorded as it ends. A window
is at most an equal share of the units left among the workers, so no worker holds units back
while another is idle at the end. The units of a window not yet sent go back to the queue when
their worker dies; they were never marked running.

Ray is imported here only, when an audit runs with ``--executor ray``.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from memprobe_core.attacks.events import (
    AttackEvent,
    CandidateScored,
    EventCallback,
    RoundFinished,
)
from memprobe_core.attacks.model_set import ModelSet
from memprobe_core.attacks.options import AttackOptions
from memprobe_core.attacks.result import AttackResult, Candidate
from memprobe_core.errors import OptionError, UsageError
from memprobe_core.executors.base import AuditWork
from memprobe_core.executors.local import PREFETCH_WINDOW
from memprobe_core.models.base import ModelError
from memprobe_core.runs.unit import (
    SplitSpec,
    UnitOutcome,
    batched_method,
    error_text,
    prefetch_units,
    run_unit,
)
from memprobe_core.snippets.split import Snippet
from memprobe_core.store import Store, UnitKey, UnitStatus

log = logging.getLogger(__name__)

RAY_REQUIREMENT = "ray==2.60.0"
INSTALL_HINT = f'pip install "{RAY_REQUIREMENT}"'
# How often the driver wakes from waiting on workers to notice Ctrl-C or the cancel event.
_POLL_S = 0.5


@dataclass(frozen=True)
class RayOptions:
    """How an audit runs on Ray.

    Attributes:
        address: ``auto`` (the cluster this machine joined with ``ray start``), ``HOST:PORT``
            of a head node, or ``None``: start a Ray instance on 127.0.0.1 for this audit.
        workers: actors to start (``None``: as many as the cluster's CPUs/GPUs fit).
        gpus_per_worker / cpus_per_worker: resources each actor reserves.
        max_attempts: times a unit is tried when its worker dies before it is recorded failed.
        prefetch_window: units of a batched method (one with a ``prefetch``) a worker is given
            together, their passes batched ahead (as the local executor's windows); 1: none.
    """

    address: str | None = None
    workers: int | None = None
    gpus_per_worker: float = 0.0
    cpus_per_worker: float = 1.0
    max_attempts: int = 3
    prefetch_window: int = PREFETCH_WINDOW

    def __post_init__(self) -> None:
        if self.workers is not None and self.workers < 1:
            raise OptionError("workers", self.workers, "give 1 or more")
        for name in ("gpus_per_worker", "cpus_per_worker"):
            if getattr(self, name) < 0:
                raise OptionError(name, getattr(self, name), "give 0 or more")
        if self.max_attempts < 1:
            raise OptionError("max_attempts", self.max_attempts, "give 1 or more")
        if self.prefetch_window < 1:
            raise OptionError("prefetch_window", self.prefetch_window, "give 1 or more")


def import_ray() -> Any:
    """The ``ray`` module, or a ``UsageError`` saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise UsageError(
            f"the ray executor needs Ray, which is not installed: {INSTALL_HINT} "
            "(or use the local executor)"
        ) from exc
    return ray


class RecordingStore:
    """A :class:`~memprobe_core.runs.unit.UnitStore` that keeps a unit's record in memory.

    A worker runs :func:`run_unit` against it; the events it kept (scored candidates and round
    bests, in order) go back to the driver with the unit's outcome. The unit's state changes are
    not kept: the driver marked the unit running when it sent it, and the outcome says how it
    ended.
    """

    def __init__(self) -> None:
        self.events: list[AttackEvent] = []

    def mark_unit_running(self, run_id: int, unit: UnitKey) -> None:
        """Nothing to do: the driver marked it when it dispatched the unit."""

    def recorder(self, run_id: int, unit: UnitKey) -> EventCallback:
        """Keep the events the driver's store records (``Store.recorder`` reads the same)."""

        def keep(event: AttackEvent) -> None:
            if isinstance(event, CandidateScored | RoundFinished):
                self.events.append(event)

        return keep

    def finish_unit(self, run_id: int, unit: UnitKey, result: AttackResult) -> None:
        """Carried by the outcome."""

    def cancel_unit(self, run_id: int, unit: UnitKey, result: AttackResult) -> None:
        """Carried by the outcome."""

    def fail_unit(self, run_id: int, unit: UnitKey, error: str) -> None:
        """Carried by the outcome."""

    def reset_unit(self, run_id: int, unit: UnitKey, *, if_status: str | None = None) -> None:
        """Carried by the outcome."""


@dataclass
class UnitReport:
    """What a worker sends back for one unit (picklable: no exception object).

    Attributes:
        load_failed: the worker has no models (``error`` says why); it takes no more units
            (the driver gives units only to loaded workers, so this is a safety net).
        prefetched: units of the window this call carried that a method's prefetch computed
            ahead (0 for a call that carried none).
    """

    unit: UnitKey
    status: UnitStatus
    result: AttackResult | None = None
    error: str | None = None
    events: list[AttackEvent] = field(default_factory=list)
    worker: str = ""
    load_failed: bool = False
    prefetched: int = 0


class UnitWorker:
    """The body of a worker actor: models loaded once, then one unit per call."""

    def __init__(self, config: dict[str, Any], models_factory: Any, runner: Any) -> None:
        self.name = f"{socket.gethostname()}:{os.getpid()}"
        self.runner = runner
        self.models: ModelSet | None = None
        self.load_error: str | None = None
        try:
            self.models = models_factory(config)
        except Exception as exc:
            self.load_error = error_text(exc)
            log.warning("worker %s could not load its models: %s", self.name, self.load_error)
        _warm_up()

    def info(self) -> dict[str, Any]:
        """The worker's name, load error and models' manifest."""
        manifest: dict[str, Any] = {}
        if self.models is not None:
            try:
                manifest = self.models.manifest()
            except Exception:
                manifest = {}
        return {"name": self.name, "error": self.load_error, "manifest": manifest}

    def run(
        self,
        run_id: int,
        unit: UnitKey,
        snippet: Snippet,
        options: AttackOptions,
        split_spec: SplitSpec,
        window: tuple[tuple[UnitKey, Snippet], ...] = (),
    ) -> UnitReport:
        """Run one unit with this worker's models; the record comes back in the report.

        ``window``: the units this worker is given together (``unit`` first), whose batched
        passes are computed before ``unit`` runs; the others come in the next calls.
        """
        if self.models is None:
            return UnitReport(
                unit,
                "error",
                load_failed=True,
                worker=self.name,
                error=f"worker {self.name} could not load its models: {self.load_error}",
            )
        prefetched = 0
        if window:
            units = [key for key, _ in window]
            snippets = {snippet.id: snippet for _, snippet in window}
            prefetched = prefetch_units(
                units, snippets, self.models, options, split_spec=split_spec
            )
        store = RecordingStore()
        extra = {} if self.runner is None else {"runner": self.runner}
        outcome = run_unit(
            store,
            run_id,
            unit,
            snippet,
            self.models,
            options,
            split_spec=split_spec,
            on_cancel="requeue",
            **extra,
        )
        return UnitReport(
            unit,
            outcome.status,
            outcome.result,
            outcome.error,
            store.events,
            worker=self.name,
            prefetched=prefetched,
        )


def _warm_up() -> None:
    """Pay the scorers' lazy imports (nltk, the PII patterns) before the worker says it is ready.

    The driver gives units only to ready workers; without this, each worker's first unit would
    also carry seconds of imports on a busy machine.
    """
    try:
        from memprobe_core import metrics, pii

        metrics.rouge_tokens("warming up the scorer", stemmer=True)
        pii.pii_report("mail a@b.example", "mail a@b.example")
    except Exception:
        log.debug("worker warm-up failed", exc_info=True)


def record_report(
    store: Store, run_id: int, report: UnitReport, on_event: EventCallback | None = None
) -> UnitOutcome:
    """Write a worker's report with the driver's store: candidates, then the unit's end.

    The candidates go in one transaction (one commit per unit, not one per candidate: the
    driver writes for every worker), with the round-best flags the ``RoundFinished`` events
    set, as ``Store.recorder`` would have left them.
    """
    unit = report.unit
    if report.status in ("done", "cancelled") and report.result is not None:
        store.record_candidates(run_id, unit, trace_of(report.events))
        if on_event is not None:
            for event in report.events:
                on_event(event)
        if report.status == "done":
            store.finish_unit(run_id, unit, report.result)
        else:
            store.cancel_unit(run_id, unit, report.result)
        return UnitOutcome(unit, report.status, report.result)
    if report.status == "error":
        log.warning("run %d: unit %s failed on %s: %s", run_id, unit, report.worker, report.error)
        store.fail_unit(run_id, unit, report.error or "unknown error")
        return UnitOutcome(unit, "error", error=report.error)
    store.reset_unit(run_id, unit)  # cancelled on the worker: back in the queue
    return UnitOutcome(unit, "pending")


def trace_of(events: list[AttackEvent]) -> list[Candidate]:
    """The scored candidates of ``events`` in order, each round's best flagged as recorded live."""
    candidates = [e.candidate for e in events if isinstance(e, CandidateScored)]
    for event in events:
        if isinstance(event, RoundFinished) and event.best is not None:
            for candidate in candidates:
                if candidate.round == event.best.round:
                    candidate.is_round_best = candidate.index == event.best.index
    return candidates


@dataclass
class WorkerState:
    """One worker actor as the driver sees it (for progress displays).

    Attributes:
        index: the actor's number in this session (a replacement gets a new one).
        state: ``starting``, ``running``, ``idle``, ``died``, ``no models`` or ``stopped``.
        unit: the unit it is running (``running`` only).
        units: units it ended (done or failed).
        prefetched: units whose passes it computed ahead in batches.
    """

    index: int
    state: str = "starting"
    unit: str = ""
    units: int = 0
    prefetched: int = 0
    since: float = field(default_factory=time.monotonic)

    def row(self) -> dict[str, Any]:
        """A display row with the worker's units per minute since it started."""
        minutes = max(time.monotonic() - self.since, 1e-6) / 60
        return {
            "worker": self.index,
            "state": self.state,
            "unit": self.unit,
            "units": self.units,
            "batched": self.prefetched,
            "units/min": round(self.units / minutes, 2),
        }


class RayExecutor:
    """Runs an audit's units on Ray actors (see the module docstring)."""

    name = "ray"

    def __init__(self, options: RayOptions | None = None) -> None:
        self.options = options or RayOptions()
        self._driver: _Driver | None = None

    def run(self, work: AuditWork, models: ModelSet | None = None) -> None:
        """Run ``work.units`` on the workers; ``models`` is ignored (each worker loads its own)."""
        ray = import_ray()
        started_here = _connect(ray, self.options)
        try:
            self._driver = _Driver(ray, self.options, work)
            self._driver.run()
        finally:
            if started_here:
                ray.shutdown()

    def worker_states(self) -> list[dict[str, Any]]:
        """The workers of the session running now (or last run): one display row each."""
        driver = self._driver
        return [] if driver is None else [state.row() for state in list(driver.states.values())]


def _connect(ray: Any, options: RayOptions) -> bool:
    """Join the cluster (or start a local instance); True when this call started Ray."""
    if ray.is_initialized():
        return False
    if options.address:
        log.info("joining the Ray cluster at %s", options.address)
        try:
            ray.init(address=options.address, log_to_driver=False)
        except ConnectionError as exc:
            raise OptionError(
                "address",
                options.address,
                f"no Ray cluster answers there ({exc}); start one with `ray start --head`",
            ) from exc
        return False
    log.info("starting a local Ray instance on 127.0.0.1")
    ray.init(
        address="local", _node_ip_address="127.0.0.1", include_dashboard=False, log_to_driver=False
    )
    return True


def worker_count(options: RayOptions, resources: dict[str, float], units: int) -> int:
    """Workers to start: as asked, or as many as the cluster's CPUs (and GPUs) fit; ≤ units."""
    if options.workers is not None:
        return max(1, min(options.workers, units))
    fits = []
    if options.cpus_per_worker > 0:
        fits.append(int(resources.get("CPU", 1) // options.cpus_per_worker))
    if options.gpus_per_worker > 0:
        fits.append(int(resources.get("GPU", 0) // options.gpus_per_worker))
    return max(1, min([*fits, units]))


class _Driver:
    """One session's scheduling: idle workers take pending units; reports are recorded here."""

    def __init__(self, ray: Any, options: RayOptions, work: AuditWork) -> None:
        self.ray = ray
        self.options = options
        self.work = work
        self.queue: deque[UnitKey] = deque(work.units)
        self.attempts: dict[UnitKey, int] = {}
        self.in_flight: dict[Any, tuple[Any, UnitKey]] = {}
        self.idle: list[Any] = []
        # Units given to a worker in a window and not yet sent to it, by id() of the actor.
        self.assigned: dict[int, deque[UnitKey]] = {}
        self.actors: list[Any] = []
        self.states: dict[int, WorkerState] = {}  # by id() of the actor handle
        self.loading: dict[Any, Any] = {}  # info() ref -> actor still loading its models
        self.models_reported = False
        self.load_errors: list[str] = []
        self.actor_class = ray.remote(UnitWorker)
        config = work.run_config
        self.shared = (ray.put(config.options), ray.put(config.split))

    def run(self) -> None:
        """Start the workers and run every unit; on Ctrl-C/cancel the units in flight go back."""
        count = worker_count(self.options, self.ray.cluster_resources(), len(self.queue))
        self._check_fits(count)
        log.info(
            "audit %d: %d unit(s) on %d Ray worker(s)", self.work.run_id, len(self.queue), count
        )
        try:
            for _ in range(count):
                self._spawn()
            self._loop()
        except KeyboardInterrupt:
            self._requeue_in_flight()
            raise
        finally:
            for actor in self.actors:
                self.ray.kill(actor)
                state = self.states[id(actor)]
                if state.state in ("starting", "running", "idle"):
                    state.state, state.unit = "stopped", ""
        self._requeue_in_flight()  # cancelled: what was in flight goes back to pending

    def _loop(self) -> None:
        while (self._units_left() or self.in_flight) and not self.work.cancelled():
            self._dispatch()
            if not self.in_flight and not self.loading:  # units left, no worker with models
                raise ModelError(
                    "no Ray worker could load the models: "
                    + ("; ".join(dict.fromkeys(self.load_errors)) or "all died")
                )
            # A timeout, so that Ctrl-C and the cancel event are noticed while units run.
            waiting = [*self.in_flight, *self.loading]
            ready, _ = self.ray.wait(waiting, num_returns=1, timeout=_POLL_S)
            for ref in ready:
                if ref in self.loading:
                    self._loaded(ref)
                else:
                    self._collect(ref)

    def _spawn(self) -> None:
        """Start a worker; it takes units once its models are loaded (``_loaded``)."""
        name = f"memprobe-{os.getpid()}-{self.work.run_id}-{len(self.actors)}"
        actor = self.actor_class.options(
            name=name,
            num_cpus=self.options.cpus_per_worker,
            num_gpus=self.options.gpus_per_worker,
            max_restarts=0,
        ).remote(self.work.config, self.work.models_factory, self.work.runner)
        self.actors.append(actor)
        self.states[id(actor)] = WorkerState(len(self.actors) - 1)
        self.loading[actor.info.remote()] = actor

    def _loaded(self, ref: Any) -> None:
        """A worker finished loading: it takes units, or (no models) it takes none."""
        actor = self.loading.pop(ref)
        try:
            info = self.ray.get(ref)
        except self.ray.exceptions.RayActorError as exc:  # died loading (e.g. out of memory)
            log.warning("a Ray worker died loading its models: %s", _first_line(exc))
            self.load_errors.append(f"a worker died loading its models ({_first_line(exc)})")
            self._set_state(actor, "died")
            return
        if info["error"]:
            # Its units go to the other workers; it says why in the log and the worker list.
            log.warning("Ray worker %s could not load its models: %s", info["name"], info["error"])
            self.load_errors.append(info["error"])
            self.ray.kill(actor)
            self._set_state(actor, "no models")
            return
        if not self.models_reported:
            self.models_reported = True
            self.work.on_models(info["manifest"])
        self.idle.append(actor)
        self._set_state(actor, "idle")

    def _dispatch(self) -> None:
        store, run_id = self.work.store, self.work.run_id
        snippets = self.work.snippets
        for actor in list(self.idle):
            own = self.assigned.setdefault(id(actor), deque())
            window: tuple[tuple[UnitKey, Snippet], ...] = ()
            if not own:
                if not self.queue:
                    continue
                own.extend(self._take_window())
                if len(own) > 1:
                    window = tuple((key, snippets[key.snippet_id]) for key in own)
            self.idle.remove(actor)
            unit = own.popleft()
            self.attempts[unit] = self.attempts.get(unit, 0) + 1
            store.mark_unit_running(run_id, unit)  # drops candidates of an unfinished attempt
            self.work.on_start(unit)
            ref = actor.run.remote(run_id, unit, snippets[unit.snippet_id], *self.shared, window)
            self.in_flight[ref] = (actor, unit)
            self._set_state(actor, "running", unit)

    def _take_window(self) -> list[UnitKey]:
        """The next units for one worker: the next unit alone, or, for a batched method, it
        and the following units of batched methods, up to ``prefetch_window`` and an equal
        share of the units left among the live workers."""
        window = [self.queue.popleft()]
        if not batched_method(window[0].method):
            return window
        live = sum(s.state in ("starting", "running", "idle") for s in self.states.values())
        share = math.ceil((len(self.queue) + 1) / max(1, live))
        size = min(self.options.prefetch_window, share)
        while len(window) < size and self.queue and batched_method(self.queue[0].method):
            window.append(self.queue.popleft())
        return window

    def _units_left(self) -> bool:
        """Whether units wait to be sent: in the queue or given to a worker in a window."""
        return bool(self.queue) or any(self.assigned.values())

    def _give_back(self, actor: Any) -> None:
        """The units given to ``actor`` and not yet sent go back to the front of the queue."""
        own = self.assigned.pop(id(actor), deque())
        self.queue.extendleft(reversed(own))

    def _collect(self, ref: Any) -> None:
        actor, unit = self.in_flight.pop(ref)
        exceptions = self.ray.exceptions
        try:
            report: UnitReport = self.ray.get(ref)
        except exceptions.RayActorError as exc:  # the worker died (killed, OOM, node lost)
            self._worker_died(actor, unit, exc)
            return
        except exceptions.RayTaskError as exc:  # a failure outside run_unit (e.g. unpickling)
            report = UnitReport(unit, "error", error=_first_line(exc))
        self.states[id(actor)].units += 1
        self.states[id(actor)].prefetched += report.prefetched
        if report.load_failed:
            self.load_errors.append(report.error or "")
            self.ray.kill(actor)  # no models: it takes no more units
            self._give_back(actor)
            self._set_state(actor, "no models")
        else:
            self.idle.append(actor)
            self._set_state(actor, "idle")
        try:
            outcome = record_report(self.work.store, self.work.run_id, report, self.work.on_event)
        except KeyboardInterrupt:  # half-recorded: the next session redoes it
            self.work.store.reset_unit(self.work.run_id, unit, if_status="running")
            raise
        if outcome.status == "pending":
            self.queue.appendleft(unit)
        else:
            self.work.on_end(outcome)

    def _worker_died(self, actor: Any, unit: UnitKey, exc: BaseException) -> None:
        self._give_back(actor)
        attempts = self.attempts.get(unit, 0)
        message = f"the Ray worker running it died ({_first_line(exc)})"
        log.warning("run %d: unit %s, attempt %d: %s", self.work.run_id, unit, attempts, message)
        if attempts >= self.options.max_attempts:
            error = f"{message}; gave up after {attempts} attempt(s)"
            self.work.store.fail_unit(self.work.run_id, unit, error)
            self.work.on_end(UnitOutcome(unit, "error", error=error))
        else:
            # Nothing of the attempt reached the store (candidates come with the report).
            self.work.store.reset_unit(self.work.run_id, unit)
            self.queue.appendleft(unit)
        self.ray.kill(actor)
        self._set_state(actor, "died")
        self._spawn()  # keep the pool's size

    def _set_state(self, actor: Any, state: str, unit: UnitKey | None = None) -> None:
        worker = self.states[id(actor)]
        worker.state = state
        worker.unit = "" if unit is None else f"{unit.snippet_id} · {unit.method} · {unit.length}"

    def _requeue_in_flight(self) -> None:
        for _actor, unit in self.in_flight.values():
            self.work.store.reset_unit(self.work.run_id, unit, if_status="running")
        self.in_flight.clear()

    def _check_fits(self, count: int) -> None:
        resources = self.ray.cluster_resources()
        for key, each in (
            ("CPU", self.options.cpus_per_worker),
            ("GPU", self.options.gpus_per_worker),
        ):
            if each and count * each > resources.get(key, 0):
                log.warning(
                    "%d worker(s) × %g %s exceed the cluster's %g: some wait for resources",
                    count,
                    each,
                    key,
                    resources.get(key, 0),
                )


def _first_line(exc: BaseException) -> str:
    text = error_text(exc)
    return text.splitlines()[0][:300] if text else type(exc).__name__


__all__ = [
    "INSTALL_HINT",
    "RAY_REQUIREMENT",
    "RayExecutor",
    "RayOptions",
    "RecordingStore",
    "UnitReport",
    "UnitWorker",
    "WorkerState",
    "import_ray",
    "record_report",
    "trace_of",
    "worker_count",
]
