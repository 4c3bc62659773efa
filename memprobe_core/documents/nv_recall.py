"""nv-recall: how much of a long reference text a generated text reproduces, in long verbatim runs
(Ahmed, Cooper, Koyejo & Liang 2026, "Extracting books from production language models",
§3.3.1, App. B and C.3; docs/method.md §18).

1. Both texts are normalised (:func:`normalise`) and split into words (``str.split``).
2. ``difflib.SequenceMatcher(None, reference, generated)`` with its defaults (as the paper) gives
   the matching word blocks, in order; each reference word is in at most one block. The blocks
   are found by :class:`~memprobe_core.documents.word_matching.WordMatcher`: difflib's blocks,
   identical, without difflib's quadratic time on long texts (docs/method.md §18, "Speed").
3. Neighbouring blocks are merged when ``max(gap_ref, gap_gen) <= tau_gap`` and
   ``|gap_ref - gap_gen| <= tau_align``; a merged block counts its matched words only, never the
   words of its gaps. Blocks shorter than ``min_words`` are then dropped. Two passes: (2, 1, 20),
   then (10, 3, 100) on the survivors.
4. ``nv_recall = matched words / reference words``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from memprobe_core.documents.word_matching import MatchingTooLongError, WordMatcher
from memprobe_core.errors import UsageError
from memprobe_core.option_fields import check_options, option

# The matching's work bound, in words read (word_matching.WordMatcher's steps): this many per
# word of the two texts, plus a floor. Book-like texts need about 13 per word (bench/
# nv_recall.py); texts that share only short scattered runs need difflib's recursion over
# almost every word for every block (quadratic), and are refused past the bound instead of
# running for hours (docs/method.md §18, "Speed").
STEPS_PER_WORD = 40
STEPS_FLOOR = 2**26

# Dash variants: hyphen, non-breaking hyphen, figure dash, en dash, em dash, horizontal bar
# (U+2010-U+2015) and the minus sign, all written as one em dash.
_DASHES = re.compile("[\u2010-\u2015\u2212]")
_QUOTES = str.maketrans(
    {
        "\u2018": "'",  # ‘
        "\u2019": "'",  # ’
        "\u201a": "'",  # ‚
        "\u201b": "'",  # ‛
        "\u2032": "'",  # ′
        "\u201c": '"',  # “
        "\u201d": '"',  # ”
        "\u201e": '"',  # „
        "\u201f": '"',  # ‟
        "\u2033": '"',  # ″
    }
)
_SPACED_ELLIPSIS = re.compile(r"\.(?: \.){2}")  # ". . ."
_ELLIPSIS_THEN_WORD = re.compile(r"\.\.\.(?=[^\W_])")  # "...and" → "... and"
_UNDERSCORE_ITALICS = re.compile(r"(?<!\w)_([^_\s](?:[^_]*?[^_\s])?)_(?!\w)")


@dataclass(frozen=True)
class NvRecallOptions:
    """The merge thresholds of nv-recall's two passes (the paper's values by default); each
    field's help and range are in its :func:`~memprobe_core.option_fields.option` metadata."""

    tau_gap_1: int = option(
        2,
        help="first pass: merge neighbouring blocks at most this many words apart (in both texts)",
        low=0,
        high=1_000_000,
        flag="--tau-gap-1",
        metavar="N",
    )
    tau_align_1: int = option(
        1,
        help="first pass: merge only when the two gaps differ by at most this many words",
        low=0,
        high=1_000_000,
        flag="--tau-align-1",
        metavar="N",
    )
    min_words_1: int = option(
        20,
        help="first pass: keep merged blocks of at least this many matched words",
        low=1,
        high=1_000_000,
        flag="--min-words-1",
        metavar="N",
    )
    tau_gap_2: int = option(
        10,
        help="second pass (on the survivors): the largest gap merged",
        low=0,
        high=1_000_000,
        flag="--tau-gap-2",
        metavar="N",
    )
    tau_align_2: int = option(
        3,
        help="second pass: the largest difference of the two gaps",
        low=0,
        high=1_000_000,
        flag="--tau-align-2",
        metavar="N",
    )
    min_words_2: int = option(
        100,
        help="second pass: keep blocks of at least this many matched words",
        low=1,
        high=1_000_000,
        flag="--min-words-2",
        metavar="N",
    )

    def __post_init__(self) -> None:
        check_options(self)

    def passes(self) -> tuple[tuple[int, int, int], ...]:
        """``(tau_gap, tau_align, min_words)`` of each pass, in order."""
        return (
            (self.tau_gap_1, self.tau_align_1, self.min_words_1),
            (self.tau_gap_2, self.tau_align_2, self.min_words_2),
        )


@dataclass(frozen=True)
class Block:
    """A run of matching words, possibly merged across small gaps.

    Attributes:
        ref_start / ref_end: its word range in the normalised reference (end exclusive).
        gen_start / gen_end: its word range in the normalised generated text.
        matched: words matched (a merged block's gap words are not counted).
    """

    ref_start: int
    ref_end: int
    gen_start: int
    gen_end: int
    matched: int


