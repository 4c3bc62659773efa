"""The local executor: an audit's units one at a time in this process (the default)."""

from __future__ import annotations

from typing import Any

from memprobe_core.attacks.model_set import ModelSet
from memprobe_core.executors.base import AuditWork
from memprobe_core.runs.unit import run_unit


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
