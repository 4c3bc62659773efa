"""Depth and size limits checked before JSON or TOML from outside is parsed.

Python's ``json`` and ``tomllib`` parse nested arrays and tables by recursion: 2 KB of ``[`` (a
policy value, a dataset line, a server's answer) overflow the interpreter's stack and escape as a
``RecursionError`` instead of an error naming the input. Neither offers a depth limit, so the
depth is found here first, by a linear scan that skips string contents (and TOML comments) and
counts the brackets left; no parser runs on an input deeper than the limit. A well-kept library
offering this for both formats was not found; the scan is three passes of :mod:`re` and one of
:func:`itertools.accumulate`, all in C, so an 8 MiB answer costs well under a second.

TOML also nests by dotted keys (``a.b.c = 1``, ``[a.b.c]``), which ``tomllib`` reads without
recursion but which build a value as deep (its ``repr`` then overflows): :func:`loads_toml` also
measures the parsed value, without recursion. Inputs we wrote ourselves (the store, model
markers) are not bounded here.
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from itertools import accumulate
from typing import Any

from memprobe_core.errors import UsageError

# The deepest nesting memprobe reads from outside. What each input needs is far less: a policy
# 2 (a table holding a per-signal table), a dataset row 1 (an object of fields; a nested field
# value is kept as it is), an OpenAI answer 8 (a chat answer's top log-probs: the answer, choices, a choice,
# logprobs, content, a token, top_logprobs, an alternative).
MAX_DEPTH = 64

# JSON strings (with escapes), unrolled so that a long string is one regex step, not one per char.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
# TOML strings and comments, multi-line ones first: what the scan must not count brackets in.
# A multi-line string may end in up to two quotes of its content (`'''x''''` holds "x'"): a
# scan that stopped at the first three left a quote that opened a "string" over real brackets.
_TOML_SKIPPED = re.compile(
    r'"""(?:[^"\\]|\\.|"(?!""))*"{3,5}'  # multi-line basic (escapes; a lone quote inside)
    r"|'''(?:[^']|'(?!''))*'{3,5}"  # multi-line literal (no escapes)
    r'|"[^"\\\n]*(?:\\.[^"\\\n]*)*"'  # basic
    r"|'[^'\n]*'"  # literal
    r"|#[^\n]*",  # comment
    re.DOTALL,
)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class NestingError(UsageError):
    """An input nested deeper than memprobe reads (the message names it, the limit and what it
    needs)."""


class InputTooLargeError(UsageError):
    """An input larger than memprobe reads (the message names it and the limit)."""


def nesting_depth(text: str | bytes, syntax: str = "json") -> int:
    """How deep ``text``'s brackets nest (``[`` and ``{`` outside strings and comments).

    ``syntax`` is ``"json"`` or ``"toml"``. Malformed text (an unclosed string) is counted as
    far as it reads; a parser refuses it afterwards.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    skipped = _TOML_SKIPPED if syntax == "toml" else _JSON_STRING
    brackets = _NOT_BRACKET.sub("", skipped.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def value_depth(value: Any) -> int:
    """How deep lists and dicts nest in a parsed ``value`` (a scalar 0), without recursion."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


def check_depth(depth: int, source: str, needs: str, limit: int = MAX_DEPTH) -> None:
    """Refuse ``depth`` past ``limit``: ``source`` names the input, ``needs`` what it should hold.

    Raises:
        NestingError: "policy.toml nests 1,000 levels deep; memprobe reads at most 64: a policy
            needs 2".
    """
    if depth > limit:
        raise NestingError(
            f"{source} nests {depth:,} levels deep; memprobe reads at most {limit} levels: {needs}"
        )


def _too_deep(source: str, limit: int, needs: str) -> NestingError:
    return NestingError(
        f"{source} nests deeper than Python's parser reads; memprobe reads at most {limit} "
        f"levels: {needs}"
    )


class NumberTooLongError(UsageError):
    """A number with more digits than Python turns into an int (``sys.get_int_max_str_digits``,
    4,300 by default: a guard against quadratic-time parsing)."""


