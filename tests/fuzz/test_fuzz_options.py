"""Fuzzing every option, library and command line, with values drawn from its own declaration.

The options and their flags come from the option classes' metadata (``options_of``,
``flagged_classes``, the registered methods' sections) and the flags' commands from the built
parser: a new option, bound or flag is fuzzed without touching this file.

Properties:

- library: building the option class with one drawn value either keeps a value its declaration
  allows (type, range, choices) or raises ``OptionError`` naming that option; never another
  exception.
- command line: ``memprobe COMMAND --flag VALUE`` either reaches the command (and the option
  class accepts the value the parser let through) or exits 2 with one line naming the flag, no
  traceback, no store created and the command never started.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import math
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from memprobe_core.attacks import registry
from memprobe_core.attacks.divergence import DivergenceOptions
from memprobe_core.attacks.options import InteractiveOptions
from memprobe_core.cli.option_flags import dest_of, flagged_classes, read_flags
from memprobe_core.documents.canary import DocumentCanarySettings
from memprobe_core.documents.continuation import ContinuationOptions
from memprobe_core.errors import OptionError
from memprobe_core.membership.options import MeasureOptions
from memprobe_core.option_fields import OptionField, option_named, options_of
from tests.fuzz.stand_in import REACHED, commands_that_do_nothing, subcommands

# The module, not the function ``memprobe_core.cli.main`` that the package exports by that name.
cli_main = importlib.import_module("memprobe_core.cli.main")

# Every option class: those with flags, the registered methods' sections (ACR, divergence: set
# through --method-option) and the document canary's settings (the Document page's).
OPTION_CLASSES: tuple[type, ...] = tuple(
    dict.fromkeys(
        (*flagged_classes(), *registry.option_sections().values(), DocumentCanarySettings)
    )
)
OPTIONS: list[OptionField] = [opt for cls in OPTION_CLASSES for opt in options_of(cls)]
FLAGGED: list[OptionField] = [
    opt for cls in flagged_classes() for opt in options_of(cls) if opt.info.flag
]


def _id(opt: OptionField) -> str:
    return f"{opt.owner.__name__}.{opt.name}"


# --- values, from an option's declaration ----------------------------------------------------------
HOSTILE_NUMBERS: tuple[Any, ...] = (
    0,
    -1,
    2**63,
    -(2**63),
    10**30,
    10**400,  # past a float's range
    math.nan,
    math.inf,
    -math.inf,
    0.5,
    1.5,
    -0.0,
    5e-324,
)
HOSTILE_OTHERS: tuple[Any, ...] = (None, True, False, "", " ", "1", "abc", "\udcff", b"1", [], {})


def _edges(opt: OptionField) -> list[Any]:
    """The declared bounds, and the numbers just inside and outside them."""
    found: list[Any] = []
    for bound in (opt.info.low, opt.info.high):
        if bound is None:
            continue
        found += [bound, bound - 1, bound + 1, math.nextafter(bound, -math.inf)]
        found += [math.nextafter(bound, math.inf), float(bound)]
        if float(bound).is_integer():
            found.append(int(bound))
    return found


def _near_choices(opt: OptionField) -> list[Any]:
    """A Literal's values and look-alikes outside them (other case, padded, truncated)."""
    found: list[Any] = []
    for choice in opt.choices or ():
        found += [choice, str(choice).upper(), f" {choice}", str(choice)[:-1]]
    return found


def library_values(opt: OptionField) -> st.SearchStrategy[Any]:
    """Any Python value a caller (the dashboard, a stored config) might give ``opt``."""
    listed = [*_edges(opt), *_near_choices(opt), *HOSTILE_NUMBERS, *HOSTILE_OTHERS]
    return st.one_of(
        st.sampled_from(listed),
        st.integers(),
        st.floats(),
        st.text(max_size=12),
        st.sampled_from([opt.default]),
    )


