"""The near-verbatim lower bound of one unit (docs/method.md §22) on its victim: the search of
:mod:`memprobe_core.measuring.near_verbatim` over the row p_z feeds (the split's own ids, the
signals' BOS rule), under p_z's scheme, stored beside ``log10_p_z`` in the unit's ``verbatim``
record."""

from __future__ import annotations

import logging
from typing import Any

from memprobe_core.measuring.near_verbatim import near_verbatim_bound
from memprobe_core.measuring.options import MeasureOptions
from memprobe_core.membership.extraction_probability import suffix_row
from memprobe_core.models.base import Generator
from memprobe_core.models.measure_cache import MeasureCache, from_weights, model_key
from memprobe_core.records import VerbatimRecord
from memprobe_core.secrets import redact_secrets
from memprobe_core.snippets.split import SplitSnippet

log = logging.getLogger(__name__)

# Every method of a unit measures the same (snippet, length): one search serves them all.
_CACHE = MeasureCache()

NO_WEIGHTS = (
    "the victim's weights are not loaded: the search needs the sampler's whole next-token "
    "distribution at every step of every beam, which a server's log-probs do not give"
)


def clear_cache() -> None:
    """Forget every cached bound (benchmarks time the search itself)."""
    _CACHE.clear()


def _not_measured(why: str) -> VerbatimRecord:
    return {"near_verbatim_log10_lower": None, "near_verbatim_not_measured": why}


def measure_near_verbatim(
    victim: Generator, piece: SplitSnippet, options: MeasureOptions
) -> VerbatimRecord:
    """The ``near_verbatim_*`` keys of ``piece`` on ``victim``.

    A black-box victim, a split with no prefix or no suffix token, or a failure (e.g. out of
    memory): ``near_verbatim_log10_lower`` ``None`` and ``near_verbatim_not_measured`` saying
    why; a side measurement never costs the unit its result.
    """
    if not from_weights(victim):
        return _not_measured(NO_WEIGHTS)
    scheme = options.pz_scheme
    key: tuple[Any, ...] = (model_key(victim), piece.text, piece.prefix, piece.prefix_ids)
    key += (piece.suffix_ids, scheme, options.near_verbatim_edits, options.near_verbatim_beams)
    cached = _CACHE.get(key)
    if cached is not None:
        return dict(cached)
    row, start = suffix_row(victim.tokenizer, piece)
    if not 0 < start < len(row):
        return _not_measured("the split has no prefix token to condition on or no suffix token")
    white_box: Any = victim  # from_weights checked that it holds a torch_model
    try:
        bound = near_verbatim_bound(
            white_box.torch_model,
            row[:start],
            row[start:],
            scheme,
            options.near_verbatim_edits,
            options.near_verbatim_beams,
        )
    except Exception as exc:  # recorded: the unit's result stands without the bound
        message = redact_secrets(f"{type(exc).__name__}: {exc}")
        log.warning("near-verbatim bound of %s not measured: %s", piece.snippet.id, message)
        return _not_measured(message)
    record: VerbatimRecord = bound.to_record()
    _CACHE.put(key, record)
    return dict(record)
