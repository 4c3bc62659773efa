"""The options of the extraction methods: the shared ones, each method's own, and their bounds."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal, get_args

from memprobe_core.attacks import registry
from memprobe_core.config import (
    COMPAT_MODES,
    COMPAT_PRESETS,
    META_PROMPT_WORDINGS,
    SEED_RANGE,
    SELECTIONS,
    Compat,
    MetaPrompts,
    ScoringConfig,
    Selection,
)
from memprobe_core.errors import OptionError
from memprobe_core.membership.options import MeasureOptions

Access = Literal["full", "partial"]

AnswerModel = Literal["base", "victim"]

ANSWER_MODELS: tuple[str, ...] = get_args(AnswerModel)

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
        OptionError: ``"name=value: give a whole number from low to high"``.
    """
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise OptionError(name, value, f"give a whole number from {low} to {high:,}")


def _check_sizes(options: Any, limits: dict[str, tuple[str, int, int]]) -> None:
    """Check each size field of a method's options against ``SIZE_LIMITS`` (by its flat name,
    the one users know from the CLI and from configs stored before the options were nested)."""
    for field_name, (flat_name, low, high) in limits.items():
        check_size(flat_name, getattr(options, field_name), low, high)


_LIMITS = {name: (name, low, high) for name, low, high in SIZE_LIMITS}


@dataclass(frozen=True)
class InteractiveOptions:
    """The interactive method's options (paper §3.2, Algorithm 1).

    Attributes:
        rounds: refinement rounds T (paper: 3).
        n_candidates: candidates per round n (paper: 24).
        attacker_temperature / attacker_top_p: sampling of the attacker (paper: temperature 1.0).
        access: ``full`` (attacker sees the whole snippet) or ``partial`` (prefix only).
        init_meta_prompt / refine_meta_prompt: edited meta-prompt texts (override
            ``AttackOptions.meta_prompts``).
        max_prompt_tokens: cap on tokens the attacker/init model writes per prompt (``None``:
            the compat mode's, 256 in paper mode, 500 in reference mode); a prompt that hits it
            is flagged ``truncated``.
        batched: one batched call per round (False: one call per candidate, for benchmarks).
    """

    rounds: int = 3
    n_candidates: int = 24
    attacker_temperature: float = 1.0
    attacker_top_p: float = 1.0
    access: Access = "full"
    init_meta_prompt: str | None = None
    refine_meta_prompt: str | None = None
    max_prompt_tokens: int | None = None
    batched: bool = True

    def __post_init__(self) -> None:
        sizes = ("rounds", "n_candidates", "max_prompt_tokens")
        _check_sizes(self, {name: _LIMITS[name] for name in sizes})
        if self.access not in get_args(Access):
            raise ValueError(f"access {self.access!r} is unknown; use 'full' or 'partial'")
        if self.attacker_temperature < 0:
            raise ValueError(
                f"attacker_temperature {self.attacker_temperature} is negative; use 0 for greedy"
            )
        if not 0 < self.attacker_top_p <= 1:
            raise ValueError(f"attacker_top_p {self.attacker_top_p} must be in (0, 1]")


@dataclass(frozen=True)
class GCGOptions:
    """GCG's options (paper: 30 steps; top-k and width as nanoGCG's defaults would be bigger).

    Attributes:
        steps / top_k / search_width / batch_size: the search (``batch_size`` ``None``: all
            candidates of a step in one forward pass).
        answer_model: who answers the found prompt: ``base`` (paper: "P-S-Base & GCG" is
            evaluated on the base model) or ``victim``.
    """

    steps: int = 30
    top_k: int = 256
    search_width: int = 128
    batch_size: int | None = None
    answer_model: AnswerModel = "base"

    def __post_init__(self) -> None:
        sizes = {"steps": "gcg_steps", "top_k": "gcg_top_k", "search_width": "gcg_search_width"}
        sizes["batch_size"] = "gcg_batch_size"
        _check_sizes(self, {field: _LIMITS[flat] for field, flat in sizes.items()})
        if self.answer_model not in ANSWER_MODELS:
            raise ValueError(
                f"gcg_answer_model {self.answer_model!r} is unknown; use 'base' or 'victim'"
            )


@dataclass(frozen=True)
class ReverseOptions:
    """Reverse-LM's options.

    Attributes:
        max_new_tokens: tokens of prefix the reverse LM writes (``None``: the prefix length).
    """

    max_new_tokens: int | None = None

    def __post_init__(self) -> None:
        _check_sizes(self, {"max_new_tokens": _LIMITS["reverse_max_new_tokens"]})


@dataclass(frozen=True)
class PrefixSuffixOptions:
    """P-S-Base and P-S-Inst's options.

    Attributes:
        chat_template: P-S-Inst also through the victim's chat template (both are recorded).
    """

    chat_template: bool = True


# The built-in methods' options sections, each a field of AttackOptions (and the CLI's flags);
# a method registered beyond them keeps its options in ``AttackOptions.method_options``.
BUILT_IN_SECTIONS: tuple[str, ...] = ("interactive", "gcg", "reverse", "ps")

# Configs stored before the options were nested had them flat: flat name → (section, field).
LEGACY_FLAT_OPTIONS: dict[str, tuple[str, str]] = {
    **{name: ("interactive", name) for name in InteractiveOptions.__dataclass_fields__},
    "gcg_steps": ("gcg", "steps"),
    "gcg_top_k": ("gcg", "top_k"),
    "gcg_search_width": ("gcg", "search_width"),
    "gcg_batch_size": ("gcg", "batch_size"),
    "gcg_answer_model": ("gcg", "answer_model"),
    "reverse_max_new_tokens": ("reverse", "max_new_tokens"),
    "ps_chat_template": ("ps", "chat_template"),
}


