"""Extraction methods (docs/method.md §3), one entry function each, one result type.

Every method takes ``(split, models, options, *, on_event=None, cancel=None)`` and returns an
:class:`AttackResult`::

    from memprobe_core.attacks import run_method, ModelSet, AttackOptions
    result = run_method("interactive", split, ModelSet(victim=v, attacker=a), AttackOptions())

Each method module registers itself (:mod:`memprobe_core.attacks.registry`); importing this
package imports them all, so the registry lists every built-in method.

- :mod:`.registry`: ``MethodSpec`` and every list of methods derived from it.
- :mod:`.options`: ``AttackOptions`` and each method's options, with their bounds.
- :mod:`.model_set`: ``ModelSet`` (the models by role) and ``MissingModelError``.
- :mod:`.events`: the typed events a method emits; :mod:`.result`: ``AttackResult``, its trace
  rows and flags, and how it is built.
- shared by the methods: :mod:`.victim` (its requests, budget, answers), :mod:`.scoring`
  (α, Mem / LCS_P / objective), :mod:`.costs`, :mod:`.manifest`, :mod:`.prompts` (meta-prompts).
- the methods: :mod:`.prefix_suffix` (P-S-Base, P-S-Inst), :mod:`.reverse_lm`, :mod:`.gcg` (with
  the search engine in :mod:`.gcg_core`), :mod:`.interactive`.
"""

from __future__ import annotations

import sys
import threading

from memprobe_core.attacks.costs import Costs
from memprobe_core.attacks.events import (
    AttackEvent,
    CandidateScored,
    EventCallback,
    Finished,
    RoundFinished,
    RoundStarted,
    SearchStep,
)
from memprobe_core.attacks.gcg import GcgSearchConfig, gcg_search, run_gcg
from memprobe_core.attacks.interactive import run_interactive
from memprobe_core.attacks.model_set import MissingModelError, ModelSet
from memprobe_core.attacks.options import (
    AttackOptions,
    GCGOptions,
    InteractiveOptions,
    PrefixSuffixOptions,
    ReverseOptions,
)
from memprobe_core.attacks.prefix_suffix import run_prefix_suffix
from memprobe_core.attacks.registry import (
    MethodSpec,
    UnknownMethodError,
    get_method,
    import_modules,
    method_label,
    method_names,
    method_order,
    register,
)
from memprobe_core.attacks.result import AttackResult, Cancelled, Candidate, check_cancel
from memprobe_core.attacks.reverse_lm import (
    DEFAULT_REVERSE_MODEL,
    flip,
    propose_prefix,
    run_reverse_lm,
)
from memprobe_core.plugins import METHODS_GROUP, load_group
from memprobe_core.snippets.split import SplitSnippet


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
        method: a registered method name (``registry.method_names()``).
        split / models / options / on_event / cancel: as for each ``run_*`` function.

    Raises:
        UnknownMethodError: an unknown method name (the message lists the known ones).
        MissingModelError: the method needs a model the ModelSet lacks.
    """
    return get_method(method).run(split, models, options, on_event=on_event, cancel=cancel)


# The built-in methods are imported above for their entry points; this also imports any other
# module of the package, so a new method is one file here and nothing else; then the methods of
# installed plugins (the ``memprobe.methods`` entry points, memprobe_core.plugins).
import_modules(sys.modules[__name__])
load_group(METHODS_GROUP)


__all__ = [
    "DEFAULT_REVERSE_MODEL",
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
    "GcgSearchConfig",
    "InteractiveOptions",
    "MethodSpec",
    "MissingModelError",
    "ModelSet",
    "PrefixSuffixOptions",
    "ReverseOptions",
    "RoundFinished",
    "RoundStarted",
    "SearchStep",
    "UnknownMethodError",
    "check_cancel",
    "flip",
    "gcg_search",
    "get_method",
    "method_label",
    "method_names",
    "method_order",
    "propose_prefix",
    "register",
    "run_gcg",
    "run_interactive",
    "run_method",
    "run_prefix_suffix",
    "run_reverse_lm",
]
