"""Where an audit's pending units run: this process (``local``) or a Ray cluster (``ray``).

:func:`memprobe_core.audit.run_audit` does the bookkeeping every executor shares (stale units
reset, the run's status, progress, the manifest) and hands the pending units to an
:class:`Executor`. Every executor runs each unit through the one unit runner
(:func:`memprobe_core.audit.unit.run_unit`), and only the process that owns the SQLite store
writes to it, so the never-lost guarantees are the same whichever runs the units.

The Ray executor lives in :mod:`memprobe_core.audit.ray_executor`; Ray is imported only when it
is used, so memprobe works without Ray installed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from memprobe_core.attacks.common import ModelSet
from memprobe_core.attacks.events import EventCallback
from memprobe_core.audit.runs import RunConfig
from memprobe_core.audit.unit import Runner, UnitOutcome, run_unit
from memprobe_core.data import Snippet
from memprobe_core.errors import UsageError
from memprobe_core.store import Store, UnitKey

EXECUTORS = ("local", "ray")


@dataclass
class AuditWork:
    """The pending units of one audit session and everything needed to run and record them.

    Attributes:
        store / run_id: where the units are recorded (the driver's store).
        config: the run's stored config (raw dict: a Ray worker loads its models from it).
        units: the pending units, in run order.
        snippets: the run's snippets by id.
        models_factory: loads a model set from ``config`` (where the units run).
        on_start / on_end: called (in this process) as a unit starts and once it is recorded.
        on_models: receives the loaded models' manifest once they are loaded.
        on_event: also receives every method event, after the store has recorded it.
        cancel: set it to stop; units in flight go back to ``pending``.
        runner: the method entry point.
    """

    store: Store
    run_id: int
    config: dict[str, Any]
    units: list[UnitKey]
    snippets: dict[str, Snippet]
    models_factory: Callable[[dict[str, Any]], ModelSet]
    on_start: Callable[[UnitKey], None]
    on_end: Callable[[UnitOutcome], None]
    on_models: Callable[[dict[str, Any]], None]
    on_event: EventCallback | None = None
    cancel: threading.Event | None = None
    runner: Runner | None = None

    @property
    def run_config(self) -> RunConfig:
        """The config as a :class:`RunConfig` (options, split)."""
        return RunConfig.from_dict(self.config)

    def cancelled(self) -> bool:
        """Whether ``cancel`` is set."""
        return self.cancel is not None and self.cancel.is_set()


class Executor(Protocol):
    """Runs an audit session's pending units (see the module docstring).

    ``run`` returns when every unit is recorded or ``cancel`` is set (units in flight put back
    to ``pending``). On Ctrl-C it puts the units in flight back to ``pending`` and re-raises
    ``KeyboardInterrupt``.
    """

    name: str

    def run(self, work: AuditWork, models: ModelSet | None = None) -> None: ...


class LocalExecutor:
    """Runs the units one at a time in this process (the default, unchanged behaviour)."""

    name = "local"

    def run(self, work: AuditWork, models: ModelSet | None = None) -> None:
        """Run ``work.units`` in order with ``models`` (loaded by ``work.models_factory`` if None)."""
        if models is None:
            models = work.models_factory(work.config)
        work.on_models(_manifest(models))
        config = work.run_config
        extra = {} if work.runner is None else {"runner": work.runner}
        for unit in work.units:
            if work.cancelled():
                return
            work.on_start(unit)
            # run_unit puts the unit back to pending itself on Ctrl-C, then re-raises.
            outcome = run_unit(
                work.store,
                work.run_id,
                unit,
                work.snippets[unit.snippet_id],
                models,
                config.options,
                split_spec=config.split,
                on_event=work.on_event,
                cancel=work.cancel,
                on_cancel="requeue",
                **extra,
            )
            if outcome.status == "pending":  # cancelled mid-unit: back in the queue
                return
            work.on_end(outcome)


def _manifest(models: ModelSet) -> dict[str, Any]:
    try:
        return models.manifest()
    except Exception:
        return {}


def make_executor(name: str = "local", **ray_options: Any) -> Executor:
    """An executor by name: ``local``, or ``ray`` with :class:`RayOptions` fields as keywords.

    Raises:
        UsageError: an unknown name, Ray options for ``local``, or ``ray`` without Ray
            installed (the message gives the install command).
    """
    if name == "local":
        given = [k for k, v in ray_options.items() if v is not None]
        if given:
            flags = ", ".join(
                "--" + ("ray-address" if k == "address" else k.replace("_", "-")) for k in given
            )
            raise UsageError(f"{flags} only apply with --executor ray; add it or drop them")
        return LocalExecutor()
    if name == "ray":
        # On demand: ray_executor builds on this module (AuditWork), so a top-level import
        # would be a cycle; and a local audit never needs it.
        from memprobe_core.audit.ray_executor import RayExecutor, RayOptions, import_ray

        import_ray()  # fail now, before an audit is recorded that could not run
        return RayExecutor(RayOptions(**{k: v for k, v in ray_options.items() if v is not None}))
    raise UsageError(f"executor {name!r} is unknown; choose from {list(EXECUTORS)}")


__all__ = ["EXECUTORS", "AuditWork", "Executor", "LocalExecutor", "make_executor"]
