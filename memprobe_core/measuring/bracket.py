"""The extraction-risk bracket of one suffix in words an auditor reads (docs/method.md §14).

Three measures of one unit's ``verbatim`` record price the same suffix from three sides:

- ``near_verbatim_log10_lower`` (with ``near_verbatim_edits``): a certified **lower** bound on the
  probability that one sample under the p_z scheme writes the suffix within that many token
  edits;
- ``log10_p_z``: the **exact** probability that one sample under the scheme writes it verbatim
  (§14);
- ``extraction_bits``: the rank-based cost ``b`` (§21): no decoding, of any configuration, writes
  its easiest window in fewer than ``2^b`` expected tries — an **upper** bound on the risk.

:func:`bracket_clauses` turns them into one clause each, e.g. ``at least 1 in 3.1e+04 samples
writes it within 5 edits``; ``1 in 2.0e+06 writes it verbatim``; ``no decoding needs fewer than
2^12.3 tries``. Counts use memprobe's plain number forms (:func:`power_of_ten`'s ``12``,
``3.4e+05``, ``10^412``; powers of two ``2^12``), never superscripts, so a terminal and a log
read them alike. Each bound is rounded on its safe side: the lower bound's count up (a claim of
"at least 1 in N" never outruns the certificate), the bits down. A side that was not measured is
said plainly, with the record's reason when it has one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from memprobe_core.measuring.sampler import power_of_ten

# What a missing measure is called in words.
NOT_MEASURED = "not measured"
# Counts past 10^300 are written as a bare power of ten (power_of_ten's own cut-off).
_LAST_MANTISSA_POWER = 300
# A probability above 1/10 reads better as a share of samples ("at least 42.1 %") than as
# "1 in 2.4".
_SHARE_ABOVE = -1.0
# Float noise in a count that is a whole number (1/0.2 = 5.000000000000001) is not rounded up.
_WHOLE_TOLERANCE = 1e-9


def bracket_clauses(verbatim: Mapping[str, Any] | None) -> list[str]:
    """The three sides of the bracket, each a clause: near-verbatim lower bound, verbatim p_z,
    rank-based bound (in that order, from the likeliest reading to the worst case)."""
    record = verbatim or {}
    return [_near_verbatim_clause(record), _p_z_clause(record), _bits_clause(record)]


def describe_bracket(verbatim: Mapping[str, Any] | None) -> str:
    """The bracket as one sentence, led by the sampling scheme its probabilities are under:
    ``Extraction risk (top-k=40): at least 1 in …; 1 in … writes it verbatim; no decoding …``."""
    record = verbatim or {}
    scheme = record.get("pz_scheme")
    lead = f"Extraction risk ({scheme})" if scheme else "Extraction risk"
    return f"{lead}: " + "; ".join(bracket_clauses(record)) + "."


def has_bounds(verbatim: Mapping[str, Any] | None) -> bool:
    """Whether the record holds a bound around p_z, measured or said not to be (a run from before
    them holds neither: its p_z alone is described as before)."""
    record = verbatim or {}
    return any(key in record for key in ("near_verbatim_log10_lower", "extraction_bits"))


def _near_verbatim_clause(record: Mapping[str, Any]) -> str:
    edits = record.get("near_verbatim_edits")
    within = f"within {edits} edit{'' if edits == 1 else 's'}" if edits is not None else "nearly"
    if "near_verbatim_log10_lower" not in record or "near_verbatim_not_measured" in record:
        return _missing("near-verbatim lower bound", record.get("near_verbatim_not_measured"))
    log10_lower = record["near_verbatim_log10_lower"]
    if log10_lower is None:  # the search certified no probability at all: a bound of 0
        return f"no sample is certified to write it {within} (lower bound 0)"
    if log10_lower >= 0:
        return f"every sample writes it {within}"
    if log10_lower > _SHARE_ABOVE:
        return f"at least {share_text(10.0**log10_lower, down=True)} of samples write it {within}"
    return f"at least 1 in {samples_count(-float(log10_lower), up=True)} samples writes it {within}"


def _p_z_clause(record: Mapping[str, Any]) -> str:
    if "pz_scheme" not in record or "pz_not_measured" in record:
        return _missing("verbatim p_z", record.get("pz_not_measured"))
    log10_p_z = record.get("log10_p_z")
    if log10_p_z is None:  # p_z = 0: a suffix token the scheme never draws
        return "no sample writes it verbatim (p_z = 0)"
    if log10_p_z >= 0:
        return "every sample writes it verbatim (p_z = 1)"
    if log10_p_z > _SHARE_ABOVE:
        share = share_text(10.0**log10_p_z, down=False)
        exactly = "" if share.startswith("over") else "exactly "
        return f"{exactly}{share} of samples write it verbatim"
    return f"exactly 1 in {samples_count(-float(log10_p_z), up=False)} writes it verbatim"


def _bits_clause(record: Mapping[str, Any]) -> str:
    if "extraction_bits" not in record or "extraction_not_measured" in record:
        return _missing("rank-based bound", record.get("extraction_not_measured"))
    bits = record["extraction_bits"]
    if bits is None or not math.isfinite(bits):  # stored null: a token of probability 0
        return "no decoding can write it (b = ∞)"
    if bits <= 0:
        return "a single try of some decoding may write it (b = 0)"
    window = record.get("extraction_window_tokens")
    what = f" to write its easiest {window}-token window" if window else ""
    return f"no decoding needs fewer than 2^{bits_text(float(bits))} tries{what}"


def _missing(side: str, reason: Any) -> str:
    return f"{side} {NOT_MEASURED}" + (f" ({reason})" if reason else "")


def samples_count(log10_count: float, *, up: bool) -> str:
    """A count ``10^log10_count`` in power_of_ten's forms (``12``, ``3.4e+05``, ``10^412``),
    rounded up when ``up`` (a lower bound's "1 in N" must not claim more than it certifies),
    else to the nearest."""
    if not up:
        return power_of_ten(log10_count)
    if log10_count < 5:
        count = 10.0**log10_count
        return f"{math.ceil(count * (1 - _WHOLE_TOLERANCE)):.0f}"
    if log10_count < _LAST_MANTISSA_POWER:
        exponent = math.floor(log10_count)
        mantissa = math.ceil(10 ** (log10_count - exponent) * 10 * (1 - _WHOLE_TOLERANCE)) / 10
        if mantissa >= 10:
            mantissa, exponent = 1.0, exponent + 1
        return f"{mantissa:.1f}e+{exponent:02d}"
    return f"10^{math.ceil(log10_count)}"


def share_text(p: float, *, down: bool) -> str:
    """``p`` as a percentage to one decimal, rounded down when ``down`` (a lower bound), else to
    the nearest; a ``p`` below 1 never reads as 100 % (``over 99.9 %``)."""
    tenths = (math.floor if down else round)(p * 1000 * (1 + _WHOLE_TOLERANCE))
    if tenths >= 1000 and p < 1:
        return "over 99.9 %"
    return f"{tenths / 10:.1f} %"


def bits_text(bits: float) -> str:
    """``b`` rounded down to one decimal (``2^12.3`` tries: never more than certified); a whole
    number without its ``.0``."""
    floored = math.floor(bits * 10 * (1 + _WHOLE_TOLERANCE)) / 10
    return f"{floored:.0f}" if floored.is_integer() else f"{floored:.1f}"
