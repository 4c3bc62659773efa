"""Extraction methods (METHOD.md §3), one entry function each, one result type.

Every method takes ``(split, models, options, *, on_event=None, cancel=None)`` and returns an
:class:`AttackResult`::

    from memprobe_core.attacks import run_method, ModelSet, AttackOptions
    result = run_method("interactive", split, ModelSet(victim=v, attacker=a), AttackOptions())

``METHODS`` maps the method names of ``METHOD_LABELS`` to their entry functions.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable

from memprobe_core.attacks.common import (
    AttackOptions,
    GCGOptions,
    InteractiveOptions,
    ModelSet,
    PrefixSuffixOptions,
    ReverseOptions,
)
from memprobe_core.attacks.events import (
    AttackEvent,
    CandidateScored,
    EventCallback,
    Finished,
    RoundFinished,
    RoundStarted,
    SearchStep,
)
from memprobe_core.attacks.gcg import gcg_search, run_gcg
from memprobe_core.attacks.interactive import run_interactive
from memprobe_core.attacks.prefix_suffix import run_prefix_suffix
from memprobe_core.attacks.result import (
    METHOD_LABELS,
    AttackResult,
    Cancelled,
    Candidate,
    Costs,
    check_cancel,
)
from memprobe_core.attacks.reverse_lm import (
    DEFAULT_REVERSE_MODEL,
    flip,
    propose_prefix,
    run_reverse_lm,
)
from memprobe_core.attacks.scoring import MissingModelError
from memprobe_core.data import SplitSnippet

MethodFn = Callable[..., AttackResult]

METHODS: dict[str, MethodFn] = {
    "ps_base": functools.partial(run_prefix_suffix, variant="base"),
    "ps_inst": functools.partial(run_prefix_suffix, variant="inst"),
    "reverse_lm": run_reverse_lm,
    "gcg": run_gcg,
    "interactive": run_interactive,
}


def run_method(
    method: str,
    split: SplitSnippet,
    models: ModelSet,
    options: AttackOptions,
    *,
    on_event: EventCallback | None = None,
    cancel: threading.Event | None = None,
) -> AttackResult:
    """Run one extraction method by name.

    Args:
        method: one of ``METHODS`` (``ps_base``, ``ps_inst``, ``reverse_lm``, ``gcg``, ``interactive``).
        split / models / options / on_event / cancel: as for each ``run_*`` function.

    Raises:
        ValueError: an unknown method name (the message lists the known ones).
        MissingModelError: the method needs a model the ModelSet lacks.
    """
    fn = METHODS.get(method)
    if fn is None:
        raise ValueError(f"method {method!r} is unknown; use one of {', '.join(METHODS)}")
    return fn(split, models, options, on_event=on_event, cancel=cancel)


__all__ = [
    "DEFAULT_REVERSE_MODEL",
    "METHODS",
    "METHOD_LABELS",
    "AttackEvent",
    "AttackOptions",
    "AttackResult",
    "Cancelled",
    "Candidate",
    "CandidateScored",
    "Costs",
    "EventCallback",
    "Finished",
    "GCGOptions",
    "InteractiveOptions",
    "MissingModelError",
    "ModelSet",
    "PrefixSuffixOptions",
    "ReverseOptions",
    "RoundFinished",
    "RoundStarted",
    "SearchStep",
    "check_cancel",
    "flip",
    "gcg_search",
    "propose_prefix",
    "run_gcg",
    "run_interactive",
    "run_method",
    "run_prefix_suffix",
    "run_reverse_lm",
]
