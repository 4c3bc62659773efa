"""A whole document's rank-based extraction cost (docs/method.md §21): one pass over the whole
text when it fits, a stated sliding context when it does not, on a tiny random model."""

from __future__ import annotations

import math

import pytest
import torch

from memprobe_core.documents.rank_cost import document_rank_cost, passes
from memprobe_core.measuring.inextractability import InextractabilityOptions
from tests.helpers.tiny_models import tiny_hf_generator

TEXT = " ".join(["the licence of this work is granted to any person who asks for a copy"] * 12)


@pytest.fixture(scope="module")
def tiny():
    return tiny_hf_generator(seed=7, adds_bos=True)


def expected(model, rows, l, m):  # noqa: E741  (the paper's names)
    """b, greedy rate and worst window from full forwards of ``rows`` (row, first row index
    ranked): rank by counting higher logits, float64 log-softmax, every window summed."""
    factors, ranks = [], []
    for row, first in rows:
        with torch.inference_mode():
            logits = model(input_ids=torch.tensor([row])).logits[0].double()
        for j in range(first, len(row)):
            target = logits[j - 1, row[j]]
            rank = int((logits[j - 1] > target).sum()) + 1
            log_p = float(target - logits[j - 1].logsumexp(-1))
            factors.append(-math.log2(rank) if rank <= m else log_p / math.log(2))
            ranks.append(rank)
    sums = [sum(factors[i : i + l]) for i in range(len(factors) - l + 1)]
    best = max(range(len(sums)), key=lambda i: (sums[i], -i))
    greedy = sum(all(r == 1 for r in ranks[i : i + l]) for i in range(len(sums)))
    return -sums[best], greedy / len(sums), best, len(ranks)


def test_a_document_that_fits_is_one_pass_every_token_ranked_after_the_front(tiny):
    ids = tiny.tokenizer.encode(TEXT, add_special_tokens=False)
    front = [tiny.tokenizer.bos_token_id]
    found = document_rank_cost(tiny.torch_model, ids, front)
    bits, rate, worst, n = expected(tiny.torch_model, [([*front, *ids], 1)], 50, 20)
    assert found["passes"] == 1 and found["ranked_tokens"] == n == len(ids)
    assert found["extraction_bits"] == pytest.approx(bits, rel=1e-6)
    assert found["greedy_extractable_rate"] == pytest.approx(rate)
    assert found["extraction_worst_window"] == [worst, worst + 50]


def test_without_a_front_token_the_first_token_is_not_ranked(tiny):
    ids = tiny.tokenizer.encode(TEXT, add_special_tokens=False)
    found = document_rank_cost(tiny.torch_model, ids, [], options=InextractabilityOptions(8, 3))
    bits, _, worst, n = expected(tiny.torch_model, [(ids, 1)], 8, 3)
    assert found["ranked_tokens"] == n == len(ids) - 1 and found["first_ranked_token"] == 1
    assert found["extraction_bits"] == pytest.approx(bits, rel=1e-6)
    assert found["extraction_worst_window"] == [worst + 1, worst + 9]  # document indices


def test_a_longer_document_slides_its_context_and_each_token_keeps_half_of_it(tiny):
    ids = tiny.tokenizer.encode(TEXT, add_special_tokens=False)
    front = [tiny.tokenizer.bos_token_id]
    context = 41
    planned = passes(len(ids), len(front), context)
    assert len(planned) > 2
    scored = [i for _, first, end in planned for i in range(first, end)]
    assert scored == list(range(len(ids)))  # every token ranked once, in order
    for start, first, end in planned:
        assert end - start <= context - len(front)
        assert start == 0 or first - start >= (context - len(front)) // 2
    found = document_rank_cost(tiny.torch_model, ids, front, context=context)
    rows = [([*front, *ids[s:e]], len(front) + f - s if f else 1) for s, f, e in planned]
    bits, rate, _, n = expected(tiny.torch_model, rows, 50, 20)
    assert found["passes"] == len(planned) and found["ranked_tokens"] == n == len(ids)
    assert found["extraction_bits"] == pytest.approx(bits, rel=1e-6)
    assert found["greedy_extractable_rate"] == pytest.approx(rate)
