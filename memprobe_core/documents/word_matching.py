"""difflib's matching blocks of two word lists, found without difflib's quadratic inner loop
(docs/method.md §18, "Speed").

:meth:`WordMatcher.matching_blocks` returns exactly ``difflib.SequenceMatcher(None, a, b,
autojunk=...).get_matching_blocks()`` (less its closing ``(len(a), len(b), 0)``): the same
recursion (the longest match of the whole ranges, then the longest on either side of it), the
same "popular word" rule (with ``autojunk``, a word of ``b`` more frequent than 1 % of ``b``,
when ``b`` has at least 200 words, is never the core of a match), the same tie rule (of the
longest matches, the one that starts first in ``a``, then first in ``b``), the same extension
over equal popular words at both ends, and the same joining of adjacent blocks.
``tests/unit/documents/test_word_matching.py`` checks the identity against difflib on random,
repetitive and adversarial word lists.

Why not difflib itself: its ``find_longest_match`` visits, for every word of a range of ``a``,
every position of that word in ``b`` below the range's end, so a range costs the number of
equal word pairs, which grows with the square of the texts (a 400,000-word pair took 178 s).
Here each range's longest match is found by whichever of two exact methods costs less:

- **direct**: difflib's own loop, but each word's positions in ``b`` are cut to the range by a
  binary search, so the cost is the range's equal pairs only (small ranges, rare words);
- **suffix array**: the two ranges are joined (``a`` range, a separator, ``b`` range, an end
  mark) and sorted by libdivsufsort (``pydivsufsort``, already the span index's suffix array)
  with its LCP array (Kasai); the longest match is the largest LCP between neighbouring suffixes
  of different sides, and the tie rule is the smallest ``a`` start, then ``b`` start, among
  the suffixes that share that many words. Cost: linear in the two ranges.

No library gives difflib's blocks faster: ``cydifflib``/``cdifflib`` port the same pair loop
to C (still quadratic), and edit-distance libraries (rapidfuzz's opcodes) give other blocks.
The recursion is difflib's, so inputs whose matches are all tiny and scattered (two word lists
interleaving single shared words) still need many ranges; ``max_steps`` bounds that work.
"""

from __future__ import annotations

import ctypes
import functools
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

# A range pair whose product of lengths is at most this is always matched directly.
_SMALL_RANGE = 4096
# Rough relative costs for choosing a range's way: one equal word pair and one word of the direct
# loop (Python) against one word of a suffix-array range (C sort, numpy); a wrong choice only
# costs time, never a different block.
_PAIR_COST = 1.0
_ROW_COST = 1.0
_SUFFIX_COST = 0.15


@functools.cache
def _openmp() -> ctypes.CDLL | None:
    """The OpenMP runtime bundled with pydivsufsort's libdivsufsort, if this build has one."""
    import pydivsufsort

    folder = Path(pydivsufsort.__file__).resolve().parent.parent / "pydivsufsort.libs"
    for path in sorted(folder.glob("libgomp*")):
        try:
            return ctypes.CDLL(str(path))  # the copy already loaded: the same handle
        except OSError:
            return None
    return None


@contextmanager
def _one_thread() -> Iterator[None]:
    """libdivsufsort sorts with OpenMP threads; on a busy 2-core machine starting them costs
    about 20 ms a call (a 1,000-word sort: 28 ms with two threads, 0.6 ms with one), and the
    recursion sorts hundreds of ranges. One thread for this thread while we sort, as it was
    after (the setting is per calling thread, so the span index elsewhere keeps its threads)."""
    omp = _openmp()
    if omp is None:
        yield
        return
    before = omp.omp_get_max_threads()
    omp.omp_set_num_threads(1)
    try:
        yield
    finally:
        omp.omp_set_num_threads(before)


class MatchingTooLongError(ValueError):
    """The matching needed more than ``max_steps`` steps (see :class:`WordMatcher`)."""


