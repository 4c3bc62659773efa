"""Membership signals of one snippet: from one batched forward pass of a white-box victim, or
from the log-probs a black-box victim's server gives the snippet's tokens.

docs/method.md §8 defines them; :data:`~memprobe_core.membership.options.SIGNALS` names them. With
``ℓ_t = log p(x_t | x_<t)`` over the snippet's first ``length`` tokens ``x``:

- ``loss`` ``= −mean ℓ_t``; ``ppl = exp(loss)``; ``suffix_loss``: ``−mean ℓ_t`` over the suffix
  tokens (given the true prefix, which is the text before them);
- ``zlib`` ``= loss / bits of zlib.compress(text.encode("utf-8"))`` (Carlini et al. 2021);
- ``lowercase`` ``= loss(x) / loss(lower(x))``, ``lower(x)`` the text lower-cased and tokenized
  again;
- ``min_k``: mean of the lowest k % of ``ℓ_t`` (Shi et al. 2024);
- ``min_k_pp``: mean of the lowest k % of ``(ℓ_t − μ_t) / σ_t``, with ``μ_t`` and ``σ_t`` the mean
  and standard deviation of ``log p(z | x_<t)`` for ``z ∼ p(· | x_<t)`` (Zhang et al. 2024);
- ``ref_ratio`` (with a reference model): victim total NLL per UTF-8 byte of the text minus the
  reference's, so the two tokenizers may differ.
- ``dc_pdd`` (with token frequencies of a reference corpus, :mod:`.dc_pdd`) and ``pac`` (with
  ``pac_augmentations``, :mod:`.pac`): from the same pass; PAC's word-swapped copies are extra
  rows of its one forward call (or extra texts of the server's requests).

The conventions (first token, k %, which tokens are the suffix) and the costs are those of
the modules this one puts together:

- :mod:`.scoring_pass`: the rows fed to the victim and its one forward call (or a black-box
  victim's server: every signal but Min-K%++, from one request batch; ``scored_by`` records
  which way);
- :mod:`.token_stats`: the per-token statistics and the signals computed from them (pure);
- :mod:`memprobe_core.models.measure_cache`: the cache. The methods of an audit share a snippet
  and length, so results are cached (:func:`clear_cache`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

from memprobe_core.measuring.dc_pdd import count_tokens, dc_pdd_score
from memprobe_core.measuring.pac import augment, pac_score
from memprobe_core.membership.options import MeasureOptions
from memprobe_core.membership.recall import (
    conditioned_row,
    is_prefix_text,
    prefix_text,
    recall_scores,
)
from memprobe_core.membership.scoring_pass import (
    LogitsConsumer,
    ScoringPass,
    forward_rows,
    pad_token_id,
    reference_nll,
    row_stats,
    server_pass,
    victim_ids,
    victim_pass,
)
from memprobe_core.membership.signals_registry import SignalInput, compute_registered
from memprobe_core.membership.token_stats import signals_from_stats
from memprobe_core.models.base import Generator, LogprobsUnavailable
from memprobe_core.models.measure_cache import (
    MeasureCache,
    from_weights,
    model_key,
    scorable,
    tokenizer_name,
)
from memprobe_core.records import MembershipRecord
from memprobe_core.snippets.split import SplitSnippet

log = logging.getLogger(__name__)


_CACHE = MeasureCache()  # the signals of a (snippet, length), shared by its methods


def clear_cache() -> None:
    """Forget every cached result (benchmarks time the computation itself)."""
    _CACHE.clear()


def compute_signals(
    victim: Generator,
    piece: SplitSnippet,
    options: MeasureOptions,
    reference: Generator | None = None,
    *,
    on_logits: LogitsConsumer | None = None,
) -> MembershipRecord:
    """The membership signals of ``piece`` on ``victim`` (docs/method.md §8).

    Args:
        victim: the audited model: a white-box one (``hf``) is scored from one forward pass; a
            black-box one whose server returns a prompt's log-probs (``openai`` with ``echo``)
            is scored by its server (every signal but Min-K%++, which needs the whole
            next-token distribution).
        piece: the snippet cut at its length (by the victim's tokenizer, normally).
        options: ``signals`` on/off and ``min_k_percent``.
        reference: a second model for ``ref_ratio`` (its tokenizer may differ), scored the same
            two ways; one that can be scored neither way is skipped with a warning.
        on_logits: called with x's row and its logits when a white-box pass runs (not when
            the signals come from the cache).

    Returns:
        ``{name: value}`` for the names in ``SIGNALS`` (``ref_ratio`` only with a reference),
        plus ``tokens`` (scored tokens), ``min_k_percent`` and ``scored_by`` (``"forward"`` or
        ``"server"``); ``{"not_measured": why}`` when the victim's server turned out unable to
        score a text; ``{}`` when not measured (signals off, a black-box victim with no
        log-probs, or no token to score).
    """
    if not options.signals or not scorable(victim):
        return {}
    if reference is not None and not scorable(reference):
        log.warning(
            "reference model %s gives no log-probs (neither weights nor a scoring server); "
            "the reference ratio is not measured",
            getattr(reference, "model_id", reference),
        )
        reference = None
    key = (
        model_key(victim),
        model_key(reference),
        piece.text,
        piece.prefix,
        piece.prefix_ids,
        piece.suffix_ids,
        float(options.min_k_percent),
        options.recall_member_prefix,
        options.recall_nonmember_prefix,
        options.recall_prefix_ids,
        # DC-PDD: the table (its str hash is cached), its cap, and whether this snippet is one
        # of the counted non-members (scored leave-one-out); PAC's copies and k's.
        options.dc_pdd_frequencies,
        float(options.dc_pdd_cap),
        options.dc_pdd_frequencies is not None
        and piece.snippet.id in options.dc_pdd_frequencies.counted,
        options.pac_augmentations,
        float(options.pac_swap_rate),
        float(options.pac_low_percent),
        float(options.pac_high_percent),
    )
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    try:
        result = _measure(victim, piece, options, reference, on_logits)
    except LogprobsUnavailable as exc:  # the victim's server cannot score a text: say why
        log.warning("membership signals of %s not measured: %s", piece.snippet.id, exc)
        result = {"not_measured": str(exc)}
    if result:
        _CACHE.put(key, result)
    return result


def _non_finite(log_probs: Sequence[float], what: str) -> str | None:
    """Why signals computed from ``log_probs`` would mean nothing (``None``: all finite).

    A −inf (a token the model gives probability 0, or a server's ``-Infinity``) makes the loss
    infinite, and AUROC over infinities ranks ties arbitrarily; NaN poisons every mean. Such a
    text is "not measured", with the reason, rather than a number.
    """
    for position, value in enumerate(log_probs):
        if not math.isfinite(value):
            return (
                f"the victim gave token {position + 1} of {what} a log-probability of {value} "
                "(not a finite number), so its loss and every signal would be meaningless"
            )
    return None


def _measure(
    victim: Generator,
    piece: SplitSnippet,
    options: MeasureOptions,
    reference: Generator | None,
    on_logits: LogitsConsumer | None = None,
) -> MembershipRecord:
    import torch

    with torch.inference_mode():
        white = from_weights(victim)
        # PAC's word-swapped copies ride in the same forward call (or request batch).
        copies = augment(piece.text, options.pac_augmentations, options.pac_swap_rate)
        if white:
            scored = victim_pass(victim, piece, copies, on_logits)
        else:
            scored = server_pass(victim, piece, copies)
        stats, lower, suffix_start = scored.stats, scored.lower, scored.suffix_start
        if not stats.log_probs:
            log.warning("snippet %s: no token to score; signals not measured", piece.snippet.id)
            return {}
        broken = _non_finite(stats.log_probs, "the text") or _non_finite(lower, "its lower case")
        if broken:
            log.warning("membership signals of %s not measured: %s", piece.snippet.id, broken)
            return {"not_measured": broken}
        ref_nll = reference_nll(reference, piece.text) if reference is not None else None
        if ref_nll is not None and not math.isfinite(ref_nll):
            log.warning(
                "reference ratio of %s not measured: its NLL is %s", piece.snippet.id, ref_nll
            )
            ref_nll = None
    out = signals_from_stats(
        stats,
        text=piece.text,
        suffix_start=suffix_start,
        min_k_percent=options.min_k_percent,
        lower_log_probs=lower,
        reference_nll=ref_nll,
    )
    # Plugins' signals, from the same statistics: no model pass of their own.
    out.update(
        compute_registered(
            SignalInput(stats, piece.text, suffix_start, options, lower or None, ref_nll)
        )
    )
    if options.recall_nonmember_prefix and not is_prefix_text(options, piece.snippet.id):
        with torch.inference_mode():
            conditioned = (_conditioned_forward if white else _conditioned_server)(
                victim, piece, options
            )
        out.update(recall_scores(-out["loss"], *conditioned))
    if options.dc_pdd_frequencies is not None:
        out["dc_pdd"] = _dc_pdd(victim, piece, options, scored)
    if options.pac_augmentations:
        out["pac"] = _pac(piece, options, scored)
    out["scored_by"] = "forward" if white else "server"
    return out


_WARNED: set[str] = set()


def _not_measured(signal: str, why: str) -> None:
    """Log once per process why ``signal`` is ``None`` (every unit of a run has the same reason)."""
    message = f"{signal} not measured: {why}"
    if message not in _WARNED:
        _WARNED.add(message)
        log.warning("%s", message)


def _dc_pdd(
    victim: Generator, piece: SplitSnippet, options: MeasureOptions, scored: ScoringPass
) -> float | None:
    """DC-PDD from the pass's own log-probs and token ids (docs/method.md §8); ``None``, the
    reason logged, where the table cannot be used."""
    freq = options.dc_pdd_frequencies
    assert freq is not None
    if scored.scored_ids is None or scored.vocab_size is None:
        _not_measured(
            "DC-PDD",
            "a black-box victim's server tokenizes with its own vocabulary, which the "
            "reference corpus was not counted with",
        )
        return None
    tok: Any = victim.tokenizer
    if tokenizer_name(tok) != freq.tokenizer:
        _not_measured(
            "DC-PDD",
            f"the reference corpus was counted with tokenizer {freq.tokenizer!r}, the victim's "
            f"is {tokenizer_name(tok)!r}",
        )
        return None
    # A counted non-member is scored against the other texts' counts only (leave-one-out).
    own = count_tokens(tok, [piece.snippet.text]) if piece.snippet.id in freq.counted else None
    return dc_pdd_score(
        scored.stats.log_probs,
        scored.scored_ids,
        freq.table,
        freq.total,
        scored.vocab_size,
        options.dc_pdd_cap,
        leave_out=own,
    )


def _pac(piece: SplitSnippet, options: MeasureOptions, scored: ScoringPass) -> float | None:
    """PAC from x's log-probs and its copies' (``None`` where one is empty or not finite)."""
    for i, lps in enumerate(scored.extra):
        if not lps or _non_finite(lps, f"PAC's copy {i + 1}"):
            _not_measured(
                "PAC", f"snippet {piece.snippet.id}: a word-swapped copy has no finite score"
            )
            return None
    return pac_score(
        scored.stats.log_probs, scored.extra, options.pac_low_percent, options.pac_high_percent
    )


def _prefixes(options: MeasureOptions, text: str) -> list[str]:
    """ReCaLL's non-member prefix, then Con-ReCall's member prefix when there is one, for
    ``text``."""
    texts = [prefix_text(options.recall_nonmember_prefix, len(text))]
    if options.recall_member_prefix:
        texts.append(prefix_text(options.recall_member_prefix, len(text)))
    return texts


def _pair(values: list[float]) -> tuple[float, float | None]:
    return values[0], values[1] if len(values) > 1 else None


def _conditioned_forward(
    victim: Generator, piece: SplitSnippet, options: MeasureOptions
) -> tuple[float, float | None]:
    """Mean log-prob of the text's tokens after each prefix, from the victim's weights: both
    prefixed rows in one forward call."""
    white: Any = victim
    tok = white.tokenizer
    ids, _ = victim_ids(tok, piece)
    prefixes = _prefixes(options, piece.text)
    rows, starts = zip(*(conditioned_row(tok, prefix, ids) for prefix in prefixes))
    logits = forward_rows(white.torch_model, rows, pad_id=pad_token_id(tok), device=white.device)
    means = []
    for i, (row, start) in enumerate(zip(rows, starts)):
        scored = row_stats(logits[i], row, calibrate=False).log_probs[start - 1 :]  # x's tokens
        means.append(sum(scored) / len(scored))
    return _pair(means)


def _conditioned_server(
    victim: Generator, piece: SplitSnippet, options: MeasureOptions
) -> tuple[float, float | None]:
    """The same from a black-box victim's server: the text's tokens are those starting at or
    after the prefix's length in characters."""
    prefixes = _prefixes(options, piece.text)
    scored = victim.text_logprobs([prefix + piece.text for prefix in prefixes])
    means = []
    for prefix, result in zip(prefixes, scored):
        mine = [lp for lp, at in zip(result.log_probs, result.offsets) if at >= len(prefix)]
        means.append(sum(mine) / len(mine))
    return _pair(means)