# A run of digits (TOML allows "_" between them), as the parsers read an integer.
_DIGITS = re.compile(r"[0-9][0-9_]*")


def _is_digit_limit(exc: ValueError) -> bool:
    """Whether ``exc`` is Python's refusal of an integer over the digit limit, which ``json``
    and ``tomllib`` let through as a bare ``ValueError`` naming neither input nor place."""
    return "integer string conversion" in str(exc)


def _number_too_long(text: str, source: str) -> NumberTooLongError:
    """The refusal of ``text``'s first integer over the digit limit, naming its line (and the
    TOML key on that line)."""
    limit = sys.get_int_max_str_digits()
    for found in _DIGITS.finditer(text):
        digits = len(found.group().replace("_", ""))
        if limit and digits > limit:
            start = text.rfind("\n", 0, found.start()) + 1
            before = text[start : found.start()]
            key = before.split("=")[0].strip() + " = " if "=" in before else ""
            line = text.count("\n", 0, found.start()) + 1
            return NumberTooLongError(
                f"{source} line {line}: {key}a number of {digits:,} digits; memprobe reads at "
                f"most {limit:,}: write a smaller number"
            )
    return NumberTooLongError(  # not found by the scan: the parser's own count
        f"{source}: a number longer than memprobe reads (at most {limit:,} digits); write a "
        "smaller number"
    )


def check_size(size: int, source: str, limit: int, what: str) -> None:
    """Refuse ``size`` bytes past ``limit`` (``what`` says what the input should be).

    Raises:
        InputTooLargeError: "policy.toml is 2,000,000 bytes; memprobe reads at most 1,048,576: …".
    """
    if size > limit:
        raise InputTooLargeError(
            f"{source} is {size:,} bytes; memprobe reads at most {limit:,} bytes: {what}"
        )


def loads_json(
    text: str | bytes, source: str, *, needs: str, max_bytes: int, limit: int = MAX_DEPTH
) -> Any:
    """``json.loads(text)`` once ``text`` is within ``max_bytes`` and nests at most ``limit``.

    Raises:
        InputTooLargeError, NestingError: before parsing; NumberTooLongError: an integer of
        more digits than Python reads; ``json.JSONDecodeError`` (and
        ``UnicodeDecodeError`` for bytes) from the parser.
    """
    size = len(text) if isinstance(text, bytes) else len(text.encode("utf-8", "surrogatepass"))
    check_size(size, source, max_bytes, needs)
    check_depth(nesting_depth(text, "json"), source, needs, limit)
    try:
        return json.loads(text)
    except RecursionError:  # the scan missed a level: still the input's fault, not a bug
        raise _too_deep(source, limit, needs) from None
    except ValueError as exc:
        if isinstance(exc, json.JSONDecodeError) or not _is_digit_limit(exc):
            raise
        shown = text if isinstance(text, str) else text.decode("utf-8", "replace")
        raise _number_too_long(shown, source) from None


def loads_toml(
    text: str, source: str, *, needs: str, max_bytes: int, limit: int = MAX_DEPTH
) -> dict[str, Any]:
    """``tomllib.loads(text)`` once ``text`` is within ``max_bytes`` and its brackets nest at
    most ``limit``; the parsed value (dotted keys nest too) is held to ``limit`` as well.

    Raises:
        InputTooLargeError, NestingError; NumberTooLongError: an integer of more digits than
        Python reads; ``tomllib.TOMLDecodeError`` from the parser.
    """
    check_size(len(text.encode("utf-8", "surrogatepass")), source, max_bytes, needs)
    check_depth(nesting_depth(text, "toml"), source, needs, limit)
    try:
        data = tomllib.loads(text)
    except RecursionError:  # the scan missed a level: still the input's fault, not a bug
        raise _too_deep(source, limit, needs) from None
    except ValueError as exc:
        if isinstance(exc, tomllib.TOMLDecodeError) or not _is_digit_limit(exc):
            raise
        raise _number_too_long(text, source) from None
    # The root table is not a level a user writes: `[limits]` with a per-signal table is 2.
    check_depth(value_depth(data) - 1, source, needs, limit)
    return data
