"""Analyses of prompt scores: ranking, spread, M-MEM by property, Kendall τ, ensembles.

Everything takes :class:`~memprobe_core.ner.scoring.NerScores` (or plain arrays) and returns
pandas DataFrames or numpy arrays a plotly chart can take as is (``px.box(df, x="group",
y="m_mem")``, ``go.Heatmap(z=matrix.values, x=matrix.columns, y=matrix.index)``).
Token importance and attention live in :mod:`.importance` and :mod:`.attention`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy import stats

from memprobe_core.ner.scoring import Metric, NerScores, m_mem

Property = Literal["type", "length", "name_position"]
EnsembleMethod = Literal["mean", "max", "min", "score_weighted", "majority_vote"]
ENSEMBLE_METHODS: tuple[EnsembleMethod, ...] = (
    "mean",
    "max",
    "min",
    "score_weighted",
    "majority_vote",
)
# Length groups in words (slot = one word): short ≤ 5, medium 6–8, long 9–11, very long ≥ 12.
LENGTH_BINS: tuple[float, ...] = (0, 5, 8, 11, np.inf)
LENGTH_LABELS: tuple[str, ...] = ("≤5", "6-8", "9-11", "≥12")


def rank_prompts(scores: NerScores) -> pd.DataFrame:
    """The prompt table sorted best first (rank 1 = highest M-MEM)."""
    return scores.prompt_table().sort_values(["rank", "prompt_id"]).reset_index(drop=True)


def spread(scores: NerScores) -> dict[str, float | int | str]:
    """Best and worst prompt and the difference of their M-MEM (paper: up to 16 points).

    Returns:
        ``best``, ``worst``, ``spread`` (fractions), ``best_id``, ``worst_id``, and both texts.
    """
    best, worst = int(np.argmax(scores.m_mem)), int(np.argmin(scores.m_mem))
    return {
        "best": float(scores.m_mem[best]),
        "worst": float(scores.m_mem[worst]),
        "spread": float(scores.m_mem[best] - scores.m_mem[worst]),
        "best_id": best,
        "worst_id": worst,
        "best_prompt": scores.prompts[best].text,
        "worst_prompt": scores.prompts[worst].text,
    }


def property_groups(scores: NerScores, prop: Property) -> pd.DataFrame:
    """One row per prompt with its group for ``prop`` and its M-MEM (input of a box plot).

    Args:
        scores: prompt scores.
        prop: ``type``, ``length`` (binned by ``LENGTH_BINS``) or ``name_position``.

    Returns:
        Columns ``prompt_id``, ``prompt``, ``group``, ``m_mem``.
    """
    table = scores.prompt_table()
    if prop == "type":
        group = table["type"].fillna("unknown")
    elif prop == "name_position":
        group = table["name_position"]
    elif prop == "length":
        group = pd.cut(table["length"], bins=list(LENGTH_BINS), labels=list(LENGTH_LABELS)).astype(
            str
        )
    else:
        raise ValueError(f"prompt property {prop!r} is unknown; use type, length or name_position")
    return pd.DataFrame(
        {
            "prompt_id": table["prompt_id"],
            "prompt": table["prompt"],
            "group": group,
            "m_mem": table["m_mem"],
        }
    )


def m_mem_by_property(scores: NerScores, prop: Property) -> pd.DataFrame:
    """Mean, std, min, max and count of M-MEM per group of ``prop`` (paper Figure 3)."""
    groups = property_groups(scores, prop)
    summary = groups.groupby("group", sort=True)["m_mem"].agg(
        ["count", "mean", "std", "min", "max"]
    )
    return summary.reset_index()


def kendall_tau_b(x: ArrayLike, y: ArrayLike) -> float:
    """Kendall's τ-b between two score vectors (scipy's ``kendalltau``, ties as τ-b).

    Returns NaN when a vector has fewer than two values or is constant (no ranking to compare).
    """
    xs, ys = np.asarray(x, float), np.asarray(y, float)
    if xs.shape != ys.shape or xs.ndim != 1:
        raise ValueError(
            f"Kendall tau needs two 1-D vectors of the same length; got {xs.shape}, {ys.shape}"
        )
    if len(xs) < 2 or np.ptp(xs) == 0 or np.ptp(ys) == 0:
        return float("nan")
    return float(stats.kendalltau(xs, ys).statistic)


def tau_matrix(
    rows: Mapping[str, ArrayLike], columns: Mapping[str, ArrayLike] | None = None
) -> pd.DataFrame:
    """Kendall τ-b between every pair of prompt-score vectors (paper Figure 2b).

    Args:
        rows: name → M-MEM per prompt (e.g. one entry per model, on the dev pairs).
        columns: another set (e.g. the same models on the test pairs); ``rows`` when ``None``.

    Returns:
        A DataFrame indexed by ``rows`` names with one column per ``columns`` name.
    """
    columns = rows if columns is None else columns
    return pd.DataFrame(
        [[kendall_tau_b(rows[r], columns[c]) for c in columns] for r in rows],
        index=list(rows),
        columns=list(columns),
    )


def dev_test_tau(dev: NerScores, test: NerScores) -> float:
    """Kendall τ-b between the prompts' M-MEM on the dev pairs and on the test pairs."""
    if len(dev.prompts) != len(test.prompts):
        raise ValueError("dev and test scores must cover the same prompts")
    return kendall_tau_b(dev.m_mem, test.m_mem)


