"""What the two kinds of document run share in the store (run kind ``document``): the stored
document, the refusals, and reading a run's config by its mode (``map`` or ``continue``)."""

from __future__ import annotations

import hashlib
from typing import Any

from memprobe_core.errors import MemprobeError, UsageError
from memprobe_core.store import RunRecord, Store

KIND = "document"
# A document run's modes, as its config records them, and how people call them.
MODES: dict[str, str] = {"map": "extraction map", "continue": "continuation"}


class DocumentRunError(UsageError):
    """A document run that cannot be started, read or resumed (the message says why)."""


class DocumentBusyError(MemprobeError, RuntimeError):
    """The run is being worked on by another live process."""


def document_record(text: str, name: str, **extra: Any) -> dict[str, Any]:
    """The document as a run's config keeps it: the whole text (a resume needs nothing else),
    its name, hash and word count, and ``extra`` (token counts)."""
    return {
        "name": name,
        "text": text,
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
        "words": len(text.split()),
        **extra,
    }


def units_text(run: RunRecord) -> str:
    """A run's progress in units as lists show it: "12/45" (done of all), but for a
    continuation "4 turns": it stores each turn as it arrives and knows no total in advance, so
    "4/4" would read as finished while it may stop at any turn."""
    done = run["units_done"]
    if run["kind"] == KIND and run["config"].get("mode") == "continue":
        return f"{done} turn" + ("" if done == 1 else "s")
    return f"{done}/{run['units_total']}"


def run_mode(store: Store, run_id: int) -> str:
    """The mode (a key of :data:`MODES`) of document run ``run_id``.

    Raises:
        UnknownRunError: no such run. DocumentRunError: not a document run, or one of a mode
            this memprobe does not know.
    """
    run = store.get_run(run_id)
    mode = run["config"].get("mode") if run["kind"] == KIND else None
    if mode not in MODES:
        run_config(store, run_id, "map")  # raises, naming what the run is
    return str(mode)


def run_config(store: Store, run_id: int, mode: str) -> dict[str, Any]:
    """The config of document run ``run_id`` in ``mode``.

    Raises:
        UnknownRunError: no such run. DocumentRunError: another kind of run, or another mode.
    """
    run = store.get_run(run_id)
    found = run["config"].get("mode") if run["kind"] == KIND else None
    if found != mode:
        article = "an" if run["kind"][:1] in "aeiou" else "a"
        what = f"a document's {MODES[found]}" if found in MODES else f"{article} {run['kind']} run"
        raise DocumentRunError(
            f"run {run_id} is {what}, not a document's {MODES[mode]}; `memprobe runs` lists the "
            "runs and their kinds"
        )
    return run["config"]
