"""An index over token ids that finds where an output repeats a document verbatim.

The divergence attack (Nasr et al. 2023) counts an output as extracted training data when it
holds a run of at least 50 tokens that occurs verbatim in the training set; memprobe asks the
same of the audited dataset (and an optional reference corpus). :class:`SpanIndex` is built once
from ``(doc id, token ids)`` pairs and answers, for any output,
:meth:`SpanIndex.find_spans`: every *maximal exact match* of at least ``min_tokens`` tokens
between the output and one document, as ``(doc, doc_start, output_start, tokens)``.

A match is maximal when it can be extended neither to the left nor to the right in that document
(the output's previous token differs from the document's previous one, or either side starts
there; the same at the end). One output passage found in two documents, or twice in one, is one
match per occurrence; a match never runs across two documents.

Why a suffix array, built by ``pydivsufsort`` (bindings to libdivsufsort):

- It does not depend on ``min_tokens``: one build serves any span length, where a hashed k-gram
  index would have to be rebuilt for each.
- Its memory is small and flat: the documents' tokens (int32) and one int32 suffix position per
  token, 8 bytes a token. For 10,000 snippets × 500 tokens (5 M tokens) the build measured
  1.2 s with a 49,152-token vocabulary (SmolLM2's) and 2.0 s with 262,144 (Gemma's) on this
  project's 2-core machine, about 150 MB and 250 MB at its peak (libdivsufsort sorts the
  tokens' bytes), 40 MB kept (``SpanIndex.nbytes``); one query of a 2,048-token output took
  35 ms. A Python dict of every 50-gram's positions would need several GB.
- The build is libdivsufsort's (C, linear in practice), so no hand-written suffix sorting.

The query is numpy: the sliding windows of ``min_tokens`` output tokens are binary-searched in
the suffix array all at once (about 23 steps for 5 M tokens), each window's occurrences are the
seeds, and only the seeds that cannot be extended to the left are extended to the right, so a
long match costs one extension, not one per token. Documents are joined with a separator below
every token id, which ends every extension at a document boundary and pads windows past the end.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

# Below every token id (ids are 0 or more): joins the documents, so no window or extension runs
# from one into the next, and sorts first, as the end of a suffix does in the suffix array.
SEPARATOR = -1
# An output token that can never equal a corpus token or the separator (pads output windows).
_OUTPUT_PAD = -2
# The largest token id an int32 corpus holds.
MAX_TOKEN_ID = 2**31 - 2
# A window found more often than this (a run of one repeated token in a big corpus) has only
# this many of its occurrences followed; the search says it was truncated.
MAX_OCCURRENCES_PER_WINDOW = 4096
# Elements (windows × tokens) compared per numpy step, so a long min_tokens on a long output
# does not build one huge matrix.
_CHUNK_ELEMENTS = 1 << 20
# Tokens compared per step when extending a match to the right.
_EXTEND_BLOCK = 64


@dataclass(frozen=True)
class SpanMatch:
    """One maximal verbatim match of an output in one document.

    Attributes:
        doc: the document's id.
        doc_start: where the match starts in the document (token index).
        output_start: where it starts in the output (token index).
        tokens: its length in tokens.
    """

    doc: str
    doc_start: int
    output_start: int
    tokens: int


@dataclass(frozen=True)
class SpanSearch:
    """What :meth:`SpanIndex.find_spans` found.

    Attributes:
        matches: the maximal matches, by output position, then document order, then position.
        truncated: a window occurred more than ``MAX_OCCURRENCES_PER_WINDOW`` times and only
            that many occurrences were followed (some matches may be missing).
    """

    matches: list[SpanMatch]
    truncated: bool = False


class SpanIndex:
    """A suffix array over the token ids of a list of documents (see the module docstring).

    Args:
        docs: ``(doc id, token ids)`` pairs; ids are unique, token ids from 0 to
            ``MAX_TOKEN_ID``. An empty document is allowed (it matches nothing).

    Raises:
        ValueError: a repeated doc id, or a token id out of range (naming the document).
    """

    def __init__(self, docs: Sequence[tuple[str, Sequence[int]]]) -> None:
        started = time.perf_counter()
        self.doc_ids: tuple[str, ...] = tuple(doc for doc, _ in docs)
        if len(set(self.doc_ids)) != len(self.doc_ids):
            repeated = sorted({d for d in self.doc_ids if self.doc_ids.count(d) > 1})
            raise ValueError(f"span index: doc id(s) {repeated[:5]} given more than once")
        arrays = [_doc_array(doc, ids) for doc, ids in docs]
        self.doc_lengths = np.array([len(a) for a in arrays], dtype=np.int64)
        # Each document is followed by one separator: doc k starts at sum of (length + 1) before.
        self.doc_starts = np.concatenate(([0], np.cumsum(self.doc_lengths + 1)[:-1])).astype(
            np.int64
        )
        self.text = _joined(arrays)
        self.suffixes = _suffix_array(self.text)
        self.build_seconds = time.perf_counter() - started

    @property
    def n_docs(self) -> int:
        return len(self.doc_ids)

    @property
    def n_tokens(self) -> int:
        """Document tokens indexed (separators not counted)."""
        return int(self.doc_lengths.sum())

    @property
    def nbytes(self) -> int:
        """Bytes the index keeps (tokens, suffix array, document offsets)."""
        return int(self.text.nbytes + self.suffixes.nbytes + self.doc_starts.nbytes * 2)

    def find_spans(self, output: Sequence[int], min_tokens: int) -> SpanSearch:
        """Every maximal match of at least ``min_tokens`` tokens of ``output`` in a document
        (an output id no document can hold, a negative one included, matches nothing).

        Raises:
            ValueError: ``min_tokens`` below 1.
        """
        if isinstance(min_tokens, bool) or not isinstance(min_tokens, int) or min_tokens < 1:
            raise ValueError(f"min_tokens={min_tokens!r}: give a whole number of 1 or more")
        out = np.asarray(list(output), dtype=np.int64)
        # Not the separator, which would match a document's end.
        out[(out < 0) | (out > MAX_TOKEN_ID)] = _OUTPUT_PAD
        if len(out) < min_tokens or len(self.suffixes) == 0:
            return SpanSearch([])
        windows = np.lib.stride_tricks.sliding_window_view(out, min_tokens)
        low = self._bound(windows, right=False)
        high = self._bound(windows, right=True)
        counts = high - low
        truncated = bool((counts > MAX_OCCURRENCES_PER_WINDOW).any())
        counts = np.minimum(counts, MAX_OCCURRENCES_PER_WINDOW)
        out_pos, corpus_pos = _seeds(low, counts, self.suffixes)
        keep = _left_maximal(out, self.text, out_pos, corpus_pos)
        out_pos, corpus_pos = out_pos[keep], corpus_pos[keep]
        lengths = min_tokens + self._extend(out, out_pos + min_tokens, corpus_pos + min_tokens)
        return SpanSearch(self._matches(out_pos, corpus_pos, lengths), truncated)

    # --- the query's steps ----------------------------------------------------------------------
    def _bound(self, windows: NDArray[np.int64], *, right: bool) -> NDArray[np.int64]:
        """Per window, the first suffix-array row whose first ``len(window)`` tokens are ≥ the
        window (``right``: > it): a vectorized binary search, in chunks of windows."""
        rows = max(1, _CHUNK_ELEMENTS // windows.shape[1])
        return np.concatenate(
            [
                self._bound_chunk(windows[start : start + rows], right=right)
                for start in range(0, len(windows), rows)
            ]
        )

    def _bound_chunk(self, windows: NDArray[np.int64], *, right: bool) -> NDArray[np.int64]:
        width = windows.shape[1]
        offsets = np.arange(width, dtype=np.int64)
        low = np.zeros(len(windows), dtype=np.int64)
        high = np.full(len(windows), len(self.suffixes), dtype=np.int64)
        while True:
            active = low < high
            if not active.any():
                return low
            middle = (low + high) // 2
            starts = self.suffixes[np.minimum(middle, len(self.suffixes) - 1)].astype(np.int64)
            # Past the end, "clip" reads the last element: always the separator, the padding
            # that keeps the rows' first `width` tokens in suffix-array order.
            found = np.take(self.text, starts[:, None] + offsets, mode="clip")
            order = _compare_rows(found, windows)
            go_right = order <= 0 if right else order < 0
            low = np.where(active & go_right, middle + 1, low)
            high = np.where(active & ~go_right, middle, high)

    def _extend(
        self, out: NDArray[np.int64], out_from: NDArray[np.int64], corpus_from: NDArray[np.int64]
    ) -> NDArray[np.int64]:
        """How many more tokens each match runs on, compared a block at a time for all of them
        (an extension stops at the output's end and at the document's separator)."""
        padded = np.concatenate((out, np.full(_EXTEND_BLOCK, _OUTPUT_PAD, dtype=np.int64)))
        offsets = np.arange(_EXTEND_BLOCK, dtype=np.int64)
        extra = np.zeros(len(out_from), dtype=np.int64)
        open_ = np.ones(len(out_from), dtype=bool)
        while open_.any():
            which = np.flatnonzero(open_)
            at_out = np.minimum(out_from[which] + extra[which], len(out))[:, None] + offsets
            at_corpus = (corpus_from[which] + extra[which])[:, None] + offsets
            same = np.take(padded, at_out, mode="clip") == np.take(
                self.text, at_corpus, mode="clip"
            )
            whole = same.all(axis=1)
            first_miss = np.where(whole, _EXTEND_BLOCK, np.argmin(same, axis=1))
            extra[which] += first_miss
            open_[which] = whole
        return extra

    def _matches(
        self,
        out_pos: NDArray[np.int64],
        corpus_pos: NDArray[np.int64],
        lengths: NDArray[np.int64],
    ) -> list[SpanMatch]:
        doc_index = np.searchsorted(self.doc_starts, corpus_pos, side="right") - 1
        doc_start = corpus_pos - self.doc_starts[doc_index]
        order = np.lexsort((doc_start, doc_index, out_pos))
        return [
            SpanMatch(
                doc=self.doc_ids[int(doc_index[k])],
                doc_start=int(doc_start[k]),
                output_start=int(out_pos[k]),
                tokens=int(lengths[k]),
            )
            for k in order
        ]


def _doc_array(doc: str, ids: Sequence[int]) -> NDArray[np.int32]:
    array = np.asarray(list(ids), dtype=np.int64)
    if len(array) and (array.min() < 0 or array.max() > MAX_TOKEN_ID):
        raise ValueError(
            f"span index: document {doc!r} has a token id outside 0..{MAX_TOKEN_ID} "
            f"({int(array.min())}..{int(array.max())})"
        )
    return array.astype(np.int32)


def _joined(arrays: Sequence[NDArray[np.int32]]) -> NDArray[np.int32]:
    """The documents, each followed by ``SEPARATOR``."""
    separator = np.array([SEPARATOR], dtype=np.int32)
    parts = [part for array in arrays for part in (array, separator)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)


def _suffix_array(text: NDArray[np.int32]) -> NDArray[np.signedinteger]:
    """The suffix array of ``text``: libdivsufsort's, int32 below 2**31 tokens (pydivsufsort
    sorts a wide alphabet as big-endian bytes, which keeps the token order)."""
    if len(text) == 0:
        return np.zeros(0, dtype=np.int32)
    try:
        from pydivsufsort import divsufsort
    except ImportError as exc:  # a requirement (requirements.txt); say which, not just the name
        raise ImportError(
            "the span index needs pydivsufsort (libdivsufsort's suffix arrays): "
            "pip install pydivsufsort"
        ) from exc
    return np.asarray(divsufsort(text))


def _compare_rows(found: NDArray[np.int64], wanted: NDArray[np.int64]) -> NDArray[np.int64]:
    """Per row, -1, 0 or 1 as ``found`` is lexicographically below, equal to or above ``wanted``."""
    differ = found != wanted
    first = np.argmax(differ, axis=1)
    rows = np.arange(len(found))
    sign = np.sign(found[rows, first] - wanted[rows, first])
    return np.where(differ.any(axis=1), sign, 0)


def _seeds(
    low: NDArray[np.int64], counts: NDArray[np.int64], suffixes: NDArray[np.signedinteger]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Every (output position, corpus position) where the window at that output position occurs:
    the suffix-array rows ``low[i] .. low[i] + counts[i]``, flattened."""
    out_pos = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    first_of_each = np.repeat(np.cumsum(counts) - counts, counts)
    rows = np.repeat(low, counts) + (np.arange(len(out_pos), dtype=np.int64) - first_of_each)
    return out_pos, suffixes[rows].astype(np.int64)


def _left_maximal(
    out: NDArray[np.int64],
    text: NDArray[np.int32],
    out_pos: NDArray[np.int64],
    corpus_pos: NDArray[np.int64],
) -> NDArray[np.bool_]:
    """Which seeds start a match: the output starts there, or the token before differs.

    A document's start is preceded by a separator (the first document's by the last element,
    which is one too), which differs from every output token.
    """
    before_out = np.where(out_pos > 0, out[np.maximum(out_pos - 1, 0)], _OUTPUT_PAD)
    before_corpus = text[corpus_pos - 1]
    return (out_pos == 0) | (before_out != before_corpus)
