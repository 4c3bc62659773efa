"""Probabilistic extraction: how likely a sampler is to write the true suffix, and how many samples
it takes (Hayes et al. 2024, "Measuring memorization in language models via probabilistic
extraction"; docs/method.md §14).

One greedy answer says whether *that* decoding reproduces the suffix. An adversary who samples
can try many times; what matters is ``p_z``, the probability that one sample of the victim,
under a named sampling scheme (temperature, top-k, top-p), writes exactly the suffix ``z`` after
the prefix. It is a product over the suffix's tokens of the sampler's probability of each token
given the prefix and the suffix so far — one teacher-forced forward pass, no sampling:

    log p_z = Σ_t log q(z_t | prefix, z_<t),   q = softmax(warp(logits))

``warp`` is transformers' own temperature, top-k and top-p warpers, in the order ``generate``
applies them, so ``q`` is the distribution ``model.generate(do_sample=True, …)`` draws from (a
test checks this by sampling). A token the scheme cannot draw (outside the top-k or the nucleus)
makes ``p_z = 0``. Greedy decoding (temperature 0) is the degenerate case: ``p_z`` is 1 when
every suffix token is the argmax before it, else 0.

From ``p_z`` follows the (n, p)-discoverable view: n independent samples write the suffix at
least once with probability ``1 − (1 − p_z)^n``, so the samples needed for a chosen probability
``p`` of extraction are ``n_at_p = ⌈log(1 − p) / log(1 − p_z)⌉``. Both are stored in each
result's ``verbatim`` dict (:func:`extraction_record`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from typing import Any

from memprobe_core.measuring.inextractability import (
    InextractabilityOptions,
    extraction_cost,
    token_ranks,
)
from memprobe_core.measuring.sampler import (
    SamplingScheme,
    log10_sum,
    power_of_ten,
    sampler_log_probs,
    samples_needed,
)
from memprobe_core.membership.scoring_pass import model_row, victim_ids
from memprobe_core.models.base import Generator
from memprobe_core.models.measure_cache import MeasureCache, from_weights, model_key, scorable
from memprobe_core.records import VerbatimRecord
from memprobe_core.secrets import redact_secrets
from memprobe_core.snippets.split import SplitSnippet

log = logging.getLogger(__name__)


def extraction_record(
    log_probs: Sequence[float], scheme: SamplingScheme, discover_p: float
) -> VerbatimRecord:
    """The ``verbatim`` keys of probabilistic extraction from the suffix tokens' sampler
    log-probs (natural log)."""
    log10_p_z = log10_sum(log_probs)
    n, log10_n = samples_needed(log10_p_z, discover_p)
    return {
        "log10_p_z": log10_p_z,
        "n_at_p": n,
        "log10_n_at_p": log10_n,
        "discover_p": discover_p,
        "pz_scheme": scheme.label(),
        "pz_tokens": len(log_probs),
        "pz_outside_support": sum(1 for v in log_probs if v == -math.inf),
    }


def describe_extraction_probability(verbatim: VerbatimRecord | None) -> str:
    """One plain-text line on a result's probabilistic extraction (pages and the CLI)."""
    verbatim = verbatim or {}
    scheme = verbatim.get("pz_scheme")
    if scheme is None:
        return "Probabilistic extraction: not measured."
    if "pz_not_measured" in verbatim:
        return f"Probabilistic extraction ({scheme}): not measured: {verbatim['pz_not_measured']}"
    if verbatim.get("log10_p_z") is None:
        return (
            f"Probabilistic extraction ({scheme}): p_z = 0: "
            f"{verbatim.get('pz_outside_support')} suffix token(s) the scheme never draws; no "
            "number of samples writes this suffix."
        )
    return (
        f"Probabilistic extraction ({scheme}): log10 p_z = {verbatim['log10_p_z']:.2f} over "
        f"{verbatim.get('pz_tokens')} suffix tokens; samples to extract it with probability "
        f"{verbatim.get('discover_p')}: n = {power_of_ten(verbatim.get('log10_n_at_p'))}."
    )


# --- measuring it on a victim ------------------------------------------------------------------

# Every method of a unit measures the same (snippet, length): one pass serves them all, as the
# signals' cache does (the same small thread-safe LRU).
_CACHE = MeasureCache()


