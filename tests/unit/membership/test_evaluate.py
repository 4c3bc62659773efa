"""Labelled-audit evaluation: AUROC, ROC points, TPR at fixed FPR, intervals, the table — by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from memprobe_core.membership.evaluate import (
    FPR_TARGETS,
    MEMBERSHIP_COLUMNS,
    ROC_COLUMNS,
    _dense_ranks,  # the bootstrap's batched internals, checked against the public functions
    _rank_statistics,
    auroc,
    bootstrap_intervals,
    fpr_note,
    membership_table,
    roc_points,
    tpr_at_fpr,
)
from memprobe_core.store import RESULT_COLUMNS

# --- AUROC -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("members", "nonmembers", "expected"),
    [
        # pairs (3,1) (3,2) (2,1) win, (2,2) ties: (3 + 0.5) / 4
        ([3, 2], [1, 2], 0.875),
        ([5, 6], [1, 2], 1.0),
        ([1, 2], [5, 6], 0.0),
        ([1, 1], [1, 1, 1], 0.5),  # all ties count ½
        # 0.9 beats 3; 0.6 beats 2; 0.4 ties 0.4 (½) and beats 0.1: 6.5 / 9
        ([0.9, 0.6, 0.4], [0.8, 0.4, 0.1], 6.5 / 9),
    ],
)
def test_auroc_of_hand_worked_lists(members, nonmembers, expected) -> None:
    assert auroc(members, nonmembers) == pytest.approx(expected)


def test_auroc_drops_nans_and_is_nan_for_an_empty_class() -> None:
    assert auroc([3, np.nan, 2], [1, 2]) == pytest.approx(0.875)
    assert math.isnan(auroc([], [1, 2]))
    assert math.isnan(auroc([1.0], [np.nan]))


# --- ROC points ------------------------------------------------------------------------------

MEMBERS = [0.9, 0.6, 0.4]
NONMEMBERS = [0.8, 0.4, 0.1]


def test_roc_points_hand_worked() -> None:
    fpr, tpr = roc_points(MEMBERS, NONMEMBERS)
    # thresholds 0.9, 0.8, 0.6, 0.4 (a member and a non-member tie there), 0.1; score >= t
    assert fpr == pytest.approx([0, 0, 1 / 3, 1 / 3, 2 / 3, 1])
    assert tpr == pytest.approx([0, 1 / 3, 1 / 3, 2 / 3, 1, 1])
    # The area under the points is the AUROC (ties give the diagonal step, i.e. ½).
    assert np.trapezoid(tpr, fpr) == pytest.approx(auroc(MEMBERS, NONMEMBERS))


def test_roc_points_of_an_empty_class_are_empty() -> None:
    fpr, tpr = roc_points([], NONMEMBERS)
    assert fpr.size == 0 and tpr.size == 0


# --- TPR at fixed FPR ------------------------------------------------------------------------

TEN_NONMEMBERS = [0.95, 0.5, 0.3, 0.2, 0.1, 0.05, 0.04, 0.03, 0.02, 0.01]


@pytest.mark.parametrize(
    ("fpr", "expected"),
    [
        (0.0, 0.0),  # nothing above 0.95
        (0.05, 0.0),  # 0.05 × 10 = 0.5 false positives → none allowed: same as FPR 0
        (0.1, 2 / 3),  # one allowed → threshold 0.5 (2nd highest): 0.9 and 0.6 above it
        (0.2, 1.0),  # two allowed → threshold 0.3: all three members above
        (1.0, 1.0),
    ],
)
def test_tpr_at_fpr_hand_worked_threshold(fpr, expected) -> None:
    assert tpr_at_fpr(MEMBERS, TEN_NONMEMBERS, fpr) == pytest.approx(expected)


def test_tpr_at_fpr_counts_only_scores_strictly_above_the_threshold() -> None:
    # One false positive allowed (10 non-members, 10 %): the threshold is the 2nd highest
    # non-member, 0.6; the member at exactly 0.6 would bring FPR to 20 %, so it is not counted.
    nonmembers = [0.95, 0.6, *([0.0] * 8)]
    assert tpr_at_fpr(MEMBERS, nonmembers, 0.1) == pytest.approx(1 / 3)


@pytest.mark.parametrize("seed", range(5))
def test_tpr_at_fpr_is_the_best_roc_point_within_the_target(seed) -> None:
    rng = np.random.default_rng(seed)
    members = np.round(rng.normal(0.5, 1, 40), 1)  # rounded: ties within and across classes
    nonmembers = np.round(rng.normal(0, 1, 50), 1)
    fpr, tpr = roc_points(members, nonmembers)
    for target in (0.0, 0.01, 0.02, 0.1, 0.33, 0.5):
        best = tpr[fpr <= target + 1e-12].max()
        assert tpr_at_fpr(members, nonmembers, target) == pytest.approx(best)


def test_unreachable_fpr_is_tpr_at_fpr_zero_and_the_note_says_so() -> None:
    rng = np.random.default_rng(1)
    members, nonmembers = rng.normal(1, 1, 30), rng.normal(0, 1, 20)
    above_all = float(np.mean(members > nonmembers.max()))
    assert 0 < above_all < 1
    for target in (0.01, 0.001, 0.0):
        assert tpr_at_fpr(members, nonmembers, target) == pytest.approx(above_all)
    note = fpr_note(20)
    assert "smallest non-zero FPR is 5 %" in note
    assert "TPR@1% and TPR@0.1% are TPR at FPR 0" in note
    # From 100 non-members on, 1 % is one false positive; 0.1 % still needs 1000.
    note = fpr_note(250)
    assert "TPR@0.1% is TPR at FPR 0" in note and "TPR@1% allows 2 false positive(s)" in note
    assert "TPR at FPR 0" not in fpr_note(1000)


def _mimir_tpr_at_low_fpr(members, nonmembers, target: float) -> float:
    """mimir's ``get_roc_metrics`` written out: scikit-learn's ROC curve, then the TPR of the
    last point whose FPR is strictly below the target."""
    from sklearn.metrics import roc_curve

    labels = np.r_[np.ones(len(members)), np.zeros(len(nonmembers))]
    fpr, tpr, _ = roc_curve(labels, np.r_[members, nonmembers])
    return float(tpr[np.where(fpr < target)[0][-1]])


@pytest.mark.parametrize("seed", range(40))
def test_fpr_rule_lt_is_mimirs_tpr_at_low_fpr_and_le_the_inclusive_one(seed) -> None:
    """With 100 non-members, 1 % FPR is exactly one false positive: ``le`` allows it, ``lt``
    (mimir, LiRA-style code) does not. Each rule matches its own definition on every sample;
    the two differ on some."""
    rng = np.random.default_rng(seed)
    members, nonmembers = rng.normal(0.7, 1, 400), rng.normal(0, 1, 100)
    lt = tpr_at_fpr(members, nonmembers, 0.01, "lt")
    assert lt == pytest.approx(_mimir_tpr_at_low_fpr(members, nonmembers, 0.01))
    fpr, tpr = roc_points(members, nonmembers)
    # 1 − 99/100 is 0.010000000000000009 in floats: compare with a margin
    inclusive = tpr[fpr <= 0.01 + 1e-12].max()
    assert tpr_at_fpr(members, nonmembers, 0.01, "le") == pytest.approx(inclusive)
    assert lt == pytest.approx(tpr[fpr < 0.01 - 1e-12].max())


def test_the_two_fpr_rules_differ_where_target_times_n_is_whole() -> None:
    rng = np.random.default_rng(3)
    differ = 0
    for _ in range(30):
        members, nonmembers = rng.normal(0.7, 1, 400), rng.normal(0, 1, 100)
        differ += tpr_at_fpr(members, nonmembers, 0.01, "le") != tpr_at_fpr(
            members, nonmembers, 0.01, "lt"
        )
        # 150 non-members: 1.5 false positives; both rules allow one.
        more = rng.normal(0, 1, 150)
        assert tpr_at_fpr(members, more, 0.01, "le") == tpr_at_fpr(members, more, 0.01, "lt")
    assert differ > 10
    assert "allows 1 false positive" in fpr_note(100, "le")
    assert "TPR@1% and TPR@0.1% are TPR at FPR 0" in fpr_note(100, "lt")


@pytest.mark.parametrize("seed", range(3))
def test_the_bootstrap_statistic_follows_the_fpr_rule(seed) -> None:
    rng = np.random.default_rng(seed)
    members, nonmembers = np.round(rng.normal(0.5, 1, 60), 1), np.round(rng.normal(0, 1, 100), 1)
    m, n, levels = _dense_ranks(members, nonmembers)
    got = _rank_statistics(levels, "lt")(m, n)
    assert got[1] == pytest.approx(tpr_at_fpr(members, nonmembers, 0.01, "lt"))


def test_an_unknown_fpr_rule_is_refused_naming_the_option() -> None:
    from memprobe_core.errors import OptionError

    with pytest.raises(OptionError, match="fpr_rule='<=': give one of le, lt"):
        tpr_at_fpr(MEMBERS, NONMEMBERS, 0.01, "<=")  # type: ignore[arg-type]


@pytest.mark.parametrize("fpr", [-0.1, 1.5])
def test_tpr_at_fpr_refuses_a_rate_outside_0_1(fpr) -> None:
    with pytest.raises(ValueError, match=r"fpr .* out of range; give a rate in \[0, 1\]"):
        tpr_at_fpr(MEMBERS, NONMEMBERS, fpr)


# --- bootstrap intervals ---------------------------------------------------------------------


def test_bootstrap_intervals_are_seeded_and_contain_the_estimate() -> None:
    rng = np.random.default_rng(0)
    members, nonmembers = rng.normal(0.8, 1, 40), rng.normal(0, 1, 120)
    first = bootstrap_intervals(members, nonmembers, resamples=2000, seed=7)
    assert first == bootstrap_intervals(members, nonmembers, resamples=2000, seed=7)
    assert first != bootstrap_intervals(members, nonmembers, resamples=2000, seed=8)
    points = {
        "auroc": auroc(members, nonmembers),
        "tpr_at_1": tpr_at_fpr(members, nonmembers, 0.01),
        "tpr_at_01": tpr_at_fpr(members, nonmembers, 0.001),
    }
    for name, point in points.items():
        lo, hi = first[name]
        assert 0.0 <= lo <= point <= hi <= 1.0, name
        assert hi - lo > 0.01, name


@pytest.mark.parametrize("seed", range(4))
def test_the_bootstrapped_statistic_on_the_sample_itself_is_the_point_estimate(seed) -> None:
    """The bootstrap computes AUROC and TPR on pooled ranks, batched; it must agree with the
    functions above, ties included (scores rounded to one decimal)."""
    rng = np.random.default_rng(seed)
    members = np.round(rng.normal(0.5, 1, 37), 1)
    nonmembers = np.round(rng.normal(0, 1, 150), 1)
    m, n, levels = _dense_ranks(members, nonmembers)
    statistic = _rank_statistics(levels, "le")
    expected = [auroc(members, nonmembers)] + [
        tpr_at_fpr(members, nonmembers, f) for f in FPR_TARGETS.values()
    ]
    assert statistic(m, n) == pytest.approx(expected)
    # Batched: rows are samples; a row of the original and a row of one resample.
    draw = np.random.default_rng(seed + 10)
    m2, n2 = draw.choice(m, m.size), draw.choice(n, n.size)
    batched = statistic(np.stack([m, m2]), np.stack([n, n2]), axis=-1)  # (3, 2)
    assert batched[:, 0] == pytest.approx(expected)
    mapped = np.unique(np.concatenate([members, nonmembers]))  # rank -> score
    again = [auroc(mapped[m2.astype(int)], mapped[n2.astype(int)])] + [
        tpr_at_fpr(mapped[m2.astype(int)], mapped[n2.astype(int)], f) for f in FPR_TARGETS.values()
    ]
    assert batched[:, 1] == pytest.approx(again)


def test_auroc_interval_is_the_stratified_percentile_bootstrap() -> None:
    """Against the definition: resample each class on its own, take the 2.5 / 97.5 percentiles."""
    rng = np.random.default_rng(3)
    members, nonmembers = rng.normal(0.5, 1, 15), rng.normal(0, 1, 25)
    lo, hi = bootstrap_intervals(members, nonmembers, resamples=5000, seed=0)["auroc"]
    draw = np.random.default_rng(99)
    m = members[draw.integers(0, members.size, (4000, members.size))]  # (B, n1)
    n = nonmembers[draw.integers(0, nonmembers.size, (4000, nonmembers.size))]  # (B, n0)
    # AUROC by counting pairs, ties ½: (B, n1, n0) comparisons averaged per resample.
    pairs = (m[:, :, None] > n[:, None, :]) + 0.5 * (m[:, :, None] == n[:, None, :])
    ref_lo, ref_hi = np.percentile(pairs.mean(axis=(1, 2)), [2.5, 97.5])
    assert (lo, hi) == pytest.approx((ref_lo, ref_hi), abs=0.02)


@pytest.mark.parametrize(
    ("members", "nonmembers"),
    [([0.9], [0.1, 0.2, 0.3]), ([0.9, 0.8], [0.1]), ([5, 6, 7], [1, 2, 3])],
)
def test_no_interval_for_a_lone_snippet_or_a_zero_width_bootstrap(members, nonmembers) -> None:
    # The last case separates perfectly: every resample gives AUROC 1 and TPR 1.
    intervals = bootstrap_intervals(members, nonmembers, resamples=500, seed=0)
    assert all(math.isnan(v) for pair in intervals.values() for v in pair)


# --- the table on a results frame ------------------------------------------------------------


def row(snippet: str, label: str | None, method: str = "ps_base", length: int = 100, **values):
    return dict.fromkeys(RESULT_COLUMNS) | {
        "snippet_id": snippet,
        "label": label,
        "method": method,
        "method_label": method,
        "length": length,
        **values,
    }


def frame(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def labelled_rows() -> list[dict]:
    """Members have lower loss (→ member) and higher Min-K% (→ member); P-S-Base Mem is mixed."""
    rows = []
    for i, (loss, mem) in enumerate([(1.0, 0.9), (1.5, 0.2), (2.0, 0.6)]):
        rows.append(row(f"m{i}", "member", mem=mem, signal_loss=loss, signal_min_k=-loss))
    for i, (loss, mem) in enumerate([(3.0, 0.5), (2.5, 0.1), (4.0, 0.3), (1.8, 0.7)]):
        rows.append(row(f"n{i}", "nonmember", mem=mem, signal_loss=loss, signal_min_k=-loss))
    return rows


def test_signals_are_oriented_so_that_auroc_above_half_separates_the_expected_way() -> None:
    table, roc = membership_table(frame(labelled_rows()), resamples=500, seed=0)
    by_score = table.set_index("score")
    # Loss: lower = member. Members 1.0, 1.5, 2.0 vs 3.0, 2.5, 4.0, 1.8: 1.0 and 1.5 beat all
    # four, 2.0 beats three → 11 / 12. Un-oriented it would read 1 / 12.
    assert by_score.loc["loss", "auroc"] == pytest.approx(11 / 12)
    assert by_score.loc["min_k", "auroc"] == pytest.approx(11 / 12)  # higher = member, as given
    # P-S-Base Mem (higher = member): 0.9 beats 4, 0.2 beats 1, 0.6 beats 3 → 8 / 12.
    assert by_score.loc["ps_base", "auroc"] == pytest.approx(8 / 12)
    assert list(table.columns) == MEMBERSHIP_COLUMNS and list(roc.columns) == ROC_COLUMNS
    assert list(table["kind"]) == ["signal", "signal", "method"]
    assert by_score.loc["loss", "score_label"] == "Loss"
    assert by_score.loc["ps_base", "score_label"] == "P-S-Base"
    assert (by_score.loc["ps_base", "n_members"], by_score.loc["ps_base", "n_nonmembers"]) == (3, 4)
    # The ROC rows are the curve of the oriented score: (0, 0) … (1, 1).
    loss_curve = roc[roc["score"] == "loss"]
    assert (loss_curve["fpr"].iloc[0], loss_curve["tpr"].iloc[0]) == (0.0, 0.0)
    assert (loss_curve["fpr"].iloc[-1], loss_curve["tpr"].iloc[-1]) == (1.0, 1.0)
    fpr, tpr = roc_points([-1.0, -1.5, -2.0], [-3.0, -2.5, -4.0, -1.8])
    assert list(loss_curve["fpr"]) == pytest.approx(fpr)
    assert list(loss_curve["tpr"]) == pytest.approx(tpr)


def test_a_signal_is_counted_once_per_snippet_taking_the_first_value_measured() -> None:
    rows = []
    for snippet, label, loss in [("m0", "member", 1.0), ("m1", "member", 2.0)] + [
        ("n0", "nonmember", 3.0),
        ("n1", "nonmember", 1.5),
    ]:
        # P-S-Base did not measure the signal (None); P-S-Inst and Ours carry the same value.
        rows.append(row(snippet, label, "ps_base", mem=0.1))
        rows.append(row(snippet, label, "ps_inst", mem=0.2, signal_loss=loss))
        rows.append(row(snippet, label, "interactive", mem=0.3, signal_loss=loss))
    table, _ = membership_table(frame(rows), resamples=500, seed=0)
    loss = table[table["score"] == "loss"].iloc[0]
    assert (loss["n_members"], loss["n_nonmembers"]) == (2, 2)  # snippets, not rows
    # 1.0 beats both non-members, 2.0 beats 3.0 only → 3 / 4.
    assert loss["auroc"] == pytest.approx(0.75)
    assert (table["score"] == "loss").sum() == 1
    assert list(table[table["kind"] == "method"]["score"]) == ["ps_base", "ps_inst", "interactive"]


def test_a_score_without_values_in_a_class_has_no_row() -> None:
    rows = labelled_rows()
    for r in rows:
        if r["label"] == "nonmember":
            r["signal_min_k"] = None  # measured on members only
    table, roc = membership_table(frame(rows), resamples=500, seed=0)
    assert "min_k" not in set(table["score"]) and "min_k" not in set(roc["score"])
    assert "zlib" not in set(table["score"])  # never measured at all
    assert {"loss", "ps_base"} <= set(table["score"])


def test_unlabelled_rows_play_no_part() -> None:
    labelled = membership_table(frame(labelled_rows()), resamples=500, seed=0)[0]
    extra = [row(f"u{i}", None, mem=0.99, signal_loss=0.01, signal_min_k=-0.01) for i in range(5)]
    with_unlabelled = membership_table(frame(labelled_rows() + extra), resamples=500, seed=0)[0]
    pd.testing.assert_frame_equal(labelled, with_unlabelled)


@pytest.mark.parametrize("labels", [[None, None], ["member", "member"], ["nonmember", None]])
def test_without_a_member_and_a_non_member_the_frames_are_empty(labels) -> None:
    rows = [row(f"s{i}", label, mem=0.5, signal_loss=1.0) for i, label in enumerate(labels)]
    table, roc = membership_table(frame(rows), resamples=500, seed=0)
    assert table.empty and list(table.columns) == MEMBERSHIP_COLUMNS
    assert roc.empty and list(roc.columns) == ROC_COLUMNS
    empty = membership_table(frame([]), resamples=500, seed=0)[0]
    assert empty.empty and list(empty.columns) == MEMBERSHIP_COLUMNS


def test_one_row_per_score_and_length() -> None:
    rows = labelled_rows() + [{**r, "length": 200} for r in labelled_rows()]
    table, roc = membership_table(frame(rows), resamples=500, seed=0)
    assert list(table["length"]) == [100, 100, 100, 200, 200, 200]
    assert set(roc["length"]) == {100, 200}
