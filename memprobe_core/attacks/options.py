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
from memprobe_core.measuring.options import MeasureOptions
from memprobe_core.option_fields import check_options, option, options_of

Access = Literal["full", "partial"]

AnswerModel = Literal["base", "victim"]

ANSWER_MODELS: tuple[str, ...] = get_args(AnswerModel)

# Tokens of prefix + suffix of one split, and snippets taken from a dataset (--limit,
# --per-domain): far above any useful setting, low enough that a typo (`--length 10000000`) is
# refused at once instead of slowly eating memory. The method options' bounds are their fields'.
MAX_LENGTH = 8192

MAX_SNIPPETS = 10_000_000

# The bounds shared by the GCG-style searches (GCG, ACR): steps, substitutions, candidates.
MAX_STEPS = 10_000
MAX_TOP_K = 1_000_000
MAX_SEARCH_WIDTH = 16_384
MAX_PROMPT_TOKENS = 8192


@dataclass(frozen=True)
class InteractiveOptions:
    """The interactive method's options (paper §3.2, Algorithm 1); each field's help, range and
    front ends are in its :func:`~memprobe_core.option_fields.option` metadata."""

    rounds: int = option(
        3,
        help="refinement rounds T",
        low=0,
        high=100,
        flag="--rounds",
        metavar="T",
        page="Rounds T",
    )
    n_candidates: int = option(
        24,
        help="candidates per round n; fewer run faster on a CPU",
        low=1,
        high=1024,
        flag="--n",
        metavar="N",
        page="Candidates per round n",
    )
    attacker_temperature: float = option(
        1.0, help="attacker sampling temperature (0: greedy)", low=0
    )
    attacker_top_p: float = option(1.0, help="attacker nucleus mass", low=0, low_open=True, high=1)
    access: Access = option(
        "full",
        help="the attacker sees the whole snippet (full) or only the prefix (partial, paper §5.3); "
        "Mem is against the suffix either way",
        flag="--access",
        page="Attacker sees",
        advanced=True,
    )
    init_meta_prompt: str | None = option(
        None,
        help="your own text of the meta-prompt that writes the first prompts",
        default_text="the wording of meta_prompts",
    )
    refine_meta_prompt: str | None = option(
        None,
        help="your own text of the meta-prompt that refines them",
        default_text="the wording of meta_prompts",
    )
    max_prompt_tokens: int | None = option(
        None,
        help="tokens the attacker writes per prompt; a prompt that hits it is flagged truncated",
        low=1,
        high=MAX_PROMPT_TOKENS,
        default_text="the compat mode's: "
        + ", ".join(f"{m} {p['max_prompt_tokens']}" for m, p in COMPAT_PRESETS.items()),
        page="Max prompt tokens",
        advanced=True,
    )
    batched: bool = option(
        True, help="one batched call per round (false: one call per candidate, for benchmarks)"
    )

    def __post_init__(self) -> None:
        check_options(self)


@dataclass(frozen=True)
class GCGOptions:
    """GCG's options (paper: 30 steps; top-k and width as nanoGCG's defaults would be bigger)."""

    steps: int = option(
        30,
        help="GCG optimisation steps; each is a forward and backward pass of the base model, "
        "slow on a CPU",
        low=0,
        high=MAX_STEPS,
        name="gcg_steps",
        flag="--gcg-steps",
        metavar="N",
        page="GCG steps",
    )
    top_k: int = option(
        256,
        help="token substitutions considered per position",
        low=1,
        high=MAX_TOP_K,
        name="gcg_top_k",
    )
    search_width: int = option(
        128, help="candidates per step", low=1, high=MAX_SEARCH_WIDTH, name="gcg_search_width"
    )
    batch_size: int | None = option(
        None,
        help="candidates per forward pass",
        low=1,
        high=MAX_SEARCH_WIDTH,
        name="gcg_batch_size",
        default_text="all of a step's in one pass",
    )
    answer_model: AnswerModel = option(
        "base",
        help="who answers GCG's found prompt: base (paper: P-S-Base & GCG) or victim",
        name="gcg_answer_model",
        flag="--gcg-answer-model",
    )

    def __post_init__(self) -> None:
        check_options(self)