# The sampler's suffix log-probs handed over by the membership signals' pass, which feeds the
# same row (:func:`remember_suffix_log_probs`): with signals on, p_z costs no pass of its own.
_HANDED_OVER = MeasureCache()


def clear_cache() -> None:
    """Forget every cached p_z (benchmarks time the computation itself)."""
    _CACHE.clear()
    _HANDED_OVER.clear()


def _pass_key(
    victim: Generator, piece: SplitSnippet, scheme: SamplingScheme, cost: InextractabilityOptions
) -> tuple[Any, ...]:
    key: tuple[Any, ...] = (model_key(victim), piece.text, piece.prefix)
    return key + (piece.prefix_ids, piece.suffix_ids, scheme, cost)


def suffix_row(tokenizer: Any, piece: SplitSnippet) -> tuple[list[int], int]:
    """The row p_z feeds (the signals' row: the split's own ids, the signals' BOS rule) and the
    index in it of the first suffix token (0 when nothing predicts it: not measurable)."""
    ids, n_prefix = victim_ids(tokenizer, piece)
    row, first = model_row(tokenizer, ids, piece.text)
    # The suffix starts at row index n_prefix + (BOS added in front ? 1 : 0).
    return row, n_prefix + (1 if first == 0 else 0)


def sampler_suffix_log_probs(
    logits: Any, row: Sequence[int], start: int, scheme: SamplingScheme
) -> list[float]:
    """The sampler's log-probs of ``row[start:]`` from the logits of ``row``'s positions
    (``logits[j]`` predicts ``row[j + 1]``; only ``[start - 1, len(row) - 1)`` is read)."""
    import torch

    targets = torch.tensor(list(row[start:]), dtype=torch.long, device=logits.device)
    picked = logits[start - 1 : len(row) - 1]
    return [float(v) for v in sampler_log_probs(picked, targets, scheme).cpu()]


def logits_taker(
    victim: Generator,
    piece: SplitSnippet,
    scheme: SamplingScheme,
    cost: InextractabilityOptions | None = None,
) -> Callable[[Sequence[int], Any], None]:
    """A consumer for another pass's ``(row, logits)`` (the membership signals',
    ``compute_signals(on_logits=…)``): when the row is the one p_z feeds, the suffix log-probs
    are computed from those logits and kept for :func:`suffix_log_probs`, which then needs no
    pass of its own. ``cost``: ``l`` and ``m`` of the extraction cost (default: the paper's)."""
    cost = cost or InextractabilityOptions()

    def take(row: Sequence[int], logits: Any) -> None:
        import torch

        own, start = suffix_row(victim.tokenizer, piece)
        if list(row) != own or not 0 < start < len(own):
            return
        log_probs = sampler_suffix_log_probs(logits, own, start, scheme)
        targets = torch.tensor(own[start:], dtype=torch.long, device=logits.device)
        ranked = rank_cost_record(logits[start - 1 : len(own) - 1], targets, cost)
        _HANDED_OVER.put(
            _pass_key(victim, piece, scheme, cost), {"log_probs": log_probs, "rank_cost": ranked}
        )

    return take


def rank_cost_record(
    logits: Any, targets: Any, options: InextractabilityOptions | None = None
) -> VerbatimRecord:
    """The rank-based extraction cost of the suffix (docs/method.md §21: ``extraction_bits``,
    its worst window, the greedy-extractable rate, under ``options``' l and m, the paper's 50
    and 20 by default) from the logits p_z's pass already has: ranks and the model's own
    probabilities, no pass of its own."""
    options = options or InextractabilityOptions()
    cost = extraction_cost(*token_ranks(logits, targets, options.rank_cap), options)
    return cost.to_record() if cost is not None else {}


# A black-box victim's server returns each token's log-prob, never its rank.
_NO_RANKS: VerbatimRecord = {
    "extraction_bits": None,
    "extraction_not_measured": "the victim's server returns each token's log-prob, not its rank",
}


def suffix_log_probs(victim: Generator, piece: SplitSnippet, scheme: SamplingScheme) -> list[float]:
    """The sampler's log-probability of each suffix token (:func:`suffix_scores`'s first part)."""
    return suffix_scores(victim, piece, scheme)[0]


