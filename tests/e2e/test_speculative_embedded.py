"""Drafting and teacher forcing on the embedded victim: the tokens greedy decoding gives.

Real weights (Gemma-3-270M base, 262k vocabulary, sliding-window layers), demo-corpus snippets
and texts the model reproduces (a prefix followed by its own greedy answer).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from memprobe_core.attacks import AttackOptions, ModelSet, run_method
from memprobe_core.membership.options import MeasureOptions
from memprobe_core.membership.verbatim import leading_match
from memprobe_core.models.hf_speculative import DraftStats
from memprobe_core.snippets.corpus import demo_corpus
from memprobe_core.snippets.split import DataError, split

pytestmark = pytest.mark.slow

LENGTH = 48  # 16 prefix + 32 suffix tokens


@pytest.fixture(scope="module")
def victim(embedded_base):
    """The session's embedded Gemma-3-270M (tests/e2e/conftest.py)."""
    return embedded_base


def _pieces(victim, count: int):
    out = []
    for snippet in demo_corpus(domains="legal"):
        try:
            out.append(split(snippet, victim.tokenizer, LENGTH))
        except DataError:
            continue
        if len(out) == count:
            return out
    return out


def _own(victim, piece):
    """The piece with the model's own greedy answer as its suffix (text and ids)."""
    answer = victim.generate([piece.prefix], max_new_tokens=piece.suffix_tokens)[0][0]
    return replace(piece, suffix=answer.text, suffix_ids=tuple(answer.token_ids))


def test_drafted_answers_are_the_plain_greedy_answers(victim):
    pieces = _pieces(victim, 3)
    pieces += [_own(victim, p) for p in pieces[:2]]
    prefixes = [p.prefix for p in pieces]
    references = [p.suffix for p in pieces]
    budget = max(p.suffix_tokens for p in pieces)
    plain = victim.variant(speculative=False).generate(prefixes, max_new_tokens=budget)
    batched = victim.generate(prefixes, max_new_tokens=budget, references=references)
    assert batched == plain
    victim.draft_stats = DraftStats()
    one_by_one = [
        victim.generate([p.prefix], max_new_tokens=budget, references=[p.suffix])[0]
        for p in pieces[-2:]
    ]
    assert one_by_one == plain[-2:]
    # A reproduced text was verified in long runs. (A suffix of space runs drafts less: its
    # text encodes to other space-run tokens than the model wrote; the answer is the same.)
    assert victim.draft_stats.accepted >= 20


def test_verbatim_only_equals_generation(victim):
    pieces = _pieces(victim, 3)
    pieces.append(_own(victim, pieces[0]))
    options = AttackOptions(measure=MeasureOptions(signals=False, extract_k=16))
    for piece in pieces:
        result = run_method("verbatim", piece, ModelSet(victim=victim), options)
        answer = victim.generate([piece.prefix], max_new_tokens=piece.suffix_tokens)[0][0]
        expected = leading_match(answer.token_ids, piece.suffix_ids)
        assert result.verbatim["match_tokens"] == expected, piece.snippet.id
        assert result.verbatim["extractable"] == (expected >= 16)
    assert result.verbatim["extractable"]  # the reproduced text is 16-extractable
