"""Verbatim-extraction metrics of one output against the true suffix (beside ROUGE-L's Mem).

Mem (ROUGE-L) rewards a common *subsequence*: an output that keeps the suffix's words in order with
others between them scores high without reproducing a single phrase. Privacy auditors and the
memorization literature also ask whether the text came out *verbatim*:

- **k-extractability** (Carlini et al. 2023, "Quantifying Memorization Across Neural Language
  Models"): the output's first ``k`` tokens equal the suffix's first ``k`` tokens exactly
  (k = 50 by default). When the suffix is shorter than ``k`` the whole suffix must come out, and
  ``extract_k`` records the k actually used.
- **greedy match length** (``match_tokens``): how many of the suffix's tokens the output
  reproduces from its start (k-extractable is ``match_tokens >= k``); the ``verbatim`` method
  measures it without generating (docs/method.md §9).
- **longest verbatim span**: the longest contiguous run shared by output and suffix, in tokens
  (of the victim's tokenizer) and in characters.

Both texts are tokenized the same way here (the output standalone, the suffix standalone), so a
word cut differently by the prefix/suffix boundary cannot make an exact copy look different.
"""

from __future__ import annotations

from collections.abc import Sequence
from difflib import SequenceMatcher
from typing import Any

from memprobe_core.models.base import TextTokenizer
from memprobe_core.records import VerbatimRecord
from memprobe_core.snippets.split import WhitespaceTokenizer


def longest_common_span(a: Sequence[Any], b: Sequence[Any]) -> int:
    """Length of the longest contiguous run of items shared by ``a`` and ``b``.

    ``difflib.SequenceMatcher.find_longest_match`` is exactly the longest common substring when
    its junk heuristics are off (``autojunk=False``; it would otherwise ignore items frequent in
    ``b``, e.g. spaces). Quadratic at worst; outputs are a few hundred tokens.
    """
    if not a or not b:
        return 0
    matcher = SequenceMatcher(None, a, b, autojunk=False)
    return matcher.find_longest_match(0, len(a), 0, len(b)).size


def leading_match(output_ids: Sequence[int], suffix_ids: Sequence[int]) -> int:
    """How many leading tokens of ``suffix_ids`` the output starts with."""
    n = 0
    for a, b in zip(output_ids, suffix_ids):
        if a != b:
            break
        n += 1
    return n


def k_extractable(output_ids: Sequence[int], suffix_ids: Sequence[int], k: int) -> tuple[bool, int]:
    """Whether the output starts with the suffix's first ``k`` tokens, and the k used.

    Returns:
        ``(extractable, k_used)`` with ``k_used = min(k, len(suffix_ids))``; an empty suffix is
        never extractable.
    """
    k_used = min(k, len(suffix_ids))
    if k_used == 0:
        return False, 0
    return list(output_ids[:k_used]) == list(suffix_ids[:k_used]), k_used


def verbatim_metrics(
    suffix: str, output: str, tokenizer: TextTokenizer | None, k: int
) -> VerbatimRecord:
    """The verbatim-extraction metrics of ``output`` against ``suffix``.

    Args:
        suffix / output: the true suffix and the victim's output (as scored for Mem).
        tokenizer: the victim's tokenizer (``None``: whitespace words, for black-box victims).
        k: k of k-extractability.

    Returns:
        ``{"extract_k", "extractable", "match_tokens", "span_tokens", "span_chars"}`` (the keys of
        ``memprobe_core.store.frames.VERBATIM_COLUMNS``).
    """
    tok: TextTokenizer = tokenizer if tokenizer is not None else WhitespaceTokenizer()
    suffix_ids = list(tok.encode(suffix, add_special_tokens=False))
    output_ids = list(tok.encode(output, add_special_tokens=False))
    extractable, k_used = k_extractable(output_ids, suffix_ids, k)
    return {
        "extract_k": k_used,
        "extractable": extractable,
        "match_tokens": leading_match(output_ids, suffix_ids),
        "span_tokens": longest_common_span(output_ids, suffix_ids),
        "span_chars": longest_common_span(output, suffix),
    }
