"""The sampling scheme of probabilistic extraction and its arithmetic (docs/method.md §14).

:class:`SamplingScheme` names a sampler (temperature, top-k, top-p); :func:`sampler_log_probs`
gives the probability it draws each given token from a position's logits, through transformers'
own warpers in the order ``generate`` applies them, so it is the distribution
``model.generate(do_sample=True, …)`` draws from (a test checks this by sampling). The rest is
the (n, p) arithmetic of :mod:`memprobe_core.membership.extraction_probability`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memprobe_core.errors import OptionError

# Hayes et al.'s main scheme: top-k sampling with k = 40 at temperature 1.
DEFAULT_TEMPERATURE = 1.0
DEFAULT_TOP_K = 40
DEFAULT_TOP_P = 1.0
DEFAULT_DISCOVER_P = 0.5
# Past this many samples n_at_p is stored as its log10 only (a float would overflow).
MAX_LOG10_N = 300.0


@dataclass(frozen=True)
class SamplingScheme:
    """The sampler whose probability of the suffix is measured.

    Attributes:
        temperature: 0 for greedy (p_z is 0 or 1), > 0 to sample.
        top_k: keep the k most likely tokens (0: no top-k).
        top_p: nucleus mass (1.0: no top-p).
    """

    temperature: float = DEFAULT_TEMPERATURE
    top_k: int = DEFAULT_TOP_K
    top_p: float = DEFAULT_TOP_P

    def __post_init__(self) -> None:
        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t < math.inf:
            raise OptionError("pz_temperature", t, "give 0 (greedy) or a positive number, e.g. 1")
        k = self.top_k
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise OptionError("pz_top_k", k, "give a whole number ≥ 0 (0: no top-k), e.g. 40")
        p = self.top_p
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p <= 1:
            raise OptionError("pz_top_p", p, "give a share in (0, 1] (1: no top-p), e.g. 0.95")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def plain(self) -> bool:
        """Temperature 1 without top-k or top-p: the model's own distribution, which a server's
        log-probs give without the whole next-token distribution."""
        return self.temperature == 1 and self.top_k == 0 and self.top_p == 1

    def label(self) -> str:
        """How tables and the manifest name it (``temperature 1, top-k 40``)."""
        if self.greedy:
            return "greedy"
        parts = [f"temperature {self.temperature:g}"]
        if self.top_k:
            parts.append(f"top-k {self.top_k}")
        if self.top_p < 1:
            parts.append(f"top-p {self.top_p:g}")
        return ", ".join(parts)


def sampler_log_probs(logits: Any, targets: Any, scheme: SamplingScheme) -> Any:
    """Natural-log probability the sampler gives each target token, one row per position.

    Args:
        logits: ``(T, V)`` next-token logits, row t predicting ``targets[t]``.
        targets: ``(T,)`` token ids.

    Returns:
        ``(T,)`` float64 log-probabilities; ``-inf`` where the scheme cannot draw the token.
    """
    import torch

    scores = logits.double()
    if scheme.greedy:
        hit = scores.argmax(dim=-1) == targets
        zero = torch.zeros_like(hit, dtype=torch.float64)
        return torch.where(hit, zero, torch.full_like(zero, -math.inf))
    scores = _warped(scores, scheme)
    log_q = torch.log_softmax(scores, dim=-1)
    return log_q.gather(-1, targets.long().unsqueeze(-1)).squeeze(-1)


def sampler_log_distribution(logits: Any, scheme: SamplingScheme) -> Any:
    """The sampler's whole next-token distribution, natural log, one row per position: the
    rows :func:`sampler_log_probs` picks its targets from (greedy: 0 at the argmax, ``-inf``
    elsewhere)."""
    import torch

    scores = logits.double()
    if scheme.greedy:
        top = scores.argmax(dim=-1, keepdim=True)
        log_q = torch.full_like(scores, -math.inf)
        return log_q.scatter(-1, top, 0.0)
    return torch.log_softmax(_warped(scores, scheme), dim=-1)


def _warped(scores: Any, scheme: SamplingScheme) -> Any:
    """``scores`` through transformers' warpers, in the order ``generate`` builds them
    (temperature, top-k, top-p); each row is one position (the warpers work row by row)."""
    from transformers.generation.logits_process import (
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    warpers: list[Any] = []
    if scheme.temperature != 1:
        warpers.append(TemperatureLogitsWarper(float(scheme.temperature)))
    if scheme.top_k:
        warpers.append(TopKLogitsWarper(int(scheme.top_k)))
    if scheme.top_p < 1:
        warpers.append(TopPLogitsWarper(float(scheme.top_p)))
    for warp in warpers:
        scores = warp(None, scores)  # none of these reads the input ids
    return scores


def log10_sum(log_probs: Sequence[float]) -> float | None:
    """``log10 Π exp(l)`` of natural-log probabilities; ``None`` when one is ``-inf`` (p = 0)."""
    total = math.fsum(log_probs)
    return None if total == -math.inf else total / math.log(10)


def samples_needed(log10_p_z: float | None, p: float) -> tuple[float | None, float | None]:
    """``(n, log10 n)``: the fewest samples that write the suffix at least once with probability
    ``p`` (``(None, None)``: never, p_z = 0; ``n`` is ``None`` past ``MAX_LOG10_N``).

    Exact while ``1 − p_z`` is representable; for tiny p_z, ``log(1 − p_z) = −p_z`` to float
    precision, so ``n = −ln(1 − p) / p_z``, kept as its log10 (it may pass 10^308).
    """
    if log10_p_z is None:
        return None, None
    if log10_p_z >= 0:  # p_z = 1: the first sample is it
        return 1.0, 0.0
    want = math.log1p(-p)  # < 0
    if log10_p_z > -15:
        n = float(max(math.ceil(want / math.log1p(-(10.0**log10_p_z))), 1))
        return n, math.log10(n)
    log10_n = math.log10(-want) - log10_p_z
    return (float(math.ceil(10.0**log10_n)) if log10_n <= MAX_LOG10_N else None), log10_n


def extraction_chance(log10_p_z: float | None, n: float) -> float:
    """``1 − (1 − p_z)^n``: the chance that ``n`` samples write the suffix at least once."""
    if log10_p_z is None:
        return 0.0
    p_z = 10.0**log10_p_z
    if p_z >= 1:
        return 1.0
    return -math.expm1(n * math.log1p(-p_z))


def power_of_ten(log10_value: Any) -> str:
    """A count given by its log10, readable at any size (``12``, ``3.4e+05``, ``10^412``)."""
    if log10_value is None or (isinstance(log10_value, float) and math.isnan(log10_value)):
        return "–"
    if log10_value < 5:
        return f"{10**log10_value:.0f}"
    if log10_value < 300:
        return f"{10**log10_value:.1e}"
    return f"10^{log10_value:.0f}"
