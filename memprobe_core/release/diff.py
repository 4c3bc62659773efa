"""Model against model: how two audits of the same units differ, with paired evidence.

``diff_runs(store, A, B)`` compares run B (the candidate) with run A (the baseline) on the units
both finished (:mod:`memprobe_core.release.pairing`), per method × length (docs/method.md,
"Comparing two models"):

- **mean Mem**: the mean of the paired differences ``Mem_B − Mem_A``, its BCa interval, and the
  paired test of the report (Wilcoxon signed-rank, the exact sign test under 6 non-tied pairs);
- **extraction rate** (k-extractable units): the difference of the two rates, the BCa interval of
  the paired 0/1 differences, and McNemar's exact test (a binomial test on the discordant pairs);
- **median log10 p_z** (where both runs measured it): the two medians and the paired test of the
  differences; the same for the two sides of the bracket around it (docs/method.md §14), the
  **median rank-based extraction cost** in bits (``extraction_bits``) and the **median
  near-verbatim lower bound** (``near_verbatim_log10_lower``);

and per length, for labelled audits, **each membership signal's AUROC** in both runs, with a
paired bootstrap over snippets (the same resampled snippets score both runs) for the interval
and the two-sided p-value of the change. Holm's correction runs over the whole family, so a
"significant" change is one of the family-wise error rate 5 %. An AUROC that a run's own report
voids by a validity control (blind baseline, too few texts, random split;
:mod:`memprobe_core.release.controls`) is marked in ``voided_a`` / ``voided_b``: it is shown,
but it is not evidence either way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from memprobe_core.membership.evaluate import signal_scores
from memprobe_core.release.controls import voided_figures
from memprobe_core.release.pairing import PairedRuns, pair_runs
from memprobe_core.report.stats import (
    DEFAULT_RESAMPLES,
    bca_interval,
    paired_test,
    validate_resamples,
)
from memprobe_core.snippets.split import MEMBER, NONMEMBER
from memprobe_core.stats import CONFIDENCE, holm
from memprobe_core.store import Store

# A change is significant when its Holm-adjusted p is below this (0.05, not 1 - 0.95's float).
ALPHA = round(1 - CONFIDENCE, 10)
DEFAULT_TOP = 10

# The figures a diff compares, in table order, with what each means.
FIGURES: dict[str, str] = {
    "mean_mem": "mean Mem (ROUGE-L of the output against the true suffix)",
    "extraction_rate": "share of units whose output starts with the first k suffix tokens",
    "median_log10_p_z": "median log10 of the probability that sampling writes the suffix",
    "median_near_verbatim_log10_lower": "median log10 of the certified lower bound on the "
    "probability that sampling writes the suffix within the edit budget",
    "median_extraction_bits": "median rank-based extraction cost b: no decoding writes the "
    "suffix's easiest window in fewer than 2^b tries",
    "auroc": "AUROC of a membership signal (labelled audits)",
}
# One row of ``RunDiff.table``.
DIFF_COLUMNS = [
    "figure",
    "method",
    "length",
    "signal",
    "n",
    "a",
    "b",
    "change",
    "low",
    "high",
    "test",
    "p",
    "p_holm",
    "significant",
    "voided_a",
    "voided_b",
]
CHANGED_COLUMNS = [
    "snippet_id",
    "method",
    "length",
    "mem_a",
    "mem_b",
    "change",
    "suffix",
    "output_a",
    "output_b",
]


@dataclass(frozen=True)
class RunDiff:
    """What :func:`diff_runs` found.

    Attributes:
        runs: the paired units (ids, victims, what was left out).
        table: one row per figure × method × length (× signal), :data:`DIFF_COLUMNS`.
        changed: the units whose Mem changed most, both outputs beside the true suffix.
        resamples / seed: of the bootstrap intervals.
    """

    runs: PairedRuns
    table: pd.DataFrame
    changed: pd.DataFrame
    resamples: int
    seed: int

    def significant(self) -> pd.DataFrame:
        """The rows whose change is significant (Holm-adjusted p below :data:`ALPHA`)."""
        return self.table[self.table["significant"].astype(bool)]

    def voided(self) -> pd.DataFrame:
        """The rows a validity control of either run's report voids."""
        return self.table[(self.table["voided_a"] != "") | (self.table["voided_b"] != "")]


