"""What a method may know of the run it belongs to: :class:`MethodContext`.

A method that needs more than its unit's snippet — ``divergence`` matches its outputs against
every snippet of the audited dataset — gets it through its spec's ``prepare`` hook
(:class:`~memprobe_core.attacks.registry.MethodSpec`), called with a context that whoever runs
the method fills: the audit when it creates a run and each time it runs one, the unit runner
before each unit. So no method opens the store or knows how an audit keeps its runs, and the
same method runs unchanged in this process, on a Ray worker and on a resume.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from memprobe_core.snippets.split import Snippet

# (store file, run id) -> that run's snippets, in order: a read-only view of the store.
ReadSnippets = Callable[[Path, int], list[Snippet]]


@dataclass(frozen=True)
class MethodContext:
    """The run a method is prepared for; each field is given only where the caller knows it.

    Attributes:
        snippets: the dataset, when an audit is created (before anything is stored).
        store_path / run_id: the store file (resolved) holding the run and the run's id, each
            time an audit runs (first run or resume); what a method records from them in its
            options is written to the run's config, where every process running a unit reads it.
        read_snippets: the snippets of any run of a store file, read-only, in the process about
            to run a unit (a Ray worker reads the file from its own path).
    """

    snippets: tuple[Snippet, ...] = ()
    store_path: Path | None = None
    run_id: int | None = None
    read_snippets: ReadSnippets | None = None
