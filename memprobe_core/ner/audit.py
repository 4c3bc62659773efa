"""The NER audit: one call from a config to every number and table the page and the CLI show.

``run_ner_audit(NerAuditConfig(...))`` resolves the prompts (given, from a file, or templates)
and the names (given, from files or a CoNLL corpus, or the model's own lists), builds the
(in-train, out-of-train) pairs, optionally splits them into dev and test, then for each model
(loaded by name through :mod:`.registry`) scores every prompt on every pair, explains the best and
the worst prompt with token importance (paper Figure 4) and name-position attention (Figure 5), and
computes the analyses (ranking, M-MEM by prompt type, dev-vs-test Kendall τ, ensembles). Every
input is checked before a model loads. Progress goes to ``on_progress(done, total, message)``; a
``threading.Event`` stops it between batches, keeping the models finished so far.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from memprobe_core.attacks.result import Cancelled, check_cancel
from memprobe_core.config import SEED_RANGE
from memprobe_core.errors import OptionError, UsageError
from memprobe_core.ner import analyses
from memprobe_core.ner.attention import AttentionComparison, compare_attention
from memprobe_core.ner.conll import conll_person_names
from memprobe_core.ner.importance import ImportanceTrace, best_worst_importance
from memprobe_core.ner.names import (
    NameFile,
    NamePair,
    build_pairs,
    read_name_list,
    split_pairs,
)
from memprobe_core.ner.prompts import (
    PROMPT_TYPES,
    Prompt,
    check_prompts,
    read_prompts,
    template_prompts,
)
from memprobe_core.ner.registry import EMBEDDED, load_ner_model, model_name_lists
from memprobe_core.ner.scoring import Metric, NerScores, score_prompts
from memprobe_core.option_fields import check_options, option

ProgressFn = Callable[[int, int, str], None]
# A name list: a file path, an upload, or the names themselves.
NameSource = str | Path | NameFile | Sequence[str]
__all__ = [
    "Cancelled",
    "NerAuditConfig",
    "NerAuditResult",
    "NerConfigError",
    "NerModelReport",
    "run_ner_audit",
]
MAX_PAIRS = 1_000_000  # sane bounds: a typo like --pairs 1e9 is refused, not slowly run
MAX_BATCH = 4096


class NerConfigError(UsageError):
    """An audit option is out of range or two options conflict; the message names the option."""


class NerOptionError(OptionError, NerConfigError):
    """One NER audit option outside its range (``option``, ``value``, ``problem``)."""


@dataclass(frozen=True)
class NerAuditConfig:
    """Everything a NER audit needs (checked on creation, before any model loads).

    Attributes:
        models: model names: ``embedded``, a registered name, a hub id or a local folder.
        in_names / out_names: in-train / out-of-train names: a file path (.txt or .csv), a
            :class:`NameFile` or a list of names; ``None``: the lists the first model that has
            them comes with (the embedded model's).
        in_conll: take in-train names from the PER entities of a CoNLL-2003 file or folder's train
            split (instead of ``in_names``).
        prompts: a prompt file path (.txt or .csv) or a list of prompts, each with ``{name}``
            once; ``None``: ``templates`` template prompts.
        prompt_types: template sentence types.
        device: ``cuda``, ``cpu`` or ``None`` (CUDA when present).

    The sizes, the metric, the seed and the dev share are options: each one's help, range and
    front ends are in its :func:`~memprobe_core.option_fields.option` metadata.
    """

    models: tuple[str, ...] = (EMBEDDED,)
    in_names: NameSource | None = None
    out_names: NameSource | None = None
    in_conll: str | Path | None = None
    max_pairs: int = option(
        100,
        help="at most this many (in, out) pairs",
        low=1,
        high=MAX_PAIRS,
        flag="--pairs",
        metavar="N",
        page="Pairs (at most)",
    )
    min_words: int = option(
        1, help="drop names with fewer words", low=1, high=20, flag="--min-words", metavar="N"
    )
    prompts: str | Path | Sequence[str | Prompt] | None = None
    templates: int = option(
        40,
        help="without prompts of your own: this many template prompts, balanced over the "
        "chosen sentence types",
        low=1,
        high=100_000,
        flag="--templates",
        metavar="N",
        page="How many",
    )
    prompt_types: tuple[str, ...] = PROMPT_TYPES
    metric: Metric = option(
        "pairwise",
        help="M-MEM definition: pairwise (paper: share of pairs where the in-train name gets the "
        "higher PER confidence) or all_pairs (reference code: every in × out combination, "
        "ties count 1/2)",
        flag="--metric",
        page="M-MEM",
    )
    seed: int = option(
        0,
        help="seed of pair shuffling, templates and the dev/test split",
        low=SEED_RANGE[0],
        high=SEED_RANGE[1],
        flag="--seed",
        metavar="S",
        page="Seed",
    )
    dev_fraction: float = option(
        0.0,
        help="share of pairs in the dev set: prompts are ranked on dev and checked on test, "
        "with dev-vs-test Kendall tau and ensembles; 0: no split",
        low=0,
        high=1,
        high_open=True,
        example="0.5",
        flag="--dev-fraction",
        metavar="F",
        page="Dev share (0: no dev/test split)",
    )
    batch_size: int = option(
        64,
        help="filled prompts per forward pass",
        low=1,
        high=MAX_BATCH,
        flag="--batch-size",
        metavar="N",
    )
    importance_steps: int | None = option(
        3,
        help="leave-one-token-out removals for the best and the worst prompt (0: skip; None: "
        "until only the name slot is left)",
        low=0,
        page="Token-importance steps",
    )
    importance_pairs: int = option(
        50,
        help="(dev) pairs used for token importance; it costs steps × tokens × 2 × pairs "
        "forward passes",
        low=1,
        high=MAX_PAIRS,
    )
    attention_pairs: int = option(
        20,
        help="(dev) pairs whose names are averaged in the attention heatmaps (0: skip)",
        low=0,
        high=MAX_PAIRS,
    )
    device: str | None = None

    def __post_init__(self) -> None:
        # Lists become tuples so the config stays hashable and cannot change under a running job.
        # Names stripped and de-duplicated (a model picked and typed again is audited once).
        models = dict.fromkeys(m.strip() for m in self.models if m and m.strip())
        object.__setattr__(self, "models", tuple(models))
        object.__setattr__(self, "prompt_types", tuple(self.prompt_types))
        if not isinstance(self.prompts, (str, Path, type(None))):
            object.__setattr__(self, "prompts", tuple(check_prompts(self.prompts)))
        _check_config(self)


def _check_config(c: NerAuditConfig) -> None:
    """Raise :class:`NerConfigError` naming the first bad option."""
    try:
        check_options(c)
    except OptionError as exc:  # the NER error type, which the page and the CLI catch
        raise NerOptionError(exc.option, exc.value, exc.problem) from None
    if not c.models:
        raise NerConfigError("no NER model given: name at least one (e.g. 'embedded')")
    if c.in_names is not None and c.in_conll is not None:
        raise NerConfigError(
            "give in-train names (in_names) or a CoNLL corpus (in_conll), not both"
        )
    unknown = set(c.prompt_types) - set(PROMPT_TYPES)
    if c.prompts is None and (not c.prompt_types or unknown):
        raise NerConfigError(
            f"prompt types {sorted(unknown) or '(none)'}: pick at least one of {list(PROMPT_TYPES)}"
        )


@dataclass
class NerModelReport:
    """Everything computed for one model.

    Attributes:
        label: the model's name in the config.
        scores: all prompts × all pairs; ``dev`` / ``test``: the same on the dev / test pairs
            (``None`` without a split).
        ranked: prompts best first (``analyses.rank_prompts``).
        by_type: M-MEM per prompt type (count, mean, std, min, max).
        type_groups: one row per prompt with its type (input of a box plot).
        dev_test_tau: Kendall τ of the prompts' M-MEM on dev vs test (``None`` without a split).
        ensembles: top-k dev prompt ensembles on the test pairs (``None`` without a split).
        importance: ``(best, worst)`` token-importance traces, or ``None`` when skipped.
        attention: attention comparisons of the best and the worst prompt (in that order).
        notes: what was skipped and why, for the user.
    """

    label: str
    scores: NerScores
    dev: NerScores | None = None
    test: NerScores | None = None
    ranked: pd.DataFrame = field(default_factory=pd.DataFrame)
    by_type: pd.DataFrame = field(default_factory=pd.DataFrame)
    type_groups: pd.DataFrame = field(default_factory=pd.DataFrame)
    dev_test_tau: float | None = None
    ensembles: pd.DataFrame | None = None
    importance: tuple[ImportanceTrace, ImportanceTrace] | None = None
    attention: list[AttentionComparison] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ranking_scores(self) -> NerScores:
        """The scores prompts are chosen on: dev when split (no test information), else all."""
        return self.dev if self.dev is not None else self.scores

    @property
    def best_prompt_id(self) -> int:
        """Index of the best prompt (on the dev pairs when split)."""
        return int(self.ranking_scores.m_mem.argmax())

    @property
    def worst_prompt_id(self) -> int:
        """Index of the worst prompt (on the dev pairs when split)."""
        return int(self.ranking_scores.m_mem.argmin())

    def summary(self) -> dict[str, Any]:
        """Headline numbers (``NerScores.summary``) plus M-MEM by type, τ and ensembles: the CLI's JSON."""
        out = self.scores.summary()
        out["by_type"] = self.by_type.to_dict(orient="records")
        if self.dev_test_tau is not None and self.ensembles is not None:
            out["dev_test_tau"] = self.dev_test_tau
            out["ensembles"] = self.ensembles.to_dict(orient="records")
        return out


@dataclass
class NerAuditResult:
    """The result of :func:`run_ner_audit`: inputs as used, one report per model, tables.

    ``cancelled`` is true when the audit was stopped; ``reports`` then holds the models finished.
    """

    config: NerAuditConfig
    prompts: list[Prompt]
    pairs: list[NamePair]
    dev_pairs: list[NamePair] | None
    test_pairs: list[NamePair] | None
    reports: dict[str, NerModelReport] = field(default_factory=dict)
    seconds: float = 0.0
    cancelled: bool = False

    def summary_table(self) -> pd.DataFrame:
        """One row per model: prompts, pairs, mean / best / worst M-MEM (%) and spread (points)."""
        rows = []
        for label, report in self.reports.items():
            s = report.scores.summary()
            rows.append(
                {
                    "model": label,
                    "prompts": s["prompts"],
                    "pairs": s["pairs"],
                    "mean M-MEM %": 100 * s["m_mem_mean"],
                    "best %": 100 * s["m_mem_best"],
                    "worst %": 100 * s["m_mem_worst"],
                    "spread (points)": 100 * s["spread"],
                }
            )
        return pd.DataFrame(rows)

    def type_groups(self) -> pd.DataFrame:
        """Every model's prompts with their type and M-MEM, a ``model`` column (box plot input)."""
        return pd.concat(
            [r.type_groups.assign(model=k) for k, r in self.reports.items()], ignore_index=True
        )

    def tau_across_models(self, split: Literal["all", "dev", "test"] = "all") -> pd.DataFrame:
        """Kendall τ-b of the prompts' M-MEM between every two models (paper Figure 2b)."""
        if split != "all" and self.dev_pairs is None:
            raise ValueError(f"no {split} split: set dev_fraction above 0")
        pick = {"all": lambda r: r.scores, "dev": lambda r: r.dev, "test": lambda r: r.test}[split]
        return analyses.tau_matrix({k: pick(r).m_mem for k, r in self.reports.items()})

    def tau_dev_vs_test(self) -> pd.DataFrame:
        """τ between each model's dev scores (rows) and each model's test scores (columns)."""
        if self.dev_pairs is None:
            raise ValueError("no dev/test split: set dev_fraction above 0")
        # A split result has dev and test scores for every model (checked above).
        return analyses.tau_matrix(
            {k: r.dev.m_mem for k, r in self.reports.items() if r.dev is not None},
            {k: r.test.m_mem for k, r in self.reports.items() if r.test is not None},
        )

    def prompt_scores(self) -> pd.DataFrame:
        """Prompt table of every model (all pairs), ``model`` first; dev and test M-MEM when split."""
        frames = []
        for label, report in self.reports.items():
            table = report.scores.prompt_table()
            table.insert(0, "model", label)
            if report.dev is not None and report.test is not None:
                table["m_mem_dev"] = report.dev.m_mem
                table["m_mem_test"] = report.test.m_mem
            frames.append(table)
        return pd.concat(frames, ignore_index=True)

    def name_confidences(self) -> pd.DataFrame:
        """Per prompt × pair confidences of every model; a ``split`` (dev/test) column when split."""
        dev = set(self.dev_pairs or ())
        frames = []
        for label, report in self.reports.items():
            table = report.scores.name_table()
            table.insert(0, "model", label)
            if self.dev_pairs is not None:
                table["split"] = [
                    "dev" if self.pairs[j] in dev else "test" for j in table["pair_id"]
                ]
            frames.append(table)
        return pd.concat(frames, ignore_index=True)


# --- inputs ---------------------------------------------------------------------------------------
def _name_list(source: NameSource) -> list[str]:
    if isinstance(source, (str, Path, NameFile)):
        return read_name_list(source)
    return [str(name) for name in source]


def _names(config: NerAuditConfig) -> tuple[list[str], list[str]]:
    """In-train and out-of-train names from the config, else from the models' own lists."""
    own = next((lists for m in config.models if (lists := model_name_lists(m))), None)
    if config.in_conll is not None:
        splits = conll_person_names(config.in_conll)
        if "train" not in splits:
            raise NerConfigError(f"{config.in_conll} has no train split (found {sorted(splits)})")
        in_names = splits["train"]
        if not in_names:
            raise NerConfigError(f"{config.in_conll} has no PER entities in its train split")
    elif config.in_names is not None:
        in_names = _name_list(config.in_names)
    else:
        in_names = own[0] if own else []
    out_names = (
        _name_list(config.out_names) if config.out_names is not None else (own[1] if own else [])
    )
    if not in_names or not out_names:
        raise NerConfigError(
            f"model {', '.join(map(repr, config.models))} has no built-in name lists: give in-train "
            "names (in_names or in_conll) and out-of-train names (out_names)"
        )
    return in_names, out_names


def _prompts(config: NerAuditConfig) -> list[Prompt]:
    if isinstance(config.prompts, (str, Path)):
        return read_prompts(config.prompts)
    if config.prompts is not None:
        return check_prompts(config.prompts)  # already checked when the config was made
    return template_prompts(config.templates, seed=config.seed, types=config.prompt_types)


def _split(config: NerAuditConfig, pairs: list[NamePair]) -> tuple[list[int], list[int]] | None:
    """Dev and test pair indices, each in input order (``None`` without a split)."""
    if not config.dev_fraction:
        return None
    dev_set = set(split_pairs(pairs, dev_fraction=config.dev_fraction, seed=config.seed)[0])
    return (
        [i for i, p in enumerate(pairs) if p in dev_set],
        [i for i, p in enumerate(pairs) if p not in dev_set],
    )


# --- the audit ------------------------------------------------------------------------------------
def run_ner_audit(
    config: NerAuditConfig,
    *,
    on_progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
) -> NerAuditResult:
    """Score, rank and explain prompts on one or several NER models.

    Args:
        config: see :class:`NerAuditConfig`.
        on_progress: ``on_progress(done, total, message)``, ``total`` = 100 × models (loading and
            first-use training, scoring, importance, attention).
        cancel: set it to stop between batches; the models finished so far are returned, with
            ``cancelled=True``.

    Raises:
        NerConfigError, PromptError, NameListError, ConllError: bad inputs (before any model loads).
        NerModelError, LabelError: a model cannot be loaded or has no PER labels.
    """
    started = time.perf_counter()
    prompts = _prompts(config)
    pairs = build_pairs(
        *_names(config), seed=config.seed, max_pairs=config.max_pairs, min_words=config.min_words
    )
    split = _split(config, pairs)
    result = NerAuditResult(
        config,
        prompts,
        pairs,
        *(([pairs[i] for i in split[0]], [pairs[i] for i in split[1]]) if split else (None, None)),
    )
    total = 100 * len(config.models)
    for index, label in enumerate(config.models):
        try:
            result.reports[label] = _audit_model(
                config, result, label, split, _Stages(on_progress, cancel, 100 * index, total)
            )
        except Cancelled:
            result.cancelled = True
            break
    result.seconds = round(time.perf_counter() - started, 1)
    if on_progress and not result.cancelled:
        on_progress(total, total, "done")
    return result


@dataclass
class _Stages:
    """Maps each stage's own ``(done, count)`` onto the audit's 0..total, checking cancel."""

    on_progress: ProgressFn | None
    cancel: threading.Event | None
    base: int
    total: int

    def stage(self, offset: int, width: int, label: str) -> ProgressFn:
        def report(done: int, count: int, message: str) -> None:
            check_cancel(self.cancel)
            if self.on_progress:
                at = self.base + offset + int(width * done / max(count, 1))
                self.on_progress(at, self.total, f"{label}: {message}")

        return report


def _audit_model(
    config: NerAuditConfig,
    result: NerAuditResult,
    label: str,
    split: tuple[list[int], list[int]] | None,
    stages: _Stages,
) -> NerModelReport:
    """Load, score, analyse and explain one model."""
    load = stages.stage(0, 10, f"{label} loading")
    load(0, 1, "loading; an embedded model not yet built is trained now (minutes on a CPU, once)")
    model = load_ner_model(label, device=config.device, on_progress=load)
    scores = score_prompts(
        model,
        result.prompts,
        result.pairs,
        metric=config.metric,
        batch_size=config.batch_size,
        on_progress=stages.stage(10, 60, f"{label} scoring"),
    )
    report = NerModelReport(
        label,
        scores,
        ranked=analyses.rank_prompts(scores),
        by_type=analyses.m_mem_by_property(scores, "type"),
        type_groups=analyses.property_groups(scores, "type"),
    )
    if split is not None:
        report.dev, report.test = scores.subset(split[0]), scores.subset(split[1])
        report.dev_test_tau = analyses.dev_test_tau(report.dev, report.test)
        report.ensembles = analyses.ensemble_table(report.dev, report.test)
    _explain(config, model, report, result.dev_pairs or result.pairs, stages)
    return report


def _explain(
    config: NerAuditConfig,
    model: Any,
    report: NerModelReport,
    pairs: list[NamePair],
    stages: _Stages,
) -> None:
    """Token importance and attention of the best and the worst prompt, on the (dev) pairs."""
    best = report.scores.prompts[report.best_prompt_id].text
    worst = report.scores.prompts[report.worst_prompt_id].text
    if config.importance_steps != 0:
        report.importance = best_worst_importance(
            model,
            best,
            worst,
            pairs[: config.importance_pairs],
            steps=config.importance_steps,
            metric=config.metric,
            batch_size=config.batch_size,
            on_progress=stages.stage(70, 20, f"{report.label} importance"),
        )
    if config.attention_pairs:
        done = stages.stage(90, 10, f"{report.label} attention")
        for i, prompt in enumerate((best, worst)):
            check_cancel(stages.cancel)
            try:
                report.attention.append(
                    compare_attention(
                        model, prompt, pairs[: config.attention_pairs], batch_size=config.batch_size
                    )
                )
            except ValueError as exc:  # a prompt whose names cannot be aligned: say so, go on
                report.notes.append(str(exc))
            done(i + 1, 2, "best and worst prompt")
