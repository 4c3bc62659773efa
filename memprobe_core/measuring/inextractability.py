"""The rank-based extraction cost of a text: (l, b)-inextractability (Liu, Evans & Xiong 2026,
"Beyond Indistinguishability: Measuring Extraction Risk in LLM APIs"; docs/method.md §21).

From ONE teacher-forced pass over a text, each scored token ``z_t`` has its rank ``r_t`` in the
model's next-token distribution (1: the argmax) and its probability ``P_t(z_t)``. An adversary
who may choose any decoding can make a token of rank ``r ≤ m`` come out with probability at most
``1/r`` per try on average (their Algorithm 2); past rank ``m`` the model's own probability is
taken. Per window ``z`` of ``l`` consecutive tokens

    p_z = Π_t (1/r_t if r_t ≤ m else P_t(z_t)),        b = −log2 max_z p_z

so at least ``2^b`` expected queries extract the easiest window: ``b`` is an upper bound on
extraction risk (a lower bound on the cost) over decoding configurations. Their Algorithm 3 counts
the windows greedy decoding writes back (every rank 1), skipping past the first rank > 1 it meets.

Pure arithmetic on ranks and log-probs: the callers take them from the logits of a pass they
already make (:func:`token_ranks`), never a pass of their own.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memprobe_core.option_fields import check_options, option, option_named

# The reference code's defaults (Emory-AIMS/Inextractability, README "Parameters").
DEFAULT_WINDOW_TOKENS = 50
DEFAULT_RANK_CAP = 20


@dataclass(frozen=True)
class InextractabilityOptions:
    """The window length ``l`` and the rank cap ``m`` of the rank-based extraction cost."""

    window_tokens: int = option(
        DEFAULT_WINDOW_TOKENS,
        help="tokens of each window whose extraction cost is bounded (l of (l, b)-"
        "inextractability; a shorter text is one window of all its tokens)",
        low=1,
        high=100_000,
        example=50,
    )
    rank_cap: int = option(
        DEFAULT_RANK_CAP,
        help="tokens ranked at most this high count 1/rank (any decoding can favour them); "
        "lower-ranked ones count their own probability (m of Liu et al. 2026)",
        low=1,
        high=10_000_000,
        example=20,
    )

    def __post_init__(self) -> None:
        check_options(self)


def declared_as(name: str, **more: Any) -> Any:
    """:class:`InextractabilityOptions`' option ``name`` declared again in another option class
    (its default, help and range, one home for them), with ``more`` (its flag, label)."""
    found = option_named(InextractabilityOptions, name)
    return option(found.default, **{**dataclasses.asdict(found.info), **more})


@dataclass(frozen=True)
class ExtractionCost:
    """The rank-based extraction cost of one scored token sequence.

    Attributes:
        bits: ``b = −log2 max_z p_z`` (``math.inf`` when every window has a token of probability
            0, which a finite logit never gives).
        worst_start / worst_end: the easiest window, ``[start, end)`` in the scored tokens
            (the first one on a tie).
        window_tokens: the window length used (``l``, or the whole sequence when shorter).
        windows: windows scored (``n − window_tokens + 1``).
        greedy_extractable: windows whose every token is the argmax (rank 1).
        rank_cap: the rank cap used (``m``).
    """

    bits: float
    worst_start: int
    worst_end: int
    window_tokens: int
    windows: int
    greedy_extractable: int
    rank_cap: int = DEFAULT_RANK_CAP

    @property
    def greedy_extractable_rate(self) -> float:
        return self.greedy_extractable / self.windows

    def to_record(self) -> dict[str, Any]:
        """The JSON-safe keys stored beside p_z (``extraction_bits`` is ``None`` for ∞)."""
        return {
            "extraction_bits": self.bits if math.isfinite(self.bits) else None,
            "extraction_worst_window": [self.worst_start, self.worst_end],
            "extraction_window_tokens": self.window_tokens,
            "extraction_rank_cap": self.rank_cap,
            "extraction_windows": self.windows,
            "greedy_extractable_windows": self.greedy_extractable,
            "greedy_extractable_rate": self.greedy_extractable_rate,
        }


def token_log2_bounds(
    ranks: Sequence[int], log_probs: Sequence[float], rank_cap: int
) -> list[float]:
    """Each token's ``log2`` factor of ``p_z``: ``−log2 r`` when ``r ≤ m``, else ``log2 P``
    (``log_probs`` natural log)."""
    return [
        -math.log2(r) if r <= rank_cap else lp / math.log(2)
        for r, lp in zip(ranks, log_probs, strict=True)
    ]


def window_log2_p(factors: Sequence[float], window: int) -> Any:
    """``log2 p_z`` of every window of ``window`` tokens (numpy, in order): each window's own
    sum, not a difference of running sums, so ``−inf`` stays in its windows."""
    import numpy as np

    values = np.asarray(factors, dtype=np.float64)
    return np.lib.stride_tricks.sliding_window_view(values, window).sum(axis=1)


def greedy_extractable_windows(ranks: Sequence[int], window: int) -> int:
    """Windows of ``window`` tokens all of rank 1 (Algorithm 3): at the first rank > 1 inside a
    window, no window containing it qualifies, so the scan jumps past it."""
    n, count, start = len(ranks), 0, 0
    while start <= n - window:
        miss = next((j for j in range(start, start + window) if ranks[j] != 1), None)
        if miss is None:
            count += 1
            start += 1
        else:
            start = miss + 1
    return count


def extraction_cost(
    ranks: Sequence[int],
    log_probs: Sequence[float],
    options: InextractabilityOptions | None = None,
) -> ExtractionCost | None:
    """The extraction cost of a scored sequence (``None`` when it has no token).

    Args:
        ranks: each token's rank in the model's next-token distribution (1-based).
        log_probs: each token's natural-log probability under the model's own distribution
            (temperature 1, no top-k or top-p).
    """
    options = options or InextractabilityOptions()
    if not ranks:
        return None
    window = min(options.window_tokens, len(ranks))
    sums = window_log2_p(token_log2_bounds(ranks, log_probs, options.rank_cap), window)
    worst = int(sums.argmax())  # numpy's argmax: the first maximum, as the reference's strict >
    return ExtractionCost(
        # 0.0 − x, not −x: a window of rank-1 tokens costs 0 bits, not −0.0 (shown as "-0.0")
        bits=0.0 - float(sums[worst]),
        worst_start=worst,
        worst_end=worst + window,
        window_tokens=window,
        windows=len(sums),
        greedy_extractable=greedy_extractable_windows(ranks, window),
        rank_cap=options.rank_cap,
    )


def token_min_bits(factors: Sequence[float | None], window_tokens: int) -> list[float]:
    """Each token's smallest ``b`` over the windows of ``l`` tokens that cover it (the paper's
    per-token view): ``b`` of a window is ``−Σ factors`` over it (:func:`token_log2_bounds`; a
    ``None`` factor is a probability 0, ``−inf``); a text shorter than ``l`` is one window.

    Each window's ``b`` is spread to its tokens by a running minimum: a token ``t`` is covered
    by the windows starting in ``[t − l + 1, t]``, so the minimum over those starts is a sliding
    minimum of the window sums (``O(n·l)`` numpy, no Python loop over windows).
    """
    import numpy as np

    if not factors:
        return []
    values = [-math.inf if f is None else f for f in factors]
    window = min(window_tokens, len(values))
    bits = 0.0 - window_log2_p(values, window)  # one per window start (0.0 −: never −0.0)
    # Pad ∞ on both sides so every token sees exactly l candidate starts, real or not.
    padded = np.concatenate([np.full(window - 1, math.inf), bits, np.full(window - 1, math.inf)])
    covering = np.lib.stride_tricks.sliding_window_view(padded, window)[: len(values)]
    return [float(b) for b in covering.min(axis=1)]


def token_ranks(
    logits: Any, targets: Any, rank_cap: int | None = None
) -> tuple[list[int], list[float]]:
    """Each target's rank and natural-log probability from the logits that predict it.

    Args:
        logits: ``(T, V)`` next-token logits, row t predicting ``targets[t]``.
        targets: ``(T,)`` token ids.
        rank_cap: when given, ranks are exact up to it and ``rank_cap + 1`` beyond it, and only
            the tokens beyond it get a log-probability (``nan`` for the others): all that
            :func:`extraction_cost` reads, from a top-``m`` instead of a comparison with every
            logit, and a log-softmax of only the rows that need one.

    Returns:
        ``(ranks, log_probs)``: rank = 1 + the tokens with a strictly higher logit (a tie counts
        for the target: the best rank any order of the tied tokens gives it), compared in the
        logits' own dtype; log-prob = logit − logsumexp in float32 (within 2e-6 nats of float64
        on Gemma, where float32's ``log_softmax`` on CPU is off by up to 1e-4).
    """
    import torch

    scores = logits.float()
    chosen = scores.gather(-1, targets.long().unsqueeze(-1))  # (T, 1)
    if rank_cap is None:
        ranks = (scores > chosen).sum(dim=-1) + 1  # (T,)
        need = torch.ones_like(ranks, dtype=torch.bool)
    else:
        # Every token above a target that is within the top m is itself within the top m.
        top = scores.topk(min(rank_cap, scores.shape[-1]), dim=-1).values  # (T, m)
        within = chosen.squeeze(-1) >= top[:, -1]
        above = (top > chosen).sum(dim=-1) + 1
        ranks = torch.where(within, above, torch.full_like(above, rank_cap + 1))
        need = ~within
    log_p = torch.full((scores.shape[0],), math.nan, dtype=torch.float64)
    if bool(need.any()):
        rows = scores[need]
        picked = chosen.squeeze(-1)[need] - rows.logsumexp(dim=-1)
        log_p[need.cpu()] = picked.double().cpu()
    return [int(r) for r in ranks.tolist()], [float(v) for v in log_p.tolist()]
