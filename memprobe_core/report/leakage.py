"""Report figures of the leakage measures beyond one greedy answer (docs/method.md §14–§16):
probabilistic extraction's medians and the methods' own figures in Table 1's cells (each method
declares them: ``MethodSpec.figures``), and the lines describing one result.

Each reads the verbatim columns a result row carries (``memprobe_core.store.frames``); a frame
from a run that measured none of them gives NaN, and the text and HTML reports then leave the
columns out.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from memprobe_core.attacks.figures import Figure, TableColumn
from memprobe_core.attacks.registry import describe_result, table1_figures, table1_groups
from memprobe_core.measuring.prior_aware import describe_prior_aware
from memprobe_core.membership.extraction_probability import describe_extraction_probability
from memprobe_core.records import VerbatimRecord


def _numbers(group: pd.DataFrame, column: str) -> pd.Series:
    if column not in group:  # a frame from before the column existed
        return pd.Series([math.nan] * len(group), index=group.index, dtype=float)
    return pd.to_numeric(group[column], errors="coerce")


def pz_figures(group: pd.DataFrame) -> dict[str, float]:
    """Probabilistic extraction of a Table 1 cell: the median log10 p_z and log10 n_at_p over
    the units whose p_z > 0, and the share of measured units whose p_z = 0 (a suffix token the
    scheme cannot draw); NaN where none was measured."""
    log10_p_z = _numbers(group, "log10_p_z")
    zero = _numbers(group, "pz_outside_support") > 0
    measured = log10_p_z.notna() | zero
    positive = log10_p_z.notna()
    log10_n = _numbers(group, "log10_n_at_p")[positive]
    return {
        "log10_p_z": float(log10_p_z[positive].median()) if positive.any() else math.nan,
        "pz_zero": float(zero[measured].mean()) if measured.any() else math.nan,
        "log10_n_at_p": float(log10_n.median()) if log10_n.notna().any() else math.nan,
    }


def _aggregate(values: pd.Series, how: str) -> float:
    """A Table 1 cell of one method figure (``Table1Entry.aggregate``); NaN when no unit of the
    cell recorded it."""
    if how == "share":  # a verdict: the share of true ones among the units that recorded one
        recorded = values[values.notna()]
        return float(recorded.astype(bool).mean()) if len(recorded) else math.nan
    numbers = pd.to_numeric(values, errors="coerce").dropna()
    if not len(numbers):
        return math.nan
    return float(numbers.median() if how == "median" else numbers.mean())


def method_figures(group: pd.DataFrame) -> dict[str, float]:
    """The Table 1 cells of the methods' own figures (``MethodSpec.figures`` with a
    ``table1`` entry), NaN where not measured."""
    cells: dict[str, float] = {}
    for figure in table1_figures():
        how = figure.table1.aggregate if figure.table1 is not None else "mean"
        values = group[figure.name] if figure.name in group else pd.Series(dtype=object)
        cells[figure.name] = _aggregate(values, how)
    return cells


def shown_table1_figures(t1: pd.DataFrame) -> list[Figure]:
    """The methods' Table 1 figures a report shows: all of a method's, when some cell of
    ``t1`` measured one of them (a run without the method shows none of its columns)."""
    shown: list[Figure] = []
    for group in table1_groups():
        if any(f.name in t1 and t1[f.name].notna().any() for f in group):
            shown += group
    return shown


def table_cell(value: Any, column: TableColumn) -> Any:
    """A cell of a method's own report table, the same in the text and HTML reports: the value
    as it is, or, in a column that may be empty (``TableColumn.missing``), the integer as text
    or the missing mark (text, so the plain-text table aligns the column as one)."""
    if column.missing is None:
        return value
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return column.missing
    return str(int(value))


def describe(verbatim: VerbatimRecord | None) -> list[str]:
    """Plain-text lines on a result's leakage measures beyond its greedy answer (the CLI)."""
    verbatim = verbatim or {}
    lines = describe_result(verbatim)
    if "pz_scheme" in verbatim:
        lines.append(describe_extraction_probability(verbatim))
    if any(key.startswith("pam_") for key in verbatim):  # measured with --pam
        lines.append(describe_prior_aware(verbatim))
    return lines