@dataclass(frozen=True)
class ReverseOptions:
    """Reverse-LM's options."""

    max_new_tokens: int | None = option(
        None,
        help="tokens of prefix the reverse LM writes",
        low=1,
        high=MAX_PROMPT_TOKENS,
        name="reverse_max_new_tokens",
        default_text="the prefix length",
    )

    def __post_init__(self) -> None:
        check_options(self)


@dataclass(frozen=True)
class PrefixSuffixOptions:
    """P-S-Base and P-S-Inst's options."""

    chat_template: bool = option(
        True,
        help="P-S-Inst also through the victim's chat template (both are recorded)",
        switch_help="P-S-Inst: raw prefix only, not also inside the victim's chat template",
        name="ps_chat_template",
        flag="--no-chat-template",
    )

    def __post_init__(self) -> None:
        check_options(self)


# The built-in methods' options sections, each a field of AttackOptions (and the CLI's flags);
# a method registered beyond them keeps its options in ``AttackOptions.method_options``.
BUILT_IN_CLASSES: dict[str, type] = {
    "interactive": InteractiveOptions,
    "gcg": GCGOptions,
    "reverse": ReverseOptions,
    "ps": PrefixSuffixOptions,
}
BUILT_IN_SECTIONS: tuple[str, ...] = tuple(BUILT_IN_CLASSES)

# Configs stored before the options were nested had them flat, under the names messages still
# use (``gcg_steps``): flat name → (section, field), read from the fields' metadata.
LEGACY_FLAT_OPTIONS: dict[str, tuple[str, str]] = {
    opt.label(): (section, opt.name)
    for section, cls in BUILT_IN_CLASSES.items()
    for opt in options_of(cls)
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
            k-extractability's k (:class:`memprobe_core.measuring.options.MeasureOptions`).
        interactive / gcg / reverse / ps: each built-in method's own options
            (:class:`InteractiveOptions`, :class:`GCGOptions`, :class:`ReverseOptions`,
            :class:`PrefixSuffixOptions`); dicts (a stored config) are read into them.
        method_options: the options of any other registered method, by its spec's
            ``options_key`` (a dict is read into the spec's ``options_class``; a section left out
            takes that class's defaults: see :meth:`for_method`).
    """

    alpha: float | None = option(
        None,
        help="weight of Mem in the objective",
        low=0,
        high=1,
        flag="--alpha",
        metavar="A",
        default_text="the paper's table by domain and length, else 0.5",
    )
    # None is resolved in __post_init__ (the compat mode's window); always set afterwards.
    scoring: ScoringConfig = None  # type: ignore[assignment]
    seed: int = option(
        0,
        help="seed of every sampled generation",
        low=SEED_RANGE[0],
        high=SEED_RANGE[1],
        flag="--seed",
        metavar="S",
        page="Seed",
    )
    compat: Compat = option(
        "paper",
        help="conventions: the paper's, or its reference code's (last window with a "
        "length-token budget, best_rougeL selection, its refine meta-prompt, 500-token prompts, "
        "BOS counted in the prefix)",
        flag="--compat",
        page="Conventions",
        advanced=True,
    )
    meta_prompts: MetaPrompts | None = None
    selection: Selection | None = None
    bos_in_prefix: bool | None = None
    speculative: bool = option(
        True,
        help="draft the victim's greedy answers from the true suffix and verify the draft in one "
        "pass (hf backend; the answers are the same either way; drafting is faster)",
        switch_help="decode the victim's greedy answers one token per step, without drafting "
        "from the true suffix (the answers are the same either way; drafting is faster)",
        flag="--no-speculative",
    )
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
        check_options(self)  # alpha, seed, compat, speculative
        self._resolve_compat()
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
