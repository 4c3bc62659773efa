"""Statistical conventions shared by membership inference and the report.

Below both layers (``membership`` evaluates and judges, ``report`` prints), so neither has to
import the other for a level, a threshold or a correction (docs/method.md, "Statistics for
reports"). The report's own machinery — BCa intervals, paired tests — stays in
:mod:`memprobe_core.report.stats`.
"""

from __future__ import annotations

import numpy as np

CONFIDENCE = 0.95  # the level of every interval: the report's and membership evaluation's
# Cells with fewer values are flagged whatever the interval: BCa covers a mean 0.89 of the time
# at n = 10 and less below (bench/stats.py; report.stats's docstring has the figures).
SMALL_N = 10


def holm(p_values: object) -> np.ndarray:
    """Holm's step-down adjustment of a family of p-values (NaN stays NaN, not counted).

    Holm controls the family-wise error rate (the chance of *any* false "significant" gain in a
    report) without assuming the tests are independent — ours are not (one baseline is shared by
    every method). ``scipy.stats.false_discovery_control`` is Benjamini–Hochberg, which controls
    the false discovery *rate*, a weaker promise, so Holm is written out here.

    Returns:
        Adjusted p-values in the input order: for the k-th smallest of m,
        ``max_{j<=k} min(1, (m - j + 1) * p_(j))``.
    """
    p = np.asarray(p_values, dtype=float).ravel()  # (m_all,)
    out = np.full(p.shape, np.nan)
    valid = np.flatnonzero(~np.isnan(p))
    m = valid.size
    order = valid[np.argsort(p[valid], kind="stable")]  # indices, smallest p first
    scaled = (m - np.arange(m)) * p[order]  # (m - j + 1) * p_(j), j = 1..m
    out[order] = np.minimum(1.0, np.maximum.accumulate(scaled))
    return out
