"""What every executor shares: the work of one audit session and the executor contract.

:func:`memprobe_core.audit.run_audit` does the bookkeeping every executor shares (stale units
reset, the run's status, progress, the manifest) and hands the pending units to an
:class:`Executor`. Every executor runs each unit through the one unit runner
(:func:`memprobe_core.runs.unit.run_unit`), and only the process that owns the SQLite store
writes to it, so the never-lost guarantees are the same whichever runs the units.

The executors themselves: :mod:`.local` (this process) and :mod:`.ray` (a Ray cluster);
:func:`memprobe_core.executors.make_executor` picks one by name.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from memprobe_core.attacks.events import EventCallback
from memprobe_core.attacks.model_set import ModelSet
from memprobe_core.runs.probe import RunConfig
from memprobe_core.runs.unit import Runner, UnitOutcome
from memprobe_core.snippets.split import Snippet
from memprobe_core.store import Store, UnitKey


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
