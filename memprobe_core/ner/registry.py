"""NER models by name: the embedded model, registered ones, and any hub id or local folder.

The page lists :func:`ner_models` in its picker and :func:`~memprobe_core.ner.audit.run_ner_audit`
loads every model through :func:`load_ner_model`, so the dashboard, the CLI and the library resolve
a name the same way:

* ``"embedded"``: the MiniLM model trained here on names we know (trained on first use, cached);
  its own in-train / out-of-train name lists are the default names.
* a name added with :func:`register_ner_model` (tests register tiny in-process models this way);
* anything else: a hub id or a local folder for ``NerModel.load``.

Loaded models are cached per process (the dashboard re-runs pages; a model is never mutated, and
its lazily made eager-attention copy is built under a lock).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from memprobe_core.ner.embedded import (
    embedded_name_lists,
    embedded_ner_dir,
    ensure_embedded_ner,
)
from memprobe_core.ner.model import (
    NerModel,  # torch is imported only when a model loads
)

ProgressFn = Callable[[int, int, str], None]
NameLists = Callable[[], tuple[list[str], list[str]]]
EMBEDDED = "embedded"


@dataclass(frozen=True)
class NerModelEntry:
    """A named NER model.

    Attributes:
        name: what users pick or type (``--model``, the page's picker).
        description: one line for pickers and help.
        load: ``load(device, on_progress) -> NerModel``.
        name_lists: the model's own (in-train, out-of-train) names, the default names of an audit;
            ``None`` when they are unknown (then names must be given).
    """

    name: str
    description: str
    load: Callable[[str | None, ProgressFn | None], NerModel]
    name_lists: NameLists | None = None


def _load_embedded(device: str | None, on_progress: ProgressFn | None) -> NerModel:
    folder = ensure_embedded_ner(on_progress)
    model = NerModel.load(folder, device=device)
    model.model_id = f"embedded ({folder})"  # the CLI report and JSON show where it lives
    return model


_ENTRIES: dict[str, NerModelEntry] = {
    EMBEDDED: NerModelEntry(
        EMBEDDED,
        "MiniLM NER trained here (names known; trains once, about a minute on a CPU)",
        _load_embedded,
        embedded_name_lists,
    )
}
_CACHE: dict[tuple[str, str | None, str], NerModel] = {}
_LOCK = threading.Lock()


def register_ner_model(entry: NerModelEntry) -> None:
    """Add (or replace) a named model; it then appears in :func:`ner_models`."""
    with _LOCK:
        _ENTRIES[entry.name] = entry
        for key in [k for k in _CACHE if k[0] == entry.name]:
            del _CACHE[key]


def unregister_ner_model(name: str) -> None:
    """Remove a registered model and its cached copies (``embedded`` stays)."""
    with _LOCK:
        if name != EMBEDDED:
            _ENTRIES.pop(name, None)
        for key in [k for k in _CACHE if k[0] == name]:
            del _CACHE[key]


def ner_models() -> dict[str, str]:
    """Registered model names → one-line descriptions (``embedded`` first)."""
    return {name: entry.description for name, entry in _ENTRIES.items()}


def model_name_lists(name: str) -> tuple[list[str], list[str]] | None:
    """The (in-train, out-of-train) names a model comes with, or ``None`` (hub ids, folders)."""
    entry = _ENTRIES.get(name)
    return entry.name_lists() if entry and entry.name_lists else None


def load_ner_model(
    name: str, *, device: str | None = None, on_progress: ProgressFn | None = None
) -> NerModel:
    """Load a model by name (see the module docstring), once per process and device.

    Args:
        name: ``embedded``, a registered name, a hub id or a local folder.
        device: ``cuda``, ``cpu`` or ``None`` (CUDA when present).
        on_progress: training progress of the embedded model (first use only).

    Raises:
        NerModelError: the model cannot be loaded (the message says what to try).
    """
    # The embedded model's folder follows MEMPROBE_HOME, so a changed home loads a different model.
    key = (name, device, str(embedded_ner_dir()) if name == EMBEDDED else "")
    # One lock for all loads: two sessions asking for the embedded model must not train it twice
    # at once, and loads are rare next to scoring.
    with _LOCK:
        if key not in _CACHE:
            entry = _ENTRIES.get(name)
            if entry is not None:
                _CACHE[key] = entry.load(device, on_progress)
            else:
                _CACHE[key] = NerModel.load(name, device=device)
        return _CACHE[key]
