"""Attention heatmaps of the name position, in-train vs out-of-train (paper Figure 5).

For each filled prompt the model's attention is averaged over layers and heads; the rows of the
name's sub-tokens are averaged (attention *from* the name), and the columns of the name's own
sub-tokens are summed into one ``[NAME]`` column so prompts filled with names of different token
counts line up. The rows are then averaged over the in-train names and over the out-of-train
names separately. Needs a model loaded with eager attention (``NerModel.load(...,
attentions=True)``): under ``sdpa`` transformers returns no attentions.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from memprobe_core.ner.model import NameAttention, NerModel
from memprobe_core.ner.names import NamePair
from memprobe_core.ner.prompts import fill

log = logging.getLogger(__name__)

NAME_LABEL = "[NAME]"


@dataclass
class AttentionComparison:
    """Name-position attention of one prompt, averaged over in-train and out-of-train names.

    Attributes:
        prompt: the prompt.
        labels: key positions: the prompt's tokens with the name collapsed to ``[NAME]``.
        in_train: ``(K,)`` mean attention over the in-train names.
        out_of_train: ``(K,)`` mean attention over the out-of-train names.
        per_name_in / per_name_out: ``(n, K)`` rows before averaging.
    """

    prompt: str
    labels: list[str]
    in_train: np.ndarray
    out_of_train: np.ndarray
    per_name_in: np.ndarray
    per_name_out: np.ndarray

    def heatmap(self) -> dict[str, object]:
        """``z`` (2 × K), ``x`` (token labels, made unique), ``y`` for ``go.Heatmap``."""
        return {
            "z": np.vstack([self.in_train, self.out_of_train]),
            "x": [f"{i}:{t}" for i, t in enumerate(self.labels)],
            "y": ["in-train", "out-of-train"],
        }


def collapse_name(attention: NameAttention) -> tuple[list[str], np.ndarray]:
    """Sum the name's sub-token columns into one ``[NAME]`` column.

    Returns:
        ``(labels, weights)`` with the name as one position (weights still sum to 1).
    """
    mask = attention.name_mask
    first = int(np.flatnonzero(mask)[0])
    last = int(np.flatnonzero(mask)[-1])
    labels = attention.tokens[:first] + [NAME_LABEL] + attention.tokens[last + 1 :]
    weights = np.concatenate(
        [attention.weights[:first], [attention.weights[mask].sum()], attention.weights[last + 1 :]]
    )
    return labels, weights


def _rows(
    model: NerModel, prompt: str, names: Sequence[str], batch_size: int
) -> tuple[list[str], np.ndarray]:
    filled = [fill(prompt, name) for name in names]
    attentions = model.name_attention(
        [t for t, _, _ in filled], [(s, e) for _, s, e in filled], batch_size=batch_size
    )
    labels: list[str] | None = None
    rows = []
    for name, attention in zip(names, attentions):
        these, weights = collapse_name(attention)
        if labels is None:
            labels = these
        if these != labels:
            # A name that merges with its neighbours into other tokens cannot be aligned; rare.
            log.warning("attention: %r changes the prompt's tokens around it; left out", name)
            continue
        rows.append(weights)
    return labels or [], np.vstack(rows) if rows else np.empty((0, 0))


def compare_attention(
    model: NerModel,
    prompt: str,
    pairs: Sequence[NamePair],
    *,
    batch_size: int = 32,
) -> AttentionComparison:
    """Name-position attention of ``prompt`` averaged over in-train vs out-of-train names.

    Raises:
        ValueError: ``pairs`` is empty, or no name could be aligned.
    """
    if not pairs:
        raise ValueError("no name pairs for the attention comparison")
    labels_in, rows_in = _rows(model, prompt, [p.name_in for p in pairs], batch_size)
    labels_out, rows_out = _rows(model, prompt, [p.name_out for p in pairs], batch_size)
    if not len(rows_in) or not len(rows_out) or labels_in != labels_out:
        raise ValueError(f"could not align the attention of prompt {prompt!r} across names")
    return AttentionComparison(
        prompt, labels_in, rows_in.mean(0), rows_out.mean(0), rows_in, rows_out
    )
