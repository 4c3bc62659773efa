"""Validity controls of a labelled audit: a blind baseline and a random-split control.

A membership signal that separates members from non-members is evidence of membership only if
nothing else separates them. Das et al. 2024 ("Blind Baselines Beat Membership Inference Attacks
for Foundation Models") showed that on many published splits a classifier that never sees the
model does as well as the attacks: the members and non-members differ in form (dates, topics,
style), and the attack measures that. Our built-in labelled audit (real licences and sources
against generated ones, docs/method.md §11) is such a split. Two controls say so in every report
on a labelled audit (docs/method.md §10):

- **Blind baseline** (:func:`blind_baseline`): a classifier on the snippet texts alone — TF-IDF of
  word 1–2-grams and character 3–5-grams, L2 logistic regression — scored out of fold by a
  seeded stratified k-fold (k = 5, fewer when a class has fewer than 5 texts; refused below 2).
  Its out-of-fold scores get the membership table's AUROC, TPR at low FPR and intervals
  (:mod:`memprobe_core.membership.evaluate`). It **warns** when its AUROC interval lies above 0.5
  (the split can be told apart without the model), or when its AUROC is within
  :data:`CLOSE_TO_BEST` of the best score of the membership table, or above it.
- **Random-split control** (:func:`random_split_control`): the members alone, split at random
  (seeded) into two halves, one of them labelled non-member, then every score of the membership
  table evaluated the same way. The halves differ by chance only, so AUROC should be 0.5; a row
  whose Holm-adjusted p-value (over the control's rows) is below :data:`ALPHA` is **flagged**: the
  labels reach the scores by some other way (a score joined to the wrong snippet, labels read in
  another order, duplicated ids), and no figure of the membership table can be trusted. It cannot
  see a distribution shift between members and non-members: that is the blind baseline's job.

Both are deterministic given the seed (the report's bootstrap seed).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from memprobe_core.membership.evaluate import (
    DEFAULT_FPR_RULE,
    FPR_TARGETS,
    FprRule,
    _labelled,
    auroc,
    bootstrap_intervals,
    membership_table,
    tpr_at_fpr,
)
from memprobe_core.snippets.split import MEMBER, NONMEMBER, DataError
from memprobe_core.stats import holm

DEFAULT_FOLDS = 5
# The blind baseline warns when its AUROC is at least the best score's minus this.
CLOSE_TO_BEST = 0.05
# The random-split control flags a row whose Holm-adjusted p-value is below this.
ALPHA = 0.05
# Each text is cut to its first characters before the n-grams (bounds the time on long texts).
MAX_TEXT_CHARS = 20_000
# Hashed feature space of each n-gram family (collisions are rare at a few hundred texts).
_HASH_FEATURES = 2**20
BLIND_FEATURES = (
    "TF-IDF (sublinear tf) of word 1–2-grams (lower-cased) and character 3–5-grams, "
    f"each hashed into 2^20 columns; the first {MAX_TEXT_CHARS:,} characters of each text"
)
BLIND_CLASSIFIER = "logistic regression, L2 (C = 1), balanced class weights (liblinear)"
BLIND_WARNING = (
    "this split can be told apart without the model: the signals' AUROC is not evidence of "
    "membership"
)
RANDOM_SPLIT_METHOD = (
    "the members alone, split at random (seeded) into two halves, half A scored as members and "
    "half B as non-members: they differ by chance only, so every AUROC should be near 0.5; a row "
    f"is flagged when its Holm-adjusted p-value (Mann–Whitney, over the rows) is below {ALPHA:g}"
)
RANDOM_SPLIT_OK = (
    "no score tells the random halves of the members apart (every Holm-adjusted p ≥ "
    f"{ALPHA:g}): the evaluation gives chance when the labels mean nothing"
)
RANDOM_SPLIT_TOO_FEW = (
    "not run: it needs at least 4 members with a finished unit (two in each half)"
)
# The report's random-split table (``Report.random_split``): one row per score and length.
RANDOM_SPLIT_COLUMNS = [
    "score",
    "score_label",
    "kind",
    "length",
    "n_half_a",
    "n_half_b",
    "auroc",
    "auroc_lo",
    "auroc_hi",
    "p_value",
    "p_holm",
    "flagged",
]
# A half needs two snippets for an interval.
_MIN_HALF = 2


def _figure_names() -> list[str]:
    return ["auroc", *FPR_TARGETS]


@dataclass(frozen=True)
class BlindBaseline:
    """The blind baseline of one labelled audit (see the module docstring).

    Attributes:
        n_members / n_nonmembers: labelled snippets with a text.
        folds: folds of the cross-validation (0: not run, see ``note``).
        seed: seed of the folds (and of the bootstrap).
        figures: ``auroc``, each TPR of ``FPR_TARGETS`` and their ``_lo`` / ``_hi`` (NaN: no
            figure or no interval), from the out-of-fold scores.
        best_score / best_score_label / best_length / best_auroc: the membership table's row
            with the highest AUROC (``None`` / NaN when the table is empty).
        warning: why the audit's AUROCs are not evidence of membership; ``None`` when the
            baseline stays below them.
        note: why there is no baseline (too few texts, no texts); ``None`` when there is one.
    """

    n_members: int
    n_nonmembers: int
    folds: int
    seed: int
    figures: dict[str, float] = field(default_factory=dict)
    best_score: str | None = None
    best_score_label: str | None = None
    best_length: int | None = None
    best_auroc: float = math.nan
    warning: str | None = None
    note: str | None = None
    features: str = BLIND_FEATURES
    classifier: str = BLIND_CLASSIFIER

    def figure(self, name: str) -> float:
        """A figure by name (``auroc``, ``auroc_lo`` …); NaN when there is none."""
        return self.figures.get(name, math.nan)

    @property
    def separable(self) -> bool:
        """The texts alone tell the two sets apart (:func:`separates` on the baseline's AUROC):
        any score's separation may then be that difference, not membership."""
        return separates(self.figure("auroc"), self.figure("auroc_lo"))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: every field, the figures flattened in, NaN as ``None``."""

        def clean(value: Any) -> Any:
            return None if isinstance(value, float) and not math.isfinite(value) else value

        out: dict[str, Any] = {
            "n_members": self.n_members,
            "n_nonmembers": self.n_nonmembers,
            "folds": self.folds,
            "seed": self.seed,
            "features": self.features,
            "classifier": self.classifier,
        }
        for name in _figure_names():
            for suffix in ("", "_lo", "_hi"):
                out[name + suffix] = clean(self.figure(name + suffix))
        out.update(
            {
                "best_score": self.best_score,
                "best_score_label": self.best_score_label,
                "best_length": self.best_length,
                "best_auroc": clean(self.best_auroc),
                "warning": self.warning,
                "note": self.note,
            }
        )
        return out


def blind_method(blind: BlindBaseline) -> str:
    """How ``blind`` was computed, in one sentence (shown under its figures)."""
    folds = f"{blind.folds}-fold" if blind.folds else "k-fold"
    return (
        f"a classifier on the snippet texts alone, never the model: {blind.features}; "
        f"{blind.classifier}; {folds} stratified cross-validation (seed {blind.seed}), each "
        "text scored by the model fitted on the other folds"
    )


def folds_for(n_members: int, n_nonmembers: int, folds: int = DEFAULT_FOLDS) -> int:
    """The folds a class of these sizes allows: ``folds``, fewer for a small class.

    Raises:
        DataError: a class with fewer than two texts (two folds need one text of each class in
            each; the message says how many there are).
    """
    smallest = min(n_members, n_nonmembers)
    if smallest < 2:
        raise DataError(
            f"the blind baseline needs at least 2 members and 2 non-members with a text for a "
            f"2-fold cross-validation; this audit has {n_members} member(s) and {n_nonmembers} "
            "non-member(s)"
        )
    return max(2, min(folds, smallest))


def _seed32(seed: int) -> int:
    """A 32-bit seed for scikit-learn (which takes no larger) from any report seed."""
    return int(np.random.SeedSequence(seed).generate_state(1)[0])


def _features(texts: Sequence[str]) -> Any:
    """Hashed word 1–2-gram and character 3–5-gram counts, one row per text (CSR).

    Hashing needs no fitting, so the counts are made once for every fold; the TF-IDF weights
    are fitted inside each fold (on its training texts only). Columns no text has are dropped:
    their weight stays 0 in every fold, so this changes no score, only the time.
    """
    from scipy import sparse
    from sklearn.feature_extraction.text import HashingVectorizer

    cut = [text[:MAX_TEXT_CHARS] for text in texts]
    common = {"n_features": _HASH_FEATURES, "alternate_sign": False, "norm": None}
    words = HashingVectorizer(analyzer="word", ngram_range=(1, 2), **common)
    chars = HashingVectorizer(analyzer="char", ngram_range=(3, 5), lowercase=False, **common)
    counts = sparse.hstack([words.transform(cut), chars.transform(cut)]).tocsc()
    used = np.flatnonzero(np.diff(counts.indptr))  # columns with at least one count
    return counts[:, used].tocsr()


@functools.lru_cache(maxsize=4)  # the dashboard rebuilds a report on every rerun
def _cached_scores(texts: tuple[str, ...], labels: tuple[int, ...], folds: int, seed: int) -> Any:
    from sklearn.feature_extraction.text import TfidfTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from sklearn.pipeline import make_pipeline

    state = _seed32(seed)
    model = make_pipeline(
        TfidfTransformer(sublinear_tf=True),
        LogisticRegression(
            C=1.0,
            class_weight="balanced",
            solver="liblinear",
            dual=True,
            max_iter=1000,
            random_state=state,
        ),
    )
    cv = StratifiedKFold(n_splits=folds, shuffle=True, random_state=state)
    scores = cross_val_predict(
        model, _features(texts), np.asarray(labels), cv=cv, method="decision_function"
    )
    scores.setflags(write=False)  # shared by the cache
    return scores


def blind_scores(
    texts: Sequence[str],
    is_member: Sequence[bool] | np.ndarray,
    *,
    folds: int = DEFAULT_FOLDS,
    seed: int = 0,
) -> tuple[np.ndarray, int]:
    """Out-of-fold scores of the blind classifier (higher = member) and the folds used.

    Each text is scored by the model fitted on the other folds (stratified, shuffled with
    ``seed``), so no score comes from a model that saw its text.

    Raises:
        DataError: fewer than two texts in a class (see :func:`folds_for`).
    """
    labels = tuple(int(bool(m)) for m in is_member)
    if len(labels) != len(texts):
        raise ValueError(f"{len(texts)} texts but {len(labels)} labels; give one label per text")
    used = folds_for(sum(labels), len(labels) - sum(labels), folds)
    scores = _cached_scores(tuple(texts), labels, used, seed)
    return np.array(scores, dtype=float), used  # (n,)


def _best_row(membership: pd.DataFrame | None) -> dict[str, Any]:
    """The membership table's row with the highest AUROC (first in table order on a tie)."""
    if membership is None or membership.empty:
        return {}
    values = pd.to_numeric(membership["auroc"], errors="coerce").to_numpy(dtype=float)  # (rows,)
    if np.isnan(values).all():
        return {}
    return dict(membership.iloc[int(np.nanargmax(values))])


def _best(row: dict[str, Any]) -> dict[str, Any]:
    """:class:`BlindBaseline`'s ``best_*`` fields from :func:`_best_row`."""
    return {
        "best_score": row.get("score"),
        "best_score_label": row.get("score_label"),
        "best_length": int(row["length"]) if "length" in row else None,
        "best_auroc": float(row.get("auroc", math.nan)),
    }


def separates(value: float, low: float) -> bool:
    """Whether an AUROC lies above chance by the warning rule: its interval's lower bound above
    0.5, or, with no interval, the AUROC itself above 0.5.

    No interval with both classes ≥ 2 means every resample gave the same AUROC (perfect
    separation), which is as far from chance as an interval can say.
    """
    if math.isnan(value):
        return False
    return low > 0.5 if not math.isnan(low) else value > 0.5


def _warning(figures: dict[str, float], best: dict[str, Any]) -> str | None:
    """The blind baseline's warning (see the module docstring), or ``None``."""
    value, low = figures["auroc"], figures["auroc_lo"]
    if math.isnan(value):
        return None
    above = separates(value, low)
    reasons = []
    if above:
        how = (
            f"its 95 % interval [{low:.3f}, {figures['auroc_hi']:.3f}] above 0.5"
            if not math.isnan(low)
            else "in every bootstrap resample"
        )
        reasons.append(
            f"a classifier on the texts alone, never the model, separates members from "
            f"non-members: AUROC {value:.3f}, {how}"
        )
    best_auroc = float(best.get("auroc", math.nan))
    if math.isfinite(best_auroc) and value >= best_auroc - CLOSE_TO_BEST:
        where = f"{best.get('score_label')}, length {best.get('length')}"
        how = "above" if value > best_auroc else f"within {CLOSE_TO_BEST:g} of"
        reasons.append(
            f"its AUROC {value:.3f} is {how} the best score's ({where}: {best_auroc:.3f})"
        )
    if not reasons:
        return None
    verdict = (
        BLIND_WARNING
        if above
        else "the scores do no better than a classifier that never sees the model: their "
        "AUROC is not evidence of membership"
    )
    return f"{'; '.join(reasons)} — {verdict}"


def blind_baseline(
    texts: Mapping[str, str],
    labels: Mapping[str, str],
    *,
    membership: pd.DataFrame | None = None,
    resamples: int,
    seed: int,
    folds: int = DEFAULT_FOLDS,
    fpr_rule: FprRule = DEFAULT_FPR_RULE,
) -> BlindBaseline:
    """The blind baseline of a labelled audit: its figures, and its warning.

    Args:
        texts: each snippet's text by id.
        labels: each snippet's label by id (``member`` / ``nonmember``; others are ignored, as
            are ids without a text).
        membership: the report's membership table, for the warning's comparison with the best
            score (``None``: compare with nothing).
        resamples / seed: bootstrap settings, as for the membership table; ``seed`` also
            shuffles the folds.
        folds: at most this many folds (fewer when a class is smaller).
        fpr_rule: the TPR-at-FPR convention of the membership table (``evaluate.FPR_RULES``).

    Returns:
        A :class:`BlindBaseline`; with ``note`` set, and no figures, when a class has fewer
        than two texts.
    """
    ids = sorted(i for i, label in labels.items() if label in (MEMBER, NONMEMBER) and i in texts)
    is_member = np.array([labels[i] == MEMBER for i in ids], dtype=bool)  # (n,)
    n_members, n_nonmembers = int(is_member.sum()), int((~is_member).sum())
    best = _best_row(membership)
    base = {"n_members": n_members, "n_nonmembers": n_nonmembers, "seed": seed, **_best(best)}
    try:
        scores, used = blind_scores([texts[i] for i in ids], is_member, folds=folds, seed=seed)
    except DataError as refused:
        return BlindBaseline(folds=0, note=str(refused), **base)
    members, nonmembers = scores[is_member], scores[~is_member]
    figures = {"auroc": auroc(members, nonmembers)}
    for name, fpr in FPR_TARGETS.items():
        figures[name] = tpr_at_fpr(members, nonmembers, fpr, fpr_rule)
    for name, (low, high) in bootstrap_intervals(
        members, nonmembers, resamples=resamples, seed=seed, fpr_rule=fpr_rule
    ).items():
        figures[f"{name}_lo"], figures[f"{name}_hi"] = low, high
    return BlindBaseline(folds=used, figures=figures, warning=_warning(figures, best), **base)


# --- random-split control --------------------------------------------------------------------


def random_halves(snippet_ids: Sequence[str], seed: int) -> dict[str, bool]:
    """Each id → ``True`` for half A (scored as the members), ``False`` for half B.

    The ids are sorted first, so the halves depend on the seed and the set of ids, not on the
    order they came in; half A has ``floor(n / 2)`` of them.
    """
    ids = sorted(set(snippet_ids))
    order = np.random.default_rng(seed).permutation(len(ids))  # (n,)
    half = len(ids) // 2
    return {ids[j]: rank < half for rank, j in enumerate(order)}


def _two_sided_p(value: float, n_a: int, n_b: int) -> float:
    """Two-sided p of AUROC = ``value`` under chance (Mann–Whitney, normal approximation).

    The variance is the one without ties, which ties only lower: the p-value is conservative
    for scores with many ties (a method's Mem is often 0).
    """
    if not math.isfinite(value) or n_a < 1 or n_b < 1:
        return math.nan
    sd = math.sqrt((n_a + n_b + 1) / (12.0 * n_a * n_b))
    return float(2.0 * stats.norm.sf(abs(value - 0.5) / sd))


def random_split_control(
    results: pd.DataFrame,
    *,
    resamples: int,
    seed: int,
    halves: Mapping[str, bool] | None = None,
) -> pd.DataFrame:
    """Every membership score on two random halves of the members (see the module docstring).

    Args:
        results: ``Store.results_frame`` rows, as for ``membership_table``.
        resamples / seed: bootstrap settings; ``seed`` also draws the halves.
        halves: member id → ``True`` for half A (default: :func:`random_halves`); a test gives
            a split that is not random to see the control flag it.

    Returns:
        :data:`RANDOM_SPLIT_COLUMNS`, one row per score and length as in the membership table;
        empty when fewer than 4 members have finished units (two per half).
    """
    rows = _labelled(results)
    members = rows[rows["label"] == MEMBER]
    ids = members["snippet_id"].unique()
    if len(ids) < 2 * _MIN_HALF:
        return pd.DataFrame(columns=RANDOM_SPLIT_COLUMNS)
    chosen = dict(halves) if halves is not None else random_halves(list(ids), seed)
    relabelled = members.assign(
        label=members["snippet_id"].map(lambda i: MEMBER if chosen.get(i) else NONMEMBER)
    )
    table, _ = membership_table(relabelled, resamples=resamples, seed=seed)
    if table.empty:
        return pd.DataFrame(columns=RANDOM_SPLIT_COLUMNS)
    out = table.rename(columns={"n_members": "n_half_a", "n_nonmembers": "n_half_b"})
    out["p_value"] = [
        _two_sided_p(float(a), int(n_a), int(n_b))
        for a, n_a, n_b in zip(out["auroc"], out["n_half_a"], out["n_half_b"])
    ]
    out["p_holm"] = holm(out["p_value"].to_numpy(dtype=float))
    out["flagged"] = out["p_holm"] < ALPHA
    return out[RANDOM_SPLIT_COLUMNS].reset_index(drop=True)


def random_split_warning(control: pd.DataFrame | None) -> str | None:
    """What the flagged rows of a random-split control mean, or ``None`` when none is."""
    if control is None or control.empty or not control["flagged"].any():
        return None
    flagged = control[control["flagged"].astype(bool)]
    names = ", ".join(
        f"{label} (length {length}: AUROC {value:.3f})"
        for label, length, value in zip(flagged["score_label"], flagged["length"], flagged["auroc"])
    )
    return (
        f"random-split control failed: two random halves of the members, which differ by chance "
        f"only, were told apart by {names} (Holm-adjusted p < {ALPHA:g}) — something is wrong "
        "with how the scores reach the labels (order effects, duplicated texts or ids, a column "
        "that leaks the label); do not trust the membership table"
    )


def validity_controls(
    results: pd.DataFrame,
    texts: Mapping[str, str] | None,
    membership: pd.DataFrame,
    *,
    resamples: int,
    seed: int,
    fpr_rule: FprRule = DEFAULT_FPR_RULE,
) -> tuple[BlindBaseline | None, pd.DataFrame]:
    """Both controls of a labelled audit, for the report: ``(blind baseline, random split)``.

    ``(None, empty frame)`` when no row is labelled; the blind baseline carries a ``note``
    instead of figures when ``texts`` is ``None`` or a class has fewer than two texts.
    """
    rows = _labelled(results)
    if rows.empty:
        return None, pd.DataFrame(columns=RANDOM_SPLIT_COLUMNS)
    per_snippet = rows.drop_duplicates("snippet_id").set_index("snippet_id")["label"]
    labels = {str(k): str(v) for k, v in per_snippet.items()}
    if texts is None:
        blind = BlindBaseline(
            n_members=sum(v == MEMBER for v in labels.values()),
            n_nonmembers=sum(v == NONMEMBER for v in labels.values()),
            folds=0,
            seed=seed,
            note="the snippet texts were not given, so the blind baseline was not run",
            **_best(_best_row(membership)),
        )
    else:
        blind = blind_baseline(
            texts, labels, membership=membership, resamples=resamples, seed=seed, fpr_rule=fpr_rule
        )
    control = random_split_control(results, resamples=resamples, seed=seed)
    return blind, control


# One table of both controls (``memprobe report --controls-csv``): the blind baseline's row, then
# the random split's; ``n_a`` / ``n_b`` are members / non-members, or half A / half B.
CONTROLS_COLUMNS = [
    "control",
    "score",
    "score_label",
    "kind",
    "length",
    "n_a",
    "n_b",
    "auroc",
    "auroc_lo",
    "auroc_hi",
    "p_value",
    "p_holm",
    "flagged",
    "warning",
]


def controls_frame(blind: BlindBaseline | None, control: pd.DataFrame | None) -> pd.DataFrame:
    """Both controls as :data:`CONTROLS_COLUMNS` rows (empty for an unlabelled audit).

    ``flagged`` is True on the blind baseline's row when it warns, and on each random-split row
    the control flags; ``warning`` holds the blind baseline's warning (or why it did not run).
    """
    rows: list[dict[str, Any]] = []
    if blind is not None:
        rows.append(
            {
                "control": "blind_baseline",
                "score": "blind",
                "score_label": "blind baseline (no model)",
                "kind": "blind",
                "n_a": blind.n_members,
                "n_b": blind.n_nonmembers,
                **{k: blind.figure(k) for k in ("auroc", "auroc_lo", "auroc_hi")},
                "flagged": blind.warning is not None,
                "warning": blind.warning or blind.note,
            }
        )
    if control is not None and not control.empty:
        renamed = control.rename(columns={"n_half_a": "n_a", "n_half_b": "n_b"})
        rows += [{"control": "random_split", **row} for row in renamed.to_dict(orient="records")]
    frame = pd.DataFrame(rows, columns=CONTROLS_COLUMNS)
    return frame.astype({"length": "Int64"})  # the blind row has none: keep the others whole