def ensemble_m_mem(
    scores: NerScores,
    method: EnsembleMethod,
    *,
    prompt_ids: ArrayLike | None = None,
    weights: ArrayLike | None = None,
    metric: Metric | None = None,
) -> float:
    """M-MEM of an ensemble of prompts.

    ``mean``/``max``/``min`` combine each name's confidences over the prompts, then score M-MEM.
    ``score_weighted`` is a weighted mean of confidences (``weights``, e.g. the prompts' dev
    M-MEM). ``majority_vote`` lets each prompt vote whether ``C(in) > C(out)`` for a comparison
    (a tie is half a vote); the comparison counts 1 when more than half of the votes say yes and ½
    at exactly half. For ``all_pairs`` the vote is taken on every in × out combination.

    Args:
        scores: confidences of all prompts.
        method: one of ``ENSEMBLE_METHODS``.
        prompt_ids: prompts in the ensemble (all when ``None``).
        weights: per chosen prompt, for ``score_weighted`` (required there).
        metric: M-MEM definition (default: ``scores.metric``).

    Returns:
        The ensemble's M-MEM, a fraction in [0, 1].
    """
    metric = metric or scores.metric
    ids = np.arange(len(scores.prompts)) if prompt_ids is None else np.asarray(prompt_ids, int)
    if ids.size == 0:
        raise ValueError("an ensemble needs at least one prompt")
    c_in, c_out = scores.conf_in[ids], scores.conf_out[ids]  # (K, N)
    if method in ("mean", "max", "min"):
        combine: Any = {"mean": np.mean, "max": np.max, "min": np.min}[method]
        return float(m_mem(combine(c_in, axis=0), combine(c_out, axis=0), metric))
    if method == "score_weighted":
        w = np.asarray(weights if weights is not None else [], float)
        if w.size != ids.size:
            raise ValueError(f"score_weighted needs one weight per chosen prompt ({ids.size})")
        if (w < 0).any() or w.sum() <= 0:
            raise ValueError("score_weighted weights must be non-negative with a positive sum")
        w = w / w.sum()
        return float(m_mem(w @ c_in, w @ c_out, metric))
    if method == "majority_vote":
        return _majority_vote(c_in, c_out, metric)
    raise ValueError(f"ensemble method {method!r} is unknown; use one of {ENSEMBLE_METHODS}")


def _majority_vote(c_in: np.ndarray, c_out: np.ndarray, metric: Metric) -> float:
    k = c_in.shape[0]

    def decide(votes: np.ndarray) -> np.ndarray:  # votes summed over prompts, in [0, k]
        return np.where(votes > k / 2, 1.0, np.where(votes == k / 2, 0.5, 0.0))

    if metric == "pairwise":
        votes = (c_in > c_out).sum(0) + 0.5 * (c_in == c_out).sum(0)  # (N,)
        return float(decide(votes).mean())
    total = 0.0
    for i in range(c_in.shape[1]):  # one in-name at a time keeps memory at (K, N_out)
        a = c_in[:, i : i + 1]
        votes = (a > c_out).sum(0) + 0.5 * (a == c_out).sum(0)
        total += decide(votes).sum()
    return total / (c_in.shape[1] * c_out.shape[1])


def ensemble_table(
    dev: NerScores, test: NerScores, *, top_k: Sequence[int] = (1, 3, 5, 10)
) -> pd.DataFrame:
    """Ensembles of the top-k dev prompts evaluated on the test pairs (paper §4.3).

    Prompts are chosen by dev M-MEM (no test information); ``score_weighted`` weighs them by their
    dev M-MEM. ``k`` larger than the number of prompts is clipped (and rows de-duplicated).

    Returns:
        Columns ``k``, ``method``, ``m_mem_test``, plus ``best_single_test``: the test M-MEM of the
        best dev prompt, the baseline an ensemble should beat.
    """
    if len(dev.prompts) != len(test.prompts):
        raise ValueError("dev and test scores must cover the same prompts")
    order = np.argsort(-dev.m_mem, kind="stable")
    baseline = float(test.m_mem[order[0]])
    rows = []
    for k in sorted({min(max(1, k), len(order)) for k in top_k}):
        chosen = order[:k]
        for method in ENSEMBLE_METHODS:
            weights = dev.m_mem[chosen] if method == "score_weighted" else None
            value = ensemble_m_mem(test, method, prompt_ids=chosen, weights=weights)
            rows.append(
                {"k": k, "method": method, "m_mem_test": value, "best_single_test": baseline}
            )
    return pd.DataFrame(rows)
