"""Scores of the extraction method: ROUGE-L, Mem, LCS_P, Dis and the objective (docs/method.md §2).

``rouge_l`` gives bit-identical numbers to ``rouge_score.rouge_scorer.RougeScorer(['rougeL'])``
(rouge-score 0.1.2) for the ``rouge`` tokenizer, but is much faster: rouge-score fills a
pure-Python O(m·n) LCS table, here the LCS length comes from ``rapidfuzz.distance.LCSseq``
(bit-parallel C++), tokens are stemmed through a cache, and the reference is tokenized once per
batch. Precision, recall and F are then computed with the same float operations in the same order
as rouge-score (``_score_lcs`` and ``scoring.fmeasure``), so the floats are equal, not close.

Argument order: ``rouge_l(prediction, reference)``; rouge-score's ``score`` takes
``(target, prediction)``. Recall is ``LCS / len(reference)`` (the paper's choice), precision
``LCS / len(prediction)``.
"""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from rapidfuzz.distance import Indel, LCSseq

from memprobe_core.config import (
    OUTPUT_WINDOWS,
    ROUGE_TOKENIZERS,
    ROUGE_VARIANTS,
    ScoringConfig,
)

# rouge-score's tokenize.py, verbatim: lowercase, anything but [a-z0-9] becomes a space.
_ROUGE_NON_ALNUM = re.compile(r"[^a-z0-9]+")
_ROUGE_VALID_TOKEN = re.compile(r"^[a-z0-9]+$")


# --- tokenizers -------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _porter() -> Any:
    # Imported lazily: nltk costs ~0.3 s to import and only stemming needs it. Same class and
    # default mode (NLTK_EXTENSIONS) as rouge_score.tokenizers.DefaultTokenizer.
    from nltk.stem import porter

    return porter.PorterStemmer()


@functools.lru_cache(maxsize=200_000)
def _stem(token: str) -> str:
    """rouge-score's per-token steps: Porter stem if longer than 3, then its validity check.

    Returns ``""`` for a token rouge-score would drop. Porter stemming dominates rouge-score's
    run time and texts repeat words, so the whole per-token step is cached.
    """
    stem = _porter().stem(token) if len(token) > 3 else token
    return stem if _ROUGE_VALID_TOKEN.match(stem) else ""


def _rouge_tokens(text: str, stemmer: bool) -> list[str]:
    """rouge-score's ``tokenize.tokenize``, step for step (stem only tokens longer than 3)."""
    # After the substitution only [a-z0-9] and spaces remain, so str.split() yields the same
    # pieces as rouge-score's re.split(r"\s+") minus the empty strings its final filter drops.
    tokens = _ROUGE_NON_ALNUM.sub(" ", text.lower()).split()
    if stemmer:
        # rouge-score re-checks tokens after stemming (_stem gives "" for a dropped one).
        tokens = [s for s in map(_stem, tokens) if s]
    return tokens


@functools.lru_cache(maxsize=1)
def _unicode_word_re() -> re.Pattern[str]:
    # A word is a run of letters/digits of any script *with their combining marks*: `\w` alone
    # excludes marks (categories Mn/Mc/Me), which would cut Hindi or Thai words apart. `re` has no
    # \p{M}, so the mark class is built once from unicodedata (~50 ms, on first use only).
    # Marks live only in planes 0, 1 and 14 (variation selectors); planes 2-3 are ideographs.
    ranges: list[str] = []
    start = prev = -2
    for cp in itertools.chain(range(0x20000), range(0xE0000, 0xE1000)):
        if unicodedata.category(chr(cp))[0] == "M":
            if cp != prev + 1:
                if start >= 0:
                    ranges.append(_char_range(start, prev))
                start = cp
            prev = cp
    if start >= 0:
        ranges.append(_char_range(start, prev))
    marks = "".join(ranges)
    # [^\W_]: word characters without "_" (rouge treats "_" as a separator; so do we).
    return re.compile(rf"(?:[^\W_]|[{marks}])+")


def _char_range(lo: int, hi: int) -> str:
    return re.escape(chr(lo)) if lo == hi else f"{re.escape(chr(lo))}-{re.escape(chr(hi))}"


def _unicode_tokens(text: str, stemmer: bool) -> list[str]:
    """Lowercased words of any script; Porter-stems ASCII tokens longer than 3 like ``rouge``."""
    # NFC first so "e" + U+0301 and "é" are one token; lowercase as rouge-score does (str.lower).
    tokens = _unicode_word_re().findall(unicodedata.normalize("NFC", text.lower()))
    if stemmer:
        # The Porter stemmer is for English; non-ASCII words are left as they are. ASCII words of
        # other languages are still stemmed (harmless: both sides get the same treatment).
        tokens = [(_stem(t) or t) if t.isascii() else t for t in tokens]
    return tokens


