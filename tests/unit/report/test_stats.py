"""Report statistics: paired tests (Wilcoxon / exact sign / none) and Holm's correction."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from memprobe_core.report.stats import paired_test, percentile_interval
from memprobe_core.stats import holm


def _signed_rank_p_by_enumeration(diff: np.ndarray) -> float:
    """Two-sided signed-rank p-value with tied ranks, from all 2^n sign assignments."""
    ranks = stats.rankdata(np.abs(diff))
    observed = ranks[diff > 0].sum()
    centre = ranks.sum() / 2
    flips = np.array(list(itertools.product([0, 1], repeat=diff.size)))  # (2^n, n)
    r_plus = flips @ ranks  # (2^n,)
    return float(np.mean(np.abs(r_plus - centre) >= abs(observed - centre) - 1e-12))


def test_holm_matches_a_hand_computed_example() -> None:
    # Sorted: 0.005, 0.01, 0.03, 0.04 → ×4, ×3, ×2, ×1 = 0.02, 0.03, 0.06, 0.04 → running max
    # 0.02, 0.03, 0.06, 0.06; back in input order:
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # Benjamini–Hochberg gives other (smaller) numbers: this is not BH.
    assert stats.false_discovery_control([0.01, 0.04, 0.03, 0.005]) == pytest.approx(
        [0.02, 0.04, 0.04, 0.02]
    )


def test_holm_caps_at_one_and_skips_nan() -> None:
    out = holm([0.5, np.nan, 0.3])  # m = 2: 0.6, max(0.6, 0.5)
    assert out[0] == pytest.approx(0.6) and np.isnan(out[1]) and out[2] == pytest.approx(0.6)
    assert holm([0.9, 0.8]).tolist() == [1.0, 1.0]
    assert holm([0.04]).tolist() == [0.04]
    assert holm([]).size == 0


def test_all_ties_give_no_test_and_p_one() -> None:
    result = paired_test([0.0, 0.0, 1e-12, np.nan])
    assert (result.test, result.p_value, result.nonzero) == ("none", 1.0, 0)


def test_few_non_tied_pairs_use_the_exact_sign_test() -> None:
    # 5 non-zero differences (4 up, 1 down) among 8 pairs: the sign test, ties dropped.
    result = paired_test([0.2, 0.1, 0.3, 0.0, 0.4, -0.1, 0.0, 0.0])
    assert (result.test, result.nonzero) == ("sign", 5)
    assert result.p_value == pytest.approx(stats.binomtest(4, 5).pvalue) == pytest.approx(0.375)


def test_wilcoxon_exact_without_ties_and_zeros_dropped() -> None:
    diff = np.array([0.31, 0.12, -0.05, 0.44, 0.27, 0.19, 0.0, 0.08])
    result = paired_test(diff)
    nonzero = diff[diff != 0]
    assert (result.test, result.nonzero) == ("wilcoxon", 7)
    assert result.p_value == pytest.approx(stats.wilcoxon(nonzero, method="exact").pvalue)
    assert result.p_value == pytest.approx(_signed_rank_p_by_enumeration(nonzero))
    assert result.p_value == pytest.approx(4 / 128)  # r_minus = 1: 2 × (1 + 1) / 2^7


def test_wilcoxon_with_tied_magnitudes_is_exact_by_permutation() -> None:
    # Ratios of small integers tie often; scipy's "exact" table assumes no ties.
    diff = np.array([0.25, 0.25, -0.25, 0.5, 0.5, 0.75, 0.25, -0.5, 0.75])
    result = paired_test(diff, seed=1)
    assert result.test == "wilcoxon"
    assert result.p_value == pytest.approx(_signed_rank_p_by_enumeration(diff))
    assert result.p_value == paired_test(diff, seed=1).p_value
    assert paired_test(-diff, seed=1).p_value == pytest.approx(result.p_value)


def test_percentile_interval_kept_for_the_benchmark() -> None:
    lo, hi = percentile_interval([0.1, 0.4, 0.2, 0.9], resamples=1000, seed=0)
    assert 0.1 <= lo < hi <= 0.9
    assert np.isnan(percentile_interval([0.3])[0])


def test_many_tied_pairs_use_seeded_flips_close_to_the_normal_approximation() -> None:
    rng = np.random.default_rng(5)
    diff = rng.choice([-0.25, 0.25, 0.5, -0.5, 0.75], size=30, p=[0.3, 0.3, 0.2, 0.1, 0.1])
    result = paired_test(diff, seed=2)
    assert result.test == "wilcoxon" and result.nonzero == 30
    assert result.p_value == paired_test(diff, seed=2).p_value  # seeded
    approx = stats.wilcoxon(diff, method="asymptotic").pvalue  # tie-corrected normal
    assert result.p_value == pytest.approx(approx, abs=0.02)
    assert 0 < paired_test(np.full(30, 0.5) * np.sign(rng.random(30) + 1), seed=2).p_value < 1e-3
