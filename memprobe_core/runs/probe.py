"""What a run is (``RunConfig``) and the short runs: one snippet through one or more methods.

``memprobe probe``, the dashboard's Probe page (one method) and its Compare page (several) all
record their run with :func:`start_probe` and run it with :func:`run_probe`; audits use
:mod:`memprobe_core.audit.audit`. Both run every unit through
:func:`memprobe_core.runs.unit.run_unit`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from memprobe_core.attacks import run_method
from memprobe_core.attacks.events import EventCallback
from memprobe_core.attacks.model_set import ModelSet
from memprobe_core.attacks.options import AttackOptions
from memprobe_core.config import DEFAULT_PREFIX_RATIO
from memprobe_core.runs.unit import DEFAULT_SPLIT, Runner, SplitSpec, UnitOutcome, run_unit
from memprobe_core.snippets.split import Snippet
from memprobe_core.store import Store, UnitKey
from memprobe_core.store.owner import owner_record


@dataclass(frozen=True)
class RunConfig:
    """Everything needed to redo or resume a run; stored as the run's ``config`` JSON.

    Attributes:
        methods / lengths: the unit grid (× the run's snippets).
        options: the methods' options.
        models: model names by role (``ModelNames.to_dict()`` for audits, so a resume can
            load them again; display labels for dashboard runs).
        split: how snippets are cut.
        dataset: where the snippets came from (source, rejected rows), for the record.
    """

    methods: tuple[str, ...]
    lengths: tuple[int, ...]
    options: AttackOptions = field(default_factory=AttackOptions)
    models: dict[str, Any] = field(default_factory=dict)
    split: SplitSpec = DEFAULT_SPLIT
    dataset: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "methods": list(self.methods),
            "lengths": list(self.lengths),
            "options": self.options.to_dict(),
            "models": dict(self.models),
            "split_tokenizer": self.split.tokenizer,
            "prefix_ratio": self.split.prefix_ratio,
            "dataset": dict(self.dataset),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunConfig:
        """Read a stored config, including the older shapes (``method``/``length`` singular)."""
        methods = data.get("methods") or ([data["method"]] if data.get("method") else [])
        lengths = data.get("lengths") or ([data["length"]] if data.get("length") else [])
        return cls(
            methods=tuple(methods),
            lengths=tuple(int(n) for n in lengths),
            options=AttackOptions.from_dict(dict(data.get("options") or {})),
            models=dict(data.get("models") or {}),
            split=SplitSpec(
                tokenizer=data.get("split_tokenizer", "model"),
                prefix_ratio=float(data.get("prefix_ratio", DEFAULT_PREFIX_RATIO)),
            ),
            dataset=dict(data.get("dataset") or {}),
        )


def start_probe(
    store: Store,
    snippet: Snippet,
    methods: Sequence[str],
    length: int,
    models: ModelSet,
    options: AttackOptions,
    *,
    kind: Literal["probe", "compare"] = "probe",
    model_names: dict[str, Any] | None = None,
    split_spec: SplitSpec = DEFAULT_SPLIT,
    title: str = "",
) -> int:
    """Record a probe (or comparison) of one snippet, its units pending, and return its id."""
    config = RunConfig(
        methods=tuple(methods),
        lengths=(length,),
        options=options,
        models=model_names or {},
        split=split_spec,
    )
    units = [UnitKey(snippet.id, method, length) for method in methods]
    # The owner: a probe killed by SIGKILL then reads as interrupted, not running forever.
    manifest = {"models": models.manifest(), "owner": owner_record()}
    return store.create_run(
        kind,
        config=config.to_dict(),
        manifest=manifest,
        title=title,
        snippets=[snippet],
        units=units,
    )


def run_probe(
    store: Store,
    run_id: int,
    models: ModelSet,
    *,
    on_event: Callable[[UnitKey], EventCallback | None] | None = None,
    on_unit: Callable[[UnitOutcome], None] | None = None,
    cancel: threading.Event | None = None,
    runner: Runner = run_method,
) -> list[UnitOutcome]:
    """Run the pending units of a probe or comparison, one after the other.

    A failing method is recorded and the next one still runs; a cancel keeps the partial best
    of the unit in flight as ``cancelled`` and runs no further unit. The run ends ``finished``,
    ``cancelled`` or ``failed`` (every unit failed).

    Args:
        on_event: given a unit, returns the callback for its events (or ``None``).
        on_unit: called with each unit's outcome as it ends.

    Raises:
        KeyboardInterrupt: the unit in flight is back to ``pending``; the run is ``interrupted``.
    """
    config = RunConfig.from_dict(store.get_run(run_id)["config"])
    snippets = {s.id: s for s in store.samples(run_id)}
    outcomes: list[UnitOutcome] = []
    try:
        for row in store.units(run_id, status="pending"):
            if cancel is not None and cancel.is_set():
                break
            unit = row["key"]
            outcome = run_unit(
                store,
                run_id,
                unit,
                snippets[unit.snippet_id],
                models,
                config.options,
                split_spec=config.split,
                on_event=on_event(unit) if on_event else None,
                cancel=cancel,
                on_cancel="keep",
                runner=runner,
            )
            outcomes.append(outcome)
            if on_unit is not None:
                on_unit(outcome)
    except KeyboardInterrupt:
        store.set_run_status(run_id, "interrupted")
        raise
    store.set_run_status(run_id, _probe_status(outcomes, cancel))
    return outcomes


def _probe_status(outcomes: list[UnitOutcome], cancel: threading.Event | None) -> str:
    if cancel is not None and cancel.is_set():
        return "cancelled"
    if outcomes and all(o.status == "error" for o in outcomes):
        return "failed"
    return "finished"
