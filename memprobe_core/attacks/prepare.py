"""Run each method's ``prepare`` hook over a run's options (:class:`~memprobe_core.attacks.
context.MethodContext`): the audit and the unit runner call :func:`prepare_options`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from memprobe_core.attacks import registry
from memprobe_core.attacks.context import MethodContext
from memprobe_core.attacks.options import BUILT_IN_SECTIONS, AttackOptions


def prepare_options(
    options: AttackOptions, methods: Iterable[str], context: MethodContext
) -> AttackOptions:
    """``options`` with the section of each of ``methods`` that has a ``prepare`` hook replaced
    by what the hook returns for ``context`` (the same object when no section changed).

    Raises:
        UnknownMethodError: a method that is not registered.
        Whatever a hook raises (``UsageError`` for what the user must fix).
    """
    for name in dict.fromkeys(methods):
        spec = registry.get_method(name)
        if spec.prepare is None or spec.options_key is None:
            continue
        section = options.for_method(name)
        prepared = spec.prepare(section, context)
        if prepared != section:
            options = with_section(options, spec.options_key, prepared)
    return options


def with_section(options: AttackOptions, key: str, section: Any) -> AttackOptions:
    """A copy of ``options`` whose options section ``key`` is ``section``."""
    if key in BUILT_IN_SECTIONS:
        return replace(options, **{key: section})
    return replace(options, method_options={**options.method_options, key: section})