_TOKENIZERS: dict[str, Callable[[str, bool], list[str]]] = {
    "rouge": _rouge_tokens,
    "unicode": _unicode_tokens,
}


def _check_options(variant: str, stemmer: bool, tokenizer: str) -> None:
    if variant not in ROUGE_VARIANTS:
        raise ValueError(f"variant {variant!r} is unknown; use one of {ROUGE_VARIANTS}")
    if not isinstance(stemmer, bool):
        raise ValueError(f"stemmer must be True or False, got {stemmer!r}")
    if tokenizer not in ROUGE_TOKENIZERS:
        raise ValueError(f"tokenizer {tokenizer!r} is unknown; use one of {ROUGE_TOKENIZERS}")


def rouge_tokens(text: str, *, stemmer: bool = True, tokenizer: str = "rouge") -> list[str]:
    """The tokens ROUGE-L compares.

    Args:
        text: any text.
        stemmer: Porter-stem tokens longer than 3 characters (ASCII tokens only for ``unicode``).
        tokenizer: ``rouge`` (rouge-score's; drops every non-ASCII character, "Café 東京" gives
            ``caf``) or ``unicode`` (words of any script: ``café``, ``東京``).

    Raises:
        ValueError: an unknown ``tokenizer`` or a non-bool ``stemmer``.
    """
    _check_options("recall", stemmer, tokenizer)
    return _TOKENIZERS[tokenizer](text, stemmer)


# --- ROUGE-L ----------------------------------------------------------------------------------


class _Reference:
    """A tokenized reference, ready to be compared with many predictions."""

    def __init__(self, tokens: list[str]) -> None:
        self.n = len(tokens)
        # Tokens become small ints: rapidfuzz then compares integers exactly (no hashing of
        # strings, so no possible hash collision).
        self.index: dict[str, int] = {}
        self.ids = [self.index.setdefault(t, len(self.index)) for t in tokens]

    def score(self, pred_tokens: list[str], variant: str) -> float:
        n_pred = len(pred_tokens)
        if not self.n or not n_pred:
            return 0.0  # rouge-score: Score(0, 0, 0) when either side has no token
        index = self.index
        # A token absent from the reference cannot be part of a common subsequence; dropping it
        # leaves the LCS unchanged and shortens the work.
        pred_ids = [index[t] for t in pred_tokens if t in index]
        lcs = LCSseq.similarity(pred_ids, self.ids) if pred_ids else 0
        # rouge-score's _score_lcs: precision, recall, then scoring.fmeasure, same operations.
        precision = lcs / n_pred
        recall = lcs / self.n
        if variant == "recall":
            return recall
        if variant == "precision":
            return precision
        if precision + recall > 0:
            return 2 * precision * recall / (precision + recall)
        return 0.0


def rouge_l(
    prediction: str,
    reference: str,
    *,
    variant: str = "recall",
    stemmer: bool = True,
    tokenizer: str = "rouge",
) -> float:
    """ROUGE-L of a prediction against a reference, equal to rouge-score's for ``rouge``.

    Args:
        prediction: the scored text (victim output, or a prompt for LCS_P).
        reference: the true text (the suffix).
        variant: ``recall`` (LCS / reference tokens; the paper's), ``precision`` (LCS /
            prediction tokens) or ``f1``.
        stemmer: Porter stemmer on (paper) or off.
        tokenizer: ``rouge`` (paper, ASCII only) or ``unicode``; see :func:`rouge_tokens`.

    Returns:
        A score in [0, 1]; 0.0 when either side has no token.

    Raises:
        ValueError: an unknown option value (the message names the option).
    """
    _check_options(variant, stemmer, tokenizer)
    tok = _TOKENIZERS[tokenizer]
    return _Reference(tok(reference, stemmer)).score(tok(prediction, stemmer), variant)


def rouge_l_batch(
    predictions: Sequence[str],
    reference: str,
    *,
    variant: str = "recall",
    stemmer: bool = True,
    tokenizer: str = "rouge",
) -> list[float]:
    """:func:`rouge_l` of many predictions against one reference (tokenized once).

    Raises:
        ValueError: an unknown option value.
    """
    _check_options(variant, stemmer, tokenizer)
    tok = _TOKENIZERS[tokenizer]
    ref = _Reference(tok(reference, stemmer))
    return [ref.score(tok(p, stemmer), variant) for p in predictions]


