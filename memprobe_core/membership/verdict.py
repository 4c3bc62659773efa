"""Verdicts that carry their controls: what a test or a membership table allows one to conclude
once the validity controls have had their say (docs/method.md §10, "Verdicts").

A p-value below the level, or an AUROC of 1.0, is evidence of membership only if nothing but
membership separates the two sets and there are enough texts for the figure to mean something.
Every report (text, JSON, HTML, dashboard) shows the verdict these functions return, first,
instead of the bare test result, so a control that voids a result can no longer sit below it
unread. The rules reuse the controls' own thresholds; nothing here is a new statistic:

- **blind baseline separable** (:attr:`BlindBaseline.separable`, the warning rule of
  :mod:`memprobe_core.membership.blind`): the sets differ without the model → *inconclusive*.
- **too few texts**: fewer than :data:`~memprobe_core.stats.SMALL_N` in a set (the
  report's small-cell mark: intervals and tests there are rough, docs/method.md §3) →
  *inconclusive*. Dataset inference counts the texts its test compares (the B halves).
- **a control that fails**: the membership table's random-split control flagged, the blind
  baseline doing as well as the best score (its warning), or dataset inference's own random-split
  control rejecting → *inconclusive*.
- otherwise *evidence* or *no evidence*, with p and n: dataset inference by its Welch test at its
  level; the membership table by the random-split control's test of AUROC = 0.5 (Mann–Whitney,
  Holm-adjusted over the table's rows, below :data:`~memprobe_core.membership.blind.ALPHA`) on
  a score whose AUROC is above 0.5 — Holm because a table has a dozen rows, and "some interval
  misses 0.5" would fire by chance in many sound audits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from memprobe_core.membership.blind import ALPHA, BlindBaseline, _two_sided_p
from memprobe_core.membership.inference import DatasetInference
from memprobe_core.stats import SMALL_N, holm

Conclusion = Literal["evidence", "no_evidence", "inconclusive"]
EVIDENCE: Conclusion = "evidence"
NO_EVIDENCE: Conclusion = "no_evidence"
INCONCLUSIVE: Conclusion = "inconclusive"
# The membership table's column naming what voids a row (``None``: nothing does).
VOIDED_BY = "voided_by"


@dataclass(frozen=True)
class Verdict:
    """What the figures allow, with the controls folded in.

    Attributes:
        conclusion: ``evidence``, ``no_evidence`` or ``inconclusive``.
        headline: one line, starting with the conclusion ("inconclusive: …").
        reasons: why, one sentence each: what voids the result first, then what the test
            alone says, then cautions.
    """

    conclusion: Conclusion
    headline: str
    reasons: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "conclusion": self.conclusion,
            "headline": self.headline,
            "reasons": list(self.reasons),
        }


@dataclass(frozen=True)
class _Void:
    """A control that voids a result: ``short`` goes in the headline, ``detail`` says why in
    the reasons, ``badge`` marks a voided row of a table."""

    short: str
    detail: str
    badge: str

    @property
    def reason(self) -> str:
        return f"{self.short}: {self.detail}"


def _inconclusive(voids: Sequence[_Void], *more: str) -> Verdict:
    return Verdict(
        INCONCLUSIVE, f"inconclusive: {voids[0].short}", (*(v.reason for v in voids), *more)
    )


def too_few(n_a: int, n_b: int) -> bool:
    """Fewer than ``SMALL_N`` texts on either side: the report's small-cell rule."""
    return min(int(n_a), int(n_b)) < SMALL_N


def _too_few(n_a: int, n_b: int, what: str) -> _Void:
    return _Void(
        f"too few texts ({n_a} vs {n_b}) for this test",
        f"{what}; below {SMALL_N} texts a side intervals and tests are rough "
        "(docs/method.md §3), so the figure is not taken as evidence either way",
        f"too few texts ({n_a} vs {n_b})",
    )


def _blind_separates(blind: BlindBaseline | None) -> _Void | None:
    if blind is None or not blind.separable:
        return None
    return _Void(
        f"the sets differ without the model (blind baseline AUROC {blind.figure('auroc'):.2f})",
        "a classifier on the texts alone, never the model, tells the two sets apart, so a score "
        "that separates them may measure that difference (dates, topics, form), not training",
        "blind baseline separates the sets",
    )


# The badge of a table whose scores do no better than the blind baseline: a statement about that
# run's scores, not about the two sets (the release gate reads it so, for a baseline run).
NO_BETTER_THAN_BLIND = "no better than the blind baseline"


def _blind_as_good(blind: BlindBaseline | None) -> _Void | None:
    """The blind baseline's other warning: it does as well as the table's best score."""
    if blind is None or blind.separable or not blind.warning:
        return None
    return _Void(
        f"the scores do no better than the blind baseline (AUROC {blind.figure('auroc'):.2f})",
        blind.warning,
        NO_BETTER_THAN_BLIND,
    )


