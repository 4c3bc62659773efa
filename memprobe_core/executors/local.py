"""The local executor: an audit's units one at a time in this process (the default)."""

from __future__ import annotations

from typing import Any

from memprobe_core.attacks.model_set import ModelSet
from memprobe_core.executors.base import AuditWork
from memprobe_core.runs.unit import prefetch_units, run_unit

# Units whose batched work (``MethodSpec.prefetch``) is done together before they run: a
# teacher-forced pass over 16 snippets costs less than half of 16 passes on a CPU, and an
# interrupted audit has computed at most this many units ahead for nothing.
PREFETCH_WINDOW = 16


class LocalExecutor:
    """Runs the units one at a time in this process (the default), each window of
    ``prefetch_window`` units prefetched together first (:func:`prefetch_units`)."""

    name = "local"

    def __init__(self, prefetch_window: int = PREFETCH_WINDOW) -> None:
        self.prefetch_window = max(1, prefetch_window)

    def run(self, work: AuditWork, models: ModelSet | None = None) -> None:
        """Run ``work.units`` in order with ``models`` (loaded by ``work.models_factory`` if None)."""
        if models is None:
            models = work.models_factory(work.config)
        work.on_models(_manifest(models))
        config = work.run_config
        extra = {} if work.runner is None else {"runner": work.runner}
        for position, unit in enumerate(work.units):
            if work.cancelled():
                return
            if position % self.prefetch_window == 0:
                window = work.units[position : position + self.prefetch_window]
                prefetch_units(
                    window, work.snippets, models, config.options, split_spec=config.split
                )
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
