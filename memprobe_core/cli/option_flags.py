"""The ``memprobe`` flags of the option classes, generated from their fields' metadata.

Each option declared with :func:`memprobe_core.option_fields.option` and a ``flag`` becomes that
flag: its type, choices, placeholder, range and help come from the declaration, and its default
is ``None`` so that the option class fills in its own (one home for every default). A bool option
whose default is ``True`` gets an ``--no-…`` switch that turns it off.
"""

from __future__ import annotations

import argparse
from typing import Any

from memprobe_core.attacks.options import BUILT_IN_CLASSES, AttackOptions
from memprobe_core.config import ScoringConfig
from memprobe_core.documents.continuation import ContinuationOptions
from memprobe_core.documents.map_near_verbatim import MapBoundOptions
from memprobe_core.documents.nv_recall import NvRecallOptions
from memprobe_core.documents.windows import MapOptions
from memprobe_core.membership.options import MeasureOptions
from memprobe_core.ner.audit import NerAuditConfig
from memprobe_core.option_fields import (
    OptionField,
    option_named,
    options_of,
    range_text,
    shown_default,
    value_problem,
)
from memprobe_core.runs.unit import SplitSpec

# Every option class whose fields the command line sets, by where AttackOptions keeps it
# ("" the top level; the split is the run's, not AttackOptions'). Docs and error messages read
# this list too.
FLAG_CLASSES: dict[str, type] = {
    "": AttackOptions,
    **BUILT_IN_CLASSES,
    "scoring": ScoringConfig,
    "measure": MeasureOptions,
    "split": SplitSpec,
}
# The option classes of commands of their own, whose flags are generated and checked the same way.
COMMAND_CLASSES: dict[str, tuple[type, ...]] = {
    "ner": (NerAuditConfig,),
    "nv-recall": (NvRecallOptions,),
    "document": (MapOptions, MapBoundOptions, ContinuationOptions),
}


def flagged_classes() -> tuple[type, ...]:
    """Every option class with flags: the runs' (:data:`FLAG_CLASSES`) and the other commands'."""
    return (*FLAG_CLASSES.values(), *(c for classes in COMMAND_CLASSES.values() for c in classes))


def dest_of(opt: OptionField) -> str:
    """The argparse attribute of ``opt``'s flag (``--gcg-steps`` → ``gcg_steps``)."""
    assert opt.dest is not None
    return opt.dest


def switches_off(opt: OptionField) -> bool:
    """Whether the flag is a switch that turns a default-on option off (``--no-pz``)."""
    return opt.kind is bool and opt.default is True


def switch_text(opt: OptionField) -> str:
    """What the ``--no-…`` switch of a default-on option does."""
    return opt.info.switch_help or f"turn off: {opt.info.help}"


def help_text(opt: OptionField, about: str = "") -> str:
    """The flag's help: what it does, whose option it is (``about``), its range and its default
    (``%`` escaped for argparse)."""
    if switches_off(opt):
        return switch_text(opt).replace("%", "%%")
    text = opt.described(about, range_text(opt), f"default: {shown_default(opt)}")
    return text.replace("%", "%%")


def add_flag(group: Any, opt: OptionField, about: str = "") -> None:
    """Add ``opt``'s flag to a parser or argument group (``about``: whose option, in its help)."""
    assert opt.info.flag is not None, f"{opt.name} has no flag"
    if opt.kind is bool:
        group.add_argument(opt.info.flag, action="store_true", help=help_text(opt, about))
        return
    kind = opt.kind if opt.kind in (int, float) else str
    group.add_argument(
        opt.info.flag,
        type=kind,
        choices=opt.choices,
        metavar=opt.info.metavar,
        help=help_text(opt, about),
    )


def add_flags(group: Any, cls: type, *, skip: tuple[str, ...] = (), about: str = "") -> None:
    """Add the flags of every option of ``cls`` that has one (but those in ``skip``)."""
    for opt in options_of(cls):
        if opt.info.flag and opt.name not in skip:
            add_flag(group, opt, about)


def add_flag_of(group: Any, cls: type, name: str) -> None:
    """Add the flag of option ``name`` of ``cls``."""
    add_flag(group, option_named(cls, name))


def read_flags(args: argparse.Namespace, cls: type) -> dict[str, Any]:
    """The options of ``cls`` given on the command line, as keywords for ``cls`` (a flag not
    given, or not offered by this command, is left out: the class supplies its default)."""
    given: dict[str, Any] = {}
    for opt in options_of(cls):
        if not opt.info.flag:
            continue
        value = getattr(args, dest_of(opt), None)
        if opt.kind is bool:
            if value:
                given[opt.name] = not opt.default
        elif value is not None:
            given[opt.name] = value
    return given


def flag_problem(args: argparse.Namespace) -> str | None:
    """The first option flag whose value its declaration refuses, as ``--flag value: what to
    give`` (checked right after parsing, before a store opens or a model loads)."""
    for cls in flagged_classes():
        for opt in options_of(cls):
            if not opt.info.flag or opt.kind is bool:
                continue
            value = getattr(args, dest_of(opt), None)
            problem = None if value is None else value_problem(opt, value)
            if problem:
                return f"{opt.info.flag} {value}: {problem}"
    return None


def library_flags() -> dict[str, str]:
    """{the name an option's messages use: its flag}, for showing library errors with flags (a
    name two classes give different flags, or one gives none, is left out: it could mean
    either; ``seed`` is ``--seed`` in every class)."""
    flags: dict[str, set[str | None]] = {}
    for cls in flagged_classes():
        for opt in options_of(cls):
            shown = opt.info.flag if opt.info.flag and not switches_off(opt) else None
            flags.setdefault(opt.label(), set()).add(shown)
    return {
        name: flag
        for name, found in flags.items()
        if len(found) == 1 and (flag := next(iter(found))) is not None
    }
