"""One home for every option: a dataclass field with its metadata, read by every front end.

An option class (``InteractiveOptions``, ``GCGOptions``, ``MeasureOptions``, ``ScoringConfig`` …)
declares each user-facing field with :func:`option`: its default, a one-line help, its range, the
CLI flag that sets it and the pages' label. From that one declaration come

- the check of a value (:func:`check_options`, called by each class's ``__post_init__``), with a
  refusal that names the option and what to give;
- the ``memprobe`` flags and their help (:mod:`memprobe_core.cli.option_flags`);
- the dashboard's widgets (:mod:`ui_common.option_widgets`);
- the tables of ``docs/options.md`` (:mod:`memprobe_core.cli.options_doc`; a test fails when the
  file is stale).

So a default, a bound or a help text is written once, next to the field it belongs to.
"""

from __future__ import annotations

import dataclasses
import math
import types
from dataclasses import MISSING, Field, dataclass
from functools import cache
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from memprobe_core.errors import OptionError

_KEY = "memprobe_option"


@dataclass(frozen=True)
class OptionInfo:
    """What memprobe knows about one option besides its type and default.

    Attributes:
        help: what it does, one or two plain sentences (CLI help, page tooltip, docs).
        low / high: its range (``None``: unbounded on that side); whole numbers for an int.
        low_open / high_open: the bound itself is not allowed (``0 < k <= 100``).
        example: a good value, named in a refusal (``e.g. 10``).
        name: the name messages and older flat configs use, when not the field's own
            (GCG's ``steps`` is ``gcg_steps``); a section's prefix is added otherwise.
        flag: the ``memprobe`` flag that sets it (``--rounds``); a bool option whose default
            is ``True`` is turned off by its flag (``--no-pz``). ``None``: reachable only
            through ``--method-option SECTION.FIELD=VALUE`` (method options) or not at all.
        metavar: the flag's value placeholder (``N``, ``T``).
        switch_help: the help of the ``--no-…`` switch of a default-on bool option.
        default_text: how help and docs describe a default the value alone does not explain
            (``None`` resolved from the compat mode, ...).
        page: the dashboard's label for it (``None``: the pages leave it at its default).
        advanced: shown on the pages only where they offer the advanced options (Probe).
        needs_labels: only meaningful for a labelled dataset (the pages hide it otherwise).
        commands: the ``memprobe`` commands that offer its flag (empty: every command with
            this option group).
        nonblank: a text option must hold more than whitespace (an empty instruction).
    """

    help: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    example: str | None = None
    name: str | None = None
    flag: str | None = None
    metavar: str | None = None
    switch_help: str | None = None
    default_text: str | None = None
    page: str | None = None
    advanced: bool = False
    needs_labels: bool = False
    commands: tuple[str, ...] = ()
    nonblank: bool = False


def option(default: Any = MISSING, *, default_factory: Any = MISSING, **info: Any) -> Any:
    """A dataclass field carrying :class:`OptionInfo` (keywords: its attributes)."""
    metadata = {_KEY: OptionInfo(**info)}
    if default_factory is not MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def info_of(field: Field[Any]) -> OptionInfo | None:
    """The field's :class:`OptionInfo` (``None``: an internal field, not an option)."""
    found = field.metadata.get(_KEY)
    return found if isinstance(found, OptionInfo) else None


@dataclass(frozen=True)
class OptionField:
    """One declared option of a class, with what its type says.

    Attributes:
        owner: the option class.
        field: the dataclass field.
        info: its metadata.
        kind: ``bool``, ``int``, ``float`` or ``str`` (a ``Literal``'s values are ``str``).
        choices: a ``Literal``'s allowed values (``None``: any value of ``kind``).
        optional: ``None`` is allowed (``int | None``: the default of another option).
    """

    owner: type
    field: Field[Any]
    info: OptionInfo
    kind: type
    choices: tuple[Any, ...] | None
    optional: bool

    @property
    def name(self) -> str:
        return self.field.name

    @property
    def default(self) -> Any:
        """The default value (a factory's product for a mutable default)."""
        if self.field.default is not MISSING:
            return self.field.default
        if self.field.default_factory is not MISSING:
            return self.field.default_factory()
        return None

    @property
    def dest(self) -> str | None:
        """The flag as an identifier (``--gcg-steps``: ``gcg_steps``): argparse's attribute and
        the pages' widget key; ``None`` without a flag."""
        return self.info.flag.lstrip("-").replace("-", "_") if self.info.flag else None

    def described(self, *notes: str) -> str:
        """The help with the non-empty ``notes`` in parentheses (CLI help, tooltip, docs)."""
        shown = [note for note in notes if note]
        return self.info.help + (f" ({'; '.join(shown)})" if shown else "")

    def label(self, prefix: str = "") -> str:
        """The name in messages: the declared ``name``, else ``prefix`` + the field's."""
        return self.info.name or f"{prefix}{self.name}"


@cache
def options_of(cls: type) -> tuple[OptionField, ...]:
    """The declared options of option class ``cls``, in field order."""
    hints = get_type_hints(cls)
    found = []
    for field in dataclasses.fields(cls):
        info = info_of(field)
        if info is None:
            continue
        kind, choices, optional = _describe(hints[field.name])
        found.append(OptionField(cls, field, info, kind, choices, optional))
    return tuple(found)


