"""The token-id span index: its maximal matches are a brute-force search's, on many random
corpora, and never cross a document, fall under the minimum or fail to be maximal."""

from __future__ import annotations

import numpy as np
import pytest

from memprobe_core.snippets import span_index
from memprobe_core.snippets.span_index import SpanIndex, SpanMatch


def brute_force(docs: list[tuple[str, list[int]]], output: list[int], min_tokens: int) -> set:
    """Every maximal match of at least ``min_tokens`` tokens, by trying each pair of starts."""
    found = set()
    for doc, ids in docs:
        for i in range(len(output)):
            for p in range(len(ids)):
                if output[i] != ids[p] or (i > 0 and p > 0 and output[i - 1] == ids[p - 1]):
                    continue
                k = 0
                while i + k < len(output) and p + k < len(ids) and output[i + k] == ids[p + k]:
                    k += 1
                if k >= min_tokens:
                    found.add(SpanMatch(doc, p, i, k))
    return found


def random_case(seed: int) -> tuple[list[tuple[str, list[int]]], list[int], int]:
    # A small alphabet, so that matches (and repeats inside a document) are frequent.
    rng = np.random.default_rng(seed)
    alphabet = int(rng.integers(2, 6))
    docs = [
        (f"d{j}", rng.integers(0, alphabet, int(rng.integers(0, 30))).tolist())
        for j in range(int(rng.integers(1, 5)))
    ]
    output = rng.integers(0, alphabet, int(rng.integers(0, 40))).tolist()
    return docs, output, int(rng.integers(1, 5))


@pytest.mark.parametrize("seed", range(200))
def test_the_matches_are_the_brute_force_ones(seed: int) -> None:
    docs, output, min_tokens = random_case(seed)
    found = SpanIndex(docs).find_spans(output, min_tokens)
    assert not found.truncated
    assert len(found.matches) == len(set(found.matches))  # each match once
    assert set(found.matches) == brute_force(docs, output, min_tokens)


def test_matches_are_maximal_long_enough_and_inside_one_document() -> None:
    docs = dict(random_case(7)[0])
    rng = np.random.default_rng(1)
    for trial in range(50):
        output = rng.integers(0, 3, 60).tolist()
        min_tokens = 1 + trial % 4
        for m in SpanIndex(list(docs.items())).find_spans(output, min_tokens).matches:
            doc = docs[m.doc]
            assert m.tokens >= min_tokens
            assert m.doc_start + m.tokens <= len(doc)  # never past its document's end
            window = output[m.output_start : m.output_start + m.tokens]
            assert doc[m.doc_start : m.doc_start + m.tokens] == window
            left_open = m.output_start > 0 and m.doc_start > 0
            assert not (left_open and output[m.output_start - 1] == doc[m.doc_start - 1])
            right_end = m.output_start + m.tokens, m.doc_start + m.tokens
            right_open = right_end[0] < len(output) and right_end[1] < len(doc)
            assert not (right_open and output[right_end[0]] == doc[right_end[1]])


def test_a_passage_across_two_documents_is_two_matches() -> None:
    index = SpanIndex([("a", [1, 2, 3, 4]), ("b", [5, 6, 7, 8])])
    found = index.find_spans([2, 3, 4, 5, 6, 7], 2).matches
    assert found == [SpanMatch("a", 1, 0, 3), SpanMatch("b", 0, 3, 3)]
    # Together they are 6 tokens, each part 3: a minimum of 4 finds nothing.
    assert index.find_spans([2, 3, 4, 5, 6, 7], 4).matches == []


def test_a_passage_in_two_documents_is_found_in_both_with_positions() -> None:
    passage = list(range(100, 160))
    index = SpanIndex([("x", [1, 2, *passage, 3]), ("y", passage), ("z", [9] * 10)])
    output = [7, 7, *passage, 8]
    found = index.find_spans(output, 50).matches
    assert found == [SpanMatch("x", 2, 2, 60), SpanMatch("y", 0, 2, 60)]


def test_the_minimum_is_respected_and_checked() -> None:
    index = SpanIndex([("a", [1, 2, 3, 4, 5])])
    assert index.find_spans([1, 2, 3, 9], 3).matches == [SpanMatch("a", 0, 0, 3)]
    assert index.find_spans([1, 2, 3, 9], 4).matches == []
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="min_tokens"):
            index.find_spans([1, 2], bad)  # type: ignore[arg-type]


def test_empty_inputs_and_unknown_output_ids_match_nothing() -> None:
    assert SpanIndex([]).find_spans([1, 2, 3], 1).matches == []
    assert SpanIndex([("empty", [])]).find_spans([1], 1).matches == []
    index = SpanIndex([("a", [0, 1, 2])])
    assert index.find_spans([], 1).matches == []
    assert index.find_spans([-3, -1, 99], 1).matches == []  # ids no document holds
    assert (index.n_docs, index.n_tokens) == (1, 3)


def test_bad_documents_are_refused_naming_them() -> None:
    with pytest.raises(ValueError, match="'a'.*more than once"):
        SpanIndex([("a", [1]), ("a", [2])])
    with pytest.raises(ValueError, match="document 'neg' has a token id outside"):
        SpanIndex([("neg", [1, -1])])


def test_large_token_ids_keep_their_order() -> None:
    # Ids past 16 bits are sorted as 4-byte words by pydivsufsort: still found exactly.
    big = [70_000, 5, 262_143, 70_000, 5, 1]
    index = SpanIndex([("big", big)])
    assert index.find_spans([70_000, 5, 1], 2).matches == [
        SpanMatch("big", 0, 0, 2),
        SpanMatch("big", 3, 0, 3),
    ]


def test_a_window_found_too_often_is_followed_only_so_far(monkeypatch) -> None:
    monkeypatch.setattr(span_index, "MAX_OCCURRENCES_PER_WINDOW", 3)
    index = SpanIndex([(f"d{i}", [4, 4, 4]) for i in range(5)])
    found = index.find_spans([4, 4, 4], 3)
    assert found.truncated and len(found.matches) == 3
    assert not SpanIndex([("one", [4, 4, 4])]).find_spans([4, 4, 4], 3).truncated