class WordMatcher:
    """difflib's matching blocks of word lists against one indexed ``b`` (see the module
    docstring). ``b`` is indexed once; :meth:`matching_blocks` may be called for many ``a``.

    ``max_steps`` (``None``: no bound) bounds the work of one :meth:`matching_blocks` call, in
    words read (a suffix-array range counts its words, a direct range its pairs and rows); past
    it, :class:`MatchingTooLongError`.
    """

    def __init__(self, b: Sequence[str], *, autojunk: bool = True) -> None:
        self.b = list(b)
        lb = len(self.b)
        positions: dict[str, list[int]] = {}
        for j, word in enumerate(self.b):
            positions.setdefault(word, []).append(j)
        popular: set[str] = set()
        if autojunk and lb >= 200:  # difflib's SequenceMatcher.__chain_b
            most = lb // 100 + 1
            popular = {word for word, found in positions.items() if len(found) > most}
        # Word ids: 0.. for the words of b a match may start on; popular words are left out.
        self.ids: dict[str, int] = {}
        self.b2j: list[list[int]] = []
        for word, found in positions.items():
            if word not in popular:
                self.ids[word] = len(self.b2j)
                self.b2j.append(found)
        vocab = len(self.b2j)
        # Four ids above the vocabulary: a word of a that b cannot match (absent or popular),
        # a popular word of b, the separator after the a range, the end mark after the b range.
        self.a_other, self.b_other = vocab, vocab + 1
        self.separator, self.end = vocab + 2, vocab + 3
        self.dtype = np.uint16 if vocab + 4 <= np.iinfo(np.uint16).max else np.uint32
        self.b_ids = np.array([self.ids.get(w, self.b_other) for w in self.b], dtype=self.dtype)
        # Each (word id, position) of b as one sortable key, to count a range's pairs at once.
        self.width = lb + 1
        keys = [i * self.width + j for i, found in enumerate(self.b2j) for j in found]
        self.keys = np.array(keys, dtype=np.int64)

    def matching_blocks(
        self, a: Sequence[str], max_steps: int | None = None
    ) -> list[tuple[int, int, int]]:
        """``(i, j, size)`` of each block, ``a[i:i+size] == b[j:j+size]``, in order (difflib's
        ``get_matching_blocks()`` without its closing zero-size block)."""
        run = _Run(self, list(a), max_steps)
        found: list[tuple[int, int, int]] = []
        queue = [(0, len(run.a), 0, len(self.b))]
        with _one_thread():
            while queue:  # difflib's SequenceMatcher.get_matching_blocks
                alo, ahi, blo, bhi = queue.pop()
                i, j, k = run.longest(alo, ahi, blo, bhi)
                if k:
                    found.append((i, j, k))
                    if alo < i and blo < j:
                        queue.append((alo, i, blo, j))
                    if i + k < ahi and j + k < bhi:
                        queue.append((i + k, ahi, j + k, bhi))
        found.sort()
        joined: list[tuple[int, int, int]] = []
        for i, j, k in found:
            if joined and joined[-1][0] + joined[-1][2] == i and joined[-1][1] + joined[-1][2] == j:
                joined[-1] = (joined[-1][0], joined[-1][1], joined[-1][2] + k)
            else:
                joined.append((i, j, k))
        return joined


