"""The rank-based extraction cost (docs/method.md §21) on hand-computed cases."""

from __future__ import annotations

import math

import pytest
import torch

from memprobe_core.errors import OptionError
from memprobe_core.measuring.inextractability import (
    InextractabilityOptions,
    extraction_cost,
    greedy_extractable_windows,
    token_min_bits,
    token_ranks,
)

LN2 = math.log(2)


def test_a_window_multiplies_one_over_rank_within_the_cap_and_the_probability_past_it():
    # ranks 1, 2, 4 within m = 3? 4 is past it: its probability 1/16 counts.
    ranks = [1, 2, 4]
    log_probs = [math.log(0.9), math.log(0.3), math.log(1 / 16)]
    cost = extraction_cost(ranks, log_probs, InextractabilityOptions(window_tokens=3, rank_cap=3))
    assert cost is not None
    # p = 1 · 1/2 · 1/16 → b = 5 bits.
    assert cost.bits == pytest.approx(5.0)
    assert (cost.worst_start, cost.worst_end, cost.windows) == (0, 3, 1)


def test_b_is_the_easiest_window_and_its_place_is_reported():
    ranks = [5, 1, 1, 2, 8]
    # m = 4: rank 5 and 8 count their probabilities (1/32 and 1/4).
    log_probs = [math.log(1 / 32), 0.0, 0.0, 0.0, math.log(1 / 4)]
    cost = extraction_cost(ranks, log_probs, InextractabilityOptions(window_tokens=2, rank_cap=4))
    assert cost is not None
    # windows: [5,1] → 5 bits, [1,1] → 0, [1,2] → 1, [2,8] → 3; the easiest is [1,1].
    assert cost.bits == pytest.approx(0.0)
    assert (cost.worst_start, cost.worst_end) == (1, 3)
    assert cost.windows == 4


def test_the_first_of_equal_windows_is_the_worst():
    cost = extraction_cost([2, 2, 2], [0.0] * 3, InextractabilityOptions(window_tokens=1))
    assert cost is not None and cost.worst_start == 0 and cost.bits == pytest.approx(1.0)


def test_the_rank_cap_bounds_what_counts_one_over_rank():
    ranks, log_probs = [30], [math.log(0.25)]
    low = extraction_cost(ranks, log_probs, InextractabilityOptions(window_tokens=1, rank_cap=20))
    high = extraction_cost(ranks, log_probs, InextractabilityOptions(window_tokens=1, rank_cap=30))
    assert low is not None and high is not None
    assert low.bits == pytest.approx(2.0)  # its probability
    assert high.bits == pytest.approx(math.log2(30))  # 1/30


def test_the_defaults_are_the_papers():
    assert InextractabilityOptions() == InextractabilityOptions(window_tokens=50, rank_cap=20)


def test_a_sequence_shorter_than_the_window_is_one_window_of_all_its_tokens():
    cost = extraction_cost([1, 3], [0.0, 0.0])
    assert cost is not None
    assert (cost.window_tokens, cost.windows, cost.bits) == (2, 1, pytest.approx(math.log2(3)))
    assert extraction_cost([], []) is None


def test_a_zero_probability_makes_its_windows_infinitely_costly_but_not_the_others():
    ranks = [1, 50, 1, 1]
    cost = extraction_cost(
        ranks, [0.0, -math.inf, 0.0, 0.0], InextractabilityOptions(window_tokens=2)
    )
    assert cost is not None and cost.bits == pytest.approx(0.0) and cost.worst_start == 2
    alone = extraction_cost([50], [-math.inf], InextractabilityOptions(window_tokens=1))
    assert alone is not None and alone.bits == math.inf
    assert alone.to_record()["extraction_bits"] is None


@pytest.mark.parametrize(
    ("ranks", "window", "expected"),
    [
        ([1, 1, 1, 1], 2, 3),
        ([1, 2, 1, 1, 1], 2, 2),  # [1,1] at 2 and 3
        ([1, 1, 3, 1, 1, 1, 1], 3, 2),  # skips past the 3
        ([2, 2, 2], 1, 0),
        ([1], 1, 1),
    ],
)
def test_greedy_extractable_windows_counts_windows_of_rank_one_only(ranks, window, expected):
    assert greedy_extractable_windows(ranks, window) == expected
    brute = sum(all(r == 1 for r in ranks[i : i + window]) for i in range(len(ranks) - window + 1))
    assert brute == expected


def test_the_greedy_rate_is_over_every_window():
    cost = extraction_cost([1, 1, 2, 1], [0.0] * 4, InextractabilityOptions(window_tokens=2))
    assert cost is not None
    assert cost.greedy_extractable == 1 and cost.greedy_extractable_rate == pytest.approx(1 / 3)
    record = cost.to_record()
    assert record["greedy_extractable_rate"] == pytest.approx(1 / 3)
    assert record["extraction_worst_window"] == [0, 2]


def test_token_ranks_reads_rank_and_log_probability_from_the_logits():
    logits = torch.tensor([[3.0, 1.0, 2.0, 0.0], [0.0, 0.0, 5.0, 0.0]])
    ranks, log_probs = token_ranks(logits, torch.tensor([2, 1]))
    assert ranks == [2, 2]  # a tie with token 0 and 3 counts for the target
    expected = torch.log_softmax(logits, dim=-1)
    assert log_probs == pytest.approx([float(expected[0, 2]), float(expected[1, 1])])


@pytest.mark.parametrize("field", ["window_tokens", "rank_cap"])
def test_options_refuse_a_window_or_cap_below_one(field):
    with pytest.raises(OptionError, match=field):
        InextractabilityOptions(**{field: 0})


def test_capped_ranks_are_exact_up_to_the_cap_and_give_log_probs_only_past_it():
    torch.manual_seed(0)
    logits = torch.randn(40, 64)
    targets = torch.randint(0, 64, (40,))
    targets[:10] = logits[:10].topk(3, dim=-1).indices[:, 2]  # rank 3
    exact, log_probs = token_ranks(logits, targets)
    capped, capped_log_probs = token_ranks(logits, targets, 5)
    assert capped == [r if r <= 5 else 6 for r in exact]
    assert any(r > 5 for r in exact) and any(r <= 5 for r in exact)
    for r, lp, clp in zip(exact, log_probs, capped_log_probs):
        assert (math.isnan(clp) and r <= 5) or clp == pytest.approx(lp)
    options = InextractabilityOptions(window_tokens=4, rank_cap=5)
    assert extraction_cost(capped, capped_log_probs, options) == extraction_cost(
        exact, log_probs, options
    )


def test_a_window_of_rank_one_tokens_costs_zero_bits_not_minus_zero():
    """p = 1 gives b = 0, shown "0.0": a negated 0.0 would be −0.0, which prints "-0.0" (the
    document canary's map showed "b = -0.0 bits")."""
    cost = extraction_cost([1, 1, 1], [0.0] * 3, InextractabilityOptions(window_tokens=2))
    assert cost is not None and math.copysign(1.0, cost.bits) == 1.0 and cost.bits == 0.0
    assert f"{cost.bits:.1f}" == "0.0"
    per_token = token_min_bits([0.0, 0.0, 0.0], 2)
    assert [f"{b:.1f}" for b in per_token] == ["0.0", "0.0", "0.0"]