def option_named(cls: type, name: str) -> OptionField:
    """The declared option ``name`` of ``cls`` (KeyError when it has none)."""
    for opt in options_of(cls):
        if opt.name == name:
            return opt
    raise KeyError(name)


def _describe(hint: Any) -> tuple[type, tuple[Any, ...] | None, bool]:
    """``(kind, Literal choices, optional)`` of a field's type hint."""
    kinds = list(get_args(hint)) if get_origin(hint) in (Union, types.UnionType) else [hint]
    optional = type(None) in kinds
    kinds = [k for k in kinds if k is not type(None)]
    choices: tuple[Any, ...] | None = None
    if len(kinds) == 1 and get_origin(kinds[0]) is Literal:
        choices = get_args(kinds[0])
        kinds = [type(choices[0])]
    kind = kinds[0] if len(kinds) == 1 and isinstance(kinds[0], type) else object
    return kind, choices, optional


def check_options(instance: Any, prefix: str = "") -> None:
    """Refuse the first declared option of ``instance`` whose value its metadata does not allow.

    ``prefix`` is put before field names in messages (``acr.``), unless a field declares its own
    ``name``.

    Raises:
        OptionError: ``"rounds=101: give a whole number from 0 to 100"`` and the like.
    """
    cls: type = type(instance)
    for opt in options_of(cls):
        value = getattr(instance, opt.name)
        problem = value_problem(opt, value)
        if problem:
            raise OptionError(opt.label(prefix), value, problem)


def check_size(name: str, value: int | None, low: int, high: int) -> None:
    """Refuse a size outside ``[low, high]`` with the options' wording (``None`` passes); for the
    sizes that are not fields of an option class (the CLI's ``--length``, a report's seed).

    Raises:
        OptionError: ``"name=value: give a whole number from low to high"``.
    """
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise OptionError(
            name, value, f"give a whole number from {_number(low)} to {_number(high)}"
        )


def value_problem(opt: OptionField, value: Any) -> str | None:
    """What to give instead of ``value`` for ``opt`` (``None``: the value is allowed)."""
    if value is None and opt.optional:
        return None
    if opt.choices is not None:
        return None if value in opt.choices else "use one of " + ", ".join(map(str, opt.choices))
    if opt.kind is bool:
        return None if isinstance(value, bool) else "give true or false"
    if opt.kind is int:
        whole = isinstance(value, int) and not isinstance(value, bool)
        return None if whole and _in_range(opt.info, value) else _give(opt, "a whole number")
    if opt.kind is float:
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if number and _finite(value) and _in_range(opt.info, value):
            return None
        # "inf: give a number of 0 or more" would read as if inf were refused for its size.
        return _give(opt, "a finite number" if number and not _finite(value) else "a number")
    if opt.kind is str and not isinstance(value, str):
        return "give a text"
    # Declared, not checked in the class alone: the CLI checks flags from the declarations
    # before a store opens (found by fuzzing: `--instruction " "` created the store first).
    if opt.kind is str and opt.info.nonblank and not value.strip():
        return "give a non-blank text"
    return None


def _finite(value: float) -> bool:
    """Whether ``value`` is a finite float, or an int a float can hold."""
    try:
        return math.isfinite(value)
    except OverflowError:
        # Found by fuzzing: an int past a float's range (10**400, from a stored config or a
        # caller) made math.isfinite raise instead of the option being refused.
        return False


def _in_range(info: OptionInfo, value: float) -> bool:
    if info.low is not None and (value < info.low or (info.low_open and value == info.low)):
        return False
    return not (
        info.high is not None and (value > info.high or (info.high_open and value == info.high))
    )


def _give(opt: OptionField, what: str) -> str:
    """``give a whole number from 1 to 1,024, e.g. 24`` (the range in words)."""
    text = f"give {what}"
    shown = range_text(opt)
    if shown:
        text += f" {shown}"
    if opt.info.example:
        text += f", e.g. {opt.info.example}"
    return text


def _number(value: float) -> str:
    return f"{value:,}" if float(value).is_integer() and abs(value) >= 1000 else f"{value:g}"


def range_text(opt: OptionField) -> str:
    """The range in words: ``from 0 to 100``, ``in (0, 1]``, ``of 0 or more``, ``above 0``."""
    low, high, info = opt.info.low, opt.info.high, opt.info
    if low is None and high is None:
        return ""
    if opt.kind is int and not info.low_open and not info.high_open:
        if high is None:
            return f"of {_number(low or 0)} or more"
        if low is None:
            return f"of at most {_number(high)}"
        return f"from {_number(low)} to {_number(high)}"
    if high is None:
        return f"above {_number(low or 0)}" if info.low_open else f"of {_number(low or 0)} or more"
    if low is None:
        return f"below {_number(high)}" if info.high_open else f"of at most {_number(high)}"
    left = "(" if info.low_open else "["
    right = ")" if info.high_open else "]"
    return f"in {left}{_number(low)}, {_number(high)}{right}"


def shown_default(opt: OptionField) -> str:
    """The default as help texts and docs state it."""
    if opt.info.default_text:
        return opt.info.default_text
    value = opt.default
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (tuple, list)):
        return ", ".join(map(str, value))
    if value == "":
        return "none"
    return str(value)