def diff_runs(
    store: Store,
    run_a: int,
    run_b: int,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    top: int = DEFAULT_TOP,
) -> RunDiff:
    """Compare run ``run_b`` (candidate) with run ``run_a`` (baseline), unit by unit.

    Raises:
        UnknownRunError / IncomparableRuns: see :func:`~memprobe_core.release.pairing.pair_runs`.
    """
    resamples = validate_resamples(resamples)
    runs = pair_runs(store, run_a, run_b)
    rows: list[dict[str, object]] = []
    for (method, length), cell in runs.a.groupby(["method", "length"], sort=True):
        b = runs.b.loc[cell.index]
        rows.append(_mem_row(method, length, cell, b, resamples, seed))
        rows.append(_extraction_row(method, length, cell, b, resamples, seed))
        for figure, column in PAIRED_MEDIANS.items():
            rows.append(_paired_median_row(figure, column, method, length, (cell, b), seed))
    for length, cell in runs.a.groupby("length", sort=True):
        rows += _auroc_rows(int(length), cell, runs.b.loc[cell.index], resamples, seed)
    table = pd.DataFrame([r for r in rows if r], columns=DIFF_COLUMNS)
    table["p_holm"] = holm(table["p"].to_numpy(dtype=float))
    table["significant"] = table["p_holm"] < ALPHA
    table = _with_controls(store, table, runs, resamples, seed)
    return RunDiff(runs, table, _most_changed(runs, top), resamples, seed)


def _with_controls(
    store: Store, table: pd.DataFrame, runs: PairedRuns, resamples: int, seed: int
) -> pd.DataFrame:
    """``table`` with ``voided_a`` / ``voided_b``: the validity control of each run's report
    that voids an AUROC row's figure (``""``: none; rows of other figures have no control)."""
    aurocs = table["figure"] == "auroc"
    for column, run in (("voided_a", runs.run_a), ("voided_b", runs.run_b)):
        voided = voided_figures(store, run, resamples=resamples, seed=seed) if aurocs.any() else {}
        table[column] = [
            voided.get((str(signal), int(length)), "") if is_auroc else ""
            for signal, length, is_auroc in zip(table["signal"], table["length"], aurocs)
        ]
    return table


def _row(figure: str, method: str, length: int, **values: object) -> dict[str, object]:
    base: dict[str, object] = dict.fromkeys(DIFF_COLUMNS, math.nan)
    return {
        **base,
        "figure": figure,
        "method": method,
        "length": int(length),
        "signal": "",
        **values,
    }


def _numbers(frame: pd.DataFrame, column: str) -> np.ndarray:
    if column not in frame:
        return np.full(len(frame), np.nan)
    return pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float)  # (n,)


def _mem_row(
    method: str, length: int, a: pd.DataFrame, b: pd.DataFrame, resamples: int, seed: int
) -> dict[str, object]:
    mem_a, mem_b = _numbers(a, "mem"), _numbers(b, "mem")
    change = mem_b - mem_a  # (n,)
    if not np.isfinite(change).any():  # a method with no Mem (signals, verbatim only)
        return {}
    low, high = bca_interval(change, resamples=resamples, seed=seed)
    test = paired_test(change, seed=seed)
    return _row(
        "mean_mem",
        method,
        length,
        n=int(np.isfinite(change).sum()),
        a=float(np.nanmean(mem_a)),
        b=float(np.nanmean(mem_b)),
        change=float(np.nanmean(change)),
        low=low,
        high=high,
        test=test.test,
        p=test.p_value,
    )


