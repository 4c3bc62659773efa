"""A KV cache for memprobe's decoding loop that writes each step into memory reserved up front.

Why not transformers' ``DynamicCache`` as it is: its layers append a step's keys and values with
``torch.cat``, which copies the whole cache of every layer at every step, O(length) work per
token. On the attacker's 24 rows at ~800 tokens that copy was half of a decode step on a 2-core
CPU (SmolLM2-135M: 0.35 s/step with ``cat``, 0.25 s/step writing in place). Here each layer
keeps one buffer sized for the prompt plus the new tokens, writes the step into it and hands
attention a view of the filled part: the same numbers in the same order, so greedy outputs stay
bit-identical to ``model.generate`` (unit tests compare them).

Only transformers' plain ``DynamicLayer`` and ``DynamicSlidingWindowLayer`` are replaced (by exact
type); other layer kinds (linear attention, quantized, ...) keep transformers' own behaviour. A
sliding-window layer uses its buffer only while the sequence fits in its window (where the
original keeps every token anyway); the step that would go past it hands the layer back to
transformers' own code with the tokens it would have kept.
"""

from __future__ import annotations

import functools
from typing import Any


def preallocated_cache(config: Any, capacity: int) -> Any:
    """A ``DynamicCache`` for ``config`` whose attention layers reserve ``capacity`` positions."""
    from transformers import DynamicCache

    cache = DynamicCache(config=config)
    cache.layers = [_preallocated(layer, capacity) for layer in cache.layers]
    return cache


def can_merge_prefills(cache: Any, width: int) -> bool:
    """Whether :func:`merge_prefills` can fill ``cache`` with prompts of ``width`` positions:
    every layer is a fresh buffer of this module, and a sliding-window layer's window holds them."""
    for layer in cache.layers:
        if getattr(layer, "_buffer", None) is None or layer.is_initialized:
            return False
        if hasattr(layer, "sliding_window") and width > layer.sliding_window - 1:
            return False
    return True


def merge_prefills(
    cache: Any, parts: list[tuple[Any, list[int]]], *, batch: int, width: int
) -> None:
    """Write each part's prefilled rows into ``cache`` as one left-padded batch of ``width``
    positions holds them (a part: ``(its cache, the batch rows it holds, in order)``): row ``r``
    of a part ``w`` positions wide lands in columns ``width − w … width − 1``; the columns
    before are zeros, masked by the caller's attention mask as padding is."""
    import torch

    for index, layer in enumerate(cache.layers):
        first = parts[0][0].layers[index].keys  # (b, H, w, D)
        capacity = layer._buffer.capacity
        shape = (batch, first.shape[1], capacity, first.shape[-1])
        keys, values = first.new_zeros(shape), first.new_zeros(shape)
        for part, rows in parts:
            source = part.layers[index]
            w = source.keys.shape[-2]
            at = torch.tensor(rows, device=first.device)
            keys[at, :, width - w : width] = source.keys
            values[at, :, width - w : width] = source.values
        layer.adopt(keys, values, width)


def _preallocated(layer: Any, capacity: int) -> Any:
    from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

    if type(layer) is DynamicLayer:
        return _make_layer_classes()[0](capacity)
    if type(layer) is DynamicSlidingWindowLayer and not layer.record_past:
        return _make_layer_classes()[1](capacity, layer.sliding_window)
    return layer


class _Buffer:
    """Keys and values of one layer in (B, H, capacity, D) tensors; ``n`` positions are filled."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.n = 0
        self.keys: Any = None
        self.values: Any = None

    def append(self, keys: Any, values: Any) -> tuple[Any, Any]:
        """Write one call's (B, H, T, D) keys and values after the filled part; the filled views."""
        new = keys.shape[-2]
        if self.keys is None or self.n + new > self.capacity:
            self._reserve(keys, values, max(self.capacity, 2 * self.n, self.n + new))
        self.keys[:, :, self.n : self.n + new] = keys
        self.values[:, :, self.n : self.n + new] = values
        self.n += new
        return self.filled()

    def filled(self) -> tuple[Any, Any]:
        return self.keys[:, :, : self.n], self.values[:, :, : self.n]

    def select(self, index: Any) -> None:
        """Keep (or repeat) batch rows ``index``."""
        self.keys, self.values = self.keys[index], self.values[index]

    def crop_end(self, count: int) -> None:
        """Forget the last ``count`` filled positions of every row (rejected draft slots)."""
        self.n -= count

    def shift_rows(self, shifts: list[int]) -> None:
        """Move row ``r``'s filled part ``shifts[r]`` positions right, dropping its last
        ``shifts[r]`` entries (rejected draft slots, ``hf_speculative``); the entries left
        behind at its start are masked out by the caller."""
        for row, shift in enumerate(shifts):
            if shift:
                end = self.n
                self.keys[row, :, shift:end] = self.keys[row, :, : end - shift].clone()
                self.values[row, :, shift:end] = self.values[row, :, : end - shift].clone()

    def _reserve(self, keys: Any, values: Any, capacity: int) -> None:
        old_keys, old_values = self.keys, self.values
        self.capacity = capacity
        self.keys = keys.new_empty((*keys.shape[:2], capacity, keys.shape[-1]))
        self.values = values.new_empty((*values.shape[:2], capacity, values.shape[-1]))
        if self.n:
            self.keys[:, :, : self.n] = old_keys[:, :, : self.n]
            self.values[:, :, : self.n] = old_values[:, :, : self.n]


