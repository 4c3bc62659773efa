"""Every p_z record of a white-box victim carries the suffix's rank-based extraction cost
(docs/method.md §21), read from the logits of p_z's own pass or of the signals' pass: the value
a position-by-position computation gives, and no extra forward pass."""

from __future__ import annotations

import math

import pytest

from memprobe_core.measuring.sampler import SamplingScheme
from memprobe_core.membership import MeasureOptions
from memprobe_core.membership import extraction_probability as xp
from memprobe_core.snippets.split import Snippet, split

# The tiny victim in both BOS modes, and p_z's cache emptied around each test (autouse), are
# the p_z tests' own fixtures.
from tests.unit.membership.test_extraction_probability import (  # noqa: F401 - fixtures by name
    TEXT,
    context_and_suffix,
    fresh_cache,
    victim,
)


def stepwise_bits(victim, context: list[int], suffix: list[int], l: int = 50, m: int = 20):  # noqa: E741, F811
    """b over the suffix, one forward pass per token: rank by counting higher logits, the
    probability by a float64 softmax; the easiest window of min(l, n) tokens."""
    import torch

    factors, ranks, ids = [], [], list(context)
    for token in suffix:
        with torch.inference_mode():
            logits = victim.torch_model(input_ids=torch.tensor([ids])).logits[0, -1].double()
        rank = int((logits > logits[token]).sum()) + 1
        log_p = float(torch.log_softmax(logits, dim=-1)[token])
        factors.append(-math.log2(rank) if rank <= m else log_p / math.log(2))
        ranks.append(rank)
        ids.append(token)
    window = min(l, len(suffix))
    sums = [sum(factors[i : i + window]) for i in range(len(suffix) - window + 1)]
    greedy = sum(all(r == 1 for r in ranks[i : i + window]) for i in range(len(sums)))
    return -max(sums), greedy / len(sums), window


@pytest.mark.parametrize("scheme", [SamplingScheme(), SamplingScheme(0.0, 0, 1.0)])
def test_a_p_z_record_carries_the_suffixs_extraction_bits(victim, scheme):  # noqa: F811
    piece = split(Snippet("s", TEXT, "legal"), victim.tokenizer, 24)
    record = xp.measure_extraction_probability(victim, piece, scheme, 0.5)
    bits, rate, window = stepwise_bits(victim, *context_and_suffix(victim, piece))
    assert record["extraction_bits"] == pytest.approx(bits, rel=1e-5, abs=1e-5)
    assert record["greedy_extractable_rate"] == pytest.approx(rate)
    assert record["extraction_window_tokens"] == window == record["pz_tokens"]
    assert "log10_p_z" in record


def test_the_signals_pass_hands_over_the_same_extraction_bits(victim):  # noqa: F811
    from memprobe_core.attacks.model_set import ModelSet
    from memprobe_core.attacks.result import AttackResult
    from memprobe_core.membership import signals
    from memprobe_core.membership.measure import measure_result

    piece = split(Snippet("s", TEXT, "legal"), victim.tokenizer, 24)
    alone = xp.measure_extraction_probability(victim, piece, SamplingScheme(), 0.5)
    xp.clear_cache()
    signals.clear_cache()
    calls: list[int] = []
    original = victim.torch_model.forward

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    victim.torch_model.forward = counting
    try:
        result = AttackResult("ps_base", "s", "legal", 24, piece.prefix, "out", 0, 0, 0, 0.5)
        # The near-verbatim search makes passes of its own (§22): off here.
        options = MeasureOptions(near_verbatim=False)
        measured = measure_result(result, piece, ModelSet(victim=victim), options)
    finally:
        del victim.torch_model.forward
        signals.clear_cache()
    assert len(calls) == 1  # the signals' pass; neither p_z nor the rank cost made one
    verbatim = measured.verbatim
    assert verbatim["extraction_bits"] == pytest.approx(alone["extraction_bits"], rel=1e-5)
    assert verbatim["extraction_worst_window"] == alone["extraction_worst_window"]


def test_a_black_box_victim_says_its_ranks_are_not_measured(victim):  # noqa: F811
    from memprobe_core.models.openai import OpenAIGenerator
    from tests.helpers.openai_server import serve

    piece = split(Snippet("s", TEXT, "legal"), "whitespace", 18)
    with serve(victim, "m") as srv:
        client = OpenAIGenerator("m", base_url=srv.base_url, backoff_s=0.01, max_retries=0)
        record = xp.measure_extraction_probability(client, piece, SamplingScheme(1.0, 0, 1.0), 0.9)
    assert record["log10_p_z"] is not None
    assert record["extraction_bits"] is None
    assert "rank" in str(record["extraction_not_measured"])