class _Run:
    """One ``a`` against the matcher's ``b``: the ids of ``a`` and the work done so far."""

    def __init__(self, matcher: WordMatcher, a: list[str], max_steps: int | None) -> None:
        self.m, self.a, self.max_steps, self.steps = matcher, a, max_steps, 0
        other = matcher.a_other
        self.a_list = [matcher.ids.get(w, other) for w in a]
        self.a_ids = np.array(self.a_list, dtype=matcher.dtype)
        # An absent/popular word has no keys: give it an id whose keys are past every key.
        self.a_keys = np.array(self.a_list, dtype=np.int64) * matcher.width

    def charge(self, steps: int) -> None:
        self.steps += steps
        if self.max_steps is not None and self.steps > self.max_steps:
            raise MatchingTooLongError(
                f"matching needed more than {self.max_steps:,} steps "
                f"({len(self.a):,} against {len(self.m.b):,} words)"
            )

    def longest(self, alo: int, ahi: int, blo: int, bhi: int) -> tuple[int, int, int]:
        """difflib's ``find_longest_match(alo, ahi, blo, bhi)``."""
        na, nb = ahi - alo, bhi - blo
        if na * nb <= _SMALL_RANGE:
            self.charge(na + nb)
            i, j, k = self.direct(alo, ahi, blo, bhi)
        else:
            keys = self.a_keys[alo:ahi]
            pairs = int(
                np.sum(
                    np.searchsorted(self.m.keys, keys + bhi)
                    - np.searchsorted(self.m.keys, keys + blo)
                )
            )
            direct = pairs * _PAIR_COST + na * _ROW_COST
            suffix = (na + nb) * _SUFFIX_COST
            if direct <= suffix:
                self.charge(pairs + na)
                i, j, k = self.direct(alo, ahi, blo, bhi)
            else:
                self.charge(na + nb)
                i, j, k = self.suffix_array(alo, ahi, blo, bhi)
        # Extend by equal words at each end (popular ones: the core never holds them); b has
        # no junk (isjunk is None), so difflib's two junk loops add nothing.
        a, b = self.a, self.m.b
        while i > alo and j > blo and a[i - 1] == b[j - 1]:
            i, j, k = i - 1, j - 1, k + 1
        while i + k < ahi and j + k < bhi and a[i + k] == b[j + k]:
            k += 1
        return i, j, k

    def direct(self, alo: int, ahi: int, blo: int, bhi: int) -> tuple[int, int, int]:
        """difflib's loop over ``a[alo:ahi]``, each word's positions cut to ``[blo, bhi)``."""
        b2j, a_list, other = self.m.b2j, self.a_list, self.m.a_other
        besti, bestj, bestsize = alo, blo, 0
        j2len: dict[int, int] = {}
        for i in range(alo, ahi):
            word = a_list[i]
            newj2len: dict[int, int] = {}
            if word != other:
                found = b2j[word]
                start = bisect_left(found, blo)
                stop = bisect_left(found, bhi, start)
                j2lenget = j2len.get
                for j in found[start:stop]:
                    k = newj2len[j] = j2lenget(j - 1, 0) + 1
                    if k > bestsize:
                        besti, bestj, bestsize = i - k + 1, j - k + 1, k
            j2len = newj2len
        return besti, bestj, bestsize

    def suffix_array(self, alo: int, ahi: int, blo: int, bhi: int) -> tuple[int, int, int]:
        """The longest match of the two ranges from a suffix array of them joined."""
        from pydivsufsort import divsufsort, kasai

        m, na = self.m, ahi - alo
        text = np.concatenate(
            [
                self.a_ids[alo:ahi],
                np.array([m.separator], dtype=m.dtype),
                m.b_ids[blo:bhi],
                np.array([m.end], dtype=m.dtype),
            ]
        )
        sa = np.asarray(divsufsort(text), dtype=np.int64)  # (n,)
        lcp = np.asarray(kasai(text, sa), dtype=np.int64)  # (n,): lcp[r] of rows r and r + 1
        in_a = sa < na
        in_b = sa > na
        # Neighbouring rows of different sides; their largest LCP is the longest match. A
        # common prefix never holds an a-only or b-only id, the separator or the end mark.
        cross = (in_a[:-1] & in_b[1:]) | (in_b[:-1] & in_a[1:])
        if not cross.any():
            return alo, blo, 0
        size = int(lcp[:-1][cross].max())
        if size == 0:
            return alo, blo, 0
        # Rows sharing `size` words form runs of LCP >= size; a run with rows of both sides is
        # a set of longest matches. difflib keeps the first start in a, then in b.
        starts = np.flatnonzero(np.concatenate([[True], lcp[:-1] < size]))  # (groups,)
        big = np.iinfo(np.int64).max
        a_start = np.minimum.reduceat(np.where(in_a, sa, big), starts)
        b_start = np.minimum.reduceat(np.where(in_b, sa - na - 1, big), starts)
        both = (a_start != big) & (b_start != big)
        group = np.flatnonzero(both)[np.argmin(a_start[both])]
        return alo + int(a_start[group]), blo + int(b_start[group]), size
