"""Validity controls of a labelled audit: the blind baseline and the random-split control.

The blind baseline is run on the built-in labelled split (demo members against generated
non-members, as `memprobe audit --corpus --nonmembers` builds it), where it must see through the
split, and on two random halves of one text set, where it must not. The random-split control is
fed hand-made results frames with known scores.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from memprobe_core.membership import blind as blind_module
from memprobe_core.membership.blind import (
    BLIND_WARNING,
    CONTROLS_COLUMNS,
    RANDOM_SPLIT_COLUMNS,
    BlindBaseline,
    blind_baseline,
    blind_scores,
    controls_frame,
    folds_for,
    random_halves,
    random_split_control,
    random_split_warning,
    validity_controls,
)
from memprobe_core.membership.evaluate import MEMBERSHIP_COLUMNS, auroc
from memprobe_core.snippets import nonmembers
from memprobe_core.snippets.corpus import demo_corpus
from memprobe_core.snippets.split import MEMBER, NONMEMBER, DataError
from memprobe_core.store import RESULT_COLUMNS

RESAMPLES = 1000


def _membership(best_auroc: float) -> pd.DataFrame:
    """A membership table whose best (only) row is Loss at length 100 with ``best_auroc``."""
    row = dict.fromkeys(MEMBERSHIP_COLUMNS) | {
        "score": "loss",
        "score_label": "Loss",
        "kind": "signal",
        "length": 100,
        "auroc": best_auroc,
    }
    return pd.DataFrame([row], columns=MEMBERSHIP_COLUMNS)


@pytest.fixture(scope="module")
def demo_split(tmp_path_factory):
    """The old built-in labelled split: 15 demo members per domain, as many generated ones."""
    path = tmp_path_factory.mktemp("nonmembers") / "nonmembers.json"
    nonmembers.build(path, seed=20240607, per_domain=15)
    snippets = demo_corpus(limit_per_domain=15, nonmembers=True, nonmember_path=path)
    texts = {s.id: s.text for s in snippets}
    labels = {s.id: str(s.label) for s in snippets}
    return texts, labels


@pytest.fixture(scope="module")
def one_distribution():
    """Demo members only (legal and code), split into two random halves by a fixed seed."""
    members = demo_corpus(domains=["legal", "code"], limit_per_domain=20)
    halves = random_halves([s.id for s in members], seed=3)
    texts = {s.id: s.text for s in members}
    labels = {s.id: MEMBER if halves[s.id] else NONMEMBER for s in members}
    return texts, labels


# --- blind baseline --------------------------------------------------------------------------


def test_the_blind_baseline_sees_through_the_demo_split_and_warns(demo_split) -> None:
    texts, labels = demo_split
    assert set(labels.values()) == {MEMBER, NONMEMBER}
    result = blind_baseline(
        texts, labels, membership=_membership(0.97), resamples=RESAMPLES, seed=0
    )
    assert (result.n_members, result.n_nonmembers, result.folds) == (30, 30, 5)
    assert result.figure("auroc") > 0.9
    assert result.warning is not None and BLIND_WARNING in result.warning
    assert "Loss, length 100: 0.970" in result.warning
    assert result.note is None


def test_on_one_distribution_the_blind_baseline_is_near_chance_and_quiet(
    one_distribution,
) -> None:
    texts, labels = one_distribution
    result = blind_baseline(texts, labels, membership=_membership(0.8), resamples=RESAMPLES, seed=0)
    assert abs(result.figure("auroc") - 0.5) < 0.15
    assert result.figure("auroc_lo") < 0.5 < result.figure("auroc_hi")
    assert result.warning is None


def test_a_baseline_close_to_the_best_score_warns_even_near_chance(one_distribution) -> None:
    texts, labels = one_distribution
    # The best score does no better than the blind classifier: not evidence either.
    result = blind_baseline(
        texts, labels, membership=_membership(0.52), resamples=RESAMPLES, seed=0
    )
    assert result.warning is not None
    assert "do no better than a classifier that never sees the model" in result.warning
    assert BLIND_WARNING not in result.warning  # the split itself is not separable


def test_the_warning_rule_by_hand() -> None:
    near = {"auroc": 0.60, "auroc_lo": 0.45, "auroc_hi": 0.75}
    best = {"score_label": "Min-K%", "length": 50, "auroc": 0.9}
    assert blind_module._warning(near, best) is None
    assert "within 0.05 of" in blind_module._warning(near, best | {"auroc": 0.64})
    assert "above the best" in blind_module._warning(near, best | {"auroc": 0.55})
    above = {"auroc": 0.70, "auroc_lo": 0.55, "auroc_hi": 0.85}
    assert "[0.550, 0.850] above 0.5" in blind_module._warning(above, best)
    # No interval because every resample gave 1: perfect separation warns too.
    perfect = {"auroc": 1.0, "auroc_lo": math.nan, "auroc_hi": math.nan}
    assert "in every bootstrap resample" in blind_module._warning(perfect, {})
    # All scores tied (no interval, AUROC ½): nothing to warn about.
    assert blind_module._warning({"auroc": 0.5, "auroc_lo": math.nan}, {}) is None


def test_folds_shrink_for_a_small_class_and_refuse_below_two() -> None:
    assert folds_for(40, 30) == 5
    assert folds_for(3, 30) == 3
    assert folds_for(2, 2) == 2
    with pytest.raises(DataError, match="at least 2 members and 2 non-members.*1 member"):
        folds_for(1, 30)


def test_too_few_texts_give_a_note_not_a_figure() -> None:
    texts = {"m0": "alpha beta", "n0": "gamma delta", "n1": "epsilon zeta"}
    labels = {"m0": MEMBER, "n0": NONMEMBER, "n1": NONMEMBER}
    result = blind_baseline(texts, labels, resamples=RESAMPLES, seed=0)
    assert result.folds == 0 and result.warning is None
    assert result.note is not None and "1 member(s) and 2 non-member(s)" in result.note
    assert math.isnan(result.figure("auroc"))
    assert result.to_dict()["auroc"] is None


def test_blind_scores_are_out_of_fold_and_seeded() -> None:
    # Random strings, random labels: only a model that saw a text could score it right (one
    # fitted on all texts separates them perfectly), so out-of-fold scores stay near chance.
    rng = np.random.default_rng(2)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    texts = [" ".join("".join(rng.choice(letters, 8)) for _ in range(30)) for _ in range(40)]
    is_member = rng.permutation([True] * 20 + [False] * 20)
    scores, folds = blind_scores(texts, is_member, folds=4, seed=1)
    assert folds == 4 and scores.shape == (40,)
    assert auroc(scores[is_member], scores[~is_member]) < 0.8
    again, _ = blind_scores(texts, is_member, folds=4, seed=1)
    assert np.array_equal(scores, again)


def test_the_same_seed_gives_the_same_baseline(demo_split) -> None:
    texts, labels = demo_split
    first = blind_baseline(texts, labels, resamples=RESAMPLES, seed=11)
    blind_module._cached_scores.cache_clear()  # computed again, not read back
    second = blind_baseline(dict(reversed(texts.items())), labels, resamples=RESAMPLES, seed=11)
    assert first.to_dict() == second.to_dict()


# --- random-split control --------------------------------------------------------------------


def _results(losses: dict[str, tuple[str, float]], *, mem: float = 0.3) -> pd.DataFrame:
    """A results frame: one P-S-Base unit per snippet at length 100, with loss and Min-K%."""
    rows = [
        dict.fromkeys(RESULT_COLUMNS)
        | {
            "run_id": 1,
            "snippet_id": snippet,
            "domain": "code",
            "method": "ps_base",
            "method_label": "P-S-Base",
            "length": 100,
            "mem": mem,
            "label": label,
            "signal_loss": loss,
            "signal_min_k": -loss - 0.5,
        }
        for snippet, (label, loss) in losses.items()
    ]
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def _members_from_one_distribution(n: int = 60, seed: int = 5) -> dict[str, tuple[str, float]]:
    rng = np.random.default_rng(seed)
    members = {f"m{i:02d}": (MEMBER, float(rng.normal(2.0, 0.5))) for i in range(n)}
    return members | {f"n{i}": (NONMEMBER, float(rng.normal(3.0, 0.5))) for i in range(n)}


def test_random_halves_are_seeded_balanced_and_ignore_the_order() -> None:
    ids = [f"s{i}" for i in range(9)]
    halves = random_halves(ids, seed=4)
    assert sum(halves.values()) == 4 and set(halves) == set(ids)
    assert random_halves(list(reversed(ids)), seed=4) == halves
    assert random_halves(ids, seed=5) != halves


def test_the_random_split_control_includes_chance_on_a_proper_split() -> None:
    control = random_split_control(
        _results(_members_from_one_distribution()), resamples=RESAMPLES, seed=0
    )
    assert list(control.columns) == RANDOM_SPLIT_COLUMNS
    assert {"loss", "min_k", "ps_base"} <= set(control["score"])
    for score in ("loss", "min_k"):
        row = control.set_index("score").loc[score]
        assert (row["n_half_a"], row["n_half_b"]) == (30, 30)
        assert row["auroc_lo"] < 0.5 < row["auroc_hi"]
    assert not control["flagged"].any()
    assert random_split_warning(control) is None
    # Every Mem is equal: its AUROC is ½ exactly, and p = 1.
    mem = control.set_index("score").loc["ps_base"]
    assert mem["auroc"] == pytest.approx(0.5) and mem["p_value"] == pytest.approx(1.0)


def test_the_random_split_control_flags_a_broken_split() -> None:
    # Half of the members were measured differently (loss 3 higher): a split along that line is
    # not random, and the control must say so.
    losses = _members_from_one_distribution()
    shifted = {
        s: (lab, loss + 3.0 if s.startswith("m") and int(s[1:]) % 2 else loss)
        for s, (lab, loss) in losses.items()
    }
    broken = {s: int(s[1:]) % 2 == 0 for s in shifted if s.startswith("m")}
    results = _results(shifted)
    control = random_split_control(results, resamples=RESAMPLES, seed=0, halves=broken)
    flagged = control[control["flagged"]]
    assert set(flagged["score"]) == {"loss", "min_k"}
    loss = control.set_index("score").loc["loss"]
    assert loss["auroc"] == pytest.approx(1.0) and loss["p_holm"] < 0.05
    warning = random_split_warning(control)
    assert warning is not None and "Loss (length 100: AUROC 1.000)" in warning
    assert "do not trust the membership table" in warning
    # The same data split at random is not flagged: the fault is in the split.
    assert not random_split_control(results, resamples=RESAMPLES, seed=0)["flagged"].any()


def test_the_random_split_control_needs_four_members() -> None:
    few = {"m0": (MEMBER, 1.0), "m1": (MEMBER, 2.0), "m2": (MEMBER, 1.5), "n0": (NONMEMBER, 3.0)}
    control = random_split_control(_results(few), resamples=RESAMPLES, seed=0)
    assert control.empty and list(control.columns) == RANDOM_SPLIT_COLUMNS
    assert random_split_warning(control) is None


# --- both, for the report --------------------------------------------------------------------


def test_validity_controls_run_only_on_a_labelled_audit() -> None:
    results = _results(_members_from_one_distribution(n=6))
    texts = {s: f"text {s} " * 5 for s in results["snippet_id"]}
    blind, control = validity_controls(
        results, texts, _membership(0.9), resamples=RESAMPLES, seed=0
    )
    assert isinstance(blind, BlindBaseline) and blind.folds == 5
    assert (blind.best_score, blind.best_length) == ("loss", 100)
    assert not control.empty
    without_texts, _ = validity_controls(
        results, None, _membership(0.9), resamples=RESAMPLES, seed=0
    )
    assert without_texts is not None and "texts were not given" in str(without_texts.note)
    unlabelled = results.assign(label=None)
    none, empty = validity_controls(unlabelled, texts, _membership(0.9), resamples=100, seed=0)
    assert none is None and empty.empty


def test_controls_frame_has_one_row_per_control_and_score() -> None:
    results = _results(_members_from_one_distribution(n=6))
    texts = {s: f"text {s} " * 5 for s in results["snippet_id"]}
    blind, control = validity_controls(results, texts, _membership(0.9), resamples=200, seed=0)
    frame = controls_frame(blind, control)
    assert list(frame.columns) == CONTROLS_COLUMNS
    assert list(frame["control"]) == ["blind_baseline"] + ["random_split"] * len(control)
    assert frame.iloc[0]["n_a"] == 6 and frame.iloc[0]["n_b"] == 6
    # The blind row has no length; the others keep theirs as whole numbers (100, not 100.0).
    assert pd.isna(frame.iloc[0]["length"]) and list(frame["length"][1:]) == [100] * len(control)
    assert str(frame["length"].dtype) == "Int64"
    assert controls_frame(None, None).empty
