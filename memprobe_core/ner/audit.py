"""One call that runs the whole NER audit for one or several models (what the page drives).

``run_ner_audit`` scores every model on the same prompts × pairs, splits the pairs into dev and
test, and for each model computes the best and worst dev prompts' token importance (Figure 4) and
their name-position attention, in-train vs out-of-train (Figure 5). The result holds everything a
page draws: per-model :class:`NerScores`, Kendall τ matrices across models and dev vs test, and
the CSV tables. Progress goes to ``on_progress(done, total, message)``; a ``threading.Event``
cancels between batches.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import pandas as pd

from memprobe_core.attacks.result import Cancelled, check_cancel
from memprobe_core.ner import analyses
from memprobe_core.ner.attention import AttentionComparison, compare_attention
from memprobe_core.ner.importance import ImportanceTrace, iterative_importance
from memprobe_core.ner.model import NerModel
from memprobe_core.ner.names import NamePair, split_pairs
from memprobe_core.ner.prompts import Prompt, check_prompts
from memprobe_core.ner.scoring import Metric, NerScores, score_prompts

ProgressFn = Callable[[int, int, str], None]
__all__ = ["Cancelled", "NerAudit", "NerAuditOptions", "NerModelReport", "run_ner_audit"]


@dataclass(frozen=True)
class NerAuditOptions:
    """Options of :func:`run_ner_audit`.

    Attributes:
        metric: M-MEM definition, ``pairwise`` (paper) or ``all_pairs`` (AUC, ties ½).
        dev_fraction: share of pairs in the dev set (prompts are ranked on dev, checked on test).
        seed: seeds the dev/test split.
        batch_size: filled prompts per forward pass.
        importance_steps: leave-one-token-out removals for the best and worst prompt (0: skip;
            ``None``: until only the slot is left).
        importance_pairs: dev pairs used for token importance (its cost is steps × tokens × 2 ×
            pairs forward passes).
        attention_pairs: pairs whose names are averaged in the attention heatmaps (0: skip).
    """

    metric: Metric = "pairwise"
    dev_fraction: float = 0.5
    seed: int = 0
    batch_size: int = 64
    importance_steps: int | None = 3
    importance_pairs: int = 50
    attention_pairs: int = 20


@dataclass
class NerModelReport:
    """Everything computed for one model.

    Attributes:
        label: the model's name in the audit.
        scores: all pairs; ``dev`` / ``test``: the same prompts on the dev / test pairs.
        importance: ``(best, worst)`` traces of the best and worst dev prompts, or ``None``.
        attention: attention comparisons of the best and the worst dev prompt (in that order).
    """

    label: str
    scores: NerScores
    dev: NerScores
    test: NerScores
    importance: tuple[ImportanceTrace, ImportanceTrace] | None = None
    attention: list[AttentionComparison] = field(default_factory=list)

    @property
    def best_prompt_id(self) -> int:
        """Index of the best prompt on the dev pairs."""
        return int(self.dev.m_mem.argmax())

    @property
    def worst_prompt_id(self) -> int:
        """Index of the worst prompt on the dev pairs."""
        return int(self.dev.m_mem.argmin())


@dataclass
class NerAudit:
    """The result of :func:`run_ner_audit`."""

    prompts: list[Prompt]
    pairs: list[NamePair]
    dev_pairs: list[NamePair]
    test_pairs: list[NamePair]
    options: NerAuditOptions
    reports: dict[str, NerModelReport] = field(default_factory=dict)

    def tau_across_models(self, split: Literal["all", "dev", "test"] = "dev") -> pd.DataFrame:
        """Kendall τ-b of the prompts' M-MEM between every two models (paper Figure 2b)."""
        pick = {"all": lambda r: r.scores, "dev": lambda r: r.dev, "test": lambda r: r.test}[split]
        return analyses.tau_matrix({k: pick(r).m_mem for k, r in self.reports.items()})

    def tau_dev_vs_test(self) -> pd.DataFrame:
        """τ between each model's dev scores (rows) and each model's test scores (columns)."""
        return analyses.tau_matrix(
            {k: r.dev.m_mem for k, r in self.reports.items()},
            {k: r.test.m_mem for k, r in self.reports.items()},
        )

    def prompt_scores(self) -> pd.DataFrame:
        """Prompt table of every model (all pairs), with ``model``, dev and test M-MEM columns."""
        frames = []
        for label, report in self.reports.items():
            table = report.scores.prompt_table()
            table.insert(0, "model", label)
            table["m_mem_dev"] = report.dev.m_mem
            table["m_mem_test"] = report.test.m_mem
            frames.append(table)
        return pd.concat(frames, ignore_index=True)

    def name_confidences(self) -> pd.DataFrame:
        """Per prompt × pair confidences of every model, with a ``split`` (dev/test) column."""
        dev = set(self.dev_pairs)
        frames = []
        for label, report in self.reports.items():
            table = report.scores.name_table()
            table.insert(0, "model", label)
            table["split"] = ["dev" if self.pairs[j] in dev else "test" for j in table["pair_id"]]
            frames.append(table)
        return pd.concat(frames, ignore_index=True)


