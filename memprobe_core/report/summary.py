"""The answer a report opens with: its verdicts and headline figures, in a few sentences.

The text report prints these lines under its header, the HTML report shows them as its first
section and the JSON carries them as ``summary``; each is built here once, from the
:class:`~memprobe_core.report.build.Report`, so the three say the same thing.

- Dataset inference: each length's verdict (the controls folded in,
  :mod:`memprobe_core.membership.verdict`).
- Membership (labelled audits): the table's verdict.
- Extraction: per length, the method with the highest pooled Mem, its interval and n, and how
  its units stand against Mem's chance level (``memprobe_core.chance``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

import pandas as pd

from memprobe_core.chance import ABOVE_CHANCE, NOT_ABOVE_CHANCE
from memprobe_core.membership.blind import BlindBaseline
from memprobe_core.membership.inference import DatasetInference
from memprobe_core.membership.verdict import inference_verdict, membership_verdict
from memprobe_core.report.formatting import with_ci


class ReportParts(Protocol):
    """What the summary reads of a :class:`~memprobe_core.report.build.Report` (a protocol, so
    this module need not import the one that imports it)."""

    @property
    def table1(self) -> pd.DataFrame: ...
    @property
    def membership(self) -> pd.DataFrame: ...
    @property
    def random_split(self) -> pd.DataFrame: ...
    @property
    def blind_baseline(self) -> BlindBaseline | None: ...
    @property
    def dataset_inference(self) -> Sequence[DatasetInference]: ...


def summary_lines(report: ReportParts) -> list[str]:
    """The report's answer as plain sentences (no markup; callers escape for their medium)."""
    return verdict_lines(report) + _extraction_lines(report.table1)


def verdict_lines(report: ReportParts) -> list[str]:
    """Each verdict's headline, one line each: dataset inference per length, then membership."""
    lines = [
        f"Dataset inference, length {one.length}: "
        + inference_verdict(one, report.blind_baseline).headline
        for one in report.dataset_inference
    ]
    membership = membership_verdict(report.membership, report.blind_baseline, report.random_split)
    if membership is not None:
        lines.append(f"Membership: {membership.headline}")
    return lines


def pooled_rows(table1: pd.DataFrame) -> pd.DataFrame:
    """Table 1's rows over every domain: ``all`` where there are several, else the one domain."""
    if (table1["domain"] == "all").any():
        return table1[table1["domain"] == "all"]
    return table1


def _extraction_lines(table1: pd.DataFrame) -> list[str]:
    if table1.empty:
        return []
    rows = pooled_rows(table1)
    lines = []
    for length, part in rows.groupby("length", sort=True):
        scored = part[pd.to_numeric(part["mem"], errors="coerce").notna()]
        if scored.empty:
            continue
        best = scored.loc[pd.to_numeric(scored["mem"]).idxmax()]
        lines.append(
            f"Highest Mem at length {int(length)}: {best['method_label']} "
            f"{_interval(best)} over {_plural(int(best['n']), 'snippet')}; {_chance(best)}"
        )
    return lines


def _interval(row: Any) -> str:
    """Mem with its interval; Mem alone when either bound is missing (None or NaN)."""
    lo, hi = row.get("mem_lo"), row.get("mem_hi")
    if pd.isna(lo) or pd.isna(hi):
        lo = hi = math.nan  # with_ci's "no interval"
    return with_ci(float(row["mem"]), float(lo), float(hi))


def _chance(row: Any) -> str:
    units, share = row.get("chance_units"), row.get("beats_chance")
    if pd.isna(units) or int(units) == 0 or pd.isna(share):
        return "its chance level is undefined (see Table 1's note)"
    beating = round(float(share) * int(units))
    if int(units) == 1:  # one unit: the Probe and Compare pages' words
        verdict = ABOVE_CHANCE if beating else NOT_ABOVE_CHANCE
        return f"this Mem is {verdict} (chance level {float(row['mem_chance']):.3f})"
    return (
        f"{beating} of {_plural(int(units), 'unit')} beat Mem's chance level "
        f"(mean level {float(row['mem_chance']):.3f})"
    )


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
