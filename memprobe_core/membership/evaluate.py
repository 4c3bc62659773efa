"""How well each score tells members from non-members, on an audit whose snippets are labelled.

A *score* is either a membership signal of a snippet (:data:`~memprobe_core.membership.options.
SIGNALS`, oriented so that higher = member) or an extraction method's Mem on it (higher Mem =
more of the suffix came back = member). Per score and length this gives, as in Carlini et al.
2022 ("Membership Inference Attacks From First Principles"):

- **AUROC**: the probability that a random member outscores a random non-member, ties counting
  ½ (the Mann–Whitney U statistic over ``n_members · n_nonmembers``, from scipy);
- **TPR at 1 % and 0.1 % FPR**: call a snippet a member when its score is *strictly above* a
  threshold; the highest TPR over thresholds whose FPR ≤ the target (``fpr_rule="le"``, the
  default) or FPR < the target (``"lt"``, mimir's convention). No interpolation between ROC
  points: the figure is one a real threshold achieves;
- the **ROC curve**: one point per distinct score, from (0, 0) to (1, 1).

**FPR resolution.** With ``N`` non-members the FPRs a threshold can give are ``0, 1/N, 2/N …``:
the target is met by at most ``floor(target · N)`` false positives. Below ``N = 100`` (1 %) or
``N = 1000`` (0.1 %) that is zero, so "TPR at 1 % FPR" *is* TPR at FPR 0 — the share of members
scoring above every non-member. :func:`fpr_note` says so in words; the report carries it in its
metadata and prints it under the table.

**Intervals.** Percentile bootstrap 95 %, stratified: members and non-members are resampled
separately (``scipy.stats.bootstrap`` with two samples), so every resample keeps the audit's
class sizes; seeded, with the report's ``resamples``. Not BCa (the report's choice for means):
TPR at an extreme FPR is a step function of the one or two highest non-member scores and often
sits at 0 or 1, so many resamples equal the estimate and BCa's bias correction
``Φ⁻¹(share of resamples below the estimate)`` becomes ±∞ or jumps, and its jackknife
acceleration is 0/0 when leaving one snippet out does not move the statistic — scipy then gives
NaN. The percentile interval is defined for any statistic and stays inside [0, 1]; AUROC uses it
too so that one table has one kind of interval. As for Table 1, a class with fewer than two
snippets, or a zero-width interval (perfect separation gives AUROC 1 in every resample; TPR at
0.1 % FPR is often 0 in nearly all of them) gives no interval — ``(nan, nan)`` — rather than a
certainty the data cannot support.

Measured coverage (``python bench/membership_intervals.py``: 200 simulated audits per row, members
N(1, 1), non-members N(0, 1)): the AUROC interval held the true 0.760 in 0.905 / 0.940 / 0.940
of audits with 10 / 30 / 100 snippets a class; the TPR-at-1 %-FPR interval held the true 0.092
in only 0.485 / 0.685 / 0.870 — below 100 non-members it estimates TPR at FPR 0, and a tail
statistic resampled from a few dozen points is rough. Read those columns as indicative.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Literal, cast

import numpy as np
import pandas as pd
from scipy import stats

from memprobe_core.attacks.registry import extracts, method_label, method_rank
from memprobe_core.errors import OptionError
from memprobe_core.membership.options import SIGNALS
from memprobe_core.snippets.split import MEMBER, NONMEMBER
from memprobe_core.stats import CONFIDENCE

# MEMBERSHIP_COLUMNS' TPR columns and the FPR each one targets.
FPR_TARGETS: dict[str, float] = {"tpr_at_1": 0.01, "tpr_at_01": 0.001}
# Which thresholds "TPR at FPR t" may use. Neither is wrong; they differ when t · N is whole
# (1 % of 100 non-members: one false positive allowed, or none), by up to 0.10 in TPR@1 % on
# 100 non-members. Every report names the one it used.
FprRule = Literal["le", "lt"]
FPR_RULES: dict[str, str] = {
    "le": "FPR ≤ target (at most floor(target·N) false positives)",
    "lt": "FPR < target (fewer than target·N false positives; mimir's and LiRA-style code's)",
}
DEFAULT_FPR_RULE: FprRule = "le"
# Absorbs float error in target · N (0.07 · 100 = 7.000000000000001) before flooring.
_FLOOR_EPS = 1e-9
# Bootstrap arrays are (batch, n); cap their size (~32 MB of float64), as stats.py does.
_MAX_BATCH_ELEMENTS = 4_000_000
# The report's membership table (``Report.membership``): one row per score (a membership signal or
# an extraction method's Mem) and length; ``tpr_at_1``/``tpr_at_01``: TPR at 1 % / 0.1 % FPR.
MEMBERSHIP_COLUMNS = [
    "score",
    "score_label",
    "kind",
    "length",
    "n_members",
    "n_nonmembers",
    "auroc",
    "auroc_lo",
    "auroc_hi",
    "tpr_at_1",
    "tpr_at_1_lo",
    "tpr_at_1_hi",
    "tpr_at_01",
    "tpr_at_01_lo",
    "tpr_at_01_hi",
]
# The ROC curves behind it (``Report.roc``): one row per curve point.
ROC_COLUMNS = ["score", "score_label", "kind", "length", "fpr", "tpr"]
_INTERVAL_NAME = (
    "percentile bootstrap 95 %, stratified (members and non-members resampled separately)"
)


def _clean(values: Any) -> np.ndarray:
    data = np.asarray(values, dtype=float).ravel()  # (n,)
    return data[~np.isnan(data)]


def _allowed_false_positives(fpr: float, n_nonmembers: int, rule: FprRule = "le") -> int:
    """How many of ``n_nonmembers`` may score above the threshold of TPR at FPR ``fpr``:
    ``FPR ≤ fpr`` allows ``floor(fpr · N)``, ``FPR < fpr`` one fewer when ``fpr · N`` is whole
    (``ceil(fpr · N) − 1``); ``-1`` when none may (``fpr`` 0 under ``<``)."""
    if rule == "lt":
        return math.ceil(fpr * n_nonmembers - _FLOOR_EPS) - 1
    return math.floor(fpr * n_nonmembers + _FLOOR_EPS)


def check_fpr_rule(rule: str) -> FprRule:
    """``rule`` if it is one of :data:`FPR_RULES`.

    Raises:
        OptionError: another value (the message lists the rules).
    """
    if rule not in FPR_RULES:
        raise OptionError("fpr_rule", rule, f"give one of {', '.join(FPR_RULES)}")
    return cast(FprRule, rule)


def auroc(member_scores: Any, nonmember_scores: Any) -> float:
    """Probability that a random member outscores a random non-member (ties count ½).

    Args:
        member_scores / nonmember_scores: one score per snippet, higher = member; NaNs dropped.

    Returns:
        AUROC in [0, 1] (0.5 = no separation); NaN when either class has no score.
    """
    members, nonmembers = _clean(member_scores), _clean(nonmember_scores)
    if members.size == 0 or nonmembers.size == 0:
        return math.nan
    u = stats.mannwhitneyu(members, nonmembers, method="asymptotic").statistic  # of the members
    return float(u) / (members.size * nonmembers.size)


def roc_points(member_scores: Any, nonmember_scores: Any) -> tuple[np.ndarray, np.ndarray]:
    """The ROC curve: ``(fpr, tpr)``, from (0, 0) to (1, 1), one point per distinct score.

    The point of a score ``t`` counts snippets scoring ``≥ t`` as members; distinct scores are
    taken from the highest down, after the (0, 0) of a threshold above every score.

    Returns:
        Two float arrays of equal length; both empty when either class has no score.
    """
    members, nonmembers = np.sort(_clean(member_scores)), np.sort(_clean(nonmember_scores))
    if members.size == 0 or nonmembers.size == 0:
        return np.array([]), np.array([])
    thresholds = np.unique(np.concatenate([members, nonmembers]))[::-1]  # (T,), highest first
    # Snippets scoring >= t: all but those strictly below t.
    tpr = 1.0 - np.searchsorted(members, thresholds, side="left") / members.size
    fpr = 1.0 - np.searchsorted(nonmembers, thresholds, side="left") / nonmembers.size
    return np.concatenate([[0.0], fpr]), np.concatenate([[0.0], tpr])


def tpr_at_fpr(
    member_scores: Any, nonmember_scores: Any, fpr: float, rule: FprRule = DEFAULT_FPR_RULE
) -> float:
    """The highest TPR of a threshold whose FPR ≤ ``fpr`` (``rule="lt"``: FPR < ``fpr``), a
    member being a score strictly above the threshold.

    With ``N`` non-members at most ``floor(fpr · N)`` of them may score above the threshold
    (``lt``: ``ceil(fpr · N) − 1``); when that is 0 (``fpr < 1/N``, e.g. 1 % with 20
    non-members) this is TPR at FPR = 0: the share of members above the highest non-member (see
    :func:`fpr_note`).

    Args:
        member_scores / nonmember_scores: one score per snippet, higher = member; NaNs dropped.
        fpr: the target false-positive rate in [0, 1].
        rule: ``le`` (FPR ≤ target, the default) or ``lt`` (FPR < target, as mimir).

    Returns:
        TPR in [0, 1]; NaN when either class has no score.

    Raises:
        ValueError: ``fpr`` outside [0, 1].
    """
    if not 0.0 <= fpr <= 1.0:
        raise ValueError(f"fpr {fpr!r} is out of range; give a rate in [0, 1], e.g. 0.01")
    members, nonmembers = _clean(member_scores), _clean(nonmember_scores)
    if members.size == 0 or nonmembers.size == 0:
        return math.nan
    k = _allowed_false_positives(fpr, nonmembers.size, check_fpr_rule(rule))
    if k >= nonmembers.size:  # every snippet may be called a member
        return 1.0
    if k < 0:  # no threshold has FPR < 0
        return 0.0
    # With k false positives allowed, the lowest admissible threshold is the (k+1)-th highest
    # non-member score: a lower one lets in a (k+1)-th non-member; the lowest keeps most members.
    threshold = np.sort(nonmembers)[nonmembers.size - 1 - k]
    return float(np.mean(members > threshold))


def _dense_ranks(members: np.ndarray, nonmembers: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Both samples as ranks 0..K-1 in the pooled sample (equal scores share one rank)."""
    levels, inverse = np.unique(np.concatenate([members, nonmembers]), return_inverse=True)
    ranks = inverse.astype(float)  # (n1 + n0,)
    return ranks[: members.size], ranks[members.size :], int(levels.size)


