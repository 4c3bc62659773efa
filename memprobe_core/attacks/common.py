"""What every extraction method takes: the models in play and the shared options."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from memprobe_core.config import (
    COMPAT_MODES,
    COMPAT_PRESETS,
    META_PROMPT_WORDINGS,
    SELECTIONS,
    Compat,
    MetaPrompts,
    ScoringConfig,
    Selection,
)
from memprobe_core.membership.options import MeasureOptions
from memprobe_core.models.base import Generator

Access = Literal["full", "partial"]
AnswerModel = Literal["base", "victim"]
ANSWER_MODELS: tuple[str, ...] = ("base", "victim")

# Sane maxima of the size options: far above any useful setting, low enough that a typo
# (`--n 1000000000`) is refused at once instead of slowly eating memory. Each entry is
# (field, lowest, highest); ``None`` values (use the default) are not checked.
SIZE_LIMITS: tuple[tuple[str, int, int], ...] = (
    ("rounds", 0, 100),
    ("n_candidates", 1, 1024),
    ("max_prompt_tokens", 1, 8192),
    ("gcg_steps", 0, 10_000),
    ("gcg_top_k", 1, 1_000_000),
    ("gcg_search_width", 1, 16_384),
    ("gcg_batch_size", 1, 16_384),
    ("reverse_max_new_tokens", 1, 8192),
)
# Tokens of prefix + suffix of one split, and snippets taken from a dataset (--limit,
# --per-domain): the same kind of guard for the sizes that are not method options.
MAX_LENGTH = 8192
MAX_SNIPPETS = 10_000_000


def check_size(name: str, value: int | None, low: int, high: int) -> None:
    """Refuse a size option outside ``[low, high]`` with a message naming it (``None`` passes).

    Raises:
        ValueError: ``"name=value: give a whole number from low to high"``.
    """
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name}={value!r}: give a whole number from {low} to {high:,}")


def check_length(length: int) -> None:
    """Refuse a split length (tokens of prefix + suffix) outside ``[2, MAX_LENGTH]``."""
    check_size("length", length, 2, MAX_LENGTH)


@dataclass
class ModelSet:
    """The models of one probe. Methods use the ones they need and say so when one is missing.

    Attributes:
        victim: the audited model (instruction-tuned in the paper's setting).
        base: its pre-instruction-tuning parent (P-S-Base, GCG).
        attacker: proposes candidate prompts (interactive method).
        init: writes the initial prompt (interactive method; defaults to the attacker).
        reverse: a reverse LM (Reverse-LM method).
        reference: a second model for the reference-ratio membership signal (optional; its
            tokenizer may differ from the victim's).
    """

    victim: Generator
    base: Generator | None = None
    attacker: Generator | None = None
    init: Generator | None = None
    reverse: Generator | None = None
    reference: Generator | None = None

    def manifest(self) -> dict[str, Any]:
        return {
            role: (model.manifest() if model is not None else None)
            for role, model in (
                ("victim", self.victim),
                ("base", self.base),
                ("attacker", self.attacker),
                ("init", self.init or self.attacker),
                ("reverse", self.reverse),
                ("reference", self.reference),
            )
        }


@dataclass
class AttackOptions:
    """Options of the extraction methods (each method reads its own; all are recorded).

    Attributes:
        alpha: weight of Mem in the objective; ``None`` looks it up (``config.alpha_for``).
        scoring: ROUGE variant, stemmer, tokenizer, output window (``None``: the defaults, with
            the window of ``compat``).
        seed: seed for every sampled generation.
        rounds: interactive method, refinement rounds T (paper: 3).
        n_candidates: interactive method, candidates per round n (paper: 24).
        attacker_temperature / attacker_top_p: sampling of the attacker (paper: temperature 1.0).
        access: ``full`` (attacker sees the whole snippet) or ``partial`` (prefix only).
        init_meta_prompt / refine_meta_prompt: edited meta-prompt texts (override ``meta_prompts``).
        max_prompt_tokens: cap on tokens the attacker/init model writes per prompt (``None``:
            256 in paper mode, 500 in reference mode); a prompt that hits it is flagged
            ``truncated``.
        batched: one batched call per round (False: one call per candidate, for benchmarks).
        ps_chat_template: P-S-Inst also through the victim's chat template (both are recorded).
        gcg_steps / gcg_top_k / gcg_search_width / gcg_batch_size: GCG search (paper: 30 steps).
        gcg_answer_model: who answers GCG's found prompt: ``base`` (paper: "P-S-Base & GCG" is
            evaluated on the base model) or ``victim``.
        reverse_max_new_tokens: tokens of prefix the reverse LM writes (default: prefix length).
        compat: ``paper`` (default) or ``reference``: the conventions of the paper or of its
            reference code; it fills every option below left at ``None`` and the output window
            of a ``scoring`` left at ``None`` (``config.COMPAT_PRESETS``).
        meta_prompts: named meta-prompt wording: ``paper`` (§3.2 exactly), ``paper+reply-only``
            (§3.2 plus "Reply with the ... only"; paper mode's default) or ``reference``.
        selection: which Mem the result's mode reports (``objective``: Mem(p*), ``max_mem``,
            ``reference``); every result records all three, p* is always argmax O.
        bos_in_prefix: the split counts the tokenizer's BOS as one of the prefix tokens, as the
            reference code does (prefix 65 text tokens + BOS at length 200).
        measure: what is measured beside each result: membership signals, Min-K% k,
            k-extractability's k (:class:`memprobe_core.membership.MeasureOptions`).
    """

    alpha: float | None = None
    # None is resolved in __post_init__ (the compat mode's window); always set afterwards.
    scoring: ScoringConfig = None  # type: ignore[assignment]
    seed: int = 0
    rounds: int = 3
    n_candidates: int = 24
    attacker_temperature: float = 1.0
    attacker_top_p: float = 1.0
    access: Access = "full"
    init_meta_prompt: str | None = None
    refine_meta_prompt: str | None = None
    max_prompt_tokens: int | None = None
    batched: bool = True
    ps_chat_template: bool = True
    gcg_steps: int = 30
    gcg_top_k: int = 256
    gcg_search_width: int = 128
    gcg_batch_size: int | None = None
    gcg_answer_model: AnswerModel = "base"
    reverse_max_new_tokens: int | None = None
    compat: Compat = "paper"
    meta_prompts: MetaPrompts | None = None
    selection: Selection | None = None
    bos_in_prefix: bool | None = None
    # A dict (from a stored config) becomes MeasureOptions in __post_init__.
    measure: MeasureOptions = field(default_factory=MeasureOptions)

    def __post_init__(self) -> None:
        if not isinstance(self.measure, MeasureOptions):
            self.measure = MeasureOptions.from_dict(self.measure)
        self._resolve_compat()  # first: the size checks see the preset's max_prompt_tokens
        for name, low, high in SIZE_LIMITS:
            check_size(name, getattr(self, name), low, high)
        if self.access not in ("full", "partial"):
            raise ValueError(f"access {self.access!r} is unknown; use 'full' or 'partial'")
        if self.gcg_answer_model not in ANSWER_MODELS:
            raise ValueError(
                f"gcg_answer_model {self.gcg_answer_model!r} is unknown; use 'base' or 'victim'"
            )
        if self.alpha is not None and not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f"alpha {self.alpha} is outside [0, 1]")
        if self.meta_prompts not in META_PROMPT_WORDINGS:
            raise ValueError(
                f"meta_prompts {self.meta_prompts!r} is unknown; use one of {META_PROMPT_WORDINGS}"
            )
        if self.selection not in SELECTIONS:
            raise ValueError(f"selection {self.selection!r} is unknown; use one of {SELECTIONS}")

    def _resolve_compat(self) -> None:
        """Fill the options left at ``None`` from the compat mode's preset (explicit ones win)."""
        if self.compat not in COMPAT_MODES:
            raise ValueError(f"compat {self.compat!r} is unknown; use one of {COMPAT_MODES}")
        preset = COMPAT_PRESETS[self.compat]
        if self.scoring is None:
            self.scoring = ScoringConfig(output_window=preset["output_window"])
        elif isinstance(self.scoring, dict):
            data = dict(self.scoring)
            data.setdefault("output_window", preset["output_window"])
            self.scoring = ScoringConfig(**data)
        for name in ("meta_prompts", "selection", "max_prompt_tokens", "bos_in_prefix"):
            if getattr(self, name) is None:
                setattr(self, name, preset[name])

    def with_scoring(self, **changes: Any) -> AttackOptions:
        """A copy with ``scoring`` fields changed (``ScoringConfig`` is frozen)."""
        return replace(self, scoring=replace(self.scoring, **changes))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AttackOptions:
        """Options from :meth:`to_dict`; a field missing from an older stored config keeps its
        default (e.g. ``gcg_answer_model`` before it existed: ``"base"``)."""
        return cls(**data)
