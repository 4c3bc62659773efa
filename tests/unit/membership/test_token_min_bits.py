"""Each token's minimum b over the windows of l tokens covering it (docs/method.md §21, the
paper's per-token view) against a window-by-window loop, and from a document's stored factors."""

from __future__ import annotations

import math
import random

import pytest

from memprobe_core.documents.rank_cost import document_rank_cost, document_token_bits
from memprobe_core.measuring.inextractability import InextractabilityOptions, token_min_bits
from tests.helpers.tiny_models import tiny_hf_generator
from tests.unit.documents.test_rank_cost import TEXT as DOCUMENT


@pytest.fixture(scope="module")
def victim():
    return tiny_hf_generator(seed=3, adds_bos=True)


def brute_min_bits(factors: list[float | None], l: int) -> list[float]:  # noqa: E741
    """Each token's smallest b over every window of l tokens holding it, window by window."""
    values = [-math.inf if f is None else f for f in factors]
    window = min(l, len(values))
    best = [math.inf] * len(values)
    for start in range(len(values) - window + 1):
        bits = -sum(values[start : start + window])
        for token in range(start, start + window):
            best[token] = min(best[token], bits)
    return best


@pytest.mark.parametrize("l", [1, 2, 5, 12, 40])  # 40: longer than the text
def test_each_tokens_min_bits_is_the_cheapest_window_covering_it(l):  # noqa: E741
    rng = random.Random(l)
    factors: list[float | None] = [-rng.choice([0.0, 1.0, 1.58, 7.3, 21.0]) for _ in range(30)]
    factors[17] = None  # a probability 0: its windows cost ∞, the others do not
    assert token_min_bits(factors, l) == pytest.approx(brute_min_bits(factors, l))


def test_min_bits_of_nothing_is_nothing():
    assert token_min_bits([], 50) == []


def test_a_documents_stored_factors_give_each_tokens_min_bits(victim):
    ids = victim.tokenizer.encode(DOCUMENT, add_special_tokens=False)
    options = InextractabilityOptions(window_tokens=8, rank_cap=3)
    record = document_rank_cost(victim.torch_model, ids, [], options=options)
    assert (record["window_tokens"], record["rank_cap"]) == (8, 3)
    per_token = document_token_bits(record, len(ids))
    assert per_token is not None and len(per_token) == len(ids)
    assert per_token[0] == math.inf  # nothing before it: not ranked
    assert per_token[1:] == pytest.approx(brute_min_bits(record["token_log2_bounds"], 8))
    # The document's b is its cheapest window: the smallest of the tokens' minima.
    assert min(per_token) == pytest.approx(record["extraction_bits"], abs=1e-3)


def test_a_record_from_before_the_factors_has_no_per_token_view():
    assert document_token_bits({"extraction_bits": 12.0}, 10) is None
