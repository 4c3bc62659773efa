"""Options shared across memprobe: scoring options and the paper's α table.

Every option lives in a dataclass here (or next to the method that owns it) with its default,
so the README's option table, the CLI and the dashboard read one source.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal, get_args

from memprobe_core.option_fields import check_options, option

RougeVariant = Literal["recall", "precision", "f1"]
RougeTokenizer = Literal["rouge", "unicode"]
OutputWindow = Literal["first", "last"]

ROUGE_VARIANTS: tuple[str, ...] = get_args(RougeVariant)
ROUGE_TOKENIZERS: tuple[str, ...] = get_args(RougeTokenizer)
OUTPUT_WINDOWS: tuple[str, ...] = get_args(OutputWindow)

# Conventions of a run (docs/method.md §2): ``paper`` follows the paper's text, ``reference`` the
# paper's reference code (Alymostafa/Instruction_based_attack). See COMPAT_PRESETS.
Compat = Literal["paper", "reference"]
COMPAT_MODES: tuple[str, ...] = get_args(Compat)
# Named meta-prompt wordings (memprobe_core.attacks.prompts.WORDINGS holds the texts).
MetaPrompts = Literal["paper", "paper+reply-only", "reference"]
META_PROMPT_WORDINGS: tuple[str, ...] = get_args(MetaPrompts)
# Which Mem a report shows for a result: Mem(p*) with p* = argmax O (Algorithm 1), the highest
# Mem in the trace, or the reference code's best_rougeL = max(Mem_init, Mem(p*_rounds)).
Selection = Literal["objective", "max_mem", "reference"]
SELECTIONS: tuple[str, ...] = get_args(Selection)

# What each compat mode sets when the option is not given explicitly.
COMPAT_PRESETS: dict[str, dict[str, Any]] = {
    "paper": {
        "output_window": "first",  # victim writes len(suffix) tokens, all scored
        "selection": "objective",  # Algorithm 1's p* = argmax O
        "meta_prompts": "paper+reply-only",  # §3.2 + "Reply with ... only" for small attackers
        "max_prompt_tokens": 256,  # room for the paper's Appendix E prompts (~160 tokens)
        "bos_in_prefix": False,  # the prefix holds 66/100/167 text tokens
    },
    "reference": {
        "output_window": "last",  # victim writes `length` tokens, the last len(suffix) scored
        "selection": "reference",  # best_rougeL = max(Mem_init, Mem(p*))
        "meta_prompts": "reference",  # utils.construct_meta_prompt's text
        "max_prompt_tokens": 500,  # opt.self_refined: gen_len = 500
        "bos_in_prefix": True,  # dataset.extract_sos_prompt_response: BOS is 1 of the 66
    },
}

# The paper's default sequence lengths and the prefix share of each (33 % prefix / 67 % suffix).
LENGTHS: tuple[int, ...] = (200, 300, 500)  # the paper's snippet lengths (prefix + suffix tokens)
DEFAULT_LENGTH = LENGTHS[0]
DEFAULT_PREFIX_RATIO = 0.33


@dataclass(frozen=True)
class ScoringConfig:
    """How Mem and LCS_P are scored.

    Attributes:
        variant: ROUGE-L component: ``recall`` (paper's reference code), ``precision`` or ``f1``.
        stemmer: apply the Porter stemmer to tokens (paper: on).
        tokenizer: ``rouge`` (rouge-score's: lowercase, ASCII letters and digits only; drops every
            non-ASCII character) or ``unicode`` (word characters of any script).
        output_window: which ``len(suffix)`` tokens of the victim output are scored: the ``first``
            (natural) or the ``last`` (what the paper's reference code does).
    """

    variant: RougeVariant = option(
        "recall",
        help="ROUGE-L component scored (the paper's code: recall)",
        flag="--rouge-variant",
        page="ROUGE-L",
    )
    stemmer: bool = option(
        True,
        help="the Porter stemmer, as the paper",
        page="Porter stemmer",
        switch_help="score without the Porter stemmer (default: stemmer on, as the paper)",
        flag="--no-stemmer",
    )
    tokenizer: RougeTokenizer = option(
        "rouge",
        help="rouge (paper; drops non-ASCII) or unicode (word characters of any script)",
        flag="--rouge-tokenizer",
        page="Tokenizer",
    )
    output_window: OutputWindow = option(
        "first",
        help="which len(suffix) tokens of the output are scored; last also lets the victim "
        "write the whole length",
        flag="--output-window",
        page="Output window",
        default_text="the compat mode's: "
        + ", ".join(f"{mode} {preset['output_window']}" for mode, preset in COMPAT_PRESETS.items()),
    )

    def __post_init__(self) -> None:
        check_options(self)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


# --- α: weight of Mem against LCS_P in O = α·Mem − (1−α)·LCS_P -------------------------------
# Paper, Appendix A (values given as mem/overlap). Keys: family -> length -> domain -> α.
_LLAMA_ALPHA: dict[int, dict[str, float]] = {
    200: {"c4": 0.4, "cc": 0.4, "github": 0.4, "arxiv": 0.2, "books": 0.2},
    300: {"cc": 0.5, "c4": 0.5, "github": 0.4, "arxiv": 0.4, "books": 0.3},
    500: {"c4": 0.5, "cc": 0.5, "arxiv": 0.5, "github": 0.6, "books": 0.4},
}
# Falcon's weights depend on the length only.
_FALCON_ALPHA: dict[int, float] = {200: 0.2, 300: 0.3, 500: 0.8}
DEFAULT_ALPHA = 0.5

# Seeds and run ids are 64-bit signed integers: torch seeds its generators from an int64 and
# SQLite stores integers in 8 bytes, so a larger number fails deep inside a run (or a query)
# instead of at the option that gave it.
MAX_INT64 = 2**63 - 1
SEED_RANGE = (0, MAX_INT64)

# Our corpus/domain names that mean the same as the paper's.
_DOMAIN_ALIASES: dict[str, str] = {
    "code": "github",
    "git": "github",
    "commoncrawl": "cc",
    "book": "books",
}

AlphaFamily = Literal["llama", "falcon", "other"]


def alpha_for(
    *, domain: str | None, length: int, family: str = "llama", override: float | None = None
) -> tuple[float, str]:
    """The objective weight α for a snippet, and where it came from.

    Lookup order: an explicit ``override``; Falcon's per-length value; the Llama-family table by
    (length, domain) (used for every family but Falcon, as the paper tuned it on Llama models);
    otherwise the fallback 0.5 (equal weight), e.g. for an unknown domain or a length the paper
    did not tune.

    Returns:
        ``(alpha, source)`` where ``source`` is ``"override"``, ``"paper:falcon"``,
        ``"paper:llama"`` or ``"fallback"`` — recorded in each run's manifest.

    Raises:
        ValueError: ``override`` outside [0, 1].
    """
    if override is not None:
        if not 0.0 <= float(override) <= 1.0:
            raise ValueError(f"alpha {override} is outside [0, 1]; pass a weight between 0 and 1")
        return float(override), "override"
    if family.lower() == "falcon" and length in _FALCON_ALPHA:
        return _FALCON_ALPHA[length], "paper:falcon"
    key = (domain or "").strip().lower()
    key = _DOMAIN_ALIASES.get(key, key)
    table = _LLAMA_ALPHA.get(length, {})
    if key in table:
        return table[key], "paper:llama"
    return DEFAULT_ALPHA, "fallback"


def family_of(model_id: str) -> AlphaFamily:
    """Guess the α family from a model id (``tiiuae/falcon-7b`` → ``falcon``)."""
    lowered = model_id.lower()
    if "falcon" in lowered:
        return "falcon"
    if any(tag in lowered for tag in ("llama", "vicuna", "alpaca", "tulu", "olmo")):
        return "llama"
    return "other"
