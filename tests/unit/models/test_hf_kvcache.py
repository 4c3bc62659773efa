"""The decoding loop's preallocated KV cache gives exactly what transformers' DynamicCache gives."""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache, LlamaConfig
from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

from memprobe_core.models.hf_kvcache import preallocated_cache
from tests.helpers.tiny_models import tiny_gemma3_config

WINDOW = 7


def _config():
    return tiny_gemma3_config(32, sliding_window=WINDOW)


def _feed(cache, calls, select_at: dict[int, torch.Tensor]):
    """Every layer's returned (keys, values) per call; batch rows re-selected before some calls."""
    returned = []
    rows = calls[0][0].shape[0]
    for k, (keys, values) in enumerate(calls):
        if k in select_at:
            cache.batch_select_indices(select_at[k])
            rows = len(select_at[k])
            returned.append([(layer.keys, layer.values) for layer in cache.layers])
        returned.append(
            [layer.update(keys[:rows], values[:rows]) for layer in cache.layers]
            + [cache.get_seq_length(0), cache.get_seq_length(1)]
        )
    return returned


def _calls(prefill: int, steps: int, batch: int = 3):
    gen = torch.Generator().manual_seed(0)
    shape = lambda t: (batch, 1, t, 8)
    out = [(torch.randn(shape(prefill), generator=gen), torch.randn(shape(prefill), generator=gen))]
    out += [
        (torch.randn(shape(1), generator=gen), torch.randn(shape(1), generator=gen))
        for _ in range(steps)
    ]
    return out


def _assert_same(ours, theirs):
    assert len(ours) == len(theirs)
    for call_ours, call_theirs in zip(ours, theirs):
        for a, b in zip(call_ours, call_theirs):
            if isinstance(a, int):
                assert a == b
            else:
                assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


@pytest.mark.parametrize(
    "prefill,steps,capacity",
    [
        (3, 8, 11),  # the sliding layer crosses its window while decoding
        (2, 3, 5),  # never reaches it
        (9, 3, 12),  # the prompt alone is longer than the window
        (3, 8, 4),  # capacity too small: the buffer grows
    ],
)
def test_same_keys_and_values_as_dynamic_cache(prefill, steps, capacity):
    calls = _calls(prefill, steps)
    select = {2: torch.tensor([2, 0, 0]), 5: torch.tensor([1, 2])}  # repeat rows, then drop one
    theirs = _feed(DynamicCache(config=_config()), calls, select)
    ours = _feed(preallocated_cache(_config(), capacity), calls, select)
    _assert_same(ours, theirs)


def test_only_plain_dynamic_layers_are_replaced():
    cache = preallocated_cache(_config(), 10)
    sliding, full = cache.layers
    assert isinstance(sliding, DynamicSlidingWindowLayer) and type(sliding) is not (
        DynamicSlidingWindowLayer
    )
    assert sliding.is_sliding and sliding.sliding_window == WINDOW
    assert isinstance(full, DynamicLayer) and type(full) is not DynamicLayer
    assert not full.is_sliding


def test_steps_write_in_place_instead_of_copying():
    """The point of the cache: a decode step does not allocate a new cache tensor."""
    layer = preallocated_cache(LlamaConfig(num_hidden_layers=1), 8).layers[0]
    calls = _calls(2, 3)
    keys, _ = layer.update(*calls[0])
    base = keys.untyped_storage().data_ptr()
    for step in calls[1:]:
        keys, _ = layer.update(*step)
        assert keys.untyped_storage().data_ptr() == base
    assert keys.shape[-2] == 5


def test_crop_and_reorder_fall_back_to_transformers():
    calls = _calls(4, 2)
    ours = preallocated_cache(_config(), 8)
    theirs = DynamicCache(config=_config())
    for cache in (ours, theirs):
        for step in calls:
            for layer in cache.layers:
                layer.update(*step)
        cache.layers[1].crop(-2)
        cache.layers[1].reorder_cache(torch.tensor([1, 0, 2]))
    assert torch.equal(ours.layers[1].keys, theirs.layers[1].keys)
    step = _calls(1, 0)[0]
    assert torch.equal(ours.layers[1].update(*step)[0], theirs.layers[1].update(*step)[0])