def run_ner_audit(
    models: Mapping[str, NerModel],
    prompts: Sequence[str | Prompt],
    pairs: Sequence[NamePair],
    options: NerAuditOptions | None = None,
    *,
    on_progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
) -> NerAudit:
    """Score, rank and explain prompts on one or several NER models.

    Args:
        models: label → loaded model.
        prompts: sentences with one ``{name}`` slot.
        pairs: (in-train, out-of-train) pairs; at least 2 (dev and test).
        options: see :class:`NerAuditOptions`.
        on_progress: ``on_progress(done, total, message)``, ``total`` = 100 × models.
        cancel: set it to stop between batches (raises :class:`Cancelled`).

    Raises:
        Cancelled: ``cancel`` was set.
    """
    options = options or NerAuditOptions()
    if not models:
        raise ValueError("no model to audit")
    checked = check_prompts(prompts)
    dev_pairs, test_pairs = split_pairs(pairs, dev_fraction=options.dev_fraction, seed=options.seed)
    dev_set = set(dev_pairs)
    dev_ids = [i for i, p in enumerate(pairs) if p in dev_set]
    test_ids = [i for i, p in enumerate(pairs) if p not in dev_set]
    # Keep the input order inside each split, so report.dev.pairs == audit.dev_pairs.
    dev_pairs, test_pairs = [pairs[i] for i in dev_ids], [pairs[i] for i in test_ids]
    audit = NerAudit(checked, list(pairs), dev_pairs, test_pairs, options)
    total = 100 * len(models)

    def stage(offset: int, width: int, label: str) -> ProgressFn:
        def report(done: int, count: int, message: str) -> None:
            check_cancel(cancel)
            if on_progress:
                on_progress(offset + int(width * done / max(count, 1)), total, f"{label}: {message}")

        return report

    for index, (label, model) in enumerate(models.items()):
        base = 100 * index
        check_cancel(cancel)
        scores = score_prompts(
            model, checked, pairs, metric=options.metric, batch_size=options.batch_size,
            on_progress=stage(base, 70, f"{label} scoring"),
        )
        report = NerModelReport(label, scores, scores.subset(dev_ids), scores.subset(test_ids))
        best, worst = checked[report.best_prompt_id].text, checked[report.worst_prompt_id].text
        explain_pairs = dev_pairs[: options.importance_pairs]
        if options.importance_steps != 0 and explain_pairs:
            report.importance = (
                iterative_importance(
                    model, best, explain_pairs, remove="least", steps=options.importance_steps,
                    metric=options.metric, batch_size=options.batch_size,
                    on_progress=stage(base + 70, 10, f"{label} importance (best)"),
                ),
                iterative_importance(
                    model, worst, explain_pairs, remove="most", steps=options.importance_steps,
                    metric=options.metric, batch_size=options.batch_size,
                    on_progress=stage(base + 80, 10, f"{label} importance (worst)"),
                ),
            )
        if options.attention_pairs:
            attention_pairs = dev_pairs[: options.attention_pairs]
            for i, prompt in enumerate((best, worst)):
                check_cancel(cancel)
                report.attention.append(
                    compare_attention(model, prompt, attention_pairs, batch_size=options.batch_size)
                )
                stage(base + 90, 10, f"{label} attention")(i + 1, 2, "best and worst prompt")
        audit.reports[label] = report
    if on_progress:
        on_progress(total, total, "done")
    return audit
