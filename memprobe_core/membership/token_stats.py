"""Per-token statistics of a scored text and the membership signals computed from them (pure).

docs/method.md §8 defines the signals. With ``ℓ_t = log p(x_t | x_<t)`` over the scored tokens:
``loss`` ``= −mean ℓ_t``, ``ppl = exp(loss)``, ``zlib`` ``= loss / bits of zlib.compress(text)``
(Carlini et al. 2021), ``min_k`` the mean of the lowest k % of ``ℓ_t`` (Shi et al. 2024) and
``min_k_pp`` the same of ``(ℓ_t − μ_t) / σ_t`` (Zhang et al. 2024). **k %** is
``max(1, floor(n · k / 100))`` of the ``n`` scored tokens: the truncation of the reference
implementations (``int(len * ratio)``), but never zero tokens. Statistics are computed from
float32 log-softmax whatever the logits' dtype. How the tokens are scored (which model, which
rows) is :mod:`memprobe_core.membership.scoring_pass`'s business.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# Positions whose (T, V) float32 temporaries are alive at once: bounds the memory of the
# statistics on a large vocabulary (Gemma-3: 262k entries, ~1 MiB per position and temporary).
_STATS_CHUNK = 64


@dataclass(frozen=True)
class TokenStats:
    """Per-token statistics of one sequence, one entry per predicted token.

    Attributes:
        log_probs: ``ℓ_t = log p(x_t | x_<t)``.
        mu: ``μ_t``, the expected log-prob under the model's own next-token distribution
            (``None`` when not asked for).
        sigma: ``σ_t``, the standard deviation of that log-prob (``None`` when not asked for).
    """

    log_probs: tuple[float, ...]
    mu: tuple[float, ...] | None = None
    sigma: tuple[float, ...] | None = None


# --- statistics from logits (pure) ------------------------------------------------------------


def token_stats(logits: Any, targets: Any, *, calibrate: bool = True) -> TokenStats:
    """Statistics of ``targets`` under ``logits`` (float32, whatever the logits' dtype).

    Args:
        logits: ``(T, V)`` tensor; row ``t`` is the model's prediction for ``targets[t]``.
        targets: ``(T,)`` integer tensor of the tokens that came.
        calibrate: also compute ``μ_t`` and ``σ_t`` (Min-K%++).
    """
    import torch

    lps, mus, sigmas = [], [], []
    for start in range(0, int(targets.shape[0]), _STATS_CHUNK):
        block = logits[start : start + _STATS_CHUNK].float()  # (C, V)
        tgt = targets[start : start + _STATS_CHUNK].long()  # (C,)
        logp = torch.log_softmax(block, dim=-1)  # (C, V)
        lps.append(logp.gather(-1, tgt[:, None])[:, 0])
        if calibrate:
            mu, sigma = _moments(logp)
            mus.append(mu)
            sigmas.append(sigma)
    if not lps:
        return TokenStats((), () if calibrate else None, () if calibrate else None)
    return TokenStats(
        tuple(torch.cat(lps).tolist()),
        tuple(torch.cat(mus).tolist()) if calibrate else None,
        tuple(torch.cat(sigmas).tolist()) if calibrate else None,
    )


def _moments(logp: Any) -> tuple[Any, Any]:
    """``μ`` and ``σ`` of ``log p(z)`` for ``z ∼ p``, per row of log-probs ``(C, V)`` (consumed).

    Few passes over the vocabulary, in place where possible: on Gemma-3's 262k entries this is
    most of the statistics' cost. ``σ² = E[(log p)²] − μ²`` in float32 loses ~1e-4 absolute to
    cancellation, far below the spread Min-K%++ ranks by.
    """
    import torch

    # A masked entry (log p = −inf, p = 0) would give 0 · (−inf) = NaN. Below −1e4, exp()
    # is 0 in float32 anyway, so clamping there changes no p and removes the NaN.
    logp.clamp_(min=-1e4)
    q = logp.exp().mul_(logp)  # p · log p, (C, V)
    mu = q.sum(-1)  # (C,)
    second = torch.linalg.vecdot(q, logp)  # E[(log p)²], (C,)
    return mu, (second - mu * mu).clamp_min(0.0).sqrt()


def min_k_count(n: int, percent: float) -> int:
    """How many of ``n`` scored tokens "the lowest k %" takes: ``max(1, floor(n·k/100))``."""
    return max(1, math.floor(n * float(percent) / 100.0 + 1e-9))


def mean_lowest(values: Sequence[float], percent: float) -> float:
    """Mean of the lowest ``percent`` % of ``values`` (at least one value)."""
    if not values:
        raise ValueError("mean_lowest of no values: nothing was scored")
    count = min_k_count(len(values), percent)
    return sum(sorted(values)[:count]) / count


def calibrated(stats: TokenStats) -> list[float]:
    """Min-K%++'s per-token scores ``(ℓ_t − μ_t) / σ_t``.

    A one-hot prediction has ``σ_t = 0``; its score is then 0 (the token is neither more nor
    less likely than the model's expectation), never a division by zero.
    """
    if stats.mu is None or stats.sigma is None:
        raise ValueError("these statistics were computed without calibrate=True")
    return [
        (lp - mu) / sigma if sigma > 0 else 0.0
        for lp, mu, sigma in zip(stats.log_probs, stats.mu, stats.sigma)
    ]


def zlib_bits(text: str) -> int:
    """Bits of ``zlib.compress(text.encode("utf-8"))`` (Carlini et al. 2021's zlib entropy)."""
    return 8 * len(zlib.compress(text.encode("utf-8")))


# --- signals from statistics (pure) -----------------------------------------------------------


def _mean_nll(log_probs: Sequence[float]) -> float:
    return -sum(log_probs) / len(log_probs)


def signals_from_stats(
    stats: TokenStats,
    *,
    text: str,
    suffix_start: int,
    min_k_percent: float,
    lower_log_probs: Sequence[float] | None = None,
    reference_nll: float | None = None,
) -> dict[str, Any]:
    """The membership signals of one text from its token statistics.

    Args:
        stats: the victim's statistics of the text's scored tokens (without ``μ``/``σ``, from
            a server's log-probs, Min-K%++ is ``None``).
        text: the text itself (zlib bits, UTF-8 bytes of the reference ratio).
        suffix_start: index into ``stats`` of the first suffix token.
        min_k_percent: k of Min-K% and Min-K%++.
        lower_log_probs: the victim's ``ℓ_t`` of the lower-cased text (``None``: no lowercase).
        reference_nll: the reference model's total NLL of the text (``None``: no ref_ratio).

    Returns:
        ``{signal name: value, "tokens": scored tokens, "min_k_percent": k}``; a value that is
        undefined for this text (e.g. an empty suffix) is ``None``.
    """
    lps = stats.log_probs
    loss = _mean_nll(lps)
    suffix = lps[suffix_start:]
    lower_loss = _mean_nll(lower_log_probs) if lower_log_probs else None
    out: dict[str, Any] = {
        "loss": loss,
        "ppl": math.exp(
            min(loss, 700.0)
        ),  # exp(700) is near float64's top; a loss that high is noise
        "suffix_loss": _mean_nll(suffix) if suffix else None,
        "zlib": loss / zlib_bits(text),
        "lowercase": loss / lower_loss if lower_loss else None,
        "min_k": mean_lowest(lps, min_k_percent),
        # Min-K%++ needs the whole next-token distribution: only a forward pass has it.
        "min_k_pp": mean_lowest(calibrated(stats), min_k_percent) if stats.mu is not None else None,
    }
    if reference_nll is not None:
        n_bytes = len(text.encode("utf-8"))
        out["ref_ratio"] = (-sum(lps) - reference_nll) / n_bytes
    out["tokens"] = len(lps)
    out["min_k_percent"] = float(min_k_percent)
    return out
