"""Hostile dataset files for the fuzz tests, and what a load of one must give.

Strategies draw the content of ``.txt``, ``.jsonl``, ``.csv`` and ``.parquet`` files (random
bytes, and structured files with hostile values: encodings, NULs, lone surrogates, markup and
terminal escapes in ids, numbers or lists where strings belong, huge fields, deep nesting).
:func:`load_or_refusal` runs a load and checks the loader's promise (module docstring of
``memprobe_core.snippets.loaders``): either every record is a snippet or a rejection naming its
row, or a ``DataError`` naming the file; nothing else ever escapes.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import event
from hypothesis import strategies as st

from memprobe_core.errors import MemprobeError
from memprobe_core.snippets.loaders import LoadResult
from memprobe_core.snippets.split import SNIPPET_LABELS, DataError

SURROGATE = re.compile("[\ud800-\udfff]")
# A private (underscore) class name in a reason: the reader's words are JSON/column types.
PRIVATE_NAME = re.compile(r"(?<![\w'])_[A-Z]\w*")
# Big enough to cross the csv module's old 128 KiB field limit and many read buffers, small
# enough that 40 examples stay quick.
HUGE = 300_000

# Strings that have broken loaders, renderers or terminals somewhere.
HOSTILE_STRINGS = [
    "<script>alert(1)</script>",
    "\x1b[31mred\x1b[0m",
    "\x1b]0;title\x07",
    "\u202egnp.exe",
    "\ufeffbom at the start",
    "bom \ufeff in the middle",
    "nul \x00 inside",
    "crlf\r\nline",
    "lone cr\rhere",
    "line\u2028separator\u0085next",
    "=cmd|' /C calc'!A0",
    '"quoted, with comma"',
    " ",
    "",
    "\t\n",
    "NA",
    "null",
    "café 東京 🎉",
]

hostile_text = st.one_of(
    st.sampled_from(HOSTILE_STRINGS),
    st.text(max_size=40),
    st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=40),
    st.builds(lambda c, n: c * n, st.sampled_from("x\n,\"'é"), st.sampled_from([HUGE])),
)
# Strings as JSON may carry them: also lone surrogates (JSON's "\ud800" escapes).
json_text = st.one_of(
    hostile_text, st.sampled_from(["\ud800", "a\udfffb", "\udc00\ud800", "\ud83d\ude00"])
)
# What a JSON field may hold where a string is expected.
json_value = st.recursive(
    st.one_of(
        json_text,
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False),
        st.integers(min_value=-(2**70), max_value=2**70),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
COLUMNS = ["text", "id", "label", "member", "domain", "Label", "", " text", "<b>", "\x1b[1m"]
column_name = st.one_of(st.sampled_from(COLUMNS), st.text(max_size=8))
LABEL_VALUES = ["member", "nonmember", "NON-MEMBER", "true", "0", "1", "yes", "maybe", ""]
label_value = st.one_of(st.sampled_from(LABEL_VALUES), st.none(), st.integers(-1, 2))

# Raw JSONL lines a JSON encoder would never write.
RAW_JSONL_LINES = [
    '{"text": "a", "n": ' + "9" * 5000 + "}",  # longer than Python's int conversion limit
    '{"text": "a" "b"}',
    '{"text": "dup", "text": "again"}',
    '{"text": {"k": 1, "k": 2}}',  # a repeated key one level down
    "[" * 100_000 + "]" * 100_000,
    '{"text": ' * 3000 + '"x"' + "}" * 3000,
    '{"text": "\\ud800"}',
    '{"text": NaN}',
    '{"text": "unterminated',
    '\ufeff{"text": "bom in the middle"}',
    "null",
    '"just a string"',
    "{}",
    '{"text": "crlf"}\r',
    "\x00",
]

ENCODINGS = ["utf-8", "utf-8-sig", "utf-16", "latin-1", "cp1252", "utf-7"]


@st.composite
def encoded(draw: st.DrawFn, text: str) -> tuple[bytes, str]:
    """``text`` as bytes in a drawn encoding, and the encoding a loader is told to read."""
    written = draw(st.sampled_from(ENCODINGS))
    try:
        data = text.encode(written, "surrogatepass" if written.startswith("utf-8") else "strict")
    except UnicodeEncodeError:  # latin-1 / cp1252 / utf-16 cannot hold every character
        written = "utf-8"
        data = text.encode("utf-8", "surrogatepass")
    # Usually told the truth; sometimes not (utf-8 told of latin-1 bytes, and the reverse).
    told = draw(st.sampled_from([written, written, "utf-8", "latin-1"]))
    return data, ("utf-8" if told == "utf-8-sig" else told)


def jsonl_line(value: Any, ascii_only: bool) -> str:
    """One JSONL line; a lone surrogate is written as its ``\\ud800`` escape."""
    try:
        return json.dumps(value, ensure_ascii=ascii_only)
    except ValueError:  # an int too long for Python to write as digits
        return json.dumps(str(value), ensure_ascii=ascii_only)


@st.composite
def jsonl_document(draw: st.DrawFn) -> str:
    """A JSONL file's text: objects with hostile values, raw hostile lines, blank lines."""
    ascii_only = draw(st.booleans())
    row_object = st.dictionaries(column_name, json_value, max_size=4)
    with_text = st.fixed_dictionaries(
        {"text": json_text}, optional={"id": json_value, "label": label_value}
    )
    line = st.one_of(
        with_text.map(lambda v: jsonl_line(v, ascii_only)),
        row_object.map(lambda v: jsonl_line(v, ascii_only)),
        json_value.map(lambda v: jsonl_line(v, ascii_only)),
        st.sampled_from(RAW_JSONL_LINES),
        st.just(""),
    )
    lines = draw(st.lists(line, max_size=8))
    ending = draw(st.sampled_from(["\n", "\r\n"]))
    text = ending.join(lines) + draw(st.sampled_from(["", ending]))
    if not ascii_only:  # a raw lone surrogate cannot be written in UTF-8: escape it
        text = SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text


