"""Statistics behind the report: BCa intervals and paired tests (Holm's correction, the level
and the small-n threshold are in :mod:`memprobe_core.stats`, shared with membership).

Why these choices (docs/method.md, "Statistics for reports"): audits often have 5–30 snippets per cell
and Mem scores on [0, 1] are skewed (many near 0). On Beta(0.5, 3) samples (``bench/stats.py``,
2,000 samples per n) the former percentile bootstrap with 1,000 resamples covered the mean
0.78 / 0.86 / 0.93 of the time at n = 5 / 10 / 30; the bias-corrected and accelerated (BCa)
bootstrap with 5,000 resamples covers 0.80 / 0.89 / 0.94 — better, still short of 0.95 below
n = 10, so cells with fewer than :data:`~memprobe_core.stats.SMALL_N` values are flagged whatever the interval.

Defined results for degenerate samples (scipy warns and returns NaN there):

- fewer than two values, or all values equal: **no interval** — ``(nan, nan)``; the report shows
  the mean alone. A zero-width interval would claim a certainty that three identical scores do not
  give (the bootstrap cannot see a spread the sample does not show).
- a BCa interval scipy still cannot compute (NaN bounds): no interval either, logged at DEBUG.

Paired test of a gain (``method − baseline`` per snippet), two-sided:

- differences with ``|d| <= TIE_TOLERANCE`` are ties and are dropped (Wilcoxon's own convention,
  scipy's ``zero_method="wilcox"``; the sign test drops the same pairs);
- no non-zero difference: no test can show a difference; ``p = 1.0``, test ``"none"``;
- fewer than :data:`WILCOXON_MIN_NONZERO` non-zero differences: the exact sign test
  (``scipy.stats.binomtest``). Below 6 pairs neither test can reach p < 0.05, and the sign test
  does not need the signed-rank test's symmetry assumption, which so few pairs cannot support;
- otherwise the Wilcoxon signed-rank test: exact null distribution when the ``|d|`` are distinct
  and n ≤ 50; sign flips of the average ranks (all 2^n of them up to n = 16, else 9,999 seeded
  draws) when ``|d|`` has ties (scipy's "exact" assumes none, and ties are common for ratios of
  small integers); the normal approximation above 50 pairs.
"""

from __future__ import annotations

import logging
import math
import warnings
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats

from memprobe_core.stats import CONFIDENCE

log = logging.getLogger(__name__)

DEFAULT_RESAMPLES = 5000
MIN_RESAMPLES = 100
# 100k resamples already pin a 95 % bound to ~0.1 % of its own spread; more only costs time.
MAX_RESAMPLES = 100_000
WILCOXON_MIN_NONZERO = 6
# Differences smaller than this count as ties (scores are ratios of small integers, so real
# differences are far larger; this only absorbs float noise).
TIE_TOLERANCE = 1e-9
# Bootstrap and jackknife arrays are (batch, n); cap their size (~32 MB of float64).
_MAX_BATCH_ELEMENTS = 4_000_000
_PERMUTATIONS = 9999
_EXACT_FLIPS_UP_TO = 16  # 2^16 sign patterns × 16 ranks: ~8 MB, a few ms

TestName = Literal["wilcoxon", "sign", "none"]


@dataclass(frozen=True)
class PairedTest:
    """Outcome of :func:`paired_test`.

    Attributes:
        test: ``"wilcoxon"``, ``"sign"`` (exact sign test) or ``"none"`` (all pairs tied).
        p_value: two-sided p-value (1.0 when ``test == "none"``).
        nonzero: pairs whose difference is not a tie (the pairs the test uses).
    """

    test: TestName
    p_value: float
    nonzero: int


def validate_resamples(resamples: int) -> int:
    """``resamples`` if it is a whole number in [MIN_RESAMPLES, MAX_RESAMPLES].

    Raises:
        ValueError: naming the value given and the range to give.
    """
    if (
        isinstance(resamples, bool)
        or not isinstance(resamples, (int, np.integer))
        or not (MIN_RESAMPLES <= resamples <= MAX_RESAMPLES)
    ):
        raise ValueError(
            f"bootstrap resamples must be a whole number from {MIN_RESAMPLES} to {MAX_RESAMPLES} "
            f"(got {resamples!r}); give {DEFAULT_RESAMPLES} (the default) unless you need otherwise"
        )
    return int(resamples)


def _clean(values: np.ndarray | list[float] | object) -> np.ndarray:
    data = np.asarray(values, dtype=float).ravel()  # (n,)
    return data[~np.isnan(data)]


