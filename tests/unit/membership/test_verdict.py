"""Verdicts that carry their controls (docs/method.md §10, "Verdicts"): a separable blind
baseline or too few texts make a result inconclusive whatever its p-value or AUROC; otherwise
evidence or no evidence, with p and n."""

from __future__ import annotations

import pandas as pd
import pytest

from memprobe_core.membership.blind import RANDOM_SPLIT_COLUMNS, BlindBaseline
from memprobe_core.membership.evaluate import MEMBERSHIP_COLUMNS
from memprobe_core.membership.inference import DatasetInference, WelchOutcome
from memprobe_core.membership.verdict import (
    VOIDED_BY,
    inference_verdict,
    membership_verdict,
    too_few,
    voided_by,
    with_voided_by,
)
from memprobe_core.stats import SMALL_N

SEPARATES = "the sets differ without the model (blind baseline AUROC 1.00)"


def _blind(auroc: float, lo: float | None = None, hi: float = 1.0, **kw) -> BlindBaseline:
    figures = {"auroc": auroc}
    if lo is not None:
        figures |= {"auroc_lo": lo, "auroc_hi": hi}
    return BlindBaseline(n_members=20, n_nonmembers=20, folds=5, seed=0, figures=figures, **kw)


# Perfect separation: no interval, every resample gave 1.0 (the case).
SEPARABLE = _blind(1.0, warning="told apart")
# An interval that covers 0.5: the texts alone do not tell the sets apart.
CHANCE = _blind(0.55, 0.40, 0.70)


def _inference(
    p: float, tested: tuple[int, int] = (20, 20), *, control_p: float | None = None
) -> DatasetInference:
    n = (2 * tested[0], 2 * tested[1])
    test = WelchOutcome(2.2, 5.0, p, p < 0.05, tested, tested, 0.7, 0.3)
    control = None
    if control_p is not None:
        control = WelchOutcome(1.0, 9.0, control_p, control_p < 0.05, (5, 5), (5, 5), 0.5, 0.4)
    return DatasetInference(
        length=64,
        n_suspect=n[0],
        n_heldout=n[1],
        significance=0.05,
        seed=0,
        test=test,
        control=control,
    )


# --- dataset inference ---------------------------------------------------------------------


def test_a_separable_blind_baseline_makes_a_significant_test_inconclusive() -> None:
    verdict = inference_verdict(_inference(0.022), SEPARABLE)
    assert verdict.conclusion == "inconclusive"
    assert verdict.headline == f"inconclusive: {SEPARATES}"
    assert "evidence that" not in verdict.headline
    # The test is still reported, as what it says alone.
    assert any(r.startswith("the test alone: p = 0.022 < 0.05, 20 vs 20") for r in verdict.reasons)


def test_three_against_three_tested_texts_are_too_few() -> None:
    verdict = inference_verdict(_inference(0.022, (3, 3)), CHANCE)
    assert verdict.conclusion == "inconclusive"
    assert verdict.headline == "inconclusive: too few texts (3 vs 3) for this test"
    assert any(f"below {SMALL_N} texts a side" in r for r in verdict.reasons)
    # Both controls apply: the separable baseline heads, too few is still a reason.
    both = inference_verdict(_inference(0.022, (3, 3)), SEPARABLE)
    assert both.headline == f"inconclusive: {SEPARATES}"
    assert any(r.startswith("too few texts (3 vs 3) for this test") for r in both.reasons)


def test_the_too_few_threshold_is_the_reports_small_n() -> None:
    assert SMALL_N == 10
    assert too_few(9, 40) and too_few(40, 9) and not too_few(10, 10)
    assert inference_verdict(_inference(0.01, (10, 10)), CHANCE).conclusion == "evidence"
    assert inference_verdict(_inference(0.01, (9, 10)), CHANCE).conclusion == "inconclusive"


def test_the_normal_case_is_evidence_or_no_evidence_with_p_and_n() -> None:
    found = inference_verdict(_inference(0.0001), CHANCE)
    assert found.conclusion == "evidence"
    assert found.headline == (
        "evidence that the suspect set was used in training: p = 0.0001 < 0.05, "
        "20 vs 20 texts tested"
    )
    assert any("blind baseline does not tell the sets apart" in r for r in found.reasons)
    none = inference_verdict(_inference(0.3), CHANCE)
    assert none.conclusion == "no_evidence"
    assert none.headline == (
        "no evidence that the suspect set was used in training: p = 0.3 ≥ 0.05, "
        "20 vs 20 texts tested"
    )


def test_a_rejecting_random_split_control_makes_it_inconclusive() -> None:
    verdict = inference_verdict(_inference(0.001, control_p=0.01), CHANCE)
    assert verdict.headline == "inconclusive: the random-split control rejects too"
    clean = inference_verdict(_inference(0.001, control_p=0.6), CHANCE)
    assert clean.conclusion == "evidence"


def test_no_test_or_no_blind_baseline_is_said() -> None:
    not_run = DatasetInference(
        length=8, n_suspect=3, n_heldout=9, significance=0.05, seed=0, note="too small"
    )
    assert inference_verdict(not_run, CHANCE).headline == "inconclusive: not run — too small"
    unchecked = inference_verdict(_inference(0.0001), None)
    assert unchecked.conclusion == "evidence"
    assert any(r.startswith("no blind baseline") for r in unchecked.reasons)
    assert inference_verdict(_inference(0.0001), None).to_dict() == {
        "conclusion": "evidence",
        "headline": unchecked.headline,
        "reasons": list(unchecked.reasons),
    }