@functools.cache
def _make_layer_classes() -> tuple[type, type]:
    """Defined once, on first use: importing transformers is slow and most of memprobe needs none."""
    from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

    class PreallocatedLayer(DynamicLayer):
        """``DynamicLayer`` whose ``update`` writes into a buffer instead of concatenating."""

        def __init__(self, capacity: int) -> None:
            super().__init__()
            self._buffer: _Buffer | None = _Buffer(capacity)

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> Any:
            if self._buffer is None:
                return super().update(key_states, value_states, *args, **kwargs)
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            self.keys, self.values = self._buffer.append(key_states, value_states)
            return self.keys, self.values

        def batch_select_indices(self, indices: Any) -> None:
            if self._buffer is None or self._buffer.keys is None:
                return super().batch_select_indices(indices)
            self._buffer.select(indices)
            self.keys, self.values = self._buffer.filled()

        def adopt(self, keys: Any, values: Any, filled: int) -> None:
            """Take ``keys`` / ``values`` (B, H, capacity, D) as this layer's buffer with the
            first ``filled`` positions written (:func:`merge_prefills`)."""
            assert self._buffer is not None
            if not self.is_initialized:
                self.lazy_initialization(keys, values)
            buffer = self._buffer
            buffer.keys, buffer.values = keys, values
            buffer.capacity, buffer.n = keys.shape[-2], filled
            self.keys, self.values = buffer.filled()
            if hasattr(self, "cumulative_length"):  # a sliding-window layer counts its tokens
                self.cumulative_length = filled

        def can_shift(self) -> bool:
            """Whether :meth:`shift_rows` works: the buffer, not transformers' tensors, holds it."""
            return self._buffer is not None

        def room(self) -> int:
            """Positions one more call may add with :meth:`shift_rows` still working after it."""
            return 1 << 30 if self._buffer is not None else 0

        def crop_end(self, count: int) -> None:
            """Forget the last ``count`` positions of every row (see ``_Buffer.crop_end``)."""
            if self._buffer is None or self._buffer.keys is None:
                raise RuntimeError("this cache layer no longer holds its buffer; cannot crop it")
            self._buffer.crop_end(count)
            self.keys, self.values = self._buffer.filled()
            if hasattr(self, "cumulative_length"):  # a sliding-window layer counts its tokens
                self.cumulative_length -= count

        def shift_rows(self, shifts: list[int]) -> None:
            """Per row, move the cached entries right (see ``_Buffer.shift_rows``)."""
            if self._buffer is None or self._buffer.keys is None:
                raise RuntimeError("this cache layer no longer holds its buffer; cannot shift rows")
            self._buffer.shift_rows(shifts)
            self.keys, self.values = self._buffer.filled()

        def _to_plain(self) -> None:
            """From here on transformers' own code: the filled part becomes ordinary tensors."""
            if self._buffer is not None and self._buffer.keys is not None:
                self.keys, self.values = (t.contiguous() for t in self._buffer.filled())
            self._buffer = None

        # Every other way to change the cache goes through transformers' code on plain tensors.
        def crop(self, tokens_to_remove: int) -> None:
            self._to_plain()
            super().crop(tokens_to_remove)

        def batch_repeat_interleave(self, repeats: int) -> None:
            self._to_plain()
            super().batch_repeat_interleave(repeats)

        def reorder_cache(self, beam_idx: Any) -> None:
            self._to_plain()
            super().reorder_cache(beam_idx)

        def offload(self) -> None:
            self._to_plain()
            super().offload()

        def reset(self) -> None:
            self._buffer = None
            super().reset()

    class PreallocatedSlidingWindowLayer(PreallocatedLayer, DynamicSlidingWindowLayer):
        """``DynamicSlidingWindowLayer`` with a buffer while every token is still in the window."""

        def __init__(self, capacity: int, sliding_window: int) -> None:
            DynamicSlidingWindowLayer.__init__(self, sliding_window)
            self._buffer = _Buffer(min(capacity, sliding_window - 1))

        def room(self) -> int:
            # Past window - 1 tokens transformers' code takes over and drops the oldest: a pass
            # must fit, so that the entries a row shifts back in are still there.
            if self._buffer is None:
                return 0
            return self.sliding_window - 1 - self.cumulative_length

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> Any:
            fits = self.cumulative_length + key_states.shape[-2] <= self.sliding_window - 1
            if self._buffer is None or not fits:
                # transformers' layer keeps the last window - 1 tokens: so far, all of them.
                self._to_plain()
                return DynamicSlidingWindowLayer.update(
                    self, key_states, value_states, *args, **kwargs
                )
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            self.cumulative_length += key_states.shape[-2]
            self.keys, self.values = self._buffer.append(key_states, value_states)
            return self.keys, self.values

    return PreallocatedLayer, PreallocatedSlidingWindowLayer