def _blind_missing(blind: BlindBaseline | None) -> str | None:
    """A caution when no blind baseline checked the sets (it voids nothing it did not see)."""
    if blind is None:
        return "no blind baseline: nothing checked that the sets differ only by training"
    if blind.note:
        return (
            f"no blind baseline ({blind.note}): nothing checked that the sets differ only by "
            "training"
        )
    return None


def _blind_checked(blind: BlindBaseline | None) -> list[str]:
    """The blind baseline's clean bill, when it ran and cannot tell the sets apart."""
    if blind is None or blind.note or blind.separable:
        return []
    return [
        f"the blind baseline does not tell the sets apart without the model (AUROC "
        f"{blind.figure('auroc'):.2f})"
    ]


# --- dataset inference ---------------------------------------------------------------------


def _inference_voids(one: DatasetInference, blind: BlindBaseline | None) -> list[_Void]:
    assert one.test is not None
    voids = [v for v in (_blind_separates(blind),) if v]
    n_suspect, n_heldout = one.test.n_b
    if too_few(n_suspect, n_heldout):
        what = (
            f"the Welch test compared {n_suspect} suspect with {n_heldout} held-out texts "
            "(the B halves)"
        )
        voids.append(_too_few(n_suspect, n_heldout, what))
    if one.control_warning:
        rejects = "the random-split control rejects too"
        voids.append(_Void(rejects, one.control_warning, "random-split control rejects"))
    return voids


def _inference_cautions(one: DatasetInference, blind: BlindBaseline | None) -> list[str]:
    assert one.test is not None
    notes = [_blind_missing(blind), one.test.note, one.control_note, one.note]
    return [n for n in notes if n]


def inference_verdict(one: DatasetInference, blind: BlindBaseline | None) -> Verdict:
    """Dataset inference at one length, judged with the report's blind baseline on the same two
    sets (suspect = member) and its own random-split control (rules: module docstring)."""
    if one.test is None:
        return Verdict(INCONCLUSIVE, f"inconclusive: not run — {one.note}", (one.test_result,))
    voids = _inference_voids(one, blind)
    cautions = _inference_cautions(one, blind)
    if voids:
        return _inconclusive(voids, f"the test alone: {one.test_result}", *cautions)
    test = one.test
    tested = f"{test.n_b[0]} vs {test.n_b[1]} texts tested"
    # Separability alone voids the test: the close-to-best warning compares single scores.
    checked = _blind_checked(blind)
    if test.rejected:
        return Verdict(
            EVIDENCE,
            f"evidence that the suspect set was used in training: p = {test.p_value:.3g} < "
            f"{one.significance:g}, {tested}",
            (
                "the suspect texts score as more member-like than the held-out texts (one-sided "
                "Welch test), under the assumption that the held-out set comes from the suspect "
                "set's distribution",
                *checked,
                *cautions,
            ),
        )
    return Verdict(
        NO_EVIDENCE,
        f"no evidence that the suspect set was used in training: p = {test.p_value:.3g} ≥ "
        f"{one.significance:g}, {tested}",
        ("which does not show it was not: the test may lack power", *checked, *cautions),
    )


# --- the membership table of a labelled audit ----------------------------------------------


def _random_split_flagged(control: pd.DataFrame | None) -> _Void | None:
    if control is None or control.empty or not control["flagged"].astype(bool).any():
        return None
    flagged = control[control["flagged"].astype(bool)]
    names = ", ".join(
        f"{label} (length {length})"
        for label, length in zip(flagged["score_label"], flagged["length"])
    )
    return _Void(
        "the random-split control is flagged",
        f"two random halves of the members, which differ by chance only, were told apart by "
        f"{names}: the labels reach the scores some other way, so no row can be trusted",
        "random-split control flagged",
    )


def _random_split_checked(control: pd.DataFrame | None) -> list[str]:
    """The random-split control's clean bill, when it ran and flags nothing."""
    if control is None or control.empty or control["flagged"].astype(bool).any():
        return []
    return ["the random-split control gives chance on two random halves of the members"]


def _table_voids(blind: BlindBaseline | None, control: pd.DataFrame | None) -> list[_Void]:
    """The controls that void every row of the table at once."""
    found = (_blind_separates(blind), _blind_as_good(blind), _random_split_flagged(control))
    return [v for v in found if v]


def _row_voids(row: Any, shared: Sequence[_Void]) -> list[_Void]:
    n_m, n_n = int(row["n_members"]), int(row["n_nonmembers"])
    voids = list(shared)
    if too_few(n_m, n_n):
        voids.append(_too_few(n_m, n_n, f"{n_m} members against {n_n} non-members"))
    return voids


