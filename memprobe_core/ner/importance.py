"""Leave-one-token-out token importance, iterated as the paper's Figure 4.

A prompt is split into words and punctuation marks (the "tokens" shown to a reader; the slot is
one token and is never removed). The importance of token ``t`` is how much M-MEM drops when ``t``
is left out::

    importance(t) = M-MEM(prompt) − M-MEM(prompt without t)

Iteration (Figure 4): at each step every remaining token's importance is computed, then one token
is removed — the **least** important from the best prompt (does M-MEM survive pruning?) and the
**most** important from the worst prompt. Scores are shown normalised by the step's largest
absolute importance, so each row of the heatmap lies in [-1, 1].
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from memprobe_core.ner.model import NerModel
from memprobe_core.ner.names import NamePair
from memprobe_core.ner.prompts import SLOT
from memprobe_core.ner.scoring import Metric, m_mem

ProgressFn = Callable[[int, int, str], None]
_TOKEN = re.compile(r"(\s*)(\{name\}|[\w]+(?:['’][\w]+)*|[^\w\s])")


def split_tokens(prompt: str) -> list[tuple[str, str]]:
    """Split a prompt into ``(leading_whitespace, token)`` pairs; joining them gives it back."""
    tokens = [(m.group(1), m.group(2)) for m in _TOKEN.finditer(prompt)]
    if "".join(a + b for a, b in tokens) != prompt.rstrip():
        raise ValueError(f"cannot split prompt {prompt!r} into tokens losslessly")
    return tokens


def join_tokens(tokens: Sequence[tuple[str, str]]) -> str:
    """Rebuild a prompt from kept ``(whitespace, token)`` pairs (first token's space dropped)."""
    text = "".join(space + token for space, token in tokens)
    return text.lstrip()


@dataclass
class ImportanceStep:
    """One step of the iteration.

    Attributes:
        prompt: the prompt at this step.
        m_mem: its M-MEM.
        importance: per original token: raw importance, NaN for the slot and removed tokens.
        removed: index (into the original tokens) of the token removed after this step, or
            ``None`` at the last step.
    """

    prompt: str
    m_mem: float
    importance: np.ndarray
    removed: int | None

    @property
    def normalized(self) -> np.ndarray:
        """Importance divided by the step's largest absolute importance (NaN kept)."""
        scale = np.nanmax(np.abs(self.importance)) if np.isfinite(self.importance).any() else 0.0
        return (
            self.importance / scale
            if scale > 0
            else np.where(np.isnan(self.importance), np.nan, 0.0)
        )


@dataclass
class ImportanceTrace:
    """Every step of iterated leave-one-token-out on one prompt.

    Attributes:
        tokens: the original prompt's tokens (words, punctuation, the slot).
        remove: ``"least"`` or ``"most"``: which token each step removed.
        steps: the steps, first = the full prompt.
    """

    tokens: list[str]
    remove: str
    steps: list[ImportanceStep] = field(default_factory=list)

    def heatmap(self) -> dict[str, object]:
        """Arrays for ``plotly.graph_objects.Heatmap``: rows are steps, columns original tokens.

        Returns:
            ``z`` (steps × tokens, normalised importance, NaN where a token is gone or is the slot),
            ``x`` (token labels, made unique with their position), ``y`` (step labels with M-MEM),
            ``text`` (tokens, blank where removed), ``removed`` (column removed at each step).
        """
        z = (
            np.vstack([s.normalized for s in self.steps])
            if self.steps
            else np.empty((0, len(self.tokens)))
        )
        text = []
        for s in self.steps:
            present = _present_mask(self.tokens, s.importance)
            text.append([tok if keep else "" for tok, keep in zip(self.tokens, present)])
        return {
            "z": z,
            "x": [f"{i}:{t}" for i, t in enumerate(self.tokens)],
            "y": [f"step {i}: {100 * s.m_mem:.1f}%" for i, s in enumerate(self.steps)],
            "text": text,
            "removed": [s.removed for s in self.steps],
        }


def _present_mask(tokens: list[str], importance: np.ndarray) -> list[bool]:
    return [tok == SLOT or np.isfinite(v) for tok, v in zip(tokens, importance)]


def iterative_importance(
    model: NerModel,
    prompt: str,
    pairs: Sequence[NamePair],
    *,
    remove: Literal["least", "most"] = "least",
    steps: int | None = None,
    metric: Metric = "pairwise",
    batch_size: int = 64,
    on_progress: ProgressFn | None = None,
) -> ImportanceTrace:
    """Leave-one-token-out importance, removing one token per step (paper Figure 4).

    Args:
        model: the NER model.
        prompt: the prompt (one ``{name}`` slot).
        pairs: name pairs M-MEM is measured on (the dev pairs, as in the paper).
        remove: ``"least"`` (for the best prompt) or ``"most"`` (for the worst).
        steps: removals to make (default: until only the slot is left).
        metric: M-MEM definition.
        batch_size: filled prompts per forward pass.
        on_progress: ``on_progress(step, total_steps, message)``.

    Returns:
        The trace; ``steps`` has ``removals + 1`` entries, the last without a removal.
    """
    if remove not in ("least", "most"):
        raise ValueError(f"remove={remove!r}; use 'least' or 'most'")
    if prompt.count(SLOT) != 1:
        raise ValueError(f"prompt {prompt!r} must contain {SLOT} exactly once")
    pieces = split_tokens(prompt)
    tokens = [t for _, t in pieces]
    removable = [i for i, t in enumerate(tokens) if t != SLOT]
    total = len(removable) if steps is None else min(steps, len(removable))
    names = [p.name_in for p in pairs] + [p.name_out for p in pairs]
    n = len(pairs)
    kept = list(range(len(tokens)))
    trace = ImportanceTrace(tokens, remove)
    for step in range(total + 1):
        current = join_tokens([pieces[i] for i in kept])
        candidates = [i for i in kept if tokens[i] != SLOT]
        variants = [current] + [
            join_tokens([pieces[j] for j in kept if j != i]) for i in candidates
        ]
        # One batched call per step: the current prompt and every one-token-shorter variant.
        conf = model.confidences(variants, names, batch_size=batch_size)  # (1 + C, 2N)
        scores = m_mem(conf[:, :n], conf[:, n:], metric)
        importance = np.full(len(tokens), np.nan)
        importance[candidates] = scores[0] - scores[1:]
        removed = None
        if step < total and candidates:
            pick = np.argmin if remove == "least" else np.argmax
            removed = candidates[int(pick(importance[candidates]))]
        trace.steps.append(ImportanceStep(current, float(scores[0]), importance, removed))
        if on_progress:
            on_progress(step + 1, total + 1, f"importance step {step + 1}/{total + 1}")
        if removed is None:
            break
        kept.remove(removed)
    return trace


def best_worst_importance(
    model: NerModel,
    best_prompt: str,
    worst_prompt: str,
    pairs: Sequence[NamePair],
    *,
    steps: int | None = None,
    metric: Metric = "pairwise",
    batch_size: int = 64,
    on_progress: ProgressFn | None = None,
) -> tuple[ImportanceTrace, ImportanceTrace]:
    """Figure 4: the best prompt pruned of its least important tokens, the worst of its most."""
    best = iterative_importance(
        model,
        best_prompt,
        pairs,
        remove="least",
        steps=steps,
        metric=metric,
        batch_size=batch_size,
        on_progress=None
        if on_progress is None
        else lambda d, t, m: on_progress(d, 2 * t, "best: " + m),
    )
    worst = iterative_importance(
        model,
        worst_prompt,
        pairs,
        remove="most",
        steps=steps,
        metric=metric,
        batch_size=batch_size,
        on_progress=None
        if on_progress is None
        else lambda d, t, m: on_progress(t + d, 2 * t, "worst: " + m),
    )
    return best, worst