@st.composite
def csv_document(draw: st.DrawFn) -> str:
    """A CSV file's text: a drawn header (maybe naming a column twice, maybe none), rows of
    hostile cells, some with too few or too many fields."""
    header = draw(
        st.one_of(
            st.lists(column_name, min_size=1, max_size=4),
            st.just(["text", "text"]),
            st.just(["text", "id", "label"]),
            st.just(["text"]),
            st.just([]),
        )
    )
    width = st.integers(min_value=0, max_value=len(header) + 1)
    # "" often: a one-column row of one empty field is a record, not a blank line.
    cell = st.one_of(st.just(""), hostile_text, st.sampled_from(LABEL_VALUES))
    rows = draw(
        st.lists(width.flatmap(lambda n: st.lists(cell, min_size=n, max_size=n)), max_size=6)
    )
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator=draw(st.sampled_from(["\n", "\r\n"])))
    if header or draw(st.booleans()):
        writer.writerow(header)
    writer.writerows(rows)
    text = buffer.getvalue()
    if draw(st.booleans()):  # cut anywhere: an unterminated quote, a half row
        text = text[: draw(st.integers(0, len(text)))]
    return SURROGATE.sub("?", text)  # CSV bytes cannot carry a lone surrogate


@st.composite
def txt_document(draw: st.DrawFn) -> str:
    """A text file: blocks of hostile text between blank lines of every kind."""
    blocks = draw(st.lists(hostile_text, max_size=6))
    separators = st.sampled_from(["\n\n", "\r\n\r\n", "\n \t\n", "\n\n\n", "\r\r", "\n"])
    text = "".join(block + draw(separators) for block in blocks)
    return SURROGATE.sub("?", text)


@dataclass(frozen=True)
class Loaded:
    """A load's outcome: its result, or the memprobe error it was refused with (``refusal``:
    its type and message, so two outcomes compare equal when they say the same)."""

    result: LoadResult | None
    refusal: str | None


def load_or_refusal(load: Callable[[], LoadResult], filename: str) -> Loaded:
    """Run ``load``; a refusal must be a ``DataError`` naming ``filename``, a result must keep
    the loader's promise (:func:`check_result`). Any other exception propagates: the test fails
    with it, as a user would have seen it."""
    try:
        result = load()
    except MemprobeError as exc:
        assert isinstance(exc, DataError), f"{type(exc).__name__}: {exc}"
        assert filename in str(exc), f"the refusal does not name {filename!r}: {exc}"
        event("refused")  # --hypothesis-show-statistics: how often each outcome is drawn
        return Loaded(None, f"{type(exc).__name__}: {exc}")
    check_result(result, filename)
    event("loaded, some snippets" if result.snippets else "loaded, every row rejected")
    return Loaded(result, None)


def check_result(result: LoadResult, filename: str) -> None:
    """What every load promises: snippets with non-empty texts free of lone surrogates, unique
    ids, known labels; every row a snippet or a named rejection, each row once."""
    assert result.source == filename
    assert result.snippets or result.rejected, "a file with no records must be refused"
    ids = [s.id for s in result.snippets]
    assert len(ids) == len(set(ids)), ids
    rows: list[int] = []
    for snippet in result.snippets:
        for value in (snippet.text, snippet.id, snippet.domain):
            assert isinstance(value, str) and value.strip(), snippet
            assert not SURROGATE.search(value), snippet
        assert snippet.label in SNIPPET_LABELS
        prefix = f"{filename} row "
        assert snippet.source.startswith(prefix), snippet.source
        rows.append(int(snippet.source.removeprefix(prefix)))
    for rejection in result.rejected:
        assert isinstance(rejection.reason, str) and rejection.reason.strip()
        assert not PRIVATE_NAME.search(rejection.reason), rejection.reason
        rows.append(rejection.row)
    # Rows are numbered from 1 in file order, each exactly once: nothing silently dropped.
    assert sorted(rows) == list(range(1, len(rows) + 1)), rows
    assert result.summary().startswith(filename)