def _extraction_row(
    method: str, length: int, a: pd.DataFrame, b: pd.DataFrame, resamples: int, seed: int
) -> dict[str, object]:
    """McNemar's exact test: under "no change", a unit extracted by one run only is as likely
    to be the candidate's as the baseline's (a fair coin over the discordant pairs)."""
    got_a, got_b = _numbers(a, "extractable"), _numbers(b, "extractable")
    both = np.isfinite(got_a) & np.isfinite(got_b)
    if not both.any():
        return {}
    got_a, got_b = got_a[both], got_b[both]  # (n,) of 0/1
    only_b = int(((got_b == 1) & (got_a == 0)).sum())
    only_a = int(((got_a == 1) & (got_b == 0)).sum())
    discordant = only_a + only_b
    p = float(scipy_stats.binomtest(only_b, discordant).pvalue) if discordant else 1.0
    low, high = bca_interval(got_b - got_a, resamples=resamples, seed=seed)
    return _row(
        "extraction_rate",
        method,
        length,
        n=int(both.sum()),
        a=float(got_a.mean()),
        b=float(got_b.mean()),
        change=float(got_b.mean() - got_a.mean()),
        low=low,
        high=high,
        test="mcnemar" if discordant else "none",
        p=p,
    )


# The per-unit figures compared by their medians and a paired test: figure -> results column.
PAIRED_MEDIANS = {
    "median_log10_p_z": "log10_p_z",
    "median_near_verbatim_log10_lower": "near_verbatim_log10_lower",
    "median_extraction_bits": "extraction_bits",
}


def _paired_median_row(
    figure: str,
    column: str,
    method: str,
    length: int,
    runs: tuple[pd.DataFrame, pd.DataFrame],
    seed: int,
) -> dict[str, object]:
    """Both runs' medians of ``column`` over the units both measured (a finite value: p_z = 0,
    a bound of 0 and b = ∞ are left out, as not comparable by a difference) and the paired test
    of the differences."""
    values_a, values_b = _numbers(runs[0], column), _numbers(runs[1], column)
    both = np.isfinite(values_a) & np.isfinite(values_b)
    if not both.any():
        return {}
    median_a, median_b = float(np.median(values_a[both])), float(np.median(values_b[both]))
    test = paired_test(values_b[both] - values_a[both], seed=seed)
    return _row(
        figure,
        method,
        length,
        n=int(both.sum()),
        a=median_a,
        b=median_b,
        change=median_b - median_a,
        test=test.test,
        p=test.p_value,
    )


def _auroc_rows(
    length: int, a: pd.DataFrame, b: pd.DataFrame, resamples: int, seed: int
) -> list[dict[str, object]]:
    """One row per membership signal both runs measured on labelled snippets of ``length``."""
    scores_a, scores_b = signal_scores(a), signal_scores(b)
    labels = scores_a["label"]
    members = labels.index[labels == MEMBER]
    nonmembers = labels.index[labels == NONMEMBER]
    if members.empty or nonmembers.empty:
        return []
    rows = []
    for column in [c for c in scores_a.columns if c.startswith("signal_")]:
        if column not in scores_b:
            continue
        pairs = [
            (
                scores[column].reindex(members).to_numpy(dtype=float),
                scores[column].reindex(nonmembers).to_numpy(dtype=float),
            )
            for scores in (scores_a, scores_b)
        ]
        found = _paired_auroc(pairs[0], pairs[1], resamples, seed)
        if found is not None:
            rows.append(_row("auroc", "", length, signal=column.removeprefix("signal_"), **found))
    return rows