def bca_interval(
    values: object, *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> tuple[float, float]:
    """BCa bootstrap 95 % interval of the mean; NaNs dropped, seeded (reproducible).

    Args:
        values: the sample (array-like of floats).
        resamples: bootstrap resamples, validated by :func:`validate_resamples`.
        seed: seed of the resampling.

    Returns:
        ``(low, high)``, or ``(nan, nan)`` for fewer than two values, all values equal, or a
        degenerate bootstrap distribution (see the module docstring).
    """
    resamples = validate_resamples(resamples)
    data = _clean(values)
    if data.size < 2 or np.ptp(data) == 0:
        return (math.nan, math.nan)
    batch = max(1, _MAX_BATCH_ELEMENTS // data.size)
    with warnings.catch_warnings():
        # Degenerate cases are handled below (NaN → no interval); scipy's warning is noise here.
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        result = stats.bootstrap(
            (data,),
            np.mean,
            n_resamples=resamples,
            method="BCa",
            confidence_level=CONFIDENCE,
            vectorized=True,
            batch=batch,
            rng=np.random.default_rng(seed),
        )
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    if not (math.isfinite(low) and math.isfinite(high)):
        log.debug("BCa interval undefined for a sample of %d values; shown without one", data.size)
        return (math.nan, math.nan)
    return (low, high)


def percentile_interval(
    values: object, *, resamples: int = 1000, seed: int = 0
) -> tuple[float, float]:
    """The former percentile bootstrap 95 % interval of the mean (kept for ``bench/stats.py``).

    Returns ``(nan, nan)`` for fewer than two values.
    """
    data = _clean(values)
    if data.size < 2:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, data.size, size=(resamples, data.size))  # (B, n)
    lo, hi = np.percentile(data[idx].mean(axis=1), [2.5, 97.5])  # of the (B,) means
    return float(lo), float(hi)


def paired_test(differences: object, *, seed: int = 0) -> PairedTest:
    """Two-sided paired test that the differences are centred on zero (rules: module docstring).

    Args:
        differences: ``method − baseline`` per pair; NaNs dropped.
        seed: seed of the permutation p-value (used only when ``|d|`` has ties).
    """
    data = _clean(differences)
    nonzero = data[np.abs(data) > TIE_TOLERANCE]
    if nonzero.size == 0:
        return PairedTest("none", 1.0, 0)
    if nonzero.size < WILCOXON_MIN_NONZERO:
        wins = int((nonzero > 0).sum())
        return PairedTest("sign", float(stats.binomtest(wins, nonzero.size).pvalue), nonzero.size)
    magnitudes = np.abs(nonzero)
    if np.unique(magnitudes).size < magnitudes.size and nonzero.size <= 50:
        return PairedTest("wilcoxon", _signed_rank_flip_p(nonzero, seed=seed), nonzero.size)
    # Distinct |d|: scipy's exact table (n <= 50) or its normal approximation (n > 50).
    result = stats.wilcoxon(nonzero, zero_method="wilcox", alternative="two-sided", method="auto")
    return PairedTest("wilcoxon", float(result.pvalue), nonzero.size)


def _signed_rank_flip_p(nonzero: np.ndarray, *, seed: int) -> float:
    """Two-sided signed-rank p-value with tied (average) ranks, by sign flips.

    Under H0 every difference's sign is a fair coin, so the null distribution of the rank sum of
    the positive differences comes from flipping signs: all 2^n flips when n <= 16 (exact),
    otherwise a seeded sample. Written out because scipy's ``wilcoxon(method=PermutationMethod())``
    took ~6 s for 15 pairs; this takes milliseconds and is checked against full enumeration.
    """
    ranks = stats.rankdata(np.abs(nonzero))  # (n,), ties get their average rank
    n = nonzero.size
    centre = ranks.sum() / 2
    observed = abs(ranks[nonzero > 0].sum() - centre)
    if n <= _EXACT_FLIPS_UP_TO:
        signs = (np.arange(2**n)[:, None] >> np.arange(n)) & 1  # (2^n, n): every sign pattern
        r_plus = signs @ ranks  # (2^n,)
        return float(np.mean(np.abs(r_plus - centre) >= observed - 1e-9))
    signs = np.random.default_rng(seed).integers(0, 2, size=(_PERMUTATIONS, n))  # (B, n)
    r_plus = signs @ ranks  # (B,)
    # The observed assignment counts as one of the draws, so p is never 0 (Phipson & Smyth 2010).
    hits = int(np.sum(np.abs(r_plus - centre) >= observed - 1e-9))
    return (hits + 1) / (_PERMUTATIONS + 1)
