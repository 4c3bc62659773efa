"""The one unit runner: one (snippet, method, length) run against the store, start to end.

Every way of running a method — ``memprobe probe``, the dashboard's Probe and Compare jobs, and
audits (CLI, dashboard, resume) — goes through :func:`run_unit`, so splitting, event recording,
cancel handling, error recording and the unit's final state are the same everywhere:

=====================  =========================================================================
what happened          the unit afterwards
=====================  =========================================================================
method returned        ``done``, with its result (its candidates were recorded as scored), its
                       verbatim metrics and the snippet's membership signals
                       (:func:`memprobe_core.membership.measure.measure_result`)
method raised          ``error``, with ``"Type: message"`` (secrets redacted); the caller goes on
cancelled (keep)       ``cancelled``, with the partial best (shown, never counted in Table 1)
cancelled (requeue)    ``pending`` again, its partial candidates dropped (audits: resume redoes it)
Ctrl-C / SIGTERM       ``pending`` again, and the ``KeyboardInterrupt`` propagates to the caller
the store failed       left ``running`` (a resume redoes it), the ``sqlite3.Error`` propagates
=====================  =========================================================================
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from memprobe_core.attacks import registry, run_method
from memprobe_core.attacks.context import MethodContext
from memprobe_core.attacks.events import AttackEvent, EventCallback
from memprobe_core.attacks.model_set import ModelSet
from memprobe_core.attacks.options import AttackOptions
from memprobe_core.attacks.prepare import prepare_options
from memprobe_core.attacks.result import AttackResult
from memprobe_core.config import DEFAULT_PREFIX_RATIO
from memprobe_core.membership.measure import measure_result
from memprobe_core.option_fields import check_options, option
from memprobe_core.secrets import redact_secrets
from memprobe_core.snippets.split import Snippet, SplitSnippet, split
from memprobe_core.store import Store, StoreError, UnitKey, UnitStatus

log = logging.getLogger(__name__)

Runner = Callable[..., AttackResult]

OnCancel = Literal["keep", "requeue"]


class UnitStore(Protocol):
    """What :func:`run_unit` records a unit into.

    :class:`~memprobe_core.store.Store` is the one used everywhere on the machine that owns the
    SQLite file; a Ray worker passes an in-memory recorder instead and sends what it recorded
    back to the driver, which writes it with the real store
    (:mod:`memprobe_core.executors.ray`).
    """

    def mark_unit_running(self, run_id: int, unit: UnitKey) -> None: ...

    def recorder(self, run_id: int, unit: UnitKey) -> EventCallback: ...

    def finish_unit(self, run_id: int, unit: UnitKey, result: AttackResult) -> None: ...

    def cancel_unit(self, run_id: int, unit: UnitKey, result: AttackResult) -> None: ...

    def fail_unit(self, run_id: int, unit: UnitKey, error: str) -> None: ...

    def reset_unit(self, run_id: int, unit: UnitKey, *, if_status: str | None = None) -> None: ...


# How snippets are cut: by the victim's tokens (the paper) or by whitespace words.
SplitTokenizer = Literal["model", "whitespace"]


@dataclass(frozen=True)
class SplitSpec:
    """How snippets are cut into prefix and suffix (docs/method.md §1).

    Attributes:
        tokenizer: ``model`` (the victim's tokenizer, as the paper) or ``whitespace``.
        prefix_ratio: the prefix's share of each length.
    """

    tokenizer: SplitTokenizer = option(
        "model",
        help="cut snippets by the victim's tokens (model, as the paper) or by whitespace words",
        flag="--split-tokenizer",
    )
    prefix_ratio: float = option(
        DEFAULT_PREFIX_RATIO,
        help="prefix share of each split",
        low=0,
        low_open=True,
        high=1,
        high_open=True,
        example="0.33",
        flag="--prefix-ratio",
        metavar="R",
    )

    def __post_init__(self) -> None:
        check_options(self)

    def cut(
        self, snippet: Snippet, length: int, models: ModelSet, *, bos_in_prefix: bool = False
    ) -> SplitSnippet:
        """``snippet`` cut at ``length`` tokens with the victim's tokenizer (or whitespace);
        ``bos_in_prefix``: the reference code's convention (``AttackOptions.bos_in_prefix``)."""
        victim_tokenizer = getattr(models.victim, "tokenizer", None)
        use_model = self.tokenizer == "model" and victim_tokenizer is not None
        return split(
            snippet,
            victim_tokenizer if use_model else "whitespace",
            length,
            self.prefix_ratio,
            bos_in_prefix=bos_in_prefix,
        )


DEFAULT_SPLIT = SplitSpec()  # frozen: safe to share as a default


@dataclass(frozen=True)
class UnitOutcome:
    """How :func:`run_unit` ended.

    Attributes:
        unit: the unit run.
        status: the unit's status in the store now.
        result: the method's result (``done`` and ``cancelled``; ``None`` otherwise).
        error: the recorded error text (``error`` only).
        exception: the exception behind ``error``, for a caller that maps it to an exit code.
    """

    unit: UnitKey
    status: UnitStatus
    result: AttackResult | None = None
    error: str | None = None
    exception: BaseException | None = None


def run_unit(
    store: UnitStore,
    run_id: int,
    unit: UnitKey,
    snippet: Snippet,
    models: ModelSet,
    options: AttackOptions,
    *,
    split_spec: SplitSpec = DEFAULT_SPLIT,
    on_event: EventCallback | None = None,
    cancel: threading.Event | None = None,
    on_cancel: OnCancel = "keep",
    runner: Runner = run_method,
) -> UnitOutcome:
    """Run one unit of ``run_id``: split, run the method, record every event, record the end.

    Args:
        store / run_id / unit: where the unit is recorded (the unit must exist in the run).
        snippet: the unit's snippet (its id is ``unit.snippet_id``).
        models / options: what the method runs with.
        split_spec: how the snippet is cut.
        on_event: also receives every method event, after the store has recorded it.
        cancel: set it to stop the method after the candidate in flight.
        on_cancel: ``keep`` stores the partial result as ``cancelled`` (probes, comparisons);
            ``requeue`` puts the unit back to ``pending`` for a resume (audits).
        runner: the method entry point (tests pass their own).

    Returns:
        A :class:`UnitOutcome`; a failing method never raises here.

    Raises:
        KeyboardInterrupt: after putting the unit back to ``pending``.
    """
    record = store.recorder(run_id, unit)

    def record_then_forward(event: AttackEvent) -> None:
        record(event)  # the store first: a crash after this loses nothing
        if on_event is not None:
            on_event(event)

    # A Ctrl-C (or SIGTERM) may land anywhere, also inside a store write or between two of
    # them: whatever the unit's state then, a unit still marked running goes back to pending.
    # The reset checks the status in its own transaction, so a unit already finished stays so.
    try:
        store.mark_unit_running(run_id, unit)
        try:
            piece = split_spec.cut(
                snippet, unit.length, models, bos_in_prefix=bool(options.bos_in_prefix)
            )
            options = prepare_options(options, [unit.method], UNIT_CONTEXT)
            result = runner(
                unit.method, piece, models, options, on_event=record_then_forward, cancel=cancel
            )
            if not (result.status == "cancelled" and on_cancel == "requeue"):
                measure_result(result, piece, models, options.measure, seed=options.seed)
        except (KeyboardInterrupt, sqlite3.Error, StoreError):
            # sqlite3.Error / StoreError: the store itself failed (disk full, read-only,
            # corrupted, its -wal deleted): recording it as the unit's error would need the
            # same store; the caller must stop.
            raise
        except Exception as exc:
            return _record_failure(store, run_id, unit, exc)
        if result.status == "cancelled":
            return _record_cancel(store, run_id, unit, result, on_cancel)
        store.finish_unit(run_id, unit, result)
        return UnitOutcome(unit, "done", result)
    except KeyboardInterrupt:
        store.reset_unit(run_id, unit, if_status="running")
        raise


def prefetch_units(
    units: Sequence[UnitKey],
    snippets: dict[str, Snippet],
    models: ModelSet,
    options: AttackOptions,
    *,
    split_spec: SplitSpec = DEFAULT_SPLIT,
) -> int:
    """Let each method with a ``prefetch`` (:class:`~memprobe_core.attacks.registry.MethodSpec`)
    compute ahead, in batches, what its units among ``units`` will ask for.

    An executor calls it with its next few units before running them one by one through
    :func:`run_unit`; the pieces are cut as :func:`run_unit` cuts them. Nothing is recorded, and
    a failure (a snippet too short to cut, out of memory) is logged and ignored: each unit
    then computes what it needs itself and records its own error, if any.

    Returns:
        How many of ``units`` were handed to a method's ``prefetch`` (0 when none has one).
    """
    by_method: dict[str, list[SplitSnippet]] = {}
    for unit in units:
        spec = registry.get_method(unit.method)
        if spec.prefetch is None or unit.snippet_id not in snippets:
            continue
        try:
            piece = split_spec.cut(
                snippets[unit.snippet_id],
                unit.length,
                models,
                bos_in_prefix=bool(options.bos_in_prefix),
            )
        except Exception:  # the unit itself will record why it cannot be cut
            continue
        by_method.setdefault(unit.method, []).append(piece)
    handed = 0
    for method, pieces in by_method.items():
        prefetch = registry.get_method(method).prefetch
        assert prefetch is not None  # only such methods were grouped
        try:
            prefetch(pieces, models, options)
        except Exception as exc:
            log.warning(
                "prefetch of %d %s unit(s) failed: %s", len(pieces), method, error_text(exc)
            )
            continue
        handed += len(pieces)
    return handed


def batched_method(method: str) -> bool:
    """Whether ``method`` computes its units ahead in batches (it has a ``prefetch``): an
    executor then hands it its next units together (:func:`prefetch_units`)."""
    return registry.get_method(method).prefetch is not None


def error_text(exc: BaseException) -> str:
    """``"Type: message"`` of ``exc`` with anything that looks like a secret redacted."""
    return redact_secrets(f"{type(exc).__name__}: {exc}")


def _record_failure(store: UnitStore, run_id: int, unit: UnitKey, exc: Exception) -> UnitOutcome:
    message = error_text(exc)
    log.warning("run %d: unit %s failed: %s", run_id, unit, message)
    log.debug("unit %s traceback", unit, exc_info=exc)
    store.fail_unit(run_id, unit, message)
    return UnitOutcome(unit, "error", error=message, exception=exc)


def _record_cancel(
    store: UnitStore, run_id: int, unit: UnitKey, result: AttackResult, on_cancel: OnCancel
) -> UnitOutcome:
    if on_cancel == "requeue":
        store.reset_unit(run_id, unit)
        return UnitOutcome(unit, "pending")
    store.cancel_unit(run_id, unit, result)
    return UnitOutcome(unit, "cancelled", result)


def read_snippets(path: Path, run_id: int) -> list[Snippet]:
    """The snippets of run ``run_id`` in the store file ``path`` (what a method's ``prepare``
    may read of a store: :class:`~memprobe_core.attacks.context.MethodContext`)."""
    with Store(path) as store:
        return store.samples(run_id)


# What a method is prepared with before each unit, in whichever process runs it.
UNIT_CONTEXT = MethodContext(read_snippets=read_snippets)


def snippets_by_id(store: Store, run_id: int) -> dict[str, Snippet]:
    """The run's snippets by id (what :func:`run_unit` needs for each unit)."""
    return {s.id: s for s in store.samples(run_id)}


__all__ = [
    "OnCancel",
    "Runner",
    "SplitSpec",
    "UnitOutcome",
    "UnitStore",
    "batched_method",
    "error_text",
    "prefetch_units",
    "read_snippets",
    "run_unit",
    "snippets_by_id",
]
