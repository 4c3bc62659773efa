"""k-extractability and the longest verbatim span, on hand-worked cases."""

from __future__ import annotations

from memprobe_core.membership.verbatim import k_extractable, longest_common_span, verbatim_metrics
from memprobe_core.snippets.split import WhitespaceTokenizer


def test_k_extractable_needs_the_first_k_tokens_exactly():
    suffix = [5, 6, 7, 8, 9]
    assert k_extractable([5, 6, 7, 1, 1], suffix, 3) == (True, 3)
    assert k_extractable([5, 6, 1, 8, 9], suffix, 3) == (False, 3)  # third token differs
    assert k_extractable([0, 5, 6, 7], suffix, 3) == (False, 3)  # shifted by one: not a match


def test_k_extractable_uses_the_whole_suffix_when_it_is_shorter_than_k():
    assert k_extractable([1, 2, 3, 4], [1, 2], 50) == (True, 2)
    assert k_extractable([1], [1, 2], 50) == (False, 2)  # an output shorter than the suffix
    assert k_extractable([1, 2], [], 50) == (False, 0)


def test_longest_common_span_is_contiguous_not_a_subsequence():
    # Subsequence "a c e" has length 3, but no two of them are adjacent in both.
    assert longest_common_span("axcyez", "ace") == 1
    assert longest_common_span([1, 2, 3, 9, 4, 5, 6, 7], [4, 5, 6, 7, 1, 2, 3]) == 4
    assert longest_common_span("", "abc") == 0


def test_longest_common_span_does_not_skip_frequent_items():
    # difflib's autojunk would treat items that fill > 1 % of a 200+ sequence as junk.
    # Every character of this text is "popular"; the differing first characters keep difflib
    # from finding the run by extending a match at the start.
    text = "ab " * 100
    assert longest_common_span("z" + text, "y" + text) == len(text)


def test_verbatim_metrics_of_an_exact_copy_and_of_a_paraphrase():
    suffix = "the quick brown fox jumps over the lazy dog"
    exact = verbatim_metrics(suffix, suffix + " and more", WhitespaceTokenizer(), 5)
    assert exact == {
        "extract_k": 5,
        "extractable": True,
        "match_tokens": 9,
        "span_tokens": 9,
        "span_chars": len(suffix),
    }
    para = verbatim_metrics(suffix, "a quick brown fox leaps over a lazy dog", None, 50)
    # "quick brown fox" is the longest shared run; the whole suffix (9 words) is k's reach.
    assert para["extract_k"] == 9 and para["extractable"] is False
    assert para["span_tokens"] == 3
    assert para["match_tokens"] == 0  # "a" is not "the": nothing matches from the start
    assert para["span_chars"] == len(" quick brown fox ")
