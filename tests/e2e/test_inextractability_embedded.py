"""The rank-based extraction cost against Emory-AIMS/Inextractability's formulas on the embedded
Gemma-3-270M (docs/method.md §21): the reference's Algorithm 2 and 3, written again here from its
``core.py`` and ``utils.py`` (argsort ranks, ``exp(log_softmax)`` probabilities, a loop over
every window and every token), give the same b, worst window and greedy rate as memprobe's
vectorised version on every window of several texts."""

from __future__ import annotations

import math

import pytest
import torch

from memprobe_core.measuring.inextractability import (
    InextractabilityOptions,
    extraction_cost,
    token_log2_bounds,
    token_ranks,
    window_log2_p,
)

pytestmark = pytest.mark.slow

TEXTS = [
    "Permission is hereby granted, free of charge, to any person obtaining a copy of this "
    'software and associated documentation files (the "Software"), to deal in the Software '
    "without restriction, including without limitation the rights to use, copy, modify, merge, "
    "publish, distribute, sublicense, and/or sell copies of the Software.",
    "We hold these truths to be self-evident, that all men are created equal, that they are "
    "endowed by their Creator with certain unalienable Rights, that among these are Life, "
    "Liberty and the pursuit of Happiness. That to secure these rights, Governments are "
    "instituted among Men, deriving their just powers from the consent of the governed.",
    ", ".join(str(i) for i in range(1, 70)),
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt "
    "ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation "
    "ullamco laboris nisi ut aliquip ex ea commodo consequat. Duis aute irure dolor in "
    "reprehenderit in voluptate velit esse cillum dolore eu fugiat nulla pariatur.",
    "The quartermaster of the Vellmoor ferry kept a ledger of every crate of turnips, brass "
    "buttons and lamp oil that crossed the grey river in the winter of the long frost, and "
    "nobody ever asked him why the columns of his ledger never once added up to the same total.",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + "
    "fibonacci(n - 2)\n\n\nfor i in range(10):\n    print(i, fibonacci(i))\n\n"
    "class Stack:\n    def __init__(self):\n        self.items = []\n",
    "Call me Ishmael. Some years ago, never mind how long precisely, having little or no money "
    "in my purse, and nothing particular to interest me on shore, I thought I would sail about "
    "a little and see the watery part of the world. It is a way I have of driving off the "
    "spleen and regulating the circulation.",
]


def _reference_ranks(model, tokenizer, text):
    """utils.get_token_ranks: no special tokens, one pass, argsort rank, exp(log_softmax)."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0]
        log_probs = torch.log_softmax(logits, dim=-1)
    ranks, probs, wide = [], [], []
    exact = torch.log_softmax(logits.double(), dim=-1)
    for pos in range(1, len(ids)):
        order = torch.argsort(logits[pos - 1], descending=True)
        ranks.append(int((order == ids[pos]).nonzero(as_tuple=True)[0].item()) + 1)
        probs.append(float(torch.exp(log_probs[pos - 1, ids[pos]]).item()))
        wide.append(float(torch.exp(exact[pos - 1, ids[pos]]).item()))
    return ranks, probs, wide, ids, logits


def _reference_windows(ranks, probs, window, m):
    """core._extraction_cost_single, with every window's log2 p kept."""
    out = []
    for i in range(len(ranks) - window + 1):
        s = 0.0
        for j in range(i, i + window):
            if ranks[j] <= m:
                s -= math.log2(ranks[j])
            else:
                s += math.log2(probs[j]) if probs[j] > 0.0 else -math.inf
        out.append(s)
    return out


def _reference_greedy(ranks, window):
    """core._greedy_rate_single."""
    n, count, i = len(ranks), 0, 0
    while i <= n - window:
        fail = next((j for j in range(i, i + window) if ranks[j] != 1), None)
        if fail is None:
            count += 1
            i += 1
        else:
            i = fail + 1
    return count, n - window + 1


@pytest.fixture(scope="module")
def scored(embedded_base):
    model, tokenizer = embedded_base.torch_model, embedded_base.tokenizer
    return [_reference_ranks(model, tokenizer, text) for text in TEXTS]


@pytest.mark.parametrize(("window", "m"), [(50, 20), (8, 20), (8, 3)])
def test_b_worst_window_and_greedy_rate_equal_the_references_on_every_window(scored, window, m):
    l = window  # noqa: E741  (the paper's name)
    seen_greedy = 0
    for ranks, probs, wide, ids, logits in scored:
        assert len(ranks) >= l, "a text shorter than the window tests nothing"
        # memprobe's ranks and log-probs from the same logits.
        own_ranks, own_log_probs = token_ranks(logits[:-1], torch.tensor(ids[1:]))
        assert own_ranks == ranks
        options = InextractabilityOptions(window_tokens=l, rank_cap=m)
        windows = window_log2_p(token_log2_bounds(own_ranks, own_log_probs, m), l).tolist()
        # The reference's formulas on float64 probabilities: equal within memprobe's float32
        # logsumexp (2e-6 nats a token at most).
        reference = _reference_windows(ranks, wide, l, m)
        assert windows == pytest.approx(reference, rel=0, abs=l * 2e-6 / math.log(2))
        # On its own float32 probabilities: within float32's log-softmax error, 1e-4 nats a
        # token at most (the one difference in the numbers, docs/method.md §21).
        own_float32 = _reference_windows(ranks, probs, l, m)
        assert windows == pytest.approx(own_float32, rel=0, abs=l * 1e-4 / math.log(2))
        cost = extraction_cost(own_ranks, own_log_probs, options)
        # What the callers use: ranks capped at m, log-probs of the tokens past it only.
        capped = extraction_cost(*token_ranks(logits[:-1], torch.tensor(ids[1:]), m), options)
        assert cost is not None and capped == cost
        best = max(range(len(reference)), key=lambda i: (reference[i], -i))
        assert cost.bits == pytest.approx(-reference[best], rel=0, abs=l * 2e-6 / math.log(2))
        # The worst window: the reference's (its 1-based span less one), or one that ties it to
        # rounding (the counting text repeats itself: two windows can differ by 1e-12 bits).
        assert cost.worst_end - cost.worst_start == l
        assert reference[cost.worst_start] == pytest.approx(reference[best], rel=0, abs=1e-3)
        n_greedy, n_total = _reference_greedy(ranks, l)
        assert (cost.greedy_extractable, cost.windows) == (n_greedy, n_total)
        seen_greedy += n_greedy
    if l == 8:
        assert seen_greedy > 0, "no greedy-extractable window: the rate's check saw only zeros"
