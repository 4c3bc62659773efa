"""What several benches share (imported as ``_shared``: a bench runs as ``python bench/NAME.py``,
which puts this folder on ``sys.path``)."""

from __future__ import annotations

from typing import Any

from memprobe_core.snippets.corpus import demo_corpus
from memprobe_core.snippets.split import DataError, split


def pick_split(victim: Any, length: int, domain: str) -> Any:
    """The first demo-corpus snippet of ``domain`` with ``length`` victim tokens, cut."""
    for snippet in demo_corpus(domains=[domain]):
        try:
            return split(snippet, victim.tokenizer, length)
        except DataError:
            continue
    raise SystemExit(f"no demo snippet of domain {domain!r} has {length} tokens")
