"""nv-recall's block finder (``WordMatcher``) against ``difflib.SequenceMatcher`` itself: the same
matching blocks, block for block, on random, repetitive and adversarial word lists, by each of
its two ways of finding a range's longest match (docs/method.md §18, "Speed")."""

from __future__ import annotations

import difflib

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from memprobe_core.documents import word_matching
from memprobe_core.documents.word_matching import WordMatcher


def _difflib(a: list[str], b: list[str], autojunk: bool) -> list[tuple[int, int, int]]:
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=autojunk)
    return [(m.a, m.b, m.size) for m in matcher.get_matching_blocks() if m.size]


# Few distinct words (many repeats, many ties), or many; short and long enough (>= 200 words of
# b) for difflib's popular-word rule.
_vocab = st.integers(1, 40)


@st.composite
def _pair(draw: st.DrawFn) -> tuple[list[str], list[str]]:
    vocab = draw(_vocab)
    word = st.integers(0, vocab).map(lambda k: f"w{k}")
    a = draw(st.lists(word, max_size=draw(st.sampled_from([30, 300, 600]))))
    shape = draw(st.sampled_from(["random", "edited copy", "shifted copy", "repeats"]))
    if shape == "random":
        b = draw(st.lists(word, max_size=600))
    elif shape == "edited copy":  # a copy of a with words changed, dropped and inserted
        b = list(a)
        for _ in range(draw(st.integers(0, 30))):
            at = draw(st.integers(0, len(b)))
            op = draw(st.sampled_from(["change", "drop", "insert"]))
            if op == "insert" or not b or at == len(b):
                b.insert(at, draw(word))
            elif op == "drop":
                del b[at]
            else:
                b[at] = draw(word)
    elif shape == "shifted copy":  # pieces of a in another order, joined by other words
        b = []
        for _ in range(draw(st.integers(0, 8))):
            start = draw(st.integers(0, max(0, len(a) - 1)))
            b += a[start : start + draw(st.integers(0, 120))] + draw(st.lists(word, max_size=5))
    else:  # one word repeated, then a tail: popular words, runs of equal pairs
        b = [draw(word)] * draw(st.integers(0, 400)) + draw(st.lists(word, max_size=50))
    return a, b


@pytest.mark.parametrize("way", ["chosen by cost", "direct", "suffix array"])
@given(pair=_pair(), autojunk=st.booleans())
@example(pair=(["x"] * 5 + ["y", "x"], ["x"] * 300 + ["y"]), autojunk=True)  # popular x
@example(pair=(["p", "q", "p", "q"], ["q", "p", "q", "p"]), autojunk=False)  # ties
@example(pair=([], ["a"]), autojunk=True)
def test_the_blocks_are_difflibs(pair, autojunk, way) -> None:
    a, b = pair
    with pytest.MonkeyPatch.context() as patch:
        if way == "direct":  # every range by difflib's loop (positions cut by binary search)
            patch.setattr(word_matching, "_SUFFIX_COST", float("inf"))
        elif way == "suffix array":  # every range by the suffix array
            patch.setattr(word_matching, "_SMALL_RANGE", -1)
            patch.setattr(word_matching, "_SUFFIX_COST", 0.0)
        found = WordMatcher(b, autojunk=autojunk).matching_blocks(a)
    assert found == _difflib(a, b, autojunk)


def test_one_matcher_serves_many_texts() -> None:
    b = [f"w{k % 7}" for k in range(500)]
    matcher = WordMatcher(b, autojunk=False)
    for a in (b[10:60], b[::-1][:80], ["w1", "zz", "w2"]):
        assert matcher.matching_blocks(a) == _difflib(a, b, autojunk=False)


def test_work_past_the_bound_is_refused_with_the_sizes() -> None:
    # Single shared words interleaved with others: one block per shared word, each found
    # after reading the whole rest of both lists (difflib's recursion).
    a = [w for k in range(300) for w in (f"u{k}", f"v{k}")]
    b = [w for k in range(300) for w in (f"u{k}", f"x{k}")]
    assert len(WordMatcher(b).matching_blocks(a, max_steps=10**7)) == 300
    with pytest.raises(word_matching.MatchingTooLongError, match="600 against 600 words"):
        WordMatcher(b).matching_blocks(a, max_steps=50_000)
