"""Signals only: the method that asks no model for the suffix.

A unit of ``signals`` measures what every unit measures beside its result — the snippet's
membership signals (docs/method.md §8) — and nothing else: no prompt, no generation, no Mem. It
makes membership audits and dataset inference (``memprobe infer``, docs/method.md §10) cost one
scoring pass per snippet and length instead of an extraction. The signals themselves are
computed by :func:`memprobe_core.membership.measure.measure_result`, as for every method; for
this one it fails the unit when none could be measured, since the unit would hold nothing.

``MethodSpec.extracts`` is ``False``: Table 1, the paired gains, PII counts and the membership
table's method rows leave it out, and the Compare page does not offer it.
"""

from __future__ import annotations

import threading
from typing import Any

from memprobe_core.attacks.costs import CostMeter
from memprobe_core.attacks.events import EventCallback, Finished, emit
from memprobe_core.attacks.manifest import build_manifest
from memprobe_core.attacks.model_set import ModelSet
from memprobe_core.attacks.options import AttackOptions
from memprobe_core.attacks.registry import MethodSpec, register
from memprobe_core.attacks.result import AttackResult, build_result
from memprobe_core.snippets.split import SplitSnippet

METHOD = "signals"


def run_signals_only(
    split: SplitSnippet,
    models: ModelSet,
    options: AttackOptions,
    *,
    on_event: EventCallback | None = None,
    cancel: threading.Event | None = None,
    **_: Any,
) -> AttackResult:
    """An empty result for ``split`` (no candidate, Mem 0) that the unit runner measures
    (``cancelled`` when ``cancel`` was set before it started, as every method)."""
    cancelled = cancel is not None and cancel.is_set()
    result = unscored_result(METHOD, split, models, options, CostMeter(), cancelled=cancelled)
    emit(on_event, Finished(result=result))
    return result


def unscored_result(
    method: str,
    split: SplitSnippet,
    models: ModelSet,
    options: AttackOptions,
    meter: CostMeter,
    *,
    cancelled: bool,
    decoding: dict[str, Any] | None = None,
) -> AttackResult:
    """The result of a method that scores no output (no candidate, Mem 0, no α), ``cancelled``
    or ``finished``; shared by the measuring-only methods (``signals``, ``verbatim``)."""
    manifest = build_manifest(
        method,
        split,
        models,
        options,
        0.0,
        "none (no output is scored)",
        decoding=decoding or {},
        extra={"scored_model": None},
    )
    return build_result(
        method,
        split,
        chosen=None,
        trace=[],
        alpha=0.0,
        dis=None,
        meter=meter,
        manifest=manifest,
        status="cancelled" if cancelled else "finished",
    )


register(
    MethodSpec(
        name=METHOD,
        label="Signals only",
        run=run_signals_only,
        roles=("victim",),
        rank=90,
        default_in_compare=False,
        extracts=False,
        summary="no extraction: only the snippet's membership signals on the victim "
        "(membership audits, dataset inference)",
    )
)
