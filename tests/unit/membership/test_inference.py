"""Dataset inference (docs/method.md §10): the procedure written out again here, its calibration
under the null, its direction, the clipping, and what it refuses."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import optimize, stats

from memprobe_core.errors import OptionError
from memprobe_core.membership import inference as di
from memprobe_core.membership.inference import dataset_inference, inference_for_results
from memprobe_core.membership.verdict import inference_verdict


def _sets(rng: np.random.Generator, n: int, shift: float) -> pd.DataFrame:
    """Texts' signals, oriented as ``signal_scores`` gives them (higher = member): a
    member-like set (shift > 0) has a lower loss and a higher Min-K%; zlib does not move."""
    return pd.DataFrame(
        {
            "signal_loss": -rng.normal(3.0 - shift, 1.0, n),
            "signal_min_k": rng.normal(-5.0 + shift, 1.0, n),
            "signal_zlib": -rng.normal(0.02, 0.005, n),
        }
    )


def _welch_by_hand(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """Welch's t, its Welch–Satterthwaite df and the one-sided p (H1: mean a > mean b)."""
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    t = (a.mean() - b.mean()) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    return t, df, float(stats.t.sf(t, df))


def _winsorized_by_hand(col: np.ndarray) -> np.ndarray:
    k = int(len(col) * 0.025)  # per end: 2.5 % of the values, rounded down
    if k == 0:
        return col.copy()
    ordered = np.sort(col)
    return np.clip(col, ordered[k], ordered[-k - 1])


def test_the_test_equals_the_procedure_written_out_by_hand():
    rng = np.random.default_rng(3)
    suspect, heldout = _sets(rng, 60, 0.4), _sets(rng, 50, 0.0)
    out = dataset_inference(suspect, heldout, length=64, seed=11)

    s = np.column_stack([_winsorized_by_hand(c) for c in suspect.to_numpy().T])
    h = np.column_stack([_winsorized_by_hand(c) for c in heldout.to_numpy().T])
    split = np.random.default_rng(11)  # the same seed draws the same halves, suspect first
    s_order, h_order = split.permutation(60), split.permutation(50)
    s_a, s_b = s_order[:30], s_order[30:]
    h_a, h_b = h_order[:25], h_order[25:]
    x_a = np.vstack([s[s_a], h[h_a]])
    y_a = np.r_[np.ones(30), np.zeros(25)]
    mean, std = x_a.mean(axis=0), x_a.std(axis=0)  # the A halves' statistics only
    z_a = (x_a - mean) / std
    # Least squares with weights ≥ 0 and a free intercept: NNLS on centred data.
    weights, _ = optimize.nnls(z_a - z_a.mean(axis=0), y_a - y_a.mean())
    score_s = ((s[s_b] - mean) / std) @ weights
    score_h = ((h[h_b] - mean) / std) @ weights
    t, df, p = _welch_by_hand(score_s, score_h)

    assert out.test is not None
    assert out.test.t == pytest.approx(t, rel=1e-9)
    assert out.test.df == pytest.approx(df, rel=1e-9)
    assert out.test.p_value == pytest.approx(p, rel=1e-9, abs=1e-15)
    assert out.test.n_a == (30, 25) and out.test.n_b == (30, 25)
    assert out.features == ("loss", "zlib", "min_k")  # SIGNALS order
    assert [out.weights[n] for n in out.features] == pytest.approx(list(weights), abs=1e-9)


def test_clipping_is_the_reference_codes_five_percent():
    col = np.r_[np.arange(38.0), 1e9, -1e9]  # 40 values: one clipped at each end
    clipped = di._clipped(col[:, None])[:, 0]
    assert clipped.max() == 37.0 and clipped.min() == 0.0
    np.testing.assert_array_equal(clipped, _winsorized_by_hand(col))


def test_a_member_like_suspect_set_is_rejected_and_the_other_way_round_is_not():
    rng = np.random.default_rng(0)
    members, unseen = _sets(rng, 120, 1.0), _sets(rng, 120, 0.0)
    found = dataset_inference(members, unseen, length=64)
    assert found.test is not None and found.test.rejected and found.test.p_value < 1e-3
    assert found.weights["loss"] > 0 and found.weights["min_k"] > 0
    assert min(found.weights.values()) >= 0.0  # weights on member-oriented signals only
    # One-sided: held-out texts that look *more* member-like are no evidence that the
    # suspect set was trained on (an unconstrained weighting would learn the reverse).
    reversed_ = dataset_inference(unseen, members, length=64)
    assert reversed_.test is not None and not reversed_.test.rejected
    assert reversed_.test.p_value > 0.5
    assert inference_verdict(found, None).conclusion == "evidence"
    assert "evidence that the suspect set was used" in inference_verdict(found, None).headline
    assert inference_verdict(reversed_, None).headline.startswith("no evidence")
    assert "60 vs 60 texts tested" in found.test_result


def test_under_the_null_it_rejects_at_about_the_level():
    rejected = 0
    runs = 300
    for seed in range(runs):
        rng = np.random.default_rng(1000 + seed)
        out = dataset_inference(_sets(rng, 40, 0.0), _sets(rng, 40, 0.0), length=64, seed=seed)
        assert out.test is not None
        rejected += out.test.rejected
    # 5 % of 300 is 15; a binomial 99.9 % band is about 4..30.
    assert 3 <= rejected <= 30, rejected