@dataclass
class AttackOptions:
    """Options of the extraction methods: the shared ones here, each method's own nested.

    Attributes:
        alpha: weight of Mem in the objective; ``None`` looks it up (``config.alpha_for``).
        scoring: ROUGE variant, stemmer, tokenizer, output window (``None``: the defaults, with
            the window of ``compat``).
        seed: seed for every sampled generation.
        compat: ``paper`` (default) or ``reference``: the conventions of the paper or of its
            reference code; it fills every option below left at ``None``,
            ``interactive.max_prompt_tokens`` and the output window of a ``scoring`` left at
            ``None`` (``config.COMPAT_PRESETS``).
        meta_prompts: named meta-prompt wording: ``paper`` (§3.2 exactly), ``paper+reply-only``
            (§3.2 plus "Reply with the ... only"; paper mode's default) or ``reference``.
        selection: which Mem the result's mode reports (``objective``: Mem(p*), ``max_mem``,
            ``reference``); every result records all three, p* is always argmax O.
        bos_in_prefix: the split counts the tokenizer's BOS as one of the prefix tokens, as the
            reference code does (prefix 65 text tokens + BOS at length 200).
        speculative: give the victim's greedy decoding the true suffix to draft from (the
            ``hf`` backend verifies the draft in one pass; identical answers, fewer passes;
            ``--no-speculative`` turns it off).
        measure: what is measured beside each result: membership signals, Min-K% k,
            k-extractability's k (:class:`memprobe_core.membership.MeasureOptions`).
        interactive / gcg / reverse / ps: each built-in method's own options
            (:class:`InteractiveOptions`, :class:`GCGOptions`, :class:`ReverseOptions`,
            :class:`PrefixSuffixOptions`); dicts (a stored config) are read into them.
        method_options: the options of any other registered method, by its spec's
            ``options_key`` (a dict is read into the spec's ``options_class``; a section left out
            takes that class's defaults: see :meth:`for_method`).
    """

    alpha: float | None = None
    # None is resolved in __post_init__ (the compat mode's window); always set afterwards.
    scoring: ScoringConfig = None  # type: ignore[assignment]
    seed: int = 0
    compat: Compat = "paper"
    meta_prompts: MetaPrompts | None = None
    selection: Selection | None = None
    bos_in_prefix: bool | None = None
    speculative: bool = True
    # Dicts (from a stored config) become the dataclasses in __post_init__.
    measure: MeasureOptions = field(default_factory=MeasureOptions)
    interactive: InteractiveOptions = field(default_factory=InteractiveOptions)
    gcg: GCGOptions = field(default_factory=GCGOptions)
    reverse: ReverseOptions = field(default_factory=ReverseOptions)
    ps: PrefixSuffixOptions = field(default_factory=PrefixSuffixOptions)
    method_options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.measure, MeasureOptions):
            self.measure = MeasureOptions.from_dict(self.measure)
        self.method_options = dict(self.method_options)
        for name, cls in registry.option_sections().items():
            held = name in BUILT_IN_SECTIONS or name in self.method_options
            if not held:
                continue
            value = getattr(self, name) if name in BUILT_IN_SECTIONS else self.method_options[name]
            if isinstance(value, dict):
                value = cls(**value)
            elif not isinstance(value, cls):
                raise TypeError(f"{name} must be a {cls.__name__}, not {type(value).__name__}")
            if name in BUILT_IN_SECTIONS:
                setattr(self, name, value)
            else:
                self.method_options[name] = value
        check_size("seed", self.seed, *SEED_RANGE)
        self._resolve_compat()
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
        for name in ("meta_prompts", "selection", "bos_in_prefix"):
            if getattr(self, name) is None:
                setattr(self, name, preset[name])
        if self.interactive.max_prompt_tokens is None:
            # A copy: the caller's InteractiveOptions (maybe shared) is never changed.
            self.interactive = replace(
                self.interactive, max_prompt_tokens=preset["max_prompt_tokens"]
            )

    def for_method(self, method: str) -> Any:
        """The options of a registered method (``None`` for a method without options of its own;
        the class's defaults when its section was not given)."""
        spec = registry.get_method(method)
        if spec.options_key is None or spec.options_class is None:
            return None
        if spec.options_key in BUILT_IN_SECTIONS:
            return getattr(self, spec.options_key)
        return self.method_options.get(spec.options_key) or spec.options_class()

    def with_scoring(self, **changes: Any) -> AttackOptions:
        """A copy with ``scoring`` fields changed (``ScoringConfig`` is frozen)."""
        return replace(self, scoring=replace(self.scoring, **changes))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AttackOptions:
        """Options from :meth:`to_dict`, or from a config stored before the method options were
        nested (flat ``rounds``, ``gcg_steps`` …, see ``LEGACY_FLAT_OPTIONS``); a field missing
        from an older config keeps its default (e.g. ``gcg_answer_model`` before it existed)."""
        data = dict(data)
        sections: dict[str, Any] = {
            name: dict(data.pop(name, None) or {}) for name in BUILT_IN_SECTIONS
        }
        for flat, (section, field_name) in LEGACY_FLAT_OPTIONS.items():
            if flat in data:
                sections[section].setdefault(field_name, data.pop(flat))
        return cls(**data, **sections)
