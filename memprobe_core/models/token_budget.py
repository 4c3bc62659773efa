"""An answer held to the token budget it was asked for, when no tokenizer can count it.

A server may ignore ``max_tokens`` and report any ``usage`` it likes: a hostile one answered
3.7 M words counted as 512 tokens. An answer of a model without a local tokenizer (an endpoint)
is therefore cut and counted by what it holds (docs/models.md, "Token budgets"):

- **cut** to at most ``max_tokens`` whitespace words and ``BYTES_PER_TOKEN_CUT × max_tokens``
  UTF-8 bytes (at least ``MIN_CUT_BYTES``). No tokenizer's token spans two words (they split on
  whitespace before merging), and 8 bytes is twice an English token's average, so an answer of
  a server that honours ``max_tokens`` is not cut in practice; a cut answer finishes
  ``"length"``;
- **counted** as the largest of the server's figure, its words and its bytes / 4 (about a BPE
  tokenizer's count on English text), and at most ``max_tokens``.

A model with a tokenizer is counted and cut with it instead (the continuation does, see
:mod:`memprobe_core.documents.continuation`).
"""

from __future__ import annotations

import math
import re

# Bytes an answer may hold per token of its budget before it is cut (twice English's average).
BYTES_PER_TOKEN_CUT = 8
# Bytes per token of the count's estimate (about a BPE tokenizer's on English text).
BYTES_PER_TOKEN_COUNT = 4
# The byte bound of a small budget is never below this (one token may be a long run of dashes).
MIN_CUT_BYTES = 64

_WORD = re.compile(r"\S+")


def estimate_tokens(text: str) -> int:
    """Tokens ``text`` holds at least, without a tokenizer: its whitespace words, or its UTF-8
    bytes / 4, whichever is larger."""
    return max(len(text.split()), math.ceil(len(text.encode("utf-8")) / BYTES_PER_TOKEN_COUNT))


def cut_to_budget(text: str, max_tokens: int) -> tuple[str, bool]:
    """``text`` cut to at most ``max_tokens`` whitespace words and its byte bound (see the
    module docstring), and whether it was cut. Reads at most the part of ``text`` it keeps."""
    limit = max(BYTES_PER_TOKEN_CUT * max_tokens, MIN_CUT_BYTES)
    kept = text
    # A character is at least one byte: the first `limit` characters hold every byte kept.
    if len(kept) > limit or len(kept.encode("utf-8")) > limit:
        kept = kept[:limit].encode("utf-8")[:limit].decode("utf-8", "ignore")
    ends = [m.end() for _, m in zip(range(max_tokens + 1), _WORD.finditer(kept))]
    if len(ends) > max_tokens:
        kept = kept[: ends[max_tokens - 1]] if max_tokens > 0 else ""
    return kept, len(kept) < len(text)


def bounded_answer(
    text: str, reported_tokens: int | None, max_tokens: int
) -> tuple[str, int, bool]:
    """``(text, tokens, cut)``: the answer cut to its budget and its count, the larger of the
    server's ``reported_tokens`` (``None``: none) and :func:`estimate_tokens`, at most
    ``max_tokens``; a cut answer counts ``max_tokens``."""
    kept, cut = cut_to_budget(text, max_tokens)
    if cut:
        return kept, max_tokens, True
    counted = max(reported_tokens or 0, estimate_tokens(kept))
    return kept, min(counted, max_tokens), False