def _rank_statistics(levels: int, rule: FprRule) -> Any:
    """AUROC and each TPR of :data:`FPR_TARGETS` on dense ranks, batched: ``(3, ...)``.

    The statistics depend only on the order of the scores, so the bootstrap resamples their
    pooled ranks. Per resample, a histogram of the non-members' ranks (one ``bincount`` for the
    whole batch) gives, at each member's rank, the non-members below it, tied with it and at or
    above it: AUROC = mean(below + ½ tied) / n0, and a member clears the threshold of k allowed
    false positives when at most k non-members score at or above it (see :func:`tpr_at_fpr`).
    Sorting each resample instead (``mannwhitneyu`` on a batch) is 2–4x slower (bench/membership_intervals.py).
    """

    def statistic(members: np.ndarray, nonmembers: np.ndarray, axis: int = -1) -> np.ndarray:
        m = np.moveaxis(members, axis, -1).astype(np.int64)  # (..., n1)
        n = np.moveaxis(nonmembers, axis, -1).astype(np.int64)  # (..., n0)
        batch_shape, n0 = n.shape[:-1], n.shape[-1]
        m, n = m.reshape(-1, m.shape[-1]), n.reshape(-1, n0)  # (B, n1), (B, n0)
        offsets = np.arange(n.shape[0])[:, None] * levels  # (B, 1): one histogram per row
        counts = np.bincount((n + offsets).ravel(), minlength=n.shape[0] * levels)
        counts = counts.reshape(n.shape[0], levels)  # (B, K)
        below = np.cumsum(counts, axis=1) - counts  # (B, K): non-members strictly below
        tied = np.take_along_axis(counts, m, axis=1)  # (B, n1)
        under = np.take_along_axis(below, m, axis=1)  # (B, n1)
        auc = (under + 0.5 * tied).mean(axis=1) / n0  # (B,)
        at_or_above = n0 - under  # (B, n1)
        tprs = [
            (at_or_above <= _allowed_false_positives(f, n0, rule)).mean(axis=1)
            for f in FPR_TARGETS.values()
        ]
        return np.stack([auc, *tprs]).reshape(1 + len(tprs), *batch_shape)

    return statistic