def _paired_auroc(
    a: tuple[np.ndarray, np.ndarray],
    b: tuple[np.ndarray, np.ndarray],
    resamples: int,
    seed: int,
) -> dict[str, object] | None:
    """Both AUROCs on the snippets both runs scored, and a paired bootstrap of their difference
    (percentile interval; two-sided p from the resamples on the far side of 0)."""
    keep_m = np.isfinite(a[0]) & np.isfinite(b[0])
    keep_n = np.isfinite(a[1]) & np.isfinite(b[1])
    if not keep_m.any() or not keep_n.any():
        return None
    (auroc_a, boot_a), (auroc_b, boot_b) = bootstrap_aurocs(
        [(m[keep_m], n[keep_n]) for m, n in (a, b)], resamples, seed
    )
    change = boot_b - boot_a  # (B,)
    low, high = percentile(change)
    # Each side's share counts the observed difference as one of the resamples, so p is never 0
    # (as for the report's permutation p; Phipson & Smyth 2010).
    below, above = int(np.sum(change <= 0)), int(np.sum(change >= 0))
    p = min(1.0, 2 * (min(below, above) + 1) / (change.size + 1))
    return {
        "n": int(keep_m.sum() + keep_n.sum()),
        "a": auroc_a,
        "b": auroc_b,
        "change": auroc_b - auroc_a,
        "low": low,
        "high": high,
        "test": "bootstrap",
        "p": p,
    }


def bootstrap_aurocs(
    scored: list[tuple[np.ndarray, np.ndarray]], resamples: int, seed: int
) -> list[tuple[float, np.ndarray]]:
    """Each (members' scores, non-members' scores) pair's AUROC and its bootstrap resamples,
    the same resampled snippets for every pair (paired), drawn within each class.

    Written out because the comparison matrix S (1 where the member scores higher, ½ on a tie)
    makes each resample one weighted sum, AUROC = wₘᵀ S wₙ / (m n) for the resample counts wₘ,
    wₙ of the members and non-members: every resample at once, no refitting.
    """
    m, n = len(scored[0][0]), len(scored[0][1])
    rng = np.random.default_rng(seed)
    counts_m = _resample_counts(rng, m, resamples)  # (B, m)
    counts_n = _resample_counts(rng, n, resamples)  # (B, n)
    out = []
    for members, nonmembers in scored:
        wins = _comparisons(members, nonmembers)  # (m, n)
        boot = np.einsum("bi,ij,bj->b", counts_m, wins, counts_n) / (m * n)  # (B,)
        out.append((float(wins.mean()), boot))
    return out


def percentile(resampled: np.ndarray) -> tuple[float, float]:
    """The central :data:`CONFIDENCE` interval of bootstrap resamples (NaNs: no spread)."""
    tail = (1 - CONFIDENCE) / 2
    low, high = (float(q) for q in np.quantile(resampled, [tail, 1 - tail]))
    return (low, high) if low < high else (math.nan, math.nan)


def _comparisons(members: np.ndarray, nonmembers: np.ndarray) -> np.ndarray:
    """(m, n): 1 where the member scores higher, ½ on a tie, 0 below."""
    higher = members[:, None] > nonmembers[None, :]
    return higher + 0.5 * (members[:, None] == nonmembers[None, :])


def _resample_counts(rng: np.random.Generator, size: int, resamples: int) -> np.ndarray:
    """(resamples, size): how often each item is drawn in each bootstrap resample."""
    draws = rng.integers(0, size, size=(resamples, size))  # (B, size)
    counts = np.zeros((resamples, size))
    np.add.at(counts, (np.arange(resamples)[:, None], draws), 1)
    return counts


def _most_changed(runs: PairedRuns, top: int) -> pd.DataFrame:
    """The ``top`` units whose Mem moved most (either way), both outputs beside the suffix."""
    change = _numbers(runs.b, "mem") - _numbers(runs.a, "mem")
    frame = pd.DataFrame(
        {
            "snippet_id": runs.a["snippet_id"],
            "method": runs.a["method"],
            "length": runs.a["length"],
            "mem_a": _numbers(runs.a, "mem"),
            "mem_b": _numbers(runs.b, "mem"),
            "change": change,
            "suffix": runs.a["suffix"],
            "output_a": runs.a["output"],
            "output_b": runs.b["output"],
        }
    )
    frame = frame[np.isfinite(change)]  # units of methods with no Mem have nothing to show
    order = np.argsort(-np.abs(frame["change"].to_numpy()), kind="stable")
    return frame.iloc[order[:top]].reset_index(drop=True)[CHANGED_COLUMNS]
