"""What a measurement of a text on a model is cached under, and the cache itself.

The membership signals, probabilistic extraction, SaMIA and the methods that score the victim
teacher-forced all measure "this text on this model"; they key their caches by
:func:`model_key` and tell a piece cut by the victim's own tokenizer by :func:`tokenizer_name`. It lives with the models, below both the methods and membership, so
neither has to import the other for it.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Any

from memprobe_core.models.base import Generator

CACHE_SIZE = 256


def tokenizer_name(tokenizer: Any) -> str:
    """The name ``memprobe_core.snippets.split.split`` records for a tokenizer (to tell whether it cut a piece)."""
    name = getattr(tokenizer, "name_or_path", None) or getattr(tokenizer, "name", None)
    return str(name or type(tokenizer).__name__)


class MeasureCache:
    """A small thread-safe LRU of computed measurements (signals, p_z, greedy matches).

    The five methods of an audit run on the same snippet and length, and each unit asks for the
    signals: caching makes an audit pay one victim forward per (snippet, length), not five.
    Units may run on worker threads (dashboard jobs, audits), hence the lock; two threads that
    miss the same key at once both compute it (the same value), which is cheaper than holding
    the lock across a forward pass.
    """

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self.size = size
        self._items: OrderedDict[tuple[Any, ...], dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, ...]) -> dict[str, Any] | None:
        with self._lock:
            value = self._items.get(key)
            if value is None:
                return None
            self._items.move_to_end(key)
            return dict(value)

    def put(self, key: tuple[Any, ...], value: dict[str, Any]) -> None:
        with self._lock:
            self._items[key] = dict(value)
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


def model_key(model: Generator | None) -> Any:
    """What a measurement of ``model`` is cached under (``None`` for no model)."""
    # A weak reference to the torch model: the cache never keeps a model alive, and a new model
    # that reuses a freed one's id() never matches the dead reference (they compare unequal).
    # Variants of one HFGenerator share the torch model and tokenizer, hence their signals.
    # A black-box model is keyed by the Generator itself (its server does the scoring).
    if model is None:
        return None
    white: Any = model
    return weakref.ref(white.torch_model if from_weights(model) else model)


def from_weights(model: Generator | None) -> bool:
    """Whether ``model`` is scored from its weights (a white-box model with its tokenizer)."""
    return (
        model is not None
        and model.white_box
        and getattr(model, "torch_model", None) is not None
        and model.tokenizer is not None
    )


def scorable(model: Generator | None) -> bool:
    """Whether ``model`` can be scored at all: from its weights or by its server."""
    return model is not None and (from_weights(model) or model.scores_text)