def rouge_l_matrix(
    predictions: Sequence[str],
    references: Sequence[str],
    *,
    columns: Sequence[Sequence[int]] | None = None,
    variant: str = "recall",
    stemmer: bool = True,
    tokenizer: str = "rouge",
) -> list[list[float]]:
    """:func:`rouge_l` of predictions against references, each text tokenized at most once.

    Args:
        predictions / references: the texts.
        columns: for each prediction, the indices of the references to score it against
            (``None``: all of them).

    Returns:
        Row ``i``: ``rouge_l(predictions[i], references[j])`` for each ``j`` of ``columns[i]``
        (all ``j`` in order without ``columns``), the same floats.

    Raises:
        ValueError: an unknown option value, or ``columns`` not one per prediction.
    """
    _check_options(variant, stemmer, tokenizer)
    if columns is not None and len(columns) != len(predictions):
        raise ValueError(
            f"{len(columns)} column lists for {len(predictions)} predictions; give one each"
        )
    tok = _TOKENIZERS[tokenizer]
    refs: dict[int, _Reference] = {}

    def ref(j: int) -> _Reference:
        if j not in refs:
            refs[j] = _Reference(tok(references[j], stemmer))
        return refs[j]

    everything = range(len(references))
    return [
        [ref(j).score(tokens, variant) for j in (everything if columns is None else columns[i])]
        for i, tokens in enumerate(tok(p, stemmer) for p in predictions)
    ]


# --- Mem, LCS_P, Dis, objective ---------------------------------------------------------------


def apply_output_window(
    output: str, n_tokens: int, window: str = "first", tokenizer: Any | None = None
) -> str:
    """Keep the first or the last ``n_tokens`` tokens of a victim output.

    The paper's reference code scores the *last* ``len(suffix)`` tokens of the output; ``first``
    (the default in :class:`~memprobe_core.config.ScoringConfig`) is the natural reading.

    Args:
        output: the victim's generated text.
        n_tokens: how many tokens to keep (usually the suffix length in victim tokens).
        window: ``first`` or ``last``.
        tokenizer: an HF-style tokenizer (``encode(text, add_special_tokens=False)`` and
            ``decode(ids, skip_special_tokens=True)``); ``None`` counts whitespace words and
            joins the kept words with single spaces (spacing does not change ROUGE-L).

    Returns:
        The output itself when it has at most ``n_tokens`` tokens, else the kept part.

    Raises:
        ValueError: an unknown ``window`` or a negative ``n_tokens``.
    """
    if window not in OUTPUT_WINDOWS:
        raise ValueError(f"window {window!r} is unknown; use one of {OUTPUT_WINDOWS}")
    if n_tokens < 0:
        raise ValueError(f"n_tokens {n_tokens} is negative; pass the number of tokens to keep")
    if tokenizer is None:
        words = output.split()
        if len(words) <= n_tokens:
            return output
        kept = words[:n_tokens] if window == "first" else words[len(words) - n_tokens :]
        return " ".join(kept)
    ids = list(tokenizer.encode(output, add_special_tokens=False))
    if len(ids) <= n_tokens:
        return output
    kept_ids = ids[:n_tokens] if window == "first" else ids[len(ids) - n_tokens :]
    return tokenizer.decode(kept_ids, skip_special_tokens=True)


def window_text(
    output: str,
    n_tokens: int,
    window: str = "first",
    *,
    tokenizer: Any | None = None,
    token_ids: Sequence[int] | None = None,
) -> tuple[str, str]:
    """The scored window of a victim output, cut from its generated ids where they are known.

    Re-tokenizing decoded text does not always give back the generated ids (merges across a
    decoded boundary, dropped special tokens), so the cut is made on ``token_ids`` when the
    backend returned them and only falls back to :func:`apply_output_window` otherwise.

    Args:
        output: the victim's generated text.
        n_tokens: tokens to keep (the suffix length in victim tokens).
        window: ``first`` or ``last``.
        tokenizer: the victim's tokenizer (decodes the kept ids; ``None``: whitespace words).
        token_ids: the generated ids, or ``None`` when the backend gave none.

    Returns:
        ``(text, source)``: the kept text and how it was cut: ``ids``, ``text`` (re-tokenized)
        or ``words`` (whitespace words, no tokenizer).

    Raises:
        ValueError: an unknown ``window`` or a negative ``n_tokens``.
    """
    if token_ids is None or tokenizer is None:
        source = "text" if tokenizer is not None else "words"
        return apply_output_window(output, n_tokens, window, tokenizer), source
    if window not in OUTPUT_WINDOWS:
        raise ValueError(f"window {window!r} is unknown; use one of {OUTPUT_WINDOWS}")
    if n_tokens < 0:
        raise ValueError(f"n_tokens {n_tokens} is negative; pass the number of tokens to keep")
    ids = list(token_ids)
    if len(ids) <= n_tokens:
        return output, "ids"
    kept = ids[:n_tokens] if window == "first" else ids[len(ids) - n_tokens :]
    return tokenizer.decode(kept, skip_special_tokens=True), "ids"