def bootstrap_intervals(
    member_scores: Any,
    nonmember_scores: Any,
    *,
    resamples: int,
    seed: int,
    fpr_rule: FprRule = DEFAULT_FPR_RULE,
) -> dict[str, tuple[float, float]]:
    """Stratified percentile bootstrap 95 % intervals of AUROC and TPR at each target FPR.

    Args:
        member_scores / nonmember_scores: one score per snippet, higher = member; NaNs dropped.
        resamples: bootstrap resamples (the report validates the range).
        seed: seed of the resampling (the same seed gives the same intervals).
        fpr_rule: the TPR-at-FPR convention (:data:`FPR_RULES`).

    Returns:
        ``{"auroc": (lo, hi), "tpr_at_1": …, "tpr_at_01": …}``; ``(nan, nan)`` where there is
        no interval (a class with fewer than two scores, or a zero-width interval).
    """
    names = ["auroc", *FPR_TARGETS]
    members, nonmembers = _clean(member_scores), _clean(nonmember_scores)
    if members.size < 2 or nonmembers.size < 2:
        return {name: (math.nan, math.nan) for name in names}
    member_ranks, nonmember_ranks, levels = _dense_ranks(members, nonmembers)
    batch = max(1, _MAX_BATCH_ELEMENTS // (members.size + nonmembers.size))
    with warnings.catch_warnings():
        # A constant bootstrap distribution is handled below (no interval); scipy's warning
        # about it is noise here.
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        result = stats.bootstrap(
            (member_ranks, nonmember_ranks),  # two samples: each resampled alone (stratified)
            _rank_statistics(levels, check_fpr_rule(fpr_rule)),
            n_resamples=resamples,
            method="percentile",
            confidence_level=CONFIDENCE,
            vectorized=True,
            batch=batch,
            rng=np.random.default_rng(seed),
        )
    lows, highs = result.confidence_interval
    out = {}
    for name, low, high in zip(names, np.atleast_1d(lows), np.atleast_1d(highs)):
        defined = math.isfinite(low) and math.isfinite(high) and high > low
        out[name] = (float(low), float(high)) if defined else (math.nan, math.nan)
    return out


def _labelled(results: pd.DataFrame) -> pd.DataFrame:
    """Rows whose snippet is a member or a non-member (unlabelled rows play no part)."""
    if results.empty or "label" not in results:
        return results.iloc[0:0]
    return results[results["label"].isin([MEMBER, NONMEMBER])]


def signal_scores(rows: pd.DataFrame) -> pd.DataFrame:
    """Per snippet (index): its label and each signal, oriented so that higher = member.

    A signal belongs to (snippet, length), not to a method: every method's row of a snippet
    carries the same value, or None where that unit did not measure it — so the first non-null
    value per snippet is taken (``groupby.first`` skips nulls).
    """
    columns = [s.column for s in SIGNALS if s.column in rows]
    numeric = rows[["snippet_id", "label"]].assign(
        **{c: pd.to_numeric(rows[c], errors="coerce") for c in columns}
    )
    per_snippet = numeric.groupby("snippet_id", sort=True).first()
    for spec in SIGNALS:
        if spec.column in per_snippet and not spec.higher_is_member:
            per_snippet[spec.column] = -per_snippet[spec.column]
    return per_snippet


def _method_scores(rows: pd.DataFrame, method: str) -> pd.DataFrame:
    """Per snippet (index): its label and that method's Mem (a repeated unit: the last row)."""
    mine = rows[rows["method"] == method].drop_duplicates("snippet_id", keep="last")
    return mine.set_index("snippet_id")[["label"]].assign(
        score=pd.to_numeric(mine.set_index("snippet_id")["mem"], errors="coerce")
    )


def _score_rows(
    key: dict[str, Any],
    scores: pd.Series,
    labels: pd.Series,
    *,
    resamples: int,
    seed: int,
    fpr_rule: FprRule,
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """One MEMBERSHIP_COLUMNS row and its ROC_COLUMNS rows; ``(None, [])`` if a class is empty."""
    members = _clean(scores[labels == MEMBER])
    nonmembers = _clean(scores[labels == NONMEMBER])
    if members.size == 0 or nonmembers.size == 0:
        return None, []
    row = {**key, "n_members": int(members.size), "n_nonmembers": int(nonmembers.size)}
    row["auroc"] = auroc(members, nonmembers)
    for name, fpr in FPR_TARGETS.items():
        row[name] = tpr_at_fpr(members, nonmembers, fpr, fpr_rule)
    intervals = bootstrap_intervals(
        members, nonmembers, resamples=resamples, seed=seed, fpr_rule=fpr_rule
    )
    for name, (low, high) in intervals.items():
        row[f"{name}_lo"], row[f"{name}_hi"] = low, high
    fpr_points, tpr_points = roc_points(members, nonmembers)
    curve = [{**key, "fpr": float(f), "tpr": float(t)} for f, t in zip(fpr_points, tpr_points)]
    return row, curve


def membership_table(
    results: pd.DataFrame, *, resamples: int, seed: int, fpr_rule: FprRule = DEFAULT_FPR_RULE
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """AUROC, TPR at 1 % / 0.1 % FPR (with intervals) and ROC curves per score and length.

    Args:
        results: ``Store.results_frame`` rows (``label``, ``snippet_id``, ``length``,
            ``method``, ``mem`` and the ``signal_<name>`` columns).
        resamples / seed: bootstrap settings (see :func:`bootstrap_intervals`).
        fpr_rule: the TPR-at-FPR convention (:data:`FPR_RULES`).

    Returns:
        ``(membership, roc)`` with :data:`MEMBERSHIP_COLUMNS` / :data:`ROC_COLUMNS`: per length,
        one ``signal`` row per signal (in ``SIGNALS`` order), then one ``method`` row per
        extraction method (paper order; not the signals-only method, which has no Mem). A score with no value in a class is left out; both
        frames are empty unless the rows hold at least one member and one non-member.
    """
    rows = _labelled(results)
    if rows.empty or not {MEMBER, NONMEMBER} <= set(rows["label"]):
        return pd.DataFrame(columns=MEMBERSHIP_COLUMNS), pd.DataFrame(columns=ROC_COLUMNS)
    table, curves = [], []
    for length, at in rows.groupby("length", sort=True):
        signals = signal_scores(at)
        scored = [
            (spec.name, spec.label, "signal", signals.get(spec.column), signals["label"])
            for spec in SIGNALS
        ]
        # A method that asks no model for the suffix (signals only) has no Mem to rank by.
        extracting = [m for m in at["method"].unique() if extracts(m)]
        for method in sorted(extracting, key=method_rank):
            mine = _method_scores(at, method)
            label = method_label(method)
            scored.append((method, label, "method", mine["score"], mine["label"]))
        for name, label, kind, scores, labels in scored:
            if scores is None:  # a results frame without this signal's column
                continue
            key = {"score": name, "score_label": label, "kind": kind, "length": int(length)}
            row, curve = _score_rows(
                key, scores, labels, resamples=resamples, seed=seed, fpr_rule=fpr_rule
            )
            if row is not None:
                table.append(row)
                curves += curve
    return (
        pd.DataFrame(table, columns=MEMBERSHIP_COLUMNS),
        pd.DataFrame(curves, columns=ROC_COLUMNS),
    )


def fpr_note(n_nonmembers: int, fpr_rule: FprRule = DEFAULT_FPR_RULE) -> str:
    """What TPR at 1 % and 0.1 % FPR mean with ``n_nonmembers`` non-members, in one sentence.

    Example: ``fpr_note(20)`` says the smallest non-zero FPR is 5 %, so both are TPR at FPR 0.
    """
    if n_nonmembers < 1:
        return "no non-members: no FPR can be measured"
    at_zero, bounded = [], []
    for fpr in FPR_TARGETS.values():
        allowed = _allowed_false_positives(fpr, n_nonmembers, fpr_rule)
        name = f"TPR@{100 * fpr:g}%"
        if allowed <= 0:
            at_zero.append(name)
        else:
            reached = 100 * allowed / n_nonmembers
            bounded.append(f"{name} allows {allowed} false positive(s) (FPR {reached:.3g} %)")
    parts = [f"{n_nonmembers} non-members: the smallest non-zero FPR is {100 / n_nonmembers:.4g} %"]
    if at_zero:
        parts.append(
            f"{' and '.join(at_zero)} {'is' if len(at_zero) == 1 else 'are'} TPR at FPR 0 "
            "(members scoring above every non-member)"
        )
    return "; ".join(parts + bounded)


def membership_meta(
    results: pd.DataFrame, membership: pd.DataFrame, fpr_rule: FprRule = DEFAULT_FPR_RULE
) -> dict[str, Any]:
    """Report metadata of a labelled audit: class sizes, interval method, FPR resolution and
    the TPR-at-FPR convention (``fpr_rule``, also named in words under ``tpr_rule``).

    Empty when no row is labelled (an ordinary audit says nothing about membership).
    """
    rows = _labelled(results)
    if rows.empty:
        return {}
    snippets = rows.drop_duplicates("snippet_id")
    n_members = int((snippets["label"] == MEMBER).sum())
    n_nonmembers = int((snippets["label"] == NONMEMBER).sum())
    info: dict[str, Any] = {
        "members": n_members,
        "nonmembers": n_nonmembers,
        "membership_interval": _INTERVAL_NAME,
        "membership_fpr_resolution": 1.0 / n_nonmembers if n_nonmembers else None,
        "fpr_rule": fpr_rule,
        "tpr_rule": FPR_RULES[fpr_rule],
    }
    if membership.empty:
        info["membership_note"] = (
            f"{n_members} member(s) and {n_nonmembers} non-member(s): the membership table needs "
            "at least one of each with a score"
        )
        return info
    counts = sorted({int(n) for n in membership["n_nonmembers"]})
    info["membership_note"] = " | ".join(fpr_note(n, fpr_rule) for n in counts)
    return info
