"""The dashboard's widget for an option, generated from its declaration.

Every option the pages offer is a field declared with
:func:`memprobe_core.option_fields.option` and a ``page`` label: the widget's kind, range,
default and tooltip come from that declaration, as the CLI's flag does, so the two never
disagree. Values are returned as the option class's keywords; the class checks them (a refused
value is shown by :func:`ui_common.methods.build_options`, never raised).
"""

from __future__ import annotations

from typing import Any

from memprobe_core.option_fields import OptionField, options_of, range_text, shown_default
from ui_common.page import keep

# The choice of an option whose default is resolved elsewhere (the compat mode's output window):
# not giving it, so the resolver applies.
RESOLVED_CHOICE = "default"

# The largest whole number a browser's number box holds exactly (JavaScript's safe integers);
# a larger bound (the seed's 2^63 - 1) is cut to it.
JS_MAX_INT = 2**53 - 1


def page_options(cls: type, *, advanced: bool) -> list[OptionField]:
    """The options of ``cls`` the pages show (the advanced ones only with ``advanced``)."""
    return [o for o in options_of(cls) if o.info.page and (advanced or not o.info.advanced)]


def widget_key(prefix: str, opt: OptionField) -> str:
    """``{prefix}_{name}``: the flag's name where it has one (``probe_n``, ``audit_gcg_steps``),
    else the field's, so a page's keys read like the CLI."""
    if opt.dest and opt.kind is not bool:
        return f"{prefix}_{opt.dest}"
    return f"{prefix}_{opt.name}"


def tooltip(opt: OptionField) -> str:
    """What the option does, its range and its default."""
    return opt.described(range_text(opt), f"default: {shown_default(opt)}")


def option_widget(
    container: Any, opt: OptionField, key: str, *, label: str | None = None, start: Any = None
) -> Any:
    """A widget for ``opt`` in ``container`` (a column, the sidebar, ``st``) keyed ``key``; its
    value as the option class takes it. ``start``: the first value (default: the option's)."""
    label = label or opt.info.page or opt.name
    value = opt.default if start is None else start
    if opt.choices is not None:
        return _choice(container, opt, key, label, value)
    if opt.kind is bool:
        return container.checkbox(label, key=keep(key, bool(value)), help=tooltip(opt))
    if opt.kind in (int, float):
        return _number(container, opt, key, label, value)
    return container.text_input(label, key=keep(key, str(value or "")), help=tooltip(opt))


def _choice(container: Any, opt: OptionField, key: str, label: str, value: Any) -> Any:
    """A radio of a ``Literal``'s values; an option resolved elsewhere (its ``default_text``
    says by what) offers "default" first, which leaves it out."""
    choices = list(opt.choices or ())
    resolved = opt.info.default_text is not None
    if resolved:
        choices = [RESOLVED_CHOICE, *choices]
        value = RESOLVED_CHOICE
    picked = container.radio(
        label,
        choices,
        horizontal=True,
        key=keep(key, value, choices),
        help=tooltip(opt),
        format_func=lambda c: f"default ({opt.info.default_text})" if c == RESOLVED_CHOICE else c,
    )
    return None if picked == RESOLVED_CHOICE else picked


def _number(container: Any, opt: OptionField, key: str, label: str, value: Any) -> Any:
    """A number box within the option's range; an optional number (``None``: resolved
    elsewhere) starts at 0, which stands for that default."""
    kind = opt.kind
    info = opt.info
    low = None if info.low is None or info.low_open else kind(info.low)
    high = None if info.high is None or info.high_open else kind(info.high)
    if kind is int and high is not None:
        high = min(high, JS_MAX_INT)
    tip = tooltip(opt)
    if opt.optional:
        low, tip = kind(0), f"{tip}; 0: the default"
    start = kind(0) if value is None else kind(value)
    number = container.number_input(
        label,
        min_value=low,
        max_value=high,
        step=kind(1) if kind is int else None,
        key=keep(key, start),
        help=tip,
    )
    if opt.optional and number == 0:
        return None
    return kind(number)