def mem(
    output: str,
    suffix: str,
    config: ScoringConfig,
    *,
    suffix_tokens: int | None = None,
    tokenizer: Any | None = None,
) -> float:
    """Mem = ROUGE-L(victim output, true suffix) under ``config``.

    Args:
        output: the victim's output.
        suffix: the true suffix.
        config: variant, stemmer, tokenizer and output window.
        suffix_tokens: when given, the output is first cut to this many tokens with
            ``config.output_window`` (see :func:`apply_output_window`).
        tokenizer: the victim's tokenizer for that cut (``None``: whitespace words).
    """
    if suffix_tokens is not None:
        output = apply_output_window(output, suffix_tokens, config.output_window, tokenizer)
    return rouge_l(
        output, suffix, variant=config.variant, stemmer=config.stemmer, tokenizer=config.tokenizer
    )


def lcs_p(prompt: str, suffix: str, config: ScoringConfig) -> float:
    """LCS_P = ROUGE-L(prompt, true suffix): how much of the suffix the prompt gives away."""
    return rouge_l(
        prompt, suffix, variant=config.variant, stemmer=config.stemmer, tokenizer=config.tokenizer
    )


def dis(initial_prompt: str, optimized_prompt: str) -> float:
    """Dis: normalized edit distance between the initial and the optimized prompt, in [0, 1].

    Exactly ``1 − Levenshtein.ratio(a, b)`` of python-Levenshtein, i.e.
    ``rapidfuzz.distance.Indel.normalized_distance``: characters inserted plus deleted
    (a substitution counts 2) divided by ``len(a) + len(b)``; 0.0 for two empty strings.
    """
    return float(Indel.normalized_distance(initial_prompt, optimized_prompt))


def objective(mem: float, lcs_p: float, alpha: float) -> float:
    """O = α·Mem − (1−α)·LCS_P: reward reproducing the suffix, penalize giving it away.

    Raises:
        ValueError: ``alpha`` outside [0, 1].
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha {alpha} is outside [0, 1]; pass a weight between 0 and 1")
    return alpha * mem - (1 - alpha) * lcs_p


@dataclass(frozen=True)
class Scores:
    """Scores of one candidate prompt: Mem of its output, LCS_P of the prompt, objective O."""

    mem: float
    lcs_p: float
    objective: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def score_candidates(
    prompts: Sequence[str],
    outputs: Sequence[str],
    suffix: str,
    *,
    config: ScoringConfig,
    alpha: float,
    tokenizer: Any | None = None,
    suffix_tokens: int | None = None,
) -> list[Scores]:
    """Score a round of candidates against one suffix (tokenized once).

    Args:
        prompts: candidate prompts.
        outputs: the victim's output for each prompt, same order.
        suffix: the true suffix.
        config: ROUGE-L options and output window.
        alpha: objective weight in [0, 1].
        tokenizer: the victim's tokenizer for the output window (``None``: whitespace words).
        suffix_tokens: suffix length in victim tokens; when given, each output is cut to it with
            ``config.output_window`` before scoring.

    Returns:
        One :class:`Scores` per candidate, same order.

    Raises:
        ValueError: ``prompts`` and ``outputs`` differ in length, or ``alpha`` is outside [0, 1].
    """
    if len(prompts) != len(outputs):
        raise ValueError(
            f"{len(prompts)} prompts but {len(outputs)} outputs; pass one output per prompt"
        )
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha {alpha} is outside [0, 1]; pass a weight between 0 and 1")
    tok = _TOKENIZERS[config.tokenizer]
    ref = _Reference(tok(suffix, config.stemmer))
    scores = []
    for prompt, output in zip(prompts, outputs):
        if suffix_tokens is not None:
            output = apply_output_window(output, suffix_tokens, config.output_window, tokenizer)
        m = ref.score(tok(output, config.stemmer), config.variant)
        p = ref.score(tok(prompt, config.stemmer), config.variant)
        scores.append(Scores(mem=m, lcs_p=p, objective=objective(m, p, alpha)))
    return scores
