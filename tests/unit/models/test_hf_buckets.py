"""Prefill in length buckets (``hf_decode.length_buckets``): the same tokens as one padded
prefill, on a tiny Llama and on a tiny Gemma-3 (sliding window 20: prompts past it are not
bucketed), greedy and drafted, and the buckets the cost rule picks."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
import torch
from transformers import Gemma3ForCausalLM

from memprobe_core.models import hf_decode
from memprobe_core.models.hf_decode import BatchDecoding, decode, length_buckets
from memprobe_core.models.hf_speculative import decode_drafted
from tests.helpers.tiny_models import tiny_causal_lm, tiny_gemma3_config

NEVER = 10**9  # bucket_min_saved that never buckets


@pytest.fixture(scope="module")
def llama():
    model, _ = tiny_causal_lm()
    return model


@pytest.fixture(scope="module")
def gemma():
    _, tokenizer = tiny_causal_lm()
    with torch.random.fork_rng():
        torch.manual_seed(1)
        return Gemma3ForCausalLM(tiny_gemma3_config(len(tokenizer), sliding_window=20)).eval()


def test_buckets_cut_sorted_lengths_where_padding_costs_most():
    # A victim round of the 3 x 24 probe (its prompts' token counts).
    lengths = [57, 17, 124, 19, 23, 26, 27, 28, 31, 32, 33, 33, 35, 35, 37, 39, 40, 44, 50]
    groups = length_buckets(lengths, min_saved=256)
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
    assert [lengths[g[0]] for g in groups] == sorted(lengths[g[0]] for g in groups)
    assert [lengths[i] for i in groups[-1]] == [124]  # the long prompt alone
    padded = sum(len(g) * max(lengths[i] for i in g) for g in groups)
    assert padded < 0.5 * len(lengths) * 124
    # Too little to gain: one group, rows in their order.
    assert length_buckets(lengths, min_saved=10**6) == [list(range(len(lengths)))]
    assert length_buckets([5, 6, 7, 8], min_saved=0) == [[0, 1, 2, 3]]
    assert length_buckets([3], min_saved=0) == [[0]]


def _batches(rng: random.Random, n: int, longest: int):
    for trial in range(n):
        rows = rng.randint(2, 7)
        sizes = [rng.choice([1, 2, 4, longest // 2, longest]) for _ in range(rows)]
        prompts = [[rng.randrange(10, 300) for _ in range(k)] for k in sizes]
        spec = BatchDecoding(
            max_new_tokens=rng.randint(1, 24),
            temperature=0.0,
            top_p=1.0,
            stop_ids=(rng.randrange(10, 300),) if trial % 2 else (),
            pad_id=0,
            bucket_min_saved=NEVER,
        )
        yield prompts, spec


@pytest.mark.parametrize("name,longest", [("llama", 150), ("gemma", 18)])
def test_bucketed_prefill_gives_the_tokens_of_one_padded_prefill(
    name, longest, request, monkeypatch
):
    """20 random batches bucketed whenever they can be (no minimum, no call cost)."""
    model = request.getfixturevalue(name)
    monkeypatch.setattr(hf_decode, "BUCKET_CALL_COST", 0)
    bucketed_calls = []
    original = hf_decode._bucketed_prefill

    def counting(*args, **kwargs):
        out = original(*args, **kwargs)
        bucketed_calls.append(out is not None)
        return out

    monkeypatch.setattr(hf_decode, "_bucketed_prefill", counting)
    rng = random.Random(11)
    for prompts, spec in _batches(rng, 20, longest):
        with torch.inference_mode():
            plain = decode(model, prompts, spec)
            bucketed = decode(model, prompts, replace(spec, bucket_min_saved=0))
            drafted = decode_drafted(
                model, prompts, [list(r.ids) for r in plain], replace(spec, bucket_min_saved=0)
            )
        assert bucketed == plain, prompts
        assert drafted == plain, prompts
    assert sum(bucketed_calls) >= 20  # most batches were really bucketed


def test_prompts_past_a_sliding_window_are_prefilled_in_one_batch(gemma, monkeypatch):
    monkeypatch.setattr(hf_decode, "BUCKET_CALL_COST", 0)
    merged = []
    original = hf_decode._bucketed_prefill
    monkeypatch.setattr(
        hf_decode,
        "_bucketed_prefill",
        lambda *a, **k: merged.append(out := original(*a, **k)) or out,
    )
    prompts = [[11] * 2, [12] * 30]  # 30 > the window of 20
    spec = BatchDecoding(8, 0.0, 1.0, (), 0, bucket_min_saved=0)
    with torch.inference_mode():
        out = decode(gemma, prompts, spec)
        plain = decode(gemma, prompts, replace(spec, bucket_min_saved=NEVER))
    assert merged == [None] and out == plain