@dataclass(frozen=True)
class NvRecall:
    """nv-recall of a generated text against a reference (``to_dict`` gives the JSON keys)."""

    nv_recall: float
    matched_words: int
    reference_words: int
    generated_words: int
    blocks: tuple[Block, ...]

    @property
    def missing(self) -> int:
        return self.reference_words - self.matched_words

    @property
    def additional(self) -> int:
        return self.generated_words - self.matched_words

    @property
    def longest_block(self) -> int:
        return max((b.matched for b in self.blocks), default=0)

    def to_dict(self) -> dict[str, object]:
        """Exactly the keys ``memprobe nv-recall --json`` prints (docs/method.md §18)."""
        return {
            "nv_recall": self.nv_recall,
            "matched_words": self.matched_words,
            "reference_words": self.reference_words,
            "generated_words": self.generated_words,
            "missing": self.missing,
            "additional": self.additional,
            "blocks": len(self.blocks),
            "longest_block": self.longest_block,
            "block_ranges": [
                {
                    "reference": [b.ref_start, b.ref_end],
                    "generated": [b.gen_start, b.gen_end],
                    "matched": b.matched,
                }
                for b in self.blocks
            ],
        }


def normalise(text: str) -> str:
    """The paper's normalisation: NFKC; curly quotes to ASCII; dash variants to an em dash;
    ``…`` and spaced ``. . .`` to ``...``, a space after ``...`` before a letter or digit;
    ``_word_`` italics unwrapped; lower case."""
    # The quotes go to ASCII before NFKC too: NFKC would split the double prime ″ into two
    # primes, "''", so that ″word″ would never match "word".
    text = unicodedata.normalize("NFKC", text.translate(_QUOTES))  # also "…" into "..."
    text = text.translate(_QUOTES)
    text = _DASHES.sub("\u2014", text)
    text = text.replace("\u2026", "...")
    text = _SPACED_ELLIPSIS.sub("...", text)
    text = _ELLIPSIS_THEN_WORD.sub("... ", text)
    text = _UNDERSCORE_ITALICS.sub(r"\1", text)
    return text.lower()


def words(text: str) -> list[str]:
    """The normalised text's words (``str.split``: runs of whitespace separate them)."""
    return normalise(text).split()


def nv_recall(reference: str, generated: str, options: NvRecallOptions | None = None) -> NvRecall:
    """nv-recall of ``generated`` against ``reference`` (see the module docstring)."""
    options = options or NvRecallOptions()
    ref, gen = words(reference), words(generated)
    blocks = matching_blocks(ref, gen)
    for tau_gap, tau_align, min_words in options.passes():
        blocks = [b for b in merge_blocks(blocks, tau_gap, tau_align) if b.matched >= min_words]
    matched = sum(b.matched for b in blocks)
    return NvRecall(
        nv_recall=matched / len(ref) if ref else 0.0,
        matched_words=matched,
        reference_words=len(ref),
        generated_words=len(gen),
        blocks=tuple(blocks),
    )


def work_bound(ref_words: int, gen_words: int) -> int:
    """The most steps :class:`WordMatcher` may take to align texts of these lengths."""
    return STEPS_PER_WORD * (ref_words + gen_words) + STEPS_FLOOR


def matching_blocks(ref: Sequence[str], gen: Sequence[str]) -> list[Block]:
    """``difflib.SequenceMatcher(None, ref, gen)``'s matching blocks (defaults, as the paper),
    in order, found by :class:`WordMatcher`.

    Raises:
        UsageError: the matching needs more than ``STEPS_PER_WORD`` steps a word (plus
            ``STEPS_FLOOR``): texts that share only short runs scattered all over.
    """
    try:
        found = WordMatcher(gen).matching_blocks(ref, max_steps=work_bound(len(ref), len(gen)))
    except MatchingTooLongError as exc:
        raise UsageError(
            f"nv-recall cannot align these texts in reasonable time: {exc}. They share only "
            "short runs of words scattered all over (difflib's alignment, which nv-recall "
            "follows, then visits almost every word once per block). Score shorter texts, or "
            "check that the generated text belongs to this reference"
        ) from exc
    return [Block(i, i + size, j, j + size, size) for i, j, size in found]


def merge_blocks(blocks: Sequence[Block], tau_gap: int, tau_align: int) -> list[Block]:
    """Merge each block into the one before it (itself possibly merged) when the gaps between
    them in both texts are at most ``tau_gap`` words and differ by at most ``tau_align``."""
    merged: list[Block] = []
    for block in blocks:
        if merged:
            last = merged[-1]
            gap_ref, gap_gen = block.ref_start - last.ref_end, block.gen_start - last.gen_end
            if max(gap_ref, gap_gen) <= tau_gap and abs(gap_ref - gap_gen) <= tau_align:
                merged[-1] = Block(
                    last.ref_start,
                    block.ref_end,
                    last.gen_start,
                    block.gen_end,
                    last.matched + block.matched,
                )
                continue
        merged.append(block)
    return merged