def suffix_scores(
    victim: Generator,
    piece: SplitSnippet,
    scheme: SamplingScheme,
    cost: InextractabilityOptions | None = None,
) -> tuple[list[float], VerbatimRecord]:
    """The sampler's log-probability of each suffix token given the prefix and the suffix so far,
    from ONE forward pass of a white-box victim (the split's own ids, the signals' BOS rule), or
    from a black-box victim server's log-probs for the plain scheme; and the suffix's
    rank-based extraction cost from the same logits (:func:`rank_cost_record`; a black-box
    victim: not measured).

    Raises:
        ValueError: a black-box victim and a scheme that needs the whole next-token distribution
            (its server returns each token's log-prob only).
    """
    if from_weights(victim):
        return _white_box_log_probs(victim, piece, scheme, cost or InextractabilityOptions())
    if not scheme.plain:
        raise ValueError(
            f"the victim's server returns each token's log-prob, not the whole distribution that "
            f"{scheme.label()} needs; measure p_z under plain sampling (--pz-top-k 0 "
            "--pz-temperature 1 --pz-top-p 1) or load the victim's weights"
        )
    scored = victim.text_logprobs([piece.text])[0]
    boundary = len(piece.prefix)
    found = [lp for start, lp in zip(scored.offsets, scored.log_probs) if start >= boundary]
    return found, dict(_NO_RANKS)


def _white_box_log_probs(
    victim: Any, piece: SplitSnippet, scheme: SamplingScheme, cost: InextractabilityOptions
) -> tuple[list[float], VerbatimRecord]:
    import torch

    handed = _HANDED_OVER.get(_pass_key(victim, piece, scheme, cost))
    if handed is not None:
        return list(handed["log_probs"]), dict(handed["rank_cost"])
    row, start = suffix_row(victim.tokenizer, piece)
    n_suffix = len(row) - start
    if n_suffix <= 0 or start == 0:
        return [], {}
    inputs = torch.tensor([row[:-1]], dtype=torch.long, device=victim.device)
    with torch.inference_mode():
        # Only the positions that predict a suffix token go through the vocabulary projection.
        logits = victim.torch_model(
            input_ids=inputs, use_cache=False, logits_to_keep=n_suffix
        ).logits[0, -n_suffix:]
    targets = torch.tensor(row[start:], dtype=torch.long, device=logits.device)
    log_probs = [float(v) for v in sampler_log_probs(logits, targets, scheme).cpu()]
    return log_probs, rank_cost_record(logits, targets, cost)


def measure_extraction_probability(
    victim: Generator,
    piece: SplitSnippet,
    scheme: SamplingScheme,
    discover_p: float,
    cost: InextractabilityOptions | None = None,
) -> VerbatimRecord:
    """The ``verbatim`` keys of probabilistic extraction for ``piece`` on ``victim``, with the
    suffix's rank-based extraction cost under ``cost``'s l and m (default: the paper's).

    Not measurable (a black-box victim whose server scores no text, or a scheme it cannot give)
    or failed (e.g. out of memory): ``{"pz_scheme", "pz_not_measured"}`` with why, logged; a side
    measurement never costs the unit its result.
    """
    key: tuple[Any, ...] = (model_key(victim), piece.text, piece.prefix)
    cost = cost or InextractabilityOptions()
    key += (piece.prefix_ids, piece.suffix_ids, scheme, float(discover_p), cost)
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    record = _measure(victim, piece, scheme, discover_p, cost)
    if "pz_not_measured" not in record:
        _CACHE.put(key, record)
    return record


def _measure(
    victim: Generator,
    piece: SplitSnippet,
    scheme: SamplingScheme,
    discover_p: float,
    cost: InextractabilityOptions,
) -> VerbatimRecord:
    if not scorable(victim):
        return {
            "pz_scheme": scheme.label(),
            "pz_not_measured": "the victim exposes no weights and its server returns no prompt "
            "log-probs",
        }
    try:
        log_probs, rank_cost = suffix_scores(victim, piece, scheme, cost)
    except Exception as exc:  # recorded: the unit's result stands without p_z
        message = redact_secrets(f"{type(exc).__name__}: {exc}")
        log.warning("p_z of %s not measured: %s", piece.snippet.id, message)
        return {"pz_scheme": scheme.label(), "pz_not_measured": message}
    return {**extraction_record(log_probs, scheme, discover_p), **rank_cost}
