"""M-MEM: how often a prompt makes the model more confident on in-train than out-of-train names.

Two definitions (docs/method.md §5), both returned as a **fraction in [0, 1]** (the paper prints
percentages: multiply by 100):

* ``pairwise`` (the paper's definition): the share of pairs ``(in_k, out_k)`` with
  ``C(in_k) > C(out_k)``; a tie counts as a miss.
* ``all_pairs`` (what the paper's reference code computes): the share of all in × out
  combinations with ``C(in) > C(out)``, ties counted ½ — the ROC AUC / Mann-Whitney U statistic.
  (The reference code breaks ties by sort order; ½ is the unbiased choice.)

:func:`score_prompts` runs a model over prompts × pairs and returns :class:`NerScores`, which
turns into the prompt-score and per-name-confidence tables the CLI and the page export.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import numpy as np
import pandas as pd

from memprobe_core.ner.model import NerModel
from memprobe_core.ner.names import NamePair
from memprobe_core.ner.prompts import Prompt, check_prompts

Metric = Literal["pairwise", "all_pairs"]
METRICS: tuple[Metric, ...] = get_args(Metric)
ProgressFn = Callable[[int, int, str], None]


def _check_metric(metric: str) -> None:
    if metric not in METRICS:
        raise ValueError(f"M-MEM metric {metric!r} is unknown; use one of {METRICS}")


def m_mem_pairwise(c_in: np.ndarray, c_out: np.ndarray) -> np.ndarray:
    """Paper M-MEM: share of pairs ``k`` with ``c_in[..., k] > c_out[..., k]`` (ties miss).

    Args:
        c_in / c_out: ``(..., N)`` confidences of the pairs' in-train / out-of-train names.

    Returns:
        ``(...)`` fractions in [0, 1] (a float for 1-D input).
    """
    c_in, c_out = np.asarray(c_in, float), np.asarray(c_out, float)
    if c_in.shape != c_out.shape or c_in.shape[-1] == 0:
        raise ValueError(
            f"pairwise M-MEM needs equal, non-empty shapes; got {c_in.shape}, {c_out.shape}"
        )
    return (c_in > c_out).mean(-1)


def m_mem_all_pairs(c_in: np.ndarray, c_out: np.ndarray) -> np.ndarray:
    """All-combinations M-MEM (AUC): share of (i, j) with ``c_in[i] > c_out[j]``, ties ½.

    Args:
        c_in: ``(..., N_in)`` in-train confidences.
        c_out: ``(..., N_out)`` out-of-train confidences (leading shapes equal to ``c_in``'s).

    Returns:
        ``(...)`` fractions in [0, 1].
    """
    c_in, c_out = np.asarray(c_in, float), np.asarray(c_out, float)
    if c_in.shape[:-1] != c_out.shape[:-1] or c_in.shape[-1] == 0 or c_out.shape[-1] == 0:
        raise ValueError(f"all_pairs M-MEM: incompatible shapes {c_in.shape}, {c_out.shape}")
    flat_in = c_in.reshape(-1, c_in.shape[-1])
    flat_out = np.sort(c_out.reshape(-1, c_out.shape[-1]), axis=-1)
    result = np.empty(flat_in.shape[0])
    for row in range(flat_in.shape[0]):
        # Sorted outs: "left" counts outs < x, "right" counts outs <= x; O((N_in + N_out) log N).
        below = np.searchsorted(flat_out[row], flat_in[row], side="left")
        upto = np.searchsorted(flat_out[row], flat_in[row], side="right")
        result[row] = (below + 0.5 * (upto - below)).sum()
    result /= c_in.shape[-1] * c_out.shape[-1]
    return result.reshape(c_in.shape[:-1])


def m_mem(c_in: np.ndarray, c_out: np.ndarray, metric: Metric = "pairwise") -> np.ndarray:
    """M-MEM along the last axis with the chosen definition (see the module docstring)."""
    _check_metric(metric)
    return m_mem_pairwise(c_in, c_out) if metric == "pairwise" else m_mem_all_pairs(c_in, c_out)


@dataclass
class NerScores:
    """Confidences and M-MEM of prompts on name pairs for one model.

    Attributes:
        prompts: the scored prompts.
        pairs: the name pairs.
        conf_in: ``(P, N)`` confidence of each prompt on each pair's in-train name.
        conf_out: ``(P, N)`` the same for out-of-train names.
        metric: M-MEM definition used for ``m_mem``.
        m_mem: ``(P,)`` M-MEM per prompt, fractions in [0, 1].
        model: the model's manifest.
    """

    prompts: list[Prompt]
    pairs: list[NamePair]
    conf_in: np.ndarray
    conf_out: np.ndarray
    metric: Metric = "pairwise"
    m_mem: np.ndarray = field(init=False)
    model: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        shape = (len(self.prompts), len(self.pairs))
        if self.conf_in.shape != shape or self.conf_out.shape != shape:
            raise ValueError(
                f"confidences must be (prompts, pairs) = {shape}; got {self.conf_in.shape} "
                f"and {self.conf_out.shape}"
            )
        self.m_mem = m_mem(self.conf_in, self.conf_out, self.metric)

    def subset(self, pair_indices: Sequence[int]) -> NerScores:
        """The same prompts on a subset of the pairs (e.g. the dev or the test pairs)."""
        idx = np.asarray(pair_indices, dtype=int)
        return NerScores(
            self.prompts,
            [self.pairs[i] for i in idx],
            self.conf_in[:, idx],
            self.conf_out[:, idx],
            self.metric,
            model=self.model,
        )

    def with_metric(self, metric: Metric) -> NerScores:
        """The same confidences scored with the other M-MEM definition."""
        return NerScores(
            self.prompts, self.pairs, self.conf_in, self.conf_out, metric, model=self.model
        )

    def prompt_table(self) -> pd.DataFrame:
        """One row per prompt: text, type, length, name position, M-MEM, rank, mean confidences.

        Rank 1 is the best prompt (highest M-MEM); ties share the lowest rank.
        """
        table = pd.DataFrame(
            {
                "prompt_id": np.arange(len(self.prompts)),
                "prompt": [p.text for p in self.prompts],
                "type": [p.type for p in self.prompts],
                "source": [p.source for p in self.prompts],
                "length": [p.length for p in self.prompts],
                "name_position": [p.name_position for p in self.prompts],
                "m_mem": self.m_mem,
                "mean_conf_in": self.conf_in.mean(1),
                "mean_conf_out": self.conf_out.mean(1),
            }
        )
        table["gap"] = table["mean_conf_in"] - table["mean_conf_out"]
        table["rank"] = table["m_mem"].rank(ascending=False, method="min").astype(int)
        table["metric"] = self.metric
        return table

    def name_table(self) -> pd.DataFrame:
        """Long table: one row per prompt × pair with both names and both confidences."""
        n_prompts, n_pairs = self.conf_in.shape
        prompt_ids = np.repeat(np.arange(n_prompts), n_pairs)
        pair_ids = np.tile(np.arange(n_pairs), n_prompts)
        return pd.DataFrame(
            {
                "prompt_id": prompt_ids,
                "prompt": [self.prompts[i].text for i in prompt_ids],
                "pair_id": pair_ids,
                "name_in": [self.pairs[j].name_in for j in pair_ids],
                "name_out": [self.pairs[j].name_out for j in pair_ids],
                "conf_in": self.conf_in.ravel(),
                "conf_out": self.conf_out.ravel(),
                "in_higher": (self.conf_in > self.conf_out).ravel(),
            }
        )

    def summary(self) -> dict[str, Any]:
        """Headline numbers: mean/best/worst M-MEM and the best and worst prompts."""
        best, worst = int(np.argmax(self.m_mem)), int(np.argmin(self.m_mem))
        return {
            "model": self.model,
            "metric": self.metric,
            "prompts": len(self.prompts),
            "pairs": len(self.pairs),
            "m_mem_mean": float(self.m_mem.mean()),
            "m_mem_std": float(self.m_mem.std()),
            "m_mem_best": float(self.m_mem[best]),
            "m_mem_worst": float(self.m_mem[worst]),
            "spread": float(self.m_mem[best] - self.m_mem[worst]),
            "best_prompt": self.prompts[best].text,
            "worst_prompt": self.prompts[worst].text,
        }


def score_prompts(
    model: NerModel,
    prompts: Sequence[str | Prompt],
    pairs: Sequence[NamePair],
    *,
    metric: Metric = "pairwise",
    batch_size: int = 64,
    on_progress: ProgressFn | None = None,
) -> NerScores:
    """Confidences of every prompt on every pair's two names, and M-MEM per prompt.

    Args:
        model: the NER model.
        prompts: sentences with one ``{name}`` slot.
        pairs: (in-train, out-of-train) name pairs.
        metric: ``pairwise`` (paper) or ``all_pairs`` (reference code, ties ½).
        batch_size: filled prompts per forward pass.
        on_progress: ``on_progress(done, total, message)`` while scoring.
    """
    _check_metric(metric)
    checked = check_prompts(prompts)
    if not pairs:
        raise ValueError("no name pairs to score; build them with build_pairs(in_names, out_names)")
    names = [p.name_in for p in pairs] + [p.name_out for p in pairs]
    conf = model.confidences(checked, names, batch_size=batch_size, on_progress=on_progress)
    n = len(pairs)
    return NerScores(checked, list(pairs), conf[:, :n], conf[:, n:], metric, model=model.manifest())
