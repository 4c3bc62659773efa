"""Measure one unit's result beside its Mem: verbatim metrics and the snippet's signals.

:func:`memprobe_core.runs.unit.run_unit` calls :func:`measure_result` on every result it
records (finished or cancelled), so every way of running a method — probe, compare, audit,
Ray worker — stores the same measurements.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from memprobe_core.attacks import registry
from memprobe_core.attacks.model_set import ModelSet
from memprobe_core.attacks.result import AttackResult
from memprobe_core.errors import MemprobeError
from memprobe_core.membership.extraction_probability import (
    logits_taker,
    measure_extraction_probability,
)
from memprobe_core.membership.near_verbatim import measure_near_verbatim
from memprobe_core.membership.options import SIGNALS, MeasureOptions
from memprobe_core.membership.prior_aware import measure_prior_aware
from memprobe_core.membership.samia import NOT_MEASURED as SAMIA_NOT_MEASURED
from memprobe_core.membership.samia import measure_samia
from memprobe_core.membership.signals import compute_signals
from memprobe_core.membership.verbatim import verbatim_metrics
from memprobe_core.records import MembershipRecord
from memprobe_core.secrets import redact_secrets
from memprobe_core.snippets.split import SplitSnippet

log = logging.getLogger(__name__)


def measure_result(
    result: AttackResult,
    piece: SplitSnippet,
    models: ModelSet,
    options: MeasureOptions,
    *,
    seed: int = 0,
) -> AttackResult:
    """Fill ``result.verbatim`` and ``result.membership`` (in place; returned for chaining).

    ``result.verbatim`` also gets probabilistic extraction (``log10_p_z``, ``n_at_p``, …) when
    ``options.pz``: for every method, the methods that only measure included; and the
    prior-aware check (``pam_*``) when ``options.pam``.

    With ``options.samia_samples``, SaMIA's samples of the victim (seeded with ``seed``, the
    run's) join the membership signals; it needs no log-probs, so a black-box victim whose
    server cannot score a text gets it beside its ``not_measured``.

    A failure of the signals (e.g. out of memory on a long snippet) is recorded under
    ``membership["error"]`` and logged: a side measurement must not cost the unit's result.
    ``costs.measure_seconds`` is what both took. A method that asks no model for the suffix
    (``signals``) gets no verbatim metrics, and its signals are its whole result.

    Raises:
        NothingMeasured: such a method's signals could not be measured (the unit fails, naming
            why, rather than being stored empty).
    """
    started = time.perf_counter()
    extracting = registry.extracts(result.method)
    if extracting:
        # Verbatim metrics count tokens of the tokenizer that cut the snippet: the victim's,
        # or whitespace words when it has none (black-box) or the split asked for words.
        tokenizer = models.victim.tokenizer if piece.tokenizer_name != "whitespace" else None
        # A method may have measured verbatim figures of its own (ACR, divergence spans): they
        # stay beside the output's metrics, and win a key both set.
        result.verbatim = {
            **verbatim_metrics(piece.suffix, result.output, tokenizer, options.extract_k),
            **result.verbatim,
        }
    # The signals first: their pass (white-box) also gives p_z's log-probs, the same row.
    cost = options.inextractability
    take = logits_taker(models.victim, piece, options.pz_scheme, cost) if options.pz else None
    try:
        result.membership = compute_signals(
            models.victim, piece, options, models.reference, on_logits=take
        )
    except Exception as exc:  # recorded: the unit's result stands without its signals
        message = redact_secrets(f"{type(exc).__name__}: {exc}")
        log.warning("membership signals of %s failed: %s", piece.snippet.id, message)
        result.membership = {"error": message}
    if options.pz:
        # p_z is of the snippet's suffix given its prefix: the same for every method of a unit.
        scheme = options.pz_scheme
        result.verbatim = {
            **result.verbatim,
            **measure_extraction_probability(
                models.victim, piece, scheme, options.discover_p, cost
            ),
        }
        result.manifest = {
            **result.manifest,
            "extraction_probability": {
                "scheme": scheme.label(),
                "temperature": scheme.temperature,
                "top_k": scheme.top_k,
                "top_p": scheme.top_p,
                "discover_p": options.discover_p,
                "extraction_window_tokens": cost.window_tokens,
                "extraction_rank_cap": cost.rank_cap,
                "given": "the true prefix (the split's tokens), teacher-forced",
            },
        }
    if options.pz and options.near_verbatim:
        # Of the snippet's suffix under p_z's scheme (so off with p_z), the same for every
        # method of a unit.
        near = measure_near_verbatim(models.victim, piece, options)
        result.verbatim = {**result.verbatim, **near}
    if options.pam:
        # Of the snippet's suffix, the same for every method of a unit (cached per victim).
        prior = measure_prior_aware(models.victim, piece, options.pam_prefixes)
        result.verbatim = {**result.verbatim, **prior}
    samia = measure_samia(models.victim, piece, options, seed=seed)  # {} when off
    if samia:
        result.membership = {**result.membership, **samia}
    result.costs.measure_seconds = time.perf_counter() - started
    if not extracting and not registry.measures_verbatim(result.method):
        _check_measured(result.membership, options, models.victim)
    return result


class NothingMeasured(MemprobeError, RuntimeError):
    """A signals-only unit measured no signal (its message says why)."""


def _check_measured(membership: MembershipRecord, options: MeasureOptions, victim: Any) -> None:
    """Raise :class:`NothingMeasured` unless ``membership`` holds a signal's value; the message
    says which cause applies, and SaMIA's own when it was asked for and not measured (its
    sampling failed: the server's or the model's error, as :func:`measure_samia` recorded it)."""
    if any(membership.get(spec.name) is not None for spec in SIGNALS):
        return
    samia = membership.get(SAMIA_NOT_MEASURED)
    also = f"; SaMIA not measured either: {samia}" if samia else ""
    for why in ("error", "not_measured"):
        if why in membership:
            raise NothingMeasured(f"no membership signal was measured: {membership[why]}{also}")
    if not options.signals:
        raise NothingMeasured(
            "membership signals are turned off, so the signals-only method has nothing to "
            "measure; turn them on or pick an extraction method"
        )
    name = getattr(victim, "model_id", victim)
    if not victim.white_box and not victim.scores_text:
        samia_text = (
            f"SaMIA, which needs neither, was not measured either: {samia}"
            if samia
            else "SaMIA needs neither: add --samia-samples N"
        )
        raise NothingMeasured(
            f"no membership signal was measured: the victim {name} exposes no weights and its "
            "backend returns no prompt log-probs (an endpoint answering `echo` with `logprobs` "
            f"does); {samia_text}"
        )
    raise NothingMeasured(
        f"no membership signal was measured: the text has no token to score on {name}{also}"
    )