# --- the membership table ------------------------------------------------------------------


def _row(label: str, auroc: float, n: tuple[int, int] = (20, 20), length: int = 64) -> dict:
    return dict.fromkeys(MEMBERSHIP_COLUMNS) | {
        "score": label.lower(),
        "score_label": label,
        "kind": "signal",
        "length": length,
        "n_members": n[0],
        "n_nonmembers": n[1],
        "auroc": auroc,
    }


def _table(*rows: dict) -> pd.DataFrame:
    return pd.DataFrame(list(rows), columns=MEMBERSHIP_COLUMNS)


def _control(flagged: bool) -> pd.DataFrame:
    row = dict.fromkeys(RANDOM_SPLIT_COLUMNS) | {
        "score": "loss",
        "score_label": "Loss",
        "length": 64,
        "auroc": 0.95 if flagged else 0.5,
        "flagged": flagged,
    }
    return pd.DataFrame([row], columns=RANDOM_SPLIT_COLUMNS)


SIX_PERFECT = _table(*(_row(f"Signal{i}", 1.0) for i in range(6)))


def test_a_separable_blind_baseline_voids_every_row_even_at_auroc_one() -> None:
    verdict = membership_verdict(SIX_PERFECT, SEPARABLE, _control(False))
    assert verdict is not None and verdict.conclusion == "inconclusive"
    assert verdict.headline == f"inconclusive: {SEPARATES}"
    assert (
        voided_by(SIX_PERFECT, SEPARABLE, _control(False))
        == ["blind baseline separates the sets"] * 6
    )
    # Without the control the same table is evidence, with its p and n.
    clean = membership_verdict(SIX_PERFECT, CHANCE, _control(False))
    assert clean is not None and clean.conclusion == "evidence"
    assert clean.headline.startswith("evidence of membership: Signal0 at length 64: AUROC 1.00")
    assert "Holm-adjusted p = " in clean.headline and clean.headline.endswith("20 vs 20 texts")
    assert voided_by(SIX_PERFECT, CHANCE, _control(False)) == [None] * 6


def test_too_few_texts_void_their_row_and_all_rows_make_it_inconclusive() -> None:
    few = _table(_row("Loss", 1.0, (3, 3)), _row("Zlib", 1.0, (3, 3)))
    verdict = membership_verdict(few, CHANCE, None)
    assert verdict is not None
    assert verdict.headline == "inconclusive: too few texts (3 vs 3) for this test"
    assert voided_by(few, CHANCE, None) == ["too few texts (3 vs 3)"] * 2
    mixed = _table(_row("Loss", 0.55), _row("Zlib", 1.0, (3, 3)))
    verdict = membership_verdict(mixed, CHANCE, None)
    assert verdict is not None and verdict.conclusion == "no_evidence"  # the AUROC 1 row is void
    assert any("1 of 2 rows have fewer than 10" in r for r in verdict.reasons)


def test_a_flagged_random_split_or_an_as_good_blind_baseline_voids_every_row() -> None:
    flagged = membership_verdict(SIX_PERFECT, CHANCE, _control(True))
    assert flagged is not None
    assert flagged.headline == "inconclusive: the random-split control is flagged"
    assert set(voided_by(SIX_PERFECT, CHANCE, _control(True))) == {"random-split control flagged"}
    table = _table(_row("Loss", 0.62))
    as_good = _blind(0.60, 0.45, 0.75, warning="its AUROC 0.600 is within 0.05 of the best")
    verdict = membership_verdict(table, as_good, None)
    assert verdict is not None
    assert verdict.headline == (
        "inconclusive: the scores do no better than the blind baseline (AUROC 0.60)"
    )


def test_evidence_needs_a_holm_adjusted_p_below_the_level_not_an_interval() -> None:
    # 20 vs 20: AUROC 0.75 has p ≈ 0.007 alone, 0.08 once Holm counts 12 rows.
    one = _table(_row("Loss", 0.75))
    verdict = membership_verdict(one, CHANCE, None)
    assert verdict is not None and verdict.conclusion == "evidence"
    twelve = _table(_row("Loss", 0.75), *(_row(f"S{i}", 0.5) for i in range(11)))
    verdict = membership_verdict(twelve, CHANCE, None)
    assert verdict is not None and verdict.conclusion == "no_evidence"
    assert verdict.headline.startswith(
        "no evidence of membership: no score tells members from non-members (best: Loss"
    )
    # An AUROC far below 0.5 is significant, but not evidence of membership.
    below = membership_verdict(_table(_row("Loss", 0.1)), CHANCE, None)
    assert below is not None and below.conclusion == "no_evidence"


def test_with_voided_by_adds_the_badge_column_and_no_table_has_no_verdict() -> None:
    out = with_voided_by(SIX_PERFECT, SEPARABLE, None)
    assert list(out.columns) == [*MEMBERSHIP_COLUMNS, VOIDED_BY]
    assert membership_verdict(_table(), SEPARABLE, None) is None


@pytest.mark.parametrize(
    ("auroc", "lo", "separable"),
    [(1.0, None, True), (0.9, 0.7, True), (0.6, 0.45, False), (0.5, None, False)],
)
def test_separable_is_the_blind_baselines_warning_rule(auroc, lo, separable) -> None:
    blind = _blind(auroc, lo)
    assert blind.separable is separable
