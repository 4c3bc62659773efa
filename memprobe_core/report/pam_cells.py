"""The prior-aware check in the reports (docs/method.md §24): each Table 1 cell counts its units'
verdicts, and a run of one snippet says each unit's check in words.

The verdicts and every sentence about one unit's check are
:mod:`memprobe_core.measuring.prior_aware`'s; this module only counts them and reads them back
from the results frame's ``pam_*`` columns (``store.frames``). A run stored before the check (no
``pam_*`` columns) or one without ``--pam`` counts nothing, and its cells read "–".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from memprobe_core.attacks.registry import method_label
from memprobe_core.measuring.prior_aware import (
    COMMON,
    LIKELY_TOKEN_P,
    MEMORISED,
    NOT_MEMORISED,
    PAM_ALPHA,
    PAM_KEYS,
    PAM_MARGIN_LOG10,
    PAM_VERDICTS,
    describe_prior_aware,
    short_verdict,
)
from memprobe_core.records import VerbatimRecord

# Table 1's counts per cell: units with a verdict, each verdict's units, units not measured.
_VERDICT_COUNTS = {
    MEMORISED: "pam_memorised",
    COMMON: "pam_common",
    NOT_MEMORISED: "pam_not_memorised",
}
PAM_COLUMNS = ["pam_units", *_VERDICT_COUNTS.values(), "pam_unmeasured_units"]

# Where a cell has nothing to count: the run did not use --pam (or predates the check).
NO_CHECK = "–"


def pam_figures(group: pd.DataFrame) -> dict[str, int]:
    """A Table 1 cell's counts: how many units have a verdict, how many have each verdict, and
    how many recorded why the check was not measured (all 0 for a run without ``--pam``)."""
    verdicts = _column(group, "pam_verdict")
    counts = {
        column: int((verdicts == verdict).sum()) for verdict, column in _VERDICT_COUNTS.items()
    }
    reasons = _column(group, "pam_not_measured")
    unmeasured = reasons.notna() & (reasons.astype(str) != "") & ~verdicts.isin(PAM_VERDICTS)
    return {
        "pam_units": int(verdicts.isin(PAM_VERDICTS).sum()),
        **counts,
        "pam_unmeasured_units": int(unmeasured.sum()),
    }


def pam_cell(row: Mapping[str, Any]) -> str:
    """A Table 1 cell's verdicts in words, the same in the text and HTML reports: e.g.
    "2 memorised · 1 common / 3" (verdicts no unit had are left out; "/ n": the units
    measured), the units not measured after it, and "–" when no unit was checked."""
    measured = _count(row.get("pam_units"))
    unmeasured = _count(row.get("pam_unmeasured_units"))
    if not measured and not unmeasured:
        return NO_CHECK
    parts = [
        f"{_count(row.get(column))} {short_verdict(verdict)}"
        for verdict, column in _VERDICT_COUNTS.items()
        if _count(row.get(column))
    ]
    text = f"{' · '.join(parts)} / {measured}" if measured else "none measured"
    return f"{text} ({unmeasured} not measured)" if unmeasured else text


def has_pam(t1: pd.DataFrame) -> bool:
    """Whether some Table 1 cell checked or tried to check a unit (the column is shown)."""
    return any(
        column in t1 and (pd.to_numeric(t1[column], errors="coerce").fillna(0) > 0).any()
        for column in ("pam_units", "pam_unmeasured_units")
    )


PAM_NOTE = (
    "Prior-aware check (docs/method.md §24; --pam): per cell, the units whose suffix is "
    f"{MEMORISED} (likely after its own prefix, each token p ≥ {LIKELY_TOKEN_P} on geometric "
    f"average, and tied to it: rank p ≤ {PAM_ALPHA} against unrelated prefixes of its domain and "
    f"at least 10^{PAM_MARGIN_LOG10:g} times as likely as after them), {COMMON} (likely, but "
    f"about as likely after unrelated prefixes) or {NOT_MEMORISED} (not likely even after its "
    "own prefix), out of the units measured; – where the run did not use --pam."
)


def pam_notes(meta: Mapping[str, Any]) -> list[str]:
    """The report's lines on the check: what the column means (when some cell has one), then
    each unit's check in words (a run of one snippet, as its chance readings)."""
    if not meta.get("pam"):
        return []
    return [PAM_NOTE, *(meta.get("pam_readings") or [])]


def pam_meta(results: pd.DataFrame) -> dict[str, Any]:
    """The report meta's ``pam`` (some unit was checked, or tried) and, for a run of one
    snippet, ``pam_readings``: each checked unit's sentence (``describe_prior_aware``)."""
    if results.empty or not any(c in results for c in PAM_KEYS):
        return {}
    checked = [row for _, row in results.iterrows() if unit_pam_record(row)]
    if not checked:
        return {}
    info: dict[str, Any] = {"pam": True}
    if results["snippet_id"].nunique() == 1:
        info["pam_readings"] = [
            f"{method_label(str(row['method']))} @ {int(row['length'])}: "
            f"{describe_prior_aware(unit_pam_record(row))}"
            for row in checked
        ]
    return info


def unit_pam_record(row: Mapping[str, Any]) -> VerbatimRecord:
    """A results-frame row's ``pam_*`` keys back as the unit's record (a frame's NaN is a key
    the unit did not record); ``{}`` for a unit the check did not run on."""
    record: VerbatimRecord = {}
    for column in PAM_KEYS:
        value = row.get(column)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            continue
        record[column] = value
    return record


def unit_pam_words(verbatim: Mapping[str, Any] | None) -> str | None:
    """One unit's check in a few words for its prompt-and-output block ("prior-aware check:
    memorised"); ``None`` for a unit the check did not run on."""
    verbatim = verbatim or {}
    if verbatim.get("pam_verdict") in PAM_VERDICTS:
        return f"prior-aware check: {verbatim['pam_verdict']}"
    if verbatim.get("pam_not_measured"):
        return "prior-aware check: not measured"
    return None


def _column(group: pd.DataFrame, column: str) -> pd.Series:
    if column not in group:  # a frame from before the check
        return pd.Series(None, index=group.index, dtype=object)
    return group[column]


def _count(value: Any) -> int:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return 0
    return int(value)


def with_pam_cell(t1: pd.DataFrame, label: str = "pam") -> pd.DataFrame:
    """Table 1 for a screen: the check's count columns folded into one column of
    :func:`pam_cell`'s words (``label``), or dropped when no cell checked a unit."""
    shown = t1.drop(columns=[c for c in PAM_COLUMNS if c in t1])
    if has_pam(t1):
        shown[label] = [pam_cell(row) for row in t1.to_dict("records")]
    return shown
