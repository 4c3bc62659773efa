"""Numbers, intervals, p-values and the small-n mark as text: one format for the terminal report,
the HTML report and the figures."""

from __future__ import annotations

import math
from typing import Any

from memprobe_core.measuring.sampler import power_of_ten  # noqa: F401  (the report's too)

SMALL_N_MARK = "†"
# A value that is missing (not measured, undefined): never "None" or "nan".
MISSING = "–"


def num(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    return f"{value:.{digits}f}"


def with_ci(mean: Any, lo: Any, hi: Any) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return MISSING
    if isinstance(lo, float) and math.isnan(lo):
        return num(mean)
    return f"{num(mean)} [{num(lo)}, {num(hi)}]"


def signed_ci(mean: float, lo: float, hi: float) -> str:
    if math.isnan(lo):
        return f"{mean:+.3f}"
    return f"{mean:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def n_mark(n: Any, small: Any) -> str:
    return f"{n}{SMALL_N_MARK}" if bool(small) else str(n)


def p_text(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    return "<0.001" if value < 0.001 else f"{value:.3f}"