def _number_text(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def flag_values(opt: OptionField) -> st.SearchStrategy[str]:
    """Any text a user might type after ``opt``'s flag, non-UTF-8 bytes (surrogate-escaped, as
    Python hands them over) and other scripts' digits included."""
    numbers = [*_edges(opt), *HOSTILE_NUMBERS]
    listed = [_number_text(v) for v in numbers if not isinstance(v, bool)]
    listed += [str(c) for c in _near_choices(opt)]
    listed += ["", " ", "1.0", "1e3", "1e400", "-inf", "nan", "0x10", "1_0", "٣", "\udcff\udcfe"]
    listed.append(b"\xff\xfe1".decode("utf-8", "surrogateescape"))
    return st.one_of(
        st.sampled_from(listed),
        st.integers().map(str),
        st.floats().map(repr),
        st.text(max_size=12),
    )


def allowed(opt: OptionField, value: Any) -> bool:
    """Whether ``value`` is of ``opt``'s type and inside its declared range or choices (the
    oracle: written from the declaration, not by calling the library's own check)."""
    if value is None:
        return opt.optional
    if opt.choices is not None:
        return any(value == choice and type(value) is type(choice) for choice in opt.choices)
    if opt.kind is bool:
        return type(value) is bool
    if opt.kind is int:
        return type(value) is int and _inside(opt, value)
    if opt.kind is float:
        finite = type(value) is float and math.isfinite(value)
        holdable = type(value) is int and abs(value) <= sys.float_info.max
        return (finite or holdable) and _inside(opt, value)
    if opt.kind is str:
        return isinstance(value, str) and (bool(value.strip()) or not opt.info.nonblank)
    return True  # a field of another kind (a tuple of texts) has no declared range


def _names(text: str, opt: OptionField) -> bool:
    """Whether ``text`` names ``opt``: by its message name, field name or flag."""
    return any(name and name in text for name in (opt.label(), opt.name, opt.info.flag))


def _inside(opt: OptionField, value: float) -> bool:
    low, high, info = opt.info.low, opt.info.high, opt.info
    above_low = low is None or value > low or (value == low and not info.low_open)
    below_high = high is None or value < high or (value == high and not info.high_open)
    return above_low and below_high


# --- the library -------------------------------------------------------------------------------------
def check_library(opt: OptionField, value: Any) -> None:
    """Building ``opt``'s class with ``value`` keeps an allowed value or refuses it by name."""
    try:
        built = opt.owner(**{opt.name: value})
    except OptionError as exc:
        # It names this option (a section's prefix, e.g. "acr.", may come before it); or, refusing
        # another option this value contradicts (MapOptions' stride above suffix_tokens), it names
        # this one in its text.
        assert exc.option.endswith(opt.label()) or _names(exc.problem, opt), str(exc)
        return
    kept = getattr(built, opt.name)
    assert allowed(opt, kept), f"{opt.name}={value!r} kept as {kept!r}"


@pytest.mark.parametrize("opt", OPTIONS, ids=_id)
@given(data=st.data())
def test_each_option_keeps_an_allowed_value_or_refuses_it_by_name(opt, data):
    check_library(opt, data.draw(library_values(opt), label=opt.name))


OPTION_AND_VALUE = st.sampled_from(OPTIONS).flatmap(
    lambda opt: st.tuples(st.just(opt), library_values(opt))
)


@given(case=OPTION_AND_VALUE)
# Found by fuzzing: an int past a float's range in a float option raised OverflowError (from
# math.isfinite) instead of OptionError.
@example(case=(option_named(MeasureOptions, "min_k_percent"), 10**400))
# Found by fuzzing: a word family that is not texts (a config's `"words": 0`) raised TypeError.
@example(case=(option_named(DivergenceOptions, "words"), 0))
def test_any_option_keeps_an_allowed_value_or_refuses_it_by_name(case):
    check_library(*case)


# --- the command line ----------------------------------------------------------------------------------


def _flags_of(parser: argparse.ArgumentParser) -> set[str]:
    return {flag for action in parser._actions for flag in action.option_strings}


def _least_argv(parser: argparse.ArgumentParser) -> list[str]:
    """Placeholders for a command's required arguments (a run id, a file name, ``infer``'s
    ``--heldout``): "1" for a value, this file for a path (paths are checked before the command
    is reached: memprobe_core.user_paths), and the command itself never runs in these tests."""
    argv: list[str] = []
    for action in parser._actions:
        placeholder = str(next(iter(action.choices))) if action.choices else "1"
        if action.type is Path:
            placeholder = __file__
        if not action.option_strings and action.nargs is None:
            argv.append(placeholder)
        elif action.option_strings and action.required:
            argv += [action.option_strings[0], placeholder]
    return argv


PARSERS = subcommands(cli_main.build_parser())
COMMANDS_OF: dict[str, list[str]] = {
    opt.info.flag: [name for name, p in PARSERS.items() if opt.info.flag in _flags_of(p)]
    for opt in FLAGGED
    if opt.info.flag
}


def test_every_flag_is_offered_by_some_command():
    assert all(COMMANDS_OF.values()), [flag for flag, found in COMMANDS_OF.items() if not found]


def run_cli(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, Any]:
    """``(exit code, stderr, the parsed args when the command was reached)``; stderr is a
    StringIO, as lenient as the real one (backslashreplace) with lone surrogates."""
    err = io.StringIO()
    REACHED.clear()
    with commands_that_do_nothing(monkeypatch), contextlib.redirect_stderr(err):
        code = cli_main.main(argv)
    return code, err.getvalue(), REACHED[-1] if REACHED else None


def _class_accepts(opt: OptionField, given: dict[str, Any]) -> None:
    """The option class takes what the flag let through, or refuses it for contradicting
    another option's default (named in the refusal): a refusal the flag check missed would come
    only after the command opened its store."""
    try:
        opt.owner(**given)
    except OptionError as exc:
        others = [o for o in options_of(opt.owner) if o.name != opt.name]
        refused_another = not exc.option.endswith(opt.label())
        assert refused_another or any(_names(exc.problem, o) for o in others), f"late: {exc}"


def check_cli(
    opt: OptionField, command: str, given_as: list[str], tmp_path: Path, patch: pytest.MonkeyPatch
) -> None:
    """``memprobe COMMAND GIVEN_AS`` reaches the command with an allowed value, or exits 2 with
    one line naming the flag, before a store exists."""
    flag = opt.info.flag
    store = tmp_path / "runs.sqlite"
    argv = ["--store", str(store), command, *given_as, *_least_argv(PARSERS[command])]
    code, err, args = run_cli(argv, patch)
    if args is not None:
        parsed = getattr(args, dest_of(opt))
        assert allowed(opt, parsed), f"{given_as} let through as {parsed!r}"
        _class_accepts(opt, read_flags(args, opt.owner))
        return
    assert code == 2, (code, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err and len(lines) == 1, err
    assert flag in lines[0], lines[0]
    assert not store.exists()


def _flag_cases(opt: OptionField) -> st.SearchStrategy[tuple[OptionField, str, list[str]]]:
    """``(opt, a command offering its flag, the flag and a value as typed)``; "--flag=VALUE"
    too, as a value starting with "-" is otherwise taken for a flag."""
    flag = opt.info.flag
    return st.tuples(
        st.just(opt),
        st.sampled_from(COMMANDS_OF[flag]),
        flag_values(opt).flatmap(lambda v: st.sampled_from([[flag, v], [f"{flag}={v}"]])),
    )


VALUED_FLAGS = [opt for opt in FLAGGED if opt.kind is not bool]  # a switch takes no value


# A parser per call and many flags: a quarter of the profile's examples per flag (10 in "short").
@settings(max_examples=max(1, settings.default.max_examples // 4))
@pytest.mark.parametrize("opt", VALUED_FLAGS, ids=_id)
@given(data=st.data())
def test_each_flag_value_reaches_the_command_or_is_refused_in_one_line(
    opt, data, tmp_path_factory, monkeypatch
):
    case = data.draw(_flag_cases(opt), label="case")
    check_cli(*case, tmp_path_factory.mktemp("cli"), monkeypatch)


@given(case=st.sampled_from(VALUED_FLAGS).flatmap(_flag_cases))
# Found by fuzzing: argparse's refusals came after the whole usage (30 lines for probe).
@example(case=(option_named(InteractiveOptions, "n_candidates"), "probe", ["--n", "0.9"]))
# Found by fuzzing: a blank --instruction passed the flag check and was refused only after the
# command had created the store.
@example(
    case=(option_named(ContinuationOptions, "instruction"), "document", ["--instruction", " "])
)
def test_any_flag_value_reaches_the_command_or_is_refused_in_one_line(
    case, tmp_path_factory, monkeypatch
):
    check_cli(*case, tmp_path_factory.mktemp("cli"), monkeypatch)