def voided_by(
    membership: pd.DataFrame, blind: BlindBaseline | None, control: pd.DataFrame | None
) -> list[str | None]:
    """Per row of the membership table (in its order): what voids it, as a short badge
    ("; "-joined), or ``None`` when nothing does."""
    shared = _table_voids(blind, control)
    return [
        "; ".join(v.badge for v in _row_voids(row, shared)) or None
        for _, row in membership.iterrows()
    ]


def with_voided_by(
    membership: pd.DataFrame, blind: BlindBaseline | None, control: pd.DataFrame | None
) -> pd.DataFrame:
    """The membership table with a :data:`VOIDED_BY` column (see :func:`voided_by`)."""
    return membership.assign(**{VOIDED_BY: voided_by(membership, blind, control)})


def _row_p_holm(membership: pd.DataFrame) -> np.ndarray:
    """Each row's two-sided p of AUROC = 0.5 (the random-split control's test), Holm-adjusted
    over the table's rows."""
    p = [
        _two_sided_p(float(a), int(m), int(n))
        for a, m, n in zip(membership["auroc"], membership["n_members"], membership["n_nonmembers"])
    ]
    return holm(np.asarray(p, dtype=float))  # (rows,)


def _row_text(row: Any, p_holm: float) -> str:
    p = f"Holm-adjusted p = {p_holm:.2g}" if math.isfinite(p_holm) else "no p-value"
    return (
        f"{row['score_label']} at length {int(row['length'])}: AUROC "
        f"{float(row['auroc']):.2f}, {p}, {int(row['n_members'])} vs {int(row['n_nonmembers'])} "
        "texts"
    )


def membership_verdict(
    membership: pd.DataFrame, blind: BlindBaseline | None, control: pd.DataFrame | None
) -> Verdict | None:
    """The membership table of a labelled audit, judged with its validity controls (rules:
    module docstring); ``None`` when there is no table."""
    if membership is None or membership.empty:
        return None
    table = membership.reset_index(drop=True).assign(_p_holm=_row_p_holm(membership))
    shared = _table_voids(blind, control)
    voids = [_row_voids(row, shared) for _, row in table.iterrows()]
    open_rows = table[[not v for v in voids]]
    by_auroc = table.assign(_a=pd.to_numeric(table["auroc"], errors="coerce"))
    if by_auroc["_a"].notna().any():
        best = by_auroc.loc[by_auroc["_a"].idxmax()]
        alone = f"the best score alone: {_row_text(best, float(best['_p_holm']))}"
    else:
        alone = "no score has an AUROC"
    cautions = [c for c in (_blind_missing(blind),) if c]
    if open_rows.empty:
        if shared:
            return _inconclusive(shared, alone, *cautions)
        # Every row has too few texts: name the counts of the row with the most.
        smaller = np.minimum(table["n_members"].astype(int), table["n_nonmembers"].astype(int))
        fullest = table.loc[smaller.idxmax()]
        n_m, n_n = int(fullest["n_members"]), int(fullest["n_nonmembers"])
        what = f"every row has fewer than {SMALL_N} members or non-members"
        return _inconclusive([_too_few(n_m, n_n, what)], alone, *cautions)
    checked = _blind_checked(blind) + _random_split_checked(control)
    return _open_rows_verdict(open_rows, len(table), checked + cautions)


def _open_rows_verdict(open_rows: pd.DataFrame, n_rows: int, cautions: list[str]) -> Verdict:
    """Evidence or no evidence from the rows no control voids."""
    left_out = n_rows - len(open_rows)
    if left_out:
        cautions = [
            f"{left_out} of {n_rows} rows have fewer than {SMALL_N} members or non-members and "
            "are not read",
            *cautions,
        ]
    auroc = pd.to_numeric(open_rows["auroc"], errors="coerce")
    found = open_rows[(auroc > 0.5) & (open_rows["_p_holm"] < ALPHA)]
    rule = (
        f"a score is evidence when its AUROC is above 0.5 and its Holm-adjusted p (Mann–Whitney "
        f"test of AUROC = 0.5, over the table's {n_rows} rows) is below {ALPHA:g}"
    )
    if not found.empty:
        # The smallest p; on a tie (Holm caps at 1, tiny p's tie often) the highest AUROC.
        strongest = found.sort_values(
            ["_p_holm", "auroc"], ascending=[True, False], kind="stable"
        ).iloc[0]
        return Verdict(
            EVIDENCE,
            f"evidence of membership: {_row_text(strongest, float(strongest['_p_holm']))}",
            (
                f"{len(found)} of {len(open_rows)} rows read tell members from non-members",
                rule,
                *cautions,
            ),
        )
    if auroc.notna().any():
        best = open_rows.loc[auroc.idxmax()]
        detail = f"best: {_row_text(best, float(best['_p_holm']))}"
    else:
        detail = "no score has an AUROC"
    return Verdict(
        NO_EVIDENCE,
        f"no evidence of membership: no score tells members from non-members ({detail})",
        (rule, "which does not show the members were not trained on", *cautions),
    )
