"""The extraction-risk bracket of Table 1's cells (docs/method.md §14): each method × domain ×
length cell summarises its units' bounds around p_z, and the text and HTML reports say them in
the words of :mod:`memprobe_core.measuring.bracket`.

A cell is summarised by the median unit of each measure (medians over the units that measured
it, each bound over the units where it is informative: a near-verbatim bound above 0, a finite
b; as p_z's median is over the units with p_z > 0) and by its least protected unit's bits,
the figure a release limits (``memprobe gate``'s ``min_bits``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from memprobe_core.measuring.bracket import bits_text, bracket_clauses, has_bounds
from memprobe_core.records import VerbatimRecord

# Table 1's bracket columns, named as the unit record's keys they summarise so that a cell reads
# as a record (:func:`cell_bracket_record`).
BRACKET_COLUMNS = [
    "near_verbatim_log10_lower",
    "near_verbatim_edits",
    "near_verbatim_units",
    "extraction_bits",
    "extraction_bits_min",
    "extraction_bits_units",
]


def unit_bits(frame: pd.DataFrame) -> pd.Series:
    """Each unit's ``extraction_bits``: NaN where not measured, ∞ for b = ∞ (stored null beside
    its window, docs/method.md §21; a measured unit always has its window)."""
    bits = _numbers(frame, "extraction_bits")
    measured = bits.notna() | _numbers(frame, "extraction_window_tokens").notna()
    return bits.fillna(math.inf).where(measured & ~_texts(frame, "extraction_not_measured"))


def unit_near_verbatim_log10(frame: pd.DataFrame) -> pd.Series:
    """Each unit's ``near_verbatim_log10_lower``: NaN where not measured, −∞ for a bound of 0
    (nothing certified: stored null beside its edit budget)."""
    lower = _numbers(frame, "near_verbatim_log10_lower")
    measured = lower.notna() | _numbers(frame, "near_verbatim_edits").notna()
    return lower.fillna(-math.inf).where(measured & ~_texts(frame, "near_verbatim_not_measured"))


def bracket_figures(group: pd.DataFrame) -> dict[str, float]:
    """The bracket of a Table 1 cell: the median near-verbatim lower bound (log10, over the
    units whose bound is above 0) and edit budget, the median and the least extraction bits
    (over the units with a finite b), and how many units measured each; NaN where none."""
    lower = unit_near_verbatim_log10(group)
    edits = _numbers(group, "near_verbatim_edits")[lower.notna()]
    bits = unit_bits(group)
    finite = bits[np.isfinite(bits)]
    return {
        "near_verbatim_log10_lower": _median(lower[np.isfinite(lower)]),
        "near_verbatim_edits": _median(edits.dropna()),
        "near_verbatim_units": float(lower.notna().sum()),
        "extraction_bits": _median(finite),
        "extraction_bits_min": float(finite.min()) if len(finite) else math.nan,
        "extraction_bits_units": float(bits.notna().sum()),
    }


def cell_bracket_record(row: Any, scheme: Any) -> VerbatimRecord:
    """A Table 1 cell's figures as the record :func:`bracket_clauses` reads: the median unit of
    each measure; a measure no unit of the cell measured is left out ("not measured"), and one
    measured with no informative value is null (p_z = 0, a bound of 0, b = ∞)."""
    record: VerbatimRecord = {}
    if _finite(row.get("pz_zero")):
        record["pz_scheme"] = str(scheme) if scheme else None
        record["log10_p_z"] = _or_none(row.get("log10_p_z"))
    if _finite(row.get("near_verbatim_units")) and row["near_verbatim_units"] > 0:
        record["near_verbatim_log10_lower"] = _or_none(row.get("near_verbatim_log10_lower"))
        edits = row.get("near_verbatim_edits")
        record["near_verbatim_edits"] = int(edits) if _finite(edits) else None
    if _finite(row.get("extraction_bits_units")) and row["extraction_bits_units"] > 0:
        record["extraction_bits"] = _or_none(row.get("extraction_bits"))
    return record


def bracket_lines(t1: pd.DataFrame, scheme: Any) -> list[tuple[Any, str]]:
    """``(Table 1 row, words)`` for each cell that measured a bound around p_z: its median
    unit's bracket, then its least protected unit's bits (``[]``: no cell did, e.g. a run from
    before the bounds)."""
    lines = []
    for _, row in t1.iterrows():
        record = cell_bracket_record(row, scheme)
        if not has_bounds(record):
            continue
        words = "; ".join(bracket_clauses(record))
        if _finite(row.get("extraction_bits_min")):
            words += f"; the least protected unit: 2^{bits_text(row['extraction_bits_min'])} tries"
        lines.append((row, words))
    return lines


def _numbers(group: pd.DataFrame, column: str) -> pd.Series:
    if column not in group:  # a frame from before the column existed
        return pd.Series(math.nan, index=group.index, dtype=float)
    return pd.to_numeric(group[column], errors="coerce")


def _texts(group: pd.DataFrame, column: str) -> pd.Series:
    """Whether each unit recorded a (non-empty) text in ``column``: a reason it was not
    measured."""
    if column not in group:
        return pd.Series(False, index=group.index)
    return group[column].notna() & (group[column].astype(str) != "")


def _median(values: pd.Series) -> float:
    return float(values.median()) if len(values) else math.nan


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _or_none(value: Any) -> float | None:
    return float(value) if _finite(value) else None
