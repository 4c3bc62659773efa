"""Dataset inference: was this set of texts, as a whole, used to train the model? (docs/method.md §10)

Maini et al. 2024 ("LLM Dataset Inference: Did you train on my dataset?") answer the question an
auditor is asked about a corpus rather than a text. Single-text membership signals are weak and
point different ways on different data; over many texts, a weighting of all of them, learnt on
one half of the data and tested on the other, separates a training set from held-out texts of
the same distribution with a test whose error rate is known. With a **suspect** set (texts the
model may have been trained on) and a **held-out** set (texts of the same distribution that it
cannot have seen), for each length:

1. each text's membership signals (every signal measured for all texts of both sets and not
   constant; the rest are named and left out);
2. each signal clipped, within each set, to its values at the 2.5th and 97.5th percentile ranks
   (``scipy.stats.mstats.winsorize``; the reference code's default ``clip``);
3. each set split at random (seeded) into halves A and B;
4. on the A halves, signals (each oriented so that higher points to "member", as in the
   membership table) standardised and a linear regression with non-negative weights
   (scikit-learn's ``LinearRegression(positive=True)``) fitted to tell suspect (1) from
   held-out (0);
5. on the B halves, its scores compared by a **one-sided Welch t-test** (``scipy.stats.ttest_ind``,
   ``equal_var=False``, ``alternative="greater"``): H0 "suspect texts score no higher than
   held-out ones". The p-value is below the significance level: the suspect set is, as a whole,
   scored as more member-like than texts the model has not seen.

Differences from the reference code, each on purpose: Welch's test where it uses Student's
(``ttest_ind`` with equal variances; the two sets' score spreads need not be equal); a linear
model whose weights on the member-oriented signals cannot be negative, where it trains an
unconstrained linear layer (logistic loss, Adam, 1,000 epochs): an unconstrained weighting
learns whichever direction separates the sets, so a held-out set that is *more* member-like
(itself trained on) made the reference reject "the suspect set was trained on" — here the score
can only point to "member", and the one-sided test means what it says; least squares has a
closed-form, deterministic fit. And standardisation by the A halves alone, so nothing of the B
halves reaches the fit.

**Assumption**: the held-out set is drawn from the suspect set's distribution. If it is not (other
dates, topics, formats), the test rejects for that difference, not for training: the report's
blind baseline (:mod:`memprobe_core.membership.blind`) on the same two sets shows whether their
texts alone can be told apart. A **random-split control** runs the same procedure on two random
halves of the suspect set, which must not reject. What a result allows, with both controls and
the number of texts tested, is decided in :mod:`memprobe_core.membership.verdict`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
from scipy.stats import mstats

from memprobe_core.errors import OptionError
from memprobe_core.membership.evaluate import _labelled, signal_scores
from memprobe_core.membership.options import SIGNALS
from memprobe_core.snippets.split import MEMBER, NONMEMBER

DEFAULT_SIGNIFICANCE = 0.05
# Of each signal within each set, this share is clipped, half at each end (the reference: 5 %).
CLIP_SHARE = 0.05
# Texts each set needs: two per half, so that the t-test has a variance on each side.
MIN_TEXTS = 4
# Below this many texts per set the report says the test has little power (Maini et al. need
# hundreds of texts for p < 0.05 on most corpora).
FEW_TEXTS = 50
ASSUMPTION = (
    "the held-out set is drawn from the suspect set's distribution (same sources, time and "
    "format); if it is not, a rejection may be that difference rather than training — see "
    "the blind baseline on the same two sets"
)
METHOD = (
    "signals of each set clipped at 2.5 %/97.5 %, each set split at random into halves A/B, "
    "a linear regression with non-negative weights on the standardised, member-oriented "
    "signals fitted on the A halves, its scores on the B halves compared by a one-sided "
    "Welch t-test (H1: suspect > held-out); after Maini et al. 2024"
)


def check_significance(value: Any) -> float:
    """``value`` as a significance level in (0, 1).

    Raises:
        OptionError: not a number strictly between 0 and 1.
    """
    try:
        level = float(value)
    except (TypeError, ValueError):
        level = math.nan
    if isinstance(value, bool) or not 0.0 < level < 1.0:
        raise OptionError("significance", value, "give a level between 0 and 1, e.g. 0.05")
    return level


@dataclass(frozen=True)
class WelchOutcome:
    """One run of the procedure: the Welch test on the B halves' scores.

    Attributes:
        t / df / p_value: Welch's statistic, its degrees of freedom and the one-sided p-value.
        rejected: ``p_value`` < the significance level.
        n_a / n_b: texts fitted on and tested on, per set (``[suspect, held-out]``).
        mean_suspect / mean_heldout: mean score of each set's B half.
        note: why the test was not a t-test (:data:`NO_WEIGHT`), else ``None``.
    """

    t: float
    df: float
    p_value: float
    rejected: bool
    n_a: tuple[int, int]
    n_b: tuple[int, int]
    mean_suspect: float
    mean_heldout: float
    note: str | None = None


# Why a test's p is 1 without a t-test (its t and df are then not a test's).
NO_WEIGHT = (
    "every weight is 0 (no signal points to the suspect set on the A halves): no score to "
    "test, p = 1 by rule"
)


@dataclass(frozen=True)
class DatasetInference:
    """Dataset inference at one length (see the module docstring).

    Attributes:
        length: the unit length whose signals were used.
        n_suspect / n_heldout: texts with signals in each set.
        significance / seed: the level of the test and the seed of the splits.
        features: the signals used, in ``SIGNALS`` order.
        left_out: each signal not used, and why.
        weights: each feature's coefficient in the fitted regression (standardised units of
            the member-oriented signal; never negative, 0: not used).
        test: the outcome on suspect vs held-out (``None`` when not run: see ``note``).
        control: the outcome on two random halves of the suspect set (``None`` when the suspect
            set is too small to halve twice).
        note: why the test was not run, or a caution on its power.
    """

    length: int
    n_suspect: int
    n_heldout: int
    significance: float
    seed: int
    features: tuple[str, ...] = ()
    left_out: dict[str, str] = field(default_factory=dict)
    weights: dict[str, float] = field(default_factory=dict)
    test: WelchOutcome | None = None
    control: WelchOutcome | None = None
    note: str | None = None

    @property
    def test_result(self) -> str:
        """One sentence: what the test alone says at the chosen level, with the texts it
        compared. Not a verdict: the controls decide what it allows
        (:func:`memprobe_core.membership.verdict.inference_verdict`)."""
        if self.test is None:
            return f"not run: {self.note}"
        p = self.test.p_value
        tested = f"{self.test.n_b[0]} vs {self.test.n_b[1]} texts tested"
        if self.test.rejected:
            return (
                f"p = {p:.3g} < {self.significance:g}, {tested}: the suspect texts score as "
                "more member-like than the held-out texts"
            )
        return (
            f"p = {p:.3g} ≥ {self.significance:g}, {tested}: the suspect texts score no more "
            "member-like than the held-out texts"
        )

    @property
    def control_warning(self) -> str | None:
        """Set when the random-split control rejects: the procedure found a difference between
        two random halves of one set, so its rejections cannot be trusted."""
        if self.control is None or not self.control.rejected:
            return None
        return (
            f"the random-split control rejects too (p = {self.control.p_value:.3g}): two random "
            "halves of the suspect set were told apart, so this test's p-value cannot be trusted"
        )

    @property
    def control_note(self) -> str | None:
        """Why the random-split control did not run (``None``: it ran, or the test did not)."""
        if self.test is None or self.control is not None:
            return None
        return (
            f"the random-split control is not run: it halves the suspect set and needs at "
            f"least {2 * MIN_TEXTS} suspect texts ({self.n_suspect} here)"
        )

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["control_note"] = self.control_note
        # The verdict needs the report's blind baseline: ``report_to_dict`` adds it.
        out["test_result"] = self.test_result
        out["control_warning"] = self.control_warning
        out["assumption"] = ASSUMPTION
        out["method"] = METHOD
        return out


def _usable_features(
    suspect: pd.DataFrame, heldout: pd.DataFrame
) -> tuple[list[str], dict[str, str]]:
    """The signal columns to fit on, and each other signal with why it is left out."""
    used, left_out = [], {}
    for spec in SIGNALS:
        if spec.column not in suspect or spec.column not in heldout:
            left_out[spec.name] = "not measured in this run"
            continue
        both = pd.concat([suspect[spec.column], heldout[spec.column]])
        missing = int(both.isna().sum())
        if missing == len(both):
            left_out[spec.name] = "not measured in this run"
        elif missing:
            left_out[spec.name] = f"not measured for {missing} of {len(both)} texts"
        elif float(both.std(ddof=0)) == 0.0:
            left_out[spec.name] = "the same value for every text"
        else:
            used.append(spec.column)
    return used, left_out


def _clipped(values: np.ndarray) -> np.ndarray:
    """Each column of ``values`` (texts × signals) winsorized at ``CLIP_SHARE / 2`` per end."""
    half = CLIP_SHARE / 2
    return np.column_stack(
        [np.asarray(mstats.winsorize(col, limits=(half, half))) for col in values.T]
    )


def _halves(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    order = rng.permutation(n)
    return order[: n // 2], order[n // 2 :]


def _test(
    suspect: np.ndarray, heldout: np.ndarray, *, significance: float, rng: np.random.Generator
) -> tuple[WelchOutcome, np.ndarray]:
    """The procedure on two arrays (texts × features, oriented so that higher = member, already
    clipped): the outcome and the fitted weights (standardised units)."""
    # Imported here: scikit-learn is loaded only when a report has dataset inference to show.
    from sklearn.linear_model import LinearRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    s_a, s_b = _halves(len(suspect), rng)
    h_a, h_b = _halves(len(heldout), rng)
    x_a = np.vstack([suspect[s_a], heldout[h_a]])  # (n_a, F)
    y_a = np.concatenate([np.ones(len(s_a)), np.zeros(len(h_a))])  # (n_a,)
    # Non-negative weights on member-pointing signals: the score can only say "more
    # member-like", so a held-out set that looks more member-like than the suspect set (itself
    # trained on, say) is never taken as evidence against the suspect set.
    model = make_pipeline(StandardScaler(), LinearRegression(positive=True))
    model.fit(x_a, y_a)
    scores_s = model.predict(suspect[s_b])  # (n_b suspect,)
    scores_h = model.predict(heldout[h_b])  # (n_b held-out,)
    with warnings.catch_warnings():
        # Every weight 0 (no signal points to the suspect set on the A halves) makes the
        # scores constant: scipy warns of lost precision and returns NaN, read as p = 1 below.
        warnings.simplefilter("ignore", RuntimeWarning)
        welch = stats.ttest_ind(scores_s, scores_h, equal_var=False, alternative="greater")
    p = float(welch.pvalue)
    unweighted = not np.any(model[-1].coef_)
    if math.isnan(p) or unweighted:  # nothing to test
        p = 1.0
    outcome = WelchOutcome(
        t=float(welch.statistic) if math.isfinite(welch.statistic) and not unweighted else 0.0,
        df=float(welch.df) if not unweighted else math.nan,
        p_value=p,
        rejected=p < significance,
        n_a=(len(s_a), len(h_a)),
        n_b=(len(s_b), len(h_b)),
        mean_suspect=float(np.mean(scores_s)),
        mean_heldout=float(np.mean(scores_h)),
        note=NO_WEIGHT if unweighted else None,
    )
    return outcome, model[-1].coef_


def dataset_inference(
    suspect: pd.DataFrame,
    heldout: pd.DataFrame,
    *,
    length: int,
    significance: float = DEFAULT_SIGNIFICANCE,
    seed: int = 0,
) -> DatasetInference:
    """Dataset inference on two sets' signals (rows: texts; ``signal_<name>`` columns, as
    :func:`~memprobe_core.membership.evaluate.signal_scores` gives them).

    Returns:
        A :class:`DatasetInference`; with ``note`` and no ``test`` when a set has fewer than
        :data:`MIN_TEXTS` texts or no signal can be used.
    """
    significance = check_significance(significance)
    base: dict[str, Any] = {
        "length": int(length),
        "n_suspect": len(suspect),
        "n_heldout": len(heldout),
        "significance": significance,
        "seed": int(seed),
    }
    small = [
        f"the {name} set has {len(rows)} text(s) with signals"
        for name, rows in (("suspect", suspect), ("held-out", heldout))
        if len(rows) < MIN_TEXTS
    ]
    if small:
        return DatasetInference(
            **base,
            note=f"{' and '.join(small)}; it needs at least {MIN_TEXTS} in each (two per half)",
        )
    columns, left_out = _usable_features(suspect, heldout)
    if not columns:
        return DatasetInference(
            **base, left_out=left_out, note="no signal was measured for every text of both sets"
        )
    s_values = _clipped(suspect[columns].to_numpy(dtype=float))  # (n_suspect, F)
    h_values = _clipped(heldout[columns].to_numpy(dtype=float))  # (n_heldout, F)
    rng = np.random.default_rng(seed)
    test, weights = _test(s_values, h_values, significance=significance, rng=rng)
    control = None
    if len(suspect) >= 2 * MIN_TEXTS:  # two halves of the suspect set, each halved again
        first, second = _halves(len(suspect), rng)
        control, _ = _test(s_values[first], s_values[second], significance=significance, rng=rng)
    names = [c.removeprefix("signal_") for c in columns]
    # A rejection stands on its p-value; only a non-rejection on few texts says little.
    few = min(len(suspect), len(heldout)) < FEW_TEXTS and not test.rejected
    return DatasetInference(
        **base,
        features=tuple(names),
        left_out=left_out,
        weights={n: float(w) for n, w in zip(names, weights)},
        test=test,
        control=control,
        note=(
            f"fewer than {FEW_TEXTS} texts in a set: the test has little power, so a p-value "
            "above the level says little"
            if few
            else None
        ),
    )


def inference_for_results(
    results: pd.DataFrame,
    *,
    significance: float = DEFAULT_SIGNIFICANCE,
    seed: int = 0,
    lengths: Sequence[int] = (),
) -> list[DatasetInference]:
    """Dataset inference per length of a run whose suspect texts are labelled ``member`` and
    held-out texts ``nonmember`` (as ``memprobe infer`` records them). A length of ``lengths``
    that no finished unit has gets a "not run" entry, not silence."""
    rows = _labelled(results)
    scored = {int(n) for n in rows["length"].unique()} if not rows.empty else set()
    out = [
        DatasetInference(
            length=int(n),
            n_suspect=0,
            n_heldout=0,
            significance=check_significance(significance),
            seed=int(seed),
            note="no text was scored at this length yet (or every unit failed: see the "
            "failed units)",
        )
        for n in sorted(set(int(n) for n in lengths) - scored)
    ]
    for length, at in rows.groupby("length", sort=True):
        per_text = signal_scores(at)  # one row per snippet, signals oriented (sign is learnt)
        out.append(
            dataset_inference(
                per_text[per_text["label"] == MEMBER],
                per_text[per_text["label"] == NONMEMBER],
                length=int(length),
                significance=significance,
                seed=seed,
            )
        )
    return sorted(out, key=lambda one: one.length)
