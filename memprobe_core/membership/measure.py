"""Measure one unit's result beside its Mem: verbatim metrics and the snippet's signals.

:func:`memprobe_core.runs.unit.run_unit` calls :func:`measure_result` on every result it
records (finished or cancelled), so every way of running a method — probe, compare, audit,
Ray worker — stores the same measurements.
"""

from __future__ import annotations

import logging
import time

from memprobe_core.attacks.model_set import ModelSet
from memprobe_core.attacks.result import AttackResult
from memprobe_core.membership.options import MeasureOptions
from memprobe_core.membership.signals import compute_signals
from memprobe_core.membership.verbatim import verbatim_metrics
from memprobe_core.secrets import redact_secrets
from memprobe_core.snippets.split import SplitSnippet

log = logging.getLogger(__name__)


def measure_result(
    result: AttackResult, piece: SplitSnippet, models: ModelSet, options: MeasureOptions
) -> AttackResult:
    """Fill ``result.verbatim`` and ``result.membership`` (in place; returned for chaining).

    A failure of the signals (e.g. out of memory on a long snippet) is recorded under
    ``membership["error"]`` and logged: a side measurement must not cost the unit's result.
    ``costs.measure_seconds`` is what both took.
    """
    started = time.perf_counter()
    # Verbatim metrics count tokens of the tokenizer that cut the snippet: the victim's, or
    # whitespace words when it has none (black-box) or the split asked for words.
    tokenizer = models.victim.tokenizer if piece.tokenizer_name != "whitespace" else None
    result.verbatim = verbatim_metrics(piece.suffix, result.output, tokenizer, options.extract_k)
    try:
        result.membership = compute_signals(models.victim, piece, options, models.reference)
    except Exception as exc:  # recorded: the unit's result stands without its signals
        message = redact_secrets(f"{type(exc).__name__}: {exc}")
        log.warning("membership signals of %s failed: %s", piece.snippet.id, message)
        result.membership = {"error": message}
    result.costs.measure_seconds = time.perf_counter() - started
    return result