def test_the_random_split_control_runs_on_the_suspect_set_and_does_not_reject_by_itself():
    rng = np.random.default_rng(5)
    out = dataset_inference(_sets(rng, 80, 0.5), _sets(rng, 80, 0.0), length=64, seed=2)
    assert out.control is not None
    assert out.control.n_a == (20, 20) and out.control.n_b == (20, 20)
    assert not out.control.rejected and out.control_warning is None
    few = dataset_inference(_sets(rng, 7, 0.5), _sets(rng, 80, 0.0), length=64)
    assert few.control is None and few.test is not None  # 7 suspect texts cannot halve twice


def test_signals_not_measured_for_every_text_or_constant_are_left_out_with_why():
    rng = np.random.default_rng(1)
    suspect, heldout = _sets(rng, 20, 0.3), _sets(rng, 20, 0.0)
    suspect["signal_suffix_loss"] = 1.0
    heldout["signal_suffix_loss"] = 1.0
    suspect["signal_recall"] = [None] * 3 + list(rng.normal(size=17))
    heldout["signal_recall"] = rng.normal(size=20)
    out = dataset_inference(suspect, heldout, length=64)
    assert out.left_out["suffix_loss"] == "the same value for every text"
    assert out.left_out["recall"] == "not measured for 3 of 40 texts"
    assert out.left_out["ref_ratio"] == "not measured in this run"
    assert "recall" not in out.features and "suffix_loss" not in out.features


def test_too_few_texts_or_no_signal_gives_a_note_not_a_test():
    rng = np.random.default_rng(1)
    small = dataset_inference(_sets(rng, 3, 0.0), _sets(rng, 9, 0.0), length=64)
    assert small.test is None and "suspect set has 3 text(s)" in small.note
    assert small.test_result.startswith("not run:")
    empty = dataset_inference(pd.DataFrame(index=range(6)), pd.DataFrame(index=range(6)), length=8)
    assert empty.test is None and "no signal" in empty.note
    assert (
        "little power"
        in dataset_inference(_sets(rng, 20, 0.0), _sets(rng, 20, 0.0), length=64).note
    )


@pytest.mark.parametrize("level", [0, 1, -0.1, 1.5, "x", True, math.nan])
def test_a_significance_outside_zero_and_one_is_refused_naming_it(level):
    with pytest.raises(OptionError, match="significance="):
        di.check_significance(level)


def test_inference_for_results_reads_members_as_suspect_per_length():
    rng = np.random.default_rng(9)
    rows = []
    for length in (32, 64):
        for label, shift in (("member", 1.5), ("nonmember", 0.0)):
            frame = _sets(rng, 30, shift)  # stored as measured: loss and zlib lower = member
            frame[["signal_loss", "signal_zlib"]] *= -1
            for i, values in enumerate(frame.to_dict(orient="records")):
                for method in ("signals", "ps_base"):  # a signal belongs to the snippet
                    rows.append(
                        {"snippet_id": f"{label}{i}", "label": label, "length": length}
                        | {"method": method}
                        | values
                    )
    out = inference_for_results(pd.DataFrame(rows), significance=0.01, seed=4)
    assert [o.length for o in out] == [32, 64]
    assert all((o.n_suspect, o.n_heldout, o.significance) == (30, 30, 0.01) for o in out)
    assert all(o.test is not None and o.test.rejected for o in out)
    as_dict = out[0].to_dict()
    assert as_dict["test_result"] == out[0].test_result and "assumption" in as_dict


def test_a_length_with_no_scored_text_says_not_run_and_notes_follow_the_outcome():
    rng = np.random.default_rng(3)
    rows = []
    for label, shift in (("member", 2.0), ("nonmember", 0.0)):
        frame = _sets(rng, 12, shift)
        frame[["signal_loss", "signal_zlib"]] *= -1
        for i, values in enumerate(frame.to_dict(orient="records")):
            rows.append({"snippet_id": f"{label}{i}", "label": label, "length": 32} | values)
    out = inference_for_results(pd.DataFrame(rows), lengths=[32, 64])
    assert [o.length for o in out] == [32, 64]
    assert out[1].test is None and "no text was scored at this length" in out[1].note
    found = out[0]
    assert found.test is not None and found.test.rejected
    assert found.note is None  # a rejection is not "little power"
    assert found.control is not None and found.control_note is None
    small = dataset_inference(_sets(rng, 6, 0.0), _sets(rng, 6, 0.0), length=8)
    assert small.control is None and "needs at least 8 suspect texts (6 here)" in small.control_note


def test_weights_all_zero_give_p_one_with_the_reason_not_a_made_up_t():
    rng = np.random.default_rng(8)
    # The suspect set looks *less* member-like on every signal: no non-negative weight helps.
    out = dataset_inference(_sets(rng, 40, -2.0), _sets(rng, 40, 0.0), length=8)
    assert out.test is not None and out.test.p_value == 1.0 and not out.test.rejected
    assert out.test.note == di.NO_WEIGHT and math.isnan(out.test.df)
